"""``pluto record --foxglove``: a recorded run of the simulated robot carries Foxglove's schemas on channels of their
own, every message decodes with the schema of its channel, their contents agree with the bus messages recorded
beside them, and Pluto's own tools (log info, replay) keep working on the file."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcap.reader import make_reader

from pluto import msgs
from pluto.bus import Bus
from pluto.cli.main import main
from pluto.gateways.foxglove.recording import FoxgloveRecording
from pluto.record.logfile import LogFile
from pluto.record.recorder import Recorder
from pluto.sim.world import load_world
from tests.gateways.foxglove.client import message_class
from tests.helpers import wait_until
from tests.record.robot import FakeRobot
from tests.scenarios.stack import DriveCommand, Lockstep

FOXGLOVE = {
    "/scan": "foxglove.LaserScan",
    "/tf": "foxglove.FrameTransform",
    "/pose": "foxglove.PoseInFrame",
    "/truth": "foxglove.PoseInFrame",
    "/path": "foxglove.PosesInFrame",
    "/map": "foxglove.SceneUpdate",
}


def _read(path: Path) -> tuple[dict[str, list[Any]], dict[str, list[dict[str, Any]]]]:
    """The Foxglove messages (decoded with their channel's schema) and the Pluto ones (JSON) of a file, by topic."""
    foxglove: dict[str, list[Any]] = defaultdict(list)
    pluto: dict[str, list[dict[str, Any]]] = defaultdict(list)
    classes: dict[int, Any] = {}
    with open(path, "rb") as f:
        for schema, channel, message in make_reader(f).iter_messages():
            assert schema is not None
            if schema.name.startswith("foxglove."):
                assert (schema.encoding, channel.message_encoding) == ("protobuf", "protobuf"), channel.topic
                assert channel.topic.startswith("/")
                cls = classes.get(schema.id) or classes.setdefault(schema.id, message_class(schema.name, schema.data))
                foxglove[channel.topic].append(cls.FromString(message.data))  # raises on bytes not of the schema
            else:
                assert (schema.encoding, channel.message_encoding) == ("jsonschema", "json"), channel.topic
                pluto[channel.topic].append(json.loads(message.data))
    return foxglove, pluto


def _stamp(m: Any) -> float:
    return float(m.timestamp.seconds + m.timestamp.nanos * 1e-9)


def _yaw(q: Any) -> float:
    return math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))


def test_a_recorded_run_carries_foxglove_schemas_that_agree_with_the_bus(
    tmp_path: Path, bus: Bus, capsys: pytest.CaptureFixture[str]
) -> None:
    world = load_world("office")
    path = tmp_path / "run.mcap"
    with Lockstep(bus) as sim:
        sim.start(world="office", seed=1)
        recorder = Recorder(bus, path, translate=FoxgloveRecording(world))
        recorder.start()
        try:
            drive = sim.add(DriveCommand(bus, 0.4, 0.3, until=3.0))
            sim.resume()
            drive.wait()
            wait_until(lambda: any(i.name == "Sick/Scan_mm" and i.count >= 5 for i in recorder.status().interfaces))
        finally:
            status = recorder.stop()
    assert status.error is None and status.foreign_errors == 0
    assert {t for t, _ in status.foreign} == set(FOXGLOVE)
    foxglove, pluto = _read(path)
    assert set(foxglove) == set(FOXGLOVE)
    _check_scans(foxglove, pluto)
    _check_frames(foxglove, pluto)
    path_poses = foxglove["/path"][-1].poses
    assert len(path_poses) >= 3 and foxglove["/path"][-1].frame_id == "map"
    truth = pluto["Sim/Truth"][-1]
    last = foxglove["/truth"][-1]
    assert (last.pose.position.x, last.pose.position.y) == pytest.approx((truth["x"], truth["y"]))
    assert all(len(m.entities[0].cubes) == len(world.segments()) + len(world.circles) for m in foxglove["/map"])
    _check_tools(path, bus, capsys)


