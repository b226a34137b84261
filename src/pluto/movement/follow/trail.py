"""Following another robot along its trail: the pure logic of the follow module when its target is a robot.

A user who says "follow pluto-2" means that robot, whoever else walks by, and expects the follower to go where it
went: through the door it took, not straight at it through the wall beside the door. So the target is the robot's
own published pose (``pluto/<target>/Localization/Pose``, in the map frame both robots localize in: a simulated
robot started where the world places it, or robots on one map), not a shape in the laser, which a person or another
robot could take for it. Its positions make a *trail* (a point every ``spacing`` m), and the follower drives along
the trail, not at the robot: it steers for the first trail point it has not reached (a point within ``reach`` m is
passed) and keeps the distance along the trail, follower to aim point to each point to the target, at
``distance``. The control law is the person follower's (:mod:`pluto.movement.follow.core`) with the trail's length
for the distance and the target's speed along its trail for the feed-forward::

    v* = clip((u + k_d·(L - D)) · max(0, cos b)², 0, max_speed)      ω* = clip(k_b·b, ±max_turn_rate)

with L the length along the trail, D the distance to keep, b the bearing of the aim point and u the target's speed
(from its last poses). The laser still guards the strip ahead (the scan's points near the target do not count): a
person stepping in, or a wall the trail cuts because a pose was off, slows and stops the follower.

Statuses as the person follower's: searching (1) until the target's first pose, following (2), too close (3) when the
trail is shorter than the distance and the target does not pull away, lost (-1) when the target's pose is older than
``lost_timeout`` (its localization stopped, or it left the bus), or none came within ``search_timeout``; a stale own
pose (-3) or scan (-2) stops the robot at once.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Annotated

from pluto.geometry import relative
from pluto.movement.follow.core import (
    SEARCHING,
    TOO_CLOSE,
    FollowerBase,
    FollowInputs,
    FollowOutput,
    FollowScan,
    SharedFollowParams,
    _to_world,
)
from pluto.runtime.ranges import between

__all__ = ["TargetPose", "TrailController", "TrailParams"]


@dataclass(frozen=True)
class TargetPose:
    """The followed robot's newest published pose: stamp (s) and x, y (m), θ (rad) in the map frame."""

    stamp: float
    x: float
    y: float
    theta: float


class TrailParams(SharedFollowParams, kw_only=True, forbid_unknown_fields=True):
    """Tuning of the trail follower: what it shares with the person follower (:class:`SharedFollowParams`), and its
    own.

    Attributes:
        corridor_margin: the strip ahead checked for obstacles is robot_radius + this wide on each side, m (small:
            the trail goes through doors a robot of this size went through).
        target_radius: scan points this near the target's centre are the target, not obstacles, m.
        spacing: distance between two points of the trail, m.
        reach: a trail point this near the robot's centre is passed, m.
        max_trail: most points kept (the oldest go first), so a target far ahead cannot grow the trail for ever.
    """

    corridor_margin: Annotated[float, between(0.0, 2.0)] = 0.03
    target_radius: Annotated[float, between(0.0, 5.0, open_low=True)] = 0.7
    spacing: Annotated[float, between(0.0, 5.0, open_low=True)] = 0.1
    reach: Annotated[float, between(0.0, 5.0, open_low=True)] = 0.35
    max_trail: Annotated[int, between(2, 1_000_000)] = 2000


