"""The Foxglove gateway against a client of the protocol written in the tests: the handshake, the advertised
channels and their schemas, and LaserScan, FrameTransform, PoseInFrame and SceneUpdate messages whose contents match
what was written on the bus."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.gateways.foxglove.module import FoxgloveModule, FoxgloveParams
from pluto.sim.world import load_world
from tests.gateways.foxglove.client import FoxgloveClient, Received
from tests.helpers import wait_until

WAIT = 30.0
"""Wall seconds a message may take (only a hang takes that long)."""

BEAMS = 361
ANGLES = [-math.pi / 2 + math.pi * k / (BEAMS - 1) for k in range(BEAMS)]
RANGES = [1.0 + 0.01 * k for k in range(BEAMS)]
RANGES[10] = -1.0  # an error of the scanner
RANGES[20] = 80.0  # nothing seen within the range
ODOM = (1.0, 2.0, 0.5)
POSE = (3.0, 4.0, 1.2)


class FakeRobot:
    """Writes a scan, odometry and a pose of one time on the bus, again and again (a new stamp each time), until
    stopped: the gateway only sends to subscribers, so a value written before the test subscribed is not seen."""

    def __init__(self, bus: Bus) -> None:
        self.scan = bus.create_publisher(names.SICK_SCAN_MM)
        self.odom = bus.create_publisher(names.BASE_DRIVE_STATE)
        self.pose = bus.create_publisher(names.LOCALIZATION_POSE)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="fake-robot")
        self.stamps: list[float] = []

    def _run(self) -> None:
        stamp = 100.0
        while not self.stop.is_set():
            stamp += 0.1
            self.stamps.append(stamp)
            self.odom.write(msgs.Odometry(stamp=stamp, x=ODOM[0], y=ODOM[1], theta=ODOM[2], v=0.3))
            self.pose.write(msgs.PoseEstimate(stamp=stamp, pose=[POSE[0], POSE[1], 0.0, POSE[2], 0.0, 0.0]))
            self.scan.write(msgs.LaserScan(stamp=stamp, ranges=RANGES, angles=ANGLES, count=BEAMS - 2))
            self.stop.wait(0.05)  # pacing the writes, not a wait for a result

    def __enter__(self) -> FakeRobot:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


@pytest.fixture
def gateway(bus: Bus) -> Iterator[FoxgloveModule]:
    module = FoxgloveModule(bus, FoxgloveParams(port=0, map="office", map_period=0.5))
    module.start()
    try:
        yield module
    finally:
        module.stop()


@pytest.fixture
def client(gateway: FoxgloveModule) -> Iterator[FoxgloveClient]:
    with FoxgloveClient(f"ws://127.0.0.1:{gateway.port}") as c:
        yield c


def _yaw(q: Any) -> float:
    return math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))


def _has(*wanted: Callable[[Received], bool]) -> Callable[[list[Received]], bool]:
    return lambda got: all(any(w(r) for r in got) for w in wanted)


def _tf(parent: str, child: str) -> Callable[[Received], bool]:
    return lambda r: r.topic == "/tf" and r.message.parent_frame_id == parent and r.message.child_frame_id == child


def _odometry_known(r: Received) -> bool:
    """The odometry's transform, not the identity that stands for it while a pose came first."""
    return _tf("odom", "base_link")(r) and r.message.translation.x != 0.0


def _after(first: Callable[[Received], bool], then: Callable[[Received], bool]) -> Callable[[list[Received]], bool]:
    """A message ``then`` came after a message ``first`` (the order a busy machine delivers them in varies)."""

    def done(got: list[Received]) -> bool:
        start = next((i for i, r in enumerate(got) if first(r)), None)
        return start is not None and any(then(r) for r in got[start + 1 :])

    return done


