"""The drive module (the original's ``driveModule``, docs/design.md): the bus shell around
:class:`~.core.DriveController`.

Reads ``drive/command`` (an ``ActuatorState``: cmd_flags 0, 1, 10, 11), the base's odometry ``Base/Drive/State``,
sonar ``Base/Sonar`` and bumpers ``Base/Contact``; writes ``Base/Drive/Command`` every step (the base stops by
itself after 1 s without a command, so the drive keeps writing even when nothing changes) and ``drive/status``
(an ``FVectorState``: data[0..1] the commanded v m/s and ω rad/s, element[0] the status code of
:class:`~.core.DriveStatus`; -10 once the control step is stopped).

Inputs are used only while fresh (:meth:`pluto.bus.StateReader.fresh`: the odometry and bumpers by the interface
table's deadline, the sonar by ``sensor_timeout``). A command with a lease (avoid renews its command every step) holds
only while renewed: once its lease runs out the robot stops at once (status -2) and drives on with the next command.

When the simulated time jumps back (a new run, a replay started again) the drive forgets its command and its speeds:
a command of the old run is never obeyed in the new one, neither one received before the jump nor one that comes
after it stamped in the old run's future (until the new run reaches the old run's time; counted in
``stale_commands``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pluto import msgs, names
from pluto.errors import ConfigError
from pluto.movement.drive.core import DriveController, DriveOutput, DriveParams, OdometryCalibration
from pluto.runtime.clock import OldRun
from pluto.runtime.module import Module
from pluto.runtime.ranges import CommandTimeout, Rate

__all__ = ["DriveModule", "DriveModuleParams", "load_calibration"]


class DriveModuleParams(DriveParams, kw_only=True, forbid_unknown_fields=True):
    """The controller's limits and gains (:class:`~.core.DriveParams`), and what the module adds.

    Attributes:
        sensor_timeout: a sonar scan older than this (s) counts as missing (protection then does not drive).
        calibration_file: TOML file with distance_scale and heading_scale; "" for none.
    """

    rate_hz: Rate = 20.0
    sensor_timeout: CommandTimeout = 1.0
    calibration_file: str = ""


def load_calibration(path: str | Path) -> OdometryCalibration:
    """Read an odometry calibration file (TOML with ``distance_scale`` and ``heading_scale``, both optional).

    Raises:
        ConfigError: the file cannot be read, is not TOML, has unknown keys or values out of range.
    """
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"odometry calibration {path}: {err}") from err
    unknown = set(data) - {"distance_scale", "heading_scale"}
    if unknown:
        raise ConfigError(f"odometry calibration {path}: unknown keys {', '.join(sorted(unknown))}")
    try:
        return OdometryCalibration(
            distance_scale=float(data.get("distance_scale", 1.0)), heading_scale=float(data.get("heading_scale", 1.0))
        )
    except (TypeError, ValueError) as err:
        raise ConfigError(f"odometry calibration {path}: {err}") from err


class DriveModule(Module[DriveModuleParams]):
    """The drive: collision protection, dynamic limits and a heading regulator above the base."""

    name = "drive"
    description = "the drive: bumper and sonar protection, acceleration limits, heading hold, command timeout"
    provides = (names.DRIVE_STATUS,)
    requires = ("base",)
    Params = DriveModuleParams
    # Limits and gains the controller reads at each step: `pluto param set drive max_speed 0.3` takes effect at the
    # next step. The calibration file is read once, at start.
    dynamic_params = (
        "rate_hz",
        "max_speed",
        "max_turn_rate",
        "max_accel",
        "max_turn_accel",
        "timeout",
        "slow_distance",
        "stop_distance",
        "heading_gain",
        "stop_hysteresis",
        "max_dt",
        "sensor_timeout",
    )

    def on_parameters_changed(self, old: DriveModuleParams, new: DriveModuleParams) -> None:
        self.controller.params = new
        self.sonar.deadline = new.sensor_timeout

    def on_configure(self) -> None:
        p = self.params
        calibration = OdometryCalibration()
        if p.calibration_file:
            calibration = load_calibration(p.calibration_file)
            # The simulated base (and the P2OS one) has no calibration service: the drive applies the calibration
            # to the odometry its heading regulator uses.
            self.get_logger().info(
                "odometry calibration from %s applied to the drive's odometry (distance_scale %g, heading_scale %g);"
                " the base has no calibration service",
                p.calibration_file,
                calibration.distance_scale,
                calibration.heading_scale,
            )
        self.controller = DriveController(p, calibration)
        self.commands = self.create_reader(names.DRIVE_COMMAND)
        self.odometry = self.create_reader(names.BASE_DRIVE_STATE)
        self.sonar = self.create_reader(names.BASE_SONAR, deadline=p.sensor_timeout)
        self.contact = self.create_reader(names.BASE_CONTACT)
        self.base = self.create_publisher(names.BASE_DRIVE_COMMAND)
        self.status = self.create_publisher(names.DRIVE_STATUS)
        self._seen = self.commands.received
        self.last_output: DriveOutput = self.controller.stopped_output()
        self.stale_commands = 0
        self._old_run = OldRun()

    def on_activate(self) -> None:
        self.controller.reset()
        self._seen = self.commands.received  # a command older than the activation is not obeyed

    def _restart(self, now: float, old: float) -> None:
        """The clock went back to ``now`` from ``old`` (s): forget the command, the speeds and the times."""
        self.controller.reset()
        self._seen = self.commands.received  # a command received before the jump belongs to the old run
        self._old_run.jumped(old, now)
        self.get_logger().info("simulated time restarted (%.3f s -> %.3f s): the command is dropped", old, now)

    def _from_old_run(self, stamp: float, now: float) -> bool:
        """``stamp`` is in the old run's future: the clock went back, and the new run has not reached it yet."""
        return self._old_run.holds(stamp, now)

    def step(self, now: float) -> None:
        jumped_from = self.clock_jumped_back(now)  # the step, which owns the controller, resets it
        if jumped_from is not None:
            self._restart(now, jumped_from)
        command = None
        if self.commands.received != self._seen:
            self._seen = self.commands.received
            command = self.commands.read()
            if command is not None and self._from_old_run(command.stamp, now):
                self.stale_commands += 1
                command = None
        # the inputs by the freshness contract: a stale one is absent (a heading command then stops at once, -2)
        sonar = self.sonar.fresh(now)
        odometry = self.odometry.fresh(now)
        silent = odometry is None and self.odometry.read() is not None  # the base was heard, and no longer is
        out = self.controller.step(command, odometry, sonar, self.contact.fresh(now), now, base_silent=silent)
        self.publish(now, out)

    def publish(self, now: float, out: DriveOutput) -> None:
        """Write the velocities to the base and the status (stamped ``now``, s)."""
        self.last_output = out
        self.base.write(msgs.ActuatorState(stamp=now, cmd_flags=0, velocity=[out.v, out.w]))
        self.status.write(msgs.FVectorState(stamp=now, data=list(out.data), element=[out.status_code]))

    def on_deactivate(self) -> None:
        # stop_activity: stop the base now rather than after its own timeout, and say so on the status.
        self.controller.reset()
        self.publish(self.clock.now(), self.controller.stopped_output())
