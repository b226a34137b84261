"""Tracks of people in the world frame: a constant-velocity Kalman filter per track, gated nearest-neighbour
association.

Strategy: each track's state is s = (x, y, vx, vy) in the ``Localization/Pose`` frame (m, m/s), its covariance P.
Between two scans (dt s) a person keeps its velocity up to a random acceleration of spectral density q (m²/s³)::

    s' = F s,   F = [[I, dt·I], [0, I]]
    P' = F P Fᵀ + Q,   Q = q [[dt³/3·I, dt²/2·I], [dt²/2·I, dt·I]]

A scan measures positions z = H s + w, H = [I 0], w ~ N(0, r²·I). A measurement may update a track only inside its
gate: the squared Mahalanobis distance d² = yᵀ S⁻¹ y of the innovation y = z - H s (S = H P Hᵀ + R) below ``gate``
(9.21: 99 % of a χ² with 2 degrees of freedom). Pairs are taken in order of d², each track and each measurement at
most once (greedy global nearest neighbour: with a few people in view it is as good as an optimal assignment and
never slow). A measurement no track takes starts a new track; a track that has not been seen for ``track_timeout``
s goes, unless the caller asks to keep it (the followed person is kept longer, its gate widening as P grows).

A track *moved* once it has been seen ``moving_distance`` m from where it started: that compares each scan with the
earlier ones in the world frame, so a robot driving past a pillar does not make the pillar move, and the noise of a
blob's centre (a few cm) never adds up to it.

Times are the scans' stamps (s); the tracker never looks at a clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np
from numpy.typing import NDArray

from pluto.runtime.params import Params
from pluto.runtime.ranges import Timeout, between

__all__ = ["Track", "TrackParams", "Tracker", "kalman_predict", "kalman_update", "mahalanobis2"]

FloatArray = NDArray[np.float64]

_H = np.hstack((np.eye(2), np.zeros((2, 2))))


def kalman_predict(s: FloatArray, p: FloatArray, dt: float, q: float) -> tuple[FloatArray, FloatArray]:
    """The constant-velocity prediction ``dt`` s ahead.

    Args:
        s: (4,) state (x, y, vx, vy), m, m/s.
        p: (4, 4) its covariance.
        dt: s (negative values are taken as 0).
        q: spectral density of the random acceleration, m²/s³.

    Returns:
        The predicted state and covariance (new arrays).
    """
    dt = max(0.0, dt)
    f = np.eye(4)
    f[0, 2] = f[1, 3] = dt
    q2 = q * np.array([[dt**3 / 3, dt**2 / 2], [dt**2 / 2, dt]])
    big_q = np.kron(q2, np.eye(2))
    return f @ s, f @ p @ f.T + big_q


def mahalanobis2(s: FloatArray, p: FloatArray, z: FloatArray, r: float) -> float:
    """Squared Mahalanobis distance of the position measurement ``z`` (2,) m with noise std ``r`` m from the
    track (s, p)."""
    y = z - _H @ s
    cov = _H @ p @ _H.T + r**2 * np.eye(2)
    return float(y @ np.linalg.solve(cov, y))


def kalman_update(s: FloatArray, p: FloatArray, z: FloatArray, r: float) -> tuple[FloatArray, FloatArray]:
    """The state and covariance after measuring the position ``z`` (2,) m with noise std ``r`` m (Joseph form,
    which keeps P symmetric and positive)."""
    cov = _H @ p @ _H.T + r**2 * np.eye(2)
    gain = np.linalg.solve(cov, _H @ p).T  # P Hᵀ S⁻¹ (S and P symmetric)
    new_s = s + gain @ (z - _H @ s)
    a = np.eye(4) - gain @ _H
    new_p = a @ p @ a.T + r**2 * gain @ gain.T
    return new_s, new_p


class TrackParams(Params, kw_only=True, forbid_unknown_fields=True):
    """Tuning of the tracker.

    Attributes:
        accel_density: q, the spectral density of a person's random acceleration, m²/s³.
        measurement_std: r, std dev of a measured position, m.
        initial_speed_std: std dev of a new track's velocity, m/s.
        gate: largest squared Mahalanobis distance at which a measurement updates a track.
        track_timeout: a track not seen for this long goes (unless kept), s.
        moving_distance: a track seen this far from where it started has moved, m.
        max_tracks: at most this many tracks (the oldest unseen go first).
    """

    accel_density: Annotated[float, between(0.0, 100.0, open_low=True)] = 1.0
    measurement_std: Annotated[float, between(0.0, 5.0, open_low=True)] = 0.06
    initial_speed_std: Annotated[float, between(0.0, 10.0, open_low=True)] = 1.0
    gate: Annotated[float, between(0.0, 1000.0, open_low=True)] = 9.21
    track_timeout: Timeout = 1.0
    moving_distance: Annotated[float, between(0.0, 100.0)] = 0.3
    max_tracks: Annotated[int, between(1, 10_000)] = 30


@dataclass
class Track:
    """One tracked person.

    Attributes:
        id: unique within its tracker.
        state: (4,) x, y, vx, vy at ``stamp`` (m, m/s, world frame).
        covariance: (4, 4).
        stamp: time of ``state``, s.
        born: time of the first measurement, s.
        origin: (x, y) of the first measurement, m.
        last_seen: time of the last measurement, s.
        hits: measurements taken.
        moved: seen at least ``moving_distance`` from ``origin`` once.
    """

    id: int
    state: FloatArray
    covariance: FloatArray
    stamp: float
    born: float
    origin: tuple[float, float]
    last_seen: float
    hits: int = 1
    moved: bool = False

    @property
    def position(self) -> tuple[float, float]:
        return float(self.state[0]), float(self.state[1])

    @property
    def velocity(self) -> tuple[float, float]:
        return float(self.state[2]), float(self.state[3])

    def at(self, t: float, q: float) -> tuple[float, float, float, float]:
        """(x, y, vx, vy) predicted to time ``t`` (s) without changing the track."""
        s, _ = kalman_predict(self.state, self.covariance, t - self.stamp, q)
        return float(s[0]), float(s[1]), float(s[2]), float(s[3])


@dataclass
class Tracker:
    """The tracks of the people in view: :meth:`update` with each scan's measurements in time order."""

    params: TrackParams = field(default_factory=TrackParams)
    tracks: dict[int, Track] = field(default_factory=dict)
    _next_id: int = 1

    def get(self, track_id: int | None) -> Track | None:
        return self.tracks.get(track_id) if track_id is not None else None

    def update(self, measurements: FloatArray, stamp: float, keep: frozenset[int] = frozenset()) -> list[int]:
        """Take the measured positions of one scan.

        Args:
            measurements: (N, 2) positions, m, world frame.
            stamp: the scan's time, s; a stamp earlier than a track's own is taken as the track's.
            keep: ids of tracks not to drop however long unseen (the followed person).

        Returns:
            The id of the track each measurement went to (new or old), in the order given.
        """
        p = self.params
        z = np.asarray(measurements, dtype=float).reshape(-1, 2)
        for track in self.tracks.values():
            track.state, track.covariance = kalman_predict(
                track.state, track.covariance, stamp - track.stamp, p.accel_density
            )
            track.stamp = max(track.stamp, stamp)
        ids = list(self.tracks)
        pairs = sorted(
            (d2, i, j)
            for i, tid in enumerate(ids)
            for j in range(len(z))
            if (d2 := mahalanobis2(self.tracks[tid].state, self.tracks[tid].covariance, z[j], p.measurement_std))
            < p.gate
        )
        taken: list[int | None] = [None] * len(z)
        updated: set[int] = set()
        for _, i, j in pairs:
            tid = ids[i]
            if tid in updated or taken[j] is not None:
                continue
            track = self.tracks[tid]
            track.state, track.covariance = kalman_update(track.state, track.covariance, z[j], p.measurement_std)
            track.last_seen = stamp
            track.hits += 1
            if math.dist(track.position, track.origin) >= p.moving_distance:
                track.moved = True
            taken[j] = tid
            updated.add(tid)
        result = [tid if tid is not None else self._new_track(z[j], stamp) for j, tid in enumerate(taken)]
        self._prune(stamp, keep)
        return result

    def _new_track(self, z: FloatArray, stamp: float) -> int:
        p = self.params
        cov = np.diag([p.measurement_std**2] * 2 + [p.initial_speed_std**2] * 2)
        tid = self._next_id
        self._next_id += 1
        state = np.array([z[0], z[1], 0.0, 0.0])
        self.tracks[tid] = Track(tid, state, cov, stamp, stamp, (float(z[0]), float(z[1])), stamp)
        return tid

    def _prune(self, stamp: float, keep: frozenset[int]) -> None:
        p = self.params
        for tid in [t for t, track in self.tracks.items() if stamp - track.last_seen > p.track_timeout]:
            if tid not in keep:
                del self.tracks[tid]
        if len(self.tracks) > p.max_tracks:
            spare = sorted((t for t in self.tracks.values() if t.id not in keep), key=lambda t: t.last_seen)
            for track in spare[: len(self.tracks) - p.max_tracks]:
                del self.tracks[track.id]

    def drop(self, track_id: int) -> None:
        """Forget a track."""
        self.tracks.pop(track_id, None)
