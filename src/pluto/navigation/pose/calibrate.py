"""The odometry calibration procedure (the original's ``pose_i`` use of "find wall", docs/design.md): the
moves in front of a wall, the "find wall" exchanges with the pose module, the fit and the calibration file.

Strategy: the robot starts facing a wall. It stops, lets the pose module find the wall, and notes its own odometry
(``Base/Drive/State``), then drives a leg and does it again: ``legs`` legs of ``distance / legs`` toward the wall,
as many back, then turns in place by ``turn`` to the left, back, to the right and back. Sightings are taken standing
still, so the scan the wall comes from and the odometry read with the answer belong to the same pose without any
interpolation (``pose/status`` does not say which scan an answer comes from). The drive legs give the distance scale
(:func:`~pluto.navigation.pose.calibration.fit_distance_scale`: the laser moves with the robot's centre when the
heading does not change), all sightings the heading gain (from the turns) and bias (from the legs)
(:func:`~pluto.navigation.pose.calibration.fit_heading`, with the signed forward travel as the distance, since
unequal wheels turn the robot one way going forward and the other going back).

The odometry the robot reports may already be corrected by a calibration the base applies (its ``base/calibration``
service says which); the factors measured on it are composed with that one, so the file written is the whole
correction from the wheels' own counts.

"Find wall" on ``pose/status``: a client writes element[1] = 2; the module writes -1 while it searches, then the
answer. When the request reaches the module in a step that also has a scan to process (every step, for a module that
runs late), the answer comes at once with no -1 before it: :class:`WallQuery` then takes an answer that differs from
the one shown before the request (a new scan's line is never exactly the old one's, unless nothing moved in an ideal
simulation), and asks again when neither comes (a request can also be lost: the module keeps only the newest value
of ``pose/status``, its own included).

Nothing here touches the bus or a clock: :class:`CalibrationRun` is stepped with the time, the odometry and the
statuses received, and says what to command; ``pluto pose calibrate`` and the scenario tests both drive it.
"""

from __future__ import annotations

import datetime
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Final

from pluto import msgs
from pluto.errors import PlutoError
from pluto.navigation.pose.calibration import OdometryCalibration, WallSighting, fit_distance_scale, fit_heading
from pluto.navigation.pose.findwall import WallReading, wall_of
from pluto.navigation.pose.module import FIND_WALL, SEARCHING
from pluto.runtime.params import Params
from pluto.runtime.ranges import Speed, Timeout, TurnRate, between

__all__ = [
    "FIND_WALL_REQUEST",
    "CalibrationError",
    "CalibrationParams",
    "CalibrationResult",
    "CalibrationRun",
    "CalibrationSample",
    "Decision",
    "WallQuery",
    "WallReading",
    "default_calibration_path",
    "fit_calibration",
    "format_calibration",
    "wall_of",
    "write_calibration",
]

FIND_WALL_REQUEST: Final = msgs.FVectorState(element=[1, FIND_WALL])
"""What a client writes on ``pose/status`` to ask for the wall in front."""


class CalibrationError(PlutoError):
    """The calibration cannot go on: no wall in front, the robot blocked or not standing still, no answer."""


class WallQuery:
    """One "find wall" exchange, fed with every ``pose/status`` value received after the request.

    After :meth:`request` the caller writes :data:`FIND_WALL_REQUEST`; :meth:`feed` returns the answer: the first
    after the module said it searches (-1), or the first that differs from the status shown before the request.
    :attr:`unanswered` turns True when ``retry_after`` statuses of the module came with neither: ask again.

    Args:
        retry_after: statuses of the module (it writes one per step) to wait for its -1 or a new answer.
    """

    def __init__(self, retry_after: int = 4) -> None:
        self.retry_after = retry_after
        self.attempts = 0
        self._before: tuple[int, tuple[float, ...]] | None = None
        self._searching = False
        self._seen = 0

    def request(self, shown: msgs.FVectorState | None = None) -> msgs.FVectorState:
        """Start (or start again) the exchange; returns what to write on ``pose/status``.

        Args:
            shown: the newest ``pose/status`` before the (first) request: an answer equal to it is not taken for
                the new one unless the module said it searched in between.
        """
        self.attempts += 1
        self._searching = False
        self._seen = 0
        if self._before is None and shown is not None and len(shown.element) > 1:
            self._before = _answer(shown)
        return FIND_WALL_REQUEST

    def feed(self, status: msgs.FVectorState) -> WallReading | None:
        """Take the next ``pose/status`` value; the answer, or None while there is none."""
        if len(status.element) < 2 or status.element[1] == FIND_WALL:
            return None  # a request, ours or another client's
        if status.element[1] == SEARCHING:
            self._searching = True
            return None
        if self._searching or (self._before is not None and _answer(status) != self._before):
            return wall_of(status)
        self._seen += 1
        return None

    @property
    def unanswered(self) -> bool:
        """The module wrote ``retry_after`` statuses with neither a -1 nor a new answer: ask again."""
        return not self._searching and self._seen >= self.retry_after