def test_handshake_advertises_the_foxglove_schemas(client: FoxgloveClient) -> None:
    client.wait_for_channels(["/scan", "/tf", "/pose", "/map", "Base/Drive/State"], WAIT)
    assert client.ws.subprotocol in ("foxglove.sdk.v1", "foxglove.websocket.v1")
    assert client.server_info["op"] == "serverInfo" and "pluto" in client.server_info["name"]
    expected = {
        "/scan": "foxglove.LaserScan",
        "/tf": "foxglove.FrameTransform",
        "/pose": "foxglove.PoseInFrame",
        "/truth": "foxglove.PoseInFrame",
        "/path": "foxglove.PosesInFrame",
        "/map": "foxglove.SceneUpdate",
        "/log": "foxglove.Log",
    }
    for topic, schema in expected.items():
        channel = client.channels[topic]
        assert (channel["schemaName"], channel["encoding"], channel["schemaEncoding"]) == (
            schema,
            "protobuf",
            "protobuf",
        )
    drive = client.channels["Base/Drive/State"]
    assert (drive["schemaName"], drive["encoding"]) == ("pluto.msgs.Odometry", "json")


def test_scan_and_transforms_match_what_was_written(bus: Bus, client: FoxgloveClient) -> None:
    client.wait_for_channels(["/scan", "/tf", "/pose"], WAIT)
    client.subscribe("/scan", "/tf", "/pose")
    with FakeRobot(bus) as robot:
        got = client.collect(
            WAIT,
            lambda got: (
                _has(
                    lambda r: r.topic == "/scan",
                    lambda r: r.topic == "/pose",
                    _tf("base_link", "laser"),
                )(got)
                # the map's transform made once the odometry was known (one made while a pose came first stands on the
                # identity instead of the odometry)
                and _after(_odometry_known, _tf("map", "odom"))(got)
            ),
        )
    topics = {r.topic for r in got}
    assert {"/scan", "/tf", "/pose"} <= topics, topics

    scan = next(r for r in got if r.topic == "/scan")
    m = scan.message
    stamp = m.timestamp.seconds + m.timestamp.nanos * 1e-9
    assert any(abs(stamp - s) < 1e-6 for s in robot.stamps)
    assert scan.log_time == pytest.approx(stamp * 1e9, abs=1)  # logged at the message's stamp
    assert m.frame_id == "laser"
    assert m.start_angle == pytest.approx(-math.pi / 2) and m.end_angle == pytest.approx(math.pi / 2)
    assert len(m.ranges) == BEAMS
    for k, (sent, fox) in enumerate(zip(RANGES, m.ranges, strict=True)):
        if k in (10, 20):
            assert math.isinf(fox), (k, fox)
        else:
            assert fox == pytest.approx(sent), k

    # map -> odom composed with odom -> base_link puts the robot at the localization pose.
    odom = [r.message for r in got if _tf("odom", "base_link")(r)][-1]
    assert (odom.translation.x, odom.translation.y, _yaw(odom.rotation)) == pytest.approx(ODOM)
    known = next(i for i, r in enumerate(got) if _odometry_known(r))
    map_odom = [r.message for r in got[known + 1 :] if _tf("map", "odom")(r)][-1]
    a = _yaw(map_odom.rotation)
    x = map_odom.translation.x + math.cos(a) * ODOM[0] - math.sin(a) * ODOM[1]
    y = map_odom.translation.y + math.sin(a) * ODOM[0] + math.cos(a) * ODOM[1]
    assert (x, y, a + ODOM[2]) == pytest.approx(POSE)
    laser = next(r.message for r in got if _tf("base_link", "laser")(r))
    assert (laser.translation.x, laser.translation.y, laser.translation.z) == pytest.approx((0.25, 0.0, 0.9))

    pose = next(r.message for r in got if r.topic == "/pose")
    assert pose.frame_id == "map"
    assert (pose.pose.position.x, pose.pose.position.y, _yaw(pose.pose.orientation)) == pytest.approx(POSE)


