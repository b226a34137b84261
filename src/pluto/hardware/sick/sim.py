"""The simulated SICK LMS laser scanner: geometry of a scan from the wrist's pose, resolution, faults, and the
ways a real scanner's ranges are wrong.

Strategy: the scanner sits on the pan/tilt wrist at a fixed height. A beam at bearing α in the scanner's plane,
tilted down by τ, has the direction (cos α cos τ, sin α, -cos α sin τ); walls are vertical and tall, so a wall at
horizontal distance d along the beam's horizontal direction is hit at d / |horizontal part|, and the floor is hit at
h / (cos α sin τ) when the beam points down. The range is the nearer of the two, rounded to the scanner's
resolution (cm in its default mode), at most 80 m.

The noise profile (:mod:`pluto.sim.noise`) adds, in this order:

1. **Glass.** With :class:`~pluto.sim.site.Surfaces` marking some segments as glass panes, each beam is cast twice:
   with the panes and without. Where a pane is nearer, it echoes only if the beam meets it within
   ``laser_glass_angle`` of its normal (a specular reflection back to the scanner); otherwise the beam goes through
   to whatever lies behind.
2. **Mixed pixels.** The spot is ``laser_spot`` wide: two more rays are cast at its edges. Where they disagree by
   more than :data:`EDGE_GAP` and the centre's range is (nearly) one of theirs, not between them as on an inclined
   wall, the spot lies across a step and sees both surfaces; with probability ``laser_mixed_pixels`` the range is
   then a uniform draw between the two edge rays' (a mixed pixel: a point in the air between foreground and
   background), else the nearer one.
3. **Weak echoes.** The surface hit is found (the segment or circle the hit point lies on, and so its remission ρ and
   the incidence φ between the beam and its normal). An echo reaches at most ``R₁₀·sqrt(ρ·cos φ / 0.1)``, where
   ``R₁₀ = laser_range_at_10`` is the reach on a 10 % surface at normal incidence, times a factor drawn per beam
   (log-normal, 20 %) for the speckle and the threshold's jitter; a farther hit returns no echo (max range). So
   dark surfaces fade first, and walls seen at grazing incidence far away return nothing.
4. **Range noise**, normal with std ``laser_range_std + laser_range_std_per_m · range``, on every beam that has an
   echo (one without reports max range exactly, as the scanner's code for it), then random dropouts
   (``laser_dropout``), then the resolution.

Steps 1-3 draw nothing when their settings are 0, and step 4 draws as it always did, so a profile without them
(``ideal``, ``basic``) gives the same ranges for the same seed as before they existed.

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
from pluto.sim.site import DEFAULT_REMISSION, Surfaces

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

EDGE_GAP = 0.05
"""m: the edges of a spot that see ranges this far apart lie across an edge (a mixed pixel may come back)."""
STEP_SHARE = 0.25
"""A spot's edges see a step, not one inclined surface, when its centre's range is within this share of their
difference from one of them (on a plane it is about halfway)."""
ECHO_JITTER = 0.2
"""Std dev of the log of the per-beam factor on an echo's reach (speckle, the detector's threshold)."""
MOVER_REMISSION = 0.3
"""Remission of a walking person (clothes)."""
_PAIRS = 1_000_000
"""Most (hit, primitive) pairs measured at once when finding the surfaces hit."""


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
        caster: ray caster over the world's static geometry (a site's: :meth:`pluto.sim.site.Site.caster`).
        params: the scanner.  noise: error model.  rng: random generator (used with noise).
        surfaces: remission and glass of the caster's segments and circles (a site's); None: every surface plain
            (remission :data:`~pluto.sim.site.DEFAULT_REMISSION`), no glass.

    Raises:
        ValueError: ``surfaces`` does not match the caster's segments and circles.
    """

    def __init__(
        self,
        caster: RayCaster,
        params: LaserParams | None = None,
        noise: NoiseProfile = IDEAL,
        rng: np.random.Generator | None = None,
        *,
        surfaces: Surfaces | None = None,
    ) -> None:
        self.caster = caster
        self.params = params or LaserParams()
        self.noise = noise
        self.rng = rng or np.random.default_rng(0)
        self.beam_angles = self.params.angles()
        self.failed_until = -math.inf
        n, m = caster.segments.shape[0], caster.circles.shape[0]
        self.surfaces = surfaces if surfaces is not None else Surfaces.plain(n, m)
        if self.surfaces.remission.shape[0] != n or self.surfaces.circle_remission.shape[0] != m:
            raise ValueError(
                f"surfaces describe {self.surfaces.remission.shape[0]} segments and "
                f"{self.surfaces.circle_remission.shape[0]} circles, the caster has {n} and {m}"
            )
        glass = self.surfaces.glass
        self._glass: RayCaster | None = None
        self._opaque = caster
        self._opaque_index = np.arange(n)  # the caster's index of each of the opaque caster's segments
        if glass.any():
            self._glass = RayCaster(caster.segments[glass])
            self._opaque = RayCaster(caster.segments[~glass], caster.circles)
            self._opaque_index = np.flatnonzero(~glass)

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
        noise = self.noise
        if self.failed(t):
            return np.full(p.beams, -1.0)
        lx, ly, heading = laser_pose(*pose, pan, p.mount_x)
        a = self.beam_angles
        ct, st = math.cos(tilt), math.sin(tilt)
        horizontal = np.hypot(np.cos(a) * ct, np.sin(a))  # length of the beam direction's horizontal part
        bearings = heading + np.arctan2(np.sin(a), np.cos(a) * ct)
        reach = p.max_range * horizontal
        origin = np.array([lx, ly])
        r_max = float(reach.max())
        flat = self._opaque.cast(origin, bearings, r_max, extra_circles=movers)
        opaque = flat
        if noise.laser_spot > 0 and noise.laser_mixed_pixels > 0:
            flat = self._mixed(origin, bearings, flat, r_max, movers)
        echo = np.zeros(flat.shape, dtype=bool)  # the beam came back from a glass pane
        if self._glass is not None:
            pane = self._glass.cast(origin, bearings, r_max)
            nearer = pane < opaque
            if nearer.any():
                cos_in = self._incidence(origin, bearings[nearer], pane[nearer], self._glass.segments)
                echo[nearer] = cos_in >= math.cos(noise.laser_glass_angle)
                flat = np.where(echo, pane, flat)
        if noise.laser_range_at_10 > 0:
            flat = self._weak_echoes(origin, bearings, flat, opaque, echo, r_max, movers)
        ranges = flat / np.maximum(horizontal, 1e-9)
        down = np.cos(a) * st
        with np.errstate(divide="ignore"):
            floor = np.where(down > 1e-9, p.height / np.where(down > 1e-9, down, 1.0), np.inf)
        ranges = np.minimum(np.minimum(ranges, floor), p.max_range)
        no_echo = ranges >= p.max_range  # reported as max range exactly, as the scanner's code for it
        if noise.laser_range_std_per_m:
            sigma = noise.laser_range_std + noise.laser_range_std_per_m * ranges
            ranges = np.where(no_echo, p.max_range, ranges + self.rng.normal(0.0, 1.0, ranges.shape) * sigma)
        elif noise.laser_range_std:
            ranges = np.where(no_echo, p.max_range, ranges + self.rng.normal(0.0, noise.laser_range_std, ranges.shape))
        if noise.laser_dropout:
            ranges = np.where(self.rng.random(ranges.shape) < noise.laser_dropout, p.max_range, ranges)
        ranges = np.clip(ranges, 0.0, p.max_range)
        return np.round(ranges / p.resolution) * p.resolution

    # -- the effects ----------------------------------------------------------------------------------------------

    def _mixed(
        self, origin: FloatArray, bearings: FloatArray, flat: FloatArray, r_max: float, movers: FloatArray | None
    ) -> FloatArray:
        """Step 2 of the module docstring: the (horizontal) ranges with mixed pixels where a spot straddles an edge."""
        half = 0.5 * self.noise.laser_spot
        k = bearings.shape[0]
        edges = self._opaque.cast(origin, np.concatenate((bearings - half, bearings + half)), r_max, movers)
        lo = np.minimum(edges[:k], edges[k:])
        hi = np.maximum(edges[:k], edges[k:])
        # on one surface the centre's range lies between its edges' (a wall seen at an angle spreads the echo over
        # its footprint, and the scanner times the middle of it); across a step it is one edge's
        off = np.minimum(np.abs(flat - lo), np.abs(flat - hi))
        across = (hi - lo > EDGE_GAP) & (off < STEP_SHARE * (hi - lo))
        if not across.any():
            return flat
        n = int(across.sum())
        blend = self.rng.random(n) < self.noise.laser_mixed_pixels
        w = self.rng.random(n)
        out = flat.copy()
        near = np.minimum(lo[across], flat[across])
        # a spot partly on nothing (the background beyond the range) has no second echo to blend with
        blend &= hi[across] < r_max
        out[across] = np.where(blend, lo[across] + w * (hi[across] - lo[across]), near)
        return out

    def _weak_echoes(
        self,
        origin: FloatArray,
        bearings: FloatArray,
        flat: FloatArray,
        opaque: FloatArray,
        echo: NDArray[np.bool_],
        r_max: float,
        movers: FloatArray | None,
    ) -> FloatArray:
        """Step 3 of the module docstring: hits too far for their surface's echo become max range (``r_max``)."""
        hit = (flat < r_max) & ~echo  # glass echoes are specular: strong near the normal
        if not hit.any():
            return flat
        # the surface of each hit: the one the beam's centre meets (for a spot across an edge whose centre meets
        # nothing, the one nearest the range returned)
        at = np.where(opaque < r_max, opaque, flat)
        remission, cos_in = self._surface(origin, bearings[hit], at[hit], movers)
        n = remission.shape[0]
        factor = np.exp(self.rng.normal(0.0, ECHO_JITTER, n))
        reach = self.noise.laser_range_at_10 * np.sqrt(np.maximum(remission * cos_in, 0.0) / 0.1) * factor
        out = flat.copy()
        out[hit] = np.where(flat[hit] <= reach, flat[hit], r_max)
        return out

    def _surface(
        self, origin: FloatArray, bearings: FloatArray, distance: FloatArray, movers: FloatArray | None
    ) -> tuple[FloatArray, FloatArray]:
        """Remission and cos(incidence) of the opaque surface each beam hits at ``distance`` (m)."""
        points = origin + distance[:, None] * np.column_stack((np.cos(bearings), np.sin(bearings)))
        segments = self._opaque.segments
        circles = self._opaque.circles
        mover_rows = np.zeros((0, 3)) if movers is None else np.asarray(movers, dtype=np.float64).reshape(-1, 3)
        all_circles = np.vstack((circles, mover_rows))
        s_dist, s_index = _nearest_segment(points, segments)
        c_dist, c_index = _nearest_circle(points, all_circles)
        on_circle = c_dist < s_dist
        remission = np.full(points.shape[0], DEFAULT_REMISSION)
        if segments.shape[0]:
            remission = self.surfaces.remission[self._opaque_index[s_index]]
        if all_circles.shape[0]:
            circle_remission = np.concatenate(
                (self.surfaces.circle_remission, np.full(mover_rows.shape[0], MOVER_REMISSION))
            )
            remission = np.where(on_circle, circle_remission[c_index], remission)
        cos_in = np.ones(points.shape[0])
        d = np.column_stack((np.cos(bearings), np.sin(bearings)))
        if segments.shape[0]:
            e = segments[s_index, 2:] - segments[s_index, :2]
            length = np.maximum(np.hypot(e[:, 0], e[:, 1]), 1e-12)
            cos_in = np.abs(d[:, 0] * e[:, 1] - d[:, 1] * e[:, 0]) / length
        if all_circles.shape[0]:
            radial = points - all_circles[c_index, :2]
            norm = np.maximum(np.hypot(radial[:, 0], radial[:, 1]), 1e-12)
            cos_round = np.abs(d[:, 0] * radial[:, 0] + d[:, 1] * radial[:, 1]) / norm
            cos_in = np.where(on_circle, cos_round, cos_in)
        return remission, cos_in

    def _incidence(
        self, origin: FloatArray, bearings: FloatArray, distance: FloatArray, segments: FloatArray
    ) -> FloatArray:
        """cos(incidence) of the beams hitting ``segments`` at ``distance`` (m)."""
        d = np.column_stack((np.cos(bearings), np.sin(bearings)))
        points = origin + distance[:, None] * d
        _, index = _nearest_segment(points, segments)
        e = segments[index, 2:] - segments[index, :2]
        length = np.maximum(np.hypot(e[:, 0], e[:, 1]), 1e-12)
        result: FloatArray = np.abs(d[:, 0] * e[:, 1] - d[:, 1] * e[:, 0]) / length
        return result


