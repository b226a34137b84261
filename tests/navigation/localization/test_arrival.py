"""The dead reckoning fuses its inputs by their stamps: the same streams arriving in different orders (late or bunched
inertial data, odometry in bursts, random interleaving) give exactly the same poses, covariances and laser poses."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from pluto.navigation.localization.core import DeadReckoning, LocalizationParams

RATE = 50.0  # Hz, of odometry, the inertial unit and the wrist
T0 = 1000.0  # stamp of the first odometry sample, s
DURATION = 8.0  # s
SPEED = 0.5  # m/s
TURN = (0.1, 4.1)  # the robot turns 90 degrees at a constant rate between these times after T0, s
OMEGA = (math.pi / 2) / (TURN[1] - TURN[0])  # rad/s
ODOMETRY_SCALE = 1.15  # the odometry overestimates turns by 15 %: its heading drifts, the inertial one is right
DMU_OFFSET = 0.3  # the inertial unit's integrated heading starts elsewhere than the robot's, rad
START = (1.0, -2.0, 0.3)  # x, y (m), θ (rad)


@dataclass(frozen=True)
class Event:
    """One input message: its source, stamp (s), values, and when it comes on an idle machine (``due``, s)."""

    source: str
    stamp: float
    values: tuple[float, ...]
    due: float


def true_heading(s: float) -> float:
    """The robot's true heading change since the start, ``s`` seconds after T0 (rad)."""
    return OMEGA * (min(max(s, TURN[0]), TURN[1]) - TURN[0])


def true_rate(s: float) -> float:
    return OMEGA if TURN[0] <= s < TURN[1] else 0.0


def streams() -> list[Event]:
    """Odometry, inertial states and wrist angles at 50 Hz (each source at its own phase) and scan timings at 5 Hz,
    in stamp order of arrival on an idle machine (a scan's timing comes 0.2 s after its centre time)."""
    events: list[Event] = []
    n = int(DURATION * RATE)
    x = y = 0.0
    theta_prev = 0.0
    for k in range(n + 1):
        s = k / RATE
        # the base integrates its own (drifting) heading along the path
        theta = ODOMETRY_SCALE * true_heading(s)
        if k > 0:
            mid = 0.5 * (theta_prev + theta)
            x += SPEED / RATE * math.cos(mid)
            y += SPEED / RATE * math.sin(mid)
        theta_prev = theta
        events.append(Event("odometry", T0 + s, (x, y, theta), T0 + s))
        sd = s + 0.007  # the inertial unit runs in another process, at another phase
        dmu = (DMU_OFFSET + true_heading(sd), 0.03 * math.sin(0.7 * sd), 0.01 * math.cos(0.5 * sd), true_rate(sd))
        events.append(Event("dmu", T0 + sd, dmu, T0 + sd))
        sw = s + 0.013
        events.append(Event("wrist", T0 + sw, (0.4 * math.sin(0.9 * sw), -0.1 + 0.05 * math.sin(0.4 * sw)), T0 + sw))
    centre = 0.1037
    while centre < DURATION - 0.3:
        events.append(Event("scan", T0 + centre, (), T0 + centre + 0.2))
        centre += 0.2
    return sorted(events, key=lambda e: e.due)


@dataclass(frozen=True)
class Outcome:
    """Everything the dead reckoning gave, as plain floats (compared exactly)."""

    steps: tuple[tuple[float, ...], ...]  # every odometry step: stamp, pose, covariance, absolute covariance
    pose: tuple[float, ...]
    covariance: tuple[float, ...]
    lasers: tuple[tuple[float, ...], ...]  # every scan: stamp, laser pose, increment, absolute covariance
    dmu_steps: int
    odometry_only_steps: int


