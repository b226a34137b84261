"""Several robots in the office at once (:mod:`pluto.sim.fleet`), in one lock-step: three robots sent to three rooms
with moveto at the same moment all arrive without touching each other, while a fourth follows the first along its
trail (:mod:`pluto.movement.follow.trail`).

The stack is the ``mission`` profile without the pose module (ideal noise: the localization's dead reckoning is
exact) for four robots of the office's ``<robots>``, its visitor removed: three along the corridor and the fourth
1.6 m behind the first. Each robot's laser and sonar see the others and its avoid module steers round them; the
truth (each robot's ``Sim/Truth``) and every base's collision count say whether any two bodies touched.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import bus_config
from pluto.movement.follow.core import FOLLOWING, TOO_CLOSE
from pluto.movement.follow.module import FollowModule, FollowModuleParams
from pluto.runtime.profiles import load_profile
from pluto.sim.world import WORLDS_DIR
from tests.scenarios.fleet_stack import FleetLockstep
from tests.scenarios.stack import Collector, Script, without

pytestmark = pytest.mark.scenario

GOALS = {
    1: ((5.0, 10.0), (0.0, 8.0, 0.0, 20.0)),  # the lobby, west of the corridor
    2: ((22.0, 13.5), (20.0, 24.0, 11.0, 16.0)),  # room N4, through its 0.9 m door
    3: ((30.0, 6.5), (28.0, 32.0, 4.0, 9.0)),  # room S6
}
"""Goal (x, y) and the room's walls (x0, x1, y0, y1) of robots 1-3, m."""
LIMIT = 120.0
"""Simulated seconds a moveto may take before the scenario gives up on it."""
RADIUS = 0.4


def moveto_script(stack: FleetLockstep, robot: str, goal: tuple[float, float]) -> Script:
    """A script on ``robot`` that sends ``goal`` to its motion module at once and finishes when the moveto is over
    (motion/status element[3] back to 0 after the first second) or after :data:`LIMIT` s."""
    script = Script(stack.bus(robot), rate_hz=10.0)
    command = script.publisher("motion/command", msgs.ActuatorState)
    status = script.reader("motion/status", msgs.FVectorState)

    def go(now: float) -> Generator[None, float, None]:
        command.write(msgs.ActuatorState(cmd_flags=42, position=list(goal)))
        start = now
        while now - start < LIMIT:
            s = status.read()
            busy = s is not None and len(s.element) >= 4 and s.element[3] > 0
            if now - start >= 1.0 and not busy:
                return
            now = yield

    script.body = go
    return script


@pytest.fixture
def stack() -> Iterator[FleetLockstep]:
    with FleetLockstep() as running:
        yield running


def test_three_robots_reach_three_rooms_without_touching_while_a_fourth_follows_the_first(
    tmp_path: Path, stack: FleetLockstep
) -> None:
    office = re.sub(r"<movers>.*</movers>", "", (WORLDS_DIR / "office.xml").read_text(), flags=re.S)
    world = tmp_path / "office.xml"
    world.write_text(office)
    prefix = bus_config().robot
    robots = [f"{prefix}-{i}" for i in (1, 2, 3, 4)]
    fleet = stack.start(without(load_profile("mission"), "pose"), 4, world=str(world), seed=2)
    assert fleet.names == robots
    leader, follower = robots[0], robots[3]
    follow = stack.add(
        FollowModule(stack.bus(follower), FollowModuleParams(use_sim_time=True, target_robot=leader, distance=1.2))
    )
    truths = {r: stack.collect(r, "Sim/Truth", msgs.Odometry) for r in robots}
    statuses = {r: stack.collect(r, "motion/status", msgs.FVectorState) for r in robots[:3]}
    follow_status = stack.collect(follower, "follow/status", msgs.FVectorState)
    scripts = [stack.add(moveto_script(stack, robots[i - 1], GOALS[i][0])) for i in (1, 2, 3)]
    starter = Script(stack.bus(follower), rate_hz=10.0)
    start_follow = starter.publisher("follow/command", msgs.ActuatorState)
    starter.on_step = lambda now: (start_follow.write(msgs.ActuatorState(cmd_flags=1)), starter.finish())
    stack.add(starter)
    stack.resume()
    for script in scripts:
        script.wait()
    end = max(s.finished_at or 0.0 for s in scripts)

    for i, script in zip((1, 2, 3), scripts, strict=True):
        robot = robots[i - 1]
        (gx, gy), (x0, x1, y0, y1) = GOALS[i]
        assert script.finished_at is not None and script.finished_at < LIMIT, robot
        last = statuses[robot].until(script.finished_at)[-1]
        assert last.element[2] == 1, (robot, last)  # at the goal
        pose = truths[robot].until(script.finished_at)[-1]
        assert x0 + RADIUS <= pose.x <= x1 - RADIUS and y0 + RADIUS <= pose.y <= y1 - RADIUS, (robot, pose)
        assert math.hypot(pose.x - gx, pose.y - gy) < 0.6, (robot, pose)

    # No two bodies ever touched: the bases counted no collision, and the true poses kept apart all the way.
    for robot in robots:
        base = next(m for m in fleet.modules[robot] if m.module_name == "base")
        assert base.contacts.count == 0, (robot, base.notes())  # type: ignore[attr-defined]
    paths = {r: {round(t.stamp, 3): t for t in truths[r].until(end)} for r in robots}
    closest = math.inf
    for a, b in itertools.combinations(robots, 2):
        for stamp in paths[a].keys() & paths[b].keys():
            pa, pb = paths[a][stamp], paths[b][stamp]
            closest = min(closest, math.hypot(pa.x - pb.x, pa.y - pb.y))
    assert closest > 2 * RADIUS + 0.02, closest

    # The follower went after the first robot into the lobby and waits behind it, 1.2 m along its trail.
    codes = {s.element[1] for s in follow_status.until(end)}
    assert FOLLOWING in codes, codes
    assert follow_status.until(end)[-1].element[1] in (FOLLOWING, TOO_CLOSE)
    lead, tail = truths[leader].until(end)[-1], truths[follower].until(end)[-1]
    assert tail.x < 8.0, tail  # in the lobby too
    assert 0.9 <= math.hypot(lead.x - tail.x, lead.y - tail.y) <= 1.8, (lead, tail)
    assert follow.core.active
    assert all(isinstance(c, Collector) for c in truths.values())
