"""The odometry calibration procedure without a bus: the find wall exchange, the moves and sightings of a
:class:`CalibrationRun` with a robot whose wheels miscount, the fit and its composition with the base's calibration,
and the file the base reads."""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pluto import msgs
from pluto.hardware.base.server import OdometryCorrection, load_odometry_correction
from pluto.navigation.pose.calibrate import (
    FIND_WALL_REQUEST,
    CalibrationError,
    CalibrationParams,
    CalibrationResult,
    CalibrationRun,
    CalibrationSample,
    WallQuery,
    WallReading,
    default_calibration_path,
    fit_calibration,
    format_calibration,
    wall_of,
    write_calibration,
)

WALL_X = 5.0  # the wall is the line x = 5 m, facing the robot that starts at the origin facing +x
MOUNT = 0.25  # m: the laser ahead of the robot's centre
SIGMA_RHO, SIGMA_GAMMA = 0.001, 0.001


def status(code: int, data: list[float] | None = None) -> msgs.FVectorState:
    return msgs.FVectorState(element=[1, code, 0, 3, 0], data=data or [])


ANSWER = [0.01, 4.2, 1e-6, 0.0, 0.0, 4e-6]


def test_a_query_answers_after_the_module_said_it_searches() -> None:
    query = WallQuery()
    before = status(150, ANSWER)
    assert query.request(before) == FIND_WALL_REQUEST == msgs.FVectorState(element=[1, 2])
    assert query.feed(before) is None  # the previous answer, written before the request arrived
    assert query.feed(FIND_WALL_REQUEST) is None  # the request itself
    assert query.feed(status(-1)) is None
    wall = query.feed(status(150, ANSWER))  # the same values, but after a search: the new answer
    assert wall == WallReading(150, 0.01, 4.2, (1e-6, 0.0, 0.0, 4e-6))
    assert wall.rho_std == pytest.approx(0.002) and wall.gamma_std == pytest.approx(0.001)
    assert not query.unanswered


def test_a_query_takes_an_answer_that_came_at_once_when_it_differs_from_the_one_before() -> None:
    query = WallQuery()
    query.request(status(150, ANSWER))
    assert query.feed(status(150, ANSWER)) is None
    moved = [0.02, 4.1, *ANSWER[2:]]
    assert query.feed(status(151, moved)) == WallReading(151, 0.02, 4.1, (1e-6, 0.0, 0.0, 4e-6))
    nothing_before = WallQuery()
    nothing_before.request(status(0))  # nothing was asked before: any answer is new
    assert nothing_before.feed(status(150, ANSWER)) is not None
    none_shown = WallQuery()
    none_shown.request(None)  # no status seen yet: only a search tells
    assert none_shown.feed(status(150, ANSWER)) is None


def test_a_query_with_neither_a_search_nor_a_new_answer_asks_again() -> None:
    query = WallQuery(retry_after=4)
    query.request(status(120, ANSWER))
    for _ in range(3):
        assert query.feed(status(120, ANSWER)) is None
        assert not query.unanswered
    query.feed(status(120, ANSWER))
    assert query.unanswered  # the request was lost, or answered at once with the same values: it cannot tell
    query.request(status(99, ANSWER))  # asking again keeps what was shown before the first request
    assert not query.unanswered and query.attempts == 2
    assert query.feed(status(99, ANSWER)) is not None


def test_a_status_with_missing_values_reads_as_nan() -> None:
    wall = wall_of(msgs.FVectorState(element=[1, 7], data=[0.1]))
    assert wall.points == 7 and wall.gamma == 0.1 and math.isnan(wall.rho) and math.isnan(wall.covariance[3])
    assert wall_of(msgs.FVectorState(element=[1])).points == 0


# --------------------------------------------------------------------- a robot whose wheels miscount, a wall


class Robot:
    """The wheels carry out the commands as the odometry counts them; the truth differs by the true corrections:
    distance c·d, turn g·Δθ + b·d (d: the odometry's forward distance)."""

    def __init__(self, c: float, g: float, b: float) -> None:
        self.c, self.g, self.b = c, g, b
        self.odometry = msgs.Odometry()
        self.true = [0.0, 0.0, 0.0]
        self.blocked = False

    def move(self, v: float, omega: float, now: float, dt: float) -> None:
        if self.blocked:
            v = omega = 0.0
        o = self.odometry
        d, turn = v * dt, omega * dt
        mid = o.theta + 0.5 * turn
        self.odometry = msgs.Odometry(
            stamp=now, x=o.x + d * math.cos(mid), y=o.y + d * math.sin(mid), theta=o.theta + turn, v=v, omega=omega
        )
        x, y, theta = self.true
        true_turn = self.g * turn + self.b * d
        heading = theta + 0.5 * true_turn
        self.true = [x + self.c * d * math.cos(heading), y + self.c * d * math.sin(heading), theta + true_turn]

    def wall(self, rng: np.random.Generator) -> list[float]:
        """The wall as the laser sees it: (γ, ρ) with noise, and their covariance."""
        x, _, theta = self.true
        laser_x = x + MOUNT * math.cos(theta)
        gamma = -theta + float(rng.normal(0.0, SIGMA_GAMMA))
        rho = WALL_X - laser_x + float(rng.normal(0.0, SIGMA_RHO))
        return [gamma, rho, SIGMA_GAMMA**2, 0.0, 0.0, SIGMA_RHO**2]


