"""The simulated SICK laser: scan geometry, resolution, pan and tilt, faults, max range and movers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.sim.laser import LaserParams, SimLaser, laser_pose
from pluto.sim.noise import REALISTIC, device_rng
from pluto.sim.raycast import RayCaster
from pluto.sim.world import World, parse_world
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
