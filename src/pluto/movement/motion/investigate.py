"""Investigate (docs/design.md, "motion"): the robot goes to the closest object the laser sees (element[3] = 11),
asks for the arm to be unfolded if there is one, and circles the object once, counter-clockwise, the object on its
left (element[3] = 12).

    order, wrist, code, unfold = investigate_step(follower, job, inputs, scan, now)
    if job.phase in ("lost", "done"): ...   # no object in reach, or circled once: the controller ends the job
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from pluto.geometry import wrap_angle

from .codes import LASER_GOTO, LASER_VELOCITY, MotionStatus
from .geometry import echo_points
from .jobs import Job
from .moveto import Nav, RayFollower
from .values import AvoidOrder, MotionInputs, Scan, stop

__all__ = ["closest_object", "investigate_step"]

FloatArray = NDArray[np.float64]
Step = tuple[AvoidOrder | None, tuple[float, float] | None, int, bool]
"""The command for avoid, the wrist target, element[3] and whether to unfold the arm."""


def investigate_step(follower: RayFollower, job: Job, inputs: MotionInputs, scan: Scan | None, now: float) -> Step:
    """One step of an investigation at ``now`` (s). ``job.phase``: find, approach, circle; then "lost" (no object
    within ``investigate_range``) or "done" (circled once), with element[3] left to the controller."""
    pose = inputs.pose
    assert pose is not None
    if job.phase == "find":
        return _find(follower, job, pose, scan, now)
    if job.phase == "approach":
        assert job.nav is not None and job.nav.target is not None
        order = follower.goto_step(job.nav, inputs, now, job.nav.target, on_stuck="scan")
        if job.nav.phase == "follow":
            return order, (0.0, 0.0), MotionStatus.TOWARDS_OBJECT, False
        job.phase = "circle"
        job.last_angle = None
        job.swept = 0.0
        unfold = inputs.has_arm and not job.arm_asked
        job.arm_asked = True
        return stop(), (0.0, 0.0), MotionStatus.CIRCLING, unfold
    return _circle(follower, job, pose)


def _find(follower: RayFollower, job: Job, pose: tuple[float, float, float], scan: Scan | None, now: float) -> Step:
    """Find the closest object in a level scan and set off to a point ``circle_clearance`` from it."""
    p = follower.params
    x, y, _ = pose
    if scan is None or abs(scan.tilt) > 0.05:
        return stop(), (0.0, 0.0), MotionStatus.TOWARDS_OBJECT, False
    origin, bearings, ranges, ok = scan.world(pose)
    obj = closest_object(echo_points(origin, bearings, ranges, ok), (x, y), p.investigate_range)
    if obj is None:
        job.phase = "lost"
        return stop(), (0.0, 0.0), MotionStatus.IDLE, False
    job.object = obj
    cx, cy, r = obj
    radius = r + p.robot_radius + p.circle_clearance
    d = math.hypot(x - cx, y - cy)
    stand = (cx + (x - cx) / d * radius, cy + (y - cy) / d * radius)
    job.phase = "approach"
    job.nav = Nav(stand, False, phase="follow", phase_since=now, best_time=now, target=stand, sent=now)
    return AvoidOrder(LASER_GOTO, stand, (0.4, p.turn_rate), (1.0,)), (0.0, 0.0), MotionStatus.TOWARDS_OBJECT, False


def _circle(follower: RayFollower, job: Job, pose: tuple[float, float, float]) -> Step:
    """Circle the object counter-clockwise, the object on the left, until the robot has gone round once."""
    p = follower.params
    x, y, th = pose
    assert job.object is not None
    cx, cy, r = job.object
    radius = r + p.robot_radius + p.circle_clearance
    angle = math.atan2(y - cy, x - cx)
    if job.last_angle is not None:
        job.swept += wrap_angle(angle - job.last_angle)
    job.last_angle = angle
    if job.swept >= 2 * math.pi:
        job.phase = "done"
        return stop(), (0.0, 0.0), MotionStatus.IDLE, False
    d = math.hypot(x - cx, y - cy)
    heading = angle + math.pi / 2 + max(-0.6, min(0.6, 1.2 * (d - radius)))
    err = wrap_angle(heading - th)
    v = p.circle_speed * max(0.0, math.cos(err))
    w = max(-0.8, min(0.8, 1.5 * err + v / radius))
    return AvoidOrder(LASER_VELOCITY, (), (v, w)), (0.0, 0.0), MotionStatus.CIRCLING, False


def closest_object(
    points: FloatArray, origin: tuple[float, float], max_range: float
) -> tuple[float, float, float] | None:
    """The object nearest to ``origin`` among the echoes (m): the points within 0.4 m of one another around the
    nearest echo; a cluster longer than 2 m is a wall and skipped. Returns (centre x, centre y, radius), m."""
    if len(points) == 0:
        return None
    d = np.hypot(points[:, 0] - origin[0], points[:, 1] - origin[1])
    order = np.argsort(d)
    used = np.zeros(len(points), dtype=bool)
    for start in order:
        if d[start] > max_range:
            return None
        if used[start]:
            continue
        member = np.zeros(len(points), dtype=bool)
        member[start] = True
        frontier = [int(start)]
        while frontier:
            i = frontier.pop()
            near = (~member) & (np.hypot(points[:, 0] - points[i, 0], points[:, 1] - points[i, 1]) < 0.4)
            member |= near
            frontier.extend(int(j) for j in np.flatnonzero(near))
        used |= member
        cluster = points[member]
        extent = float(np.max(np.hypot(cluster[:, 0] - cluster[0, 0], cluster[:, 1] - cluster[0, 1])))
        if extent > 2.0 or len(cluster) < 3:
            continue
        cx, cy = float(cluster[:, 0].mean()), float(cluster[:, 1].mean())
        radius = max(0.1, 0.5 * extent)
        dx, dy = cx - origin[0], cy - origin[1]
        dist = math.hypot(dx, dy)
        # the echoes are on the near side: the centre lies farther by about the radius
        return cx + dx / dist * 0.5 * radius, cy + dy / dist * 0.5 * radius, radius
    return None
