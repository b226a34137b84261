"""The base server shell: the command rule, the services' checks and replies, configuration and shutdown.

A small fake base fills the hooks and records what it is told; the steps are run by hand on a clock the test sets,
so the command rule is checked step by step. The last test asks every base (the fake, the simulated one and the
P2OS one against the emulator) the same requests and compares the replies.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs, names
from pluto.bus import Bus, StateWriter
from pluto.errors import RemoteError
from pluto.hardware.base.p2os.emulate import P2osEmulator
from pluto.hardware.base.p2os.robot import P2osRobot
from pluto.hardware.base.p2os_module import P2osBase, P2osBaseParams
from pluto.hardware.base.server import (
    BaseGeometry,
    BaseServer,
    BaseServerParams,
    BaseState,
    check_pid_gains,
    check_pose,
    check_speed_profile,
    check_velocity_mode,
)
from pluto.runtime.clock import JumpCallback
from tests.hardware.base.simbase import sim_base_in_room
from tests.helpers import wait_until

TIMEOUT = 0.5  # s: the fake base's command_timeout


class ManualClock:
    """A clock the test moves by hand."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t

    def sleep_until(self, t: float, stop: threading.Event) -> bool:
        return stop.wait(0.01)

    def create_jump_callback(self, callback: JumpCallback) -> None:
        pass


