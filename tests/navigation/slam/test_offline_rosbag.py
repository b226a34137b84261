"""The offline SLAM over a ROS 2 bag made from the Intel lab's CARMEN log: the same scans, odometry and trajectory as
over the CARMEN file itself (same seed), through ``read_log`` and through ``pluto slam offline``."""

from __future__ import annotations

import gzip
import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from pluto.cli.main import main
from pluto.navigation.slam.mapfile import save_map
from pluto.navigation.slam.offline import OdometryNoise, read_log, run_offline
from pluto.record.carmen import CarmenLaser, parse_line
from pluto.sim.gridmap import FREE, OCCUPIED, read_grid

INTEL = Path("/work/shared/datasets/radish/intel-corrected.log.gz")
pytestmark = pytest.mark.skipif(not INTEL.exists(), reason="the Radish Intel log is not here")

SLICE = (300, 500)
"""Scans 300 to 499 of the log: no scan among them is stamped before the one before it."""

STORE = get_typestore(Stores.ROS2_HUMBLE)
TYPES = STORE.types


def _header(t: float, frame: str) -> Any:
    ns = round(t * 1e9)
    stamp = TYPES["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)
    return TYPES["std_msgs/msg/Header"](stamp=stamp, frame_id=frame)


def _quaternion(yaw: float) -> Any:
    return TYPES["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=math.sin(yaw / 2), w=math.cos(yaw / 2))


def _vector(x: float = 0.0, y: float = 0.0, z: float = 0.0) -> Any:
    return TYPES["geometry_msgs/msg/Vector3"](x=x, y=y, z=z)


def _write_bag(lines: list[str], bag: Path) -> None:
    """Each FLASER line as a LaserScan on /scan and its odometry as an Odometry on /odom, at its stamp; the laser at
    base_link's origin (the Intel log's laser offset is 0) on /tf_static."""
    items = [parse_line(line, n + 1) for n, line in enumerate(lines)]
    lasers = [item for item in items if isinstance(item, CarmenLaser)]
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        scans = writer.add_connection("/scan", "sensor_msgs/msg/LaserScan", typestore=STORE)
        odometry = writer.add_connection("/odom", "nav_msgs/msg/Odometry", typestore=STORE)
        static = writer.add_connection("/tf_static", "tf2_msgs/msg/TFMessage", typestore=STORE)
        mount = TYPES["geometry_msgs/msg/TransformStamped"](
            header=_header(lasers[0].t, "base_link"),
            child_frame_id="laser",
            transform=TYPES["geometry_msgs/msg/Transform"](translation=_vector(), rotation=_quaternion(0.0)),
        )
        tf = TYPES["tf2_msgs/msg/TFMessage"](transforms=[mount])
        writer.write(static, round(lasers[0].t * 1e9), STORE.serialize_cdr(tf, "tf2_msgs/msg/TFMessage"))
        for laser in lasers:
            ns = round(laser.t * 1e9)
            x, y, theta = laser.odometry
            pose = TYPES["geometry_msgs/msg/Pose"](
                position=TYPES["geometry_msgs/msg/Point"](x=x, y=y, z=0.0), orientation=_quaternion(theta)
            )
            twist = TYPES["geometry_msgs/msg/Twist"](linear=_vector(), angular=_vector())
            odom = TYPES["nav_msgs/msg/Odometry"](
                header=_header(laser.t, "odom"),
                child_frame_id="base_link",
                pose=TYPES["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.zeros(36)),
                twist=TYPES["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=np.zeros(36)),
            )
            writer.write(odometry, ns, STORE.serialize_cdr(odom, "nav_msgs/msg/Odometry"))
            n = len(laser.ranges)
            scan = TYPES["sensor_msgs/msg/LaserScan"](
                header=_header(laser.t, "laser"),
                angle_min=-math.pi / 2,
                angle_max=-math.pi / 2 + (n - 1) * math.pi / 180,
                angle_increment=math.pi / 180,
                time_increment=0.0,
                scan_time=0.0,
                range_min=0.0,
                range_max=80.0,
                ranges=np.array(laser.ranges, dtype=np.float32),
                intensities=np.zeros(0, dtype=np.float32),
            )
            writer.write(scans, ns, STORE.serialize_cdr(scan, "sensor_msgs/msg/LaserScan"))


@pytest.fixture(scope="module")
def intel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same slice of the Intel log as a CARMEN file and as a ROS 2 bag."""
    folder = tmp_path_factory.mktemp("intel")
    with gzip.open(INTEL, "rt") as source:
        lines = list(itertools.islice((line for line in source if line.startswith("FLASER")), *SLICE))
    carmen = folder / "intel-slice.log"
    carmen.write_text("".join(lines))
    bag = folder / "intel-slice"
    _write_bag(lines, bag)
    return carmen, bag


def test_a_bag_of_the_intel_log_gives_the_slam_the_same_trajectory_as_the_carmen_file(
    intel: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    carmen, bag = intel
    from_carmen, from_bag = read_log(carmen), read_log(bag)
    assert len(from_bag.scans) == len(from_carmen.scans) == SLICE[1] - SLICE[0]
    for a, b in zip(from_carmen.scans, from_bag.scans, strict=True):
        assert a.t == pytest.approx(b.t, abs=1e-9) and a.max_range == b.max_range
        assert np.array_equal(a.angles, b.angles)  # the bearings the scanner had, not their 32-bit roundings
        assert np.array_equal(a.ranges, b.ranges)  # the ranges as logged, not their 32-bit roundings
    # the headings went through quaternions: equal to the last bit or two
    assert np.max(np.abs(from_bag.odometry - from_carmen.odometry)) < 1e-12
    slam_carmen = run_offline(from_carmen, noise=OdometryNoise(), seed=1)
    slam_bag = run_offline(from_bag, noise=OdometryNoise(), seed=1)
    assert np.max(np.abs(slam_bag.odometry - slam_carmen.odometry)) < 1e-12  # the same noise drawn
    assert np.max(np.abs(slam_bag.estimate - slam_carmen.estimate)) < 1e-6
    assert slam_bag.slam.segments.active.sum() == slam_carmen.slam.segments.active.sum()
    # the same map
    save_map(slam_carmen.slam, tmp_path / "carmen.xml", name="intel")
    save_map(slam_bag.slam, tmp_path / "bag.xml", name="intel")
    assert (tmp_path / "bag.xml").read_text() == (tmp_path / "carmen.xml").read_text()
    # the command, on the first scans: the map, and the map as a map_server grid (the beams' cells free)
    grid = tmp_path / "start.yaml"
    command = ["slam", "offline", str(bag), "-o", str(tmp_path / "start.xml"), "--max-scans", "40", "--grid", str(grid)]
    assert main(command) == 0
    out = capsys.readouterr().out
    assert "40 scans" in out and "no reference trajectory" in out and "free: the beams crossed them" in out
    cells = read_grid(grid).cells
    assert np.count_nonzero(cells == OCCUPIED) > 300 and np.count_nonzero(cells == FREE) > 10 * 1000