def _answer(status: msgs.FVectorState) -> tuple[int, tuple[float, ...]]:
    return int(status.element[1]), tuple(status.data)


class CalibrationParams(Params, kw_only=True, forbid_unknown_fields=True):
    """How the robot moves for a calibration.

    Attributes:
        distance: driven toward the wall, then back, m.
        speed: of the drive legs, m/s.
        legs: sightings on the way toward the wall (as many on the way back).
        turn: turned in place to each side, rad (the wall must stay within the 30° that find wall looks at).
        turn_rate: of the turns, rad/s.
        settle: s the robot stands still before a sighting (so the scan is taken standing).
        max_gamma: at the start the wall must face the laser within this, rad.
        still_speed, still_turn_rate: odometry speeds below which the robot stands, m/s and rad/s.
        leg_timeout: s a leg may take beyond the time at full speed (the sonar or a bumper may have stopped it).
        settle_timeout: s the robot may take to stand still.
        answer_timeout: s the pose module may take to answer find wall.
        attempts: find wall requests per sighting.

    Raises:
        ValueError: a value out of its range (the message gives the range).
    """

    distance: Annotated[float, between(0.3, 10.0)] = 1.0
    speed: Annotated[float, between(0.05, 1.0)] = 0.2
    legs: Annotated[int, between(1, 20)] = 4
    turn: Annotated[float, between(math.radians(3.0), math.radians(25.0))] = math.radians(15.0)
    turn_rate: TurnRate = 0.3
    settle: Timeout = 0.5
    max_gamma: Annotated[float, between(0.0, math.pi / 2, open_low=True)] = math.radians(10.0)
    still_speed: Speed = 0.005
    still_turn_rate: TurnRate = 0.005
    leg_timeout: Timeout = 10.0
    settle_timeout: Timeout = 10.0
    answer_timeout: Timeout = 5.0
    attempts: Annotated[int, between(1, 100)] = 5


@dataclass(frozen=True)
class CalibrationSample:
    """One sighting of the wall with the robot standing still.

    Attributes:
        kind: ``start``, ``drive`` (after a drive leg) or ``turn`` (after a turn).
        pose: the odometry's (x m, y m, θ rad) when the answer came.
        travel: forward distance the odometry counted since the start (backward counts negative), m.
        wall: the answer.
    """

    kind: str
    pose: tuple[float, float, float]
    travel: float
    wall: WallReading

    def sighting(self) -> WallSighting:
        """The sighting as :mod:`~pluto.navigation.pose.calibration` fits it."""
        c = self.wall.covariance
        return WallSighting(self.pose, self.wall.gamma, self.wall.rho, c[0], c[3], self.travel)


@dataclass(frozen=True)
class Decision:
    """What to do until the next step.

    Attributes:
        v, omega: the velocity to command, m/s and rad/s (0, 0: stand still).
        ask_wall: write :data:`FIND_WALL_REQUEST` on ``pose/status`` now.
        done: the sightings are all taken (the robot stands).
    """

    v: float = 0.0
    omega: float = 0.0
    ask_wall: bool = False
    done: bool = False


@dataclass(frozen=True)
class _Leg:
    kind: str  # "drive" (amount in m, signed) or "turn" (rad, signed)
    amount: float


def _legs(p: CalibrationParams) -> list[_Leg]:
    step = p.distance / p.legs
    drive = [_Leg("drive", step)] * p.legs + [_Leg("drive", -step)] * p.legs
    turn = [_Leg("turn", p.turn), _Leg("turn", -p.turn), _Leg("turn", -p.turn), _Leg("turn", p.turn)]
    return drive + turn