class FakeBaseParams(BaseServerParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    fail_in: a hook that raises (``open_base``, ``initial_state``), to test configuration failures.
    """

    autostart: bool = False
    command_timeout: float = TIMEOUT
    fail_in: str = ""


class FakeBase(BaseServer[FakeBaseParams]):
    """A base that records every hook call in ``calls``."""

    Params = FakeBaseParams

    def open_base(self) -> None:
        self.calls: list[tuple[Any, ...]] = [("open_base",)]
        self.motors = True
        if self.params.fail_in == "open_base":
            raise OSError("no robot")

    def close_base(self) -> None:
        self.calls.append(("close_base",))

    def initial_state(self, now: float) -> BaseState:
        if self.params.fail_in == "initial_state":
            raise OSError("no first state")
        return self._state(now, sonar=True)

    def apply_command(self, v: float, omega: float, now: float) -> None:
        self.calls.append(("apply_command", v, omega, self.velocity_mode))

    def read_state(self, now: float) -> BaseState:
        return self._state(now, sonar=False)

    def _state(self, now: float, sonar: bool) -> BaseState:
        return BaseState(
            odometry=msgs.Odometry(stamp=now, x=1.0),
            contact=msgs.Contact(stamp=now),
            power=msgs.Power(stamp=now, voltage=12.0),
            sonar=msgs.SonarScan(stamp=now, ranges=[1.0], angles=[0.0], max_range=5.0) if sonar else None,
        )

    def geometry(self) -> BaseGeometry:
        return BaseGeometry(model="fake", radius=0.3, sonar_poses=((0.3, 0.0, 0.0),))

    def set_motor_power(self, on: bool) -> bool:
        self.calls.append(("set_motor_power", on))
        self.motors = on
        return on  # the fake's motors cannot be switched off: it says so

    def set_odometry(self, x: float, y: float, theta: float) -> None:
        self.calls.append(("set_odometry", x, y, theta))

    def set_pid_gains(self, which: str, gains: Mapping[str, float]) -> None:
        self.calls.append(("set_pid_gains", which, dict(gains)))

    def set_speed_profile(self, profile: Mapping[str, float]) -> None:
        self.calls.append(("set_speed_profile", dict(profile)))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def fake(bus: Bus, clock: ManualClock) -> Iterator[FakeBase]:
    base = FakeBase(bus, clock=clock)
    try:
        base.start()
        yield base
    finally:
        base.stop()


@pytest.fixture
def send(bus: Bus, fake: FakeBase) -> Callable[..., None]:
    """Write a command on Base/Drive/Command and wait until the fake base's reader has it."""
    writer: StateWriter[msgs.ActuatorState] = bus.create_publisher(names.BASE_DRIVE_COMMAND)

    def send_command(*velocity: float) -> None:
        before = fake.commands.received
        writer.write(msgs.ActuatorState(velocity=list(velocity)))
        wait_until(lambda: fake.commands.received > before, message="the command reached the base")

    return send_command


def commands_applied(base: FakeBase) -> list[tuple[Any, ...]]:
    """The apply_command calls so far, and forget them."""
    applied = [call[1:] for call in base.calls if call[0] == "apply_command"]
    base.calls = [call for call in base.calls if call[0] != "apply_command"]
    return applied


# ------------------------------------------------------------------------------------------- the command rule


def test_each_command_is_applied_once_and_an_expired_one_becomes_a_stop(
    fake: FakeBase, clock: ManualClock, send: Callable[..., None]
) -> None:
    fake.step(clock.t)
    assert commands_applied(fake) == []  # nothing was ever commanded: nothing to say
    send(0.3, 0.1)
    fake.step(clock.t)
    fake.step(clock.t + 0.1)
    assert commands_applied(fake) == [(0.3, 0.1, "separate")]
    send(0.3, 0.1)  # the same values again: a new command (it renews a robot's own timer)
    send(0.5)  # the newest wins; a missing ω is 0
    fake.step(clock.t)
    assert commands_applied(fake) == [(0.5, 0.0, "separate")]
    clock.t += TIMEOUT * 0.9
    fake.step(clock.t)
    assert commands_applied(fake) == []
    clock.t += TIMEOUT * 0.2  # too old now
    fake.step(clock.t)
    fake.step(clock.t + 0.1)
    assert commands_applied(fake) == [(0.0, 0.0, "separate")]  # once
    send(0.0, 0.0)
    fake.step(clock.t)
    clock.t += TIMEOUT * 2
    fake.step(clock.t)
    assert commands_applied(fake) == [(0.0, 0.0, "separate")]  # a stop that expires needs no second stop


def test_a_command_that_is_not_finite_is_ignored_and_counted(
    fake: FakeBase, clock: ManualClock, send: Callable[..., None]
) -> None:
    send(0.2, 0.0)
    fake.step(clock.t)
    send(math.nan, 0.0)
    fake.step(clock.t)
    send(0.1, math.inf)
    fake.step(clock.t)
    assert commands_applied(fake) == [(0.2, 0.0, "separate")]  # the good one stays in force
    assert fake.bad_commands == 2
    clock.t += TIMEOUT * 1.1
    fake.step(clock.t)
    assert commands_applied(fake) == [(0.0, 0.0, "separate")]  # and expires as any command does
    assert fake.step_errors == 0


def test_motor_power_and_velocity_mode_apply_the_command_in_force_again(
    bus: Bus, fake: FakeBase, clock: ManualClock, send: Callable[..., None]
) -> None:
    assert bus.call("base/velocity_mode", "direct", str, timeout=5) == "direct"
    fake.step(clock.t)
    assert commands_applied(fake) == []  # no command in force: nothing to carry out again
    send(0.4, -0.2)
    fake.step(clock.t)
    assert bus.call("base/velocity_mode", "separate", str, timeout=5) == "separate"
    fake.step(clock.t)
    assert bus.call("base/motor_power", False, bool, timeout=5) is False  # the hook's outcome is the reply
    fake.step(clock.t)
    fake.step(clock.t)
    assert commands_applied(fake) == [(0.4, -0.2, "direct"), (0.4, -0.2, "separate"), (0.4, -0.2, "separate")]
    assert ("set_motor_power", False) in fake.calls


# -------------------------------------------------------------------------------------- interfaces, lifecycle


def test_the_initial_state_and_each_step_state_are_published(bus: Bus, fake: FakeBase, clock: ManualClock) -> None:
    assert {w.name for w in fake.info().provides} == set(BaseServer.provides)
    odometry = bus.create_reader(names.BASE_DRIVE_STATE)
    sonar = bus.create_reader(names.BASE_SONAR)
    power = bus.create_reader(names.BASE_POWER)
    contact = bus.create_reader(names.BASE_CONTACT)
    first, ring = odometry.read(), sonar.read()
    assert first is not None and first.stamp == clock.t and first.x == 1.0
    assert ring is not None and ring.stamp == clock.t
    later = clock.t + 1.0
    fake.step(later)
    assert odometry.wait_for_update(timeout=5).stamp == later
    assert power.wait_for_update(timeout=5) == msgs.Power(stamp=later, voltage=12.0)
    assert contact.wait_for_update(timeout=5).stamp == later
    ring = sonar.read()
    assert ring is not None and ring.stamp == clock.t  # no ring in the step's state: none written
    assert fake.sonar_out.meter.count == 1 and fake.odometry.meter.count == 2


@pytest.mark.parametrize("fail_in", ["open_base", "initial_state"])
def test_a_failed_configuration_closes_the_base(bus: Bus, clock: ManualClock, fail_in: str) -> None:
    base = FakeBase(bus, FakeBaseParams(fail_in=fail_in), clock=clock)
    with pytest.raises(OSError):
        base.start()
    assert base.calls[-1] == ("close_base",)
    base.stop()  # closing again, if it does, is the base's to bear


def test_stop_closes_the_base(bus: Bus, clock: ManualClock) -> None:
    base = FakeBase(bus, clock=clock)
    base.start()
    base.stop()
    assert base.calls == [("open_base",), ("close_base",)]


def test_a_base_must_fill_the_hooks(bus: Bus) -> None:
    class Incomplete(BaseServer[BaseServerParams]):
        def read_state(self, now: float) -> BaseState | None:
            return None

    with pytest.raises(TypeError, match="apply_command"):
        Incomplete(bus)  # type: ignore[abstract]


def test_command_timeout_must_be_positive() -> None:
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="command_timeout"):
            BaseServerParams(command_timeout=bad)


