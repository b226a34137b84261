"""A scripted route for the simulated robot: drive through waypoints (until the movement chain drives it).

The follower turns on the spot toward the next waypoint when it is far off the heading, otherwise drives toward it
while correcting the heading, and slows down when the sonar sees something close ahead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pluto.geometry import wrap_angle


@dataclass(frozen=True)
class RouteCommand:
    """What the follower asks of the base, and where it is on the route."""

    v: float
    omega: float
    waypoint: int
    done: bool


class RouteFollower:
    """Follows waypoints (x, y) in m, in the frame of the pose it is given.

    Args:
        speed: cruise speed, m/s.  turn_rate: largest turn rate, rad/s.  tolerance: reach distance, m.
        slow_distance, stop_distance: sonar ranges ahead, m, below which it slows down and stops.
    """

    def __init__(
        self,
        waypoints: Sequence[tuple[float, float]],
        speed: float = 0.8,
        turn_rate: float = 1.0,
        tolerance: float = 0.3,
        slow_distance: float = 1.0,
        stop_distance: float = 0.25,
    ) -> None:
        if not waypoints:
            raise ValueError("a route needs at least one waypoint")
        self.waypoints = list(waypoints)
        self.speed, self.turn_rate, self.tolerance = speed, turn_rate, tolerance
        self.slow_distance, self.stop_distance = slow_distance, stop_distance
        self.index = 0

    def step(self, pose: tuple[float, float, float], clearance_ahead: float = math.inf) -> RouteCommand:
        """The command for a robot at ``pose`` (x, y, θ) with ``clearance_ahead`` m free in front of it."""
        x, y, theta = pose
        while self.index < len(self.waypoints):
            gx, gy = self.waypoints[self.index]
            distance = math.hypot(gx - x, gy - y)
            if distance > self.tolerance:
                break
            self.index += 1
        else:
            return RouteCommand(0.0, 0.0, self.index, True)
        error = wrap_angle(math.atan2(gy - y, gx - x) - theta)
        omega = max(-self.turn_rate, min(self.turn_rate, 2.0 * error))
        if abs(error) > 0.6:
            return RouteCommand(0.0, omega, self.index, False)
        v = min(self.speed, 0.8 * distance + 0.1) * math.cos(error)
        if clearance_ahead < self.slow_distance:
            span = self.slow_distance - self.stop_distance
            v *= max(0.0, (clearance_ahead - self.stop_distance) / span) if span > 0 else 0.0
        return RouteCommand(v, omega, self.index, False)
