"""The simulated SICK laser: scan geometry, resolution, pan and tilt, faults, max range and movers; and the errors
of a real scanner the noise profile adds: range noise that grows with the range, mixed pixels at edges, glass,
echoes lost on dark surfaces and at grazing incidence, all repeatable from a seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.hardware.sick.sim import LaserParams, SimLaser, laser_pose
from pluto.sim.noise import BASIC, IDEAL, REALISTIC, NoiseProfile, device_rng
from pluto.sim.raycast import RayCaster
from pluto.sim.site import Surfaces, build_site
from pluto.sim.world import World, load_world, parse_world
from tests.sim.boxes import ray_to_box

RES = 0.01
MOUNT = LaserParams().mount_x
CENTRE, RIGHT, LEFT = 180, 0, 360


def box_world(size: float) -> World:
    s = size
    return parse_world(
        f'<world name="box" version="1"><walls>'
        f'<wall x1="0" y1="0" x2="{s}" y2="0"/><wall x1="{s}" y1="0" x2="{s}" y2="{s}"/>'
        f'<wall x1="{s}" y1="{s}" x2="0" y2="{s}"/><wall x1="0" y1="{s}" x2="0" y2="0"/>'
        f"</walls></world>"
    )


BOX = box_world(10.0)


def laser_in(world: World, **kwargs: object) -> SimLaser:
    return SimLaser(RayCaster(world.segments(), world.circles), **kwargs)  # type: ignore[arg-type]


def test_params_and_angles() -> None:
    p = LaserParams()
    a = p.angles()
    assert len(a) == 361
    assert a[RIGHT] == pytest.approx(-math.pi / 2) and a[CENTRE] == pytest.approx(0.0)
    assert a[LEFT] == pytest.approx(math.pi / 2)
    assert np.diff(a) == pytest.approx(np.full(360, math.radians(0.5)))


def test_laser_pose_is_ahead_of_the_robot_and_turned_by_the_pan() -> None:
    assert laser_pose(1.0, 2.0, math.pi / 2, 0.3, 0.25) == pytest.approx((1.0, 2.25, math.pi / 2 + 0.3))


@pytest.mark.parametrize("pose", [(3.0, 4.0, 0.0), (5.0, 5.0, math.pi / 2), (2.0, 7.0, 2.2), (7.5, 2.5, -0.6)])
def test_centre_and_side_beams_measure_the_walls(pose: tuple[float, float, float]) -> None:
    ranges = laser_in(BOX).scan(0.0, pose)
    assert ranges.shape == (361,)
    lx, ly, heading = laser_pose(*pose, 0.0, MOUNT)
    for index, offset in ((CENTRE, 0.0), (RIGHT, -math.pi / 2), (LEFT, math.pi / 2)):
        assert ranges[index] == pytest.approx(ray_to_box(lx, ly, heading + offset), abs=RES / 2 + 1e-9)


def test_every_beam_measures_the_box() -> None:
    pose = (4.0, 3.0, 0.4)
    laser = laser_in(BOX)
    ranges = laser.scan(0.0, pose)
    lx, ly, heading = laser_pose(*pose, 0.0, MOUNT)
    expected = [ray_to_box(lx, ly, heading + a) for a in laser.beam_angles]
    assert ranges == pytest.approx(expected, abs=RES / 2 + 1e-9)


def test_ranges_are_multiples_of_the_resolution() -> None:
    ranges = laser_in(BOX).scan(0.0, (3.3, 4.7, 0.123))
    assert np.abs(ranges / RES - np.round(ranges / RES)).max() < 1e-6


def test_known_distances_on_the_axes() -> None:
    # the laser at (3.25, 4): 6.75 m ahead, 4 m to the right, 6 m to the left
    ranges = laser_in(BOX).scan(0.0, (3.0, 4.0, 0.0))
    assert (ranges[CENTRE], ranges[RIGHT], ranges[LEFT]) == pytest.approx((6.75, 4.0, 6.0), abs=1e-9)


def test_pan_rotates_the_scan() -> None:
    laser = laser_in(BOX)
    pose = (3.0, 4.0, 0.0)
    straight = laser.scan(0.0, pose)
    panned = laser.scan(0.0, pose, pan=math.pi / 2)
    assert panned[CENTRE] == pytest.approx(straight[LEFT], abs=1e-9)
    # a quarter turn is 180 beams: the panned right half is the straight left half
    assert panned[:181] == pytest.approx(straight[180:], abs=1e-9)
    # the pan turns the scanner about the wrist axis: it does not move it
    _lx, ly, _ = laser_pose(*pose, 0.0, MOUNT)
    assert panned[CENTRE] == pytest.approx(10.0 - ly)


def test_tilting_down_hits_the_floor() -> None:
    p = LaserParams()
    far = box_world(1000.0)
    laser = laser_in(far)
    tilt = 0.3
    ranges = laser.scan(0.0, (500.0, 500.0, 0.0), tilt=tilt)
    assert ranges[CENTRE] == pytest.approx(p.height / math.sin(tilt), abs=RES / 2 + 1e-9)
    # a beam at bearing α reaches the floor at h / (cos α sin τ)
    for index in (90, 120, 270):
        alpha = laser.beam_angles[index]
        assert ranges[index] == pytest.approx(p.height / (math.cos(alpha) * math.sin(tilt)), abs=RES / 2 + 1e-9)
    # beams near ±90° point nearly level: they see nothing within max range
    assert ranges[RIGHT] == p.max_range and ranges[LEFT] == p.max_range
    # tilting up never hits the floor
    assert np.all(laser.scan(0.0, (500.0, 500.0, 0.0), tilt=-0.3) == p.max_range)


def test_tilted_beam_reaches_a_near_wall_before_the_floor() -> None:
    laser = laser_in(BOX)
    tilt = 0.1  # floor at 0.9 / sin(0.1) ≈ 9.0 m, the wall x = 10 is 6.75 m away horizontally
    ranges = laser.scan(0.0, (3.0, 4.0, 0.0), tilt=tilt)
    assert ranges[CENTRE] == pytest.approx(6.75 / math.cos(tilt), abs=RES / 2 + 1e-9)


def test_max_range_when_nothing_is_hit() -> None:
    open_world = parse_world('<world name="open" version="1"><walls/></world>')
    assert np.all(laser_in(open_world).scan(0.0, (0.0, 0.0, 0.0)) == 80.0)
    far = box_world(1000.0)
    ranges = laser_in(far).scan(0.0, (500.0, 500.0, 0.0))
    assert np.all(ranges == 80.0)


def test_fault_reports_minus_one_until_rebooted() -> None:
    laser = laser_in(BOX)
    pose = (3.0, 4.0, 0.0)
    normal = laser.scan(4.9, pose)
    assert not laser.failed(4.9)
    laser.inject_fault(5.0)
    reboot = laser.params.reboot_time
    for t in (5.0, 10.0, 5.0 + reboot - 1e-6):
        assert laser.failed(t)
        assert np.all(laser.scan(t, pose) == -1.0)
        assert laser.scan(t, pose).shape == (361,)
    assert not laser.failed(5.0 + reboot)
    assert laser.scan(5.0 + reboot, pose) == pytest.approx(normal)


def test_fault_with_a_given_duration() -> None:
    laser = laser_in(BOX)
    laser.inject_fault(2.0, duration=1.0)
    assert laser.failed_until == 3.0
    assert np.all(laser.scan(2.5, (3.0, 4.0, 0.0)) == -1.0)
    assert np.all(laser.scan(3.0, (3.0, 4.0, 0.0)) > 0)


def test_movers_appear_in_the_scan() -> None:
    laser = laser_in(BOX)
    person = np.array([[6.0, 4.0, 0.5]])
    ranges = laser.scan(0.0, (3.0, 4.0, 0.0), movers=person)
    assert ranges[CENTRE] == pytest.approx(6.0 - 0.5 - (3.0 + MOUNT), abs=1e-9)
    # the person covers asin(0.5 / 2.75) ≈ ±10.5° about the centre; beyond that the wall shows again
    assert ranges[CENTRE + 30] == pytest.approx(6.75 / math.cos(math.radians(15)), abs=RES)
    assert ranges[CENTRE + 30] > 6.5
    assert ranges[LEFT] == pytest.approx(6.0)


def test_static_circles_appear_in_the_scan() -> None:
    world = parse_world(
        '<world name="post" version="1"><walls/><obstacles><circle name="post" x="5" y="0" r="1"/></obstacles></world>'
    )
    ranges = laser_in(world).scan(0.0, (0.0, 0.0, 0.0))
    assert ranges[CENTRE] == pytest.approx(5.0 - 1.0 - MOUNT, abs=1e-9)
    assert ranges[LEFT] == 80.0


def test_realistic_noise_stays_on_the_grid_and_near_the_truth() -> None:
    pose = (3.0, 4.0, 0.3)
    ideal = laser_in(BOX).scan(0.0, pose)
    noisy = laser_in(BOX, noise=REALISTIC, rng=device_rng(1, "sick")).scan(0.0, pose)
    assert np.abs(noisy / RES - np.round(noisy / RES)).max() < 1e-6
    valid = noisy < 80.0
    assert valid.sum() > 340  # dropouts (0.5 %) report max range
    errors = noisy[valid] - ideal[valid]
    assert 0.003 < float(np.std(errors)) < 0.02
    assert abs(float(np.mean(errors))) < 0.005


def test_basic_noise_stays_on_the_grid_and_near_the_truth_with_exact_no_echoes() -> None:
    """The devices' errors of ``basic`` (1 cm at any range, 0.5 % dropouts); a beam with no echo reads max range
    exactly, as the scanner's code for it, whatever the noise."""
    pose = (3.0, 4.0, 0.3)
    ideal = laser_in(BOX).scan(0.0, pose)
    noisy = laser_in(BOX, noise=BASIC, rng=device_rng(1, "sick")).scan(0.0, pose)
    errors = (noisy - ideal)[noisy < 80.0]
    assert 0.006 < float(np.std(errors)) < 0.015
    corridor = parse_world('<world name="c" version="1"><walls><wall x1="-5" y1="1" x2="50" y2="1"/></walls></world>')
    far = laser_in(corridor, noise=REALISTIC, rng=device_rng(2, "sick")).scan(0.0, (0.0, 0.0, 0.0))
    assert np.all(far[:150] == 80.0)  # the right half sees nothing