class PoseModule:
    """Answers find wall as the pose module does, taking turns: -1 for a step, then the answer; at once in the step
    that reads the request (a scan came with it), with no -1; or not at all (the request was lost)."""

    def __init__(self, robot: Robot, rng: np.random.Generator, wall: Callable[[], list[float]] | None = None) -> None:
        self.robot, self.rng = robot, rng
        self.wall = wall or (lambda: robot.wall(rng))
        self.code, self.data = 0, list[float]()
        self.asked = False
        self.requests = 0
        self.searching = False

    def step(self) -> msgs.FVectorState:
        if self.asked:
            self.asked = False
            self.requests += 1
            if self.requests % 3 == 1:
                self.answer()
            elif self.requests % 3 == 2:
                self.code, self.searching = -1, True
        elif self.searching:
            self.searching = False
            self.answer()
        return status(self.code, self.data)

    def answer(self) -> None:
        self.data = self.wall()
        self.code = 150 if self.data else 0  # no wall in front: 0 points, no data


def drive(
    robot: Robot, module: PoseModule, params: CalibrationParams | None = None, limit: float = 300.0
) -> CalibrationRun:
    """Run a calibration at 20 Hz until it is done."""
    run = CalibrationRun(params)
    dt, now = 0.05, 0.0
    statuses: list[msgs.FVectorState] = []
    while now < limit:
        decision = run.step(now, robot.odometry, statuses)
        if decision.done:
            return run
        statuses = [module.step()]
        if decision.ask_wall:
            module.asked = True
            statuses.insert(0, FIND_WALL_REQUEST)
        now += dt
        robot.move(decision.v, decision.omega, now, dt)
    raise AssertionError(f"not done in {limit} s ({run.phase}, {len(run.samples)} sightings)")


def test_a_run_recovers_the_scale_gain_and_bias_of_the_wheels() -> None:
    robot = Robot(c=0.96, g=1.03, b=0.004)
    module = PoseModule(robot, np.random.default_rng(5))
    run = drive(robot, module, CalibrationParams(distance=1.0, legs=4))
    kinds = [s.kind for s in run.samples]
    assert kinds == ["start"] + ["drive"] * 8 + ["turn"] * 4
    assert module.requests > len(run.samples)  # a third of the requests were lost and made again
    travel = [s.travel for s in run.samples]
    assert max(travel) == pytest.approx(1.0, abs=0.01) and travel[8] == pytest.approx(0.0, abs=0.01)
    result = fit_calibration(run.samples)
    assert result.distance_scale == pytest.approx(0.96, abs=3 * result.distance_scale_std)
    assert result.distance_scale_std < 0.003
    assert result.heading_gain == pytest.approx(1.03, abs=0.01)
    assert result.heading_bias == pytest.approx(0.004, abs=0.002)
    assert result.samples == 13 and result.rho_rms < 0.003
    assert result.previous == {"distance_scale": 1.0, "heading_gain": 1.0, "heading_bias": 0.0}


def test_a_run_on_corrected_odometry_composes_with_the_base_s_calibration() -> None:
    """The base applies (c0, g0, b0) already: the odometry the run sees is corrected, and its residual errors are
    composed with the base's into the whole correction from the wheels."""
    c0, g0, b0 = 1.02, 0.98, 0.001
    wheels = (0.95, 1.04, 0.003)  # the whole truth, from the wheels' counts
    # the residual the corrected odometry shows: c = wheels_c / c0, g = wheels_g / g0, b = (wheels_b - g·b0) / c0
    g = wheels[1] / g0
    robot = Robot(c=wheels[0] / c0, g=g, b=(wheels[2] - g * b0) / c0)
    run = drive(robot, PoseModule(robot, np.random.default_rng(2)))
    result = fit_calibration(run.samples, {"distance_scale": c0, "heading_gain": g0, "heading_bias": b0, "file": 0})
    assert result.distance_scale == pytest.approx(wheels[0], abs=0.003)
    assert result.heading_gain == pytest.approx(wheels[1], abs=0.01)
    assert result.heading_bias == pytest.approx(wheels[2], abs=0.002)
    assert result.measured.distance_scale == pytest.approx(wheels[0] / c0, abs=0.003)