class CalibrationRun:
    """The calibration's moves and sightings, one decision per step (a pure state machine).

    Call :meth:`step` regularly (every 0.05 to 0.2 s) with the robot's time, its newest odometry and the
    ``pose/status`` values received since the previous call; carry out the :class:`Decision` (re-send the velocity
    every step: the drive stops by itself without new commands). When a decision is ``done``, :attr:`samples` holds
    the sightings for :func:`fit_calibration`.

    Args:
        params: the moves.

    Raises:
        CalibrationError: (from :meth:`step`) no wall in front, the wall not faced, a leg that does not end, the
            robot not standing still, no answer from the pose module.
    """

    def __init__(self, params: CalibrationParams | None = None) -> None:
        self.params = params or CalibrationParams()
        self.legs = _legs(self.params)
        self.samples: list[CalibrationSample] = []
        self.done = False
        self._leg = -1  # the leg driven last; -1 before the first
        self._phase = "settle"
        self._phase_start: float | None = None
        self._still_since: float | None = None
        self._from: msgs.Odometry | None = None  # the odometry at the start of the leg
        self._last: msgs.Odometry | None = None
        self._travel = 0.0
        self._query = WallQuery()
        self._shown: msgs.FVectorState | None = None  # the newest pose/status that is not a request

    @property
    def phase(self) -> str:
        """``settle``, ``sight``, ``move`` or ``done``."""
        return self._phase

    def step(self, now: float, odometry: msgs.Odometry | None, statuses: Iterable[msgs.FVectorState] = ()) -> Decision:
        """The decision at time ``now`` (s, the robot's clock) given the newest odometry and the statuses received."""
        if self.done:
            return Decision(done=True)
        if self._phase_start is None:
            self._phase_start = now
        if self._phase != "sight":
            for status in statuses:
                self._note(status)
        if odometry is None:
            self._check_time(now, self.params.settle_timeout, "no odometry on Base/Drive/State (is the base running?)")
            return Decision()
        self._count_travel(odometry)
        if self._phase == "sight":
            return self._sight(now, odometry, statuses)
        if self._phase == "settle":
            return self._settle(now, odometry)
        return self._move(now, odometry)

    def _note(self, status: msgs.FVectorState) -> None:
        if len(status.element) > 1 and status.element[1] != FIND_WALL:
            self._shown = status

    # -- phases -------------------------------------------------------------------------------------------------

    def _enter(self, phase: str, now: float) -> None:
        self._phase = phase
        self._phase_start = now
        self._still_since = None

    def _check_time(self, now: float, limit: float, what: str) -> None:
        assert self._phase_start is not None
        if now - self._phase_start > limit:
            raise CalibrationError(what)

    def _settle(self, now: float, odometry: msgs.Odometry) -> Decision:
        p = self.params
        if abs(odometry.v) < p.still_speed and abs(odometry.omega) < p.still_turn_rate:
            if self._still_since is None:
                self._still_since = now
            if now - self._still_since >= p.settle:
                self._enter("sight", now)
                self._query = WallQuery()
                self._query.request(self._shown)
                return Decision(ask_wall=True)
        else:
            self._still_since = None
            self._check_time(now, p.settle_timeout, f"the robot did not stand still within {p.settle_timeout:g} s")
        return Decision()

    def _sight(self, now: float, odometry: msgs.Odometry, statuses: Iterable[msgs.FVectorState]) -> Decision:
        p = self.params
        for status in statuses:
            self._note(status)
            wall = self._query.feed(status)
            if wall is not None:
                return self._sighted(now, odometry, wall)
        self._check_time(
            now,
            p.answer_timeout,
            f"the pose module did not answer find wall within {p.answer_timeout:g} s "
            "(are the laser and localization running?)",
        )
        if self._query.unanswered:
            if self._query.attempts >= p.attempts:
                raise CalibrationError(
                    f"the pose module gave no new answer to find wall ({p.attempts} requests): is a wall in front "
                    "of the laser, and are the laser and localization running?"
                )
            self._query.request(self._shown)
            return Decision(ask_wall=True)
        return Decision()

    def _sighted(self, now: float, odometry: msgs.Odometry, wall: WallReading) -> Decision:
        p = self.params
        if wall.points <= 0 or not (math.isfinite(wall.gamma) and math.isfinite(wall.rho)):
            raise CalibrationError(
                "no wall in front of the laser: face a straight wall (within 30°) with the distance to drive free"
            )
        if self._leg < 0 and abs(wall.gamma) > p.max_gamma:
            raise CalibrationError(
                f"the wall in front is at {math.degrees(wall.gamma):.1f}°: turn the robot to face it within "
                f"{math.degrees(p.max_gamma):g}°"
            )
        kind = "start" if self._leg < 0 else self.legs[self._leg].kind
        self.samples.append(CalibrationSample(kind, (odometry.x, odometry.y, odometry.theta), self._travel, wall))
        self._leg += 1
        if self._leg >= len(self.legs):
            self.done = True
            self._enter("done", now)
            return Decision(done=True)
        self._from = odometry
        self._enter("move", now)
        return self._move(now, odometry)

    def _move(self, now: float, odometry: msgs.Odometry) -> Decision:
        p = self.params
        leg = self.legs[self._leg]
        start = self._from
        assert start is not None
        sign = 1.0 if leg.amount > 0 else -1.0
        if leg.kind == "drive":
            progress = (odometry.x - start.x) * math.cos(start.theta) + (odometry.y - start.y) * math.sin(start.theta)
            left = sign * (leg.amount - progress)
            if left <= 0.002:
                self._enter("settle", now)
                return Decision()
            limit = abs(leg.amount) / p.speed + p.leg_timeout
            self._check_time(now, limit, self._blocked(leg, limit))
            return Decision(v=sign * min(p.speed, max(0.04, 1.5 * left)))
        left = sign * (leg.amount - (odometry.theta - start.theta))
        if left <= 0.002:
            self._enter("settle", now)
            return Decision()
        limit = abs(leg.amount) / p.turn_rate + p.leg_timeout
        self._check_time(now, limit, self._blocked(leg, limit))
        return Decision(omega=sign * min(p.turn_rate, max(0.04, 1.5 * left)))

    def _blocked(self, leg: _Leg, limit: float) -> str:
        what = f"drive {leg.amount:+.2f} m" if leg.kind == "drive" else f"turn {math.degrees(leg.amount):+.1f}°"
        return (
            f"leg {self._leg + 1} of {len(self.legs)} ({what}) did not end within {limit:.0f} s: is the robot blocked "
            "(sonar protection, bumpers, the drive not running)?"
        )

    def _count_travel(self, odometry: msgs.Odometry) -> None:
        last = self._last
        if last is not None and odometry.stamp > last.stamp:
            dx, dy = odometry.x - last.x, odometry.y - last.y
            self._travel += dx * math.cos(last.theta) + dy * math.sin(last.theta)
        if last is None or odometry.stamp > last.stamp:
            self._last = odometry