# -- the errors of a real scanner -----------------------------------------------------------------------------------

LONG_WALL = parse_world('<world name="w" version="1"><walls><wall x1="0" y1="-90" x2="0" y2="90"/></walls></world>')
FINE = LaserParams(resolution=0.001)


def test_range_noise_grows_with_the_range() -> None:
    """σ = 1 cm + 0.1 % of the range, as measured over the beams near the normal of a wall 2, 20 and 60 m away."""
    noise = NoiseProfile(laser_range_std=0.01, laser_range_std_per_m=0.001)
    assert (REALISTIC.laser_range_std, REALISTIC.laser_range_std_per_m) == (0.01, 0.001)
    centre = slice(160, 201)  # within 10° of the normal
    for distance in (2.0, 20.0, 60.0):
        pose = (-distance - MOUNT, 0.0, 0.0)
        ideal = laser_in(LONG_WALL, params=FINE).scan(0.0, pose)[centre]
        laser = laser_in(LONG_WALL, params=FINE, noise=noise, rng=device_rng(7, "sick"))
        errors = np.concatenate([laser.scan(0.0, pose)[centre] - ideal for _ in range(25)])
        sigma = 0.01 + 0.001 * float(np.mean(ideal))
        assert float(np.std(errors)) == pytest.approx(sigma, rel=0.1), distance
        assert abs(float(np.mean(errors))) < 0.2 * sigma


