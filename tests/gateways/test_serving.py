"""ServerRunner: TCP (a handler coroutine, a Protocol) and UDP, on a thread of its own and in the caller's loop;
closing from any thread, closing twice, clients closed, failures counted and logged, and waits that stay bounded."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable
from typing import cast

import pytest

from pluto.gateways.serving import DatagramListener, Listener, ProtocolListener, ServerRunner, StreamListener


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Echo what comes; ``boom`` makes the handler raise."""
    while data := await reader.read(1024):
        if data.startswith(b"boom"):
            raise ValueError("boom from a handler")
        writer.write(data)
        await writer.drain()


class EchoProtocol(asyncio.Protocol):
    """Echo what comes; ``boom`` makes data_received raise."""

    transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if data.startswith(b"boom"):
            raise ValueError("boom from data_received")
        self.transport.write(data)


class EchoDatagrams(asyncio.DatagramProtocol):
    """Send each datagram back; ``boom`` makes datagram_received raise."""

    transport: asyncio.DatagramTransport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if data == b"boom":
            raise ValueError("boom from datagram_received")
        self.transport.sendto(data, addr)


TCP_LISTENERS: dict[str, Callable[[], Listener]] = {
    "streams": lambda: StreamListener(echo, "127.0.0.1", 0),
    "protocol": lambda: ProtocolListener(EchoProtocol, "127.0.0.1", 0),
}


def connect(address: tuple[str, int]) -> socket.socket:
    return socket.create_connection(address, timeout=5.0)


