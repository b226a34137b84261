"""The ways a robot may take towards a goal, and their costs: the planning of ray following (:mod:`.moveto`).

    way = choose_way(points, scans, pose, goal, seen, rect, params)   # a Candidate, or None
    cost = way_cost(target, travel, goal, known, params)              # m

Strategy (docs/design.md, "motion"): from the scans of one decision two kinds of ways are weighed: free rays (strips
as wide as the robot plus a margin, every ``ray_step`` of the directions seen, cut at the rectangle) and openings
(doorways: the edges where the range jumps up and down again). Each way is scored by the length to its best point
plus the straight distance from there to the goal, doubled when the scans show a wall between them; rooms bend the
scores (a doorway into a room the goal is not in is no progress, one out of a room the goal is not in always is).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pluto.geometry import wrap_angle

from .geometry import (
    Gap,
    Rectangle,
    detour,
    enclosed,
    find_gaps,
    free_area,
    free_length,
    segment_blocked,
    squeezed,
)
from .params import MotionParams

__all__ = ["Candidate", "choose_way", "way_cost"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Candidate:
    """A way the robot may take.

    Attributes:
        kind: "ray" or "door".
        target: where it leads, m (for a door: a point beyond it).
        cost: estimated length of the whole way to the goal, m.
        bearing: its direction from the robot, rad (pose frame).
        gap: the opening, for a door.
    """

    kind: str
    target: tuple[float, float]
    cost: float
    bearing: float
    gap: Gap | None = None


def way_cost(
    target: tuple[float, float],
    travel: float,
    goal: tuple[float, float],
    known: FloatArray,
    params: MotionParams,
    gap: Gap | None = None,
    in_room: bool = False,
) -> float:
    """Estimated length (m) of the way to ``goal`` through ``target``: ``travel`` m to get there, then the straight
    distance to the goal times ``unknown_weight`` (what lies beyond is less sure: of two ways the one that goes
    farther along what is known to be free wins), plus, when the echoes ``known`` show a wall on that straight line,
    the way round the wall as far as it is seen (:func:`detour`), at least ``blocked_penalty`` (a wall seen beside a
    street usually has openings further on) and at most ``detour_max``. Beyond a narrow doorway
    (``gap`` narrower than ``door_max``) lies a room: a goal more than ``room_reach`` m aside from the doorway's axis,
    or on the near side of its wall, is most likely not in it, and the straight distance counts double; unless the
    robot is ``in_room`` itself: then the doorway is the way out."""
    p = params
    rest = math.hypot(goal[0] - target[0], goal[1] - target[1])
    cost = travel + p.unknown_weight * rest
    if rest > 0.3:
        around = detour(known, target, goal, p.robot_radius + 0.1, 2 * p.robot_radius + 0.04)
        if around > 0.0:
            cost += min(max(p.blocked_penalty, around), p.detour_max)
    if gap is not None and not in_room and _not_behind(gap, goal, p):
        cost += rest + p.blocked_penalty
    return cost


def _not_behind(gap: Gap, goal: tuple[float, float], params: MotionParams) -> bool:
    """Whether ``goal`` is most likely not in the room behind a narrow doorway: more than ``room_reach`` m aside from
    its axis, or on the near side of its wall. A wide opening has no room behind it (False)."""
    if gap.width >= params.door_max:
        return False
    mx, my = gap.middle
    aside = abs(-gap.normal[1] * (goal[0] - mx) + gap.normal[0] * (goal[1] - my))
    beyond = gap.normal[0] * (goal[0] - mx) + gap.normal[1] * (goal[1] - my)
    return aside > params.room_reach or beyond < 0.0


def choose_way(
    points: FloatArray,
    scans: list[tuple[tuple[float, float], FloatArray, FloatArray]],
    pose: tuple[float, float, float],
    goal: tuple[float, float],
    seen: NDArray[np.bool_],
    rect: Rectangle,
    params: MotionParams,
    avoid: Sequence[tuple[float, float]] = (),
    known: FloatArray | None = None,
) -> Candidate | None:
    """The best way towards ``goal`` from the scans of one decision.

    Args:
        points: (N, 2) echoes of the scans, m (pose frame).
        scans: per scan (origin, beam ends (M, 2) in beam order, their ranges (M,); beams without an echo end far
            away), for openings.
        pose: the robot, (x m, y m, θ rad).
        goal: m.
        seen: (K,) which of K equal sectors of world bearing (from -π) the scans covered.
        rect: bounds the way ends.
        params: tuning.
        avoid: places already reached or passed: ways ending within 1 m of one cost 3 m more (no going back and
            forth).
        known: every echo remembered (walls seen at earlier decisions too), for :func:`way_cost`; default ``points``.

    Returns:
        The cheapest candidate that ends nearer the goal (by the straight distance round the walls seen on it); if
        none does (a dead end), the cheapest of all; None if there is no way at all.
    """
    p = params
    x, y, th = pose
    here = math.hypot(goal[0] - x, goal[1] - y)
    walls = points if known is None else known
    candidates: list[tuple[bool, Candidate]] = []
    k = len(seen)
    in_room = free_area(scans, (x, y)) < p.room_area
    # in a room, with a wall between the robot and the goal: the goal is outside, and every ray ends in the room
    # (a doorway is the way out; rays only bring another view of the room when no doorway is seen)
    shut_in = in_room and here > p.room_reach and segment_blocked(walls, (x, y), goal, p.robot_radius)

    def remaining(start: tuple[float, float]) -> float:
        """The straight distance to the goal, round the walls seen on it (:func:`detour`)."""
        straight = math.hypot(goal[0] - start[0], goal[1] - start[1])
        return straight + detour(walls, start, goal, p.robot_radius + 0.1, 2 * p.robot_radius + 0.04)

    here_remaining = remaining((x, y))

    def add(
        kind: str, target: tuple[float, float], travel: float, bearing: float, gap: Gap | None, inside: bool = False
    ) -> None:
        c = way_cost(target, travel, goal, walls, p, gap, inside) + 0.3 * abs(wrap_angle(bearing - th))
        if shut_in and kind == "ray":
            # a ray ends in the room: the straight distance from its end is no estimate of the way round the wall
            c += p.blocked_penalty + math.hypot(goal[0] - target[0], goal[1] - target[1])
        if any(math.hypot(target[0] - a, target[1] - b) < 1.0 for a, b in avoid):
            c += 3.0
        # a doorway out of a room the goal is not in is progress wherever it lies; one into a room the goal is not in
        # is none however near it lies
        progress = remaining(target) < here_remaining - 0.3 or (shut_in and kind == "door")
        if gap is not None and not inside and _not_behind(gap, goal, p):
            progress = False
        candidates.append((progress, Candidate(kind, target, c, bearing, gap)))

    def add_rays(margin: float) -> None:
        n_rays = round(2 * math.pi / p.ray_step)
        for i in range(n_rays):
            phi = -math.pi + (i + 0.5) * 2 * math.pi / n_rays
            if not seen[int((phi + math.pi) / (2 * math.pi) * k) % k]:
                continue
            length = free_length(points, (x, y), phi, p.robot_radius + margin, p.ray_max)
            if rect.set:
                length = min(length, rect.exit_distance(x, y, phi) - p.robot_radius)
            usable = length - p.stop_short
            if usable < 0.5:
                continue
            u = (math.cos(phi), math.sin(phi))
            t = min(max((goal[0] - x) * u[0] + (goal[1] - y) * u[1], 0.0), usable)
            if t < 0.5:
                t = min(usable, 1.5)  # leads away from the goal: a way out of a dead end
            add("ray", (x + t * u[0], y + t * u[1]), t, phi, None)

    add_rays(p.ray_margin)
    for origin, echo, ranges in scans:
        for gap in find_gaps(echo, ranges, origin, 2 * p.robot_radius + 0.04, 2.5, p.gap_jump):
            target = gap.point(1.0)
            if not rect.contains(*target, margin=p.robot_radius):
                continue
            mx, my = gap.middle
            narrow = gap.width < p.door_max
            # an opening seen through a narrow one (the doorway across the corridor, or a jamb of a doorway paired
            # with one across the corridor behind it): the way to it is the narrow one, weighed on its own
            if narrow:
                others = np.hypot(points[:, 0] - mx, points[:, 1] - my) > 1.0  # not the doorway itself
                if squeezed(points[others], (x, y), (mx, my), p.door_max):
                    continue
            elif segment_blocked(points, (x, y), (mx, my), p.robot_radius + 0.1):
                continue
            inside = in_room or (narrow and enclosed(walls, gap, p.room_side))
            add("door", target, math.hypot(mx - x, my - y) + 1.0, math.atan2(my - y, mx - x), gap, inside)
    if not any(c.kind == "ray" for _, c in candidates):
        # no way at all between the obstacles with the usual margin: strips barely wider than the robot
        add_rays(p.ray_margin_tight)
    if not candidates:
        return None
    forward = [c for ok, c in candidates if ok]
    return min(forward or [c for _, c in candidates], key=lambda c: c.cost)
