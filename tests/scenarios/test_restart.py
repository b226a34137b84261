"""A module killed mid-drive and restarted by the supervisor continues where it was.

The simulated robot (simulator, base and inertial unit, and the localization service, each in its own process, in
lock-step) drives a circle; the localization service's process is killed (SIGKILL) while it drives, and the
supervisor starts it again. The time is held while the service is away (the robot is 2 m from its start then; the
time runs as fast as the modules go, and would take it round the circle and back meanwhile), and let go once the new
process has joined the lock-step. The restarted service must go on from its last estimate composed with the odometry
since: every pose it publishes is within 0.2 m of the true pose, and its log says what it did. (It starts from the
world's start otherwise, 2 m away.)
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.runtime.launcher import runtime_dir
from pluto.runtime.profiles import load_profile
from tests.helpers import wait_until
from tests.scenarios.stack import HANG, DriveCommand, Lockstep, Script, without

pytestmark = pytest.mark.scenario

KILL_AT = 6.0
"""s of simulated time at which the localization service's process is killed."""
AFTER = 3.0
"""s of simulated time the restarted service is watched for."""
TOLERANCE = 0.2
"""m: the restored pose's largest distance from the true pose."""


def test_a_killed_localization_continues_from_its_estimate(bus: Bus, room: Path) -> None:
    profile = without(load_profile("sim"), "wrist", "sick", "gps")
    with Lockstep(bus) as stack:
        supervisor = stack.start(profile, one_process=False, world=str(room), noise="ideal", seed=1)
        stop = threading.Event()
        supervising = threading.Thread(target=supervisor.run, args=(stop,), name="supervise")
        supervising.start()
        try:
            truth = stack.collect("Sim/Truth", msgs.Odometry)
            poses = stack.collect("Localization/Pose", msgs.PoseEstimate)
            stack.add(DriveCommand(bus, 0.4, 0.2))  # a circle of 2 m radius about (5, 7), clear of the walls
            due = threading.Event()
            watch = stack.add(Script(bus, lambda now: due.set() if now >= KILL_AT else None))
            stack.resume()
            watch.wait(due)
            bus.call("sim/pause", timeout=5.0)
            child = supervisor.children["localization"]
            assert child.process is not None
            os.kill(child.process.pid, signal.SIGKILL)
            # the dead process's last pose is stamped at most at the time of the newest truth now
            killed = truth.snapshot()[-1].stamp
            # it leaves the lock-step at once (its link closes), and the new process joins it after the back-off
            wait_until(lambda: "localization" not in stack.members(), timeout=HANG, message="localization leaves")
            wait_until(lambda: "localization" in stack.members(), timeout=HANG, message="localization is back")
            bus.call("sim/resume", timeout=5.0)
            first = poses.wait_for(lambda p: p.stamp > killed, timeout=HANG)
            poses.wait_for(lambda p: p.stamp > first.stamp + AFTER, timeout=HANG)
            assert child.restarts == 1
        finally:
            stop.set()
            supervising.join(timeout=10)
        true_at = {t.stamp: t for t in truth.snapshot()}
        after = [p for p in poses.snapshot() if killed < p.stamp <= first.stamp + AFTER]
        assert after[0].stamp == first.stamp
        errors = []
        for pose in after:
            true = true_at[pose.stamp]  # the pose of an odometry reading, stamped as the base's step and truth
            errors.append(((pose.pose[0] - true.x) ** 2 + (pose.pose[1] - true.y) ** 2) ** 0.5)
        assert max(errors) < TOLERANCE, f"restored pose {max(errors):.3f} m from the truth (first {errors[0]:.3f} m)"
        start = (5.0, 5.0)
        assert ((first.pose[0] - start[0]) ** 2 + (first.pose[1] - start[1]) ** 2) ** 0.5 > 1.0  # it did drive
    log = (runtime_dir(bus.robot) / "localization.log").read_text()
    assert "resumed from the estimate of t=" in log
    assert "odometry since t=" in log
