"""Viewers of the live robot: 20 Foxglove WebSocket clients on ``pluto foxglove`` while the simulator runs at 5x.

Run by hand: ``python bench/web_foxglove.py [--seconds 10] [--clients 20]``. It starts ``pluto sim --rate 5`` (the
simulated robot, its time five times real time, so the sensors write five times their real rates) and
``pluto foxglove`` in processes of their own, on a robot name of its own; then N clients (one asyncio loop in this
process) speak the Foxglove WebSocket protocol themselves (subprotocol ``foxglove.sdk.v1``, ``serverInfo``,
``advertise``, ``subscribe``, binary message frames) and subscribe to ``/scan`` and ``/tf``. For ``seconds`` it
counts the message frames each client receives, and the server's CPU time (from /proc). Rows: messages a second
delivered to each client (mean and the slowest client), per topic and in all, and the server's CPU as a share of
one core. The issue's target: >= 10 Hz to each client, < 25 % of a core. Prints a table; asserts nothing.

Adding a server: write a function returning a list of :class:`Row` and add it to MEASUREMENTS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable

import websockets

from live import SIM_RATE, Row, cpu_seconds, simulated_robot, stop, wait_for_line  # type: ignore[import-not-found]

TOPICS = ("/scan", "/tf")


async def _client(url: str, seconds: float, start: asyncio.Event, counts: dict[str, int]) -> None:
    async with websockets.connect(url, subprotocols=["foxglove.sdk.v1"], max_size=None) as ws:  # type: ignore[list-item]
        channels: dict[str, int] = {}
        while not all(t in channels for t in TOPICS):
            doc = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if doc.get("op") == "advertise":
                channels.update({c["topic"]: c["id"] for c in doc["channels"]})
        subscriptions = {i: topic for i, topic in enumerate(TOPICS, 1)}
        subs = [{"id": i, "channelId": channels[t]} for i, t in subscriptions.items()]
        await ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
        await start.wait()
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                frame = await asyncio.wait_for(ws.recv(), left)
            except TimeoutError:
                break
            if isinstance(frame, bytes) and frame[:1] == b"\x01":
                (sub,) = struct.unpack_from("<I", frame, 1)
                topic = subscriptions.get(sub)
                if topic is not None:
                    counts[topic] = counts.get(topic, 0) + 1


async def _clients(url: str, n: int, seconds: float, server_pid: int) -> tuple[list[dict[str, int]], float]:
    start = asyncio.Event()
    counts: list[dict[str, int]] = [{} for _ in range(n)]
    tasks = [asyncio.create_task(_client(url, seconds, start, counts[i])) for i in range(n)]
    await asyncio.sleep(3.0)  # every client connected and subscribed (a failure shows in its task)
    for task in tasks:
        if task.done():
            task.result()
    cpu0 = cpu_seconds(server_pid)
    start.set()
    await asyncio.gather(*tasks)
    return counts, (cpu_seconds(server_pid) - cpu0) / seconds * 100.0


def foxglove_rows(seconds: float, clients: int, max_rate_hz: float | None = None) -> list[Row]:
    """``pluto foxglove`` with ``clients`` viewers of /scan and /tf, the simulator at 5x; with ``max_rate_hz``, that
    parameter of the gateway (0: every message to every viewer; by default 30 a second per topic and frame)."""
    with simulated_robot("fox") as env:
        server = subprocess.Popen(
            [sys.executable, "-m", "pluto", "foxglove", "--port", "0", "--map-pose", "truth"]
            + ([] if max_rate_hz is None else ["-p", f"max_rate_hz={max_rate_hz}"]),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            port = wait_for_line(server, r"listening on ws://[\d.]+:(\d+)", 60).group(1)
            counts, cpu = asyncio.run(_clients(f"ws://127.0.0.1:{port}", clients, seconds, server.pid))
        finally:
            stop(server)
    rows = []
    for what in (*TOPICS, "all"):
        rates = [(sum(c.values()) if what == "all" else c.get(what, 0)) / seconds for c in counts]
        name = "pluto foxglove" if max_rate_hz is None else f"max_rate_hz={max_rate_hz:g}"
        rows.append(Row(name, clients, what, statistics.fmean(rates), min(rates), cpu))
    return rows


MEASUREMENTS: list[Callable[[float, int], list[Row]]] = [
    foxglove_rows,
    lambda seconds, clients: foxglove_rows(
        seconds, clients, max_rate_hz=0.0
    ),  # every message: the cost of thinning out
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measurement window (default 10)")
    parser.add_argument("--clients", type=int, default=20, help="viewers (default 20)")
    args = parser.parse_args()
    rows = [row for measure in MEASUREMENTS for row in measure(args.seconds, args.clients)]
    print(f"simulator at {SIM_RATE:g}x real time, {args.clients} clients, {args.seconds:g} s")
    print(f"| {'server':<16} | clients | {'topic':<6} | msgs/s per client (mean) | slowest client | server CPU % |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.server:<16} | {r.clients:>7} | {r.what:<6} | {r.mean_hz:>24.1f} | {r.min_hz:>14.1f} | "
            f"{r.cpu_percent:>12.1f} |"
        )
    with contextlib.suppress(Exception):
        sys.stdout.flush()


if __name__ == "__main__":
    main()
