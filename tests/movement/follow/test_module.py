"""The follow module's shell: placing scans by the late localized pose and the odometry, bad commands counted,
release passed to avoid; stepped by the test on a clock it sets."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.movement.avoid.core import HALT
from pluto.movement.follow.core import NO_POSE
from pluto.movement.follow.module import FollowModule, FollowModuleParams, pose_at
from tests.gateways.clock import ManualClock
from tests.helpers import wait_until


def test_pose_at_brings_the_late_localized_pose_up_to_date_with_the_odometry() -> None:
    # localized poses up to 1.0 s (in a frame shifted by (10, 5) and turned by 90°), odometry up to 1.2 s, the
    # robot driving along the odometry's x at 1 m/s
    poses = [(t / 10, 10.0, 5.0 + t / 10, math.pi / 2) for t in range(11)]
    odometry = [(t / 10, t / 10, 0.0, 0.0) for t in range(13)]
    assert pose_at(poses, odometry, 0.55, (1.0, 0.0)) == pytest.approx((10.0, 5.55, math.pi / 2))
    assert pose_at(poses, odometry, 1.2, (1.0, 0.0)) == pytest.approx((10.0, 6.2, math.pi / 2))
    assert pose_at(poses, odometry, 1.4, (1.0, 0.0)) == pytest.approx((10.0, 6.4, math.pi / 2))  # extrapolated
    assert pose_at(poses, [], 0.55, (0.0, 0.0)) == pytest.approx((10.0, 5.55, math.pi / 2))  # interpolated
    assert pose_at(poses, odometry, 2.0, (1.0, 0.0)) is None  # the localized pose is too old
    assert pose_at([], odometry, 0.5, (1.0, 0.0)) is None


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(10.0)


@pytest.fixture
def follow(bus: Bus, clock: ManualClock) -> Iterator[FollowModule]:
    """A follow module whose control step does not run by itself: the test calls :meth:`FollowModule.step`."""
    module = FollowModule(bus, FollowModuleParams(autostart=False), clock=clock)
    module.start()
    yield module
    module.stop()


def send(bus: Bus, flags: int, velocity: list[float]) -> None:
    writer = bus.create_publisher("follow/command", msgs.ActuatorState)
    writer.write(msgs.ActuatorState(stamp=10.0, cmd_flags=flags, velocity=velocity))
    bus.release(writer)


def test_bad_commands_are_counted_and_ignored(bus: Bus, follow: FollowModule) -> None:
    send(bus, 7, [])
    send(bus, 1, [0.2])  # a distance too short
    send(bus, 1, [math.nan])

    def counted() -> bool:
        follow.step(10.0)
        return follow.bad_commands == 3

    wait_until(counted, message="three bad commands counted")
    assert follow.core.code == 0
    send(bus, 1, [1.5])

    def started() -> bool:
        follow.step(10.1)
        return follow.core.code != 0

    wait_until(started, message="the start taken")
    assert follow.core.distance == 1.5 and follow.core.code == NO_POSE  # started; no pose yet: stopped


def test_release_is_passed_to_avoid(bus: Bus, clock: ManualClock, follow: FollowModule) -> None:
    lock = threading.Lock()
    avoid: list[msgs.ActuatorState] = []

    def on_avoid(value: msgs.ActuatorState) -> None:
        with lock:
            avoid.append(value)

    bus.create_subscription("avoidance/command", on_avoid, msgs.ActuatorState, depth=64)
    send(bus, -1, [])

    def released() -> bool:
        follow.step(10.0)
        with lock:
            return any(a.cmd_flags == -1 for a in avoid)

    wait_until(released, message="the release passed to avoid")


def test_following_commands_carry_a_lease_and_a_stale_pose_halts(
    bus: Bus, clock: ManualClock, follow: FollowModule
) -> None:
    """While following, each command to avoid has a lease (a killed follow module's command lapses); a pose older
    than ``pose_timeout`` at the module's time is no pose: avoid's halt (4), status -3, never "following"."""
    lock = threading.Lock()
    avoid: list[msgs.ActuatorState] = []

    def on_avoid(value: msgs.ActuatorState) -> None:
        with lock:
            avoid.append(value)

    bus.create_subscription("avoidance/command", on_avoid, msgs.ActuatorState, depth=64)
    pose = bus.create_publisher("Localization/Pose", msgs.PoseEstimate)
    pose.write(msgs.PoseEstimate(stamp=10.0 - follow.params.pose_timeout - 0.05, pose=[0.0] * 6))
    wait_until(lambda: follow.pose_in.read() is not None, message="the pose")
    send(bus, 1, [1.5])

    def halted() -> bool:
        follow.step(10.0)
        with lock:
            return any(a.cmd_flags == HALT for a in avoid)

    wait_until(halted, message="the halt sent to avoid")
    assert follow.core.code == NO_POSE and follow.pose_in.stale_events == 1
    with lock:
        halt = next(a for a in avoid if a.cmd_flags == HALT)
    assert halt.velocity == [0.0, 0.0] and halt.lease == pytest.approx(4 / follow.params.rate_hz)
