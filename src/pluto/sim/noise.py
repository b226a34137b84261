"""Sensor, motion and world noise of the simulated robot.

The original's dummies (docs/design.md) were ideal (odometry without error, perfect scans, walls exactly where the map
says); that stays the default (:data:`IDEAL`). :data:`BASIC` adds the devices' own errors in a world that matches its
map: odometry scale error and slip, 1 cm laser noise at any range and a few dropouts, gyro bias and drift, GPS noise.
:data:`REALISTIC` is the world as rough as a real building (each figure from the SICK LMS 2xx's datasheet or a
published characterisation of a laser scanner, see the settings' descriptions):

* the laser's range noise grows with the range (σ = 1 cm + 0.1 % of the range; SICK gives its LMS 5xx's statistical
  error as 6, 8 and 14 mm at 1-10, 10-20 and 20-30 m, and the LMS 2xx's cm mode as a few cm);
* its spot has a width (a quarter of a degree): a spot across an edge sees both surfaces and half the time returns
  a range between them, a *mixed pixel* (Ye and Borenstein, "Characterization of a 2-D laser scanner for mobile
  robot obstacle negotiation", ICRA 2002, on the LMS 200);
* an echo weakens with the range, the incidence and the surface's darkness: the LMS 2xx reaches 30 m on a surface of
  10 % remission, so dark surfaces (2-6 %) and walls seen at grazing incidence far away return no echo (max range);
* some walls hold glass panes, which echo only near their normal and let the beam through at other angles;
* the building as built is a few cm off its plan, the map the robot localizes against (:mod:`pluto.sim.site`);
* unmapped clutter stands along the walls: boxes, chairs, pairs of legs (:mod:`pluto.sim.site`);
* the odometry's heading drifts by a bias per metre (wheels of unequal size), and the wheels slip now and then
  for a moment (they count a good part more than the robot moved, and turn it a little).

Each setting is named and can be overridden in the configuration file. All randomness comes from numpy
``Generator`` objects seeded per device (and one for the site) from one seed, so the same seed gives the same noisy
run.
"""

from __future__ import annotations

import math
import zlib
from typing import Annotated

import msgspec
import numpy as np

from pluto.errors import ConfigError
from pluto.runtime.params import Params
from pluto.runtime.ranges import check_ranges


def _doc(text: str) -> msgspec.Meta:
    return msgspec.Meta(description=text)


def _in(high: float, text: str) -> msgspec.Meta:
    """A setting's range, [0, ``high``], and its description."""
    return msgspec.Meta(ge=0.0, le=high, description=text)


def _in_open(low: float, high: float, text: str) -> msgspec.Meta:
    """A setting's range, (``low``, ``high``), and its description."""
    return msgspec.Meta(gt=low, lt=high, description=text)