def _check_scans(foxglove: dict[str, list[Any]], pluto: dict[str, list[Any]]) -> None:
    """Every scan: the recorded scan of its stamp, beam by beam (no echo and errors are not drawn)."""
    scans = {s["stamp"]: s for s in pluto["Sick/Scan_mm"]}
    assert len(foxglove["/scan"]) == len(scans) >= 5
    for fox in foxglove["/scan"]:
        scan = min(scans.values(), key=lambda s: abs(s["stamp"] - _stamp(fox)))
        assert scan["stamp"] == pytest.approx(_stamp(fox), abs=1e-6)
        assert fox.frame_id == "laser" and len(fox.ranges) == len(scan["ranges"])
        assert (fox.start_angle, fox.end_angle) == pytest.approx((scan["angles"][0], scan["angles"][-1]))
        for sent, got in zip(scan["ranges"], fox.ranges, strict=True):
            assert got == pytest.approx(sent) if 0 <= sent < scan["max_range"] else math.isinf(got)


def _check_frames(foxglove: dict[str, list[Any]], pluto: dict[str, list[Any]]) -> None:
    """The frames: odom -> base_link is the odometry of its stamp; map -> odom then puts the robot at the pose of the
    localization (the sim profile runs one); every frame drawn in reaches map."""
    tf = foxglove["/tf"]
    odometry = {o["stamp"]: o for o in pluto["Base/Drive/State"]}
    poses = {p["stamp"]: p["pose"] for p in pluto["Localization/Pose"]}
    odom_tf = {_stamp(t): t for t in tf if (t.parent_frame_id, t.child_frame_id) == ("odom", "base_link")}
    map_tf = [t for t in tf if (t.parent_frame_id, t.child_frame_id) == ("map", "odom")]
    assert len(odom_tf) == len(odometry) and map_tf
    for stamp, t in odom_tf.items():
        o = odometry[min(odometry, key=lambda s: abs(s - stamp))]
        assert (t.translation.x, t.translation.y, _yaw(t.rotation)) == pytest.approx(
            (o["x"], o["y"], math.remainder(o["theta"], math.tau)), abs=1e-9
        )
    checked = 0
    for t in map_tf:
        stamp = _stamp(t)
        if stamp < 0.5 or stamp not in odom_tf or stamp not in poses:
            continue  # (until the localization's first pose, the true pose places the robot)
        o, a = odom_tf[stamp], _yaw(t.rotation)
        x = t.translation.x + math.cos(a) * o.translation.x - math.sin(a) * o.translation.y
        y = t.translation.y + math.sin(a) * o.translation.x + math.cos(a) * o.translation.y
        pose = poses[stamp]  # x, y, z, θ, ...
        heading = math.remainder(a + _yaw(o.rotation) - pose[3], math.tau)
        assert (x, y, heading) == pytest.approx((pose[0], pose[1], 0.0), abs=1e-6)
        checked += 1
    assert checked >= 5
    # the tree a 3-D panel in the map frame needs: every frame drawn in reaches map
    parents = {t.child_frame_id: t.parent_frame_id for t in tf}
    assert parents == {"laser": "base_link", "base_link": "odom", "odom": "map"}
    drawn_in = {m.frame_id for m in foxglove["/scan"]} | {m.entities[0].frame_id for m in foxglove["/map"]}
    for frame in drawn_in | {m.frame_id for m in foxglove["/pose"]}:
        seen = [frame]
        while seen[-1] != "map":
            seen.append(parents[seen[-1]])
            assert len(seen) < 5, seen


