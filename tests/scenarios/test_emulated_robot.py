"""The ``emulated`` profile: the mission stack on the real device drivers, each device an emulator behind its
protocol (P2OS over TCP, SICK LMS telegrams, Crossbow packets, NMEA sentences, PowerCube frames on a virtual CAN
bus), with the simulator's realistic device errors, on the wall clock as on a robot.

The whole profile runs in this process (the supervisor's one-process mode) on free ports; a moveto of a few metres
across the office's lobby must end at the goal, by the Pioneer emulator's true pose. Every wait is on an event or a
collected value, with a generous limit that only a hang reaches.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.runtime.config import Config
from pluto.runtime.profiles import Profile, load_profile, with_params
from pluto.runtime.supervisor import Supervisor
from pluto.sim.world import WORLDS_DIR
from tests.helpers import free_tcp_port
from tests.scenarios.stack import Collector

pytestmark = pytest.mark.scenario

START = (3.0, 10.0, 0.0)
GOAL = (6.0, 10.5)
DEVICES = {"p2os-emulator": "base", "sick-emulator": "sick", "dmu-emulator": "dmu", "gps-emulator": "gps"}
"""Each emulator of the profile and the module whose driver talks to it."""


def lobby_world(folder: Path) -> Path:
    """The office without its visitor, the robot in the lobby at :data:`START`."""
    text = (WORLDS_DIR / "office.xml").read_text()
    text = re.sub(r"<start [^>]*/>", f'<start x="{START[0]}" y="{START[1]}" theta="{START[2]}"/>', text)
    path = folder / "lobby.xml"
    path.write_text(re.sub(r"<movers>.*</movers>", "", text, flags=re.S))
    return path


def on_free_ports(profile: Profile, world: Path, wrist_channel: str) -> Profile:
    """The profile with each emulator and its driver on a free port, in ``world``, the wrist on its own channel."""
    for emulator, driver in DEVICES.items():
        port = free_tcp_port()
        profile = with_params(profile, emulator, port=port)
        profile = with_params(profile, driver, port=f"socket://127.0.0.1:{port}")
    for name in ("p2os-emulator", "sick-emulator"):
        profile = with_params(profile, name, world=str(world))
    profile = with_params(profile, "pose", map=str(world))
    profile = with_params(profile, "localization", start_pose=list(START))
    return with_params(profile, "wrist", channel=wrist_channel)


@pytest.fixture
def stack(bus: Bus, tmp_path: Path) -> Iterator[Supervisor]:
    profile = on_free_ports(load_profile("emulated"), lobby_world(tmp_path), f"wrist-{bus.robot}")
    supervisor = Supervisor(bus, profile, Config(), one_process=True, startup_timeout=30.0)
    try:
        supervisor.start()
        yield supervisor
    finally:
        supervisor.shutdown()


def test_a_moveto_on_the_emulated_devices_ends_at_the_goal(bus: Bus, stack: Supervisor) -> None:
    truth = Collector(bus, "Sim/Truth", msgs.Odometry)
    status = Collector(bus, "motion/status", msgs.FVectorState)
    gps = Collector(bus, "GPS/State", msgs.GpsFix)
    posts = Collector(bus, "Localization/Post_Pose", msgs.PoseEstimate)
    command = bus.create_publisher("motion/command", msgs.ActuatorState)
    try:
        start = truth.wait_for(lambda _: True, timeout=30.0)
        assert math.hypot(start.x - START[0], start.y - START[1]) < 0.05
        command.write(msgs.ActuatorState(cmd_flags=42, position=list(GOAL)))
        # the moveto is set (-1), then the robot is at the goal (1) and the motion is over (element[3] back to 0)
        status.wait_for(lambda s: len(s.element) >= 4 and s.element[2] in (-1, -2), timeout=30.0)
        done = status.wait_for(lambda s: s.element[2] == 1 and s.element[3] <= 0, timeout=60.0)
        end = [t for t in truth.snapshot() if t.stamp <= done.stamp + 0.5][-1]
        assert math.hypot(end.x - GOAL[0], end.y - GOAL[1]) < 0.6, (end, done)
        # every driver has its device's link up, and the GPS fixes lie about the robot, with their realistic error
        for name in ("base/status", "sick/status", "dmu/status", "gps/status", "wrist/status"):
            reader = bus.create_reader(name, msgs.FVectorState)
            try:
                link = reader.wait_for_value(timeout=10.0)
            finally:
                bus.release(reader)
            assert link.element[0] == 1, (name, link)
        # the pose module matched the scans to the map all along (on the wall clock, as every module here)
        assert len([p for p in posts.snapshot() if p.cmd_flags == 1]) >= 5
        fixes = [f for f in gps.snapshot() if f.quality == 2]  # differential: 0.3 m (without it 3 m, now and then)
        assert fixes, "no differential GPS fix"
        near = [t for t in truth.snapshot() if t.stamp <= fixes[-1].stamp][-1]
        assert math.hypot(fixes[-1].x - near.x, fixes[-1].y - near.y) < 3.0, (fixes[-1], near)
    finally:
        for collector in (truth, status, gps, posts):
            collector.close()
        bus.release(command)
