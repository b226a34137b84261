"""The simulated inertial unit: raw data at rest and turning, the filtered state, its delay, gyro bias."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pluto.hardware.dmu.sim import GRAVITY, SimDmu
from pluto.sim.noise import REALISTIC, device_rng, noise_profile

DT = 0.02  # the dmu module's step at 50 Hz


def run(dmu: SimDmu, seconds: float, v: float, omega: float, t0: float = 0.0) -> list:
    samples = []
    t = t0
    for _ in range(round(seconds / DT)):
        t += DT
        samples.append(dmu.step(t, DT, v, omega))
    return samples


def test_at_rest_the_unit_feels_gravity_only() -> None:
    dmu = SimDmu()
    first = dmu.step(0.0, 0.0, 0.0, 0.0)
    for s in [first, *run(dmu, 2.0, 0.0, 0.0)]:
        assert s.accelerations == pytest.approx((0.0, 0.0, GRAVITY))
        assert s.rates == (0.0, 0.0, 0.0)
        assert (s.phi, s.psi) == (0.0, 0.0)
        assert s.filtered_accelerations == pytest.approx((0.0, 0.0, GRAVITY))
        assert s.filtered_rates == pytest.approx((0.0, 0.0, 0.0))
        assert s.theta == 0.0
    assert pytest.approx(9.81) == GRAVITY


def test_at_rest_with_noise_the_mean_is_still_gravity() -> None:
    dmu = SimDmu(noise_profile("realistic", {"gyro_bias": 0.0, "gyro_drift": 0.0}), device_rng(3, "dmu"))
    samples = run(dmu, 20.0, 0.0, 0.0)
    acc = np.array([s.accelerations for s in samples])
    rates = np.array([s.rates for s in samples])
    assert acc.mean(axis=0) == pytest.approx([0.0, 0.0, GRAVITY], abs=0.01)
    assert acc.std(axis=0) == pytest.approx([REALISTIC.accel_noise_std] * 3, rel=0.15)
    assert rates.mean(axis=0) == pytest.approx([0.0, 0.0, 0.0], abs=0.001)
    assert rates.std(axis=0) == pytest.approx([REALISTIC.gyro_noise_std] * 3, rel=0.15)


def test_turning_at_a_constant_rate() -> None:
    tau = 0.1
    dmu = SimDmu(time_constant=tau)
    omega, v = 0.4, 0.5
    samples = run(dmu, 5.0, v, omega)
    last = samples[-1]
    t = 5.0
    assert last.rates == pytest.approx((0.0, 0.0, omega))
    assert last.filtered_rates[2] == pytest.approx(omega, abs=1e-6)
    # centripetal acceleration v·ω to the left
    assert last.accelerations == pytest.approx((0.0, v * omega, GRAVITY))
    assert last.filtered_accelerations[1] == pytest.approx(v * omega, abs=1e-6)
    # the heading integrates the filtered rate: ω·t minus what the filter lag holds back (≈ ω·τ)
    assert last.theta == pytest.approx(omega * t, abs=omega * tau * 1.5)
    assert last.theta < omega * t
    assert last.theta == pytest.approx(omega * (t - tau), abs=0.01)
    # the filtered rate rises monotonically toward ω with the filter's time constant
    filtered = [s.filtered_rates[2] for s in samples]
    assert all(b >= a for a, b in itertools.pairwise(filtered))
    k = round(tau / DT)  # after one time constant about 1 - 1/e of the step
    assert filtered[k - 1] == pytest.approx(omega * (1 - math.exp(-1)), rel=0.1)


def test_state_is_stamped_one_time_constant_late() -> None:
    for tau in (0.1, 0.25):
        dmu = SimDmu(time_constant=tau)
        for s in run(dmu, 1.0, 0.3, 0.2, t0=100.0):
            assert s.state_stamp == pytest.approx(s.stamp - tau)


def test_forward_acceleration_is_the_change_of_speed() -> None:
    dmu = SimDmu()
    dmu.step(0.0, 0.0, 0.0, 0.0)
    s = dmu.step(DT, DT, 0.01, 0.0)
    assert s.accelerations[0] == pytest.approx(0.5)


def test_gyro_bias_makes_the_heading_drift() -> None:
    bias = 0.01
    dmu = SimDmu(noise_profile("ideal", {"gyro_bias": bias}))
    t = 30.0
    last = run(dmu, t, 0.0, 0.0)[-1]
    assert last.rates[2] == pytest.approx(bias)
    assert last.theta == pytest.approx(bias * t, rel=0.01)


def test_gyro_drift_is_a_random_walk_of_the_bias() -> None:
    dmu = SimDmu(noise_profile("ideal", {"gyro_drift": 0.01}), np.random.default_rng(1))
    run(dmu, 10.0, 0.0, 0.0)
    assert dmu.bias != 0.0
    assert abs(dmu.bias) < 0.01 * math.sqrt(10.0) * 5  # within 5 sigma of a random walk


def test_heading_follows_the_body_when_samples_and_body_are_not_aligned() -> None:
    # The unit samples at irregular times and sees the body's rate only as it was at its last update (a separate
    # process): integrating that held rate drifts; the body's true heading changes do not.
    rng = np.random.default_rng(4)
    told, untold = SimDmu(), SimDmu()
    heading, t, omega_seen = 0.0, 0.0, 0.0
    for k in range(3000):
        dt = float(rng.uniform(0.005, 0.04))
        omega = math.sin(0.7 * t) * (1.0 if k % 200 < 120 else -1.3)  # wobbling, as a controller in a corridor does
        heading += omega * dt
        t += dt
        told.step(t, dt, 0.5, omega_seen, omega * dt)
        untold.step(t, dt, 0.5, omega_seen)
        omega_seen = omega  # one step late
    for _ in range(100):  # stand still until the filter settles
        t += 0.02
        sample = told.step(t, 0.02, 0.0, 0.0, 0.0)
        drifted = untold.step(t, 0.02, 0.0, 0.0)
    assert sample.theta == pytest.approx(heading, abs=1e-5)
    assert abs(drifted.theta - heading) > 0.01


@pytest.mark.parametrize("steps", [[0.02] * 100, [0.02, 0.3, 0.02, 0.7, 0.1, 0.02, 0.5, 0.25, 0.09]])
def test_the_state_heading_is_the_heading_at_its_stamp_whatever_the_step(steps: list[float]) -> None:
    # A unit sampled late (a busy computer) must not give a turn's heading a wrong time: the state's heading is the
    # body's heading at the state's stamp, one time constant before the measurement.
    def heading(t: float) -> float:  # a turn that speeds up and stops: 0.5 rad/s², then straight on after 1.5 s
        return 0.25 * min(t, 1.5) ** 2

    dmu = SimDmu(time_constant=0.1)
    t, last = 0.0, 0.0
    dmu.step(t, 0.0, 0.3, 0.0, None)
    for dt in steps:
        t += dt
        sample = dmu.step(t, dt, 0.3, 0.0, heading(t) - last)
        last = heading(t)
        # known exactly at the samples; in between, the heading is interpolated between the last two samples
        times = [0.0, *itertools.accumulate(steps)]
        assert sample.state_stamp == pytest.approx(t - 0.1)
        if sample.state_stamp >= 0.0:
            before = max(s for s in times if s <= sample.state_stamp + 1e-12)
            after = min(s for s in times if s >= sample.state_stamp - 1e-12)
            low, high = sorted((heading(before), heading(after)))
            assert low - 1e-9 <= sample.theta <= high + 1e-9
        if any(abs(s - sample.state_stamp) < 1e-9 for s in times):
            assert sample.theta == pytest.approx(heading(sample.state_stamp), abs=1e-9)
