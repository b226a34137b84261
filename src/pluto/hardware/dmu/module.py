"""The simulated inertial unit server: ``DMU/Raw`` (the sensor's data, z up) and ``DMU/State`` (filtered rates and
accelerations, the heading integrated from the vertical rate, stamped later by the filter's delay)."""

from __future__ import annotations

import threading

from pluto import msgs, names
from pluto.geometry import wrap_angle
from pluto.sim.device import SimDevice, SimDeviceParams
from pluto.sim.inertial import SimDmu


class SimDmuParams(SimDeviceParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    time_constant: of the state's low-pass filter, s (also the delay of its stamp).
    """

    rate_hz: float = 20.0
    time_constant: float = 0.1


class SimDmuModule(SimDevice[SimDmuParams]):
    """The simulated inertial unit."""

    name = "dmu"
    description = "simulated inertial unit: raw data and filtered state with integrated heading"
    provides = (names.DMU_RAW, names.DMU_STATE)
    requires = ("sim", "base")
    Params = SimDmuParams

    def on_configure(self) -> None:
        self.load_simulation()
        self.dmu = SimDmu(self.noise, self.rng, self.params.time_constant)
        # Every pose of the body, not only the newest: a unit that steps late (a busy computer) still measures the
        # body at each of its times, as a gyro integrates continuously.
        self._poses: list[msgs.Odometry] = []
        self._poses_lock = threading.Lock()
        self.create_subscription(names.SIM_TRUTH, self._add_pose, msgs.Odometry, depth=1024)
        self.raw = self.create_publisher(names.DMU_RAW)
        self.state_out = self.create_publisher(names.DMU_STATE)
        self._last: float | None = None
        self._last_heading: float | None = None

    def _add_pose(self, pose: msgs.Odometry) -> None:
        with self._poses_lock:
            self._poses.append(pose)

    def step(self, now: float) -> None:
        with self._poses_lock:
            poses, self._poses = self._poses, []
        for truth in poses:
            self._measure(truth)

    def _measure(self, truth: msgs.Odometry) -> None:
        # The unit measures the body as it was at the body's own time: stamped with the module's clock instead, a
        # unit running late (a busy machine) would give every heading a later time than it had, and dead
        # reckoning, which turns the odometry by these headings, would drift while the robot turns.
        if self._last is not None and truth.stamp < self._last - 1.0:
            self._last = self._last_heading = None  # the simulation started again
        if self._last is not None and truth.stamp <= self._last:
            return  # nothing new of the body
        dt = 0.0 if self._last is None else truth.stamp - self._last
        self._last = truth.stamp
        turned = None if self._last_heading is None else wrap_angle(truth.theta - self._last_heading)
        self._last_heading = truth.theta
        s = self.dmu.step(truth.stamp, dt, truth.v, truth.omega, turned)
        self.raw.write(
            msgs.DmuRaw(stamp=s.stamp, phi=s.phi, psi=s.psi, rates=list(s.rates), accelerations=list(s.accelerations))
        )
        self.state_out.write(
            msgs.DmuState(
                stamp=s.state_stamp,
                theta=s.theta,
                phi=s.phi,
                psi=s.psi,
                rates=list(s.filtered_rates),
                accelerations=list(s.filtered_accelerations),
            )
        )
