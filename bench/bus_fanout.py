"""The fan-out of the bus benchmark (``bench/bus.py``): one pluto.bus writer at a fixed rate and many
Subscriptions of it in one other process, and how many values each receives and how late.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import secrets
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import msgspec

from pluto import msgs
from pluto.bus import Bus

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bus benchmark's other files

from bus_transports import (
    FLOOD_TIMEOUT,
    LINK_TIMEOUT,
    MARKER,
    PROBE,
    READY_TIMEOUT,
    BenchError,
    expect,
    free_port,
    small_message,
    with_stamp,
)

FANOUT_SUBSCRIBERS = 50
FANOUT_HZ = 2000.0
FANOUT_DEPTH = 256  # values each subscription may queue (128 ms at 2 kHz)


@dataclass
class FanoutResult:
    label: str
    sent: int = 0
    received: list[int] = field(default_factory=list)  # per subscriber
    latencies_ms: list[float] = field(default_factory=list)  # every delivery's, write to callback
    send_rate: float = 0.0

    @property
    def worst_share(self) -> float:
        return min(self.received) / self.sent if self.sent and self.received else 0.0

    def latency(self, q: int) -> float | None:
        if len(self.latencies_ms) < 2:
            return None
        return statistics.quantiles(self.latencies_ms, n=100, method="inclusive")[q - 1]


def fanout_main(env: dict[str, str], subscribers: int, conn: Connection) -> None:
    """Entry point of the fan-out receiver: ``subscribers`` Subscriptions of ``bench/fan`` in one process, each
    recording when its values arrive (write stamp to callback, wall clock of this machine)."""
    os.environ.update(env)
    for var in ("PLUTO_CONNECT", "PLUTO_LISTEN"):
        os.environ.pop(var, None)
    bus = Bus()
    probes = [threading.Event() for _ in range(subscribers)]
    ends = [threading.Event() for _ in range(subscribers)]
    arrivals: list[list[float]] = [[] for _ in range(subscribers)]
    armed = threading.Event()

    def callback(i: int) -> Callable[[msgs.Heartbeat], None]:
        seen, probe, end, now = arrivals[i].append, probes[i], ends[i], time.time

        def on_value(msg: msgs.Heartbeat) -> None:
            if msg.stamp >= 0.0:
                if armed.is_set():
                    seen(now() - msg.stamp)
            elif msg.stamp == MARKER:
                end.set()
            elif msg.stamp == PROBE:
                probe.set()

        return on_value

    try:
        for i in range(subscribers):
            bus.create_subscription("bench/fan", callback(i), msgs.Heartbeat, depth=FANOUT_DEPTH, current=False)
        conn.send(("ready",))
        while True:
            command, *_ = conn.recv()
            if command == "quit":
                break
            for i in range(subscribers):
                arrivals[i].clear()
                probes[i].clear()
                ends[i].clear()
            armed.clear()
            if not all(probe.wait(LINK_TIMEOUT) for probe in probes):
                conn.send(("error", "not every subscriber saw a probe"))
                continue
            armed.set()
            conn.send(("armed",))
            if not all(end.wait(FLOOD_TIMEOUT) for end in ends):
                conn.send(("error", "not every subscriber saw the end marker"))
                continue
            counts = [len(a) for a in arrivals]
            latencies = [1000.0 * x for a in arrivals for x in a]
            conn.send(("result", counts, latencies))
    finally:
        bus.close()
        conn.close()


def measure_fanout(label: str, batch: int, duration: float) -> FanoutResult:
    """One writer at FANOUT_HZ (paced by this process's clock) to FANOUT_SUBSCRIBERS subscriptions in another
    process, for ``duration`` s."""
    env = {
        "PLUTO_ROBOT": f"fan-{os.getpid()}-{secrets.token_hex(4)}",
        "PLUTO_RENDEZVOUS": f"tcp/127.0.0.1:{free_port()}",
        "PLUTO_MULTICAST": "0",
    }
    saved = {k: os.environ.get(k) for k in (*env, "PLUTO_CONNECT", "PLUTO_LISTEN")}
    os.environ.update(env)
    for var in ("PLUTO_CONNECT", "PLUTO_LISTEN"):
        os.environ.pop(var, None)
    result = FanoutResult(label)
    ctx = mp.get_context("spawn")
    conn, child_conn = ctx.Pipe()
    proc = ctx.Process(target=fanout_main, args=(env, FANOUT_SUBSCRIBERS, child_conn), name="fan-out", daemon=True)
    bus = Bus()
    try:
        proc.start()
        child_conn.close()
        expect(conn, READY_TIMEOUT, "ready")
        writer = bus.create_publisher("bench/fan", msgs.Heartbeat, batch=batch)
        base = small_message()
        conn.send(("go",))
        deadline = time.monotonic() + LINK_TIMEOUT
        while not conn.poll(0.05):  # probes until every subscriber has one
            writer.write(with_stamp(base, PROBE))  # type: ignore[arg-type]
            writer.flush()
            if time.monotonic() > deadline:
                raise BenchError("fan-out: the subscribers never saw a probe")
        expect(conn, 0, "armed")
        period = 1.0 / FANOUT_HZ
        start = time.perf_counter()
        end = start + duration
        sent = 0
        while True:
            due = start + sent * period
            now = time.perf_counter()
            if due >= end:
                break
            if due > now:
                time.sleep(due - now)
            writer.write(msgspec.structs.replace(base, stamp=time.time(), seq=sent))
            sent += 1
        result.send_rate = sent / (time.perf_counter() - start)
        result.sent = sent
        marker = with_stamp(base, MARKER)
        while not conn.poll(0.05):
            writer.write(marker)  # type: ignore[arg-type]
            writer.flush()
        reply = conn.recv()
        if reply[0] != "result":
            raise BenchError(f"fan-out: {reply[1]}")
        result.received, result.latencies_ms = reply[1], reply[2]
        conn.send(("quit",))
        proc.join(timeout=10)
    finally:
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=5)
        bus.close()
        conn.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return result