# ---------------------------------------------------------------------------------------------- the services


def test_services_hand_checked_si_values_to_the_hooks(bus: Bus, fake: FakeBase) -> None:
    assert bus.call("base/geometry", None, dict, timeout=5) == {
        "model": "fake",
        "radius": 0.3,
        "sonar_poses": [[0.3, 0.0, 0.0]],
    }
    assert bus.call("base/set_odometry", [1, 2, 0.5], bool, timeout=5) is True
    assert bus.call("base/reset_odometry", None, bool, timeout=5) is True  # by default: set_odometry to zeros
    assert bus.call("base/speed_pid", {"kp": 1.0}, bool, timeout=5) is True
    assert bus.call("base/position_pid", {"ki": 0.5, "kv": 2}, bool, timeout=5) is True
    assert bus.call("base/speed_profile", {"max_speed": 0.5, "max_turn_decel": 1}, bool, timeout=5) is True
    assert fake.calls[1:] == [
        ("set_odometry", 1.0, 2.0, 0.5),
        ("set_odometry", 0.0, 0.0, 0.0),
        ("set_pid_gains", "speed", {"kp": 1.0}),
        ("set_pid_gains", "position", {"ki": 0.5, "kv": 2.0}),
        ("set_speed_profile", {"max_speed": 0.5, "max_turn_decel": 1.0}),
    ]
    for name, request in BAD_REQUESTS:
        with pytest.raises(RemoteError):
            bus.call(f"base/{name}", request, Any, timeout=5)
    assert fake.calls[-1] == ("set_speed_profile", {"max_speed": 0.5, "max_turn_decel": 1.0})  # none got through