def ask(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    return sock.recv(1024)


def closed_by_server(sock: socket.socket) -> bool:
    """The server closed the connection (the next read ends, or the connection was reset)."""
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True


def thread_alive(name: str) -> bool:
    return any(thread.name == name for thread in threading.enumerate())


@pytest.mark.parametrize("kind", sorted(TCP_LISTENERS))
def test_start_returns_listening_and_the_address_is_known(kind: str) -> None:
    runner = ServerRunner(TCP_LISTENERS[kind](), name=f"test-{kind}")
    with pytest.raises(RuntimeError, match="not listening"):
        _ = runner.address
    with runner:
        host, port = runner.address
        assert host == "127.0.0.1" and port > 0 and runner.running
        with connect((host, port)) as client:
            assert ask(client, b"hello") == b"hello"
    assert not runner.running and runner.address == (host, port)
    with pytest.raises(ConnectionRefusedError):
        connect((host, port)).close()


@pytest.mark.parametrize("kind", sorted(TCP_LISTENERS))
def test_close_from_another_thread_closes_every_client_and_can_be_repeated(kind: str) -> None:
    runner = ServerRunner(TCP_LISTENERS[kind](), name=f"test-close-{kind}")
    runner.start()
    clients = [connect(runner.address) for _ in range(3)]
    try:
        for i, client in enumerate(clients):
            assert ask(client, f"client {i}".encode()) == f"client {i}".encode()
        assert runner.listener.connections == 3
        closer = threading.Thread(target=runner.close)
        closer.start()
        closer.join(10.0)
        assert not closer.is_alive()
        assert not thread_alive(runner.name)  # close() returned after the server's thread ended
        assert all(closed_by_server(client) for client in clients)
        assert runner.listener.connections == 0
        runner.close()  # again: nothing to do
        runner.close()
    finally:
        for client in clients:
            client.close()
    with pytest.raises(RuntimeError, match="serves once"):
        runner.start()
    assert runner.errors == 0


@pytest.mark.parametrize("kind", sorted(TCP_LISTENERS))
def test_an_exception_in_a_handler_is_counted_logged_and_ends_only_its_connection(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    with ServerRunner(TCP_LISTENERS[kind](), name=f"test-fail-{kind}") as runner:
        with connect(runner.address) as bystander, connect(runner.address) as failing:
            assert ask(bystander, b"before") == b"before"
            with caplog.at_level(logging.ERROR, logger="pluto.gateways"):
                failing.sendall(b"boom")
                assert closed_by_server(failing)
            assert runner.errors == 1  # counted before the connection was closed
            assert ask(bystander, b"after") == b"after"
        with connect(runner.address) as newcomer:
            assert ask(newcomer, b"still serving") == b"still serving"
    assert "boom from" in caplog.text and f"test-fail-{kind}" in caplog.text


def test_udp_a_failing_datagram_is_counted_and_the_endpoint_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    listener = DatagramListener(EchoDatagrams, "127.0.0.1", 0, receive_buffer=1 << 20, read_batch=8)
    with ServerRunner(listener, name="test-udp") as runner, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5.0)
        address = runner.address
        assert address[1] > 0 and listener.granted_receive_buffer > 0
        with caplog.at_level(logging.ERROR, logger="pluto.gateways"):
            sock.sendto(b"boom", address)
            sock.sendto(b"ping", address)
            assert sock.recv(1024) == b"ping"
        assert runner.errors == 1 and "boom from datagram_received" in caplog.text
        for i in range(50):  # more than one batch, sent at once: every one is answered, in order
            sock.sendto(str(i).encode(), address)
        assert [sock.recv(1024) for _ in range(50)] == [str(i).encode() for i in range(50)]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as again:
        again.bind(address)  # the socket was closed when close() returned


def test_start_fails_when_the_port_is_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        runner = ServerRunner(StreamListener(echo, "127.0.0.1", taken.getsockname()[1]), name="test-taken")
        with pytest.raises(OSError):
            runner.start()
        assert not thread_alive("test-taken") and not runner.running
        runner.close()


def test_work_handed_to_the_loop_runs_there_and_failures_are_counted(caplog: pytest.LogCaptureFixture) -> None:
    ran = threading.Event()
    threads: list[str] = []

    def note() -> None:
        threads.append(threading.current_thread().name)
        ran.set()

    def fail() -> None:
        raise RuntimeError("a failing callback")

    async def failing_task() -> None:
        raise RuntimeError("a failing task")

    async def answer() -> int:
        return 42

    spawned = threading.Event()

    def on_open(runner: ServerRunner) -> None:
        runner.spawn(failing_task(), name="failing")
        spawned.set()

    with caplog.at_level(logging.ERROR, logger="pluto.gateways"):
        with ServerRunner(StreamListener(echo), name="test-work", on_open=on_open) as runner:
            assert spawned.is_set()
            assert runner.call_soon(fail)
            assert runner.call_soon(note)
            assert ran.wait(5.0) and threads == ["test-work"]
            assert runner.run(answer()) == 42  # behind the callbacks handed over before it
            assert runner.errors == 2
        assert not runner.call_soon(note)
        with pytest.raises(RuntimeError, match="not running"):
            runner.run(answer())
    assert "a failing callback" in caplog.text and "a failing task" in caplog.text


def test_close_from_the_servers_own_loop_does_not_wait_for_itself() -> None:
    asked = threading.Event()
    runner: ServerRunner

    async def quit_on_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        runner.close()  # on the server's loop: it only asks
        asked.set()
        await asyncio.sleep(3600)  # cancelled by the shutdown

    runner = ServerRunner(StreamListener(quit_on_request), name="test-self-close")
    runner.start()
    with connect(runner.address) as client:
        client.sendall(b"q")
        assert asked.wait(5.0)
        assert closed_by_server(client)
    runner.close()
    assert not thread_alive("test-self-close") and runner.errors == 0


def test_close_waits_a_bounded_time_for_a_handler_that_ignores_cancellation() -> None:
    entered = threading.Event()
    cancelled = threading.Event()
    abandoned = threading.Event()

    async def stubborn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            try:
                await asyncio.sleep(3600)  # ignores the shutdown's cancellation; the end of the loop cancels it again
            except asyncio.CancelledError:
                abandoned.set()
                raise

    runner = ServerRunner(StreamListener(stubborn), name="test-stubborn", close_timeout=0.3)
    runner.start()
    with connect(runner.address) as client:
        assert entered.wait(5.0)
        runner.close()  # returns: the handler's stubbornness does not hold it (the test's time limit would)
        assert closed_by_server(client)
    # in order: asked to stop, it ignored it, and the end of the loop cancelled it again
    assert cancelled.is_set() and abandoned.is_set()
    assert not thread_alive("test-stubborn")


def test_in_the_callers_loop_with_async_with_and_serve() -> None:
    async def main() -> None:
        async with ServerRunner(StreamListener(echo), name="test-async") as runner:
            reader, writer = await asyncio.open_connection(*runner.address)
            writer.write(b"hello")
            assert await reader.read(1024) == b"hello"
        assert await asyncio.wait_for(reader.read(1024), 5.0) == b""  # closed with the block
        writer.close()

        listening = asyncio.Event()
        served = ServerRunner(
            DatagramListener(EchoDatagrams), name="test-serve", on_open=lambda _runner: listening.set()
        )
        task = asyncio.create_task(served.serve())
        await asyncio.wait_for(listening.wait(), 5.0)
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.create_datagram_endpoint(Collector, remote_addr=served.address)
        transport.sendto(b"ping")
        assert await asyncio.wait_for(protocol.received.get(), 5.0) == b"ping"
        await asyncio.to_thread(served.close)  # from another thread: returns once it has shut down
        await asyncio.wait_for(task, 5.0)
        transport.close()

        cancelled = ServerRunner(StreamListener(echo), name="test-cancel")
        task = asyncio.create_task(cancelled.serve())
        while not cancelled.running:
            await asyncio.sleep(0.001)
        address = cancelled.address
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cancelled.closing and not cancelled.running
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection(*address)

    asyncio.run(main())


class Collector(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.received: asyncio.Queue[bytes] = asyncio.Queue()

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.received.put_nowait(data)
