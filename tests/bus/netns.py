"""Linux network namespaces that play machines, for the tests that run Pluto across machines for real.

:class:`Net` makes namespaces linked by virtual Ethernet pairs, runs commands in them with the environment a
machine's processes would have, and deletes everything however the test ends. Its default layout is the plain one of
test_namespaces.py: ``r`` holds the router, ``a`` and ``b`` each have a link to ``r`` on a subnet of their own and no
route to each other. The secure test (test_secure_namespaces.py) and the sites scenario
(tests/scenarios/test_sites.py) derive their own layouts and environments from it; each test's fixture is
``yield from TheNet.running(tmp_path, robot)``, which skips the test with the reason when this machine cannot make
namespaces (no ``ip``, not root, or not allowed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Self

import pytest

from tests.bus.test_two_processes import Peer

PROBE = Path(__file__).with_name("netns_probe.py")
ROUTER_PORT = 7447
SUBNETS = {"a": "10.231.1", "b": "10.231.2"}
"""The /24 of each side's link to the router (inside the test's own namespaces only): router .1, machine .2."""
TIMEOUT = 30.0


def ip(*args: str) -> None:
    """Run ``ip`` with ``args``; a failure raises :class:`subprocess.CalledProcessError` with its stderr."""
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


def why_no_namespaces() -> str | None:
    """Why this machine cannot make network namespaces, or None when it can (a throwaway one is made and deleted)."""
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"pluto-probe-{uuid.uuid4().hex[:6]}"
    try:
        ip("netns", "add", name)
    except subprocess.CalledProcessError as err:
        return f"this machine does not allow network namespaces: {err.stderr.strip()}"
    ip("netns", "del", name)
    return None


class Net:
    """Three namespaces, ``r`` linked to ``a`` and to ``b``; :meth:`start` runs a command in one of them."""

    attempt_timeout: float = TIMEOUT
    """s an :meth:`attempt` may take unless told otherwise."""

    def __init__(self, tmp_path: Path, robot: str) -> None:
        tag = uuid.uuid4().hex[:6]
        self.names = {side: f"pluto-{tag}-{side}" for side in ("r", "a", "b")}
        self.tmp_path = tmp_path
        self.robot = robot
        self.peers: list[Peer] = []

    @classmethod
    def running(cls, tmp_path: Path, robot: str) -> Iterator[Self]:
        """The body of a test's fixture: skip without namespaces, else make and build the net, yield it and destroy
        it however the test ends."""
        reason = why_no_namespaces()
        if reason is not None:
            pytest.skip(reason)
        net = cls(tmp_path, robot)
        try:
            net.build()
            yield net
        finally:
            net.destroy()

    def add_namespaces(self, names: Iterable[str]) -> None:
        """Make the namespaces ``names``, each with its loopback up."""
        for name in names:
            ip("netns", "add", name)
            ip("-n", name, "link", "set", "lo", "up")

    def link(self, host: str, router: str, subnet: str, inner: str, outer: str) -> None:
        """A virtual Ethernet pair between the namespaces of ``host`` (its end ``inner``, address ``<subnet>.2``) and
        of ``router`` (its end ``outer``, ``<subnet>.1``), both ends up."""
        ip("link", "add", inner, "netns", self.names[host], "type", "veth", "peer", outer, "netns", self.names[router])
        ip("-n", self.names[host], "addr", "add", f"{subnet}.2/24", "dev", inner)
        ip("-n", self.names[router], "addr", "add", f"{subnet}.1/24", "dev", outer)
        ip("-n", self.names[host], "link", "set", inner, "up")
        ip("-n", self.names[router], "link", "set", outer, "up")

    def build(self) -> None:
        self.add_namespaces(self.names.values())
        tag = self.names["r"].split("-")[1]
        for side, subnet in SUBNETS.items():
            self.link(side, "r", subnet, f"pv{tag}{side}", f"pv{tag}{side}r")

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

    def attempt(
        self, side: str, *args: str, timeout: float | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run Python with ``args`` in ``side`` (with that side's environment, or ``env``) and return how it ended,
        whatever that was."""
        return subprocess.run(
            self.command(side, sys.executable, *args),
            capture_output=True,
            text=True,
            env=self.env(side) if env is None else env,
            timeout=self.attempt_timeout if timeout is None else timeout,
            check=False,
        )

    def run(self, side: str, *args: str) -> str:
        done = self.attempt(side, *args, timeout=TIMEOUT)
        assert done.returncode == 0, f"{args} in {side} failed ({done.returncode}): {done.stderr}"
        return done.stdout