def test_a_thinned_tree_still_gets_the_transform_that_corrects_a_stand_in(bus: Bus) -> None:
    # A pose before any odometry puts odom where the robot is (a stand-in); the first odometry then brings the true
    # map -> odom at once. Thinning (one transform of a frame a second here) must not drop that one: the next comes
    # only with the next pose.
    module = FoxgloveModule(bus, FoxgloveParams(port=0, max_rate_hz=1.0))
    module.start()
    try:
        pose = bus.create_publisher(names.LOCALIZATION_POSE)
        odom = bus.create_publisher(names.BASE_DRIVE_STATE)
        with FoxgloveClient(f"ws://127.0.0.1:{module.port}") as client:
            client.wait_for_channels(["/tf"], WAIT)
            client.subscribe("/tf")
            got: list[Received] = []

            def has_map_odom(batch: list[Received]) -> bool:
                return any(_tf("map", "odom")(r) for r in batch)

            def write_pose() -> bool:
                pose.write(msgs.PoseEstimate(stamp=100.0, pose=[POSE[0], POSE[1], 0.0, POSE[2], 0.0, 0.0]))
                got.extend(client.collect(0.5, has_map_odom))
                return has_map_odom(got)

            wait_until(write_pose, timeout=WAIT)  # the subscription may take a moment to reach the gateway
            odom.write(msgs.Odometry(stamp=100.05, x=ODOM[0], y=ODOM[1], theta=ODOM[2]))
            got.extend(client.collect(WAIT, has_map_odom))
        map_odom = [r.message for r in got if _tf("map", "odom")(r)]
        assert len(map_odom) >= 2, "the correction of the stand-in was not sent"
        a = _yaw(map_odom[-1].rotation)
        x = map_odom[-1].translation.x + math.cos(a) * ODOM[0] - math.sin(a) * ODOM[1]
        y = map_odom[-1].translation.y + math.sin(a) * ODOM[0] + math.cos(a) * ODOM[1]
        assert (x, y, a + ODOM[2]) == pytest.approx(POSE)
    finally:
        module.stop()


def test_walls_and_json_interfaces(bus: Bus, client: FoxgloveClient) -> None:
    client.wait_for_channels(["/map", "Base/Drive/State"], WAIT)
    client.subscribe("/map", "Base/Drive/State")
    with FakeRobot(bus):
        got = client.collect(WAIT, _has(lambda r: r.topic == "/map", lambda r: r.topic == "Base/Drive/State"))
    scene = next(r.message for r in got if r.topic == "/map")
    world = load_world("office")
    (entity,) = scene.entities
    assert entity.frame_id == "map"
    assert len(entity.cubes) == len(world.segments()) + len(world.circles)
    x1, y1, x2, y2 = world.segments()[0]
    first = entity.cubes[0]
    assert (first.pose.position.x, first.pose.position.y) == pytest.approx(((x1 + x2) / 2, (y1 + y2) / 2))
    assert first.size.x == pytest.approx(max(math.hypot(x2 - x1, y2 - y1), 0.05))
    drive = next(r.message for r in got if r.topic == "Base/Drive/State")
    assert drive["type"] == "Odometry" and drive["v"] == pytest.approx(0.3) and drive["x"] == pytest.approx(ODOM[0])


def test_a_fast_stream_is_thinned_out_for_viewers(bus: Bus) -> None:
    module = FoxgloveModule(bus, FoxgloveParams(port=0, max_rate_hz=1.0))
    module.start()
    try:
        with FoxgloveClient(f"ws://127.0.0.1:{module.port}") as client:
            client.wait_for_channels(["/scan"], WAIT)
            client.subscribe("/scan")
            with FakeRobot(bus) as robot:
                got = client.collect(WAIT, lambda got: got and module.thinned >= 5)
                written = len(robot.stamps)
        assert got and module.thinned >= 5
        assert len(got) < written  # a scan every 50 ms, at most one a second sent
    finally:
        module.stop()
    with pytest.raises(ValueError, match="max_rate_hz"):
        FoxgloveParams(max_rate_hz=-1.0)