def test_the_checks_say_what_is_wrong() -> None:
    assert check_velocity_mode("direct") == "direct"
    assert check_pose([1, 2, 3]) == (1.0, 2.0, 3.0)
    assert check_pid_gains("speed", {"kv": 1}) == {"kv": 1.0}
    assert check_speed_profile({}) == {}
    with pytest.raises(ValueError, match=r"velocity_mode is 'direct' .* or 'separate' .*, not 'diagonal'"):
        check_velocity_mode("diagonal")
    with pytest.raises(ValueError, match=r"set_odometry takes \[x, y, theta\] \(m, m, rad\), finite, got \[1.0\]"):
        check_pose([1.0])
    with pytest.raises(ValueError, match="finite"):
        check_pose([0.0, math.nan, 0.0])
    with pytest.raises(ValueError, match=re.escape("position_pid takes finite kp, ki, kv; got {'kd': 1.0}")):
        check_pid_gains("position", {"kd": 1.0})
    with pytest.raises(ValueError, match="speed_pid takes finite kp, ki, kv"):
        check_pid_gains("speed", {"kp": math.inf})
    with pytest.raises(ValueError, match=re.escape("unknown field(s) top_speed; known: max_speed, max_accel")):
        check_speed_profile({"top_speed": 1.0, "max_speed": 1.0})
    with pytest.raises(ValueError, match="finite and > 0"):
        check_speed_profile({"max_accel": 0.0})


# ----------------------------------------------------------------------------- every base answers the same way

BAD_REQUESTS: list[tuple[str, Any]] = [
    ("velocity_mode", "diagonal"),
    ("set_odometry", [1.0, 2.0]),
    ("set_odometry", [1.0, 2.0, math.nan]),
    ("speed_pid", {"kd": 1.0}),
    ("position_pid", {"kp": math.inf}),
    ("speed_profile", {"top_speed": 1.0}),
    ("speed_profile", {"max_speed": -1.0}),
    ("speed_profile", {"max_turn_accel": math.nan}),
]


@pytest.fixture(params=["fake", "sim", "p2os"])
def any_base(request: pytest.FixtureRequest, bus: Bus, tmp_path: Path) -> Iterator[BaseServer[Any]]:
    """A started base of each kind, serving base/* on ``bus``."""
    kind = request.param
    if kind == "fake":
        fake = FakeBase(bus, clock=ManualClock())
        fake.start()
        yield fake
        fake.stop()
    elif kind == "sim":
        with sim_base_in_room(bus, tmp_path) as base:
            yield base
    else:
        with P2osEmulator(P2osRobot("p3dx")) as emulator:
            p2os = P2osBase(bus, P2osBaseParams(port=emulator.url))
            try:
                p2os.start()
                yield p2os
            finally:
                p2os.stop()


def test_every_base_refuses_the_same_requests_with_the_same_words(bus: Bus, any_base: BaseServer[Any]) -> None:
    for name, request in BAD_REQUESTS:
        with pytest.raises(RemoteError) as refused:
            bus.call(f"base/{name}", request, Any, timeout=5)
        expected = _check_error(name, request)
        assert expected in str(refused.value), (name, request, str(refused.value))
    geometry: dict[str, Any] = bus.call("base/geometry", None, dict, timeout=5)
    assert set(geometry) == {"model", "radius", "sonar_poses"} and geometry["radius"] > 0
    assert all(len(pose) == 3 for pose in geometry["sonar_poses"])
    assert bus.call("base/velocity_mode", "direct", str, timeout=5) == "direct"
    assert bus.call("base/set_odometry", [0.5, -0.5, 0.25], bool, timeout=5) is True
    assert bus.call("base/reset_odometry", None, bool, timeout=5) is True
    assert bus.call("base/speed_profile", {"max_speed": 0.4, "max_decel": 0.8}, bool, timeout=5) is True
    assert bus.call("base/motor_power", True, bool, timeout=5) is True
    assert any_base.step_errors == 0


def _check_error(name: str, request: Any) -> str:
    """The message of the shared check that refuses ``request`` to service ``name``."""
    checks: dict[str, Callable[[Any], Any]] = {
        "velocity_mode": check_velocity_mode,
        "set_odometry": check_pose,
        "speed_pid": lambda gains: check_pid_gains("speed", gains),
        "position_pid": lambda gains: check_pid_gains("position", gains),
        "speed_profile": check_speed_profile,
    }
    with pytest.raises(ValueError) as refused:
        checks[name](request)
    return str(refused.value)
