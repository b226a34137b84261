"""The follow controller on synthetic scans: choosing the person, the commands it gives for where they are, and
stopping on stale input, a lost person, a stop command or an obstacle."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from pluto.movement.follow.core import (
    FOLLOWING,
    IDLE,
    LOST,
    NO_POSE,
    NO_SCAN,
    SEARCHING,
    TOO_CLOSE,
    FollowController,
    FollowInputs,
    FollowOutput,
    FollowParams,
    FollowScan,
    parse_distance,
)
from pluto.movement.follow.detect import scan_points
from tests.movement.follow.scans import ANGLES, MAX_RANGE, cast, noisy

MOUNT = 0.25
Discs = Sequence[tuple[float, float, float]]


def scan_of(
    t: float,
    pose: tuple[float, float, float],
    discs: Discs,
    walls: Sequence[tuple[float, float, float, float]] = (),
    seed: int = 0,
) -> FollowScan:
    """The scan a robot at ``pose`` takes at ``t`` of discs and walls given in the world frame."""
    x, y, th = pose
    origin = (x + MOUNT * math.cos(th), y + MOUNT * math.sin(th), th)
    ranges = noisy(cast(origin, discs, walls), np.random.default_rng(seed + int(t * 100)))
    points, _ = scan_points(ranges, ANGLES, 0.0, MOUNT, MAX_RANGE)
    return FollowScan(t, points, (MOUNT, 0.0), pose)


class Run:
    """Steps a controller at 10 Hz with a scan every 0.2 s (each 0.2 s old when it arrives) of a world that moves
    as ``world(t)`` says, the robot standing at ``pose``."""

    def __init__(self, world: Callable[[float], Discs], pose: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> None:
        self.controller = FollowController(FollowParams())
        self.world = world
        self.pose = pose
        self.t = 0.0
        self.scans = True
        self.poses = True
        self.outputs: list[FollowOutput] = []
        self.walls: Sequence[tuple[float, float, float, float]] = ()

    def step(self, seconds: float) -> FollowOutput:
        end = self.t + seconds
        out = self.outputs[-1] if self.outputs else None
        while self.t < end - 1e-9:
            self.t = round(self.t + 0.1, 6)
            scan = None
            if self.scans and self.t >= 0.4:
                stamp = round(math.floor((self.t - 0.2) / 0.2 + 1e-9) * 0.2, 6)
                scan = scan_of(stamp, self.pose, self.world(stamp), self.walls)
            self._scan = scan if scan is not None else getattr(self, "_scan", None)
            inputs = FollowInputs(
                pose=self.pose if self.poses else None,
                pose_stamp=self.t - 0.05 if self.poses else -math.inf,
                scan=self._scan,
            )
            out = self.controller.step(inputs, self.t)
            self.outputs.append(out)
        assert out is not None
        return out


def walking_away(speed: float, start: float = 1.5, y: float = 0.0) -> Callable[[float], Discs]:
    return lambda t: [(start + speed * t, y, 0.25)]


def test_parse_distance() -> None:
    assert parse_distance([], 1.0) == 1.0
    assert parse_distance([0.0], 1.2) == 1.2
    assert parse_distance([2.5, 9.0], 1.0) == 2.5
    for bad in (0.3, 6.0, math.nan, math.inf, -1.0):
        with pytest.raises(ValueError, match="follow distance"):
            parse_distance([bad], 1.0)


def test_idle_until_started_then_searches_then_follows_the_walker() -> None:
    run = Run(walking_away(0.5))
    out = run.step(1.0)
    assert out.code == IDLE and out.velocity is None
    run.controller.start(1.0, run.t)
    out = run.step(0.1)
    assert out.code in (SEARCHING, FOLLOWING)
    out = run.step(2.0)
    assert out.code == FOLLOWING
    v, w = out.velocity or (0.0, 0.0)
    # 2 m ahead and walking away at 0.5 m/s: catch up, straight on
    assert v > 0.4 and abs(w) < 0.1
    x, y, d, b, _, _ = out.data
    assert math.dist((x, y), (1.5 + 0.5 * run.t, 0.0)) < 0.1  # predicted to now, from scans 0.2-0.4 s old
    assert d == pytest.approx(math.hypot(x, y), abs=1e-6) and abs(b) < 0.05
    speeds = [o.data[4] for o in run.outputs if o.velocity is not None]
    assert max(abs(b - a) for a, b in itertools.pairwise(speeds)) <= 0.5 * 0.1 + 1e-9  # smooth


def test_turns_towards_a_person_to_the_left() -> None:
    run = Run(lambda t: [(2.0 + 0.5 * t, 1.5, 0.25)])
    run.controller.start(1.0, 0.0)
    out = run.step(2.0)
    assert out.code == FOLLOWING
    assert out.velocity is not None and out.velocity[1] > 0.3


def test_a_moving_person_is_preferred_to_a_nearer_standing_one() -> None:
    run = Run(lambda t: [(1.2, -0.3, 0.25), (2.5 + 0.5 * t, 0.6, 0.25)])
    run.controller.start(1.0, 0.0)
    out = run.step(1.5)
    assert out.code == FOLLOWING
    assert out.data[1] > 0.3  # the walker on the left, not the one standing nearer on the right


def test_a_standing_person_near_in_front_is_taken_after_a_while_but_a_pillar_far_off_never() -> None:
    near = Run(lambda t: [(1.8, 0.1, 0.25)])
    near.controller.start(1.0, 0.0)
    assert near.step(1.5).code == SEARCHING
    assert near.step(1.5).code == FOLLOWING
    far = Run(lambda t: [(3.0, 0.0, 0.3)])
    far.controller.start(1.0, 0.0)
    assert far.step(9.0).code == SEARCHING
    out = far.step(2.0)
    assert out.code == LOST and out.velocity is None  # searched for 10 s: lost, stopped (the stop written once)
    assert any(o.code == LOST and o.velocity == (0.0, 0.0) for o in far.outputs)


def test_too_close_keeps_the_robot_stopped() -> None:
    run = Run(lambda t: [(0.85, 0.0, 0.25)])  # stands 0.85 m from the robot's centre, nearer than 1 m
    run.controller.start(1.0, 0.0)
    out = run.step(3.0)
    assert out.code == TOO_CLOSE and out.velocity is not None
    assert all(o.data[4] == 0.0 for o in run.outputs)  # it may turn to face the person, never drive


def test_a_person_coming_nearer_stops_the_robot() -> None:
    run = Run(lambda t: [(2.0 + 0.5 * t, 0.0, 0.25)] if t < 2.0 else [(3.0 - 0.5 * (t - 2.0), 0.0, 0.25)])
    run.controller.start(1.0, 0.0)
    assert run.step(2.0).data[4] > 0.2
    out = run.step(3.0)  # now 1.5 m and coming at 0.5 m/s: braked, though farther than the set distance
    assert out.data[4] == 0.0 and out.code == FOLLOWING
    out = run.step(1.2)  # 0.9 m
    assert out.data[4] == 0.0 and out.code == TOO_CLOSE


def test_stale_scan_or_pose_stops_at_once_and_following_goes_on_after() -> None:
    run = Run(walking_away(0.5))
    run.controller.start(1.0, 0.0)
    assert run.step(3.0).data[4] > 0.3
    run.scans = False
    out = run.step(0.5)  # the last scan is 0.7 s old, then older
    assert out.code == NO_SCAN and out.velocity == (0.0, 0.0) and out.halt  # avoid's halt: at once
    run.scans = True
    assert run.step(0.5).code == FOLLOWING
    run.poses = False
    out = run.step(0.1)
    assert out.code == NO_POSE and out.velocity == (0.0, 0.0) and out.halt
    run.poses = True
    assert run.step(0.3).code == FOLLOWING


def test_a_person_out_of_sight_is_lost_and_the_robot_stays_stopped() -> None:
    run = Run(
        lambda t: [(1.5 + 0.5 * t, 0.0, 0.25)] if t < 3.0 else [] if t < 6.0 else [(2.0 + 0.5 * (t - 6.0), 0.0, 0.25)]
    )
    run.controller.start(1.0, 0.0)
    assert run.step(3.0).code == FOLLOWING
    out = run.step(2.0)  # unseen since 2.8-3.0 s: lost 2 s later
    assert out.code == FOLLOWING
    out = run.step(1.0)
    assert out.code == LOST
    lost = [o for o in run.outputs if o.code == LOST]
    assert lost[0].velocity == (0.0, 0.0) and all(o.velocity is None for o in lost[1:])
    out = run.step(3.0)  # the person is back in view, 2 m ahead: still lost until started again
    assert out.code == LOST and out.velocity is None
    run.controller.start(1.0, run.t)
    assert run.step(1.0).code == FOLLOWING


def test_a_person_beyond_the_largest_distance_counts_as_unseen() -> None:
    run = Run(walking_away(1.5))  # the robot does not move here: the person is soon beyond 4 m
    run.controller.start(1.0, 0.0)
    assert run.step(1.0).code == FOLLOWING
    run.step(4.0)
    assert run.controller.code == LOST


def test_stop_writes_one_stop_then_nothing() -> None:
    run = Run(walking_away(0.5))
    run.controller.start(1.0, 0.0)
    run.step(2.0)
    run.controller.stop()
    first = run.step(0.1)
    assert first.velocity == (0.0, 0.0) and first.code == IDLE
    assert run.step(0.1).velocity is None


def test_an_obstacle_ahead_stops_the_robot_but_the_person_does_not() -> None:
    run = Run(walking_away(0.5))
    run.controller.start(1.0, 0.0)
    assert run.step(2.5).data[4] > 0.3  # nothing but the person ahead: full speed
    blocked = Run(walking_away(0.5))
    blocked.walls = [(0.6, 0.3, 0.6, 0.45)]  # a board left of the person's line, in the robot's way, 0.2 m ahead
    blocked.controller.start(1.0, 0.0)
    out = blocked.step(2.5)
    assert out.code == FOLLOWING and out.data[4] == 0.0
