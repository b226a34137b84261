"""Benchmark of the bus: round-trip latency and one-way throughput of pluto.bus, raw zenoh-python and pyzmq.

Every measurement is between two processes on this machine, over loopback TCP with multicast scouting off:
this process is the ping/sender side, and each transport has a spawned echo/receiver process of its own.

* Round trip (RTT): this side publishes a message and waits for it to come back; the echo side decodes it and
  republishes it on a second key. N sequential round trips after a warm-up, split in rounds that take turns
  between the transports so that a slow spell of the machine does not favour one of them; p50 and p99.
* One-way throughput: this side publishes as fast as it can for a while; the other side counts what it
  receives and reports the received messages per second (and the sent and received counts, so drops show).

Two payloads: a 64-byte message (a ``Heartbeat`` whose encoding is 64 bytes) and a 361-beam ``LaserScan``
(about 6.6 kB). The raw transports carry the msgspec-encoded bytes of the same messages and decode them on
receipt, so every transport pays for the same encoding and decoding.

Run from the project root:

    .venv/bin/python bench/bus.py                 # 2000 round trips after 200 warm-up, 2 s floods
    .venv/bin/python bench/bus.py --quick         # smoke run
    .venv/bin/python bench/bus.py --count 5000 --duration 3 --transport pluto.bus --transport zenoh
    .venv/bin/python bench/bus.py --timeouts      # only: how long each wait takes to give up at its timeout

The benchmark is four files: this one measures (the round trips, the floods, the timeouts) and runs;
``bench/bus_transports.py`` holds the payloads and each transport's two ends, ``bench/bus_fanout.py`` the fan-out
and ``bench/bus_report.py`` the tables. bench/ is not a package: this file puts its own folder on ``sys.path``
(the spawned processes inherit it) and imports the others by name.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import multiprocessing as mp
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from pluto import msgs
from pluto.bus import Bus, BusConfig, BusError, BusTimeout

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bus benchmark's other files

from bus_fanout import FANOUT_HZ, FANOUT_SUBSCRIBERS, FanoutResult, measure_fanout
from bus_report import Row, fanout_table, fanout_verdicts, report, timeouts_table
from bus_transports import (
    KINDS,
    LABELS,
    LINK_TIMEOUT,
    MARKER,
    PROBE,
    READY_TIMEOUT,
    SPECS,
    BenchError,
    PingSide,
    PlutoPing,
    Spec,
    ZenohPing,
    ZmqPing,
    base_message,
    echo_main,
    expect,
    free_port,
    progress,
    with_stamp,
)

# Measurements -----------------------------------------------------------------------------------------------


def wait_for_link(side: PingSide, kind: str, base: msgs.Message) -> None:
    """Ping with probes until the first echo comes back."""
    probe = with_stamp(base, PROBE)
    deadline = time.monotonic() + LINK_TIMEOUT
    while not side.ping(kind, probe, 0.1):
        if time.monotonic() > deadline:
            raise BenchError(f"no echo of ping/{kind} within {LINK_TIMEOUT} s")


def measure_rtt(side: PingSide, kind: str, row: Row, count: int, warmup: int) -> None:
    """``warmup`` then ``count`` sequential round trips; the measured ones are added to ``row``."""
    base = base_message(kind)
    wait_for_link(side, kind, base)
    first, row.next_stamp = row.next_stamp, row.next_stamp + warmup + count  # unique across rounds
    messages = [with_stamp(base, float(first + i)) for i in range(warmup + count)]
    ping, clock = side.ping, time.perf_counter_ns
    gc.collect()
    for i, msg in enumerate(messages):
        t0 = clock()
        ok = ping(kind, msg, 1.0)
        t1 = clock()
        if not ok:
            row.rtt_lost += 1
        elif i >= warmup:
            row.rtt_ns.append(t1 - t0)


def send_until_reply(conn: Connection, send: Callable[[msgs.Message], None], msg: msgs.Message) -> None:
    """Send ``msg`` every 20 ms until the echo process answers (the answer stays in the pipe)."""
    deadline = time.monotonic() + LINK_TIMEOUT
    send(msg)
    while not conn.poll(0.02):
        if time.monotonic() > deadline:
            raise BenchError(f"the echo process did not answer within {LINK_TIMEOUT} s")
        send(msg)


def measure_flood(side: PingSide, conn: Connection, kind: str, row: Row, duration: float) -> None:
    """Publish as fast as possible for ``duration`` s; the echo process counts what arrives."""
    base = with_stamp(base_message(kind), 0.0)
    send = side.sender(kind)
    conn.send(("arm", kind))
    send_until_reply(conn, send, with_stamp(base, PROBE))  # the receiver has seen the flood's key
    expect(conn, 0, "armed")
    gc.collect()
    batch, sent, clock = 16, 0, time.perf_counter_ns
    t0 = clock()
    end = t0 + int(duration * 1e9)
    while True:
        for _ in range(batch):
            send(base)
        sent += batch
        t1 = clock()
        if t1 >= end:
            break
    send_until_reply(conn, send, with_stamp(base, MARKER))  # resent if a DROP publisher dropped it
    result: dict[str, Any] = expect(conn, 0, "result")[1]
    row.sent, row.send_ns = sent, t1 - t0
    row.received = result["count"]
    window = result["last_ns"] - result["first_ns"]
    row.recv_rate = (row.received - 1) * 1e9 / window if row.received > 1 and window > 0 else 0.0
    row.extra = result["extra"]


def keep_best_flood(row: Row, flood: Row) -> None:
    """Keep the flood of the highest receive rate in ``row`` (a slow spell of the machine only slows a flood down)."""
    if not row.sent or flood.recv_rate > row.recv_rate:
        row.sent, row.send_ns, row.received = flood.sent, flood.send_ns, flood.received
        row.recv_rate, row.extra = flood.recv_rate, flood.extra


def open_ping(spec: Spec) -> tuple[PingSide, Spec]:
    """Open this process's end and return it with the spec the echo process needs."""
    token = secrets.token_hex(4)
    if spec.backend == "pluto":
        env = {
            "PLUTO_ROBOT": f"bench-{os.getpid()}-{token}",
            "PLUTO_RENDEZVOUS": f"tcp/127.0.0.1:{free_port()}",
            "PLUTO_MULTICAST": "0",
        }
        os.environ.update(env)
        for var in ("PLUTO_CONNECT", "PLUTO_LISTEN"):
            os.environ.pop(var, None)
        return PlutoPing(spec.batch), Spec(spec.name, spec.backend, batch=spec.batch, env=env)
    if spec.backend == "zenoh":
        endpoint = f"tcp/127.0.0.1:{free_port()}"
        spec = Spec(spec.name, spec.backend, spec.block, spec.inline, endpoint=endpoint, prefix=f"bench/{token}")
        return ZenohPing(spec), spec
    zmq_side = ZmqPing(spec)
    return zmq_side, Spec(spec.name, spec.backend, endpoint=f"tcp://127.0.0.1:{zmq_side.port}")


