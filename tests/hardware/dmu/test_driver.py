"""The Crossbow driver against the emulated unit: TCP and pty, continuous and polled, noise, unplug and replug."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
import pytest

from pluto.hardware.dmu.driver import CrossbowDriver, CrossbowError
from pluto.hardware.dmu.emulate import CrossbowDevice, DeviceEmulator, LinkNoise, SyntheticMotion
from pluto.hardware.dmu.filter import GRAVITY, DmuFilter
from pluto.hardware.dmu.sim import SimDmu
from tests.helpers import free_tcp_port, wait_until

GUARD = 5.0  # s: waits are for conditions; this only guards against a hang


@pytest.fixture
def unit() -> Iterator[DeviceEmulator]:
    with DeviceEmulator(CrossbowDevice(SyntheticMotion(v=0.5, omega=0.3, tilt=0.0))) as emulator:
        yield emulator


@pytest.mark.parametrize("transport", ["tcp", "pty"])
@pytest.mark.parametrize("mode", ["continuous", "polled"])
def test_samples_in_plutos_frame_and_the_heading_integrates(transport: str, mode: str) -> None:
    motion = SyntheticMotion(v=0.5, omega=0.3, tilt=0.0)
    with (
        DeviceEmulator(CrossbowDevice(motion), transport=transport) as unit,  # type: ignore[arg-type]
        CrossbowDriver(unit.url, mode=mode, poll_hz=50.0) as driver,  # type: ignore[arg-type]
    ):
        samples = [driver.wait_for_sample(GUARD) for _ in range(41)]
        assert driver.connected
    # the first state's heading has no history yet: take one a filter delay (10 packets or more) later
    first, last = samples[10], samples[40]
    assert first is not None and last is not None
    # a left turn is +z in Pluto's frame; the unit's z down said -0.3; at rest +g on z
    assert last.raw.rates[2] == pytest.approx(0.3, abs=0.005)
    assert last.raw.accelerations[2] == pytest.approx(GRAVITY, abs=0.01)
    assert last.raw.accelerations[1] == pytest.approx(0.5 * 0.3, abs=0.01)  # centripetal, to the left
    # the heading integrates the vertical rate over the time between the packets
    turned = last.state.theta - first.state.theta
    assert turned == pytest.approx(0.3 * (last.state.stamp - first.state.stamp), rel=0.05)
    assert last.state.stamp == pytest.approx(last.raw.stamp - 0.1)
    # one packet after another (a busy test thread may wake after several: it gets the newest, never an older one)
    numbers = [s.number for s in samples if s is not None]
    assert all(b > a for a, b in itertools.pairwise(numbers))
    assert last.number - first.number >= 30


def test_pitch_and_roll_signs() -> None:
    # a nose-down pitch φ > 0 about y left, a roll ψ > 0 about x forward, as the source gives them
    class Tilted:
        def reading(self, t: float) -> object:
            from pluto.hardware.dmu.emulate import InertialReading

            return InertialReading(phi=0.1, psi=-0.05)

    with (
        DeviceEmulator(CrossbowDevice(Tilted())) as unit,  # type: ignore[arg-type]
        CrossbowDriver(unit.url) as driver,
    ):
        sample = driver.wait_for_sample(GUARD)
    assert sample is not None
    assert sample.raw.phi == pytest.approx(0.1, abs=1e-3) and sample.raw.psi == pytest.approx(-0.05, abs=1e-3)


def test_no_unit_on_a_loopback_is_a_clear_error() -> None:
    # loop:// echoes the driver's own commands: R comes back as R, never H
    driver = CrossbowDriver("loop://", handshake_timeout=0.05, reconnect=False)
    with pytest.raises(CrossbowError, match="no H to R"):
        driver.connect()
    driver.close()


def test_a_port_that_does_not_open_is_a_clear_error() -> None:
    driver = CrossbowDriver(f"socket://127.0.0.1:{free_tcp_port()}", reconnect=False)
    with pytest.raises(CrossbowError, match="cannot open"):
        driver.connect()
    driver.close()


def test_one_percent_link_noise_still_gives_samples_and_counts_the_damage() -> None:
    noise = LinkNoise(0.0, 0.01, np.random.default_rng(3))
    with (
        DeviceEmulator(CrossbowDevice(SyntheticMotion(omega=0.3, tilt=0.0), rate_hz=200.0), link_noise=noise) as unit,
        CrossbowDriver(unit.url, handshake_timeout=0.1) as driver,
    ):
        samples = [driver.wait_for_sample(GUARD) for _ in range(150)]
        stats = driver.statistics()
    assert all(s is not None for s in samples)
    assert stats.bad_checksum > 0 and stats.garbage_bytes > 0
    # decoded packets are good ones: the rates are the source's. An 8-bit sum lets a damaged packet through now and
    # then (1 in 256 of those the hunt tries), so a few outliers are the protocol's, not the decoder's.
    good = [s is not None and s.raw.rates[2] == pytest.approx(0.3, abs=0.005) for s in samples]
    assert sum(good) >= 0.98 * len(samples)


def test_unplug_and_replug() -> None:
    port = free_tcp_port()
    unit = DeviceEmulator(CrossbowDevice(SyntheticMotion()), port=port).start()
    driver = CrossbowDriver(unit.url, link_timeout=0.2)
    try:
        driver.connect()
        assert driver.wait_for_sample(GUARD) is not None
        unit.stop()  # unplugged
        wait_until(lambda: not driver.connected, timeout=GUARD, message="the link seen lost")
        assert driver.silence() > 0.2
        unit.start()  # plugged back, same port: the driver reconnects by itself
        wait_until(lambda: driver.connected, timeout=GUARD, message="the link back")
        assert driver.wait_for_sample(GUARD) is not None
        assert driver.statistics().reconnects == 1
    finally:
        driver.close()
        unit.stop()


def test_the_filter_is_the_simulated_units() -> None:
    assert isinstance(SimDmu().filter, DmuFilter)
    f = DmuFilter(0.2)
    state = f.update(0.0, 0.0, (0.0, 0.0, 1.0), (0.0, 0.0, GRAVITY))
    for k in range(1, 101):
        state = f.update(0.01 * k, 0.01, (0.0, 0.0, 1.0), (1.0, 0.0, GRAVITY))
    # the heading as it was τ before the newest sample, stamped then
    assert state.stamp == pytest.approx(1.0 - 0.2)
    assert state.theta == pytest.approx(0.8, abs=1e-9)
    # first-order lag of the x acceleration's step: 1 - (τ/(τ+dt))^n
    assert state.accelerations[0] == pytest.approx(1.0 - (0.2 / 0.21) ** 100)
    assert not math.isnan(state.rates[2])
    with pytest.raises(ValueError):
        DmuFilter(0.0)
