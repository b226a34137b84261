"""Sensor and motion noise of the simulated robot.

The original's dummies (docs/design.md) were ideal (odometry without error, perfect scans); that stays the default
(:data:`IDEAL`). :data:`REALISTIC` adds the errors a real outdoor robot shows, each a named setting a user can
override in the configuration file. All randomness comes from a numpy ``Generator`` seeded per device from one seed,
so the same seed gives the same noisy run.
"""

from __future__ import annotations

import math
import zlib
from typing import Annotated

import msgspec
import numpy as np

from pluto.errors import ConfigError


def _doc(text: str) -> msgspec.Meta:
    return msgspec.Meta(description=text)


class NoiseProfile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every error the simulator can add. Zero everywhere is the ideal robot."""

    odometry_scale_error: Annotated[float, _doc("Fractional error of the wheel circumference (systematic).")] = 0.0
    odometry_distance_error: Annotated[
        float,
        _doc(
            "Fractional error of the odometry's distances, exact and signed (systematic; turns are not affected): "
            "0.04 counts 1.04 m for every metre driven."
        ),
    ] = 0.0
    odometry_slip: Annotated[float, _doc("Std dev of the fractional wheel slip per step (random).")] = 0.0
    wheel_spin_when_stalled: Annotated[bool, _doc("Wheels keep turning against an obstacle (odometry runs).")] = False
    laser_range_std: Annotated[float, _doc("Std dev of laser range noise, m.")] = 0.0
    laser_dropout: Annotated[float, _doc("Probability that a beam returns no echo (max range).")] = 0.0
    sonar_range_std: Annotated[float, _doc("Std dev of sonar range noise, m.")] = 0.0
    sonar_dropout: Annotated[float, _doc("Probability that a sonar reports max range.")] = 0.0
    gyro_bias: Annotated[float, _doc("Constant bias of the vertical gyro, rad/s.")] = 0.0
    gyro_drift: Annotated[float, _doc("Random walk of the gyro bias, rad/s per sqrt(s).")] = 0.0
    gyro_noise_std: Annotated[float, _doc("White noise of the gyros, rad/s.")] = 0.0
    accel_noise_std: Annotated[float, _doc("White noise of the accelerometers, m/s².")] = 0.0
    tilt_noise_std: Annotated[float, _doc("Noise of the pitch and roll angles, rad.")] = 0.0
    gps_std: Annotated[float, _doc("Std dev of GPS position noise with a differential fix, m.")] = 0.0
    gps_degraded_std: Annotated[float, _doc("Std dev of GPS position noise with a plain fix, m.")] = 0.0
    gps_degrade_rate: Annotated[float, _doc("Rate of losing the differential fix, per s.")] = 0.0
    gps_recover_rate: Annotated[float, _doc("Rate of getting it back, per s.")] = 1.0

    def __post_init__(self) -> None:
        for field in msgspec.structs.fields(self):
            value = getattr(self, field.name)
            if field.name == "odometry_distance_error":
                if not (math.isfinite(value) and -0.5 < value < 1.0):
                    raise ValueError(f"{field.name} must be in (-0.5, 1), got {value}")
            elif not isinstance(value, bool) and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{field.name} must be >= 0 and finite, got {value}")
        for name in ("laser_dropout", "sonar_dropout"):
            if getattr(self, name) > 1:
                raise ValueError(f"{name} is a probability, got {getattr(self, name)}")


IDEAL = NoiseProfile()

REALISTIC = NoiseProfile(
    odometry_scale_error=0.02,
    odometry_slip=0.03,
    wheel_spin_when_stalled=True,
    laser_range_std=0.01,
    laser_dropout=0.005,
    sonar_range_std=0.05,
    sonar_dropout=0.02,
    gyro_bias=0.002,
    gyro_drift=0.0005,
    gyro_noise_std=0.005,
    accel_noise_std=0.05,
    tilt_noise_std=0.002,
    gps_std=0.3,
    gps_degraded_std=3.0,
    gps_degrade_rate=0.01,
    gps_recover_rate=0.1,
)

PROFILES: dict[str, NoiseProfile] = {"ideal": IDEAL, "realistic": REALISTIC}


def noise_profile(name: str, overrides: dict[str, object] | None = None) -> NoiseProfile:
    """The named profile with some settings replaced.

    Raises:
        ConfigError: unknown profile, unknown setting or a bad value.
    """
    try:
        base = PROFILES[name]
    except KeyError:
        raise ConfigError(f"unknown noise profile {name!r}; known: {', '.join(PROFILES)}") from None
    if not overrides:
        return base
    try:
        return msgspec.convert({**msgspec.structs.asdict(base), **overrides}, NoiseProfile)
    except msgspec.ValidationError as err:
        raise ConfigError(f"noise settings: {err}") from None


def device_rng(seed: int, device: str) -> np.random.Generator:
    """A generator for one device, independent of the others' and reproducible from ``seed``."""
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(device.encode())]))
