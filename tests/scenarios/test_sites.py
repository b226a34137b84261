"""A fleet across sites for real: two robots on hosts of two sites and a viewer, linked only through routers.

Linux network namespaces play five machines: the routers ``r1`` and ``r2`` of two sites, linked to each other
(``pluto router --connect``); the robot host ``a`` reaches only ``r1``, the robot host ``b`` and the viewer ``v``
only ``r2``. Each robot host runs the mission profile in one process under its own robot name, as a user would
(``PLUTO_CONNECT`` to its site's router and nothing else). Each router thins what leaves its site (and ``r2`` what
goes to the viewer) for its robot (``--thin``). From the viewer: ``pluto mom`` lists the modules of both robots
(robot ``a`` across two routers), and ``pluto motion moveto --wait`` sent to robot ``a`` completes: the goal is
reached by its own localization, read back across the thinned links.

Needs root and ``ip`` (iproute2); skipped with the reason otherwise. The namespaces are deleted however it ends.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bus.netns import ROUTER_PORT, Net
from tests.helpers import wait_until

pytestmark = pytest.mark.scenario

TIMEOUT = 60.0
LINKS = {"a": ("r1", "10.233.1"), "b": ("r2", "10.233.2"), "v": ("r2", "10.233.4")}
"""Each host's router and the /24 of their link (inside the test's namespaces only): router .1, host .2."""
BACKBONE = "10.233.3"
"""The /24 of the link between the two routers: r1 .1, r2 .2."""
GOAL = (11.5, 9.7)
"""1.5 m along the corridor from the mission profile's start (10, 9.7)."""


class FleetNet(Net):
    """The five namespaces; robot hosts named ``<robot>-a`` and ``<robot>-b`` on the bus."""

    def __init__(self, tmp_path: Path, robot: str) -> None:
        super().__init__(tmp_path, robot)
        tag = uuid.uuid4().hex[:6]
        self.tag = tag
        self.names = {side: f"pluto-{tag}-{side}" for side in ("r1", "r2", "a", "b", "v")}
        self.backbone = {"r1": f"pf{tag}1", "r2": f"pf{tag}2"}
        self.towards = {side: f"pf{tag}{side}r" for side in LINKS}
        """The router's end of each host's link, by host."""

    def robot_of(self, side: str) -> str:
        return f"{self.robot}-{side}"

    def build(self) -> None:
        self.add_namespaces(self.names.values())
        for side, (router, subnet) in LINKS.items():
            self.link(side, router, subnet, f"pf{self.tag}{side}", self.towards[side])
        self.link("r2", "r1", BACKBONE, self.backbone["r2"], self.backbone["r1"])  # the backbone: r1 .1, r2 .2

    def env(self, side: str) -> dict[str, str]:
        env = super().env("r")  # no PLUTO_CONNECT: a router's
        runtime = self.tmp_path / f"runtime-{side}"
        runtime.mkdir(exist_ok=True)
        env["PLUTO_RUNTIME_DIR"] = str(runtime)
        if side in LINKS:
            subnet = LINKS[side][1]
            env["PLUTO_CONNECT"] = f"tcp/{subnet}.1:{ROUTER_PORT}"
            env["PLUTO_ROBOT"] = self.robot_of("a" if side == "v" else side)
        return env

    def start_router(self, router: str) -> None:
        args = ["-m", "pluto", "router", "--listen", f"tcp/0.0.0.0:{ROUTER_PORT}"]
        if router == "r1":
            args += ["--connect", f"tcp/{BACKBONE}.2:{ROUTER_PORT}", "--thin", self.backbone["r1"]]
            args += ["--thin-robot", self.robot_of("a")]
        else:
            args += ["--thin", self.backbone["r2"], "--thin", self.towards["v"], "--thin-robot", self.robot_of("b")]
        peer = self.start(router, *args)
        line = peer.lines.get(timeout=TIMEOUT)
        assert line is not None and line.startswith("router listening"), peer.stderr()

    def viewer(self, robot: str, *args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
        env = self.env("v")
        env["PLUTO_ROBOT"] = robot
        return self.attempt("v", "-m", "pluto", *args, timeout=timeout, env=env)


@pytest.fixture
def fleet(tmp_path: Path, bus_env: dict[str, str]) -> Iterator[FleetNet]:
    yield from FleetNet.running(tmp_path, bus_env["PLUTO_ROBOT"])


def _modules(table: str) -> set[str]:
    return {line.split()[0] for line in table.splitlines()[2:] if line.strip() and not line[0].isspace()}


def test_a_viewer_on_another_site_sees_both_robots_and_drives_one(fleet: FleetNet) -> None:
    # Neither robot host can reach the other, nor the viewer robot a's host: only the routers link them.
    for side, other in (("a", "10.233.2.2"), ("v", "10.233.1.2"), ("b", "10.233.1.2")):
        unreachable = subprocess.run(
            ["ip", "-n", fleet.names[side], "route", "get", other], capture_output=True, check=False
        )
        assert unreachable.returncode != 0, (side, other)
    fleet.start_router("r2")
    fleet.start_router("r1")
    for side in ("a", "b"):
        fleet.start(side, "-m", "pluto", "up", "mission", "--one-process")

    def both_listed() -> bool:
        tables = [fleet.viewer(fleet.robot_of(side), "mom") for side in ("a", "b")]
        return all(t.returncode == 0 and {"localization", "motion", "sim"} <= _modules(t.stdout) for t in tables)

    wait_until(both_listed, timeout=120, interval=1.0, message="pluto mom on the viewer lists both robots' modules")

    moved = fleet.viewer(fleet.robot_of("a"), "motion", "moveto", str(GOAL[0]), str(GOAL[1]), "--wait", timeout=180)
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert "at the goal" in moved.stdout, moved.stdout
