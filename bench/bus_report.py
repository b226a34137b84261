"""The tables of the bus benchmark (``bench/bus.py``): a row of the table (:class:`Row`), the tables of the round
trips and floods, the fan-out and the timeouts, the verdicts against the targets and the notes that say how it
was measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import textwrap
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import zmq

from pluto import msgs

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bus benchmark's other files

from bus_fanout import FANOUT_SUBSCRIBERS, FanoutResult
from bus_transports import BATCH, BEAMS, KINDS, LABELS, scan_message, small_message


@dataclass
class Row:
    transport: str
    kind: str
    rtt_ns: list[int] = field(default_factory=list)
    rtt_lost: int = 0
    next_stamp: int = 0
    sent: int = 0
    send_ns: int = 0
    received: int = 0
    recv_rate: float = 0.0
    extra: dict[str, int] = field(default_factory=dict)

    def quantile(self, q: int) -> float | None:
        if len(self.rtt_ns) < 2:
            return None
        return statistics.quantiles(self.rtt_ns, n=100, method="inclusive")[q - 1] / 1000.0


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def find(rows: list[Row], transport: str, kind: str) -> Row | None:
    return next((row for row in rows if row.transport == transport and row.kind == kind), None)


def table(rows: list[Row]) -> str:
    head = (
        f"{'transport':<16} {'payload':<15} {'RTT p50 (µs)':>12} {'RTT p99 (µs)':>12} "
        f"{'one-way (msg/s)':>15} {'sent':>9} {'received':>9} {'lost':>7} {'sent/s':>9}"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        p50, p99 = fmt(row.quantile(50)), fmt(row.quantile(99))
        rate = fmt(row.recv_rate, 0) if row.sent else "-"
        send_rate = fmt(row.sent * 1e9 / row.send_ns, 0) if row.send_ns else "-"
        lost = row.sent - row.received
        lines.append(
            f"{row.transport:<16} {LABELS[row.kind]:<15} {p50:>12} {p99:>12} "
            f"{rate:>15} {row.sent:>9,} {row.received:>9,} {lost:>7,} {send_rate:>9}"
        )
    return "\n".join(lines)


def verdicts(rows: list[Row]) -> list[str]:
    lines = []
    met: list[bool] = []
    ratios = []
    for kind in KINDS:
        pluto, raw = find(rows, "pluto.bus", kind), find(rows, "zenoh", kind)
        ours, theirs = (pluto.quantile(50) if pluto else None), (raw.quantile(50) if raw else None)
        if ours is not None and theirs is not None:
            met.append(ours / theirs <= 1.25)
            ratios.append(f"{LABELS[kind]} {ours / theirs:.2f}x ({ours:.1f} / {theirs:.1f} µs)")
    if ratios:
        verdict = "MET" if all(met) else "NOT MET"
        lines.append(f"RTT p50 pluto.bus / raw zenoh: {'; '.join(ratios)}. Target <= 1.25x: {verdict}.")
    small, block = find(rows, "pluto.bus batch", "small"), find(rows, "zenoh BLOCK", "small")
    if small is not None and block is not None and small.sent and block.recv_rate:
        share = small.recv_rate / block.recv_rate
        verdict = "MET" if share >= 0.5 else "NOT MET"
        lines.append(
            f"64 B one way, pluto.bus with batching / zenoh BLOCK: {share:.0%} ({small.recv_rate:,.0f} / "
            f"{block.recv_rate:,.0f} msg/s). Target >= 50 %: {verdict}."
        )
    scan = find(rows, "pluto.bus", "scan")
    if scan is not None and scan.sent:
        verdict = "MET" if scan.recv_rate >= 5000 else "NOT MET"
        lines.append(f"LaserScans one way through pluto.bus: {scan.recv_rate:,.0f}/s. Target >= 5,000/s: {verdict}.")
    for row in rows:
        if row.rtt_lost:
            lines.append(f"{row.transport}, {LABELS[row.kind]}: {row.rtt_lost} round trips got no echo within 1 s.")
    return lines


def notes(rows: list[Row], args: argparse.Namespace) -> list[str]:
    small, scan = len(msgs.encode(small_message())), len(msgs.encode(scan_message()))
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in ("eclipse-zenoh", "pyzmq", "msgspec"))
    lines = [
        f"Two processes per transport (this one pings and sends; a spawned one per transport echoes and "
        f"receives), loopback TCP, multicast scouting off. {args.count} round trips per row after "
        f"{args.warmup} warm-up, in "
        f"{min(args.rounds, args.count)} rounds that take turns between the transports (so a slow spell of the "
        f"machine hits all of them); floods of {args.duration:g} s in "
        f"{args.flood_rounds} rounds that also take turns; a row shows its best flood.",
        f"pluto.bus batch: the same, but the flood writer is created with batch={BATCH} and reliable=True: up to "
        f"{BATCH} values per Zenoh sample (sent when full or 2 ms after the first), BLOCK instead of DROP; the "
        "receiver decodes a batch in one call and its Subscription gets every value, in order. Its RTT rows are "
        "those of an ordinary writer (round trips never batch).",
        "Fan-out: one pluto.bus writer of a 64 B Heartbeat at 2 kHz (paced by this process) and 50 Subscriptions "
        "(depth 256) of it in one other process; in a process every reader and subscription of an interface "
        "shares one Zenoh subscriber, and a sample is decoded once. Latency = the receiver's wall clock at the "
        "callback minus the writer's at the write (one machine, one clock).",
        f"Payloads: 64 B = a msgs.Heartbeat encoded to {small} B; LaserScan = {BEAMS} ranges and {BEAMS} angles, "
        f"count={BEAMS}, encoded to {scan:,} B.",
        "Fair comparison: the raw transports (zenoh, pyzmq) send the msgspec-encoded bytes of the same message "
        "(pluto.msgs.encode) and decode them on receipt (pluto.msgs.decode); echo sides decode and re-encode, "
        "as pluto.bus does.",
        "pluto.bus: StateWriter.write (its publisher uses CongestionControl.DROP, express, and a 25 B "
        "attachment; its Zenoh callbacks run in place, on threads that keep their Python thread state); the echo "
        "is a Subscription (callback on the bus's executor, "
        "depth=1) that writes back, the flood "
        "receiver a Subscription with depth=4096 (every message delivered); the "
        "ping side waits with StateReader.wait_for_update.",
        "zenoh: the same QoS as pluto.bus (DROP, express); as zenoh-python's guidance says (never call Zenoh from "
        "a callback), the echo's callback hands the sample to a thread of its own that republishes it, and the "
        "ping side's callback hands replies over a queue; this row is the one the target compares with. zenoh "
        "inline: the echo republishes inside the callback (fastest, but what the guidance warns against). "
        "zenoh BLOCK: CongestionControl.BLOCK with express "
        "off (zenoh's default batching), the fairer setting for throughput. The raw zenoh rows use zenoh-python's "
        "default callbacks (a Python thread per subscriber).",
        "pyzmq: PUB/SUB over tcp://127.0.0.1 (topic frame + payload frame), default high-water mark 1000 (a full "
        "PUB drops); the ping side polls its SUB socket on the main thread; the echo side has one receive thread.",
        "One-way: received messages per second between the first and the last one at the receiver; for "
        "pluto.bus, the ones delivered to the Subscription's callback. lost = sent - received: DROP publishers "
        "and zmq PUB drop when their queue is full; zenoh BLOCK waits instead.",
    ]
    for row in rows:
        if row.transport == "pluto.bus" and row.extra:
            decoded = row.extra.get("bus_received", 0) - 1  # less the end marker
            lines.append(
                f"pluto.bus {LABELS[row.kind]} flood: sent {row.sent:,}; reached the subscriber ~{decoded:,} "
                f"(the rest dropped by DROP); skipped by depth=1 {row.extra.get('skipped', 0):,}; delivered to "
                f"the callback {row.received:,}."
            )
    lines.append(f"Python {sys.version.split()[0]}, {versions}, libzmq {zmq.zmq_version()}, {os.cpu_count()} CPUs.")
    return lines


def report(rows: list[Row], failures: list[str], args: argparse.Namespace) -> None:
    print()
    print(table(rows))
    print()
    for line in verdicts(rows):
        print(line)
    for text in failures:
        print(f"FAILED {text}")
    print()
    print("Notes:")
    for line in notes(rows, args):
        print(textwrap.fill(line, width=110, initial_indent="- ", subsequent_indent="  "))


# Fan-out ----------------------------------------------------------------------------------------------------


def fanout_table(results: list[FanoutResult]) -> str:
    head = (
        f"{'writer':<22} {'sent':>7} {'sent/s':>8} {'worst subscriber':>17} {'mean share':>11}"
        f" {'latency p50 (ms)':>17} {'p99 (ms)':>9}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        mean = sum(r.received) / (len(r.received) * r.sent) if r.sent and r.received else 0.0
        lines.append(
            f"{r.label:<22} {r.sent:>7,} {r.send_rate:>8,.0f} {r.worst_share:>16.1%} {mean:>11.1%}"
            f" {fmt(r.latency(50), 2):>17} {fmt(r.latency(99), 2):>9}"
        )
    return "\n".join(lines)


def fanout_verdicts(results: list[FanoutResult]) -> list[str]:
    lines = []
    for r in results:
        p99 = r.latency(99)
        met = r.worst_share >= 0.95 and p99 is not None and p99 < 20.0
        lines.append(
            f"Fan-out ({r.label}): every one of {FANOUT_SUBSCRIBERS} subscribers received >= {r.worst_share:.1%} of "
            f"{r.sent:,} values, p99 {fmt(p99, 2)} ms. Target >= 95 % and p99 < 20 ms: {'MET' if met else 'NOT MET'}."
        )
    return lines


# Timeouts ---------------------------------------------------------------------------------------------------


def timeouts_table(results: list[tuple[str, float, list[float]]]) -> str:
    lines = [f"{'wait':<44} {'timeout s':>9} {'gave up after s (median)':>24} {'(largest)':>10}"]
    for what, timeout, times in results:
        lines.append(f"{what:<44} {timeout:>9.2f} {statistics.median(times):>24.3f} {max(times):>10.3f}")
    return "\n".join(lines)