def test_a_port_in_use_and_bad_parameters_are_clear_errors(bus: Bus, gateway: FoxgloveModule) -> None:
    from pluto.errors import ConfigError

    with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{gateway.port}"):
        FoxgloveModule(bus, FoxgloveParams(port=gateway.port)).start()
    with pytest.raises(ValueError, match="No/Such"):
        FoxgloveParams(json=["Base/Drive/State", "No/Such"])
    with pytest.raises(ValueError, match="map_pose"):
        FoxgloveParams(map_pose="gps")
    with pytest.raises(ValueError, match="port"):
        FoxgloveParams(port=70000)


def test_log_tells_modules_that_come_and_go(bus: Bus, gateway: FoxgloveModule, client: FoxgloveClient) -> None:
    from pluto.runtime.module import Module

    client.wait_for_channels(["/log"], WAIT)
    assert not gateway.has_viewers("/log")
    client.subscribe("/log")
    wait_until(lambda: gateway.has_viewers("/log"), timeout=WAIT)  # a line sent before is nobody's
    other = Module(bus, name="lidar-test")
    got: list[Received] = []
    other.start()
    try:
        got = client.collect(WAIT, _has(lambda r: "lidar-test is up" in r.message.message))
    finally:
        other.stop()
    line = next(r.message for r in got if "lidar-test" in r.message.message)
    assert line.name == "mom" and line.level == 2  # INFO


def test_the_simulated_robot_in_foxglove(bus: Bus) -> None:
    """The simulated robot in lock-step: every scan a viewer gets is the scan of its stamp on the bus, and the
    odometry transforms are the base's odometry of their stamps."""
    from tests.scenarios.stack import DriveCommand, Lockstep

    with Lockstep(bus) as sim:
        sim.start(world="office", seed=2)
        scans = sim.collect("Sick/Scan_mm", msgs.LaserScan)
        odometry = sim.collect("Base/Drive/State", msgs.Odometry)
        module = sim.add(FoxgloveModule(bus, FoxgloveParams(port=0, max_rate_hz=0.0)))
        with FoxgloveClient(f"ws://127.0.0.1:{module.port}") as client:
            client.wait_for_channels(["/scan", "/tf", "/map"], WAIT)
            client.subscribe("/scan", "/tf", "/map")
            drive = sim.add(DriveCommand(bus, 0.3, 0.2, until=2.0))
            sim.resume()
            got = client.collect(
                WAIT,
                lambda got: sum(r.topic == "/scan" for r in got) >= 3 and any(_tf("odom", "base_link")(r) for r in got),
            )
            drive.wait()
    by_stamp = {s.stamp: s for s in scans.snapshot()}
    fox_scans = [r.message for r in got if r.topic == "/scan"]
    assert len(fox_scans) >= 3
    for fox in fox_scans:
        stamp = round(fox.timestamp.seconds + fox.timestamp.nanos * 1e-9, 6)
        scan = by_stamp[min(by_stamp, key=lambda s: abs(s - stamp))]
        assert scan.stamp == pytest.approx(stamp, abs=1e-6)
        for sent, received in zip(scan.ranges, fox.ranges, strict=True):
            assert received == pytest.approx(sent) if 0 <= sent < scan.max_range else math.isinf(received)
    odom_by_stamp = {o.stamp: o for o in odometry.snapshot()}
    for r in got:
        if _tf("odom", "base_link")(r):
            t = r.message
            stamp = t.timestamp.seconds + t.timestamp.nanos * 1e-9
            o = odom_by_stamp[min(odom_by_stamp, key=lambda s: abs(s - stamp))]
            assert o.stamp == pytest.approx(stamp, abs=1e-6)
            assert (t.translation.x, t.translation.y) == pytest.approx((o.x, o.y))
            assert math.remainder(_yaw(t.rotation) - o.theta, math.tau) == pytest.approx(0.0, abs=1e-9)
