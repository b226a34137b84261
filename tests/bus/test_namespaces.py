"""Several machines for real: Linux network namespaces, a router in one, modules in two others that reach only it.

Namespace ``r`` holds ``pluto router``; ``a`` and ``b`` each have a virtual Ethernet link to ``r`` on a subnet of its
own and no route to each other (``r`` does not forward), as two machines that can reach only the router. Every
process joins with ``PLUTO_CONNECT`` set to the router's address on its side and nothing else, as the README says.
Checked across the router: ``pluto mom`` in ``b`` lists the module of ``a``, a probe in ``b`` reads a state of
``a`` after it was written (a late joiner), calls a service of the module in ``a``, and sees it go and come back
when it restarts; the module in ``b`` gets the beats of ``a``.

Needs root and ``ip`` (iproute2); skipped with the reason otherwise. The namespaces are deleted however it ends.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from tests.bus.test_two_processes import Peer
from tests.helpers import wait_until

PROBE = Path(__file__).with_name("netns_probe.py")
ROUTER_PORT = 7447
SUBNETS = {"a": "10.231.1", "b": "10.231.2"}
"""The /24 of each side's link to the router (inside the test's own namespaces only): router .1, machine .2."""
TIMEOUT = 30.0


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


def _why_no_namespaces() -> str | None:
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"pluto-probe-{uuid.uuid4().hex[:6]}"
    try:
        _ip("netns", "add", name)
    except subprocess.CalledProcessError as err:
        return f"this machine does not allow network namespaces: {err.stderr.strip()}"
    _ip("netns", "del", name)
    return None


class Net:
    """Three namespaces, ``r`` linked to ``a`` and to ``b``; :meth:`start` runs a command in one of them."""

    def __init__(self, tmp_path: Path, robot: str) -> None:
        tag = uuid.uuid4().hex[:6]
        self.names = {side: f"pluto-{tag}-{side}" for side in ("r", "a", "b")}
        self.tmp_path = tmp_path
        self.robot = robot
        self.peers: list[Peer] = []

    def build(self) -> None:
        for name in self.names.values():
            _ip("netns", "add", name)
            _ip("-n", name, "link", "set", "lo", "up")
        tag = self.names["r"].split("-")[1]
        for side, subnet in SUBNETS.items():
            inner, outer = f"pv{tag}{side}", f"pv{tag}{side}r"
            where = ("netns", self.names[side], "type", "veth", "peer", outer, "netns", self.names["r"])
            _ip("link", "add", inner, *where)
            _ip("-n", self.names[side], "addr", "add", f"{subnet}.2/24", "dev", inner)
            _ip("-n", self.names["r"], "addr", "add", f"{subnet}.1/24", "dev", outer)
            _ip("-n", self.names[side], "link", "set", inner, "up")
            _ip("-n", self.names["r"], "link", "set", outer, "up")

    def destroy(self) -> None:
        for peer in self.peers:
            peer.stop()
        for name in self.names.values():
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10, check=False)

    def env(self, side: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLUTO_")}
        env["PLUTO_ROBOT"] = self.robot
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()), env.get("PYTHONPATH", "")]))
        runtime = self.tmp_path / f"runtime-{side}"
        runtime.mkdir(exist_ok=True)
        env["PLUTO_RUNTIME_DIR"] = str(runtime)
        if side != "r":
            env["PLUTO_CONNECT"] = f"tcp/{SUBNETS[side]}.1:{ROUTER_PORT}"
        return env

    def command(self, side: str, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.names[side], *args]

    def start(self, side: str, *args: str) -> Peer:
        stderr_path = self.tmp_path / f"{side}-{len(self.peers)}.err"
        with stderr_path.open("w") as stderr:
            proc = subprocess.Popen(
                self.command(side, sys.executable, *args),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=self.env(side),
            )
        peer = Peer(proc, stderr_path)
        self.peers.append(peer)
        return peer

    def run(self, side: str, *args: str) -> str:
        done = subprocess.run(
            self.command(side, sys.executable, *args),
            capture_output=True,
            text=True,
            env=self.env(side),
            timeout=TIMEOUT,
            check=False,
        )
        assert done.returncode == 0, f"{args} in {side} failed ({done.returncode}): {done.stderr}"
        return done.stdout


@pytest.fixture
def net(tmp_path: Path, bus_env: dict[str, str]) -> Iterator[Net]:
    reason = _why_no_namespaces()
    if reason is not None:
        pytest.skip(reason)
    net = Net(tmp_path, bus_env["PLUTO_ROBOT"])
    try:
        net.build()
        yield net
    finally:
        net.destroy()


def test_modules_see_each_other_only_through_the_router(net: Net) -> None:
    # The two sides cannot reach each other: no route from a to b.
    unreachable = subprocess.run(
        ["ip", "-n", net.names["a"], "route", "get", f"{SUBNETS['b']}.2"], capture_output=True, check=False
    )
    assert unreachable.returncode != 0

    router = net.start("r", "-m", "pluto", "router", "--listen", f"tcp/0.0.0.0:{ROUTER_PORT}")
    line = router.lines.get(timeout=TIMEOUT)
    assert line is not None and line.startswith("router listening"), router.stderr()

    watcher = net.start("b", str(PROBE), "watch", "heartbeat")
    heart = net.start("a", "-m", "pluto", "run", "heartbeat", "-p", "rate_hz=20")
    watcher.wait_for_line("up", TIMEOUT)

    # A module in b that needs the one in a gets its beats across the router.
    net.start("b", "-m", "pluto", "run", "heartbeat-monitor")

    # A late joiner in b reads the newest beat of a.
    beat = msgspec.json.decode(net.run("b", str(PROBE), "read", "Heartbeat"))
    assert beat["source"] == "heartbeat"
    assert beat["seq"] >= 1

    # A module service of a answers a call from b.
    info = msgspec.json.decode(net.run("b", str(PROBE), "call", "mom/heartbeat"))
    assert info["name"] == "heartbeat"

    # pluto mom in b lists the modules of both sides.
    table = net.run("b", "-m", "pluto", "mom")
    modules = {line.split()[0]: line.split()[1:] for line in table.splitlines()[2:] if line and not line[0].isspace()}
    assert {"heartbeat", "heartbeat-monitor"} <= set(modules), table
    assert modules["heartbeat"][2] == "Heartbeat", table  # what the module of a writes (PID, ACTIVE, INTERFACE)

    # And a probe in a reads what the module in b writes: it has counted beats of a.
    def monitor_counted_beats() -> bool:
        monitor = msgspec.json.decode(net.run("a", str(PROBE), "read", "Heartbeat/Monitor"))
        return bool(monitor["element"][0] > 0)

    wait_until(monitor_counted_beats, timeout=TIMEOUT, interval=0.2, message="the monitor in b counts beats of a")

    # A restart in a is seen in b: gone, then back.
    heart.proc.terminate()
    heart.proc.wait(TIMEOUT)
    watcher.wait_for_line("down", TIMEOUT)
    net.start("a", "-m", "pluto", "run", "heartbeat", "-p", "rate_hz=20")
    watcher.wait_for_line("up", TIMEOUT)
    assert watcher.proc.wait(TIMEOUT) == 0, watcher.stderr()
