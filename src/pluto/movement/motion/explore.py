"""Explore (docs/design.md, "motion"): the rectangle is covered by the laser on a grid of ``explore_cell`` m cells;
the robot goes, by ray following (:mod:`.moveto`), to the nearest safe place next to unseen cells, looking around
at each, until none is left (or ``explore_max_targets`` were gone to); then the job turns to the way home.

    order, wrist, code, unfold = explore_step(follower, job, inputs, scan, now)
    if job.phase == "home": ...   # covered: the controller sends the robot home (a moveto, then the home heading)
"""

from __future__ import annotations

import math

from .codes import MotionStatus
from .jobs import Job
from .moveto import Nav, RayFollower
from .params import MotionParams
from .values import AvoidOrder, MotionInputs, Scan, stop

__all__ = ["explore_step"]


def explore_step(
    follower: RayFollower, job: Job, inputs: MotionInputs, scan: Scan | None, now: float
) -> tuple[AvoidOrder | None, tuple[float, float] | None, int, bool]:
    """One step of an exploration at ``now`` (s): the command for avoid, the wrist target, element[3] and whether
    to unfold the arm (never). ``job.phase`` is "home" when the rectangle is covered."""
    p = follower.params
    pose = inputs.pose
    assert pose is not None and job.grid is not None
    if scan is not None and abs(scan.tilt) < 0.05:
        origin, bearings, ranges, _ = scan.world(pose)
        job.grid.add_scan(origin, bearings, ranges, scan.max_range)
        if job.view_since is not None and scan.stamp >= job.view_since:
            job.view_seen = True
    if job.nav is not None:
        order, wrist, code = follower.step(job.nav, inputs, scan, now)
        if job.nav.phase not in ("done", "failed"):
            return order, wrist, code, False
        job.tried.append(job.nav.goal)
        job.nav = None
        job.phase, job.view, job.view_since, job.view_seen = "look", 0, None, False
    if job.phase == "look":
        view = _look(p, job, inputs, now)
        if view is not None:
            return None, view, MotionStatus.SCANNING, False
    targets = [
        t
        for t in job.grid.frontier_targets(p.robot_radius, p.explore_reach, p.explore_min_cells)
        if all(math.hypot(t[0] - a, t[1] - b) > p.explore_reach for a, b in job.tried)
    ]
    if not targets or job.targets >= p.explore_max_targets:
        job.phase = "home"
        return stop(), (0.0, 0.0), MotionStatus.SCANNING, False
    best = min(targets, key=lambda t: math.hypot(t[0] - pose[0], t[1] - pose[1]) - 0.05 * t[2])
    job.targets += 1
    job.nav = Nav((best[0], best[1]), False, phase_since=now, best_time=now)
    return stop(), (0.0, 0.0), MotionStatus.SCANNING, False


def _look(params: MotionParams, job: Job, inputs: MotionInputs, now: float) -> tuple[float, float] | None:
    """Look around where the robot stands: left, right, ahead, each for ``look_time`` once the wrist is there and a
    scan was taken from it. Returns the wrist's view (pan, tilt) while looking; None once done (``job.phase`` is then
    "pick")."""
    p = params
    views = [(p.look_pan, 0.0), (-p.look_pan, 0.0), (0.0, 0.0)]
    pan, tilt = views[job.view]
    at = inputs.wrist is None or (
        abs(inputs.wrist[0] - pan) < p.wrist_tolerance and abs(inputs.wrist[1] - tilt) < p.wrist_tolerance
    )
    if at and job.view_since is None:
        job.view_since = now
    if job.view_since is not None and job.view_seen and now - job.view_since >= p.look_time:
        job.view, job.view_since, job.view_seen = job.view + 1, None, False
        if job.view >= len(views):
            job.phase = "pick"
            return None
        pan, tilt = views[job.view]
    return pan, tilt
