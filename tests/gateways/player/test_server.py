"""The TCP server with a fake backend: real sockets, the Python client, hostile clients and a header fuzz."""

from __future__ import annotations

import itertools
import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pluto.gateways.player.devices import DeviceKey, DeviceSpec
from pluto.gateways.player.protocol import BANNER, HEADER, STX, DataMode, Header, MsgType, encode_message
from pluto.gateways.player.server import ConfigRefused, PlayerServer, RateLimitedLog
from pluto.gateways.player.session import Sample
from pluto.gateways.player.structs import (
    AuthRequest,
    CommandStruct,
    ConfigStruct,
    PositionCommand,
    PositionData,
    PositionGeometry,
    SetOdometry,
)
from pluto.player.client import PlayerClient, PlayerClientError, RequestRefused
from tests.helpers import wait_until

POSITION = (4, 0)


class FakeBackend:
    """Every device is there but the laser; SET_ODOM and GET_GEOM succeed, anything else is refused."""

    def __init__(self) -> None:
        self.commands: list[tuple[int, DeviceKey, CommandStruct]] = []
        self.releases: list[DeviceKey] = []
        self.configured: list[ConfigStruct] = []
        self.gate = threading.Event()
        self.gate.set()

    def available(self, device: DeviceSpec) -> bool:
        return device.backend != "sick"

    def configure(self, device: DeviceKey, request: ConfigStruct) -> bytes:
        assert self.gate.wait(10)
        self.configured.append(request)
        if isinstance(request, SetOdometry):
            return b""
        if isinstance(request, PositionGeometry):
            return PositionGeometry(1, 0, 0, 0, 500, 400).pack()
        raise ConfigRefused(f"{type(request).__name__} is not supported here")

    def command(self, client: int, device: DeviceKey, command: CommandStruct) -> None:
        self.commands.append((client, device, command))

    def released(self, device: DeviceKey) -> None:
        self.releases.append(device)


class Ticker:
    """Ticks a server every 10 ms (wall clock) with position data that changes at each tick."""

    def __init__(self, server: PlayerServer) -> None:
        self.server = server
        self.stop = threading.Event()
        self.extra: dict[DeviceKey, Sample] = {}
        self.thread = threading.Thread(target=self.run, daemon=True, name="ticker")

    def run(self) -> None:
        start = time.monotonic()
        n = 0
        while not self.stop.wait(0.01):
            n += 1
            now = time.monotonic() - start
            samples = {POSITION: Sample(now, PositionData(xpos=n).pack()), **self.extra}
            self.server.tick(now, samples)


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
def server(backend: FakeBackend) -> Iterator[PlayerServer]:
    with PlayerServer(backend, port=0, max_frequency=100.0) as srv:
        ticker = Ticker(srv)
        ticker.thread.start()
        try:
            yield srv
        finally:
            ticker.stop.set()
            ticker.thread.join(5)
            backend.gate.set()


