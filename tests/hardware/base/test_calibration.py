"""The odometry calibration every base applies in the shell: the file, the correction of each reading, and the
shell around it (a fake base whose raw odometry the test sets, steps run by hand), then the P2OS base against its
emulator and the simulated base with a file.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.errors import ConfigError
from pluto.hardware.base.module import SimBase, SimBaseParams
from pluto.hardware.base.p2os.emulate import P2osEmulator
from pluto.hardware.base.p2os.robot import P2osRobot
from pluto.hardware.base.p2os_module import P2osBase, P2osBaseParams
from pluto.hardware.base.server import (
    BaseGeometry,
    BaseServer,
    BaseServerParams,
    BaseState,
    OdometryCorrection,
    OdometryCorrector,
    load_odometry_correction,
)
from pluto.sim.module import SimModule, SimParams
from tests.helpers import wait_until
from tests.scenarios.stack import ROOM, Commander

# ------------------------------------------------------------------------------------------------- the file


def write(tmp_path: Path, text: str, name: str = "calibration.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_file_with_notes_is_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "date = 2024-05-01T12:00:00+02:00\nsamples = 13\ndistance_scale = 0.96\ndistance_scale_std = 0.001\n"
        "heading_gain = 1.02\nheading_gain_std = nan\nheading_bias = -0.003\nrho_rms = 0.002\n",
    )
    assert load_odometry_correction(path) == OdometryCorrection(0.96, 1.02, -0.003)
    assert load_odometry_correction(write(tmp_path, "heading_gain = 1\n")) == OdometryCorrection(heading_gain=1.0)
    assert OdometryCorrection().identity and not OdometryCorrection(heading_bias=0.001).identity


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("distance_scale = 2.5\n", r"distance_scale = 2.5 is out of range: it must be in \[0.5, 2\]"),
        ("heading_gain = 0.4\n", r"heading_gain = 0.4 is out of range: it must be in \[0.5, 2\]"),
        ("distance_scale = nan\n", r"distance_scale = nan is out of range: it must be in \[0.5, 2\]"),
        ("heading_gain = inf\n", r"heading_gain = inf is out of range"),
        ("heading_bias = 0.5\n", r"heading_bias = 0.5 is out of range: it must be in \[-0.2, 0.2\]"),
        ("heading_bias = nan\n", "heading_bias = nan is out of range"),
        ("distance_scale = '1.0'\n", "distance_scale must be a number, got '1.0'"),
        ("distance_scale = true\n", "distance_scale must be a number"),
        ("samples = -1\n", "samples must be a whole number"),
        ("date = 3\n", "date must be a date or a string"),
        ("distance_scale = 1.0\nheading_scale = 1.0\n", r"unknown key\(s\) heading_scale; known: distance_scale"),
        ("distance_scale = \n", "Invalid value"),
    ],
)
def test_a_bad_file_is_a_config_error_that_names_it(tmp_path: Path, text: str, match: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=match) as refused:
        load_odometry_correction(path)
    assert str(path) in str(refused.value)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"odometry calibration .*missing\.toml"):
        load_odometry_correction(tmp_path / "missing.toml")


# ------------------------------------------------------------------------------------------ the correction


def odometry(t: float, x: float, y: float, theta: float, v: float = 0.0, omega: float = 0.0) -> msgs.Odometry:
    return msgs.Odometry(stamp=t, x=x, y=y, theta=theta, v=v, omega=omega)


def run(corrector: OdometryCorrector, raw: list[msgs.Odometry]) -> list[msgs.Odometry]:
    return [corrector.correct(r) for r in raw]


def test_straight_distances_are_scaled_and_the_first_reading_is_taken_as_it_is() -> None:
    corrector = OdometryCorrector(OdometryCorrection(distance_scale=0.9))
    heading = 0.6
    raw = [
        odometry(0.1 * k, 1.0 + 0.05 * k * math.cos(heading), 2.0 + 0.05 * k * math.sin(heading), heading, v=0.5)
        for k in range(21)
    ]
    out = run(corrector, raw)
    assert (out[0].x, out[0].y, out[0].theta) == (1.0, 2.0, heading)
    assert math.hypot(out[-1].x - 1.0, out[-1].y - 2.0) == pytest.approx(0.9 * 1.0, abs=1e-12)
    assert math.atan2(out[-1].y - 2.0, out[-1].x - 1.0) == pytest.approx(heading, abs=1e-12)
    assert out[-1].theta == heading and out[-1].v == pytest.approx(0.45)


def test_turns_are_scaled_by_the_gain_and_the_bias_turns_per_metre_forward_and_back() -> None:
    turning = OdometryCorrector(OdometryCorrection(heading_gain=1.1))
    out = run(turning, [odometry(0.1 * k, 0.0, 0.0, 0.1 * k, omega=1.0) for k in range(11)])
    assert out[-1].theta == pytest.approx(1.1) and (out[-1].x, out[-1].y) == (0.0, 0.0)
    assert out[-1].omega == pytest.approx(1.1)

    bias = 0.01  # rad per metre forward
    drifting = OdometryCorrector(OdometryCorrection(heading_bias=bias))
    forward = [odometry(0.1 * k, 0.1 * k, 0.0, 0.0, v=1.0) for k in range(21)]  # 2 m along x
    back = [odometry(2.0 + 0.1 * k, 2.0 - 0.1 * k, 0.0, 0.0, v=-1.0) for k in range(1, 21)]  # and back
    out = run(drifting, forward + back)
    there = out[20]
    assert there.theta == pytest.approx(2 * bias)
    # the path bends as it drifts: an arc of 2 m turning 2·bias ends 2·sin(b)/b... ahead, (1 - cos)·/b to the left
    assert there.x == pytest.approx(math.sin(2 * bias) / bias, abs=1e-5)
    assert there.y == pytest.approx((1 - math.cos(2 * bias)) / bias, abs=1e-5)
    assert there.omega == pytest.approx(bias * 1.0)
    assert out[-1].theta == pytest.approx(0.0, abs=1e-12)  # backward it drifts back


def test_an_arc_follows_the_corrected_turn() -> None:
    """Raw odometry of a circle of radius 2 m; the true path, with the distance scaled by c and the turn by g, is a
    circle of radius 2·c/g: the corrected odometry stays on it."""
    c, g = 1.05, 0.9
    corrector = OdometryCorrector(OdometryCorrection(distance_scale=c, heading_gain=g))
    r, dt, omega = 2.0, 0.02, 0.25
    raw = []
    for k in range(401):  # 8 s: 2 rad
        th = omega * dt * k
        raw.append(odometry(dt * k, r * math.sin(th), r * (1 - math.cos(th)), th, v=r * omega, omega=omega))
    out = run(corrector, raw)
    true_r = r * c / g
    for o in out[::50]:
        assert o.theta == pytest.approx(g * o.stamp * omega, abs=1e-9)
        assert o.x == pytest.approx(true_r * math.sin(o.theta), abs=1e-5)
        assert o.y == pytest.approx(true_r * (1 - math.cos(o.theta)), abs=1e-5)


def test_after_an_anchor_or_a_clock_that_went_back_the_reading_is_taken_as_it_is() -> None:
    corrector = OdometryCorrector(OdometryCorrection(distance_scale=2.0))
    corrector.correct(odometry(1.0, 0.0, 0.0, 0.0))
    assert corrector.correct(odometry(2.0, 1.0, 0.0, 0.0)).x == pytest.approx(2.0)
    corrector.anchor()
    assert corrector.correct(odometry(3.0, 5.0, 5.0, 1.0)).x == 5.0  # a declared pose: no jump of 8 m
    assert corrector.correct(odometry(4.0, 5.0 + math.cos(1.0), 5.0 + math.sin(1.0), 1.0)).x == pytest.approx(
        5.0 + 2.0 * math.cos(1.0)
    )
    restarted = corrector.correct(odometry(0.5, 0.25, 0.0, 0.0))  # a new run
    assert (restarted.x, restarted.y, restarted.theta) == (0.25, 0.0, 0.0)


# -------------------------------------------------------------------------------------------------- the shell


class ManualClock:
    def __init__(self, t: float = 10.0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t

    def sleep_until(self, t: float, stop: threading.Event) -> bool:
        return stop.wait(0.01)

    def create_jump_callback(self, callback: Any) -> None:
        pass


class RawBaseParams(BaseServerParams, kw_only=True, forbid_unknown_fields=True):
    autostart: bool = False


class RawBase(BaseServer[RawBaseParams]):
    """A base whose odometry is what the test puts in ``raw``; set_odometry declares it as the P2OS driver does."""

    Params = RawBaseParams

    def open_base(self) -> None:
        self.opened = True
        self.raw = (0.0, 0.0, 0.0)
        self.during_set: Any = None  # called inside set_odometry (a step that runs meanwhile)

    def read_state(self, now: float) -> BaseState:
        x, y, theta = self.raw
        return BaseState(
            odometry=msgs.Odometry(stamp=now, x=x, y=y, theta=theta, v=0.1),
            contact=msgs.Contact(stamp=now),
            power=msgs.Power(stamp=now, voltage=12.0),
        )

    initial_state = read_state

    def apply_command(self, v: float, omega: float, now: float) -> None:
        pass

    def geometry(self) -> BaseGeometry:
        return BaseGeometry(model="raw", radius=0.3)

    def set_motor_power(self, on: bool) -> bool:
        return True

    def set_odometry(self, x: float, y: float, theta: float) -> None:
        self.raw = (x, y, theta)
        if self.during_set is not None:
            self.during_set()

    def set_pid_gains(self, which: str, gains: Any) -> None:
        pass

    def set_speed_profile(self, profile: Any) -> None:
        pass


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def calibrated(bus: Bus, clock: ManualClock, tmp_path: Path) -> Iterator[RawBase]:
    path = write(tmp_path, "distance_scale = 0.5\nheading_gain = 2.0\nheading_bias = 0.0\n")
    base = RawBase(bus, RawBaseParams(calibration_file=str(path)), clock=clock)
    base.start()
    try:
        yield base
    finally:
        base.stop()


def published(bus: Bus) -> list[msgs.Odometry]:
    values: list[msgs.Odometry] = []
    lock = threading.Lock()

    def add(value: msgs.Odometry) -> None:
        with lock:
            values.append(value)

    bus.create_subscription(names.BASE_DRIVE_STATE, add, msgs.Odometry, depth=256)
    return values


def step_to(base: RawBase, clock: ManualClock, raw: tuple[float, float, float]) -> None:
    clock.t += 0.1
    base.raw = raw
    base.step(clock.t)


def test_the_shell_writes_corrected_odometry_and_says_which_calibration(
    bus: Bus, calibrated: RawBase, clock: ManualClock
) -> None:
    out = published(bus)
    wait_until(lambda: len(out) == 1, message="the initial state")
    step_to(calibrated, clock, (1.0, 0.0, 0.0))  # 1 m forward: 0.5 m
    step_to(calibrated, clock, (1.0, 0.0, 0.25))  # a quarter radian: half a radian
    step_to(calibrated, clock, (1.0 + math.cos(0.25), math.sin(0.25), 0.25))  # 1 m along the raw heading
    wait_until(lambda: len(out) == 4, message="three steps' odometry")
    assert (out[1].x, out[1].y, out[1].theta) == (0.5, 0.0, 0.0)
    assert out[2].theta == 0.5 and out[2].v == 0.05
    assert out[3].x == pytest.approx(0.5 + 0.5 * math.cos(0.5)) and out[3].y == pytest.approx(0.5 * math.sin(0.5))
    reply = bus.call("base/calibration", None, dict, timeout=5)
    assert reply == {
        "file": calibrated.params.calibration_file,
        "distance_scale": 0.5,
        "heading_gain": 2.0,
        "heading_bias": 0.0,
    }


def test_a_declared_pose_is_taken_as_it_is_and_a_reading_during_the_declaration_is_skipped(
    bus: Bus, calibrated: RawBase, clock: ManualClock
) -> None:
    out = published(bus)
    step_to(calibrated, clock, (2.0, 0.0, 0.0))
    # a step runs while the hook declares the pose: the reading it takes may be of either frame, so none is written
    calibrated.during_set = lambda: step_to(calibrated, clock, (7.0, 7.0, 1.0))
    assert bus.call("base/set_odometry", [7.0, 7.0, 1.0], bool, timeout=5) is True
    calibrated.during_set = None
    step_to(calibrated, clock, (7.0, 7.0, 1.0))  # the declared pose, as it is
    step_to(calibrated, clock, (7.0 + math.cos(1.0), 7.0 + math.sin(1.0), 1.0))  # 1 m on: 0.5 m
    assert bus.call("base/reset_odometry", None, bool, timeout=5) is True
    step_to(calibrated, clock, (0.0, 0.0, 0.0))
    wait_until(lambda: bool(out) and out[-1].stamp == clock.t, message="the last step's odometry")
    stamps = [o.stamp for o in out]
    assert round(clock.t - 0.3, 6) not in [round(s, 6) for s in stamps]  # the step inside the hook wrote none
    declared, on, reset = out[-3], out[-2], out[-1]
    assert (declared.x, declared.y, declared.theta) == (7.0, 7.0, 1.0)
    assert on.x == pytest.approx(7.0 + 0.5 * math.cos(1.0)) and on.theta == 1.0
    assert (reset.x, reset.y, reset.theta) == (0.0, 0.0, 0.0)


def test_without_a_file_the_odometry_is_the_base_s_own(bus: Bus, clock: ManualClock) -> None:
    base = RawBase(bus, clock=clock)
    base.start()
    try:
        out = published(bus)
        step_to(base, clock, (1.0, 0.5, 0.25))
        wait_until(lambda: any(o.stamp == clock.t for o in out), message="the step's odometry")
        assert out[-1] == msgs.Odometry(stamp=clock.t, x=1.0, y=0.5, theta=0.25, v=0.1)
        assert bus.call("base/calibration", None, dict, timeout=5)["distance_scale"] == 1.0
    finally:
        base.stop()


def test_a_bad_file_stops_the_start_before_the_base_is_opened(bus: Bus, clock: ManualClock, tmp_path: Path) -> None:
    path = write(tmp_path, "distance_scale = 3\n")
    base = RawBase(bus, RawBaseParams(calibration_file=str(path)), clock=clock)
    with pytest.raises(
        ConfigError, match=r"calibration.toml: distance_scale = 3.0 is out of range: it must be in \[0.5, 2\]"
    ):
        base.start()
    assert not hasattr(base, "opened")
    base.stop()


# ----------------------------------------------------------------------------------------- the real bases


def test_the_p2os_base_applies_the_calibration(bus: Bus, tmp_path: Path) -> None:
    path = write(tmp_path, "distance_scale = 2.0\nheading_gain = 0.5\n")
    odometry_in = bus.create_reader(names.BASE_DRIVE_STATE, msgs.Odometry)
    with P2osEmulator(P2osRobot("p3dx")) as emulator:
        base = P2osBase(bus, P2osBaseParams(port=emulator.url, calibration_file=str(path)))
        try:
            base.start()
            assert bus.call("base/calibration", None, dict, timeout=5)["distance_scale"] == 2.0

            def raw() -> msgs.Odometry:
                state = base.driver.state
                assert state is not None
                return msgs.Odometry(x=state.x, theta=state.theta, v=state.v, omega=state.omega)

            def settles_at(expected: Any) -> bool:
                """The robot stands and the newest odometry written is ``expected(raw)``."""
                value, now = odometry_in.read(), raw()
                return now.v == now.omega == 0.0 and value is not None and expected(value, now)

            with Commander(bus, 0.4, 0.0):
                wait_until(lambda: raw().x > 0.1, timeout=10, message="the robot drove 0.1 m")
            wait_until(
                lambda: settles_at(lambda o, r: abs(o.x - 2.0 * r.x) < 1e-3 and o.theta == 0.0),
                timeout=10,
                message="the odometry twice the wheels' distance",
            )
            with Commander(bus, 0.0, 0.5):
                wait_until(lambda: raw().theta > 0.2, timeout=10, message="the robot turned 0.2 rad")
            wait_until(
                lambda: settles_at(lambda o, r: abs(o.theta - 0.5 * r.theta) < 1e-3 and abs(o.x - 2.0 * r.x) < 1e-3),
                timeout=10,
                message="the odometry's heading half the wheels' turn",
            )
            assert base.step_errors == 0
        finally:
            base.stop()


def test_the_simulated_base_refuses_a_bad_file_and_reports_a_good_one(bus: Bus, tmp_path: Path) -> None:
    room = write(tmp_path, ROOM, "room.xml")
    sim = SimModule(bus, SimParams(world=str(room), rate=5.0))
    sim.start()
    try:
        bad = SimBase(bus, SimBaseParams(calibration_file=str(write(tmp_path, "heading_gain = 0\n", "bad.toml"))))
        with pytest.raises(ConfigError, match=r"bad\.toml: heading_gain = 0.0 is out of range"):
            bad.start()
        bad.stop()
        good = write(tmp_path, "distance_scale = 1.25\n")
        base = SimBase(bus, SimBaseParams(calibration_file=str(good)))
        try:
            base.start()
            assert bus.call("base/calibration", None, dict, timeout=5) == {
                "file": str(good),
                "distance_scale": 1.25,
                "heading_gain": 1.0,
                "heading_bias": 0.0,
            }
        finally:
            base.stop()
    finally:
        sim.stop()
