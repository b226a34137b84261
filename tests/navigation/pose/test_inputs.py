"""Scans paired with the laser poses of their time, as the pose and SLAM modules take them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pluto import msgs, names
from pluto.navigation.pose.inputs import KEEP, ScanInputs


class Subscriber:
    """Stands for a module: keeps the callback of each subscription."""

    def __init__(self) -> None:
        self.callbacks: dict[str, Callable[[Any], None]] = {}

    def create_subscription(self, name: str, callback: Callable[[Any], None], *args: Any, **kwargs: Any) -> None:
        self.callbacks[name] = callback


def fed() -> tuple[ScanInputs, Callable[[str, float], None]]:
    module = Subscriber()
    inputs = ScanInputs(module, names.SICK_SCAN_MM)  # type: ignore[arg-type]

    def send(name: str, stamp: float) -> None:
        value = msgs.LaserScan(stamp=stamp) if name == names.SICK_SCAN_MM else msgs.PoseEstimate(stamp=stamp)
        module.callbacks[name](value)

    return inputs, send


def test_a_scan_is_handed_over_once_its_dead_reckoned_pose_is_in() -> None:
    inputs, send = fed()
    send(names.SICK_SCAN_MM, 1.0)
    assert inputs.take() == []
    send(names.LOCALIZATION_LASER_DEAD_RECKONING, 1.0)
    send(names.LOCALIZATION_LASER_POSE, 1.0)
    ((stamp, scan, dr, corrected),) = inputs.take()
    assert (stamp, scan.stamp, dr.stamp) == (1.0, 1.0, 1.0) and corrected is not None
    assert inputs.take() == []  # once


def test_pairs_come_in_time_order_and_older_leftovers_are_dropped() -> None:
    inputs, send = fed()
    send(names.SICK_SCAN_MM, 0.5)  # its pose never comes
    for t in (2.0, 1.0):
        send(names.SICK_SCAN_MM, t)
        send(names.LOCALIZATION_LASER_DEAD_RECKONING, t)
    assert [p[0] for p in inputs.take()] == [1.0, 2.0]
    assert [p[3] for p in inputs.take()] == []
    send(names.LOCALIZATION_LASER_DEAD_RECKONING, 0.5)  # too late: a newer scan was used
    send(names.SICK_SCAN_MM, 0.5)
    assert inputs.take() == []


def test_a_new_run_takes_older_stamps_again_and_the_queues_are_bounded() -> None:
    inputs, send = fed()
    send(names.SICK_SCAN_MM, 5.0)
    send(names.LOCALIZATION_LASER_DEAD_RECKONING, 5.0)
    assert len(inputs.take()) == 1
    inputs.clear(new_run=True)  # the simulated time went back
    for t in range(KEEP + 10):
        send(names.SICK_SCAN_MM, float(t))
    send(names.LOCALIZATION_LASER_DEAD_RECKONING, 0.0)  # the oldest scans fell out of the bounded queue
    send(names.LOCALIZATION_LASER_DEAD_RECKONING, float(KEEP + 9))
    assert [p[0] for p in inputs.take()] == [float(KEEP + 9)]
