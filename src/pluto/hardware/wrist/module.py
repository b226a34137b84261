"""The simulated wrist (pan/tilt unit) server.

``Wrist/Command`` and ``Wrist/State`` are ActuatorStates whose position, velocity and force (acceleration) vectors
are (pan, tilt) in rad, rad/s and rad/s². As on the original's wrist (docs/design.md), an axis moves only when its
commanded velocity and acceleration are both > 0; targets are held within the unit's limits. Tilt is positive downward.
"""

from __future__ import annotations

from pluto import msgs, names
from pluto.hardware.wrist.sim import SimWrist
from pluto.runtime.ranges import Rate
from pluto.sim.device import SimDevice, SimDeviceParams


class SimWristParams(SimDeviceParams, kw_only=True, forbid_unknown_fields=True):
    rate_hz: Rate = 20.0


class SimWristModule(SimDevice[SimWristParams]):
    """The simulated wrist."""

    name = "wrist"
    description = "simulated pan/tilt wrist carrying the laser"
    provides = (names.WRIST_STATE,)
    Params = SimWristParams

    def on_configure(self) -> None:
        self.wrist = SimWrist()
        self.commands = self.create_reader(names.WRIST_COMMAND)
        self.state_out = self.create_publisher(names.WRIST_STATE)
        self._seen = -1
        self._last: float | None = None
        self.publish(self.clock.now())

    def step(self, now: float) -> None:
        command = self.commands.read()
        if command is not None and self.commands.received != self._seen:
            self._seen = self.commands.received
            self.wrist.command(command.position, command.velocity, command.force)
        if self._last is not None and now > self._last:
            self.wrist.step(now - self._last)
        self._last = now
        self.publish(now)

    def publish(self, now: float) -> None:
        w = self.wrist
        self.state_out.write(
            msgs.ActuatorState(
                stamp=now, position=w.position.tolist(), velocity=w.velocity.tolist(), force=w.acceleration.tolist()
            )
        )
