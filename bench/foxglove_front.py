"""The cost of the Foxglove gateway's front: messages relayed to viewers through it, against the SDK's server reached
directly.

Run by hand: ``python bench/foxglove_front.py [--seconds 5] [--clients 20] [--rate 400] [--size 3000]``. It starts the
SDK's WebSocket server (``foxglove-sdk``) with one JSON channel and, in front of it, the gateway's
:class:`~pluto.gateways.foxglove.front.SubprotocolFront`; N viewers connect (raw sockets read by one thread: the
cost of reading stays small and off the front's thread) and subscribe, and a thread logs ``rate`` messages a second
of ``size`` bytes on the channel for ``seconds``, after a warm-up run that is not shown (the first run costs more).
Rows: the SDK reached directly (``foxglove.sdk.v1``), and through the front with each name. Columns: messages a
second delivered to each viewer (mean, slowest), the CPU time of the front's thread as a share of one core, that
time per message relayed (µs), and the CPU of the whole process (server, front, viewers and the logging thread).
Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import selectors
import socket
import statistics
import struct
import threading
import time
from dataclasses import dataclass

import foxglove

from pluto.gateways.foxglove.front import SubprotocolFront


@dataclass
class Row:
    path: str
    clients: int
    mean_hz: float
    min_hz: float
    front_cpu_percent: float
    us_per_message: float
    process_cpu_percent: float


def _frame(text: str) -> bytes:
    """A client's text frame (masked, as RFC 6455 requires of clients)."""
    payload = text.encode()
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    length = len(payload)
    header = bytes([0x81, 0x80 | length]) if length < 126 else bytes([0x81, 0x80 | 126]) + struct.pack("!H", length)
    return header + mask + masked


def _viewer(port: int, subprotocol: str, channel_id: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {subprotocol}\r\n\r\n"
        ).encode()
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    if not head.startswith("HTTP/1.1 101") or f"sec-websocket-protocol: {subprotocol}" not in head.lower():
        raise RuntimeError(f"handshake refused: {head}")
    sock.sendall(_frame(json.dumps({"op": "subscribe", "subscriptions": [{"id": 1, "channelId": channel_id}]})))
    sock.setblocking(False)
    return sock


class Reader:
    """Reads every viewer's socket on one thread and counts the message frames (opcode 1 of the protocol's binary
    messages) that arrive within the window."""

    def __init__(self, socks: list[socket.socket], frame_size: int) -> None:
        self.selector = selectors.DefaultSelector()
        self.bytes = [0] * len(socks)
        self.counting = False
        self.frame_size = frame_size
        for index, sock in enumerate(socks):
            self.selector.register(sock, selectors.EVENT_READ, index)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="bench-viewers")
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for key, _ in self.selector.select(0.1):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data = sock.recv(1 << 20)
                except BlockingIOError:
                    continue
                if self.counting:
                    self.bytes[key.data] += len(data)

    def messages(self) -> list[float]:
        return [b / self.frame_size for b in self.bytes]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.selector.close()


async def _thread_time() -> float:
    return time.thread_time()


def measure(path: str, clients: int, rate: float, size: int, seconds: float) -> Row:
    context = foxglove.Context()
    server = foxglove.start_server(port=0, context=context)
    channel = foxglove.Channel("/bench", message_encoding="json", context=context)
    front = SubprotocolFront(("127.0.0.1", server.port))
    front.start()
    payload = json.dumps({"data": "x" * max(size - 12, 0)}).encode()
    # a frame: the WebSocket header (4 bytes for 126..65535), opcode, subscription id, log time, payload
    frame_size = 4 + 1 + 4 + 8 + len(payload)
    socks: list[socket.socket] = []
    try:
        port, subprotocol = (server.port, "foxglove.sdk.v1") if path == "direct" else (front.address[1], path)
        socks = [_viewer(port, subprotocol, channel.id()) for _ in range(clients)]
        reader = Reader(socks, frame_size)
        end = time.monotonic() + 10.0
        while not channel.has_sinks() and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(0.5)  # every subscription in place
        runner = front._runner
        cpu0 = runner.run(_thread_time())
        process0 = time.process_time()
        reader.counting = True
        start = time.monotonic()
        sent = 0
        while (elapsed := time.monotonic() - start) < seconds:
            due = int(elapsed * rate) + 1
            while sent < due:
                channel.log(payload)
                sent += 1
            time.sleep(max(0.0, (sent / rate) - (time.monotonic() - start)))
        time.sleep(0.2)  # the last messages on their way
        reader.counting = False
        cpu = runner.run(_thread_time()) - cpu0
        process = time.process_time() - process0
        reader.close()
        rates = [m / seconds for m in reader.messages()]
        relayed = sum(reader.messages()) if path != "direct" else 0.0
        name = "SDK directly" if path == "direct" else f"front, {path}"
        per_message = cpu / relayed * 1e6 if relayed else 0.0
        total = process / (time.monotonic() - start) * 100.0
        return Row(name, clients, statistics.fmean(rates), min(rates), cpu / seconds * 100.0, per_message, total)
    finally:
        for sock in socks:
            sock.close()
        front.close()
        server.stop()
        channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measurement window (default 5)")
    parser.add_argument("--clients", type=int, default=20, help="viewers (default 20)")
    parser.add_argument("--rate", type=float, default=400.0, help="messages a second logged (default 400)")
    parser.add_argument("--size", type=int, default=3000, help="bytes of a message (default 3000: a scan)")
    args = parser.parse_args()
    measure("foxglove.sdk.v1", args.clients, args.rate, args.size, 2.0)  # a warm-up: the first run costs more
    rows = [
        measure(path, args.clients, args.rate, args.size, args.seconds)
        for path in ("direct", "foxglove.sdk.v1", "foxglove.websocket.v1")
    ]
    print(f"{args.clients} viewers, {args.rate:g} messages/s of {args.size} bytes, {args.seconds:g} s")
    print(
        "| path | viewers | msgs/s per viewer (mean) | slowest viewer | front's thread CPU % | µs per message "
        "| process CPU % |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.path} | {r.clients} | {r.mean_hz:.1f} | {r.min_hz:.1f} | {r.front_cpu_percent:.1f} | "
            f"{r.us_per_message:.1f} | {r.process_cpu_percent:.1f} |"
        )


if __name__ == "__main__":
    main()