POST = parse_world(
    '<world name="post" version="1"><walls><wall x1="15" y1="-30" x2="15" y2="30"/></walls>'
    '<obstacles><circle name="post" x="6" y="0" r="0.5"/></obstacles></world>'
)


def test_mixed_pixels_appear_at_edges_only() -> None:
    """A post 6 m away before a wall 15 m away, seen from 40 places: a spot a quarter of a degree wide across the
    post's edge returns a range between the post and the wall (always, here), and nowhere else does the scan differ
    from the exact one: not on the post, not on the wall (seen up to 60° off its normal)."""
    noise = NoiseProfile(laser_spot=math.radians(0.25), laser_mixed_pixels=1.0)
    laser = laser_in(POST, params=FINE, noise=noise, rng=device_rng(3, "sick"))
    exact = laser_in(POST, params=FINE)
    mixed = 0
    for y in np.linspace(-3.0, 3.0, 40):
        pose = (0.0, float(y), 0.0)
        ideal = exact.scan(0.0, pose)
        ranges = laser.scan(0.0, pose)
        differs = np.flatnonzero(np.abs(ranges - ideal) > 0.002)
        steps = np.flatnonzero(np.abs(np.diff(ideal)) > 1.0)  # the post's edges, between beam i and i + 1
        for i in differs:
            assert np.any((steps == i) | (steps == i - 1)), (y, i)  # next to an edge
            near, far = sorted((ideal[i - 1], ideal[i + 1]))
            assert near - 0.002 < ranges[i] < far + 0.002
        mixed += differs.size
    assert mixed >= 20  # the spot is half a beam spacing wide: about one edge in two has one