# -- the fit ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationResult(OdometryCalibration):
    """The whole odometry correction from the wheels' own counts, as the calibration file holds it: the fields of
    :class:`~pluto.navigation.pose.calibration.OdometryCalibration` (distance_scale, heading_gain, heading_bias as
    :class:`~pluto.hardware.base.server.OdometryCorrection` applies them, the previous value where a term was not
    measured; their standard deviations, NaN where not measured; samples; rms residuals), and:

    Attributes:
        measured: the factors measured on the odometry as the robot reported it (before composing with
            ``previous``).
        previous: the correction the base applied while measuring.
    """

    measured: OdometryCalibration
    previous: dict[str, float] = field(default_factory=dict)


_IDENTITY: Final = {"distance_scale": 1.0, "heading_gain": 1.0, "heading_bias": 0.0}


def fit_calibration(
    samples: Sequence[CalibrationSample], previous: Mapping[str, float] | None = None
) -> CalibrationResult:
    """Fit the odometry correction to the sightings of a :class:`CalibrationRun`.

    The distance scale comes from the sightings of the start and the drive legs, the heading gain and bias from all
    of them (see the module docstring); the factors measured are composed with ``previous`` (the correction the
    base applied meanwhile: its ``base/calibration`` reply), so that with the true turn g·Δθ + b·s and distance c·d
    on an odometry already corrected by (c₀, g₀, b₀): c = c·c₀, g = g·g₀, b = g·b₀ + b·c₀.

    Args:
        samples: the sightings, in time order.
        previous: ``distance_scale``, ``heading_gain``, ``heading_bias`` in force while measuring; None: none.

    Returns:
        the composed correction (the previous value and a NaN deviation where a term could not be measured).

    Raises:
        CalibrationError: neither the distance scale nor the heading gain could be measured.
    """
    prev = {**_IDENTITY, **{k: float(v) for k, v in (previous or {}).items() if k in _IDENTITY}}
    drive = [s.sighting() for s in samples if s.kind in ("start", "drive")]
    every = [s.sighting() for s in samples]
    scale, scale_std, rho_rms = fit_distance_scale(drive, min_travel=0.25)
    gain, gain_std, bias, bias_std, gamma_rms = fit_heading(every, min_turn=0.1, min_travel=0.25)
    if math.isnan(scale) and math.isnan(gain):
        raise CalibrationError(
            f"the {len(samples)} sightings measure neither the distance scale nor the heading gain "
            "(the robot did not drive or turn enough)"
        )
    measured = OdometryCalibration(scale, scale_std, gain, gain_std, bias, bias_std, len(samples), rho_rms, gamma_rms)
    c0, g0, b0 = prev["distance_scale"], prev["heading_gain"], prev["heading_bias"]
    g = 1.0 if math.isnan(gain) else gain
    b = 0.0 if math.isnan(bias) else bias
    composed_bias = g * b0 + b * c0
    bias_std_total = math.nan
    if not math.isnan(bias):
        bias_std_total = math.hypot(c0 * bias_std, b0 * (0.0 if math.isnan(gain_std) else gain_std))
    return CalibrationResult(
        distance_scale=c0 if math.isnan(scale) else scale * c0,
        distance_scale_std=scale_std * c0,
        heading_gain=g0 if math.isnan(gain) else gain * g0,
        heading_gain_std=gain_std * g0,
        heading_bias=composed_bias,
        heading_bias_std=bias_std_total,
        samples=len(samples),
        rho_rms=rho_rms,
        gamma_rms=gamma_rms,
        measured=measured,
        previous=prev,
    )