@dataclass
class TrailController(FollowerBase[TrailParams]):
    """Follows a robot along its trail: :meth:`start` / :meth:`stop` on commands, :meth:`step` every period (the
    interface of :class:`~pluto.movement.follow.core.FollowController`, and its lifecycle:
    :class:`~pluto.movement.follow.core.FollowerBase`)."""

    params: TrailParams = field(default_factory=TrailParams)
    trail: list[tuple[float, float]] = field(default_factory=list)
    """The target's positions still ahead of the robot, oldest first, m (map frame)."""
    _found: bool = False  # the target's pose came since the start
    _target: TargetPose | None = None
    _speed: float = 0.0  # the target's speed along its trail, m/s (smoothed)

    def start(self, distance: float, now: float) -> None:
        """Start following (again) at ``distance`` m along the trail: wait for the target's pose."""
        super().start(distance, now)
        self._found = False

    def _forget_target(self) -> None:
        self.trail = []

    def _corridor_margin(self) -> float:
        return self.params.corridor_margin

    def step(self, inputs: FollowInputs, target: TargetPose | None, now: float) -> FollowOutput:
        """One control step at ``now`` (s) with the newest pose of the target (None if none came).

        Returns:
            The velocity to command (or None) and the status.
        """
        dt = self._tick(now)
        self._take_target(target)
        self._take_scan(inputs.scan)
        waiting = self._not_following(inputs, now)
        if waiting is not None:
            return waiting
        assert inputs.pose is not None and self._target is not None
        return self._follow_trail(inputs.pose, self._target, dt)

    def _take_scan(self, scan: FollowScan | None) -> None:
        """A new scan: its points in the world, but those of the target, are the obstacles."""
        if scan is None or not scan.stamp > self._scan_stamp or scan.pose is None:
            return
        self._scan_stamp = scan.stamp
        centre = (self._target.x, self._target.y) if self._target is not None else None
        self._keep_obstacles(_to_world(scan.pose, scan.points), centre, self.params.target_radius)

    def _not_following(self, inputs: FollowInputs, now: float) -> FollowOutput | None:
        """The output when the robot does not follow the trail this step: idle (a stop once after :meth:`stop`),
        halted for a stale pose or scan, searching for the target, or lost it. None: it follows."""
        p = self.params
        waiting = self._idle_or_stale(inputs, now)
        if waiting is not None:
            return waiting
        fresh = self._target is not None and now - self._target.stamp <= p.lost_timeout
        if not self._found and not fresh:
            if now - self._search_since > p.search_timeout:
                return self._lose()
            self.code = SEARCHING
            return self._output((0.0, 0.0), SEARCHING)
        if not fresh or self._target is None:
            return self._lose()
        return None

    def _follow_trail(self, pose: tuple[float, float, float], target: TargetPose, dt: float) -> FollowOutput:
        """Drive along the trail to keep ``distance`` along it behind the target: at the target's speed plus a
        gain on the distance error, slowed when the trail turns away and before an obstacle."""
        p = self.params
        self._found = True
        if not self.trail:
            self.trail = [(target.x, target.y)]
        end = (target.x, target.y)
        while len(self.trail) > 1 and math.dist(self.trail[0], pose[:2]) < p.reach:
            self.trail.pop(0)
        aim = self.trail[0]
        length = math.dist(pose[:2], aim) + sum(math.dist(a, b) for a, b in itertools.pairwise(self.trail))
        length += math.dist(self.trail[-1], end)
        ax, ay, _ = relative(pose, (aim[0], aim[1], 0.0))
        bearing = math.atan2(ay, ax) if math.hypot(ax, ay) > 1e-6 else 0.0
        self._last = (end[0], end[1], length, bearing)
        v_goal, w_goal, code = self._law(self._speed, length, bearing)
        if code == TOO_CLOSE and math.dist(pose[:2], aim) < p.reach:
            w_goal = 0.0  # waiting on the trail: no turning on the spot towards a point it stands on
        return self._drive(pose, v_goal, w_goal, code, dt)

    # -- parts ------------------------------------------------------------------------------------------------------

    def _take_target(self, target: TargetPose | None) -> None:
        """A new pose of the target: its speed, and a trail point once it moved ``spacing`` from the last one."""
        old = self._target
        if target is None or (old is not None and target.stamp <= old.stamp):
            return
        if not all(math.isfinite(v) for v in (target.x, target.y, target.theta)):
            return
        if old is not None:
            span = target.stamp - old.stamp
            speed = math.hypot(target.x - old.x, target.y - old.y) / span
            self._speed += min(1.0, span / 0.5) * (min(speed, 2.0 * self.params.max_speed) - self._speed)
        self._target = target
        if self.active and self.trail and math.dist(self.trail[-1], (target.x, target.y)) >= self.params.spacing:
            self.trail.append((target.x, target.y))
            if len(self.trail) > self.params.max_trail:
                del self.trail[0]