def _nearest_segment(points: FloatArray, segments: FloatArray) -> tuple[FloatArray, IntArray]:
    """Distance from each point ``(K, 2)`` to its nearest segment ``(N, 4)`` and that segment's index (inf and 0
    without segments); in chunks of points so that no more than :data:`_PAIRS` pairs are measured at once."""
    k, n = points.shape[0], segments.shape[0]
    dist = np.full(k, math.inf)
    index = np.zeros(k, dtype=np.intp)
    if n == 0 or k == 0:
        return dist, index
    a = segments[:, :2]
    e = segments[:, 2:] - a
    length2 = np.einsum("ij,ij->i", e, e)
    inv = np.where(length2 > 0, 1.0 / np.where(length2 > 0, length2, 1.0), 0.0)
    step = max(1, _PAIRS // n)
    for start in range(0, k, step):
        p = points[start : start + step]
        rx = p[:, None, 0] - a[None, :, 0]
        ry = p[:, None, 1] - a[None, :, 1]
        u = np.clip((rx * e[None, :, 0] + ry * e[None, :, 1]) * inv[None, :], 0.0, 1.0)
        d2 = (rx - u * e[None, :, 0]) ** 2 + (ry - u * e[None, :, 1]) ** 2
        best = np.argmin(d2, axis=1)
        index[start : start + step] = best
        dist[start : start + step] = np.sqrt(d2[np.arange(p.shape[0]), best])
    return dist, index


def _nearest_circle(points: FloatArray, circles: FloatArray) -> tuple[FloatArray, IntArray]:
    """Distance from each point to the nearest circle's rim and that circle's index (inf and 0 without circles)."""
    k, n = points.shape[0], circles.shape[0]
    if n == 0 or k == 0:
        return np.full(k, math.inf), np.zeros(k, dtype=np.intp)
    dist = np.full(k, math.inf)
    index = np.zeros(k, dtype=np.intp)
    step = max(1, _PAIRS // n)
    for start in range(0, k, step):
        p = points[start : start + step]
        rim = np.abs(
            np.hypot(p[:, None, 0] - circles[None, :, 0], p[:, None, 1] - circles[None, :, 1]) - circles[None, :, 2]
        )
        best = np.argmin(rim, axis=1)
        index[start : start + step] = best
        dist[start : start + step] = rim[np.arange(p.shape[0]), best]
    return dist, index
