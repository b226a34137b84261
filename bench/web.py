"""Browsers on the live views: 20 WebSocket clients on ``pluto web`` (and on ``pluto foxglove``) while the simulator
runs at 5x.

Run by hand: ``python bench/web.py [--seconds 10] [--clients 20] [--only web]``. Each measurement starts
``pluto sim --rate 5`` (the simulated robot, its time five times real time, so every sensor writes five times its real
rate) and the gateway, in processes of their own on a robot name of their own; then N clients (one asyncio loop in
this process) connect and count, for ``seconds``, the messages each one receives, while the gateway's CPU time is
read from /proc. Rows: frames a second delivered to each client (the mean over the clients and the slowest client)
and the gateway's CPU as a share of one core. The issue's target: >= 10 Hz to each client, < 25 % of a core.
Prints a table; asserts nothing.

Adding a gateway: write a function ``(seconds, clients) -> list[Row]`` and add it to MEASUREMENTS (the Foxglove
gateway's row comes from ``bench/web_foxglove.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import aiohttp

from live import SIM_RATE, Row, cpu_seconds, simulated_robot, stop, wait_for_line  # type: ignore[import-not-found]


async def _web_client(url: str, window: list[float], counts: list[int]) -> None:
    """Reads every message as it comes (a browser does), counting the frames that arrive within ``window``
    (monotonic start and end, set once every client is connected)."""
    async with aiohttp.ClientSession() as session, session.ws_connect(url, max_msg_size=0) as ws:
        while not window or time.monotonic() < window[1]:
            msg = await ws.receive(timeout=30)
            if msg.type != aiohttp.WSMsgType.TEXT:
                raise RuntimeError(f"the server closed the WebSocket: {msg}")
            if window and window[0] <= time.monotonic() < window[1] and msg.data.startswith('{"type":"frame"'):
                counts[0] += 1


async def _web_clients(url: str, n: int, seconds: float, pid: int) -> tuple[list[int], float]:
    window: list[float] = []
    counts = [[0] for _ in range(n)]
    tasks = [asyncio.create_task(_web_client(url, window, counts[i])) for i in range(n)]
    await asyncio.sleep(3.0)  # every client connected (a failure shows in its task)
    for task in tasks:
        if task.done():
            task.result()
    cpu0 = cpu_seconds(pid)
    now = time.monotonic()
    window.extend((now, now + seconds))
    await asyncio.gather(*tasks)
    return [c[0] for c in counts], (cpu_seconds(pid) - cpu0) / (time.monotonic() - now) * 100.0


def web_rows(seconds: float, clients: int) -> list[Row]:
    """``pluto web`` (20 frames a second by default) with ``clients`` browsers, the simulator at 5x."""
    with simulated_robot("web") as env:
        server = subprocess.Popen(
            [sys.executable, "-m", "pluto", "web", "--port", "0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            address = wait_for_line(server, r"open (http://[\d.]+:\d+)/", 60).group(1)
            counts, cpu = asyncio.run(_web_clients(address + "/ws", clients, seconds, server.pid))
            with urllib.request.urlopen(address + "/stats", timeout=10) as reply:
                stats = json.load(reply)
        finally:
            stop(server)
    rates = [c / seconds for c in counts]
    skipped = f"frames ({stats['skipped']} skipped)"
    return [Row("pluto web", clients, skipped, statistics.fmean(rates), min(rates), cpu)]


def foxglove_rows(seconds: float, clients: int) -> list[Row]:
    """``pluto foxglove``: the measurement of ``bench/web_foxglove.py`` (/scan, /tf and both)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import web_foxglove  # type: ignore[import-not-found]

    rows: list[Row] = web_foxglove.foxglove_rows(seconds, clients)
    return rows


MEASUREMENTS: dict[str, Callable[[float, int], list[Row]]] = {
    "web": web_rows,
    "foxglove": foxglove_rows,
}
"""Each gateway's measurement, by name (``--only NAME``)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measurement window (default 10)")
    parser.add_argument("--clients", type=int, default=20, help="browsers (default 20)")
    parser.add_argument("--only", choices=sorted(MEASUREMENTS), action="append", help="measure only these gateways")
    args = parser.parse_args()
    chosen = args.only or list(MEASUREMENTS)
    rows = [row for name in chosen for row in MEASUREMENTS[name](args.seconds, args.clients)]
    print(f"simulator at {SIM_RATE:g}x real time, {args.clients} clients, {args.seconds:g} s; target >= 10 Hz, < 25 %")
    print(f"| {'server':<14} | clients | {'what':<22} | msgs/s per client (mean) | slowest client | server CPU % |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.server:<14} | {r.clients:>7} | {r.what:<22} | {r.mean_hz:>24.1f} | {r.min_hz:>14.1f} | "
            f"{r.cpu_percent:>12.1f} |"
        )


if __name__ == "__main__":
    main()
