"""Benchmark of a secure bus: what mutual TLS and access control cost a machine that joins through ``pluto router``.

Two routers run on this machine's loopback, one plain (``tcp/``) and one secure (``pluto router --secure``: mutual
TLS with a CA made for the run, access control by role). For each, a server process (a robot machine) serves a
service and writes a state; this process, as a robot machine, then measures:

* open: the time to open a :class:`~pluto.bus.Bus` through the router (for the secure one: the check of the TLS
  files, the TCP and TLS handshakes, Zenoh's own), p50 of ``--opens`` opens;
* call: the round trip of a service call through the router, p50 and p99 of ``--count`` calls after a warm-up;
* read: the round trip of a value: this side writes ``motion/command``, the server writes it back on
  ``motion/status``, p50 and p99.

Run from the project root:

    .venv/bin/python bench/securebus.py            # 20 opens, 1000 calls and round trips
    .venv/bin/python bench/securebus.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pluto import msgs
from pluto.bus import Bus, BusTimeout, bus_config
from pluto.bus import certs as ca

ROBOT = "bench-secure"

SERVER = """
import sys, threading
from pluto import msgs
from pluto.bus import Bus
with Bus() as bus:
    bus.create_service("echo/ping", lambda request: request)
    status = bus.create_publisher("motion/status", msgs.FVectorState)
    bus.create_subscription("motion/command", lambda c: status.write(msgs.FVectorState(element=[int(c.velocity[0])])))
    print("ready", flush=True)
    sys.stdin.read()
"""


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"{args} did not start")
    return proc


def measure(name: str, endpoint: str, tls: Path | None, router_args: list[str], opts: argparse.Namespace) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLUTO_")}
    env.update(PLUTO_ROBOT=ROBOT, PLUTO_CONNECT=endpoint)
    if tls is not None:
        env["PLUTO_TLS"] = str(tls)
    router = start(["-m", "pluto", "router", *router_args], env)
    server = start(["-c", SERVER], env)
    table = {"robot": ROBOT, "connect": [endpoint], **({"tls": str(tls)} if tls else {})}
    cfg = bus_config(table, env={})
    try:
        opens = []
        for _ in range(opts.opens):
            began = time.perf_counter()
            bus = Bus(cfg)
            opens.append(time.perf_counter() - began)
            bus.close()
        with Bus(cfg) as bus:
            calls = []
            for i in range(opts.warmup + opts.count):
                began = time.perf_counter()
                bus.call("echo/ping", i, timeout=10.0)
                if i >= opts.warmup:
                    calls.append(time.perf_counter() - began)
            status = bus.create_reader("motion/status", msgs.FVectorState)
            command = bus.create_publisher("motion/command")
            bus.call("echo/ping", 0, timeout=10.0)  # the router knows the reader now
            deadline = time.monotonic() + 10.0
            while True:  # until the writer knows the server's subscriber too
                command.write(msgs.ActuatorState(velocity=[-1.0, 0.0]))
                try:
                    if status.wait_for_update(timeout=0.2).element[0] == -1:
                        break
                except BusTimeout:
                    if time.monotonic() > deadline:
                        raise
            trips = []
            for i in range(opts.warmup + opts.count):
                began = time.perf_counter()
                command.write(msgs.ActuatorState(velocity=[float(i), 0.0]))
                while status.wait_for_update(timeout=10.0).element[0] != i:
                    pass
                if i >= opts.warmup:
                    trips.append(time.perf_counter() - began)
        print(
            f"{name:<8} {statistics.median(opens) * 1e3:9.1f} {statistics.median(calls) * 1e3:9.2f} "
            f"{percentile(calls, 0.99) * 1e3:9.2f} {statistics.median(trips) * 1e3:9.2f} "
            f"{percentile(trips, 0.99) * 1e3:9.2f}",
            flush=True,
        )
    finally:
        for proc in (server, router):
            proc.terminate()
            proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--opens", type=int, default=20)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="3 opens, 100 calls and round trips")
    opts = parser.parse_args()
    if opts.quick:
        opts.opens, opts.count, opts.warmup = 3, 100, 10
    with tempfile.TemporaryDirectory() as tmp:
        ca_dir = Path(tmp) / "ca"
        ca.init_ca(ca_dir, name="bench")
        router_dir = ca.add_machine(ca_dir, "router", "router")
        robot_dir = ca.add_machine(ca_dir, "robot1", "robot")
        plain, secure = f"tcp/127.0.0.1:{free_port()}", f"tls/127.0.0.1:{free_port()}"
        print(f"{os.cpu_count()} cores; ms; {opts.count} calls and round trips after {opts.warmup}")
        print(f"{'router':<8} {'open p50':>9} {'call p50':>9} {'call p99':>9} {'value p50':>9} {'value p99':>9}")
        measure("plain", plain, None, ["--listen", plain], opts)
        measure("secure", secure, robot_dir, ["--secure", "--tls", str(router_dir), "--listen", secure], opts)


if __name__ == "__main__":
    main()
