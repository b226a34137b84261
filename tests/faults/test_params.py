"""Absurd parameters sent to a running mission: every numeric parameter of every module set to 0, a negative value,
1e308 and nan, as `pluto param set` sends them.

A value outside the parameter's range is refused with the range in the message, and changes nothing; a value inside
it is taken. Either way every module keeps stepping, and the robot still drives to a goal afterwards.
"""

from __future__ import annotations

import math
import re
from collections.abc import Generator
from typing import Any

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.errors import RemoteError
from pluto.movement.motion.core import AT_GOAL, MOVETO
from pluto.runtime.profiles import load_profile
from tests.scenarios.stack import Collector, Lockstep, Script

pytestmark = [pytest.mark.scenario, pytest.mark.faults]

ABSURD = (0.0, -1.0, 1e308, math.nan)
RANGE = re.compile(r"[\[(]\s*-?[\d.e+-]+|inf|>=?|<=?|at least|at most|between|range|must be", re.IGNORECASE)
"""What a refusal that names the valid range says (an interval, a bound)."""


def numeric(info: dict[str, Any]) -> bool:
    return info["type"] in ("float", "int") and not isinstance(info["value"], bool)


def test_absurd_parameters_are_refused_with_their_range_and_the_robot_still_works(bus: Bus) -> None:
    refused: dict[str, list[str]] = {}
    taken: list[str] = []
    unclear: list[str] = []
    with Lockstep(bus) as sim:
        supervisor = sim.start(load_profile("mission"), seed=2)
        statuses: dict[str, Collector] = {
            "drive": sim.collect(names.DRIVE_STATUS, msgs.FVectorState),
            "avoid": sim.collect(names.AVOIDANCE_STATUS, msgs.FVectorState),
            "motion": sim.collect(names.MOTION_STATUS, msgs.FVectorState),
            "localization": sim.collect(names.LOCALIZATION_POSE, msgs.PoseEstimate),
        }
        truth = sim.collect(names.SIM_TRUTH, msgs.Odometry)
        modules = [entry.name for entry in supervisor.profile.entries]
        # while the time is held: every module takes every absurd value or refuses it
        for module in modules:
            infos = bus.call(f"{module}/list_parameters", None, list[dict[str, Any]], timeout=10.0)
            for info in infos:
                if not (numeric(info) and info["dynamic"]):
                    continue
                for value in ABSURD:
                    label = f"{module} {info['name']}={value!r}"
                    try:
                        bus.call(f"{module}/set_parameters", {info["name"]: value}, timeout=10.0)
                    except RemoteError as err:
                        refused.setdefault(module, []).append(label)
                        if not RANGE.search(str(err)):
                            unclear.append(f"{label}: {err}")
                        continue
                    taken.append(label)
                    assert not (isinstance(value, float) and math.isnan(value)), f"{label} was taken"
                    assert value != 1e308, f"{label} was taken"
                    # put it back, so the next value meets the module as configured
                    bus.call(f"{module}/set_parameters", {info["name"]: info["value"]}, timeout=10.0)
        assert not unclear, "refusals that do not give the range:\n" + "\n".join(unclear)

        def drive(now: float) -> Generator[Any, float, None]:
            writer.write(msgs.ActuatorState(stamp=now, cmd_flags=MOVETO, position=[16.0, 9.7]))
            start = now
            while now < start + 60.0:
                status = status_reader.read()
                if status is not None and status.stamp > start + 1.0 and status.element[2] == AT_GOAL:
                    return
                now = yield

        script = Script(bus, run=drive, rate_hz=10.0)
        writer = script.create_publisher(names.MOTION_COMMAND, msgs.ActuatorState)
        status_reader = script.create_reader(names.MOTION_STATUS, msgs.FVectorState)
        sim.add(script)
        sim.resume()
        script.wait()
        end = script.finished_at
        assert end is not None
        for module, collector in statuses.items():
            assert any(v.stamp > end - 1.0 for v in collector.snapshot()), f"{module} no longer steps"
        last = truth.until(end)[-1]
        assert math.hypot(last.x - 16.0, last.y - 9.7) < 0.3, f"the robot ended at ({last.x:.2f}, {last.y:.2f})"
    assert refused, "nothing was refused"