class NoiseProfile(Params, kw_only=True, forbid_unknown_fields=True):
    """Every error the simulator can add, each in its declared range (a probability in [0, 1]). Zero everywhere is
    the ideal robot."""

    odometry_scale_error: Annotated[float, _in(1.0, "Fractional error of the wheel circumference (systematic).")] = 0.0
    odometry_distance_error: Annotated[
        float,
        _in_open(
            -0.5,
            1.0,
            "Fractional error of the odometry's distances, exact and signed (systematic; turns are not affected): "
            "0.04 counts 1.04 m for every metre driven.",
        ),
    ] = 0.0
    odometry_slip: Annotated[float, _in(1.0, "Std dev of the fractional wheel slip per step (random).")] = 0.0
    odometry_heading_bias: Annotated[
        float,
        _in(
            1.0,
            "Std dev of the odometry's heading error per metre driven, rad/m, drawn once per run (wheels of unequal "
            "size: 0.01 rad/m is a 0.4 % difference on a 0.4 m track).",
        ),
    ] = 0.0
    odometry_slip_rate: Annotated[
        float,
        _in(
            100.0,
            "Rate of short wheel slips while the robot drives, per s: for 0.1-0.3 s the wheels count 10-40 % more "
            "than the robot moves and turn the odometry by up to 0.2 rad per metre.",
        ),
    ] = 0.0
    wheel_spin_when_stalled: Annotated[bool, _doc("Wheels keep turning against an obstacle (odometry runs).")] = False
    laser_range_std: Annotated[float, _in(10.0, "Std dev of laser range noise at zero range, m.")] = 0.0
    laser_range_std_per_m: Annotated[
        float,
        _in(1.0, "Growth of the laser's range noise with the range: std dev laser_range_std + this x range, m/m."),
    ] = 0.0
    laser_dropout: Annotated[float, _in(1.0, "Probability that a beam returns no echo (max range).")] = 0.0
    laser_spot: Annotated[
        float,
        _in(1.0, "Width of the laser's spot (beam divergence), rad: a spot across an edge sees both surfaces."),
    ] = 0.0
    laser_mixed_pixels: Annotated[
        float,
        _in(
            1.0,
            "Probability that a spot across an edge returns a range between the two surfaces (a mixed pixel); "
            "otherwise it returns the nearer one.",
        ),
    ] = 0.0
    laser_range_at_10: Annotated[
        float,
        _in(
            1000.0,
            "Range of an echo from a surface of 10 % remission at normal incidence, m (0: every surface echoes up "
            "to max range). An echo's reach goes with the square root of remission x cos(incidence).",
        ),
    ] = 0.0
    laser_dark_surfaces: Annotated[
        float,
        _in(1.0, "Share of the surfaces that are dark (2-6 % remission; the others 20-90 %)."),
    ] = 0.0
    laser_glass: Annotated[float, _in(1.0, "Share of the walls 2 m or longer with a glass pane in them.")] = 0.0
    laser_glass_angle: Annotated[
        float,
        _in(
            math.pi / 2,
            "A glass pane echoes within this angle of its normal, rad; farther off the beam passes through.",
        ),
    ] = 0.0
    map_offset_std: Annotated[
        float,
        _in(
            10.0,
            "Std dev of how far the walls, obstacles and their corners as built lie from the map, m (a smooth "
            "displacement of the whole building, over tens of metres).",
        ),
    ] = 0.0
    clutter_spacing: Annotated[
        float,
        _in(
            10000.0,
            "Metres of wall per unmapped object on average (boxes, chairs, pairs of legs standing along the walls, "
            "away from doorways); 0: no clutter.",
        ),
    ] = 0.0
    sonar_range_std: Annotated[float, _in(10.0, "Std dev of sonar range noise, m.")] = 0.0
    sonar_dropout: Annotated[float, _in(1.0, "Probability that a sonar reports max range.")] = 0.0
    gyro_bias: Annotated[float, _in(10.0, "Constant bias of the vertical gyro, rad/s.")] = 0.0
    gyro_drift: Annotated[float, _in(10.0, "Random walk of the gyro bias, rad/s per sqrt(s).")] = 0.0
    gyro_noise_std: Annotated[float, _in(10.0, "White noise of the gyros, rad/s.")] = 0.0
    accel_noise_std: Annotated[float, _in(100.0, "White noise of the accelerometers, m/s².")] = 0.0
    tilt_noise_std: Annotated[float, _in(math.pi, "Noise of the pitch and roll angles, rad.")] = 0.0
    gps_std: Annotated[float, _in(1000.0, "Std dev of GPS position noise with a differential fix, m.")] = 0.0
    gps_degraded_std: Annotated[float, _in(1000.0, "Std dev of GPS position noise with a plain fix, m.")] = 0.0
    gps_degrade_rate: Annotated[float, _in(1000.0, "Rate of losing the differential fix, per s.")] = 0.0
    gps_recover_rate: Annotated[float, _in(1000.0, "Rate of getting it back, per s.")] = 1.0

    @property
    def rough_world(self) -> bool:
        """The world as built differs from its map (walls moved, clutter, glass or surfaces that matter)."""
        return bool(self.map_offset_std or self.clutter_spacing or self.laser_glass or self.laser_dark_surfaces)


IDEAL = NoiseProfile()

BASIC = NoiseProfile(
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
"""The devices' own errors in a world exactly as mapped (what ``realistic`` was before the world got rough)."""

REALISTIC = msgspec.structs.replace(
    BASIC,
    odometry_heading_bias=0.01,
    odometry_slip_rate=0.05,
    laser_range_std_per_m=0.001,
    laser_spot=math.radians(0.25),
    laser_mixed_pixels=0.5,
    laser_range_at_10=30.0,
    laser_dark_surfaces=0.1,
    laser_glass=0.15,
    laser_glass_angle=math.radians(20.0),
    map_offset_std=0.02,
    clutter_spacing=12.0,
)
""":data:`BASIC` in a rough world: see the module docstring."""

PROFILES: dict[str, NoiseProfile] = {"ideal": IDEAL, "basic": BASIC, "realistic": REALISTIC}


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
        check_ranges(NoiseProfile, overrides)  # the message gives the setting's range
        return msgspec.convert({**msgspec.structs.asdict(base), **overrides}, NoiseProfile)
    except (ValueError, msgspec.ValidationError) as err:
        raise ConfigError(f"noise settings: {err}") from None


def device_rng(seed: int, device: str) -> np.random.Generator:
    """A generator for one device, independent of the others' and reproducible from ``seed``."""
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(device.encode())]))