class Link:
    """One transport: this process's end, and the echo process with its control pipe."""

    def __init__(self, spec: Spec) -> None:
        self.name = spec.name
        self.side, child_spec = open_ping(spec)
        ctx = mp.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(target=echo_main, args=(child_spec, child_conn), name=f"echo {spec.name}")
        self.proc.daemon = True
        try:
            self.proc.start()
        except Exception:
            self.side.close()
            raise
        finally:
            child_conn.close()
        self.closed = False

    def wait_ready(self) -> None:
        self.side.connect(expect(self.conn, READY_TIMEOUT, "ready")[1])

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            self.conn.send(("quit",))
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=5)
        self.conn.close()
        self.side.close()


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def run(specs: list[Spec], args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """Round trips of every transport in interleaved rounds, then the floods, also in rounds that take turns between
    the transports (the best flood of each row counts)."""
    rows = {(spec.name, kind): Row(spec.name, kind) for spec in specs for kind in KINDS}
    failures: list[str] = []
    links: list[Link] = []

    def fail(link: Link, err: Exception) -> None:
        failures.append(f"{link.name}: {type(err).__name__}: {err}")
        progress(f"{link.name} failed: {err}")
        links.remove(link)
        link.close()

    try:
        for spec in specs:
            links.append(Link(spec))
        for link in list(links):
            try:
                link.wait_ready()
            except Exception as err:  # report it and go on with the other transports
                fail(link, err)
        rounds = min(args.rounds, args.count)
        for n, count in enumerate(split(args.count, rounds)):
            warmup = args.warmup if n == 0 else min(args.warmup, 20)
            progress(f"round trips: round {n + 1} of {rounds}")
            for link in list(links):
                try:
                    for kind in KINDS:
                        measure_rtt(link.side, kind, rows[link.name, kind], count, warmup)
                except Exception as err:
                    fail(link, err)
        for n in range(args.flood_rounds):
            for link in list(links):
                try:
                    for kind in KINDS:
                        progress(f"one-way flood {n + 1} of {args.flood_rounds}: {link.name}, {LABELS[kind]}")
                        flood = Row(link.name, kind)
                        measure_flood(link.side, link.conn, kind, flood, args.duration)
                        keep_best_flood(rows[link.name, kind], flood)
                except Exception as err:
                    fail(link, err)
    finally:
        for link in links:
            link.close()
    return list(rows.values()), failures


# Timeouts ---------------------------------------------------------------------------------------------------

TIMEOUT_REPEAT = 5
"""Times each timeout is measured (the median and the largest are printed)."""


def measure_timeouts(repeat: int) -> list[tuple[str, float, list[float]]]:
    """How long each of the bus's waits takes to give up: (what, its timeout s, the wall seconds of each try). The
    tests check that each gives up (and names what it waited for); how long that takes is measured here."""
    config = BusConfig(
        robot=f"timeouts-{os.getpid()}-{secrets.token_hex(4)}", rendezvous=f"tcp/127.0.0.1:{free_port()}"
    )
    release = threading.Event()

    def slow(_request: Any) -> str:
        release.wait(5.0)
        return "late"

    def timed(action: Callable[[float], object], timeout: float) -> float:
        start = time.perf_counter()
        with contextlib.suppress(BusTimeout, BusError):
            action(timeout)
        return time.perf_counter() - start

    out: list[tuple[str, float, list[float]]] = []
    with Bus(config) as bus, Bus(config) as caller:
        bus.create_service("bench/slow", slow)
        writer = bus.create_publisher("bench/timeouts", msgs.Heartbeat)
        writer.write(msgs.Heartbeat(seq=0))
        reader = caller.create_reader("bench/timeouts", msgs.Heartbeat)
        reader.read()
        cases: list[tuple[str, float, Callable[[float], object]]] = [
            ("service call nobody serves", 0.5, lambda t: caller.call("bench/nobody", timeout=t)),
            ("service call, handler holds its reply", 0.3, lambda t: caller.call("bench/slow", timeout=t)),
            ("wait_for_update, nothing written", 0.2, lambda t: reader.wait_for_update(timeout=t)),
            ("wait_for_module, never starts", 0.2, lambda t: caller.wait_for_module("bench-never", timeout=t)),
        ]
        for what, timeout, action in cases:
            progress(f"timeouts: {what}")
            out.append((what, timeout, [timed(action, timeout) for _ in range(repeat)]))
            release.set()  # a held handler answers (late, to nobody) before the next try
            time.sleep(0.05)
            release.clear()
        release.set()
    progress("timeouts: open with an unreachable router")
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    opened = [
        timed(lambda t: Bus(BusConfig(robot="timeouts", connect=[endpoint], connect_timeout=t)), 0.5)
        for _ in range(repeat)
    ]
    out.append(("open, router unreachable (connect_timeout)", 0.5, opened))
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options, with the defaults of a full or a --quick run filled in."""
    parser = argparse.ArgumentParser(description="Round-trip latency and one-way throughput of the bus.")
    parser.add_argument("--quick", action="store_true", help="fewer messages, for a smoke run")
    parser.add_argument("--count", type=int, help="measured round trips per row (default 2000, quick 300)")
    parser.add_argument("--warmup", type=int, help="round trips before measuring (default 200, quick 50)")
    parser.add_argument("--rounds", type=int, help="rounds the round trips are split in (default 4, quick 2)")
    parser.add_argument("--duration", type=float, help="seconds of each one-way flood (default 2, quick 0.5)")
    parser.add_argument("--flood-rounds", type=int, help="rounds of one-way floods, best one kept (default 3, quick 1)")
    parser.add_argument(
        "--transport", action="append", choices=[spec.name for spec in SPECS], help="only these (repeatable)"
    )
    parser.add_argument("--fanout-duration", type=float, help="seconds of the fan-out run (default 3, quick 1)")
    parser.add_argument("--no-fanout", action="store_true", help="skip the fan-out run")
    parser.add_argument(
        "--timeouts", action="store_true", help="only how long each wait of the bus takes to give up at its timeout"
    )
    args = parser.parse_args(argv)
    defaults = {  # name: (full run, --quick)
        "fanout_duration": (3.0, 1.0),
        "count": (2000, 300),
        "warmup": (200, 50),
        "rounds": (4, 2),
        "duration": (2.0, 0.5),
        "flood_rounds": (3, 1),
    }
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    if args.count < 2 or args.warmup < 0 or args.rounds < 1 or args.duration <= 0 or args.flood_rounds < 1:
        parser.error("need --count >= 2, --warmup >= 0, --rounds >= 1, --duration > 0 and --flood-rounds >= 1")
    return args


def run_fanouts(duration: float, failures: list[str]) -> list[FanoutResult]:
    """The fan-out run, without and with batching (a failure is added to ``failures``)."""
    fanouts: list[FanoutResult] = []
    for label, batch in (("pluto.bus", 0), ("pluto.bus batch=8", 8)):
        progress(f"fan-out: {label}, {FANOUT_SUBSCRIBERS} subscribers at {FANOUT_HZ:,.0f} Hz")
        try:
            fanouts.append(measure_fanout(label, batch, duration))
        except (BenchError, OSError, EOFError) as err:
            failures.append(f"fan-out {label}: {err}")
    return fanouts


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.timeouts:
        results = measure_timeouts(2 if args.quick else TIMEOUT_REPEAT)
        print(f"Timeouts: each wait tried {2 if args.quick else TIMEOUT_REPEAT} times; a wait gives up at its timeout")
        print(timeouts_table(results))
        return 0
    specs = [spec for spec in SPECS if not args.transport or spec.name in args.transport]
    rows, failures = run(specs, args) if specs else ([], [])
    fanouts = [] if args.no_fanout else run_fanouts(args.fanout_duration, failures)
    report(rows, failures, args)
    if fanouts:
        print()
        print(f"Fan-out: one writer at {FANOUT_HZ:,.0f} Hz, {FANOUT_SUBSCRIBERS} subscriptions in one other process")
        print(fanout_table(fanouts))
        print()
        for line in fanout_verdicts(fanouts):
            print(line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
