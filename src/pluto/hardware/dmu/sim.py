"""The simulated inertial unit (a Crossbow-like DMU) and the filtering the original's ``DMU/State`` did
(docs/design.md).

Raw data has z up, x forward, y left: pitch φ and roll ψ (filtered in the sensor to agree with gravity, so 0 on flat
ground plus noise), the angular rates and the accelerations (specific force: +g on z at rest). The state low-pass
filters rates and accelerations, and gives the heading θ integrated from the vertical rate as it was one filter delay
(the time constant) before the measurement, stamped with that earlier time, as the original's filtered output was.
The filtering is :class:`pluto.hardware.dmu.filter.DmuFilter`, shared with the Crossbow driver.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pluto.hardware.dmu.filter import GRAVITY, DmuFilter
from pluto.sim.noise import IDEAL, NoiseProfile

__all__ = ["GRAVITY", "DmuSample", "SimDmu"]


@dataclass(frozen=True)
class DmuSample:
    """One output of the unit: raw (stamped when measured) and filtered state (stamped with the filter delay)."""

    stamp: float
    phi: float
    psi: float
    rates: tuple[float, float, float]
    accelerations: tuple[float, float, float]
    state_stamp: float
    theta: float
    filtered_rates: tuple[float, float, float]
    filtered_accelerations: tuple[float, float, float]


class SimDmu:
    """Turns the true motion of the body into inertial data.

    Args:
        noise: error model (gyro bias and drift, white noise).  rng: random generator.
        time_constant: of the low-pass filter of the state, s.
    """

    def __init__(
        self, noise: NoiseProfile = IDEAL, rng: np.random.Generator | None = None, time_constant: float = 0.1
    ) -> None:
        self.noise = noise
        self.rng = rng or np.random.default_rng(0)
        self.tau = time_constant
        self.bias = noise.gyro_bias
        self.theta = 0.0
        self.filter = DmuFilter(time_constant)
        self._last_v: float | None = None

    def step(self, t: float, dt: float, v: float, omega: float, turned: float | None = None) -> DmuSample:
        """Measure at time ``t``, ``dt`` after the previous sample, with the body at (v m/s, ω rad/s).

        Args:
            turned: how far the body really turned since the previous sample, rad (default ω·dt). A gyro integrates
                the rate continuously, so its heading follows the body's whatever the sampling; given the true
                heading change, the simulated unit does too, even when its samples and the body's are not aligned.
        """
        n = self.noise
        if n.gyro_drift and dt > 0:
            self.bias += float(self.rng.normal(0.0, n.gyro_drift * np.sqrt(dt)))
        dv = 0.0 if self._last_v is None or dt <= 0 else (v - self._last_v) / dt
        self._last_v = v
        rates = np.array([0.0, 0.0, omega + self.bias])
        acc = np.array([dv, v * omega, GRAVITY])
        if n.gyro_noise_std:
            rates = rates + self.rng.normal(0.0, n.gyro_noise_std, 3)
        if n.accel_noise_std:
            acc = acc + self.rng.normal(0.0, n.accel_noise_std, 3)
        phi, psi = self.rng.normal(0.0, n.tilt_noise_std, 2) if n.tilt_noise_std else (0.0, 0.0)
        gyro_error = float(rates[2]) - omega  # bias and white noise
        state = self.filter.update(t, dt, rates, acc, (omega * dt if turned is None else turned) + gyro_error * dt)
        self.theta = state.theta
        return DmuSample(
            stamp=t,
            phi=float(phi),
            psi=float(psi),
            rates=(float(rates[0]), float(rates[1]), float(rates[2])),
            accelerations=(float(acc[0]), float(acc[1]), float(acc[2])),
            state_stamp=state.stamp,
            theta=state.theta,
            filtered_rates=state.rates,
            filtered_accelerations=state.accelerations,
        )
