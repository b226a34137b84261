"""The XML server in front of the simulated robot: the ``sim`` profile, a drive module and the server in this
process, in lock-step (at most ``RATE`` times faster than real time; the server paces subscriptions on the
simulated clock).

Clients are plain sockets, and the bash example; rates are counted on the stamps of the values received, in the
robot's time, which the lock-step makes exact whatever the load. Every wait is on what arrives, never a fixed sleep,
with a limit that only a hang reaches.
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.gateways.xmlserver.module import XmlServerModule, XmlServerParams
from pluto.movement.drive.module import DriveModule
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile, with_params
from pluto.runtime.supervisor import Supervisor
from tests.gateways.xmlserver.client import XmlClient, error_code
from tests.scenarios.stack import HANG, ROOM, Collector, Lockstep, Script

RATE = 2.0
TICK_HZ = 200.0
"""The simulator's steps a second (its ``rate_hz``): the lock-step ticks at least this often."""
WAIT = 60.0
"""Wall seconds a wait for what a client should receive may take (a limit against a hang, nothing else)."""
EXAMPLE = Path(__file__).parents[3] / "examples" / "xml_drive.sh"


@pytest.fixture
def robot(bus: Bus, tmp_path: Path) -> Iterator[Callable[..., XmlServerModule]]:
    """A function that starts an xmlserver on the simulated robot: the robot in a 10 m room (facing +x, 4.75 m from
    the wall ahead) with a drive module, in lock-step at most ``rate`` times faster than real time. Everything stops
    after the test.

    The server takes part in the lock-step, and a script keeps it in step: at each tick, before the time goes on,
    the server has handled every value written before it (a round trip through its loop), so each value is paced at
    the simulated time it was written, however late the server's thread runs on a busy machine.
    """
    room = tmp_path / "room.xml"
    room.write_text(ROOM)
    with Lockstep(bus) as sim:
        in_step: list[Script] = []

        def start(rate: float = RATE, **params: Any) -> XmlServerModule:
            assert sim.supervisor is None, "one server per test"
            profile = with_params(load_profile("sim"), "sim", world=str(room), rate=rate, lockstep=True)
            sim.supervisor = Supervisor(bus, profile, Config(), one_process=True)
            sim.supervisor.start(resume=False)
            sim.add(DriveModule(bus, DriveModule.Params(use_sim_time=True)))
            module: XmlServerModule = sim.add(
                XmlServerModule(bus, XmlServerParams(port=0, use_sim_time=True, **params))
            )
            # the server's stats are gathered on its loop: a round trip behind what the bus handed it
            in_step.append(
                sim.add(Script(bus, lambda _now: module.server.stats(timeout=HANG), rate_hz=TICK_HZ, name="in-step"))
            )
            sim.resume()
            return module

        yield start
        for script in in_step:
            assert script.failure is None, f"the server fell out of step: {script.failure!r}"


def stamps_of(updates: list[Any]) -> list[float]:
    return [float(u[0].get("stamp")) for u in updates]


def assert_rate(stamps: list[float], hz: float) -> None:
    """``hz`` values a second of the stamps' time: as many as the span holds periods, but for one at either end."""
    periods = (stamps[-1] - stamps[0]) * hz
    assert abs(len(stamps) - 1 - periods) <= 1, f"{len(stamps)} values in {periods:.2f} periods of {hz} Hz"


