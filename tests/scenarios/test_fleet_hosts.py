"""One simulated world, its robots on two machines: ``pluto up fleet --robots 2 --only <robot>`` on each.

Linux network namespaces play three machines (:class:`tests.bus.netns.Net`): ``r`` holds ``pluto router``; ``a`` and
``b`` reach only it. Host ``a`` runs the first robot (its simulator leads the lock-step), host ``b`` the second,
each joining with ``PLUTO_CONNECT`` to the router as a user's machine would. Checked from ``b``: the lock-step of
the first robot's simulator counts the modules of both robots, and a moveto sent to the second robot completes,
its modules ticked across the router by the simulator of the other machine.

Needs root and ``ip`` (iproute2); skipped with the reason otherwise. The namespaces are deleted however it ends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bus.netns import ROUTER_PORT, TIMEOUT, Net
from tests.helpers import wait_until

pytestmark = pytest.mark.scenario

GOAL = (17.5, 10.0)
"""1.5 m along the corridor from the second robot's start in the office (16, 10), facing east."""


@pytest.fixture
def net(tmp_path: Path, bus_env: dict[str, str]) -> Iterator[Net]:
    yield from Net.running(tmp_path, bus_env["PLUTO_ROBOT"])


def test_two_machines_run_one_world_a_robot_each(net: Net) -> None:
    first, second = f"{net.robot}-1", f"{net.robot}-2"
    router = net.start("r", "-m", "pluto", "router", "--listen", f"tcp/0.0.0.0:{ROUTER_PORT}")
    line = router.lines.get(timeout=TIMEOUT)
    assert line is not None and line.startswith("router listening"), router.stderr()
    net.start("a", "-m", "pluto", "up", "fleet", "--robots", "2", "--only", first)
    net.start("b", "-m", "pluto", "up", "fleet", "--robots", "2", "--only", second)

    members: set[str] = set()

    def both_in_the_lockstep() -> bool:
        done = net.attempt("b", "-m", "pluto", "--robot", first, "call", "sim/lockstep", timeout=60)
        if done.returncode != 0:
            return False
        members.clear()
        members.update(json.loads(done.stdout)["members"])
        return {f"{first}/motion", f"{second}/motion", f"{second}/base"} <= members

    wait_until(both_in_the_lockstep, timeout=180, interval=1.0, message="both robots' modules in one lock-step")
    assert len(members) == 18, sorted(members)  # 9 modules each besides the simulator

    env = net.env("b")
    env["PLUTO_ROBOT"] = second
    moved = net.attempt(
        "b", "-m", "pluto", "motion", "moveto", str(GOAL[0]), str(GOAL[1]), "--wait", timeout=180, env=env
    )
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert "at the goal" in moved.stdout, moved.stdout
    # The second robot's clock is the leader's, mirrored by its own simulator on host b.
    clock = net.attempt("b", "-m", "pluto", "echo", "Clock", "-n", "1", timeout=60, env=env)
    assert clock.returncode == 0, clock.stdout + clock.stderr
    time = json.loads(clock.stdout.splitlines()[-1])
    assert time["lockstep"] is True and time["run"] != 0 and time["stamp"] > 0, time
