"""Benchmark of a fleet across sites: what the links between routers carry, and the latency across one and two routers.

The topology of ``tests/scenarios/test_sites.py``, in Linux network namespaces: site routers ``r1`` and ``r2``
linked to each other; robot hosts ``a`` (behind ``r1``) and ``b`` (behind ``r2``); a fleet viewer ``v`` behind
``r2``. Each robot host runs N robots (``--robots``, per site), each a process that writes every interface of
Pluto's interface table with a writer rate at that rate, through Pluto's bus, with messages of the real sizes (a
361-beam scan with its bearings, a 16-sonar ring, poses with their covariance, statuses). The viewer subscribes to
everything of every robot (``pluto/**``), as a fleet view does. For each N, once with plain routers and once with
routers that thin what leaves their site for their robots (``pluto router --thin``), it measures over
``--seconds``:

* bytes per second on the backbone (r1 -> r2) and on the viewer's link (r2 -> v), from the kernel's counters of the
  routers' interfaces (everything on the wire: Zenoh's framing, TCP and IP headers);
* messages per second the viewer gets, per robot, and the rate of a few interfaces at the viewer;
* latency: a robot of each site echoes the viewer's pings (``bench/ping`` -> ``bench/pong``); half the round trip,
  p50 and p95 of ``--pings``, across one router (site ``b``) and across two (site ``a``), under the load of the
  robots.

Needs root and ``ip`` (iproute2). Times are measured, never asserted. Run from the project root:

    .venv/bin/python bench/fleet.py                   # robots per site 1, 2, 4; 10 s each
    .venv/bin/python bench/fleet.py --robots 1 --seconds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.bus.test_namespaces import ROUTER_PORT, _why_no_namespaces
from tests.scenarios.test_sites import BACKBONE, FleetNet

SHOWN = ("Sick/Scan_mm", "Base/Sonar", "Localization/Pose", "motion/status")
"""Interfaces whose rate at the viewer the table shows."""


def robot_process() -> None:
    """A synthetic robot (``--robot-process``): every table interface with a rate, at that rate, real sizes."""
    import math

    import msgspec

    from pluto import msgs, names
    from pluto.bus import Bus

    beams = 361
    scan = msgs.LaserScan(
        ranges=[5.0 + math.sin(i) for i in range(beams)],
        angles=[math.radians(i * 0.5 - 90.0) for i in range(beams)],
        count=beams,
    )
    special: dict[str, msgs.Message] = {
        "Sick/Scan": scan,
        "Sick/Scan_mm": scan,
        "Base/Sonar": msgs.SonarScan(ranges=[2.0] * 16),
        "Localization/Pose": msgs.PoseEstimate(covariance=[0.01] * 9),
    }
    with Bus() as bus:
        writers = []
        for name, entry in names.INTERFACES.items():
            period = getattr(entry, "period", None)
            if period is None or name == "Heartbeat":
                continue
            value = special.get(name)
            if value is None:
                value = entry.topic.type()
            writers.append((period, bus.create_publisher(name, entry.topic.type), value))
        key = f"pluto/{bus.robot}/bench/pong"

        def echo(sample: Any) -> None:
            bus.session.put(key, sample.payload)

        subscriber = bus.session.declare_subscriber(f"pluto/{bus.robot}/bench/ping", echo)
        print("up", flush=True)
        due = [time.monotonic()] * len(writers)
        while True:
            now = time.monotonic()
            for i, (period, writer, value) in enumerate(writers):
                if now >= due[i]:
                    writer.write(msgspec.structs.replace(value, stamp=now) if hasattr(value, "stamp") else value)
                    due[i] += period
            time.sleep(max(0.0, min(due) - time.monotonic()))
        del subscriber


def viewer_process(robots: list[str], seconds: float, pings: int) -> None:
    """The fleet viewer (``--viewer-process``): counts what it gets for ``seconds``, then pings each site."""
    import zenoh

    from pluto.bus import Bus

    counts: dict[str, int] = {}
    sizes: dict[str, int] = {}
    lock = threading.Lock()
    with Bus() as bus:

        def received(sample: zenoh.Sample) -> None:
            key = str(sample.key_expr)
            size = len(sample.payload)
            with lock:
                counts[key] = counts.get(key, 0) + 1
                sizes[key] = sizes.get(key, 0) + size

        sub = bus.session.declare_subscriber("pluto/**", received)
        time.sleep(2.0)  # the subscription reaches both sites
        with lock:
            counts.clear()
            sizes.clear()
        print("counting", flush=True)
        time.sleep(seconds)
        with lock:
            got, got_sizes = dict(counts), dict(sizes)
        sub.undeclare()
        latency: dict[str, list[float]] = {}
        for robot in robots:
            arrived = threading.Event()
            sub = bus.session.declare_subscriber(f"pluto/{robot}/bench/pong", lambda _s, done=arrived: done.set())
            time.sleep(1.0)
            halves = []
            for i in range(pings + 5):
                arrived.clear()
                start = time.perf_counter()
                bus.session.put(f"pluto/{robot}/bench/ping", str(i).encode())
                if not arrived.wait(5.0):
                    continue
                if i >= 5:
                    halves.append((time.perf_counter() - start) / 2.0)
            sub.undeclare()
            latency[robot] = halves
    print(json.dumps({"counts": got, "sizes": got_sizes, "latency": latency}), flush=True)


def tx_bytes(net: FleetNet, router: str, iface: str) -> int:
    out = subprocess.run(
        ["ip", "-n", net.names[router], "-s", "-j", "link", "show", "dev", iface],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(json.loads(out)[0]["stats64"]["tx"]["bytes"])


def run_case(per_site: int, thinned: bool, seconds: float, pings: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="pluto-fleet-") as tmp:
        net = FleetNet(Path(tmp), "fleet")
        try:
            net.build()
            robots = {side: [f"fleet-{side}{i}" for i in range(per_site)] for side in ("a", "b")}
            for router in ("r2", "r1"):
                args = ["-m", "pluto", "router", "--listen", f"tcp/0.0.0.0:{ROUTER_PORT}"]
                if router == "r1":
                    args += ["--connect", f"tcp/{BACKBONE}.2:{ROUTER_PORT}"]
                if thinned:
                    site = "a" if router == "r1" else "b"
                    links = [net.backbone[router]] + ([net.towards["v"]] if router == "r2" else [])
                    for link in links:
                        args += ["--thin", link]
                    for robot in robots[site]:
                        args += ["--thin-robot", robot]
                peer = net.start(router, *args)
                line = peer.lines.get(timeout=60)
                assert line is not None and line.startswith("router listening"), peer.stderr()
            for side in ("a", "b"):
                for robot in robots[side]:
                    env = net.env(side)
                    env["PLUTO_ROBOT"] = robot
                    proc = subprocess.Popen(
                        net.command(side, sys.executable, __file__, "--robot-process"),
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                        text=True,
                        env=env,
                    )
                    net.peers.append(_Proc(proc))
                    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
            env = net.env("v")
            pinged = [robots["b"][0], robots["a"][0]]
            viewer = subprocess.Popen(
                net.command(
                    "v",
                    sys.executable,
                    __file__,
                    "--viewer-process",
                    "--seconds",
                    str(seconds),
                    "--pings",
                    str(pings),
                    *pinged,
                ),
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            assert viewer.stdout is not None
            assert viewer.stdout.readline().strip() == "counting"
            before = (tx_bytes(net, "r1", net.backbone["r1"]), tx_bytes(net, "r2", net.towards["v"]))
            start = time.monotonic()
            line = viewer.stdout.readline()
            while line and not line.startswith("{"):
                print(f"    viewer: {line.rstrip()}")
                line = viewer.stdout.readline()
            assert line, f"the viewer ended without its counts (exit {viewer.wait(60)})"
            result = json.loads(line)
            viewer.wait(60)
            # the counters' window: from "counting" to the counts' end (the pings come after, a few bytes)
            after = (tx_bytes(net, "r1", net.backbone["r1"]), tx_bytes(net, "r2", net.towards["v"]))
            window = max(seconds, time.monotonic() - start)
        finally:
            net.destroy()
    counts: dict[str, int] = result["counts"]
    every = [r for side in robots.values() for r in side]
    per_robot = {r: sum(c for k, c in counts.items() if k.startswith(f"pluto/{r}/")) / seconds for r in every}
    rates = {name: counts.get(f"pluto/{robots['a'][0]}/{name}", 0) / seconds for name in SHOWN}
    sizes: dict[str, int] = result["sizes"]
    payload = {r: sum(c for k, c in sizes.items() if k.startswith(f"pluto/{r}/")) / seconds for r in every}
    return {
        "backbone": (after[0] - before[0]) / window,
        "viewer_link": (after[1] - before[1]) / window,
        "msgs_per_robot": statistics.mean(per_robot.values()),
        "payload_per_robot": statistics.mean(payload.values()),
        "rates": rates,
        "latency": {"one router": result["latency"][pinged[0]], "two routers": result["latency"][pinged[1]]},
    }


class _Proc:
    """A process the namespaces' teardown stops (as a test's Peer)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{1000.0 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robots", type=int, nargs="+", default=[1, 2, 4], help="robots per site (default 1 2 4)")
    parser.add_argument("--seconds", type=float, default=10.0, help="counting window per case, s (default 10)")
    parser.add_argument("--pings", type=int, default=200, help="pings per site (default 200)")
    parser.add_argument("--robot-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--viewer-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("pinged", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.robot_process:
        robot_process()
        return 0
    if args.viewer_process:
        viewer_process(args.pinged, args.seconds, args.pings)
        return 0
    reason = _why_no_namespaces()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    rows = []
    for n in args.robots:
        for thinned in (False, True):
            print(f"  {n} robot(s) per site, {'thinned' if thinned else 'plain'} routers ...", flush=True)
            rows.append((n, thinned, run_case(n, thinned, args.seconds, args.pings)))
    print()
    print(
        "| robots | routers | backbone r1->r2 kB/s | viewer link kB/s | per robot at the viewer: msgs/s | kB/s | "
        + " | ".join(f"{name} Hz" for name in SHOWN)
        + " |"
    )
    print("|---:|---|---:|---:|---:|---:|" + "---:|" * len(SHOWN))
    for n, thinned, r in rows:
        rates = r["rates"]
        assert isinstance(rates, dict)
        print(
            f"| {2 * n} | {'thinned' if thinned else 'plain'} | {r['backbone'] / 1000:.1f} | "
            f"{r['viewer_link'] / 1000:.1f} | {r['msgs_per_robot']:.0f} | {r['payload_per_robot'] / 1000:.1f} | "
            + " | ".join(f"{rates[name]:.1f}" for name in SHOWN)
            + " |"
        )
    print()
    print("| robots | routers | one way, 1 router p50 / p95 ms | one way, 2 routers p50 / p95 ms |")
    print("|---:|---|---:|---:|")
    for n, thinned, r in rows:
        lat = r["latency"]
        assert isinstance(lat, dict)
        one, two = lat["one router"], lat["two routers"]
        print(
            f"| {2 * n} | {'thinned' if thinned else 'plain'} | {ms(one, 0.5)} / {ms(one, 0.95)} | "
            f"{ms(two, 0.5)} / {ms(two, 0.95)} |"
        )
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
