"""Several robots in one world, a process per robot (:mod:`pluto.sim.robot_processes`): the same run as with every
robot in one process; a robot whose process dies comes back where it was while the others go on; when the leading
robot's process (whose simulator runs the lock-step) dies, the time stands still until it is back, then goes on in
the same run.

The stack is the ``mission`` profile without the pose module for two robots of the office (its visitor removed):
robot 1 is sent to the lobby and robot 2 into room N4 with moveto, by scripts in this process.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import BusError, bus_config
from pluto.runtime.profiles import load_profile
from pluto.sim.world import WORLDS_DIR
from tests.helpers import wait_until
from tests.scenarios.fleet_stack import FleetLockstep, ProcessesLockstep
from tests.scenarios.stack import HANG, Collector, Script
from tests.scenarios.test_fleet import GOALS, LIMIT, RADIUS, moveto_script

pytestmark = pytest.mark.scenario

PROFILE = Path(__file__).parents[2] / "src" / "pluto" / "runtime" / "profiles" / "mission.toml"


@pytest.fixture
def world(tmp_path: Path) -> str:
    """The office without its visitor."""
    office = re.sub(r"<movers>.*</movers>", "", (WORLDS_DIR / "office.xml").read_text(), flags=re.S)
    path = tmp_path / "office.xml"
    path.write_text(office)
    return str(path)


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    """The mission profile without the pose module, as a file (each robot's process reads it)."""
    text = re.sub(r"\[modules\.pose\][^\[]*", "", PROFILE.read_text())
    path = tmp_path / "mission-nopose.toml"
    path.write_text(text)
    assert "pose" not in {e.name for e in load_profile(str(path)).entries}
    return path


def back_in_lockstep(stack: ProcessesLockstep, robot: str) -> bool:
    """``robot``'s process was started again and its modules take part in the lock-step again."""
    assert stack.processes is not None
    if stack.processes.robots[robot].restarts != 1:
        return False
    try:
        return f"{robot}/base" in stack.members()
    except BusError:
        return False  # the leader's simulator is starting again: its services answer once it is up


def run_two(stack: FleetLockstep | ProcessesLockstep) -> tuple[dict[str, Collector], list[Script]]:
    """Send robots 1 and 2 to their rooms; return their truths and the finished scripts."""
    robots = [f"{bus_config().robot}-{i}" for i in (1, 2)]
    truths = {r: stack.collect(r, "Sim/Truth", msgs.Odometry) for r in robots}
    scripts = [stack.add(moveto_script(stack, robots[i - 1], GOALS[i][0])) for i in (1, 2)]  # type: ignore[arg-type]
    stack.resume()
    for script in scripts:
        script.wait()
    return truths, scripts


def test_a_process_per_robot_gives_the_same_run_as_one_process(world: str, profile: Path) -> None:
    with ProcessesLockstep() as stack:
        processes = stack.start(str(profile), 2, world=world, seed=4)
        assert all(state.startswith("running") for state in processes.status().values()), processes.status()
        pids = {robot.process.pid for robot in processes.robots.values() if robot.process is not None}
        assert len(pids) == 2 and os.getpid() not in pids
        # `pluto down` finds the robots' processes through the one that started them, not each of their own
        assert not list(processes.log_dir.glob("profile-*.pid")), list(processes.log_dir.iterdir())
        truths, scripts = run_two(stack)
        apart = {robot: collector.snapshot() for robot, collector in truths.items()}
        ends = [s.finished_at for s in scripts]
    with FleetLockstep() as fleet_stack:
        fleet_stack.start(load_profile(str(profile)), 2, world=world, seed=4)
        truths, scripts = run_two(fleet_stack)
        together = {robot: collector.snapshot() for robot, collector in truths.items()}
        assert [s.finished_at for s in scripts] == ends

    for i, robot in enumerate(apart, 1):
        end = ends[i - 1]
        assert end is not None and end < LIMIT, (robot, end)
        (gx, gy), (x0, x1, y0, y1) = GOALS[i]
        path_apart = [(t.stamp, t.x, t.y, t.theta) for t in apart[robot] if t.stamp <= end]
        path_together = [(t.stamp, t.x, t.y, t.theta) for t in together[robot] if t.stamp <= end]
        assert len(path_apart) > 100
        assert path_apart == path_together, robot  # the same poses at the same times, to the bit
        _, x, y, _ = path_apart[-1]
        assert x0 + RADIUS <= x <= x1 - RADIUS and y0 + RADIUS <= y <= y1 - RADIUS, (robot, x, y)
        assert math.hypot(x - gx, y - gy) < 0.6, (robot, x, y)


def test_a_robot_whose_process_dies_comes_back_where_it_was_while_the_other_goes_on(world: str, profile: Path) -> None:
    # At twice real time: a module saves its state at most every 0.2 s of wall time (pluto.runtime.persist), so the
    # state a restart finds is at most 0.4 simulated seconds old (0.24 m at the moveto's 0.6 m/s).
    with ProcessesLockstep() as stack:
        processes = stack.start(str(profile), 2, world=world, seed=4, rate=2.0)
        first, second = processes.names
        truths = {r: stack.collect(r, "Sim/Truth", msgs.Odometry) for r in processes.names}
        scripts = [stack.add(moveto_script(stack, robot, GOALS[i][0])) for i, robot in enumerate((first, second), 1)]  # type: ignore[arg-type]
        stack.resume()
        start = truths[second].wait_for(lambda t: True, timeout=HANG)
        moved = truths[second].wait_for(
            lambda t: math.hypot(t.x - start.x, t.y - start.y) > 1.5, timeout=HANG
        )  # on its way to its room
        victim = processes.robots[second].process
        assert victim is not None
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = truths[second].snapshot()[-1]
        # Started again, its modules take part in the lock-step again.
        wait_until(lambda: back_in_lockstep(stack, second), timeout=HANG, message=f"{second} comes back")
        back = truths[second].wait_for(lambda t: t.stamp > killed_at.stamp + 0.5, timeout=HANG)
        scripts[0].wait()
        state = processes.status()

    assert moved.stamp <= killed_at.stamp
    assert state[second].startswith("running") and "restarted 1 times" in state[second], state
    # The other robot went on and reached its room.
    (gx, gy), _ = GOALS[1]
    assert scripts[0].finished_at is not None and scripts[0].finished_at < LIMIT
    end = truths[first].until(scripts[0].finished_at)[-1]
    assert math.hypot(end.x - gx, end.y - gy) < 0.6, end
    # The robot that died came back where it was, not at its start.
    assert math.hypot(back.x - killed_at.x, back.y - killed_at.y) < 0.4, (killed_at, back)
    assert math.hypot(back.x - start.x, back.y - start.y) > 1.0, (start, back)


def test_when_the_leading_robot_process_dies_the_time_stalls_and_goes_on_once_it_is_back(
    world: str, profile: Path
) -> None:
    with ProcessesLockstep() as stack:
        processes = stack.start(str(profile), 2, world=world, seed=4, rate=2.0)
        first, second = processes.names
        truths = {r: stack.collect(r, "Sim/Truth", msgs.Odometry) for r in processes.names}
        clock = stack.collect(second, "Clock", msgs.SimTime)
        scripts = [stack.add(moveto_script(stack, robot, GOALS[i][0])) for i, robot in enumerate((first, second), 1)]  # type: ignore[arg-type]
        stack.resume()
        start = truths[first].wait_for(lambda t: True, timeout=HANG)
        truths[first].wait_for(lambda t: math.hypot(t.x - start.x, t.y - start.y) > 1.5, timeout=HANG)
        leader = processes.robots[first].process
        assert leader is not None
        os.kill(leader.pid, signal.SIGKILL)
        killed_at = truths[first].snapshot()[-1]
        other_at = truths[second].snapshot()[-1]
        # While its modules come back one by one, the restarted leader holds the time: none of them comes back to a
        # time that went on without it (its localization would dead-reckon over the gap).
        modules = {f"{first}/{entry.name}" for entry in processes.profile.entries if entry.name != "sim"}
        seen: list[tuple[float, bool]] = []  # (time, every module of the first robot a member) after the restart

        def leader_back() -> bool:
            assert stack.processes is not None
            if stack.processes.robots[first].restarts != 1:
                return False
            try:
                state: dict[str, Any] = stack.bus(second).call("sim/lockstep", None, dict, timeout=5.0)
            except BusError:
                return False  # the leader's simulator is starting again
            seen.append((float(state["stamp"]), modules <= set(state["members"])))
            return seen[-1][1] and not state["paused"]

        wait_until(leader_back, timeout=HANG, message=f"{first} comes back and leads again")
        held = [stamp for stamp, complete in seen if not complete]
        assert len(set(held)) <= 1, held  # the time stood still until every module was back
        back = truths[first].wait_for(lambda t: t.stamp > killed_at.stamp + 0.5, timeout=HANG)
        scripts[0].wait()
        runs = {c.run for c in clock.snapshot() if c.run}

    assert len(runs) == 1, runs  # the same run goes on: no new simulation
    # the first robot came back where it was, and went on to its room
    assert math.hypot(back.x - killed_at.x, back.y - killed_at.y) < 0.4, (killed_at, back)
    (gx, gy), _ = GOALS[1]
    assert scripts[0].finished_at is not None and scripts[0].finished_at < LIMIT
    end = truths[first].until(scripts[0].finished_at)[-1]
    assert math.hypot(end.x - gx, end.y - gy) < 0.6, end
    # the second robot did not move while the time stood still, nor jump when it went on, and went on moving
    after = [t for t in truths[second].snapshot() if t.stamp > other_at.stamp]
    assert len(after) > 20, (other_at, after)
    steps = [math.hypot(b.x - a.x, b.y - a.y) for a, b in itertools.pairwise([other_at, *after])]
    assert max(steps) < 0.1, max(steps)  # 0.6 m/s at most, 20 values a simulated second
    assert math.hypot(after[-1].x - other_at.x, after[-1].y - other_at.y) > 1.0, (other_at, after[-1])
