"""``pluto pose``: its arguments, one-line errors when what it needs is not running, and runs in this process against
a stand-in pose module on the wall clock (status, start, stop, find wall) and the simulated robot in lock-step with
localization and the pose module (status, set)."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.cli.main import build_parser, main
from pluto.navigation.pose.module import FIND_WALL, SEARCHING, PoseModule, PoseModuleParams
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.profiles import load_profile
from tests.helpers import wait_until
from tests.scenarios.stack import ROOM, Collector, Lockstep, without

WALL = [0.01, 4.2, 1e-6, 0.0, 0.0, 4e-6]  # γ rad, ρ m, covariance


@pytest.fixture
def room(tmp_path: Path) -> Path:
    """The scenario tests' room as a map file."""
    path = tmp_path / "room.xml"
    path.write_text(ROOM)
    return path


def one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith("pluto pose: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# ----------------------------------------------------------------------------------------------- the arguments


def test_arguments() -> None:
    parser = build_parser()
    args = parser.parse_args(["pose", "set", "1.5", "-2", "0.5"])
    assert (args.command, args.action, args.x, args.y, args.theta, args.restart) == (
        "pose",
        "set",
        1.5,
        -2.0,
        0.5,
        True,
    )
    assert parser.parse_args(["pose", "set", "1", "2", "3", "--no-start"]).restart is False
    args = parser.parse_args(["pose", "calibrate"])
    assert (args.distance, args.speed, args.legs, args.output) == (1.0, 0.2, 4, None)
    args = parser.parse_args(["pose", "calibrate", "--distance", "2", "--speed", "0.3", "--legs", "3", "--output", "c"])
    assert (args.distance, args.speed, args.legs, args.output) == (2.0, 0.3, 3, "c")
    for action in ("start", "stop", "status", "find-wall"):
        assert parser.parse_args(["pose", action]).action == action
    for bad in (["pose"], ["pose", "set", "1", "2"], ["pose", "fly"], ["pose", "set", "1", "2", "east"]):
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args(bad)
        assert exit_info.value.code == 2


def test_without_the_pose_module_every_action_fails_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["status"], ["start"], ["find-wall"], ["set", "1", "2", "0"], ["calibrate"]):
        assert main(["pose", *argv]) == 1
        one_line_error(capsys, "pose is not running on robot", "pluto start pose")
    assert main(["pose", "set", "1", "nan", "0"]) == 1
    one_line_error(capsys, "finite")
    assert main(["pose", "calibrate", "--distance", "0.1"]) == 1
    one_line_error(capsys, "distance = 0.1 is out of range: it must be in [0.3, 10]")


# ------------------------------------------------------------------------------- a stand-in pose module


class StandInPose(Module):
    """Writes ``pose/status`` at 20 Hz as the pose module does and answers find wall: every other request at once
    in the step that reads it (as the module does when a scan comes in the same step), the others with -1 first; the
    wall is always the same."""

    name = "pose"
    provides = (names.POSE_STATUS,)

    def __init__(self, bus: Bus, wall: list[float]) -> None:
        super().__init__(bus, ModuleParams(rate_hz=20.0, use_sim_time=False))
        self.wall = wall
        self.requests = 0

    def on_configure(self) -> None:
        self.asked = threading.Event()
        self.code, self.data, self.searching = 0, list[float](), False
        self.status = self.create_publisher(names.POSE_STATUS)
        self.create_subscription(names.POSE_STATUS, self.on_status, depth=16)
        self.write(0.0, running=True)

    def on_status(self, status: msgs.FVectorState) -> None:
        if len(status.element) > 1 and status.element[1] == FIND_WALL:
            self.asked.set()

    def step(self, now: float) -> None:
        if self.asked.is_set():
            self.asked.clear()
            self.requests += 1
            if self.requests % 2:
                self.answer()
            else:
                self.code, self.searching = SEARCHING, True
        elif self.searching:
            self.searching = False
            self.answer()
        self.write(now, running=True)

    def answer(self) -> None:
        self.data = list(self.wall)
        self.code = 150 if self.wall else 0

    def on_deactivate(self) -> None:
        self.write(self.clock.now(), running=False)

    def write(self, now: float, running: bool) -> None:
        self.status.write(msgs.FVectorState(stamp=now, data=self.data, element=[int(running), self.code, 0, 3, 0]))


