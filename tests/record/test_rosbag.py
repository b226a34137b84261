"""ROS bags: a Pluto log exported as a ROS 2 bag and read back by ``rosbags`` in the standard types, ROS 1 and 2 bags
read as Pluto logs (topics by type or by name, the laser's mount from the transforms), and bad bags refused with
status 2."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from pluto import msgs
from pluto.cli.main import main
from pluto.record.logfile import LogFile
from pluto.record.rosbag import (
    BagError,
    bag_kind,
    beam_angles,
    export_rosbag2,
    float32_decimals,
    open_log,
    read_rosbag,
)
from pluto.record.writer import LogWriter

MOUNT = (0.25, 0.0, 0.9)
ANGLES = np.radians(np.arange(-90.0, 90.5, 0.5)).tolist()


def _ranges(k: int) -> list[float]:
    ranges = [round(2.0 + 0.01 * i + 0.001 * k, 3) for i in range(len(ANGLES))]
    ranges[3] = -1.0  # an error
    ranges[5] = 80.0  # no echo
    return ranges


@pytest.fixture(scope="module")
def pluto_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 5 s: odometry and commands at 10 Hz, scans and poses at 5 Hz."""
    path = tmp_path_factory.mktemp("log") / "run.mcap"
    with LogWriter(path, metadata={"robot": "r1", "time_base": "sim"}) as writer:
        for k in range(50):
            t = 10.0 + 0.1 * k
            writer.add(
                "Base/Drive/State", msgs.Odometry(stamp=t, x=0.1 * k, y=0.0, theta=0.02 * k, v=1.0, omega=0.2), t
            )
            if k % 2 == 0:
                scan = msgs.LaserScan(
                    stamp=t - 0.01, arrival=t, ranges=_ranges(k), angles=ANGLES, count=359, max_range=80.0
                )
                writer.add("Sick/Scan_mm", scan, t)
                pose = msgs.PoseEstimate(stamp=t - 0.05, pose=[1.0 + 0.1 * k, 2.0, 0.0, 0.5 + 0.02 * k, 0.0, 0.0])
                writer.add("Localization/Pose", pose, t)
            writer.add("Base/Drive/Command", msgs.ActuatorState(stamp=t, velocity=[0.3, -0.1]), t)
    return path