def run(events: Sequence[Event]) -> tuple[Outcome, DeadReckoning]:
    """Feed ``events`` in this order, placing each scan as soon as the dead reckoning can (as the module does)."""
    dr = DeadReckoning(start=START)
    scans: list[float] = []
    lasers: list[tuple[float, ...]] = []

    def place() -> None:
        scans.sort()
        while scans and (laser := dr.scan(scans[0])) is not None:
            scans.pop(0)
            lasers.append(
                (laser.stamp, *laser.pose, *laser.increment.ravel().tolist(), *laser.absolute.ravel().tolist())
            )

    for event in events:
        if event.source == "odometry":
            assert dr.add_odometry(event.stamp, *event.values)
        elif event.source == "dmu":
            assert dr.add_dmu(event.stamp, *event.values)
        elif event.source == "wrist":
            assert dr.add_wrist(event.stamp, *event.values)
        else:
            scans.append(event.stamp)
        place()
    dr.flush()  # the streams ended
    place()
    assert not scans and dr.waiting == 0
    steps = []
    for event in events:
        if event.source == "odometry":
            at = dr.pose_at(event.stamp)
            assert at is not None
            steps.append((at.stamp, *at.pose, *at.covariance.ravel().tolist(), *at.absolute.ravel().tolist()))
    steps.sort()
    pose = dr.pose()
    outcome = Outcome(
        tuple(steps),
        pose.pose,
        tuple(pose.covariance.ravel().tolist()),
        tuple(lasers),
        dr.counters.dmu_steps,
        dr.counters.odometry_only_steps,
    )
    return outcome, dr


def in_stamp_order(events: list[Event], rng: np.random.Generator) -> list[Event]:
    return list(events)


def dmu_late_in_bunches(events: list[Event], rng: np.random.Generator) -> list[Event]:
    """Inertial states come in bunches of 10, each bunch 0.1-0.3 s after its newest state: 0.1-0.48 s late."""
    dmu = [e for e in events if e.source == "dmu"]
    moved: dict[int, float] = {}
    for first in range(0, len(dmu), 10):
        bunch = dmu[first : first + 10]
        due = bunch[-1].stamp + float(rng.uniform(0.1, 0.3))
        for e in bunch:
            moved[id(e)] = due
    return sorted(events, key=lambda e: moved.get(id(e), e.due))


def odometry_in_bursts(events: list[Event], rng: np.random.Generator) -> list[Event]:
    """Odometry comes in bursts of 20 samples, each burst with its newest sample."""
    odometry = [e for e in events if e.source == "odometry"]
    moved: dict[int, float] = {}
    for first in range(0, len(odometry), 20):
        burst = odometry[first : first + 20]
        for e in burst:
            moved[id(e)] = burst[-1].due
    return sorted(events, key=lambda e: moved.get(id(e), e.due))


def random_interleaving(events: list[Event], rng: np.random.Generator) -> list[Event]:
    """Every message up to 0.4 s late at random, each source still in its own order (as on the bus)."""
    due: dict[int, float] = {}
    newest: dict[str, float] = {}
    for e in events:
        late = max(newest.get(e.source, -math.inf), e.due + float(rng.uniform(0.0, 0.4)))
        newest[e.source] = due[id(e)] = late
    return sorted(events, key=lambda e: due[id(e)])


ORDERS: dict[str, Callable[[list[Event], np.random.Generator], list[Event]]] = {
    "dmu_late_in_bunches": dmu_late_in_bunches,
    "odometry_in_bursts": odometry_in_bursts,
    "random_interleaving": random_interleaving,
}


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_arrival_order_changes_nothing(order: str) -> None:
    events = streams()
    reference, _ = run(in_stamp_order(events, np.random.default_rng(0)))
    for seed in (1, 2, 3):
        arrival = ORDERS[order](events, np.random.default_rng(seed))
        assert arrival != events  # the order really differs
        outcome, dr = run(arrival)
        assert dr.counters.late_dmu == dr.counters.late_odometry == dr.counters.late_scans == 0
        assert outcome.lasers == reference.lasers
        assert outcome.steps == reference.steps
        assert outcome == reference