def _check_tools(path: Path, bus: Bus, capsys: pytest.CaptureFixture[str]) -> None:
    """Pluto's tools: info lists the channels and says what they are; replay plays the bus interfaces only."""
    log = LogFile(path)
    assert any("Foxglove's schemas" in note and "/scan" in note for note in log.notes)
    assert log.channels["/scan"].type is None and log.channels["Sick/Scan_mm"].type is not None
    assert main(["log", "info", str(path)]) == 0
    info = capsys.readouterr().out
    assert "foxglove.LaserScan" in info and "not replayed" in info
    replayable = sum(c.count for c in log.channels.values() if c.type is not None)
    assert main(["replay", str(path), "--rate", "50", "--robot", "replay-" + bus.robot]) == 0
    assert f"replayed {replayable:,} messages" in capsys.readouterr().out


def test_pluto_record_writes_foxglove_schemas_by_default_and_raw_leaves_them_out(
    tmp_path: Path, make_bus: Callable[..., Bus], capsys: pytest.CaptureFixture[str]
) -> None:
    path, raw = tmp_path / "run.mcap", tmp_path / "raw.mcap"
    with FakeRobot(make_bus(), rate=2.0) as robot:
        wait_until(lambda: "Sick/Scan_mm" in robot.snapshot(), timeout=10)
        code = main(["record", "--map", "office", "-o", str(path), "--duration", "1.5"])
        assert main(["record", "--raw", "-o", str(raw), "--duration", "1"]) == 0
    assert code == 0
    out = capsys.readouterr().out
    assert "messages in Foxglove's schemas" in out and "/scan" in out and "/map" in out
    foxglove, pluto = _read(path)  # each Foxglove channel's schema is Foxglove's own, in protobuf
    assert len(foxglove["/scan"]) == len(pluto["Sick/Scan_mm"]) > 0
    assert {"/scan", "/tf", "/map"} <= set(foxglove)
    foxglove, pluto = _read(raw)
    assert not foxglove and "Sick/Scan_mm" in pluto
    assert main(["record", "--map", "no-such-world", "-o", str(tmp_path / "x.mcap")]) == 1
    assert "no-such-world" in capsys.readouterr().err
    assert main(["record", "--raw", "--foxglove", "-o", str(tmp_path / "y.mcap")]) == 1
    assert "--raw" in capsys.readouterr().err


def test_a_recording_whose_pose_comes_before_the_odometry_has_one_parent_per_frame(tmp_path: Path, bus: Bus) -> None:
    path = tmp_path / "run.mcap"
    pose = bus.create_publisher("Localization/Pose", msgs.PoseEstimate)
    odometry = bus.create_publisher("Base/Drive/State", msgs.Odometry)
    scan = bus.create_publisher("Sick/Scan_mm", msgs.LaserScan)

    def recorded(recorder: Recorder, name: str) -> int:
        return sum(i.count for i in recorder.status().interfaces if i.name == name)

    with Recorder(bus, path, translate=FoxgloveRecording(load_world("office"))) as recorder:
        pose.write(msgs.PoseEstimate(stamp=1.0, pose=[10.0, 9.7, 0.0, 0.0, 0.0, 0.0]))  # before any odometry
        wait_until(lambda: recorded(recorder, "Localization/Pose") == 1)
        odometry.write(msgs.Odometry(stamp=1.05, x=0.0, y=0.0, theta=0.0))
        scan.write(
            msgs.LaserScan(stamp=1.1, ranges=[1.0] * 181, angles=[i * math.pi / 180 - math.pi / 2 for i in range(181)])
        )
        pose.write(msgs.PoseEstimate(stamp=1.1, pose=[10.05, 9.7, 0.0, 0.0, 0.0, 0.0]))
        wait_until(lambda: recorded(recorder, "Localization/Pose") == 2 and recorded(recorder, "Sick/Scan_mm") == 1)
    foxglove, _ = _read(path)
    parents: dict[str, set[str]] = defaultdict(set)
    for t in foxglove["/tf"]:
        parents[t.child_frame_id].add(t.parent_frame_id)
    assert parents == {"odom": {"map"}, "base_link": {"odom"}, "laser": {"base_link"}}
