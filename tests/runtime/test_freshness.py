"""The freshness contract of states: a module's reader knows how old a value may be (from the writer's declared period
in the interface table) and treats an older one as absent, by the stamp against the module's own clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.runtime.module import Module, ModuleParams
from tests.gateways.clock import ManualClock


def test_stale_after_is_the_latency_plus_a_few_writer_periods() -> None:
    assert names.stale_after(names.BASE_DRIVE_STATE) == pytest.approx(names.STALE_PERIODS * 0.1)
    # the pose comes a quarter of a second late (it waits for the inertial unit): that is not staleness
    assert names.stale_after(names.LOCALIZATION_POSE) == pytest.approx(0.25 + names.STALE_PERIODS * 0.05)
    assert names.stale_after(names.SICK_SCAN_MM) == pytest.approx(0.2 + names.STALE_PERIODS * 0.2)
    assert names.stale_after(names.CLOCK) is None  # no declared period: no deadline
    assert names.stale_after("no/such/interface") is None
    # every state the movement chain steers by has one
    for topic in (names.DRIVE_STATUS, names.AVOIDANCE_STATUS, names.MOTION_STATUS, names.WRIST_STATE):
        assert names.stale_after(topic) is not None


def test_a_modules_reader_judges_a_state_by_its_stamp_against_the_module_clock(
    bus: Bus, make_bus: Callable[..., Bus]
) -> None:
    writer_bus = make_bus()
    pose_out = writer_bus.create_publisher(names.LOCALIZATION_POSE)
    clock = ManualClock(100.0)
    module = Module(bus, ModuleParams(autostart=False), name="judge", clock=clock)
    module.start()
    try:
        pose = module.create_reader(names.LOCALIZATION_POSE)
        own = module.create_reader(names.LOCALIZATION_POSE, deadline=2.0)
        command = module.create_reader(names.DRIVE_COMMAND)
        assert pose.deadline == names.stale_after(names.LOCALIZATION_POSE)
        assert own.deadline == 2.0
        assert command.deadline is None  # a command's age is measured on arrival (max_age), not by a deadline
        assert pose.fresh(100.0) is None and pose.stale_events == 0  # nothing yet: absent, not stale

        pose_out.write(msgs.PoseEstimate(stamp=99.8))
        value = pose.wait_for_value(5.0)
        assert pose.fresh(100.0) == value  # 0.2 s old: fresh
        assert module.stale_notes() == []

        clock.set(100.5)  # 0.7 s old: past the 0.45 s deadline
        assert pose.fresh(clock.now()) is None
        assert pose.stale and pose.stale_events == 1
        assert own.fresh(clock.now()) == value  # its own deadline of 2 s
        assert pose.fresh(clock.now() + 1.0) is None and pose.stale_events == 1  # still the same loss
        notes = module.stale_notes()
        assert len(notes) == 1 and "stale input Localization/Pose" in notes[0] and "0.70 s old" in notes[0]
        assert any("stale input Localization/Pose" in note for note in module.info().notes)

        pose_out.write(msgs.PoseEstimate(stamp=100.5))  # fresh again: used again
        pose.wait_for_update(5.0)
        assert pose.fresh(clock.now()) is not None and not pose.stale
        clock.set(101.5)
        assert pose.fresh(clock.now()) is None and pose.stale_events == 2  # lost a second time
    finally:
        module.stop()


def test_a_reader_refuses_a_deadline_that_is_not_positive(bus: Bus) -> None:
    with pytest.raises(ValueError, match="deadline"):
        bus.create_reader(names.LOCALIZATION_POSE, deadline=0.0)
