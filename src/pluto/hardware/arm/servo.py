"""The open-loop joint model both arm backends share: where the servos are driven to, from the commands alone.

A serial servo controller gives no feedback, so the arm's state is what was commanded. A command is a group move,
as on the SSC-32: every joint it names starts from where it is driven now and moves linearly to its target, and all
of them arrive together after the longest of: the move time, each joint's distance over its commanded speed, and
each joint's distance over its servo's top speed (infinite for the SSC-32, which does not know the servos).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["ArmBackend", "JointRamps"]

FloatArray = NDArray[np.float64]


class JointRamps:
    """Joint positions moving along straight ramps toward their commanded targets.

    Args:
        initial: joint values at the start, rad or m, (n,).
        max_speed: top speed of each joint, rad/s or m/s, (n,) (inf: no limit).
        lower, upper: joint limits; targets are held within them, (n,).
    """

    def __init__(self, initial: ArrayLike, max_speed: ArrayLike, lower: ArrayLike, upper: ArrayLike) -> None:
        self._from = np.array(initial, dtype=np.float64)
        self.target = self._from.copy()
        self.max_speed = np.asarray(max_speed, dtype=np.float64)
        self.lower = np.asarray(lower, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        self._start = 0.0
        self._duration = 0.0

    def command(self, targets: ArrayLike, speeds: ArrayLike | None, move_time: float, now: float) -> float:
        """Start a group move at ``now`` s.

        Args:
            targets: new targets, (n,); NaN keeps a joint's current target.
            speeds: largest speed per joint, rad/s or m/s, (n,), or None; 0, NaN or inf mean no limit.
            move_time: the time the move should take at least, s.
            now: the time, s.

        Returns:
            The time the move will take, s.
        """
        goal = np.asarray(targets, dtype=np.float64)
        here = self.position(now)
        new = np.where(np.isnan(goal), self.target, np.clip(goal, self.lower, self.upper))
        distance = np.abs(new - here)
        limit = self.max_speed.copy()
        if speeds is not None:
            asked = np.asarray(speeds, dtype=np.float64)
            valid = np.isfinite(asked) & (asked > 0.0)
            limit = np.where(valid, np.minimum(limit, np.where(valid, asked, math.inf)), limit)
        with np.errstate(divide="ignore", invalid="ignore"):
            times = np.where(distance > 0.0, distance / limit, 0.0)
        self._duration = max(float(move_time) if math.isfinite(move_time) else 0.0, float(times.max(initial=0.0)))
        self._from, self.target, self._start = here, new, now
        return self._duration

    def position(self, now: float) -> FloatArray:
        """Where every joint is driven at ``now``, (n,)."""
        if self._duration <= 0.0:
            return self.target.copy()
        f = min(1.0, max(0.0, (now - self._start) / self._duration))
        return self._from + f * (self.target - self._from)

    def velocity(self, now: float) -> FloatArray:
        """The joints' speeds along the ramp at ``now``, rad/s or m/s, (n,)."""
        if self._duration <= 0.0 or not self._start <= now < self._start + self._duration:
            return np.zeros_like(self.target)
        return (self.target - self._from) / self._duration

    def moving(self, now: float) -> bool:
        """A ramp is still under way at ``now``."""
        return self._duration > 0.0 and now < self._start + self._duration


class ArmBackend(Protocol):
    """What the arm module needs of a backend (the SSC-32 controller, the simulated arm)."""

    def command(self, targets: FloatArray, speeds: FloatArray | None, move_time: float, now: float) -> None:
        """Move toward ``targets`` (NaN: keep), at most at ``speeds``, taking at least ``move_time`` s."""
        ...

    def position(self, now: float) -> FloatArray:
        """The joint values the arm is driven to at ``now`` (what was commanded), rad or m."""
        ...

    def velocity(self, now: float) -> FloatArray:
        """The joint speeds along the commanded ramps at ``now``, rad/s or m/s."""
        ...

    def close(self) -> None:
        """Release the link (idempotent)."""
        ...
