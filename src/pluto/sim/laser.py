"""The simulated SICK LMS laser scanner: geometry of a scan from the wrist's pose, resolution, faults.

Strategy: the scanner sits on the pan/tilt wrist at a fixed height. A beam at bearing α in the scanner's plane,
tilted down by τ, has the direction (cos α cos τ, sin α, -cos α sin τ); walls are vertical and tall, so a wall at
horizontal distance d along the beam's horizontal direction is hit at d / |horizontal part|, and the floor is hit at
h / (cos α sin τ) when the beam points down. The range is the nearer of the two, rounded to the scanner's
resolution (cm in its default mode), at most 80 m.

Faults follow the original's sick server (docs/design.md): a "fatal error" sets every range to -1 while the scanner
reboots, which takes about 20 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pluto.sim.noise import IDEAL, NoiseProfile
from pluto.sim.raycast import RayCaster

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class LaserParams:
    """The scanner (defaults: a SICK LMS in cm mode, half-degree resolution, 38400 baud).

    Attributes:
        beams: points per scan (361 over 180° at half a degree).  fov: field of view, rad.
        max_range: m.  resolution: range resolution, m (cm mode).
        period: s between scans.  latency: s from the centre of a scan to its arrival at the computer.
        mount_x: forward offset of the wrist axis from the robot centre, m.  height: of the scan plane, m.
        reboot_time: s the scanner needs to recover from a fatal error.
    """

    beams: int = 361
    fov: float = math.pi
    max_range: float = 80.0
    resolution: float = 0.01
    period: float = 0.2
    latency: float = 0.2
    mount_x: float = 0.25
    height: float = 0.9
    reboot_time: float = 20.0

    def angles(self) -> FloatArray:
        """Bearing of each beam in the scanner frame, rad, from -fov/2 (right) to +fov/2 (left)."""
        return np.linspace(-self.fov / 2, self.fov / 2, self.beams)


def laser_pose(x: float, y: float, theta: float, pan: float, mount_x: float) -> tuple[float, float, float]:
    """World pose (x, y, heading) of the scanner on a wrist panned by ``pan`` on a robot at (x, y, θ)."""
    return x + mount_x * math.cos(theta), y + mount_x * math.sin(theta), theta + pan


class SimLaser:
    """Computes scans in a world.

    Args:
        caster: ray caster over the world's static geometry.
        params: the scanner.  noise: error model.  rng: random generator (used with noise).
    """

    def __init__(
        self,
        caster: RayCaster,
        params: LaserParams | None = None,
        noise: NoiseProfile = IDEAL,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.caster = caster
        self.params = params or LaserParams()
        self.noise = noise
        self.rng = rng or np.random.default_rng(0)
        self.beam_angles = self.params.angles()
        self.failed_until = -math.inf

    def inject_fault(self, t: float, duration: float | None = None) -> None:
        """A fatal error at time ``t``: ranges are -1 until the scanner has rebooted."""
        self.failed_until = t + (self.params.reboot_time if duration is None else duration)

    def failed(self, t: float) -> bool:
        """True while the scanner is rebooting."""
        return t < self.failed_until

    def scan(
        self,
        t: float,
        pose: tuple[float, float, float],
        pan: float = 0.0,
        tilt: float = 0.0,
        movers: FloatArray | None = None,
    ) -> FloatArray:
        """Ranges (beams,) in m of a scan taken at time ``t`` by a robot at ``pose`` with the wrist at (pan, tilt).

        Tilt is positive downward. A beam with no echo reports max_range; a failed scanner reports -1 everywhere.
        """
        p = self.params
        if self.failed(t):
            return np.full(p.beams, -1.0)
        lx, ly, heading = laser_pose(*pose, pan, p.mount_x)
        a = self.beam_angles
        ct, st = math.cos(tilt), math.sin(tilt)
        horizontal = np.hypot(np.cos(a) * ct, np.sin(a))  # length of the beam direction's horizontal part
        bearings = heading + np.arctan2(np.sin(a), np.cos(a) * ct)
        reach = p.max_range * horizontal
        origin = np.array([lx, ly])
        flat = self.caster.cast(origin, bearings, float(reach.max()), extra_circles=movers)
        ranges = flat / np.maximum(horizontal, 1e-9)
        down = np.cos(a) * st
        with np.errstate(divide="ignore"):
            floor = np.where(down > 1e-9, p.height / np.where(down > 1e-9, down, 1.0), np.inf)
        ranges = np.minimum(np.minimum(ranges, floor), p.max_range)
        if self.noise.laser_range_std:
            ranges = ranges + self.rng.normal(0.0, self.noise.laser_range_std, ranges.shape)
        if self.noise.laser_dropout:
            ranges = np.where(self.rng.random(ranges.shape) < self.noise.laser_dropout, p.max_range, ranges)
        ranges = np.clip(ranges, 0.0, p.max_range)
        return np.round(ranges / p.resolution) * p.resolution