def test_glass_echoes_near_its_normal_and_lets_the_beam_through_elsewhere() -> None:
    """A pane 3 m ahead and a wall 8 m ahead: within 20° of the pane's normal the beams come back from the pane,
    beyond it they go through to the wall."""
    world = parse_world(
        '<world name="g" version="1"><walls><wall x1="3" y1="-20" x2="3" y2="20"/>'
        '<wall x1="8" y1="-40" x2="8" y2="40"/></walls></world>'
    )
    surfaces = Surfaces(np.array([0.5, 0.5]), np.array([True, False]), np.zeros(0))
    noise = NoiseProfile(laser_glass=1.0, laser_glass_angle=math.radians(20.0))
    laser = laser_in(world, params=FINE, noise=noise, surfaces=surfaces)
    ranges = laser.scan(0.0, (-MOUNT, 0.0, 0.0))
    angles = laser.beam_angles
    near = np.abs(angles) < math.radians(19.9)
    far = (np.abs(angles) > math.radians(20.1)) & (np.abs(angles) < math.radians(75.0))
    assert ranges[near] == pytest.approx(3.0 / np.cos(angles[near]), abs=0.002)
    assert ranges[far] == pytest.approx(8.0 / np.cos(angles[far]), abs=0.002)
    assert laser_in(world, params=FINE).scan(0.0, (-MOUNT, 0.0, 0.0))[far] == pytest.approx(
        3.0 / np.cos(angles[far]), abs=0.002
    )
    with pytest.raises(ValueError, match="surfaces describe 1 segments"):
        laser_in(world, surfaces=Surfaces(np.ones(1), np.zeros(1, dtype=bool), np.zeros(0)))


def test_echoes_fade_on_dark_surfaces_and_at_grazing_incidence() -> None:
    """The LMS reaches 30 m on 10 % remission: a dark wall (4 %) 25 m ahead returns no echo on most beams, a white
    one (80 %) on all; a long white wall 1.5 m to the side fades beyond some 20 m, where the beams graze it."""
    world = parse_world(
        '<world name="d" version="1"><walls><wall x1="25" y1="-3" x2="25" y2="0"/><wall x1="25" y1="0" x2="25" y2="3"/>'
        "</walls></world>"
    )
    surfaces = Surfaces(np.array([0.04, 0.8]), np.zeros(2, dtype=bool), np.zeros(0))
    fading = NoiseProfile(laser_range_at_10=30.0)
    laser = laser_in(world, noise=fading, rng=device_rng(4, "sick"), surfaces=surfaces)
    pose = (-MOUNT, 0.0, 0.0)
    across = np.sin(laser.beam_angles) * laser_in(world).scan(0.0, pose)  # where each beam meets the wall
    scans = np.array([laser.scan(0.0, pose) for _ in range(10)])
    dark = (across > -2.9) & (across < -0.1)
    white = (across > 0.1) & (across < 2.9)
    assert dark.sum() > 10 and white.sum() > 10
    assert np.mean(scans[:, dark] == 80.0) > 0.8  # its reach, 19 m, is 25 m on one beam in 12 (the speckle)
    assert np.all(scans[:, white] < 80.0)
    side = parse_world('<world name="s" version="1"><walls><wall x1="-1" y1="1.5" x2="80" y2="1.5"/></walls></world>')
    bright = Surfaces(np.array([0.8]), np.zeros(1, dtype=bool), np.zeros(0))
    laser = laser_in(side, noise=fading, rng=device_rng(5, "sick"), surfaces=bright)
    exact = laser_in(side).scan(0.0, pose)
    along = np.cos(laser.beam_angles) * exact
    scans = np.array([laser.scan(0.0, pose) for _ in range(10)])
    assert np.all(scans[:, (exact < 80.0) & (along < 8.0)] < 80.0)
    assert np.mean(scans[:, (exact < 80.0) & (along > 30.0)] == 80.0) > 0.9


def test_the_same_seed_gives_the_same_scans_in_the_same_site() -> None:
    """Realistic noise in the office as built from seed 5: two lasers built alike give the same scans, scan after
    scan; another seed gives other scans (and another site)."""

    def scans(seed: int) -> list[list[float]]:
        site = build_site(load_world("office"), REALISTIC, seed)
        laser = SimLaser(site.caster(), LaserParams(), REALISTIC, device_rng(seed, "sick"), surfaces=site.surfaces)
        return [laser.scan(0.2 * k, (4.0, 6.0 + 0.1 * k, 1.2)).tolist() for k in range(5)]

    first = scans(5)
    assert scans(5) == first
    assert scans(6) != first
    assert (
        laser_in(BOX, noise=IDEAL).scan(0.0, (3.0, 4.0, 0.3)).tolist()
        == laser_in(BOX).scan(0.0, (3.0, 4.0, 0.3)).tolist()
    )
