"""A command that asks the robot to move says whether it did, and if not why, in words, with exit status 1: the
verdict from what was seen (no bus), and ``pluto drive`` against a real drive module on a base that stands by a
wall."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.cli.main import main
from pluto.cli.motion_check import Asked, Seen, asked_by, judge
from pluto.movement.drive.module import DriveModule, DriveModuleParams

SIDE_ECHO = [(0.30, -math.radians(67.5)), (2.0, 0.0), (0.9, math.radians(90.0))]


def test_a_sonar_stop_is_told_with_the_echo_and_how_to_do_without() -> None:
    seen = Seen(start=(10.0, 9.7, 0.0), end=(10.0, 9.7, 0.0), drive_codes=[0, 5, 5], sonar=SIDE_ECHO, robot_time=1.0)
    verdict = judge(Asked(0.3, 0.0), seen, "drive/command", "--no-protect drives without it")
    assert not verdict.moved
    assert verdict.words == (
        "the robot did not move as asked (v 0.3 m/s, w 0 rad/s; odometry: 0.00 m, +0°): the drive's sonar "
        "protection stopped it: an echo at its side 0.30 m away, within its stop distance (0.40 m from the body); "
        "--no-protect drives without it"
    )


def test_each_reason_in_words() -> None:
    still = (10.0, 9.7, 0.0)

    def why(name: str = "drive/command", **kw: object) -> str:
        seen = Seen(start=still, end=still, robot_time=1.0, **kw)  # type: ignore[arg-type]
        verdict = judge(Asked(0.3, 0.0), seen, name)
        assert not verdict.moved
        return verdict.words.split("): ", 1)[1]

    assert why("avoidance/command", avoid_codes=[(0, -10)], drive_codes=[0]).startswith("avoid is released")
    assert why("avoidance/command", avoid_codes=[(6, -1)], drive_codes=[0]).startswith("avoid's laser protection")
    assert why(drive_codes=[1]).startswith("its front bumper is pressed")
    assert why(drive_codes=[-10]).startswith("the drive's control step is stopped")
    assert why(readers=[], drive_codes=[]).startswith("no running module reads drive/command (is the drive running?")
    assert why(rivals=["avoid"], readers=["drive"], drive_codes=[0]).startswith("avoid also writes drive/command")
    assert why(readers=["drive"]).startswith("the drive wrote no status")
    assert why(readers=["drive"], drive_codes=[0]).startswith("the drive sent the base no velocity")
    assert why(readers=["drive"], drive_codes=[0], drive_sent=(0.3, 0.0)).startswith("the base did not follow")
    seen = Seen(drive_codes=[0], drive_sent=(0.3, 0.0), readers=["drive"])
    assert judge(Asked(0.3, 0.0), seen, "drive/command").words.endswith(
        "there is no odometry (Base/Drive/State): is the base running? (`pluto mom`)"
    )


def test_moved_partly_or_enough() -> None:
    moving = Seen(start=(0.0, 0.0, 0.0), end=(0.05, 0.0, 0.0), drive_codes=[0])
    assert judge(Asked(0.3, 0.0), moving, "drive/command").words == "the robot is moving (odometry: 0.05 m, +0° so far)"
    fought = Seen(start=(0.0, 0.0, 0.0), end=(0.05, 0.0, 0.0), drive_codes=[0], rivals=["avoid"], readers=["drive"])
    verdict = judge(Asked(0.3, 0.0), fought, "drive/command", duration=2.0)  # 0.05 m of 0.6 m
    assert not verdict.moved and verdict.words.startswith("the robot moved only a little of about 0.60 m asked")
    assert "avoid also writes drive/command" in verdict.words
    turned = Seen(start=(0.0, 0.0, 0.0), end=(0.0, 0.0, 0.5), drive_codes=[0])
    assert judge(Asked(0.0, 0.5), turned, "drive/command", duration=1.0).moved
    assert not judge(Asked(0.3, 0.0), turned, "drive/command").moved  # a turn is not the drive asked for


def test_which_commands_ask_for_motion() -> None:
    assert asked_by("drive/command", msgs.ActuatorState(cmd_flags=10, velocity=[0.2, 0.0])) == Asked(0.2, 0.0)
    assert asked_by("drive/command", msgs.ActuatorState(cmd_flags=0, velocity=[0.0, 0.0])) is None  # a stop
    assert asked_by("avoidance/command", msgs.ActuatorState(cmd_flags=-1)) is None  # a release
    assert asked_by("avoidance/command", msgs.ActuatorState(cmd_flags=22, position=[5, 2])) == Asked(0.5, 0.0)
    assert asked_by("Base/Drive/Command", msgs.ActuatorState(velocity=[0.0, 0.4])) == Asked(0.0, 0.4)
    assert asked_by("Wrist/Command", msgs.ActuatorState(velocity=[0.5, 0.0])) is None


class StillBase:
    """A base that writes its odometry (standing still, fresh by the drive's clock) and a sonar scan with an echo
    0.3 m away beside it, as in the office's corridor at the robot's start, until closed."""

    def __init__(self, bus: Bus, drive: DriveModule) -> None:
        self.odometry = bus.create_publisher("Base/Drive/State", msgs.Odometry)
        self.sonar = bus.create_publisher("Base/Sonar", msgs.SonarScan)
        self.clock = drive.clock
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        ranges, angles = zip(*SIDE_ECHO, strict=True)
        while not self.stop.wait(0.05):  # the pace of a base's loop, not a wait for a result
            now = self.clock.now()
            self.odometry.write(msgs.Odometry(stamp=now, x=10.0, y=9.7))
            self.sonar.write(msgs.SonarScan(stamp=now, ranges=list(ranges), angles=list(angles), max_range=8.0))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5.0)


@pytest.fixture
def still_robot(bus: Bus) -> Iterator[DriveModule]:
    drive = DriveModule(bus, DriveModuleParams())
    drive.start()
    base = StillBase(bus, drive)
    try:
        yield drive
    finally:
        base.close()
        drive.stop()


def test_pluto_drive_says_why_the_robot_did_not_move_and_exits_1(
    still_robot: DriveModule, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["drive", "velocity", "0.3", "0"]) == 1
    out = capsys.readouterr().out.strip()
    assert out.startswith("the robot did not move as asked (v 0.3 m/s, w 0 rad/s; odometry: 0.00 m, +0°): ")
    assert "the drive's sonar protection stopped it: an echo at its side 0.30 m away" in out
    assert out.endswith("--no-protect drives without it")
    # without the protection the drive commands the base, which does not move: that is said too
    assert main(["drive", "velocity", "0.3", "0", "--no-protect", "--for", "0.5"]) == 1
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith("the base did not follow its commands (stalled? `pluto echo Base/Contact`)")
    )
