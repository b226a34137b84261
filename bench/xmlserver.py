"""The XML gateway under load: messages/s and latency for 1, 10 and 50 subscribers, against the bus itself.

Run by hand: ``python bench/xmlserver.py [--seconds 3]``. This process runs the bus, a publisher and the XML server;
the subscribers run in a second process (so their parsing does not compete with the server for the interpreter):
either N plain sockets subscribed through the server (at its largest rate, so nothing is paced away), or N
subscriptions on the bus directly, the floor the gateway adds to. Payloads: odometry (about 150 bytes of XML) written
at 200 Hz and at 2 kHz (where the paths saturate), and a 361-beam laser scan (about 10 kB) at 50 Hz. Latency is
from the write (the message's stamp, wall clock) to the line read by the subscriber. Prints a table; asserts
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.helpers

from tests.helpers import free_tcp_port

from pluto import msgs
from pluto.bus import Bus
from pluto.gateways.xmlserver.server import ServerSettings, XmlServer

PAYLOADS: dict[str, tuple[str, float]] = {
    "odometry": ("Base/Drive/State", 200.0),
    "odo 2 kHz": ("Base/Drive/State", 2000.0),
    "laser 361": ("Sick/Scan_mm", 50.0),
}
"""Rows of the table: label -> (interface, write rate Hz). The 2 kHz odometry shows where each path saturates."""
SUBSCRIBERS = (1, 10, 50)
UNPACED = 10_000.0
"""Rate the socket subscribers ask for, Hz: the server's largest (``max_rate_hz``), above any write rate, so every
value is sent (if it can be)."""
WARMUP = 0.5


def make(name: str, now: float, i: int) -> msgs.Message:
    if name == "Sick/Scan_mm":
        ranges = [4.0 + 0.001 * ((i + k) % 997) for k in range(361)]
        angles = [-1.5707963267948966 + k * 0.008726646259971648 for k in range(361)]
        return msgs.LaserScan(stamp=now, arrival=now, ranges=ranges, angles=angles, count=361)
    return msgs.Odometry(stamp=now, x=0.001 * i, y=0.5, theta=0.25, v=0.3, omega=0.01)


class Publisher:
    """Writes ``name`` at ``rate`` Hz on a thread, stamped with the wall clock; counts the writes."""

    def __init__(self, bus: Bus, name: str, rate: float) -> None:
        self.writer = bus.create_publisher(name)
        self.name = name
        self.period = 1.0 / rate
        self.count = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        next_time = time.monotonic()
        while not self.stop.is_set():
            self.count += 1
            self.writer.write(make(self.name, time.time(), self.count))
            next_time += self.period
            self.stop.wait(max(0.0, next_time - time.monotonic()))


# -- the subscribers' process -----------------------------------------------------------------------------------


def xml_subscribers(address: tuple[str, int], name: str, n: int, seconds: float) -> tuple[int, list[float]]:
    """N socket clients subscribed through the server; (updates received in the window, latencies s)."""
    stamp = re.compile(rb'<update name="[^"]+" seq="\d+"><\w+ stamp="([^"]+)"')
    socks, buffers = [], {}
    for _ in range(n):
        sock = socket.create_connection(address)
        sock.sendall(f'<subscribe name="{name}" rate="{UNPACED}"/>\n'.encode())
        socks.append(sock)
        buffers[sock] = b""
    selector = selectors.DefaultSelector()
    for sock in socks:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    start = time.monotonic() + WARMUP
    end = start + seconds
    count, latencies = 0, []
    while (now := time.monotonic()) < end:
        for key, _ in selector.select(timeout=0.1):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            *lines, buffers[sock] = (buffers[sock] + sock.recv(1 << 20)).split(b"\n")
            arrival = time.time()
            if now < start:
                continue
            for line in lines:
                if match := stamp.match(line):
                    count += 1
                    latencies.append(arrival - float(match.group(1)))
    for sock in socks:
        sock.close()
    return count, latencies


def bus_subscribers(name: str, n: int, seconds: float) -> tuple[int, list[float]]:
    """N subscriptions on the bus directly; (values received in the window, latencies s)."""
    lock = threading.Lock()
    counting = threading.Event()
    results: list[float] = []

    def receive(value: msgs.Message) -> None:
        arrival = time.time()
        if counting.is_set():
            with lock:
                results.append(arrival - value.stamp)  # type: ignore[attr-defined]

    with Bus() as bus:
        for _ in range(n):
            bus.create_subscription(name, receive, depth=1024, current=False)
        time.sleep(WARMUP)
        counting.set()
        time.sleep(seconds)
        counting.clear()
        with lock:
            return len(results), list(results)


def subscriber_main(args: argparse.Namespace) -> None:
    if args.path == "xmlserver":
        count, latencies = xml_subscribers(("127.0.0.1", args.port), args.name, args.n, args.seconds)
    else:
        count, latencies = bus_subscribers(args.name, args.n, args.seconds)
    latencies.sort()
    print(json.dumps({"count": count, "latencies": latencies[:: max(1, len(latencies) // 20000)]}))


# -- the server's process -----------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(q * len(values)))]


def trial(path: str, name: str, rate: float, n: int, seconds: float, port: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--subscriber", path, "--name", name, "--n", str(n)]
    cmd += ["--seconds", str(seconds), "--port", str(port)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    latencies = sorted(result["latencies"])
    return {
        "rate": result["count"] / seconds,
        "share": result["count"] / (rate * seconds * n),
        "p50": percentile(latencies, 0.5) * 1e3,
        "p99": percentile(latencies, 0.99) * 1e3,
        "mean": statistics.fmean(latencies) * 1e3 if latencies else float("nan"),
    }


def main(seconds: float) -> None:
    os.environ["PLUTO_ROBOT"] = f"bench-{uuid.uuid4().hex[:8]}"
    os.environ["PLUTO_RENDEZVOUS"] = f"tcp/127.0.0.1:{free_tcp_port()}"
    header = f"{'payload':<11}{'subscribers':>12}  {'path':<14}{'msgs/s':>10}{'delivered':>11}"
    header += f"{'p50 ms':>9}{'p99 ms':>9}"
    print(header)
    print("-" * len(header))
    with Bus() as bus, XmlServer(bus, ServerSettings(port=0, max_rate_hz=UNPACED)) as server:
        port = server.address[1]
        for payload, (name, rate) in PAYLOADS.items():
            publisher = Publisher(bus, name, rate)
            publisher.thread.start()
            try:
                for n in SUBSCRIBERS:
                    for path in ("bus (direct)", "xmlserver"):
                        r = trial("bus" if path.startswith("bus") else "xmlserver", name, rate, n, seconds, port)
                        print(
                            f"{payload:<11}{n:>12}  {path:<14}{r['rate']:>10.0f}{r['share']:>10.0%} "
                            f"{r['p50']:>8.2f}{r['p99']:>9.2f}",
                            flush=True,
                        )
            finally:
                publisher.stop.set()
                publisher.thread.join()
    print(
        f"({seconds:g} s per row after {WARMUP:g} s of warm-up; msgs/s summed over the subscribers; delivered: share "
        "of the values written that reached each subscriber; latency from the write to the line read)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per row, s")
    parser.add_argument("--subscriber", choices=("xmlserver", "bus"), help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.subscriber:
        ns.path = ns.subscriber
        subscriber_main(ns)
    else:
        main(ns.seconds)