def raw_connection(server: PlayerServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    banner = b""
    while len(banner) < 32:
        banner += sock.recv(32 - len(banner))
    assert banner == BANNER
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    """Read until the server closes the connection (True) or 5 s pass (False)."""
    sock.settimeout(5)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def test_banner_devices_and_rounds(server: PlayerServer) -> None:
    with PlayerClient(port=server.port) as client:
        assert client.banner == "Player v.1.5"
        assert client.device_list() == [(4, 0), (30, 0), (6, 0), (5, 0)]
        assert client.subscribe("position", access="a") == "a"
        with pytest.raises(RequestRefused, match="granted 'e'"):
            client.subscribe("laser")  # its module is not running
        updated = client.read()
        first = client.position.count
        client.read()
        assert updated == {POSITION} and client.position.count == first + 1
        geometry = client.geometry()
        assert geometry.size == pytest.approx((0.5, 0.4))
        client.set_odometry(1.0, 2.0, 0.5)
        with pytest.raises(RequestRefused, match="NACK"):
            client.reset_odometry()
        with pytest.raises(RequestRefused, match="ERR"):
            client.geometry("sonar")  # not opened
        client.set_speed(0.25, -0.5)
        wait_until(lambda: server.backend.commands)  # type: ignore[attr-defined]
    stats = server.statistics()
    assert stats.nacks == 1 and stats.errors == 1 and stats.protocol_errors == 0 and stats.failures == 0


def read_reply(sock: socket.socket) -> tuple[Header, bytes]:
    """The next reply (RESP_ACK, RESP_NACK or RESP_ERR) the server sends, skipping rounds of data."""
    sock.settimeout(5)
    buffer = b""
    while True:
        while len(buffer) < 32:
            buffer += sock.recv(65536)
        header = Header.unpack(buffer[:32])
        while len(buffer) < 32 + header.size:
            buffer += sock.recv(65536)
        payload, buffer = buffer[32 : 32 + header.size], buffer[32 + header.size :]
        if header.type in (MsgType.RESP_ACK, MsgType.RESP_NACK, MsgType.RESP_ERR):
            return header, payload


def test_the_device_list_request_of_libplayerc_is_answered_whatever_its_stack_held(server: PlayerServer) -> None:
    # libplayerc 1.5 sends the whole 388-byte device-list struct with only the subtype set: the count (and the
    # rest) is stack garbage, over 64 two times in three. Fifteen connections, fifteen ACKs.
    expected = struct.pack(">HH", 1, 4) + b"".join(struct.pack(">HHH", c, 0, server.port) for c in (4, 30, 6, 5))
    for garbage in range(15):
        count = (0x7FFC1234 + 0x3FF1 * garbage) & 0xFFFF
        request = encode_message(MsgType.REQ, 1, 0, struct.pack(">HH", 1, count) + bytes([garbage]) * 384)
        with raw_connection(server) as sock:
            sock.sendall(request)
            header, payload = read_reply(sock)
        assert (header.type, header.device, header.size) == (MsgType.RESP_ACK, 1, 388), count
        assert payload == expected.ljust(388, b"\0")
    assert server.statistics().nacks == 0


def test_datamodes_and_frequency(backend: FakeBackend) -> None:
    with PlayerServer(backend, port=0, max_frequency=100.0) as server, PlayerClient(port=server.port) as client:
        client.subscribe("position")
        client.set_frequency(50)
        # one second of the server's time in ticks of 10 ms: a round every other tick (a 10 Hz server: every tenth)
        for k in range(1, 101):
            now = 0.01 * k
            server.tick(now, {POSITION: Sample(now, PositionData(xpos=k).pack())})
        times: list[float] = []
        while not times or times[-1] < 0.95:
            client.read()
            times.append(client.round_time)
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert len(times) >= 45 and max(gaps) < 0.035, times  # 50 Hz of the server's time
        client.set_datamode(DataMode.PULL_ALL)
        client.request_data()
        server.tick(1.01, {POSITION: Sample(1.01, PositionData(xpos=101).pack())})
        assert client.read() == {POSITION}
        client.request_data()
        server.tick(1.02, {POSITION: Sample(1.01, PositionData(xpos=101).pack())})
        assert client.read() == {POSITION}  # PULL_ALL: the data again, new or not
        with pytest.raises(RequestRefused):
            client.set_datamode(7)


def test_a_clock_jump_restarts_the_rounds_of_every_client(backend: FakeBackend) -> None:
    with PlayerServer(backend, port=0) as server, PlayerClient(port=server.port, timeout=2.0) as client:
        assert client.subscribe("position") == "r"
        data = {POSITION: Sample(5.0, PositionData(xpos=1).pack())}
        server.tick(30.0, data)
        assert client.read() == {POSITION}
        server.tick(30.05, data)  # 10 Hz: the next round is due at 30.1
        # The clock went back to 30.06 (a new run). The new run's first tick gets a round at once, and its data is
        # new even though its stamp equals the one sent before the jump.
        server.restart(30.06)
        server.tick(30.06, data)
        assert client.read() == {POSITION}
        assert client.round_time == pytest.approx(30.06) and client.position.count == 2


def test_garbage_is_skipped_and_the_connection_goes_on(server: PlayerServer, backend: FakeBackend) -> None:
    devlist = encode_message(MsgType.REQ, 1, 0, struct.pack(">H", 1))
    with PlayerClient(port=server.port) as good:
        good.subscribe("position")
        good.read()
        # as the 1.5 server does: skip to the next stx ("Xx"), drop a header whose size is over 8160 bytes
        garbled = [
            b"\x12\x34" + bytes(30),  # wrong stx
            HEADER.pack(STX, 3, 1, 0, 0, 0, 0, 0, 0, 8161) + b"junk",  # oversized, then garbage
            b"X" + bytes(7),  # a false start
        ]
        with raw_connection(server) as sock:
            for frame in garbled:
                sock.sendall(frame + devlist)
                reply = next_reply(sock)
                assert (reply.type, reply.device, reply.size) == (MsgType.RESP_ACK, 1, 388)
                recv_exactly(sock, 388)
        wait_until(lambda: server.statistics().garbage_bytes == 32 + 4 + 8)
        assert server.statistics().oversized == 1
        # a stream that ends inside a message is a protocol error (counted); the connection closes
        for frame in (devlist[:20], HEADER.pack(STX, 2, 4, 0, 0, 0, 0, 0, 0, 26) + bytes(5)):
            with raw_connection(server) as sock:
                sock.sendall(frame)
                sock.shutdown(socket.SHUT_WR)
                assert closed_by_server(sock)
        wait_until(lambda: server.statistics().protocol_errors == 2)
        # answered with the reply the protocol defines, and the connection stays up
        with raw_connection(server) as sock:
            sock.sendall(encode_message(MsgType.REQ, 99, 0, b"\x01"))  # unknown device
            sock.sendall(encode_message(MsgType.REQ, 1, 0, struct.pack(">H", 77)))  # unknown subtype
            sock.sendall(encode_message(MsgType.REQ, 1, 0, struct.pack(">HBB", 3, 0, 4)))  # wrong size
            replies = [next_reply(sock) for _ in range(3)]
            assert [(h.type, h.device, h.size) for h in replies] == [(7, 99, 0), (6, 1, 0), (6, 1, 0)]
        before = good.rounds
        good.read()
        good.read()
        assert good.rounds == before + 2
    stats = server.statistics()
    assert stats.failures == 0 and stats.nacks == 2 and stats.errors == 1
    assert backend.commands == []


def next_reply(sock: socket.socket) -> Header:
    """The next message header that is not a SYNCH (the server ends every round of data with one, to every client,
    and a round may come between a request and its reply)."""
    while True:
        header = Header.unpack(recv_exactly(sock, 32))
        if header.type != MsgType.SYNCH:
            return header
        recv_exactly(sock, header.size)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def test_a_slow_request_does_not_hold_up_other_clients(server: PlayerServer, backend: FakeBackend) -> None:
    backend.gate.clear()
    with PlayerClient(port=server.port) as slow, PlayerClient(port=server.port) as other:
        slow.subscribe("position", access="a")
        done: list[Any] = []
        worker = threading.Thread(target=lambda: done.append(slow.set_odometry(1.0, 0.0, 0.0)), daemon=True)
        worker.start()
        wait_until(lambda: server.statistics().requests >= 2)
        other.subscribe("position")
        assert other.device_list()
        other.read()
        assert not done
        backend.gate.set()
        worker.join(5)
        assert done == [None] and backend.configured == [SetOdometry(9, 1000, 0, 0)]


def test_the_last_writer_leaving_releases_position(server: PlayerServer, backend: FakeBackend) -> None:
    first = PlayerClient(port=server.port)
    second = PlayerClient(port=server.port)
    with first, second:
        first.subscribe("position", access="a")
        second.subscribe("position", access="w")
        reader = PlayerClient(port=server.port)
        with reader:
            reader.subscribe("position")
            second.set_speed(0.1, 0.0)
            wait_until(lambda: backend.commands)
            assert backend.commands[0][1:] == (POSITION, PositionCommand(xspeed=100))
        first.close()
        wait_until(lambda: server.clients == 1)
        assert backend.releases == []
        second.unsubscribe("position")
        wait_until(lambda: backend.releases == [POSITION])


def test_a_client_that_does_not_read_is_dropped(backend: FakeBackend) -> None:
    with PlayerServer(backend, port=0, max_frequency=100.0, write_limit=64 * 1024) as server:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        with sock:
            sock.sendall(encode_message(MsgType.REQ, 1, 0, struct.pack(">HHHc", 3, 4, 0, b"r")))
            sock.sendall(encode_message(MsgType.REQ, 1, 0, struct.pack(">HB", 5, int(DataMode.PUSH_ALL))))
            wait_until(lambda: server.statistics().requests == 2)
            big = {POSITION: Sample(0.0, bytes(8000))}
            t = 0.0
            while server.statistics().slow_clients == 0:
                for _ in range(100):
                    t += 0.01
                    server.tick(t, big)
                time.sleep(0.01)
                assert t < 20_000 * 0.01, "never dropped"
            wait_until(lambda: server.clients == 0)
        with PlayerClient(port=server.port) as client:
            assert client.device_list()


class FakeTime:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def auth_request(key: bytes) -> bytes:
    return encode_message(MsgType.REQ, 1, 0, AuthRequest(key).pack())


def test_nothing_but_the_banner_before_auth(backend: FakeBackend) -> None:
    with PlayerServer(backend, port=0, key=b"s3cret", max_frequency=100.0) as server:
        ticker = Ticker(server)
        ticker.thread.start()
        try:
            with raw_connection(server) as waiting, PlayerClient(port=server.port) as client:
                client.authenticate("s3cret")
                client.subscribe("position")
                for _ in range(5):
                    client.read()  # rounds went out to every client: none to the one that has not authenticated
                waiting.setblocking(False)
                with pytest.raises(BlockingIOError):
                    waiting.recv(1)
                # anything but the right AUTH closes the connection without a reply (no NACK, as the 1.5 server)
                waiting.setblocking(True)
                waiting.sendall(encode_message(MsgType.REQ, 1, 0, struct.pack(">H", 1)))
                assert read_until_closed(waiting) == b""
        finally:
            ticker.stop.set()
            ticker.thread.join(5)
    assert server.statistics().requests == 2  # the AUTH and the DEV request of the authenticated client


def read_until_closed(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything the server sends until it closes the connection; TimeoutError if it does not within ``timeout`` s."""
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_a_wrong_key_closes_and_blocks_the_address_for_a_growing_time(
    backend: FakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeTime()
    caplog.set_level(logging.INFO, logger="pluto.player")
    with PlayerServer(
        backend, port=0, key=b"s3cret", auth_backoff=1.0, auth_backoff_max=4.0, monotonic=clock
    ) as server:
        with raw_connection(server) as guess, raw_connection(server) as other:
            guess.sendall(auth_request(b"guess"))
            assert read_until_closed(guess) == b""  # no reply: closed
            wait_until(lambda: server.statistics().auth_failures == 1, timeout=30)
            # during the block, even the right key from this address is not read as an attempt
            other.sendall(auth_request(b"s3cret"))
            assert read_until_closed(other) == b""
        for _ in range(50):  # new connections are refused: the banner, then the close
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
                assert read_until_closed(sock) == BANNER
        assert server.statistics().refused == 50
        clock.now += 1.0  # the first block is over
        with PlayerClient(port=server.port) as client:
            client.authenticate("s3cret")  # a success clears the address's record
            assert client.device_list()
        for block in (1.0, 2.0, 4.0, 4.0):  # doubled at each failure, up to auth_backoff_max
            with raw_connection(server) as guess:
                guess.sendall(auth_request(b"guess"))
                assert read_until_closed(guess) == b""
            wait_until(lambda: server.auth_blocked("127.0.0.1"), timeout=30)
            clock.now += block - 0.01
            assert server.auth_blocked("127.0.0.1")
            clock.now += 0.01
            assert not server.auth_blocked("127.0.0.1")
        stats = server.statistics()
    assert (stats.auth_failures, stats.refused, stats.failures) == (5, 50, 0)
    lines = [r.getMessage() for r in caplog.records if "from 127.0.0.1" in r.getMessage()]
    # one line per address and kind of event per interval, with a count: never one per refused connection
    print("\n".join(lines))
    assert len(lines) <= 6, lines


def test_idle_sockets_never_lock_a_client_out(backend: FakeBackend) -> None:
    with PlayerServer(backend, port=0, max_frequency=100.0, max_clients=64, max_per_address=32) as server:
        ticker = Ticker(server)
        ticker.thread.start()
        idle: list[socket.socket] = []
        try:
            for _ in range(300):  # they connect and send nothing
                idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=30))
            wait_until(lambda: server.statistics().accepted == 300, timeout=60, message="the 300 sockets are in")
            held = server.clients
            # the newcomer pushes an idle one out and is served its data (not kept waiting for the idle ones)
            with PlayerClient(port=server.port, timeout=30) as client:
                client.subscribe("position")
                client.read()
                while client.position.count == 0:
                    client.read()
            stats = server.statistics()
            figures = (
                f"{held} idle connections held; {stats.evicted} evicted, {stats.refused} refused, "
                f"{stats.accepted} accepted"
            )
            assert held == 32 and stats.evicted == 300 - 32 + 1 and stats.refused == 0, figures
        finally:
            ticker.stop.set()
            ticker.thread.join(5)
            for sock in idle:
                sock.close()


def test_an_idle_connection_is_closed_and_a_reading_one_is_not(backend: FakeBackend) -> None:
    with PlayerServer(backend, port=0, max_frequency=100.0, idle_timeout=0.3) as server:
        ticker = Ticker(server)
        ticker.thread.start()
        try:
            with PlayerClient(port=server.port, timeout=30) as reader:
                reader.subscribe("position")  # then it only reads
                with raw_connection(server) as silent, raw_connection(server) as talked_once:
                    talked_once.sendall(encode_message(MsgType.REQ, 1, 0, struct.pack(">H", 1)))
                    assert len(recv_exactly(talked_once, 32 + 388)) == 420
                    read_until_closed(silent, timeout=30)  # rounds of only a SYNCH, then the close
                    read_until_closed(talked_once, timeout=30)
                assert server.statistics().idle_closed == 2
                before = reader.position.count
                reader.read()
                reader.read()
                assert reader.position.count > before  # quiet for longer than idle_timeout, and still served
        finally:
            ticker.stop.set()
            ticker.thread.join(5)
    assert server.statistics().idle_closed == 2


def test_over_the_caps_with_every_connection_busy_a_newcomer_is_refused(backend: FakeBackend) -> None:
    with (
        PlayerServer(backend, port=0, max_clients=3, max_per_address=2) as server,
        PlayerClient(port=server.port) as first,
        PlayerClient(port=server.port) as second,
    ):
        first.subscribe("position")
        second.subscribe("sonar")
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as third:
            assert read_until_closed(third) == BANNER  # the banner, then the close: the log says why
        assert first.device_list() and second.device_list()  # the busy ones go on
        stats = server.statistics()
    assert (stats.refused, stats.evicted, stats.accepted) == (1, 0, 2)


def test_the_port_must_be_free(backend: FakeBackend) -> None:
    with PlayerServer(backend, port=0) as first, pytest.raises(OSError):
        PlayerServer(backend, port=first.port).start()


@pytest.fixture(scope="module")
def fuzz_target() -> Iterator[tuple[PlayerServer, PlayerClient]]:
    """A server and a well-behaved client on it, shared by the fuzz examples."""
    backend = FakeBackend()
    with PlayerServer(backend, port=0, max_frequency=100.0) as server:
        ticker = Ticker(server)
        ticker.thread.start()
        try:
            with PlayerClient(port=server.port) as client:
                client.subscribe("position")
                client.set_frequency(100)
                yield server, client
        finally:
            ticker.stop.set()
            ticker.thread.join(5)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stx=st.sampled_from([STX, STX, 0x7858, 0]),
    mtype=st.integers(0, 0xFFFF),
    device=st.sampled_from([1, 1, 4, 5, 6, 30, 0, 256, 0xFFFF]),
    index=st.integers(0, 3),
    junk=st.tuples(*(st.integers(0, 2**32 - 1) for _ in range(5))),
    size=st.one_of(st.integers(0, 80), st.integers(8190, 8200), st.integers(0, 2**32 - 1)),
    payload=st.binary(max_size=120),
    then_close=st.booleans(),
)
def test_header_fuzz_never_hurts_the_server(
    fuzz_target: tuple[PlayerServer, PlayerClient],
    stx: int,
    mtype: int,
    device: int,
    index: int,
    junk: tuple[int, ...],
    size: int,
    payload: bytes,
    then_close: bool,
) -> None:
    server, client = fuzz_target
    header = HEADER.pack(stx, mtype, device, index, *junk, size)
    with raw_connection(server) as sock:
        try:
            sock.sendall(header + payload)
            if then_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may have closed it already: that is a right answer too
    before = client.rounds
    client.read()  # the other client still gets its rounds
    assert client.rounds == before + 1
    assert server.statistics().failures == 0


def test_fuzzed_server_still_serves(fuzz_target: tuple[PlayerServer, PlayerClient]) -> None:
    server, _client = fuzz_target
    with PlayerClient(port=server.port) as fresh:
        assert fresh.device_list() == [(4, 0), (30, 0), (6, 0), (5, 0)]
    with pytest.raises(PlayerClientError):
        PlayerClient(port=1).connect()


def test_log_lines_about_one_address_and_kind_are_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    note = RateLimitedLog(logging.getLogger("pluto.test.player"), 10.0, lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="pluto.test.player"):
        for i in range(5):
            note("10.0.0.1", "wrong AUTH key", f"failure {i + 1}")
        note("10.0.0.2", "wrong AUTH key", "failure 1")  # another address has its own lines
        assert [r.getMessage() for r in caplog.records] == [
            "player: wrong AUTH key from 10.0.0.1: failure 1",
            "player: wrong AUTH key from 10.0.0.2: failure 1",
        ]
        note.flush()  # the interval is not over: the count waits
        assert len(caplog.records) == 2
        now[0] = 10.0
        note.flush()
        assert caplog.records[-1].getMessage() == "player: wrong AUTH key from 10.0.0.1: 4 more in the last 10 s"
        now[0] = 25.0
        note("10.0.0.1", "wrong AUTH key", "failure 6")
        assert caplog.records[-1].getMessage() == "player: wrong AUTH key from 10.0.0.1: failure 6"
    assert note.lines == 4