def test_late_inertial_data_still_gives_the_inertial_heading() -> None:
    events = streams()
    outcome, dr = run(dmu_late_in_bunches(events, np.random.default_rng(4)))
    # the fused heading turned as the inertial unit did, not as the (drifting) odometry did
    dmu = [e for e in events if e.source == "dmu"]
    dmu_turn = dmu[-1].values[0] - dmu[0].values[0]  # the robot stands still in heading at both ends
    fused_turn = dr.pose().pose[3] - START[2]
    odometry_turn = ODOMETRY_SCALE * true_heading(DURATION)
    assert math.degrees(dmu_turn) == pytest.approx(90.0, abs=1e-9)
    assert abs(math.degrees(fused_turn - dmu_turn)) < 0.5
    assert abs(math.degrees(odometry_turn - fused_turn)) > 10.0  # the check above means something
    assert outcome.odometry_only_steps == 0 and outcome.dmu_steps == int(DURATION * RATE)


def test_without_the_inertial_unit_odometry_goes_on_alone_after_the_wait() -> None:
    dr = DeadReckoning(start=START)
    wait = dr.params.dmu_wait
    odometry = [e for e in streams() if e.source == "odometry"]
    for k, event in enumerate(odometry):
        assert dr.add_odometry(event.stamp, *event.values)
        if event.stamp - T0 <= wait:
            # waiting for an inertial unit that may still come
            assert not dr.started and dr.waiting == k + 1 and dr.received_stamp == event.stamp
            with pytest.raises(LookupError):
                dr.pose()
        else:
            # no inertial state within the wait: odometry alone, each sample at once from now on
            assert dr.started and dr.waiting == 0 and dr.latest_stamp == event.stamp
    assert not dr.dmu_ok
    assert dr.counters.dmu_steps == 0 and dr.counters.odometry_only_steps == len(odometry) - 1
    x, y, theta = odometry[-1].values
    c, s = math.cos(START[2]), math.sin(START[2])
    pose = dr.pose().pose
    assert pose[3] == pytest.approx(START[2] + theta, abs=1e-12)
    assert (pose[0], pose[1]) == pytest.approx((START[0] + c * x - s * y, START[1] + s * x + c * y), abs=1e-9)
    # a scan does not wait for a wrist that never came either
    laser = dr.scan(odometry[-10].stamp)
    assert laser is not None and laser.pose[6:] == (0.0, 0.0)


def test_odometry_waits_for_the_inertial_state_at_its_stamp() -> None:
    dr = DeadReckoning(LocalizationParams(dmu_gap=0.2))  # states up to 0.2 s apart interpolated straight
    assert dr.add_dmu(0.0, 0.0, rate_z=1.0)
    assert dr.add_odometry(0.0, 0.0, 0.0, 0.0)
    assert dr.latest_stamp == 0.0
    assert dr.add_dmu(0.2, 0.2)
    assert dr.add_dmu(0.05, 0.02)  # older than the newest, but no step needs it yet: sorted in
    assert dr.add_odometry(0.1, 0.1, 0.0, 0.0)
    assert dr.waiting == 0 and dr.latest_stamp == 0.1
    assert dr.pose().pose[3] == pytest.approx(0.08, abs=1e-12)  # interpolated between 0.05 and 0.2
    # a state older than an integrated step cannot change it: counted as late (sorted in all the same)
    assert dr.add_dmu(0.08, 5.0)
    assert dr.counters.late_dmu == 1 and dr.pose().pose[3] == pytest.approx(0.08, abs=1e-12)
    assert not dr.add_dmu(0.08, 5.0)  # a duplicate: dropped
    assert dr.counters.late_dmu == 2
    # odometry ahead of the inertial unit waits for it...
    assert dr.add_odometry(0.2, 0.2, 0.0, 0.0) and dr.latest_stamp == 0.2
    for k in range(3, 8):
        assert dr.add_odometry(k / 10, k / 10, 0.0, 0.0)
    assert dr.waiting == 5 and dr.latest_stamp == 0.2 and dr.received_stamp == 0.7
    # ...until it is more than dmu_wait (0.5 s) ahead of the newest inertial state: the unit has stopped
    assert dr.add_odometry(0.8, 0.8, 0.0, 0.0)
    assert dr.waiting == 0 and dr.latest_stamp == 0.8
    assert dr.counters.dmu_steps == 7 and dr.counters.odometry_only_steps == 1  # extrapolated up to dmu_timeout
    assert not dr.dmu_ok


