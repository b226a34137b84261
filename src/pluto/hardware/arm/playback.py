"""Playing motions: a motion sequence with per-joint keyframe interpolation, and a posture held until reached.

Both follow the same small protocol the motion manager drives: ``start(now, current)`` once, then every frame
``outputs(now)`` (the value and weight of every output), ``done(now, current)`` (True once the motion has finished
playing or reached its target) and ``description``. Times are the module clock's, in s; values are rad or m.
"""

# Strategy: each output of a sequence gets its own arrays of keyframe times, values and weights, and np.interp
# gives value and weight at the playhead, which also holds the last keyframe's value after it (the reference: "joints
# hold their last value at the end"). Before the first keyframe of an output nothing is commanded unless the file
# set a time-0 keyframe. Values the parser left unknown (NaN: the time-0 keyframe, a joint a loadExplicit released)
# become the arm's position when playback starts, so a motion starts from wherever the arm is. A posture is done
# when every joint it drives is within the tolerance of its target, judged on the arm's state (which on an open-loop
# arm is what was commanded), or when the timeout has passed: the reference's PostureMC posts its status either way.

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from pluto.hardware.arm.motion import MotionSequence, Posture

__all__ = ["Motion", "PosturePlayer", "SequencePlayer"]

FloatArray = NDArray[np.float64]

DEFAULT_TOLERANCE = 0.035
"""Distance of every joint to its target at which a posture counts as reached, rad (m for prismatic joints: 1 mm)."""
DEFAULT_TIMEOUT = 2.0
"""Time after which a posture counts as done even if not reached, s."""


class Motion(Protocol):
    """What the motion manager needs of a motion."""

    @property
    def description(self) -> str:
        """What it is, one word then details (``SEQUENCE wave.mot``, ``POSTURE IKP 7``)."""
        ...

    def start(self, now: float, current: FloatArray) -> None:
        """Begin playing at ``now`` s from the joint values ``current``."""
        ...

    def outputs(self, now: float) -> tuple[FloatArray, FloatArray]:
        """(values, weights) of every output at ``now``; weight 0 leaves an output to others."""
        ...

    def done(self, now: float, current: FloatArray) -> bool:
        """The motion has finished playing or reached its target (its status is due)."""
        ...


class SequencePlayer:
    """Plays a :class:`~pluto.hardware.arm.motion.MotionSequence` on ``num_outputs`` outputs.

    Args:
        sequence: the parsed sequence.
        num_outputs: outputs of the arm.
        lower, upper: joint limits (values are held within them), (num_outputs,).
    """

    def __init__(self, sequence: MotionSequence, num_outputs: int, lower: FloatArray, upper: FloatArray) -> None:
        self.sequence = sequence
        self.num_outputs = num_outputs
        self.lower, self.upper = lower, upper
        self.start_time = 0.0
        self._tracks: list[tuple[int, FloatArray, FloatArray, FloatArray]] = []
        self._end = sequence.last_keyframe

    @property
    def description(self) -> str:
        return f"SEQUENCE {self.sequence.source}"

    def start(self, now: float, current: FloatArray) -> None:
        self.start_time = now
        self._tracks = []
        for index, frames in self.sequence.keyframes.items():
            times = np.array([f.time for f in frames])
            values = np.array([f.value for f in frames])
            weights = np.array([f.weight for f in frames])
            # The time-0 keyframe, and values left unknown, are the arm's position now.
            values[(times == 0.0) | np.isnan(values)] = current[index]
            if times[0] > 0.0:  # implicit time-0 keyframe: at the arm's position, not driven
                times = np.r_[0.0, times]
                values = np.r_[current[index], values]
                weights = np.r_[0.0, weights]
            self._tracks.append((index, times, np.clip(values, self.lower[index], self.upper[index]), weights))

    def outputs(self, now: float) -> tuple[FloatArray, FloatArray]:
        t = now - self.start_time
        values = np.full(self.num_outputs, math.nan)
        weights = np.zeros(self.num_outputs)
        for index, times, track_values, track_weights in self._tracks:
            values[index] = np.interp(t, times, track_values)
            weights[index] = np.interp(t, times, track_weights)
        return values, weights

    def done(self, now: float, current: FloatArray) -> bool:
        return now - self.start_time >= self._end - 1e-9  # a frame landing on the end counts


class PosturePlayer:
    """Holds a posture until the arm reaches it (within ``tolerance``) or ``timeout`` s pass.

    Args:
        posture: values and weights per output.
        num_outputs: outputs of the arm.
        lower, upper: joint limits (targets are held within them), (num_outputs,).
        prismatic: which outputs are prismatic (judged with a 1 mm tolerance), (num_outputs,).
        tolerance: rad.
        timeout: s.
        label: the description's details (defaults to the posture's source).
    """

    def __init__(
        self,
        posture: Posture,
        num_outputs: int,
        lower: FloatArray,
        upper: FloatArray,
        prismatic: NDArray[np.bool_],
        *,
        tolerance: float = DEFAULT_TOLERANCE,
        timeout: float = DEFAULT_TIMEOUT,
        label: str = "",
    ) -> None:
        self.targets = np.full(num_outputs, math.nan)
        self.weights = np.zeros(num_outputs)
        for index, (value, weight) in posture.values.items():
            self.targets[index], self.weights[index] = value, weight
        self.targets = np.where(np.isnan(self.targets), self.targets, np.clip(self.targets, lower, upper))
        self.tolerance = np.where(prismatic, 1e-3, tolerance)
        self.timeout = timeout
        self.label = label or posture.source
        self.start_time = 0.0
        self.reached = False

    @property
    def description(self) -> str:
        return f"POSTURE {self.label}"

    def start(self, now: float, current: FloatArray) -> None:
        self.start_time = now
        unknown = np.isnan(self.targets)
        self.targets[unknown] = current[unknown]

    def outputs(self, now: float) -> tuple[FloatArray, FloatArray]:
        return self.targets.copy(), self.weights.copy()

    def done(self, now: float, current: FloatArray) -> bool:
        driven = self.weights > 0.0
        self.reached = bool(np.all(np.abs(current[driven] - self.targets[driven]) <= self.tolerance[driven]))
        return self.reached or now - self.start_time >= self.timeout