@pytest.fixture(scope="module")
def exported(pluto_log: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    bag = tmp_path_factory.mktemp("bag") / "run-bag"
    export_rosbag2(LogFile(pluto_log), bag, laser_mount=MOUNT)
    return bag


def _read(bag: Path) -> dict[str, list[tuple[int, str, Any]]]:
    """Every message of a bag by topic: (bag time ns, type, message)."""
    out: dict[str, list[tuple[int, str, Any]]] = {}
    with AnyReader([bag]) as reader:
        for connection, t, raw in reader.messages():
            message = reader.deserialize(raw, connection.msgtype)
            out.setdefault(connection.topic, []).append((t, connection.msgtype, message))
    return out


def _seconds(stamp: Any) -> float:
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


def _yaw(q: Any) -> float:
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


def test_an_exported_bag_is_read_by_rosbags_in_the_standard_types(exported: Path) -> None:
    assert (exported / "metadata.yaml").exists() and list(exported.glob("*.mcap"))
    topics = _read(exported)
    types = {topic: {kind for _t, kind, _m in rows} for topic, rows in topics.items()}
    assert types == {
        "/scan": {"sensor_msgs/msg/LaserScan"},
        "/odom": {"nav_msgs/msg/Odometry"},
        "/tf": {"tf2_msgs/msg/TFMessage"},
        "/tf_static": {"tf2_msgs/msg/TFMessage"},
        "/cmd_vel": {"geometry_msgs/msg/Twist"},
    }
    assert {topic: len(rows) for topic, rows in topics.items()} == {
        "/scan": 25,
        "/odom": 50,
        "/tf": 75,
        "/tf_static": 1,
        "/cmd_vel": 50,
    }
    # the scans: stamps, angles, ranges (errors NaN, no echo +inf) at their log times
    for k, (t, _kind, scan) in enumerate(topics["/scan"]):
        assert t == round((10.0 + 0.2 * k) * 1e9)
        assert _seconds(scan.header.stamp) == pytest.approx(10.0 + 0.2 * k - 0.01, abs=1e-9)
        assert scan.header.frame_id == "laser" and scan.range_max == 80.0
        assert scan.angle_min == pytest.approx(-math.pi / 2) and scan.angle_max == pytest.approx(math.pi / 2)
        assert scan.angle_increment == pytest.approx(math.radians(0.5))
        expected = np.array(_ranges(2 * k), dtype=np.float32)
        assert np.isnan(scan.ranges[3]) and np.isposinf(scan.ranges[5])
        keep = np.ones(expected.size, dtype=bool)
        keep[[3, 5]] = False
        assert np.array_equal(scan.ranges[keep], expected[keep])
    # the odometry: pose, heading, velocities in base_link
    for k, (t, _kind, odom) in enumerate(topics["/odom"]):
        assert t == round((10.0 + 0.1 * k) * 1e9)
        assert (odom.header.frame_id, odom.child_frame_id) == ("odom", "base_link")
        position = odom.pose.pose.position
        assert (position.x, position.y) == pytest.approx((0.1 * k, 0.0))
        assert _yaw(odom.pose.pose.orientation) == pytest.approx(0.02 * k)
        assert (odom.twist.twist.linear.x, odom.twist.twist.angular.z) == pytest.approx((1.0, 0.2))
    for _t, _kind, twist in topics["/cmd_vel"]:
        assert (twist.linear.x, twist.angular.z) == pytest.approx((0.3, -0.1))


def test_the_transforms_are_one_tree_with_one_parent_per_frame(exported: Path) -> None:
    topics = _read(exported)
    parents: dict[str, set[str]] = {}
    for topic in ("/tf", "/tf_static"):
        for _t, _kind, message in topics[topic]:
            for tf in message.transforms:
                parents.setdefault(tf.child_frame_id, set()).add(tf.header.frame_id)
    assert parents == {"odom": {"map"}, "base_link": {"odom"}, "laser": {"base_link"}}
    (laser,) = topics["/tf_static"][0][2].transforms
    moved = laser.transform.translation
    assert (moved.x, moved.y, moved.z) == MOUNT
    # map -> odom puts base_link at the pose: composed with the odometry at the pose's stamp
    odometry = {round(_seconds(m.header.stamp), 6): m for _t, _k, m in topics["/odom"]}
    checked = 0
    for _t, _kind, message in topics["/tf"]:
        (tf,) = message.transforms
        if tf.child_frame_id != "odom":
            continue
        stamp = _seconds(tf.header.stamp)
        k = round((stamp + 0.05 - 10.0) / 0.1)
        # the odometry interpolated at the pose's stamp, 0.05 s before odometry k (the first pose: before the first)
        x_odom, theta_odom = max(0.1 * k - 0.05, 0.0), max(0.02 * k - 0.01, 0.0)
        turn = _yaw(tf.transform.rotation)
        c, s = math.cos(turn), math.sin(turn)
        x = tf.transform.translation.x + c * x_odom
        y = tf.transform.translation.y + s * x_odom
        assert (x, y, turn + theta_odom) == pytest.approx((1.0 + 0.1 * k, 2.0, 0.5 + 0.02 * k))
        assert round(0.1 * k + 10.0, 6) in odometry
        checked += 1
    assert checked == 25


def test_a_bag_is_read_back_as_the_pluto_log(exported: Path, pluto_log: Path) -> None:
    original = LogFile(pluto_log)
    log = read_rosbag(exported)
    assert log.info["source"] == "rosbag2" and log.info["laser_mount"] == "0.25 0.0 0.9"
    assert log.info["scan_topic"] == "/scan" and log.info["odom_topic"] == "/odom"
    assert {n: log.channels[n].count for n in log.names()} == {
        "Base/Drive/Command": 50,
        "Base/Drive/State": 50,
        "Sick/Scan_mm": 25,
        "Sick/Timing": 25,
    }
    for before, after in zip(original.series("Base/Drive/State"), log.series("Base/Drive/State"), strict=True):
        a, b = before.message, after.message
        assert isinstance(a, msgs.Odometry) and isinstance(b, msgs.Odometry)
        assert (b.stamp, b.x, b.y, b.theta, b.v, b.omega) == pytest.approx((a.stamp, a.x, a.y, a.theta, a.v, a.omega))
        assert after.log_time == pytest.approx(before.log_time)
    for before, after in zip(original.series("Sick/Scan_mm"), log.series("Sick/Scan_mm"), strict=True):
        a, b = before.message, after.message
        assert isinstance(a, msgs.LaserScan) and isinstance(b, msgs.LaserScan)
        assert b.ranges == a.ranges  # the 32-bit ranges read back as the decimals they were
        assert b.angles == pytest.approx(a.angles, abs=1e-12) and b.max_range == 80.0 and b.count == 359
    command = log.series("Base/Drive/Command")[0].message
    assert isinstance(command, msgs.ActuatorState) and command.velocity == pytest.approx([0.3, -0.1])
    # the .mcap file alone is a ROS 2 bag too
    (mcap,) = exported.glob("*.mcap")
    assert bag_kind(mcap) == "ROS 2" and bag_kind(pluto_log) is None
    assert read_rosbag(mcap).channels["Sick/Scan_mm"].count == 25


def test_log_export_writes_the_bag_and_refuses_to_overwrite(
    pluto_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bag = tmp_path / "bag"
    assert main(["log", "export", "--rosbag2", str(bag), str(pluto_log)]) == 0
    out = capsys.readouterr().out
    assert "wrote the ROS 2 bag" in out and "/scan 25" in out and "/cmd_vel 50" in out
    assert main(["log", "export", "--rosbag2", str(bag), str(pluto_log)]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["log", "export", "--rosbag2", str(bag), str(pluto_log), "--force", "--laser-mount", "0,0,0.3"]) == 0
    (laser,) = _read(bag)["/tf_static"][0][2].transforms
    assert laser.transform.translation.z == pytest.approx(0.3)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    assert main(["log", "export", "--rosbag2", str(tmp_path / "other"), str(pluto_log), "--force"]) == 2
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
    assert main(["log", "info", str(bag)]) == 0
    assert "rosbag2 import of bag" in capsys.readouterr().out


STORE2 = get_typestore(Stores.ROS2_HUMBLE)
STORE1 = get_typestore(Stores.ROS1_NOETIC)
STORE1.register(get_types_from_msg("geometry_msgs/TransformStamped[] transforms", "tf2_msgs/msg/TFMessage"))


def _header(store: Any, t: float, frame: str) -> Any:
    ns = round(t * 1e9)
    time = store.types["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)
    fields = {"seq": 0} if store is STORE1 else {}
    return store.types["std_msgs/msg/Header"](stamp=time, frame_id=frame, **fields)


def _scan(store: Any, t: float, frame: str = "base_scan") -> Any:
    return store.types["sensor_msgs/msg/LaserScan"](
        header=_header(store, t, frame),
        angle_min=-math.pi / 2,
        angle_max=math.pi / 2,
        angle_increment=math.pi / 180,
        time_increment=0.0,
        scan_time=0.0,
        range_min=0.1,
        range_max=30.0,
        ranges=np.array([2.34] * 179 + [0.05, np.inf], dtype=np.float32),
        intensities=np.zeros(0, dtype=np.float32),
    )


def _transform(store: Any, t: float, parent: str, child: str, xyz: tuple[float, float, float], yaw: float) -> Any:
    types = store.types
    return types["geometry_msgs/msg/TransformStamped"](
        header=_header(store, t, parent),
        child_frame_id=child,
        transform=types["geometry_msgs/msg/Transform"](
            translation=types["geometry_msgs/msg/Vector3"](x=xyz[0], y=xyz[1], z=xyz[2]),
            rotation=types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=math.sin(yaw / 2), w=math.cos(yaw / 2)),
        ),
    )


def _foreign_bag(path: Path, *, ros1: bool = False, extra_scan: bool = False) -> Path:
    """A bag as other robots write them: scans on /base_scan in frame base_scan, odometry only as /tf (odom ->
    base_footprint), a static chain base_footprint -> base_link -> base_scan with a turned laser."""
    store = STORE1 if ros1 else STORE2
    serialize = store.serialize_ros1 if ros1 else store.serialize_cdr
    writer: Any = Writer1(path) if ros1 else Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    tf = "tf2_msgs/msg/TFMessage"
    with writer:
        scans = writer.add_connection("/base_scan", "sensor_msgs/msg/LaserScan", typestore=store)
        rear = writer.add_connection("/rear_scan", "sensor_msgs/msg/LaserScan", typestore=store) if extra_scan else None
        dynamic = writer.add_connection("/tf", tf, typestore=store)
        static = writer.add_connection("/tf_static", tf, typestore=store)
        chain = [
            _transform(store, 1.0, "base_footprint", "base_link", (0.0, 0.0, 0.1), 0.0),
            _transform(store, 1.0, "base_link", "base_scan", (0.2, 0.1, 0.3), math.pi / 2),
        ]
        writer.write(static, 10**9, serialize(store.types[tf](transforms=chain), tf))
        for k in range(5):
            t = 1.0 + 0.1 * k
            odom = _transform(store, t, "odom", "base_footprint", (0.5 * k, 0.0, 0.0), 0.1 * k)
            writer.write(dynamic, round(t * 1e9), serialize(store.types[tf](transforms=[odom]), tf))
            kind = "sensor_msgs/msg/LaserScan"
            writer.write(scans, round(t * 1e9) + 1000, serialize(_scan(store, t), kind))
            if rear is not None and k < 3:
                writer.write(rear, round(t * 1e9) + 2000, serialize(_scan(store, t, "rear"), kind))
    return path


@pytest.mark.parametrize("ros1", [False, True], ids=["ros2", "ros1"])
def test_a_foreign_bag_gives_the_laser_its_mount_and_the_odometry_of_tf(tmp_path: Path, ros1: bool) -> None:
    bag = _foreign_bag(tmp_path / ("foreign.bag" if ros1 else "foreign"), ros1=ros1)
    assert bag_kind(bag) == ("ROS 1" if ros1 else "ROS 2")
    log = read_rosbag(bag)
    assert log.info["source"] == ("rosbag1" if ros1 else "rosbag2")
    assert [float(v) for v in log.info["laser_mount"].split()] == pytest.approx([0.2, 0.1, 0.4])
    assert "the odometry is the odom -> base_footprint transforms of /tf" in " ".join(log.notes)
    scans = [m.message for m in log.series("Sick/Scan_mm")]
    odometry = [m.message for m in log.series("Base/Drive/State")]
    assert len(scans) == len(odometry) == 5
    scan = scans[0]
    assert isinstance(scan, msgs.LaserScan)
    assert scan.ranges[:3] == [2.34, 2.34, 2.34] and scan.max_range == 30.0
    assert scan.ranges[179] == -1.0 and scan.ranges[180] == 30.0  # below range_min: an error; +inf: no echo
    assert scan.count == 179
    # the laser is turned by 90°: its beams' bearings in a frame aligned with the robot's
    assert scan.angles[0] == pytest.approx(0.0, abs=1e-12) and scan.angles[90] == pytest.approx(math.pi / 2)
    last = odometry[-1]
    assert isinstance(last, msgs.Odometry) and (last.x, last.theta) == pytest.approx((2.0, 0.4))


def test_topics_are_chosen_by_type_or_named(tmp_path: Path) -> None:
    bag = _foreign_bag(tmp_path / "two", extra_scan=True)
    log = read_rosbag(bag)
    assert log.info["scan_topic"] == "/base_scan"  # the busiest of two, with a note
    assert any("2 sensor_msgs/msg/LaserScan topics" in note and "--scan-topic" in note for note in log.notes)
    assert read_rosbag(bag, scan_topic="/rear_scan").info["scan_topic"] == "/rear_scan"
    with pytest.raises(BagError, match="no topic /front"):
        read_rosbag(bag, scan_topic="/front")
    with pytest.raises(BagError, match="/tf is a tf2_msgs/msg/TFMessage, not a sensor_msgs/msg/LaserScan"):
        read_rosbag(bag, scan_topic="/tf")
    with pytest.raises(BagError, match="not a ROS bag"):
        open_log(tmp_path / "missing.mcap", scan_topic="/scan")


def test_a_bag_without_scans_is_a_clear_error_with_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = tmp_path / "chatter"
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connection = writer.add_connection("/chatter", "std_msgs/msg/String", typestore=STORE2)
        text = STORE2.types["std_msgs/msg/String"](data="hello")
        writer.write(connection, 10**9, STORE2.serialize_cdr(text, "std_msgs/msg/String"))
    with pytest.raises(BagError, match=r"no sensor_msgs/msg/LaserScan topic.*/chatter \(std_msgs/msg/String\)"):
        read_rosbag(bag)
    assert main(["slam", "offline", str(bag), "-o", str(tmp_path / "m.xml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no sensor_msgs/msg/LaserScan topic" in err[0], err
    assert main(["replay", str(bag)]) == 2
    assert "no sensor_msgs/msg/LaserScan topic" in capsys.readouterr().err


def test_a_damaged_bag_is_a_clear_error(tmp_path: Path) -> None:
    bag = _foreign_bag(tmp_path / "damaged")
    (mcap,) = bag.glob("*.mcap")
    data = mcap.read_bytes()
    mcap.write_bytes(data[: len(data) // 2])
    with pytest.raises(BagError, match=r"cannot read the ROS bag .*damaged: File end magic is invalid"):
        read_rosbag(bag)
    mcap.write_bytes(data[:100] + bytes(len(data) - 200) + data[-100:])
    with pytest.raises(BagError, match=r"cannot read the ROS bag .*damaged: [A-Za-z]"):
        read_rosbag(bag)


def test_32_bit_floats_read_back_as_their_decimals() -> None:
    values = [2.34, 0.001, 81.83, 12345.678, 1e-7, 0.0, -3.5, np.inf, np.nan]
    read = float32_decimals(np.array(values, dtype=np.float32))
    assert read[:7].tolist() == values[:7]
    assert np.isposinf(read[7]) and np.isnan(read[8])
    stored = np.float32(math.pi)
    assert float32_decimals(stored) == pytest.approx(math.pi, rel=1e-7)
    assert np.float32(float32_decimals(stored)) == stored


def test_beam_angles_are_those_the_scanner_had() -> None:
    for count in (181, 361, 721):
        step = math.pi / (count - 1)
        exact = -math.pi / 2 + np.arange(count) * step
        stored = beam_angles(np.float32(-math.pi / 2), np.float32(step), count)
        assert np.array_equal(stored, exact)
    odd = beam_angles(np.float32(-2.0862), np.float32(0.0061359233), 3)  # not whole fractions: as stored
    assert odd[0] == float(np.float32(-2.0862))