@pytest.fixture
def localization(bus: Bus) -> Iterator[Module]:
    """A module named localization (find wall asks that it runs)."""
    module: Module = Module(bus, ModuleParams(autostart=False), name="localization")
    module.start()
    try:
        yield module
    finally:
        module.stop()


def stand_in(bus: Bus, wall: list[float]) -> StandInPose:
    pose = StandInPose(bus, wall)
    pose.start()
    return pose


def test_status_start_stop_and_find_wall(bus: Bus, localization: Module, capsys: pytest.CaptureFixture[str]) -> None:
    pose = stand_in(bus, WALL)
    try:
        assert main(["pose", "status"]) == 0
        assert capsys.readouterr().out == (
            "thread running, tracking, 3 walls matched in the last scan, 0 relocalizations\n"
        )
        gamma = math.degrees(0.01)
        for _ in range(3):
            assert main(["pose", "find-wall"]) == 0
            assert capsys.readouterr().out == (
                f"wall in front: 150 points, gamma +{gamma:.2f}° (σ 0.06°), rho 4.200 m (σ 0.002 m)\n"
            )
        # answered at once (a new answer), after a search, then at once with the answer shown before, which cannot
        # be told from it: asked again, answered after a search
        assert pose.requests == 4
        assert main(["pose", "status"]) == 0
        assert capsys.readouterr().out.endswith(
            "; find wall: 150 points, gamma +0.57° (σ 0.06°), rho 4.200 m (σ 0.002 m)\n"
        )

        assert main(["pose", "stop"]) == 0
        assert "pose thread stopped" in capsys.readouterr().out
        assert not pose.active
        assert main(["pose", "status"]) == 0
        assert capsys.readouterr().out.startswith("thread stopped, tracking")
        assert main(["pose", "find-wall"]) == 1
        one_line_error(capsys, "the pose thread is stopped (`pluto pose start`)")
        assert main(["pose", "start"]) == 0
        assert capsys.readouterr().out == "pose thread running\n"
        assert pose.active
    finally:
        pose.stop()


def test_find_wall_without_a_wall_or_without_localization(
    bus: Bus, localization: Module, capsys: pytest.CaptureFixture[str]
) -> None:
    pose = stand_in(bus, [])
    try:
        assert main(["pose", "find-wall"]) == 1
        assert capsys.readouterr().out == (
            "no wall in front of the laser (find wall looks within 30° of straight ahead)\n"
        )
        localization.stop()
        wait_until(lambda: "localization" not in bus.live_modules(), message="localization gone")
        assert main(["pose", "find-wall"]) == 1
        one_line_error(capsys, "find wall needs localization running", "`pluto start localization`")
        assert main(["pose", "calibrate", "--output", "c.toml"]) == 1
        one_line_error(capsys, "pose calibrate needs base, drive, sick, localization running")
    finally:
        pose.stop()


# ----------------------------------------------------------------------------------- the simulated robot


def test_set_the_pose_on_the_simulated_robot(bus: Bus, room: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Lockstep(bus) as sim:
        sim.start(without(load_profile("sim"), "gps"), world=str(room), seed=1)
        module: PoseModule = sim.add(PoseModule(bus, PoseModuleParams(map=str(room), use_sim_time=True)))
        poses = Collector(bus, names.LOCALIZATION_POSE, msgs.PoseEstimate)
        try:
            sim.resume()
            poses.wait_for(lambda p: p.cmd_flags == 1, timeout=20)  # the pose module corrects the pose
            assert main(["pose", "status"]) == 0
            out = capsys.readouterr().out
            assert re.fullmatch(
                r"thread running, (tracking|LOST), \d+ walls matched in the last scan, \d+ relocalizations\n", out
            )

            assert main(["pose", "set", "5.1", "4.9", "0.05"]) == 0
            assert capsys.readouterr().out == "pose set to (5.1 m, 4.9 m, 2.9°); the pose thread goes on from it\n"
            posted = poses.wait_for(lambda p: p.cmd_flags == -1)
            assert posted.pose[:2] == pytest.approx([5.1, 4.9], abs=1e-6) and posted.pose[3] == pytest.approx(0.05)
            assert module.active  # started again: it takes the pose from localization and corrects it
            poses.wait_for(lambda p: p.cmd_flags == 1 and p.stamp > posted.stamp)

            assert main(["pose", "set", "5.0", "5.0", "0.0", "--no-start"]) == 0
            assert capsys.readouterr().out.endswith("the pose thread is stopped\n")
            assert not module.active
        finally:
            poses.close()
