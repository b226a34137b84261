"""The Foxglove gateway on a simulation of several robots: one frame tree per robot under the one ``map``
(``<robot>/odom -> <robot>/base_link -> <robot>/laser``) and each robot's topics under its name."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pluto.bus import bus_config
from pluto.gateways.foxglove.module import FoxgloveModule, FoxgloveParams
from pluto.runtime.profiles import load_profile
from tests.gateways.foxglove.client import FoxgloveClient, Received
from tests.scenarios.fleet_stack import FleetLockstep
from tests.scenarios.stack import without

WAIT = 30.0
"""s a message may take to come (only a hang takes that long)."""


@pytest.fixture
def gateway() -> Iterator[FoxgloveModule]:
    with FleetLockstep() as stack:
        fleet = stack.start(without(load_profile("sim"), "dmu", "gps", "localization"), 3, world="office", rate=2.0)
        stack.resume()
        module = FoxgloveModule(stack.bus(fleet.names[0]), FoxgloveParams(port=0))  # asks the simulator
        module.start()
        try:
            yield module
        finally:
            module.stop()


def _tf(parent: str, child: str) -> Callable[[Received], bool]:
    return lambda r: r.topic == "/tf" and r.message.parent_frame_id == parent and r.message.child_frame_id == child


def test_every_robot_has_its_frames_and_topics(gateway: FoxgloveModule) -> None:
    prefix = bus_config().robot
    robots = [f"{prefix}-{i}" for i in (1, 2, 3)]
    assert gateway.robots == robots
    with FoxgloveClient(f"ws://127.0.0.1:{gateway.port}") as client:
        topics = [f"/{r}/{t}" for r in robots for t in ("scan", "pose", "truth", "path")]
        client.wait_for_channels(["/tf", "/map", "/log", *topics], WAIT)
        assert "/scan" not in client.channels and "/truth" not in client.channels  # each robot's, under its name
        client.subscribe("/tf", f"/{robots[2]}/scan", f"/{robots[1]}/truth")
        wanted = [
            *(_tf("map", f"{r}/odom") for r in robots),
            *(_tf(f"{r}/odom", f"{r}/base_link") for r in robots),
            *(_tf(f"{r}/base_link", f"{r}/laser") for r in robots),
            lambda r: r.topic == f"/{robots[2]}/scan",
            lambda r: r.topic == f"/{robots[1]}/truth",
        ]
        got = client.collect(WAIT, lambda got: all(any(w(r) for r in got) for w in wanted))
    assert all(any(w(r) for r in got) for w in wanted), sorted({r.topic for r in got})
    scan = next(r for r in got if r.topic == f"/{robots[2]}/scan")
    assert scan.message.frame_id == f"{robots[2]}/laser" and len(scan.message.ranges) == 361
    truth = next(r for r in got if r.topic == f"/{robots[1]}/truth")
    assert truth.message.frame_id == "map" and truth.message.pose.position.x == pytest.approx(16.0, abs=0.01)
    assert not any(r.topic == "/tf" and r.message.child_frame_id in ("odom", "base_link", "laser") for r in got)