# -- the file ---------------------------------------------------------------------------------------------------


def default_calibration_path(robot: str) -> Path:
    """Where ``pluto pose calibrate`` writes the calibration of robot ``robot`` by default:
    ``~/.config/pluto/<robot>/calibration.toml``, beside the configuration file."""
    return Path.home() / ".config" / "pluto" / robot / "calibration.toml"


def _number(value: float) -> str:
    if math.isnan(value):
        return "nan"
    return repr(float(value))


def format_calibration(result: CalibrationResult, date: datetime.datetime) -> str:
    """The calibration file's text (TOML): the three factors the base applies, their deviations (left out when not
    measured) and notes on the measurement."""
    lines = [
        "# Odometry calibration from sightings of a wall (`pluto pose calibrate`); the base applies distance_scale,",
        "# heading_gain and heading_bias at start (its calibration_file parameter).",
        f"date = {date.isoformat(timespec='seconds')}",
        f"samples = {result.samples}",
        f"distance_scale = {_number(result.distance_scale)}",
    ]
    for name in ("distance_scale_std", "heading_gain", "heading_gain_std", "heading_bias", "heading_bias_std"):
        value: float = getattr(result, name)
        if name.endswith("_std") and math.isnan(value):
            lines.append(f"# {name}: not measured")
            continue
        unit = "  # rad per metre driven forward" if name == "heading_bias" else ""
        lines.append(f"{name} = {_number(value)}{unit}")
    for name in ("rho_rms", "gamma_rms"):
        value = getattr(result, name)
        if not math.isnan(value):
            lines.append(f"{name} = {_number(value)}")
    return "\n".join(lines) + "\n"


def write_calibration(path: str | os.PathLike[str], result: CalibrationResult, date: datetime.datetime) -> Path:
    """Write the calibration file (its folders made if needed; replaced whole, never left half-written).

    Returns:
        the path written (``~`` expanded).

    Raises:
        OSError: the file cannot be written.
    """
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(format_calibration(result, date))
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
