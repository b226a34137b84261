"""The localization service's dead reckoning: the robot's pose from odometry and the inertial unit, and the laser's
pose at a scan's time.

Strategy: (docs/design.md, "Interfaces") dead reckoning integrates the base's odometry increments, taking the heading
increment from the inertial unit's integrated heading while it is fresh and from the odometry otherwise.

Two facts of a wheeled robot keep the gyro's errors out of the heading:

* Wheels that do not turn mean a robot that does not turn: an odometry step with no motion at all (both wheels
  still) has no heading change, whatever the inertial heading did. Whatever it did is its bias: the inertial heading's
  change over the still steps of the last ``bias_window`` seconds, divided by their time, estimates the gyro bias
  (once ``bias_min_still`` seconds of stillness are seen), and it is taken off the inertial increments while moving.
* Across a gap between two inertial states longer than ``dmu_gap`` (a lost sample, a starved process), the heading
  is the odometry's heading shape anchored to the inertial heading at both states:
  h(t) = h_a + (o(t) - o_a) + f ((h_b - h_a) - (o_b - o_a)), f = (t - t_a)/(t_b - t_a), with o the odometry's heading:
  it follows the turn the wheels saw rather than a straight line across an acceleration. Such a step waits until the
  odometry reaches t_b. States closer together are interpolated linearly. Past the newest state (the unit late or
  gone, up to ``dmu_timeout``), the odometry's heading change extends it: a gyro's last rate would carry a turn on
  through the robot's slowing down.

The inputs are fused by their stamps, never by their arrival: an odometry sample waits until the inertial unit has a
state at or after its stamp, so that the heading there is interpolated, not extrapolated, however late or bunched
the inertial unit's messages arrive (it runs in another process, and its filtered state is stamped back by the
filter's delay). Waiting is bounded in stamps: once the odometry is more than ``dmu_wait`` ahead of the newest
inertial state, the unit counts as absent and the waiting steps are integrated with what there is (extrapolated,
then the odometry's own heading). A scan likewise waits for the wrist's angles at its centre time (``wrist_wait``).
So, as long as each source delivers its own messages in stamp order and no later than those bounds, the result
depends only on the stamps and values of the inputs.

Every odometry step is kept, with its noise, in a short history so that (a) a laser scan's centre time can be looked up
after the fact (the scan's timing arrives ~200 ms after it was taken), and (b) the covariance of the (x, y, θ)
increment between two scans can be summed exactly from the steps in between:

    Σ_inc(t_a, t_b) = Σ_k G_k Q_k G_kᵀ,   G_k = [[1, 0, -(y_b - y_k)], [0, 1, x_b - x_k], [0, 0, 1]]

where Q_k is the noise of step k in the dead-reckoning frame and (x_k, y_k) the pose after it: a heading error made
at step k swings everything travelled afterwards about the pose at k. The absolute covariance since the start (and
since the last posted pose) is propagated forward step by step with the same Jacobian, P ← F P Fᵀ + Q with
F = G for the step's own displacement.

**Continuing.** :meth:`DeadReckoning.snapshot` gives the newest step with the base's raw odometry of its stamp; a
new instance :meth:`DeadReckoning.resume` s from it: the first odometry sample after that is one step from the saved
raw odometry, so the pose is the saved one composed with the odometry's motion since (the base's odometry is
cumulative: the composition is exact whatever path it took meanwhile). That step's noise is widened for the time
lost, ``resume_position_per_s`` and ``resume_heading_per_s`` per second of the gap and ``resume_position_per_m`` and
``resume_heading_per_m`` per metre driven in it (standard deviations, added), since the inertial unit did not follow
the heading meanwhile.

**Odometry resets.** A base whose odometry starts again (a base restarted without its state, a ``reset_odometry``
or ``set_odometry``) would be taken for a jump of the robot. A step is an odometry reset when its reading is exactly
the origin after one that was not, or when it moved farther than the robot can, ``odometry_max_speed`` and
``odometry_max_turn_rate`` over the step's time plus :data:`RESET_MARGIN` (so that bunched stamps never count): the
pose is kept, the odometry re-anchored at the new reading, and the reset counted (``Counters.odometry_resets``).

Nothing here reads a clock, the bus or a thread: every input carries its own stamp (s).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

import msgspec
import numpy as np

from pluto.geometry import LASER_MOUNT
from pluto.navigation.localization.frames import Matrix, laser_pose
from pluto.navigation.localization.series import TimeSeries
from pluto.runtime.params import Params
from pluto.runtime.ranges import Offset, between

__all__ = [
    "RESET_MARGIN",
    "Counters",
    "DeadReckoning",
    "DeadReckoningState",
    "LaserPose",
    "LocalizationParams",
    "RobotPose",
    "flat",
]

_Noise = Annotated[float, between(0.0, 10.0)]
"""A standard deviation of the noise model (per unit travelled, turned or waited)."""

RESET_MARGIN = (0.5, 0.5)
"""m, rad: an odometry step longer (turning more) than the robot can go in its time by more than this is a reset."""


class LocalizationParams(Params, kw_only=True, forbid_unknown_fields=True):
    """Noise model and geometry of the dead reckoning.

    Attributes:
        distance_noise: std dev of the error along the path, m per sqrt(m travelled).
        lateral_noise: std dev of the error across the path, m per sqrt(m travelled).
        odometry_heading_noise: std dev of the odometry heading error, rad per sqrt(rad turned).
        odometry_heading_per_distance: std dev of the odometry heading error, rad per sqrt(m travelled).
        dmu_heading_noise: std dev of the inertial heading error (gyro random walk), rad per sqrt(s).
        dmu_timeout: the inertial unit counts as lost when its newest state is older than this, s.
        dmu_wait: how far the odometry may run ahead of the newest inertial state (in stamps, s) while its steps wait
            for the inertial heading at their stamps; beyond, they are integrated with what there is (0: never wait).
        wrist_wait: the same for a scan waiting for the wrist's angles at its centre time, s.
        dmu_gap: inertial states further apart than this (s) are bridged by the odometry's heading shape.
        bias_window: seconds of still steps (by stamp) whose inertial heading change estimates the gyro bias.
        bias_min_still: seconds of stillness needed in that window before the bias estimate is used (0 until then).
        still_settle: a still step counts for the bias only after the wheels have been still this long, s (the
            inertial unit's filter settles after a stop).
        history: seconds of odometry steps kept for interpolation and late data.
        laser_mount: position of the laser's pan/tilt centre in the robot frame (x forward, y left, z up), m.
        resume_position_per_s, resume_position_per_m: std dev added to the position of the first step after a
            resume, m per second of the gap and m per metre driven in it.
        resume_heading_per_s, resume_heading_per_m: the same for the heading, rad per s and rad per m.
        odometry_max_speed, odometry_max_turn_rate: the fastest the robot goes, m/s and rad/s; an odometry step
            beyond them (and :data:`RESET_MARGIN`) is a reset of the base's odometry.
    """

    distance_noise: _Noise = 0.02
    lateral_noise: _Noise = 0.01
    odometry_heading_noise: _Noise = 0.03
    odometry_heading_per_distance: _Noise = 0.01
    dmu_heading_noise: _Noise = 0.003
    dmu_timeout: Annotated[float, between(0.0, 60.0, open_low=True)] = 0.5
    dmu_wait: Annotated[float, between(0.0, 60.0)] = 0.5
    wrist_wait: Annotated[float, between(0.0, 60.0)] = 0.5
    dmu_gap: Annotated[float, between(0.0, 60.0)] = 0.075
    bias_window: Annotated[float, between(0.0, 3600.0, open_low=True)] = 60.0
    bias_min_still: Annotated[float, between(0.0, 3600.0)] = 2.0
    still_settle: Annotated[float, between(0.0, 60.0)] = 0.5
    history: Annotated[float, between(0.0, 3600.0, open_low=True)] = 10.0
    laser_mount: tuple[Offset, Offset, Offset] = LASER_MOUNT
    resume_position_per_s: _Noise = 0.02
    resume_position_per_m: _Noise = 0.05
    resume_heading_per_s: _Noise = 0.005
    resume_heading_per_m: _Noise = 0.02
    odometry_max_speed: Annotated[float, between(0.0, 100.0)] = 3.0
    odometry_max_turn_rate: Annotated[float, between(0.0, 100.0)] = 6.0


@dataclass(frozen=True)
class RobotPose:
    """The dead-reckoned pose of the robot centre at a time.

    Attributes:
        stamp: s.
        pose: (x, y, z, θ, φ, ψ), m and rad.
        covariance: 3x3 covariance of (x, y, θ) since the start, m², m·rad, rad².
        absolute: 3x3 covariance of (x, y, θ) since the last posted pose (the start if none), dead-reckoning frame.
    """

    stamp: float
    pose: tuple[float, float, float, float, float, float]
    covariance: Matrix
    absolute: Matrix


@dataclass(frozen=True)
class LaserPose:
    """The dead-reckoned pose of the laser at a scan's centre time.

    Attributes:
        stamp: the scan's centre time, s.
        pose: (x, y, z, θ, φ, ψ, pan, tilt) of the laser, m and rad.
        increment: 3x3 covariance of the (x, y, θ) increment of the *robot* since the previous scan.
        absolute: 3x3 absolute covariance (since the last post), dead-reckoning frame.
    """

    stamp: float
    pose: tuple[float, float, float, float, float, float, float, float]
    increment: Matrix
    absolute: Matrix


@dataclass
class _Step:
    """One odometry step in the history: the pose after it, its displacement and noise, and covariances."""

    t: float
    x: float
    y: float
    z: float
    theta: float
    phi: float
    psi: float
    dx: float
    dy: float
    q: Matrix
    cov: Matrix
    absolute: Matrix


def _jacobian(dx: float, dy: float) -> Matrix:
    """How an (x, y, θ) error at a pose carries over a displacement (dx, dy), m."""
    return np.array([[1.0, 0.0, -dy], [0.0, 1.0, dx], [0.0, 0.0, 1.0]])


class DeadReckoningState(msgspec.Struct, frozen=True, kw_only=True):
    """The newest step of a dead reckoning, to continue from (:meth:`DeadReckoning.snapshot`).

    Attributes:
        stamp: s.
        pose: (x, y, z, θ, φ, ψ) of the robot, m and rad.
        odometry: the base's raw odometry (x, y, θ) at ``stamp``, its own frame, m and rad.
        covariance, absolute: the step's 3x3 covariances (since the start, since the last post), 9 row-major values.
        gyro_bias: the gyro bias estimated so far, rad/s.
    """

    stamp: float
    pose: tuple[float, float, float, float, float, float]
    odometry: tuple[float, float, float]
    covariance: list[float]
    absolute: list[float]
    gyro_bias: float = 0.0


@dataclass
class Counters:
    """What the dead reckoning dropped or fell back on (for the status and logs)."""

    late_odometry: int = 0
    late_dmu: int = 0  # dropped, or too late for the odometry step at its stamp
    late_scans: int = 0
    odometry_only_steps: int = 0
    dmu_steps: int = 0
    still_steps: int = 0  # steps with both wheels still: no heading change
    odometry_resets: int = 0  # steps taken for a reset of the base's odometry: the pose kept, re-anchored


@dataclass
class DeadReckoning:
    """Fuses odometry, the inertial unit's heading and the wrist angles into the dead-reckoned robot pose.

    Args:
        params: noise model and geometry.
        start: starting pose (x, y, θ) or (x, y, z, θ, φ, ψ), m and rad.

    Feed it with :meth:`add_dmu`, :meth:`add_wrist` and :meth:`add_odometry` in any order across the sources (each
    source's own samples in stamp order); read :meth:`pose`, :meth:`pose_at` and :meth:`scan`. An odometry sample is
    integrated once the inertial unit has a state at or after its stamp, or once waiting is pointless (see
    :class:`LocalizationParams` ``dmu_wait``, and :meth:`flush`), so the result depends on the stamps and values of
    the inputs, not on when they arrived.
    """

    params: LocalizationParams = field(default_factory=LocalizationParams)
    start: Sequence[float] = (0.0, 0.0, 0.0)
    counters: Counters = field(default_factory=Counters)

    def __post_init__(self) -> None:
        if len(self.start) == 3:
            sx, sy, st = (float(v) for v in self.start)
            self._start6 = (sx, sy, 0.0, st, 0.0, 0.0)
        elif len(self.start) == 6:
            self._start6 = tuple(float(v) for v in self.start)  # type: ignore[assignment]
        else:
            raise ValueError(f"start pose must have 3 or 6 values, got {len(self.start)}")
        self._steps: list[_Step] = []
        self._times: list[float] = []
        self._dmu = TimeSeries(self.params.history)  # (θ, φ, ψ, vertical rate)
        self._odometry_heading = TimeSeries(self.params.history)  # (θ,) of the base's odometry, as received
        self._still: deque[tuple[float, float, float]] = deque()  # (t, dt, inertial Δθ) of settled still steps
        self._still_time = 0.0  # s: the sum of their dt
        self._still_change = 0.0  # rad: the sum of their Δθ
        self._still_since: float | None = None  # stamp since which the wheels are still, s
        self.gyro_bias = 0.0  # rad/s, estimated from the still steps (0 until enough stillness was seen)
        self._wrist = TimeSeries(self.params.history)  # (pan, tilt)
        self._waiting: deque[tuple[float, float, float, float]] = deque()  # odometry (t, x, y, θ) not integrated yet
        self._received = -math.inf  # stamp of the newest odometry sample received: the inputs' clock, s
        self._first_odometry: float | None = None  # stamp of the first odometry sample received, s
        self._complete = -math.inf  # inputs up to this stamp are all there will be (see flush), s
        self._last_odometry: tuple[float, float, float, float] | None = None  # t, x, y, θ of the last integrated
        self._dmu_reference: float | None = None  # the inertial heading the last step ended on
        self._last_scan: float | None = None
        self._resumed: tuple[float, float, float, float] | None = None  # the (t, x, y, θ) odometry resumed from
        self.dmu_ok = False

    # -- inputs -------------------------------------------------------------------------------------------------

    def add_dmu(self, stamp: float, theta: float, phi: float = 0.0, psi: float = 0.0, rate_z: float = 0.0) -> bool:
        """An inertial state: integrated heading θ, pitch φ, roll ψ (rad) and vertical rate (rad/s) at ``stamp`` (s).

        A state older than the newest one is sorted in; odometry waiting for it is integrated. A state older than an
        odometry step integrated already (the unit was taken for absent) is counted as late but still sorted in: it
        cannot change that step, but it shows the unit is back, so that the following steps wait for it again.

        Returns:
            False if it was dropped: a duplicate, or older than the history.
        """
        if not self._dmu.add(stamp, (theta, phi, psi, rate_z)):
            self.counters.late_dmu += 1
            return False
        if self._times and stamp <= self._times[-1]:
            self.counters.late_dmu += 1
        self._release()
        return True

    def add_wrist(self, stamp: float, pan: float, tilt: float) -> bool:
        """Wrist pan and tilt (rad) at ``stamp`` (s), sorted in by stamp. Returns False if dropped (a duplicate, or
        older than the history)."""
        return self._wrist.add(stamp, (pan, tilt))

    def add_odometry(self, stamp: float, x: float, y: float, theta: float) -> bool:
        """The base's odometry (its own frame: x, y in m, θ in rad, continuous) at ``stamp`` (s).

        The sample waits until the inertial unit's heading at ``stamp`` is known (or will not come), then becomes a
        step; the first step only sets the reference. Missing samples just make a longer step.

        Returns:
            False if it was dropped: not newer than the previous one (late or out of order).
        """
        if stamp <= self._received:
            self.counters.late_odometry += 1
            return False
        if self._first_odometry is None:
            self._first_odometry = stamp
        self._received = stamp
        self._odometry_heading.add(stamp, (theta,))
        self._waiting.append((stamp, x, y, theta))
        self._release()
        return True

    def flush(self) -> bool:
        """Take the inputs received so far as all there will be up to the newest odometry stamp: integrate every
        waiting odometry sample with the inertial data there is, and let scans up to that stamp stop waiting for the
        wrist (for when the inputs stopped: the end of a replay, or the base and the inertial unit both silent).

        Returns:
            True if a step was integrated.
        """
        self._complete = max(self._complete, self._received)
        before = len(self._waiting)
        self._release()
        return len(self._waiting) < before

    def _settled(self, series: TimeSeries, t: float, wait: float) -> bool:
        """Whether ``series`` will bring nothing more for time ``t`` (s): it has a sample at or after ``t``, or the
        odometry has run more than ``wait`` (s) ahead of its newest sample (of the first odometry if it has none),
        or the inputs were flushed past ``t``."""
        times = series.times
        if (times and times[-1] >= t) or t <= self._complete:
            return True
        anchor = times[-1] if times else self._first_odometry
        return anchor is not None and (wait == 0 or self._received - anchor > wait)

    def _shaped(self, t: float) -> bool:
        """Whether the heading at ``t`` (s) can be had: unless ``t`` falls in a gap of the inertial states longer than
        ``dmu_gap``, always; in such a gap, once the odometry reaches the state after the gap, whose heading the
        odometry's shape is anchored to."""
        times = self._dmu.times
        i = bisect.bisect_left(times, t)
        if i == 0 or i == len(times) or times[i] - times[i - 1] <= self.params.dmu_gap:
            return True
        return times[i] <= self._received or t <= self._complete

    def _release(self) -> None:
        """Integrate the waiting odometry samples whose inertial heading is settled, oldest first."""
        while (
            self._waiting
            and self._settled(self._dmu, self._waiting[0][0], self.params.dmu_wait)
            and self._shaped(self._waiting[0][0])
        ):
            self._integrate(*self._waiting.popleft())

    def _integrate(self, stamp: float, x: float, y: float, theta: float) -> None:
        """Append the step to the odometry sample at ``stamp`` (s), fusing the inertial heading there."""
        last = self._last_odometry
        self._last_odometry = (stamp, x, y, theta)
        p = self.params
        if last is None:
            x0, y0, z0, t0, phi0, psi0 = self._start6
            tilt = self._tilt(stamp)
            if tilt is not None:
                phi0, psi0 = tilt
            self._dmu_reference = self._dmu_heading(stamp)
            self.dmu_ok = self._dmu_reference is not None
            zero = np.zeros((3, 3))
            self._append(_Step(stamp, x0, y0, z0, t0, phi0, psi0, 0.0, 0.0, zero, zero, zero.copy()))
            return
        prev = self._steps[-1]
        lt, lx, ly, lth = last
        dt = stamp - lt
        resumed, self._resumed = self._resumed, None
        if self._is_reset(last, stamp, x, y, theta):
            self._reanchor(prev, stamp, theta)
            return
        # the base's displacement in its own mid-step frame (its chord direction, for an arc)
        dtheta_odo = theta - lth
        base_mid = lth + 0.5 * dtheta_odo
        c, s = math.cos(base_mid), math.sin(base_mid)
        ox, oy = x - lx, y - ly
        forward, left = c * ox + s * oy, -s * ox + c * oy
        dmu = self._dmu_heading(stamp)
        still = ox == 0.0 and oy == 0.0 and dtheta_odo == 0.0
        if still:
            if self._still_since is None:
                self._still_since = lt
        else:
            self._still_since = None
        if dmu is not None and self._dmu_reference is not None:
            if still:
                dtheta = 0.0  # the wheels did not turn: neither did the robot; the unit's change is its bias
                self.counters.still_steps += 1
                if self._still_since is not None and lt - self._still_since >= p.still_settle:
                    self._learn_bias(stamp, dt, dmu - self._dmu_reference)
            else:
                dtheta = dmu - self._dmu_reference - self.gyro_bias * dt
            var_theta = p.dmu_heading_noise**2 * dt
            self.counters.dmu_steps += 1
        else:
            dtheta = dtheta_odo
            distance = math.hypot(forward, left)
            var_theta = p.odometry_heading_noise**2 * abs(dtheta_odo) + p.odometry_heading_per_distance**2 * distance
            self.counters.odometry_only_steps += 1
        self._dmu_reference = dmu
        self.dmu_ok = dmu is not None
        tilt = self._tilt(stamp)
        phi, psi = tilt if tilt is not None else (prev.phi, prev.psi)
        # move along the chord at the fused mid-step heading
        mid = prev.theta + 0.5 * dtheta
        cm, sm = math.cos(mid), math.sin(mid)
        flat = math.cos(phi)
        dx = (cm * forward - sm * left) * flat
        dy = (sm * forward + cm * left) * flat
        dz = -forward * math.sin(phi)
        distance = math.hypot(forward, left)
        var_along = p.distance_noise**2 * distance
        var_across = p.lateral_noise**2 * distance
        q = np.zeros((3, 3))
        q[0, 0] = cm * cm * var_along + sm * sm * var_across
        q[1, 1] = sm * sm * var_along + cm * cm * var_across
        q[0, 1] = q[1, 0] = cm * sm * (var_along - var_across)
        q[2, 2] = var_theta
        if resumed is not None:  # the gap of a restart: the inertial unit did not follow the heading meanwhile
            std_position = p.resume_position_per_s * dt + p.resume_position_per_m * distance
            std_heading = p.resume_heading_per_s * dt + p.resume_heading_per_m * distance
            q[0, 0] += std_position**2
            q[1, 1] += std_position**2
            q[2, 2] += std_heading**2
        f = _jacobian(dx, dy)
        cov = f @ prev.cov @ f.T + q
        absolute = f @ prev.absolute @ f.T + q
        self._append(
            _Step(stamp, prev.x + dx, prev.y + dy, prev.z + dz, prev.theta + dtheta, phi, psi, dx, dy, q, cov, absolute)
        )

    def _is_reset(
        self, last: tuple[float, float, float, float], stamp: float, x: float, y: float, theta: float
    ) -> bool:
        """The odometry reading (x, y, θ) at ``stamp`` is a reset of the base's odometry, after the reading ``last``
        (t, x, y, θ): exactly the origin after a reading that was not, or farther than the robot can go."""
        _, lx, ly, lth = last
        if x == 0.0 and y == 0.0 and theta == 0.0 and (lx, ly, lth) != (0.0, 0.0, 0.0):
            return True
        dt = max(stamp - last[0], 0.0)
        p = self.params
        return (
            math.hypot(x - lx, y - ly) > RESET_MARGIN[0] + p.odometry_max_speed * dt
            or abs(theta - lth) > RESET_MARGIN[1] + p.odometry_max_turn_rate * dt
        )

    def _reanchor(self, prev: _Step, stamp: float, theta: float) -> None:
        """A step at ``stamp`` (s) that keeps the pose: the odometry was reset, its readings go on from the new one
        (whose heading is ``theta``, rad)."""
        self.counters.odometry_resets += 1
        self._still_since = None
        self._dmu_reference = self._dmu_heading(stamp)
        self.dmu_ok = self._dmu_reference is not None
        # the odometry's heading before the reset is in the old frame: its shape must not bridge the reset
        self._odometry_heading = TimeSeries(self.params.history)
        for t, _x, _y, heading in ((stamp, 0.0, 0.0, theta), *self._waiting):
            self._odometry_heading.add(t, (heading,))
        zero = np.zeros((3, 3))
        self._append(
            _Step(
                stamp, prev.x, prev.y, prev.z, prev.theta, prev.phi, prev.psi, 0.0, 0.0, zero, prev.cov, prev.absolute
            )
        )

    def snapshot(self) -> DeadReckoningState | None:
        """The newest step with the base's raw odometry of its stamp, to continue from (None before the first)."""
        if not self._steps or self._last_odometry is None:
            return None
        step = self._steps[-1]
        _, x, y, theta = self._last_odometry
        return DeadReckoningState(
            stamp=step.t,
            pose=(step.x, step.y, step.z, step.theta, step.phi, step.psi),
            odometry=(x, y, theta),
            covariance=flat(step.cov),
            absolute=flat(step.absolute),
            gyro_bias=self.gyro_bias,
        )

    def resume(self, state: DeadReckoningState) -> None:
        """Continue from another instance's :meth:`snapshot`: its step becomes this one's first, and the next odometry
        sample a step from its raw odometry, widened for the gap (see the module's docstring).

        Raises:
            ValueError: odometry was given already, or the state is not finite.
        """
        if self._steps or self._waiting:
            raise ValueError("a dead reckoning resumes before it takes any odometry")
        values = [state.stamp, *state.pose, *state.odometry, *state.covariance, *state.absolute, state.gyro_bias]
        if len(state.covariance) != 9 or len(state.absolute) != 9 or not all(math.isfinite(v) for v in values):
            raise ValueError("a dead reckoning's state must be finite, with 3x3 covariances")
        x, y, z, theta, phi, psi = state.pose
        cov = np.array(state.covariance, dtype=float).reshape(3, 3)
        absolute = np.array(state.absolute, dtype=float).reshape(3, 3)
        self._append(_Step(state.stamp, x, y, z, theta, phi, psi, 0.0, 0.0, np.zeros((3, 3)), cov, absolute))
        self._last_odometry = (state.stamp, *state.odometry)
        self._received = self._first_odometry = state.stamp
        self._odometry_heading.add(state.stamp, (state.odometry[2],))
        self.gyro_bias = state.gyro_bias
        self._resumed = self._last_odometry

    @property
    def resuming(self) -> bool:
        """Resumed from a snapshot, and the first odometry step after it is not integrated yet."""
        return self._resumed is not None

    def _append(self, step: _Step) -> None:
        self._steps.append(step)
        self._times.append(step.t)
        if len(self._steps) > 256 and self._times[0] < step.t - 2 * self.params.history:
            cut = bisect.bisect_left(self._times, step.t - self.params.history)
            del self._steps[:cut]
            del self._times[:cut]

    def _learn_bias(self, t: float, dt: float, change: float) -> None:
        """A settled still step of ``dt`` (s) ending at ``t`` in which the inertial heading changed by ``change``
        (rad): the gyro bias is the change over the still time of the last ``bias_window`` seconds."""
        p = self.params
        self._still.append((t, dt, change))
        self._still_time += dt
        self._still_change += change
        while self._still and self._still[0][0] < t - p.bias_window:
            _, old_dt, old_change = self._still.popleft()
            self._still_time -= old_dt
            self._still_change -= old_change
        if not self._still:
            self._still_time = self._still_change = 0.0  # no rounding left over
        if self._still_time >= p.bias_min_still:
            self.gyro_bias = self._still_change / self._still_time

    def _odometry_heading_at(self, t: float) -> float | None:
        """The odometry's heading interpolated at ``t`` (rad); None outside the samples received."""
        times = self._odometry_heading.times
        if not times or t < times[0] or t > times[-1]:
            return None
        value = self._odometry_heading.at(t)
        assert value is not None
        return value[0]

    def _dmu_heading(self, t: float) -> float | None:
        """The inertial heading at ``t`` (rad), None if stale: interpolated between two states (across a gap longer
        than ``dmu_gap``, the odometry's heading shape anchored to both); past the newest, that state moved on by
        the odometry's heading change (by its own vertical rate where the odometry cannot say)."""
        times = self._dmu.times
        if not times or t - times[-1] > self.params.dmu_timeout:
            return None
        values = self._dmu.values
        i = bisect.bisect_right(times, t)
        if i == 0:
            return values[0][0]
        if i == len(times):
            last, heading = times[-1], values[-1][0]
            if t == last:
                return heading
            now, then = self._odometry_heading_at(t), self._odometry_heading_at(last)
            if now is not None and then is not None:
                return heading + (now - then) + self.gyro_bias * (t - last)
            return heading + values[-1][3] * (t - last)
        ta, tb = times[i - 1], times[i]
        ha, hb = values[i - 1][0], values[i][0]
        f = (t - ta) / (tb - ta)
        if tb - ta <= self.params.dmu_gap:
            return ha + f * (hb - ha)
        o, oa, ob = self._odometry_heading_at(t), self._odometry_heading_at(ta), self._odometry_heading_at(tb)
        if o is None or oa is None or ob is None:
            return ha + f * (hb - ha)
        return ha + (o - oa) + f * ((hb - ha) - (ob - oa))

    def _tilt(self, t: float) -> tuple[float, float] | None:
        if not self._dmu.times or t - self._dmu.times[-1] > self.params.dmu_timeout:
            return None
        value = self._dmu.at(t)
        assert value is not None
        return value[1], value[2]

    def dmu_age(self, now: float) -> float:
        """Seconds since the newest inertial state's stamp (inf if none)."""
        return now - self._dmu.times[-1] if self._dmu.times else math.inf

    # -- outputs ------------------------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """At least one odometry step has been integrated (:meth:`pose` has a value)."""
        return bool(self._steps)

    @property
    def latest_stamp(self) -> float:
        """Stamp of the newest integrated odometry step, s (-inf if none)."""
        return self._times[-1] if self._times else -math.inf

    @property
    def earliest_stamp(self) -> float:
        """Stamp of the oldest odometry step in the history, s (-inf if none)."""
        return self._times[0] if self._times else -math.inf

    @property
    def received_stamp(self) -> float:
        """Stamp of the newest odometry sample received, integrated or waiting, s (-inf if none)."""
        return self._received

    @property
    def waiting(self) -> int:
        """Number of odometry samples received but not integrated yet (waiting for the inertial unit)."""
        return len(self._waiting)

    def pose(self) -> RobotPose:
        """The newest dead-reckoned robot pose.

        Raises:
            LookupError: no odometry yet.
        """
        if not self._steps:
            raise LookupError("no odometry yet")
        return self._robot_pose(self._steps[-1])

    @staticmethod
    def _robot_pose(step: _Step) -> RobotPose:
        return RobotPose(step.t, (step.x, step.y, step.z, step.theta, step.phi, step.psi), step.cov, step.absolute)

    def _partial(self, i: int, t: float) -> _Step:
        """Step ``i`` cut short at time ``t`` (within it): pose interpolated, noise and covariance scaled."""
        step, prev = self._steps[i], self._steps[i - 1]
        f = (t - prev.t) / (step.t - prev.t)
        dx, dy = f * step.dx, f * step.dy
        q = f * step.q
        jac = _jacobian(dx, dy)
        return _Step(
            t,
            prev.x + dx,
            prev.y + dy,
            prev.z + f * (step.z - prev.z),
            prev.theta + f * (step.theta - prev.theta),
            prev.phi + f * (step.phi - prev.phi),
            prev.psi + f * (step.psi - prev.psi),
            dx,
            dy,
            q,
            jac @ prev.cov @ jac.T + q,
            jac @ prev.absolute @ jac.T + q,
        )

    def _step_at(self, t: float) -> _Step | None:
        """The (interpolated) step ending at ``t``; None outside the history."""
        if not self._times or t < self._times[0] or t > self._times[-1]:
            return None
        i = bisect.bisect_left(self._times, t)
        if self._times[i] == t:
            return self._steps[i]
        return self._partial(i, t)

    def pose_at(self, t: float) -> RobotPose | None:
        """The robot pose interpolated at ``t`` (s); None if ``t`` is outside the history (not yet, or too old)."""
        step = self._step_at(t)
        return None if step is None else self._robot_pose(step)

    def wrist_at(self, t: float) -> tuple[float, float]:
        """Wrist (pan, tilt) at ``t``, rad (0, 0 if no wrist)."""
        value = self._wrist.at(t)
        return (0.0, 0.0) if value is None else (value[0], value[1])

    def increment_covariance(self, t_a: float, t_b: float) -> Matrix:
        """Covariance of the robot's (x, y, θ) increment from ``t_a`` to ``t_b`` (both within the history), in the
        dead-reckoning frame.

        Raises:
            LookupError: a time outside the history.
        """
        end = self._step_at(t_b)
        if self._step_at(t_a) is None or end is None:
            raise LookupError(f"times {t_a}..{t_b} outside the history")
        total = np.zeros((3, 3))
        if t_b <= t_a:
            return total
        i = bisect.bisect_right(self._times, t_a)  # first step ending after t_a
        j = bisect.bisect_left(self._times, t_b)  # the step holding t_b
        for k in range(i, j + 1):
            step = self._steps[k]
            start = max(t_a, self._steps[k - 1].t)
            stop = min(t_b, step.t)
            span = step.t - self._steps[k - 1].t
            share = (stop - start) / span if span > 0 else 0.0
            if share <= 0:
                continue
            after = self._step_at(stop)
            assert after is not None
            g = _jacobian(end.x - after.x, end.y - after.y)
            total += share * (g @ step.q @ g.T)
        return total

    def scan(self, t: float) -> LaserPose | None:
        """The laser's dead-reckoned pose at a scan's centre time ``t`` (s), with the increment covariance since the
        previous scan; call it once per scan, in time order.

        Returns:
            None if the integrated odometry has not reached ``t`` yet, or the wrist's angles at ``t`` may still come
            (call again later).

        Raises:
            LookupError: the scan is older than the previous one or than the history (it is counted and dropped).
        """
        if not self._times or t > self._times[-1]:
            return None
        if t < self._times[0] or (self._last_scan is not None and t <= self._last_scan):
            self.counters.late_scans += 1
            raise LookupError(f"scan at {t} is out of order or older than the history")
        if not self._settled(self._wrist, t, self.params.wrist_wait):
            return None
        step = self._step_at(t)
        assert step is not None
        previous = self._last_scan if self._last_scan is not None and self._last_scan >= self._times[0] else t
        increment = self.increment_covariance(previous, t)
        self._last_scan = t
        pan, tilt = self.wrist_at(t)
        pose = laser_pose((step.x, step.y, step.z, step.theta, step.phi, step.psi), pan, tilt, self.params.laser_mount)
        return LaserPose(t, pose, increment, step.absolute)

    def reset_absolute(self, t: float, covariance: Matrix) -> None:
        """Restart the absolute covariance at ``t`` (s) from ``covariance`` (3x3, dead-reckoning frame) and carry it
        forward over the steps after ``t`` (used when a pose is posted for a past time)."""
        if not self._steps:
            return
        t = min(max(t, self._times[0]), self._times[-1])
        i = bisect.bisect_right(self._times, t)
        cov = np.array(covariance, dtype=float)
        if i < len(self._steps):
            # the remainder of the step holding t
            step, prev = self._steps[i], self._steps[i - 1]
            span = step.t - prev.t
            rest = (step.t - t) / span if span > 0 else 0.0
            jac = _jacobian(rest * step.dx, rest * step.dy)
            cov = jac @ cov @ jac.T + rest * step.q
            step.absolute = cov
            for step in self._steps[i + 1 :]:
                jac = _jacobian(step.dx, step.dy)
                cov = jac @ cov @ jac.T + step.q
                step.absolute = cov
        else:
            self._steps[-1].absolute = cov


def flat(covariance: Matrix) -> list[float]:
    """A 3x3 covariance as the 9 row-major values of a PoseEstimate."""
    return [float(v) for v in np.asarray(covariance).ravel()]
