"""The arm server: joint commands in on ``Arm/Command``, the arm's state out on ``Arm/State``.

``Arm/Command`` (ActuatorState): ``position[i]`` is the target of output i in rad (m for a prismatic joint such as
the gripper), NaN or missing to leave it alone; ``velocity[i]``, if given and > 0, the largest speed to move it at
(rad/s, m/s); ``force[0]``, if given, the time the move should take, s. A command moves every joint it names
together (they arrive at the same time), as the SSC-32 does.

``Arm/State`` (ActuatorState): ``position`` and ``velocity`` of every output where the servos are driven now. The
controller gives no feedback, so this is what was commanded (open loop), as on the real arm; the simulated arm
also holds each servo to its top speed.

Service ``arm/model``: the model the module drives (:class:`ArmModelFile`: its name and the text of its model file),
so that clients compute kinematics with the arm's own joint table, limits and frames (:class:`.proxy.ArmProxy`
does: ``proxy.model``, ``proxy.forward_kinematics``, ``proxy.point_ik``).

Run it with ``pluto run arm`` (simulated), ``pluto run arm --backend ssc32 --port /dev/ttyUSB0``, or through
``pluto netmotion`` or ``pluto up netmotion``, which start it with the NetworkMotionServer.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import msgspec
import numpy as np

from pluto import msgs, names
from pluto.errors import ConfigError
from pluto.hardware.arm.kinematics import ArmModel, available_models
from pluto.hardware.arm.servo import ArmBackend
from pluto.hardware.arm.sim import SimulatedArm
from pluto.hardware.arm.ssc32 import DEFAULT_BAUDRATE, Ssc32Arm, Ssc32Error
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.ranges import Baud, Rate

__all__ = ["ArmModelFile", "ArmModule", "ArmParams", "read_model_file"]

BACKENDS = ("sim", "ssc32")


class ArmModelFile(msgspec.Struct, frozen=True, kw_only=True):
    """The arm's model as the ``arm/model`` service gives it.

    Attributes:
        name: the model's name (``LynxArm6``).
        source: where the module read it (a model shipped with Pluto, or a file on the arm's computer).
        text: the model file's text (TOML; format: ``models/LynxArm6.toml``): ``ArmModel.from_toml(text)`` is the
            model the arm module drives.
    """

    name: str
    source: str
    text: str

    def model(self) -> ArmModel:
        """The model this file describes.

        Raises:
            ConfigError: the text is not a valid model.
        """
        return ArmModel.from_toml(self.text, where=self.source)


def read_model_file(model: str) -> ArmModelFile:
    """Read an arm model: one shipped with Pluto by name (``LynxArm6``) or a model file by path.

    Raises:
        ConfigError: no such model, the file cannot be read, or it is not a valid model (file and reason).
    """
    if model in available_models():
        resource = resources.files("pluto.hardware.arm") / "models" / f"{model}.toml"
        source, text = f"{model}.toml", resource.read_text(encoding="utf-8")
    else:
        path = Path(model)
        if not path.suffix:
            raise ConfigError(f"no arm model named {model!r}; shipped models: {', '.join(available_models())}")
        try:
            source, text = str(path), path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"cannot read arm model {path}: {err}") from err
    loaded = ArmModel.from_toml(text, where=source)
    return ArmModelFile(name=loaded.name, source=source, text=text)


class ArmParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    backend: ``sim`` (a simulated arm) or ``ssc32`` (the SSC-32 controller on ``port``).
    model: an arm model shipped with Pluto (``LynxArm6``) or the path of a model file.
    port: the SSC-32's serial device or ``serial_for_url`` URL.
    baudrate: the SSC-32's baud rate.
    """

    rate_hz: Rate = 50.0
    backend: str = "sim"
    model: str = "LynxArm6"
    port: str = "/dev/ttyUSB0"
    baudrate: Baud = DEFAULT_BAUDRATE

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}")


class ArmModule(Module[ArmParams]):
    """The arm: an SSC-32 servo controller or a simulated arm behind ``Arm/Command`` and ``Arm/State``."""

    name = "arm"
    description = "serial servo arm (SSC-32 or simulated): joint commands and the commanded state"
    provides = (names.ARM_STATE,)
    Params = ArmParams

    backend: ArmBackend

    def on_configure(self) -> None:
        p = self.params
        self.model_file = read_model_file(p.model)
        self.model = self.model_file.model()
        now = self.clock.now()
        if p.backend == "ssc32":
            self.backend = Ssc32Arm(self.model, p.port, p.baudrate, now=now)
        else:
            self.backend = SimulatedArm(self.model, now=now)
        self.commands = self.create_reader(names.ARM_COMMAND)
        self.state_out = self.create_publisher(names.ARM_STATE)
        self._seen = self.commands.received
        self.rejected = 0
        self.link_errors = 0
        self.create_service("model", lambda _request: self.model_file)
        self.publish(now)

    def step(self, now: float) -> None:
        received = self.commands.received
        if received != self._seen:
            self._seen = received
            command = self.commands.read()
            if command is not None:
                self.apply(command, now)
        self.publish(now)

    def apply(self, command: msgs.ActuatorState, now: float) -> None:
        """Send one ``Arm/Command`` to the backend; a malformed one is counted and dropped."""
        n = self.model.num_outputs
        if len(command.position) > n or len(command.velocity) > n:
            self.rejected += 1
            self.get_logger().warning("dropped an arm command for %d joints (the arm has %d)", len(command.position), n)
            return
        targets = np.full(n, math.nan)
        targets[: len(command.position)] = command.position
        if np.isinf(targets).any():
            self.rejected += 1
            self.get_logger().warning("dropped an arm command with an infinite target: %s", command.position)
            return
        speeds = None
        if command.velocity:
            speeds = np.zeros(n)
            speeds[: len(command.velocity)] = command.velocity
        move_time = float(command.force[0]) if command.force else 0.0
        if not (math.isfinite(move_time) and move_time >= 0.0):
            move_time = 0.0
        try:
            self.backend.command(targets, speeds, move_time, now)
        except Ssc32Error as err:
            self.link_errors += 1
            if self.link_errors == 1 or self.link_errors % 100 == 0:
                self.get_logger().error("%s (%d failures so far)", err, self.link_errors)

    def publish(self, now: float) -> None:
        self.state_out.write(
            msgs.ActuatorState(
                stamp=now,
                position=self.backend.position(now).tolist(),
                velocity=self.backend.velocity(now).tolist(),
            )
        )

    def on_shutdown(self) -> None:
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()