def test_a_client_reads_the_pose_and_drives_the_robot(bus: Bus, robot: Callable[..., XmlServerModule]) -> None:
    server = robot()
    truth = bus.create_reader("Sim/Truth", msgs.Odometry)
    start = truth.wait_for_value(timeout=WAIT)
    write = '<write name="drive/command"><ActuatorState cmd_flags="0"><velocity>{} 0</velocity></ActuatorState></write>'
    with XmlClient(server.server.address, timeout=WAIT) as client:
        client.start()
        assert client.request('<subscribe name="Base/Drive/State" rate="10"/>').tag == "subscribed"
        updates = client.wait_updates(32, "Base/Drive/State", timeout=WAIT)
        # 10 values a second of the robot's time, from an interface written at 50 Hz (the first is the current one)
        assert_rate(stamps_of(updates[1:]), 10.0)

        pose = client.request('<read name="Localization/Pose"/>')
        numbers = (pose[0].find("pose").text or "").split()  # type: ignore[union-attr]
        assert pose[0].tag == "PoseEstimate" and len(numbers) >= 6

        # a command at each update, until the robot has driven half a metre
        moved = 0.0
        while moved < 0.5:
            client.wait_updates(len(client.updates) + 1, timeout=WAIT)
            assert client.request(write.format(0.4)).tag == "written"
            now = truth.read()
            assert now is not None
            moved = now.x - start.x
        assert error_code(client.request(write.format("full-speed"))) == "bad-value"
        assert client.request(write.format(0.0)).tag == "written"
        while (state := truth.wait_for_update(timeout=WAIT)).v > 0.0:
            pass
        assert state.x - start.x > 0.5 and abs(state.y - start.y) < 0.05
        # the odometry streamed to the client saw the drive too
        client.wait_updates(len(client.updates) + 1, timeout=WAIT)
        assert float(client.updates[-1][0].get("x")) > 0.5


