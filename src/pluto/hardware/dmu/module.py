"""The simulated inertial unit server: ``DMU/Raw`` (the sensor's data, z up) and ``DMU/State`` (filtered rates and
accelerations, the heading integrated from the vertical rate, stamped later by the filter's delay).

A unit started again by the supervisor after a crash goes on with its integrated heading and filter where they were
(:mod:`pluto.runtime.persist`), and takes the body's turn meanwhile into its heading: the localization service, which
turns by the changes of this heading, sees no jump."""

from __future__ import annotations

import json
import math
import threading
from typing import Annotated

import msgspec

from pluto import msgs, names
from pluto.geometry import wrap_angle
from pluto.hardware.dmu.sim import SimDmu
from pluto.runtime.persist import Continuation, clock_run
from pluto.runtime.ranges import Rate, between
from pluto.sim.device import SimDevice, SimDeviceParams


class SimDmuParams(SimDeviceParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    time_constant: of the state's low-pass filter, s (also the delay of its stamp).
    """

    rate_hz: Rate = 20.0
    time_constant: Annotated[float, between(0.0, 100.0, open_low=True)] = 0.1


class SimDmuState(msgspec.Struct, frozen=True, kw_only=True):
    """What a restarted simulated inertial unit goes on from."""

    last: float  # stamp of the body's pose last measured, s
    last_heading: float  # the body's heading then, rad
    heading: float  # the integrated heading, rad
    history: list[tuple[float, float]]  # (t, heading) of the filter's delay line
    rates: tuple[float, float, float]
    accelerations: tuple[float, float, float]
    bias: float
    last_v: float | None
    rng: str  # the random generator's state, JSON


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
        self.continuation = Continuation.of(self, SimDmuState)
        loaded = self.continuation.load(self.clock.now(), clock_run(self.clock))
        if loaded is not None:
            self._restore(loaded[0])

    def _restore(self, state: SimDmuState) -> None:
        dmu = self.dmu
        self._last, self._last_heading = state.last, state.last_heading
        dmu.filter.heading, dmu.theta = state.heading, state.heading
        dmu.filter._history.extend(state.history)
        dmu.filter.rates[:] = state.rates
        dmu.filter.accelerations[:] = state.accelerations
        dmu.bias, dmu._last_v = state.bias, state.last_v
        self.rng.bit_generator.state = json.loads(state.rng)
        self.get_logger().warning(
            "restarted: the heading goes on from %.1f° at %.3f s (the body's turn since is taken in)",
            math.degrees(state.heading),
            state.last,
        )

    def _state(self) -> SimDmuState:
        dmu = self.dmu
        assert self._last is not None and self._last_heading is not None
        r, a = dmu.filter.rates, dmu.filter.accelerations
        return SimDmuState(
            last=self._last,
            last_heading=self._last_heading,
            heading=dmu.filter.heading,
            history=list(dmu.filter._history),
            rates=(float(r[0]), float(r[1]), float(r[2])),
            accelerations=(float(a[0]), float(a[1]), float(a[2])),
            bias=dmu.bias,
            last_v=dmu._last_v,
            rng=json.dumps(self.rng.bit_generator.state),
        )

    def on_shutdown(self) -> None:
        if self._last is not None:
            self.continuation.save(self._state(), self._last, clock_run(self.clock))

    def _add_pose(self, pose: msgs.Odometry) -> None:
        with self._poses_lock:
            self._poses.append(pose)

    def step(self, now: float) -> None:
        with self._poses_lock:
            poses, self._poses = self._poses, []
        for truth in poses:
            self._measure(truth)
        if self._last is not None:
            self.continuation.save_due(self._state, self._last, clock_run(self.clock))

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
