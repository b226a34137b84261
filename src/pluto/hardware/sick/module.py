"""The simulated SICK laser server, with the three interfaces of the original's sick module (docs/design.md).

- ``Sick/Scan``: 181 points (one per degree), stamped when the scan arrived (old-compatible);
- ``Sick/Scan_mm``: all 361 points, stamped at the centre of the scan (about 200 ms before it arrives), with the
  number of points;
- ``Sick/Timing``: the centre time and the number of points, which the localization service interpolates to.

The scan is computed from the robot's true pose and the wrist's pose *at the centre time*, so a moving robot gives
the same skewed timing as the real scanner; the other robots of a simulation of several stand where they were at
that time too (:mod:`pluto.sim.others`). ``sick/fault`` (or the ``fault_at`` parameter) injects the "fatal
error": every range is -1 while the scanner reboots (about 20 s, or the request's duration: at most an hour; a
longer or negative one is refused as a bad request, naming the field and its range).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import msgspec
import numpy as np

from pluto import msgs, names
from pluto.hardware.sick.sim import LaserParams, SimLaser
from pluto.runtime.ranges import Rate, Timeout, between, convert_request
from pluto.sim.device import SimDevice, SimDeviceParams, TruthHistory
from pluto.sim.others import OtherRobots
from pluto.sim.raycast import RayCaster

_TRUTH_WAIT = 1.0
"""s: how long after its time a scan waits for the true pose of that time (late poses on a busy machine)."""


class SimSickParams(SimDeviceParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    fault_at: simulated time of a fatal error, s (negative: none).
    reboot_time: s the scanner needs to recover.
    """

    rate_hz: Rate = 5.0
    fault_at: Annotated[float, between(-1.0, 1e6)] = -1.0
    reboot_time: Annotated[float, between(0.0, 3600.0)] = 20.0


class FaultRequest(msgspec.Struct, frozen=True):
    """Request of ``sick/fault``: how long the scanner stays down, s, in (0, 3600] (None: its reboot time).

    A longer fault is a typo or an attack, not a test: 999999999 s would hold the laser down for 31 years."""

    duration: Timeout | None = None


class SimSick(SimDevice[SimSickParams]):
    """The simulated laser scanner."""

    name = "sick"
    description = "simulated SICK laser: 361 beams over 180°, a scan every 200 ms"
    provides = (names.SICK_SCAN, names.SICK_SCAN_MM, names.SICK_TIMING)
    requires = ("sim", "base", "wrist")
    Params = SimSickParams

    others: OtherRobots | None = None
    """The other robots of a simulation of several (None until configured)."""

    def on_configure(self) -> None:
        p = self.params
        self.load_simulation()
        self.laser = SimLaser(
            RayCaster(self.world.segments(), self.world.circles),
            LaserParams(reboot_time=p.reboot_time),
            self.noise,
            self.rng,
            surfaces=self.site.surfaces,
        )
        self.history = TruthHistory()
        self.others = OtherRobots(self, self.settings.others())  # a simulation of several: the laser sees them
        self.wrist_history = _WristHistory()
        self.create_subscription(names.SIM_TRUTH, self.history.add, msgs.Odometry, depth=256)
        self.create_subscription(names.WRIST_STATE, self.wrist_history.add, msgs.ActuatorState, depth=256)
        self.scan_181 = self.create_publisher(names.SICK_SCAN)
        self.scan_mm = self.create_publisher(names.SICK_SCAN_MM)
        self.timing = self.create_publisher(names.SICK_TIMING)
        self.create_service("fault", self._fault, dict[str, Any] | None)
        self._next_arrival: float | None = None
        self._fault_done = False

    def _fault(self, values: dict[str, Any] | None) -> float:
        """``sick/fault``: the scanner fails now, for the request's duration; returns when it is back, s.

        Raises:
            msgspec.ValidationError: a duration out of (0, 3600] s or not a number (a bad request: refused and
                counted by the service, the scanner untouched).
        """
        request = convert_request(FaultRequest, values)
        self.laser.inject_fault(self.clock.now(), request.duration)
        return self.laser.failed_until

    def step(self, now: float) -> None:
        p = self.params
        lp = self.laser.params
        if p.fault_at >= 0 and not self._fault_done and now >= p.fault_at:
            self._fault_done = True
            self.laser.inject_fault(p.fault_at)
        if self._next_arrival is None or now < self._next_arrival - 2 * lp.period:
            self._next_arrival = now + lp.latency
            return
        if now < self._next_arrival - 1e-6:  # sums of periods round (0.6000000000000001): not a step late
            return
        arrival, centre = now, round(self._next_arrival - lp.latency, 9)
        wrist = self.wrist_history.newest  # -inf: no wrist on this robot, the laser looks straight ahead
        behind = self.history.newest < centre - 1e-6 or -math.inf < wrist < centre - 1e-6
        if behind and now - centre < _TRUTH_WAIT:
            # the base's true pose or the wrist's state has not reached the scan's time yet (they come from other
            # modules, later on a busy machine): the next step scans, rather than with a stale pose or pan
            return
        self._next_arrival = round(self._next_arrival + lp.period, 9)  # no drift of the sums: 9.6, not 9.5999...
        if self._next_arrival < now:
            self._next_arrival = now + lp.period  # fell behind: skip rather than burst
        pose = self.history.at(centre)
        if pose is None:
            return
        pan, tilt = self.wrist_history.at(centre)
        movers = self.world.mover_circles(centre)
        if self.others is not None and len(self.others):
            movers = np.vstack((movers, self.others.discs(centre)))
        ranges = self.laser.scan(centre, (pose.x, pose.y, pose.theta), pan, tilt, movers)
        angles = self.laser.beam_angles
        valid = 0 if self.laser.failed(centre) else len(ranges)
        self.scan_mm.write(
            msgs.LaserScan(
                stamp=centre,
                arrival=arrival,
                ranges=ranges.tolist(),
                angles=angles.tolist(),
                count=valid,
                max_range=lp.max_range,
            )
        )
        self.scan_181.write(
            msgs.LaserScan(
                stamp=arrival,
                arrival=arrival,
                ranges=ranges[::2].tolist(),
                angles=angles[::2].tolist(),
                count=(valid + 1) // 2,
                max_range=lp.max_range,
            )
        )
        self.timing.write(msgs.ScanTiming(stamp=centre, count=valid))


class _WristHistory:
    """Recent wrist positions, to know where the laser pointed at a given time."""

    def __init__(self) -> None:
        self._states: list[msgs.ActuatorState] = []

    def add(self, state: msgs.ActuatorState) -> None:
        self._states.append(state)
        if len(self._states) > 256:
            del self._states[:128]

    @property
    def newest(self) -> float:
        """Stamp of the newest state, s (-inf before the first)."""
        return self._states[-1].stamp if self._states else -math.inf

    def at(self, t: float) -> tuple[float, float]:
        """(pan, tilt) at time ``t``, rad: interpolated between the states around it (the unit moves smoothly between
        its reports, and whoever reads the scan interpolates the same states to its time), else the nearest state."""
        states = [s for s in self._states if len(s.position) >= 2]
        if not states:
            return 0.0, 0.0
        before: Any = None
        for state in states:
            if state.stamp <= t:
                before = state
            elif before is None:
                return float(state.position[0]), float(state.position[1])
            else:
                f = (t - before.stamp) / (state.stamp - before.stamp)
                (pan0, tilt0), (pan1, tilt1) = before.position[:2], state.position[:2]
                return float(pan0 + f * (pan1 - pan0)), float(tilt0 + f * (tilt1 - tilt0))
        return float(before.position[0]), float(before.position[1])
