"""The simulated laser module's step: when it scans, and from which true pose; its fault service."""

from __future__ import annotations

from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.errors import RemoteError
from pluto.hardware.sick.module import SimSick, SimSickParams, _WristHistory
from pluto.hardware.sick.sim import SimLaser
from pluto.sim.device import TruthHistory
from pluto.sim.module import SimModule, SimParams
from pluto.sim.raycast import RayCaster
from tests.gateways.clock import ManualClock
from tests.hardware.sick.test_sim import BOX, CENTRE


class Written:
    """A publisher that keeps what is written."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def write(self, value: Any) -> None:
        self.values.append(value)


def bare_sick() -> SimSick:
    """The module's step state without a bus: the box world, an ideal laser, empty histories. A module is made with a
    bus, so this sets what configuring would, private scheduling state included (no public way makes one bare)."""
    sick = object.__new__(SimSick)
    sick.params = SimSickParams()
    sick.world = BOX
    sick.laser = SimLaser(RayCaster(BOX.segments(), BOX.circles))
    sick.history = TruthHistory()
    sick.wrist_history = _WristHistory()
    sick.scan_181, sick.scan_mm, sick.timing = Written(), Written(), Written()  # type: ignore[assignment]
    sick._next_arrival = None
    sick._fault_done = False
    return sick


def truth(t: float, x: float) -> msgs.Odometry:
    """The robot on the box's middle line (y = 5 m), heading for its east wall (x = 10 m)."""
    return msgs.Odometry(stamp=t, x=x, y=5.0, theta=0.0, v=1.0)


def test_a_scan_waits_for_the_true_pose_of_its_time() -> None:
    """On a busy machine the base's true poses come late: the scan is taken once the pose of its centre time is
    known, never from an older pose stamped with the newer time."""
    sick = bare_sick()
    latency = sick.laser.params.latency
    sick.history.add(truth(0.0, 0.0))
    sick.step(1.0)  # the first step sets the schedule: a scan centred at 1 s arrives one latency later
    sick.step(1.0 + latency)
    assert sick.scan_mm.values == []  # type: ignore[attr-defined]  # no true pose after 0 s yet: it waits
    sick.history.add(truth(1.4 + latency, 1.4 + latency))  # the base catches up (1 m/s along x)
    sick.step(1.4 + latency)
    (scan,) = sick.scan_mm.values  # type: ignore[attr-defined]
    assert scan.stamp == pytest.approx(1.0)  # the centre time of the scan that was due
    assert scan.arrival == pytest.approx(1.4 + latency)  # it came late
    # taken from where the robot was at 1 s (x = 1 m): the wall ahead is at x = 10 m
    ahead = scan.ranges[CENTRE]
    assert ahead == pytest.approx(10.0 - 1.0 - sick.laser.params.mount_x, abs=0.02)


def test_a_scan_gives_up_waiting_after_a_second() -> None:
    sick = bare_sick()
    latency = sick.laser.params.latency
    sick.history.add(truth(0.0, 0.0))
    sick.step(1.0)
    sick.step(1.0 + latency)
    assert sick.scan_mm.values == []  # type: ignore[attr-defined]
    sick.step(2.5)  # no newer true pose for more than a second: the newest one known is used
    (scan,) = sick.scan_mm.values  # type: ignore[attr-defined]
    assert scan.ranges[CENTRE] == pytest.approx(10.0 - sick.laser.params.mount_x, abs=0.02)


def test_the_wrist_is_taken_at_the_scans_own_time() -> None:
    """The pan at a scan's centre is interpolated between the wrist's reports, as the localization service does
    when it places the scan: a panning wrist must not turn the scan by a step of its motion."""
    history = _WristHistory()
    assert history.at(1.0) == (0.0, 0.0)  # no wrist: straight ahead
    history.add(msgs.ActuatorState(stamp=1.0, position=[0.4, 0.1]))
    history.add(msgs.ActuatorState(stamp=1.05, position=[0.3, 0.0]))
    assert history.at(1.0) == pytest.approx((0.4, 0.1))
    assert history.at(1.04) == pytest.approx((0.32, 0.02))
    assert history.at(0.5) == pytest.approx((0.4, 0.1)) and history.at(2.0) == pytest.approx((0.3, 0.0))


def test_scans_are_centred_on_the_clocks_grid() -> None:
    """The scan times are the schedule's, without the drift of summing 0.2 s (9.6 s, not 9.599999999999998 s)."""
    sick = bare_sick()
    period = sick.laser.params.period
    now = 0.0
    sick.step(now)
    for _ in range(300):
        now = round(now + 0.05, 9)
        sick.history.add(truth(now, 0.0))
        sick.step(now)
    stamps = [scan.stamp for scan in sick.scan_mm.values]  # type: ignore[attr-defined]
    assert len(stamps) > 50
    assert all(s == round(s, 9) for s in stamps)  # exactly on the grid, as the other devices' stamps are
    assert all(abs(s / period - round(s / period)) < 1e-9 for s in stamps)


@pytest.mark.parametrize(("duration", "text"), [(999999999, "999999999"), (-5.0, "-5"), (float("nan"), "nan")])
def test_a_fault_out_of_range_is_refused_naming_the_field_and_the_laser_serves_on(
    bus: Bus, duration: float, text: str
) -> None:
    sim = SimModule(bus, SimParams(autostart=False))
    sim.start()
    clock = ManualClock(10.0)
    sick = SimSick(bus, SimSickParams(autostart=False), clock=clock)
    sick.start()
    try:
        with pytest.raises(RemoteError) as refused:
            bus.call("sick/fault", {"duration": duration}, float, timeout=10)
        message = str(refused.value)
        assert "bad request to sick/fault" in message and f"duration = {text}" in message
        assert "(0, 3600]" in message  # the range it must be in
        assert not sick.laser.failed(10.0)  # the scanner was not touched
        [service] = [s for s in sick.services if s.name == "sick/fault"]
        assert service.failed == 1
        # the module serves on: an hour is the longest fault, and no duration is the reboot time
        assert bus.call("sick/fault", {"duration": 3600.0}, float, timeout=10) == pytest.approx(3610.0)
        assert bus.call("sick/fault", None, float, timeout=10) == pytest.approx(10.0 + sick.params.reboot_time)
        assert service.failed == 1 and service.served == 2
    finally:
        sick.stop()
        sim.stop()
