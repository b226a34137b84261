"""The motion manager: runs motions side by side, gives each an id, blends their outputs, reports their events.

    manager = MotionManager(num_outputs=6)
    motion_id = manager.add(player, now, current, owner=client)     # posts ACTIVATE
    values = manager.step(now, current)                            # every frame: NaN where nothing drives a joint
    for event in manager.take_events(): ...                        # STATUS when done, DEACTIVATE when removed

Event meanings (the reference's motion-manager events): *activate* when a motion is added; *status* when a
sequence has finished playing or a posture has reached its target (or timed out); *deactivate* when the motion is
removed, pruned after its status or stopped. Each event carries the ``owner`` given to :meth:`MotionManager.add`,
so a server can send it to the client that asked.
"""

# Strategy: ids are slot numbers 0..63, as in the reference (at most 64 motions at once); the next id is the first
# free slot after the last one given, so an id is not reused at once and a late event is not mistaken for a newer
# motion's. Outputs blend by weight: an output's value is the weighted mean of the motions driving it (weight > 0),
# and an output no motion drives is left alone (NaN), so the arm holds it. The manager is pure (times and joint
# values are passed in) and not thread-safe: its owner holds a lock.

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pluto.errors import PlutoError
from pluto.hardware.arm.playback import Motion

__all__ = ["MAX_MOTIONS", "MotionEvent", "MotionEventKind", "MotionManager", "MotionManagerFull", "RunningMotion"]

FloatArray = NDArray[np.float64]

MAX_MOTIONS = 64
"""Motions that can run at once (ids are 0 .. MAX_MOTIONS - 1)."""


class MotionManagerFull(PlutoError):
    """No free motion slot: MAX_MOTIONS motions are running."""


class MotionEventKind(Enum):
    """What happened to a motion."""

    ACTIVATE = "ACTIVATE"
    STATUS = "STATUS"
    DEACTIVATE = "DEACTIVATE"


@dataclass(frozen=True)
class MotionEvent:
    """An event of a motion: its id, what happened, when (s), and the owner given when it was added."""

    id: int
    kind: MotionEventKind
    time: float
    owner: Any = None


@dataclass(frozen=True)
class RunningMotion:
    """A running motion as :meth:`MotionManager.running` lists it."""

    id: int
    description: str
    owner: Any
    started: float


class MotionManager:
    """Runs motions and blends their outputs (see the module's description).

    Args:
        num_outputs: joints of the arm.
        max_motions: slots (ids 0 .. max_motions - 1).
    """

    def __init__(self, num_outputs: int, max_motions: int = MAX_MOTIONS) -> None:
        self.num_outputs = num_outputs
        self.max_motions = max_motions
        self._motions: dict[int, tuple[Motion, Any, float]] = {}
        self._events: list[MotionEvent] = []
        self._last_id = -1

    def add(self, motion: Motion, now: float, current: FloatArray, owner: Any = None) -> int:
        """Start ``motion`` at ``now`` from the joint values ``current``; return its id (posts ACTIVATE).

        Raises:
            MotionManagerFull: every slot is taken.
        """
        for k in range(1, self.max_motions + 1):
            candidate = (self._last_id + k) % self.max_motions
            if candidate not in self._motions:
                break
        else:
            raise MotionManagerFull(f"{self.max_motions} motions are running; stop one first")
        motion.start(now, np.asarray(current, dtype=np.float64))
        self._motions[candidate] = (motion, owner, now)
        self._last_id = candidate
        self._events.append(MotionEvent(candidate, MotionEventKind.ACTIVATE, now, owner))
        return candidate

    def remove(self, motion_id: int, now: float) -> bool:
        """Stop a motion (posts DEACTIVATE); False if no motion has that id."""
        entry = self._motions.pop(motion_id, None)
        if entry is None:
            return False
        self._events.append(MotionEvent(motion_id, MotionEventKind.DEACTIVATE, now, entry[1]))
        return True

    def step(self, now: float, current: FloatArray) -> FloatArray | None:
        """One frame: the blended joint values to command, NaN for joints no motion drives; None if no motion runs.

        Motions that are done post STATUS and are then removed (DEACTIVATE), after their last output.
        """
        if not self._motions:
            return None
        joints = np.asarray(current, dtype=np.float64)
        total = np.zeros(self.num_outputs)
        weighted = np.zeros(self.num_outputs)
        for motion, _owner, _started in self._motions.values():
            values, weights = motion.outputs(now)
            use = weights > 0.0
            total[use] += weights[use]
            weighted[use] += weights[use] * values[use]
        command = np.full(self.num_outputs, math.nan)
        driven = total > 0.0
        command[driven] = weighted[driven] / total[driven]
        for motion_id in sorted(self._motions):
            motion, owner, _started = self._motions[motion_id]
            if motion.done(now, joints):
                self._events.append(MotionEvent(motion_id, MotionEventKind.STATUS, now, owner))
                self.remove(motion_id, now)
        return command

    def take_events(self) -> list[MotionEvent]:
        """The events since the last call, in the order they happened."""
        events, self._events = self._events, []
        return events

    def running(self) -> list[RunningMotion]:
        """The running motions, by id."""
        return [
            RunningMotion(motion_id, motion.description, owner, started)
            for motion_id, (motion, owner, started) in sorted(self._motions.items())
        ]

    def __len__(self) -> int:
        return len(self._motions)

    def __contains__(self, motion_id: object) -> bool:
        return motion_id in self._motions
