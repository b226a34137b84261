"""A restarted simulator goes on with its run and time; the simulated base and inertial unit go on where they were
(the body's pose and odometry, the integrated heading): the other modules see the time stall, not a new run."""

from __future__ import annotations

import math

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.hardware.base.module import SimBase, SimBaseParams
from pluto.hardware.dmu.module import SimDmuModule, SimDmuParams
from pluto.runtime import persist
from pluto.sim.module import HORIZON, HORIZON_TICKS, SimModule, SimParams, SimState
from tests.gateways.clock import ManualClock


class FakeClock(ManualClock):
    """A simulated clock the test sets (time and run)."""

    def __init__(self, now: float = 0.0, run: int = 5) -> None:
        super().__init__(now)
        self.run = run


def test_the_simulator_saves_a_time_ahead_before_passing_the_one_saved(bus: Bus) -> None:
    sim = SimModule(bus, SimParams(autostart=False))
    sim.start()
    try:
        saves = sim.continuation.saves
        sim.promise(5.0, 10)
        sim.promise(5.5, 20)  # within what was saved: no save
        assert sim.continuation.saves == saves + 1
        sim.promise(6.0, 30)  # the saved time reached: a new one ahead
        assert sim.continuation.saves == saves + 2
        run = sim.run_id
    finally:
        sim.stop()
    assert persist.Continuation.of(sim, SimState).load(None, None) is None  # not a restart
    assert persist.state_path(bus.robot, "sim").exists()
    # a restart goes on with the run, at the saved time and tick: never earlier than what the modules saw
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(persist.RESUME_ENV, "1")
        again = SimModule(bus, SimParams(autostart=False, lockstep=True))
        again.start()
    try:
        assert again.run_id == run
        assert again.sim_time == 6.0 + HORIZON
        assert again.lockstep is not None
        first = again.lockstep.barrier.first(0.0)
        assert (first.run, first.number, first.stamp) == (run, 30 + HORIZON_TICKS, 6.0 + HORIZON)
    finally:
        again.stop()


def test_a_restarted_simulated_base_goes_on_with_the_body_and_its_odometry(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = SimModule(bus, SimParams(autostart=False))
    sim.start()
    clock = FakeClock()
    base = SimBase(bus, SimBaseParams(autostart=False), clock=clock)
    base.start()
    try:
        base.step(0.0)
        base.apply_command(0.8, 0.4, 0.0)
        for i in range(1, 61):
            clock.set(i * 0.05)
            base.step(clock.now())
        body = base.body
        before = (body.x, body.y, body.theta, *body.odom)
        assert math.hypot(body.odom[0], body.odom[1]) > 1.0
    finally:
        base.stop()  # a clean stop saves the body of the last step
    monkeypatch.setenv(persist.RESUME_ENV, "1")
    clock.set(4.0)
    again = SimBase(bus, SimBaseParams(autostart=False), clock=clock)
    odometry = bus.create_reader("Base/Drive/State", msgs.Odometry)
    again.start()
    try:
        body = again.body
        assert (body.x, body.y, body.theta, *body.odom) == before
        # the time of its last step (private: no public way tells it; the step below shows what it means)
        assert again._last == 3.0
        # it publishes where it was, not the world's start or odometry 0
        value = odometry.wait_for_update(timeout=5)
        assert (value.x, value.y, value.theta) == before[3:]
        again.step(4.0)  # the body went on for the second it was away (no command: it slows down)
        assert math.hypot(again.body.odom[0] - before[3], again.body.odom[1] - before[4]) < 0.8
    finally:
        bus.release(odometry)
        again.stop()
        sim.stop()


def test_a_restarted_inertial_unit_goes_on_with_its_heading(bus: Bus, monkeypatch: pytest.MonkeyPatch) -> None:
    sim = SimModule(bus, SimParams(autostart=False))
    sim.start()
    clock = FakeClock(10.0)
    dmu = SimDmuModule(bus, SimDmuParams(autostart=False), clock=clock)
    dmu.start()
    try:
        for i in range(41):
            t = i * 0.05
            # straight into the unit: through Sim/Truth the test would wait for 41 deliveries it cannot count
            dmu._measure(msgs.Odometry(stamp=t, theta=0.5 * t, v=0.5, omega=0.5))
        heading = dmu.dmu.filter.heading
        assert heading == pytest.approx(1.0)
    finally:
        dmu.stop()
    monkeypatch.setenv(persist.RESUME_ENV, "1")
    again = SimDmuModule(bus, SimDmuParams(autostart=False), clock=clock)
    again.start()
    try:
        assert again.dmu.filter.heading == heading
        # the body turned 1 rad more while the unit was away: its heading takes it in, no jump back to 0
        again._measure(msgs.Odometry(stamp=4.0, theta=2.0, v=0.5, omega=0.5))  # as above
        assert again.dmu.filter.heading == pytest.approx(2.0)
    finally:
        again.stop()
        sim.stop()