def test_a_run_stops_with_a_reason() -> None:
    with pytest.raises(CalibrationError, match="no wall in front of the laser"):
        robot = Robot(1.0, 1.0, 0.0)
        drive(robot, PoseModule(robot, np.random.default_rng(0), wall=lambda: []))
    with pytest.raises(CalibrationError, match=r"the wall in front is at 20\.0°: turn the robot to face it within"):
        robot = Robot(1.0, 1.0, 0.0)
        drive(robot, PoseModule(robot, np.random.default_rng(0), wall=lambda: [math.radians(20), 4.0, 0, 0, 0, 0]))
    robot = Robot(1.0, 1.0, 0.0)
    module = PoseModule(robot, np.random.default_rng(0))
    run = CalibrationRun(CalibrationParams(leg_timeout=2.0))
    statuses: list[msgs.FVectorState] = []
    now = 0.0
    with pytest.raises(CalibrationError, match=r"leg 1 of 12 \(drive \+0\.25 m\) did not end within 3 s"):
        while True:
            decision = run.step(now, robot.odometry, statuses)
            statuses = [module.step()]
            module.asked = module.asked or decision.ask_wall
            robot.blocked = run.phase == "move"  # the sonar holds it
            now += 0.05
            robot.move(decision.v, decision.omega, now, 0.05)
    silent = CalibrationRun(CalibrationParams(answer_timeout=1.0))
    with pytest.raises(CalibrationError, match="did not answer find wall"):
        for k in range(100):
            silent.step(0.05 * k, msgs.Odometry(stamp=0.05 * k), [])
    blind = CalibrationRun()
    with pytest.raises(CalibrationError, match="no odometry"):
        for k in range(300):
            blind.step(0.05 * k, None)


def test_params_are_checked() -> None:
    CalibrationParams(distance=0.3, speed=1.0, legs=1, turn=math.radians(25))
    for bad in (
        {"distance": 0.1},
        {"distance": math.nan},
        {"speed": 2.0},
        {"legs": 0},
        {"turn": math.radians(40)},
        {"settle": 0.0},
        {"answer_timeout": -1.0},
        {"attempts": 0},
    ):
        with pytest.raises(ValueError):
            CalibrationParams(**bad)  # type: ignore[arg-type]


def test_sightings_that_measure_nothing_are_refused() -> None:
    wall = WallReading(100, 0.0, 4.0, (1e-6, 0.0, 0.0, 1e-6))
    still = [CalibrationSample("start", (0.0, 0.0, 0.0), 0.0, wall)] * 5
    with pytest.raises(CalibrationError, match="measure neither"):
        fit_calibration(still)


# ---------------------------------------------------------------------------------------------------- the file


def result(**changes: float) -> CalibrationResult:
    robot = Robot(c=0.97, g=1.01, b=0.0)
    run = drive(robot, PoseModule(robot, np.random.default_rng(1)))
    return dataclasses.replace(fit_calibration(run.samples), **changes)


def test_the_file_written_is_the_one_the_base_reads(tmp_path: Path) -> None:
    fitted = result()
    when = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC)
    path = write_calibration(tmp_path / "robot" / "calibration.toml", fitted, when)
    assert path.is_file() and [p.name for p in path.parent.iterdir()] == ["calibration.toml"]
    assert load_odometry_correction(path) == OdometryCorrection(
        fitted.distance_scale, fitted.heading_gain, fitted.heading_bias
    )
    text = path.read_text()
    assert "date = 2024-05-01T12:30:00+00:00" in text and f"samples = {fitted.samples}" in text
    assert "distance_scale_std = " in text and "heading_bias_std" in text


def test_what_was_not_measured_has_no_deviation_in_the_file(tmp_path: Path) -> None:
    fitted = result(heading_bias=0.0, heading_bias_std=math.nan, gamma_rms=math.nan)
    text = format_calibration(fitted, datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC))
    assert "# heading_bias_std: not measured" in text and "gamma_rms" not in text
    path = tmp_path / "c.toml"
    path.write_text(text)
    assert load_odometry_correction(path).heading_bias == 0.0


def test_the_default_file_is_per_robot() -> None:
    assert default_calibration_path("atrv2") == Path.home() / ".config" / "pluto" / "atrv2" / "calibration.toml"
