"""Odometry calibration on the simulated robot (lock-step, one process): wheels that count 4 % too far, the
calibration run in front of the room's east wall through the drive and the pose module's find wall, then a base
started with the file written reports distances the truth agrees with.

The run is the procedure ``pluto pose calibrate`` carries out (:class:`~pluto.navigation.pose.calibrate.CalibrationRun`
and :func:`~pluto.navigation.pose.calibrate.fit_calibration`), stepped by a script at simulated times.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.hardware.base.server import load_odometry_correction
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from pluto.navigation.pose.calibrate import (
    FIND_WALL_REQUEST,
    CalibrationParams,
    CalibrationRun,
    fit_calibration,
    write_calibration,
)
from pluto.navigation.pose.module import PoseModule, PoseModuleParams
from pluto.runtime.profiles import load_profile, with_params
from tests.scenarios.stack import DriveCommand, Lockstep, Script, without

pytestmark = pytest.mark.scenario

SEED = 4
DISTANCE_ERROR = 0.04  # the wheels count 1.04 m for every metre driven
NOISE = {"odometry_distance_error": DISTANCE_ERROR, "laser_range_std": 0.005}


def calibrate(bus: Bus, room: Path, output: Path) -> tuple[Any, CalibrationRun]:
    """The calibration run in lock-step; returns the result and the run."""
    with Lockstep(bus) as sim:
        sim.start(without(load_profile("sim"), "gps"), world=str(room), noise_overrides=NOISE, seed=SEED)
        sim.add(DriveModule(bus, DriveModuleParams(use_sim_time=True)))
        pose: PoseModule = sim.add(PoseModule(bus, PoseModuleParams(map=str(room), use_sim_time=True)))
        statuses = sim.collect("pose/status", msgs.FVectorState)
        previous: dict[str, Any] = bus.call("base/calibration", None, dict, timeout=5.0)
        calibration = CalibrationRun(CalibrationParams(distance=1.0, speed=0.3, legs=2))

        pose_period = 1.0 / pose.params.rate_hz

        def run(now: float) -> Generator[None, float, None]:
            seen = 0
            asking = False
            while True:
                values = statuses.snapshot()  # all the values written before this tick
                decision = calibration.step(now, odometry.read(), values[seen:])
                seen = len(values)
                if decision.done:
                    return
                command.write(msgs.ActuatorState(cmd_flags=10, velocity=[decision.v, decision.omega]))
                asking = asking or decision.ask_wall
                # The pose module keeps only the newest pose/status value between its steps, its own status
                # included: a request written at a tick where it writes too may come before its status and be lost.
                # Ask between its steps.
                if asking and abs(now / pose_period - round(now / pose_period)) > 1e-6:
                    ask.write(FIND_WALL_REQUEST)
                    asking = False
                now = yield

        script = Script(bus, run=run, rate_hz=50.0)
        command = script.publisher("drive/command", msgs.ActuatorState)
        ask = script.publisher("pose/status", msgs.FVectorState)
        odometry = script.reader("Base/Drive/State", msgs.Odometry)
        sim.add(script)
        sim.resume()
        script.wait()
    result = fit_calibration(calibration.samples, previous)
    write_calibration(output, result, datetime.datetime.now(datetime.UTC))
    return result, calibration


def drive_straight(bus: Bus, room: Path, calibration_file: Path) -> tuple[float, float]:
    """Drive 2 m with a base started with ``calibration_file``: (distance the odometry says, true distance)."""
    profile = with_params(
        without(load_profile("sim"), "localization", "gps", "dmu", "wrist", "sick"),
        "base",
        calibration_file=str(calibration_file),
    )
    with Lockstep(bus) as sim:
        sim.start(profile, world=str(room), noise_overrides=NOISE, seed=SEED)
        odometry = sim.collect("Base/Drive/State", msgs.Odometry)
        truth = sim.collect("Sim/Truth", msgs.Odometry)
        drive = sim.add(DriveCommand(bus, 0.5, 0.0, until=5.0))
        sim.resume()
        drive.wait()
        end = drive.finished_at or 0.0
        o, t = odometry.until(end), truth.until(end)
    return (
        math.hypot(o[-1].x - o[0].x, o[-1].y - o[0].y),
        math.hypot(t[-1].x - t[0].x, t[-1].y - t[0].y),
    )


def test_calibration_recovers_the_distance_scale_and_the_base_applies_it(bus: Bus, room: Path, tmp_path: Path) -> None:
    output = tmp_path / "robot" / "calibration.toml"
    result, calibration = calibrate(bus, room, output)
    true_scale = 1.0 / (1.0 + DISTANCE_ERROR)
    assert [s.kind for s in calibration.samples] == ["start"] + ["drive"] * 4 + ["turn"] * 4
    assert all(s.wall.points > 50 for s in calibration.samples)  # the east wall each time
    assert result.distance_scale == pytest.approx(true_scale, rel=0.01)
    assert result.distance_scale_std < 0.005
    assert result.heading_gain == pytest.approx(1.0, abs=0.02)  # the turns are counted right
    correction = load_odometry_correction(output)
    assert correction.distance_scale == result.distance_scale

    said, true = drive_straight(bus, room, output)
    assert true > 1.5
    assert said == pytest.approx(true, rel=0.01)
    assert said / correction.distance_scale == pytest.approx(true * (1.0 + DISTANCE_ERROR), rel=0.005)  # the wheels'