def test_fifty_laser_clients_and_one_that_reads_nothing(bus: Bus, robot: Callable[..., XmlServerModule]) -> None:
    write_buffer = 64 * 1024
    # at most real time: 50 clients reading in this process beside the whole robot and the server
    server = robot(rate=1.0, send_buffer=16 * 1024, write_buffer=write_buffer)
    address = server.server.address
    laser = Collector(bus, "Sick/Scan_mm", msgs.LaserScan)  # what the laser wrote, to compare with
    clients = [XmlClient(address, timeout=WAIT) for _ in range(50)]
    hog = XmlClient(address, timeout=WAIT, rcvbuf=4096)
    try:
        hog.start()
        for name in ("Sick/Scan_mm", "Sick/Scan", "Base/Drive/State", "Base/Sonar", "Localization/Pose"):
            assert hog.request(f'<subscribe name="{name}" rate="1000"/>').tag == "subscribed"
        for client in clients:
            client.start()
            assert client.request('<subscribe name="Sick/Scan_mm" rate="5"/>').tag == "subscribed"
        # from here on the hog reads nothing

        wanted = 27  # 26 periods: 5.2 s
        stamps: dict[XmlClient, list[float]] = {c: [] for c in clients}
        longest = 0
        update = re.compile(rb'<update name="Sick/Scan_mm" seq="\d+"><LaserScan stamp="([^"]+)"')
        buffers = {c: c._buffer for c in clients}  # what each read past its subscribed reply
        selector = selectors.DefaultSelector()
        for client in clients:
            client.sock.setblocking(False)
            selector.register(client.sock, selectors.EVENT_READ, client)
        while any(len(s) < wanted for s in stamps.values()):
            events = selector.select(timeout=WAIT)
            assert events, f"the laser clients got nothing for {WAIT:g} s"
            for key, _ in events:
                client = key.data
                data = client.sock.recv(1 << 20)
                assert data, "the server closed a laser client"
                *lines, buffers[client] = (buffers[client] + data).split(b"\n")
                for line in lines:
                    if match := update.match(line):
                        stamps[client].append(float(match.group(1)))
                        longest = max(longest, len(line) + 1)
        selector.close()

        # every reading client got every scan the laser wrote from its first to its last (the first value is the
        # current one): 5 a second of the robot's time. In lock-step the laser never falls behind, and the server
        # skips only for a client whose queue is full.
        last = max(received[-1] for received in stamps.values())
        laser.wait_for(lambda scan: scan.stamp >= last, timeout=WAIT)  # the test's own subscription may lag behind
        written = sorted({scan.stamp for scan in laser.snapshot()})
        assert_rate(written[-wanted:], 5.0)
        for received in stamps.values():
            assert received[1:] == [t for t in written if received[1] <= t <= received[-1]]
            assert_rate(received[1:], 5.0)

        # the one that reads nothing: its updates are skipped, what waits for it stays capped
        stats = server.server.stats()
        (stuck,) = [c for c in stats.clients if c.peer.endswith(f":{hog.sock.getsockname()[1]}")]
        assert stuck.updates_skipped > 0
        cap = write_buffer + longest * (1 + len(stuck.subscriptions)) + 16 * 1024
        assert stuck.max_queued_bytes <= cap and stuck.queued_bytes <= cap
        assert all(c.max_queued_bytes <= cap for c in stats.clients)
    finally:
        for client in [*clients, hog]:
            client.close()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_the_bash_example_reads_the_pose_and_drives_the_robot(
    bus: Bus, robot: Callable[..., XmlServerModule], tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("bash & friends\n")
    token.chmod(0o600)
    server = robot(token_file=str(token))
    truth = bus.create_reader("Sim/Truth", msgs.Odometry)
    start = truth.wait_for_value(timeout=WAIT)
    bus.wait_published("Localization/Pose", timeout=WAIT)
    env = {
        **os.environ,
        "PLUTO_XML_PORT": str(server.server.address[1]),
        "PLUTO_XML_TOKEN": "bash & friends",
    }
    done = subprocess.run(
        ["bash", str(EXAMPLE), "0.5", "0.4"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "start pose: x=" in done.stdout
    moved = re.search(r"moved (-?\d+) mm along x", done.stdout)
    assert moved is not None and int(moved.group(1)) >= 500, done.stdout
    while (state := truth.wait_for_update(timeout=WAIT)).v > 0.0:  # it stops after the script's last command
        pass
    # A bash loop outside the lock-step reacts when the machine lets it: the robot stops past 0.5 m, by how much
    # depends on the load (the drive's command timeout stops it whatever happens).
    assert 0.45 <= state.x - start.x <= 1.5
    assert abs(state.y - start.y) < 0.05


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_the_bash_example_stops_when_the_robot_is_blocked(bus: Bus, robot: Callable[..., XmlServerModule]) -> None:
    # 10 m ahead, but the wall is 4.75 m away: the drive's sonar protection stops the robot before it
    server = robot(rate=4.0)
    truth = bus.create_reader("Sim/Truth", msgs.Odometry)
    start = truth.wait_for_value(timeout=WAIT)
    bus.wait_published("Localization/Pose", timeout=WAIT)
    env = {**os.environ, "PLUTO_XML_PORT": str(server.server.address[1])}
    done = subprocess.run(
        ["bash", str(EXAMPLE), "10", "0.8"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    blocked = re.search(
        r"xml_drive: blocked: no progress for 30 pose updates, stopped (\d+) mm from the start", done.stderr
    )
    assert blocked is not None, done.stderr
    state = truth.wait_for_update(timeout=WAIT)
    assert 2.5 < state.x - start.x < 4.75  # stopped short of the wall
    assert abs(int(blocked.group(1)) / 1000 - (state.x - start.x)) < 0.3


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_the_bash_example_without_the_drive_module_fails_clearly(bus: Bus) -> None:
    server = XmlServerModule(bus, XmlServerParams(port=0))
    server.start()
    try:
        env = {**os.environ, "PLUTO_XML_PORT": str(server.server.address[1])}
        done = subprocess.run(
            ["bash", str(EXAMPLE), "0.5"], env=env, capture_output=True, text=True, timeout=60, check=False
        )
    finally:
        server.stop()
    assert done.returncode == 1
    assert done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("xml_drive: the drive module is not running, so nothing would obey drive/command")
    assert "`pluto start drive`" in line