def test_a_scan_waits_for_the_wrist_and_flush_ends_every_wait() -> None:
    dr = DeadReckoning()
    assert dr.add_wrist(0.0, 0.0, -0.1)
    assert dr.add_dmu(0.0, 0.0)
    for k in range(4):
        assert dr.add_odometry(k / 10, k / 10, 0.0, 0.0)
    assert dr.latest_stamp == 0.0 and dr.waiting == 3
    assert dr.add_dmu(0.25, 0.0)
    assert dr.latest_stamp == 0.2 and dr.waiting == 1
    assert dr.scan(0.3) is None  # odometry has not reached it
    assert dr.scan(0.1) is None  # the wrist's angles at 0.1 may still come
    assert dr.add_wrist(0.2, 0.4, -0.1)
    laser = dr.scan(0.1)
    assert laser is not None and laser.pose[6:] == pytest.approx((0.2, -0.1))
    # the inputs stop: what waits is taken with what there is
    assert dr.flush()
    assert dr.waiting == 0 and dr.latest_stamp == 0.3
    late = dr.scan(0.25)
    assert late is not None and late.pose[6:] == pytest.approx((0.4, -0.1))
    assert not dr.flush()  # nothing left


def test_an_inertial_unit_that_starts_late_is_waited_for_once_it_is_there() -> None:
    """The unit comes 2 s after the odometry, its states stamped 0.1 s back (its filter's delay), so each comes after
    the odometry at its stamp: the first ones are too late for steps taken without it, yet from then on the steps
    wait for it and take its heading."""
    dr = DeadReckoning()
    delay = 0.1
    for k in range(301):
        t = k / RATE
        theta = 0.2 * t  # turning; the odometry and the unit agree here
        dr.add_odometry(t, 0.0, 0.0, 1.5 * theta)  # the odometry's heading is off by 50 %
        if t >= 2.0:
            dr.add_dmu(t - delay, 0.2 * (t - delay), rate_z=0.2)
    assert dr.counters.late_dmu > 0  # the first states came after the steps at their stamps
    assert dr.dmu_ok and dr.counters.dmu_steps > 150
    assert dr.waiting == int(delay * RATE)  # the newest odometry waits for the states at its stamps
    # odometry alone up to the unit's first state (about 2 s), then the unit: the heading turned by 1.5 x 0.2 x 2
    # and then 0.2 per second
    heading = dr.pose().pose[3]
    assert heading == pytest.approx(1.5 * 0.2 * 2.0 + 0.2 * (dr.latest_stamp - 2.0), abs=0.005)


def test_no_wait_takes_each_sample_as_it_comes() -> None:
    dr = DeadReckoning(LocalizationParams(dmu_wait=0.0, wrist_wait=0.0))
    assert dr.add_odometry(0.0, 0.0, 0.0, 0.0) and dr.started  # no inertial unit yet: not waited for
    assert dr.add_dmu(0.05, 0.05, rate_z=1.0)
    assert dr.add_odometry(0.1, 0.1, 0.0, 0.1) and dr.waiting == 0
    assert dr.add_odometry(0.2, 0.2, 0.0, 0.15) and dr.waiting == 0
    # the first step on the odometry's heading (no inertial reference yet); then the state at 0.05 carried on by the
    # odometry's heading change since 0.05 (0.1 at 0.1, 0.15 at 0.2), not by the state's rate (which would give 0.2)
    assert dr.pose().pose[3] == pytest.approx(0.1 + 0.05, abs=1e-12)
    assert dr.scan(0.15) is not None  # nor is the wrist waited for
    with pytest.raises(ValueError):
        LocalizationParams(dmu_wait=-0.1)
