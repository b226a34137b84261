"""Fault injection on the mission: a module's process is killed (SIGKILL) or hung (SIGSTOP) during a moveto.

For each fault: the base is commanded to stop within 0.5 s of simulated time after the input it steers by went stale
(unless the module was back before its input went stale); the supervisor brings the module back; the localization is
then within 0.2 m of the truth; and the moveto either ends at the goal (within the goal tolerance of the truth) or
ends with a status that says it did not get there. Never "at the goal" anywhere else.

Each test runs one mission (its start costs more than a fault) and several faults in a row, one per moveto along the
office's corridor, and reports every fault that failed, not only the first.
"""

from __future__ import annotations

import math

import pytest

from pluto.bus import Bus
from tests.faults.mission import GOAL_TOLERANCE, RECOVERED_WITHIN, STOP_WITHIN, FaultMission, Outcome, steers

# Each test runs one mission through three to six faults (about 30-50 s on two idle cores): on a machine busy with
# other work it takes several times that, which the suite's 120 s guard against hangs would cut short.
pytestmark = [pytest.mark.scenario, pytest.mark.faults, pytest.mark.timeout(480)]

TICK = 0.05
"""s: the finest step of the modules that stop the robot (the drive's 20 Hz): a stop falls on one of them."""


def problems(out: Outcome) -> list[str]:
    """What went wrong in one fault, in words (empty if nothing)."""
    found = [f"{out.target}: {note}" for note in out.notes]
    if steers(out.target) and not out.back_before_stale:
        if not math.isfinite(out.stop_commanded_at):
            found.append(f"{out.target}: the base was never commanded to stop")
        elif out.time_to_stop > STOP_WITHIN + TICK:
            found.append(
                f"{out.target}: the stop was commanded {out.time_to_stop:.2f} s after the input went stale "
                f"(stale at {out.stale_at:.2f} s, stop at {out.stop_commanded_at:.2f} s; {out.chain})"
            )
    if not math.isfinite(out.back_at):
        found.append(f"{out.target}: it did not come back")
    if not out.pose_error <= RECOVERED_WITHIN:
        found.append(f"{out.target}: the localization is {out.pose_error:.2f} m from the truth after the restart")
    # "at the goal" is told by the pose estimate: within the tolerance of it, so of the truth by the tolerance and
    # the estimate's error at that moment (a few cm); never metres away, as a frozen or reset pose would make it
    if out.at_goal and not out.distance_to_goal <= GOAL_TOLERANCE + out.end_pose_error:
        found.append(
            f"{out.target}: 'at the goal' {out.distance_to_goal:.2f} m from it (pose {out.end_pose_error:.2f} m off)"
        )
    return found


def run_faults(bus: Bus, faults: list[tuple[str, str]], **mission: object) -> list[Outcome]:
    """Inject each (target, fault) in turn into one mission; fail with every problem found."""
    outcomes = []
    with FaultMission(bus, **mission) as run:  # type: ignore[arg-type]
        for target, fault in faults:
            outcomes.append(run.inject(target, fault))
    failures = [problem for out in outcomes for problem in problems(out)]
    assert not failures, "\n".join(failures) + "\n" + "\n".join(f"{o.target}: {o.describe()}" for o in outcomes)
    return outcomes


def test_killed_or_hung_navigation_modules_stop_the_robot_and_come_back_where_they_were(bus: Bus) -> None:
    outcomes = run_faults(bus, [("localization", "kill"), ("pose", "kill"), ("localization", "hang")])
    # the localization came back where the robot was: the moveto could go on to its goal
    assert outcomes[0].at_goal, outcomes[0].describe()
    assert outcomes[2].at_goal, outcomes[2].describe()


def test_killed_movement_modules_devices_and_clock_stop_the_robot_and_come_back(bus: Bus) -> None:
    targets = ["drive", "avoid", "motion", "sick", "base", "sim"]
    outcomes = run_faults(bus, [(target, "kill") for target in targets])
    # the restarted motion module goes on with the moveto it saved: to its goal
    assert outcomes[2].at_goal, outcomes[2].describe()
