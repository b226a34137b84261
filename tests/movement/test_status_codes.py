"""The command flags and status codes of the movement chain are a protocol (docs/design.md, "The movement chain"):
each IntEnum holds exactly the numbers written there, and the names of before the enums are the same numbers."""

from __future__ import annotations

from enum import IntEnum
from pathlib import Path

import pytest

from pluto.movement.avoid import core as avoid
from pluto.movement.drive.core import DriveStatus
from pluto.movement.follow import core as follow
from pluto.movement.motion import codes
from pluto.movement.motion import core as motion

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"

PROTOCOL: dict[type[IntEnum], dict[str, int]] = {
    DriveStatus: {
        "NORMAL": 0,
        "TIMEOUT": -1,
        "STALE": -2,
        "STOPPED": -10,
        "FRONT_BUMPER": 1,
        "BACK_BUMPER": 2,
        "SONAR_FRONT": 3,
        "SONAR_BACK": 4,
        "SONAR_SIDES": 5,
    },
    avoid.Avoidance: {"NONE": 0, "SONAR": 1, "LASER": 2, "BOTH": 3},
    avoid.Mode: {"VELOCITY": 0, "HEADING": 1, "GOTO": 2, "WALL_FOLLOW": 3, "HALT": 4},
    avoid.AvoidStatus: {"LASER_SLOW": 6, "LASER_FAULT": 7, "STALE_POSE": 8, "COMMANDER_SILENT": 9},
    avoid.GotoStatus: {"NONE": 0, "REACHED": 1, "STUCK": 2, "UNVERIFIED": 3, "RUNNING": -1, "THREAD_STOPPED": -10},
    codes.MotionCommand: {
        "RELEASE": -1,
        "MOVETO": 42,
        "INVESTIGATE": 43,
        "EXPLORE": 44,
        "RESUME": 45,
        "SET_RECTANGLE": 46,
    },
    codes.MovetoStatus: {"IDLE": 0, "SET": -1, "NEARING": -2, "AT_GOAL": 1, "INVESTIGATE_DONE": 2, "RESTART_LOST": -3},
    codes.MotionStatus: {
        "THREAD_STOPPED": -10,
        "IDLE_RECTANGLE": -1,
        "IDLE": 0,
        "SCANNING": 1,
        "FOLLOWING": 3,
        "WAITING_SCAN": 7,
        "WAITING_POSE": 8,
        "WAITING_AVOID": 9,
        "TOWARDS_OBJECT": 11,
        "CIRCLING": 12,
    },
    follow.FollowCommand: {"START": 1, "STOP": 0, "RELEASE": -1},
    follow.FollowStatus: {
        "IDLE": 0,
        "SEARCHING": 1,
        "FOLLOWING": 2,
        "TOO_CLOSE": 3,
        "LOST": -1,
        "NO_SCAN": -2,
        "NO_POSE": -3,
    },
    follow.FollowThread: {"RUNNING": 0, "STOPPED": -10},
}


@pytest.mark.parametrize("enum", list(PROTOCOL), ids=lambda e: e.__name__)
def test_each_enum_holds_the_numbers_of_the_protocol(enum: type[IntEnum]) -> None:
    assert {m.name: m.value for m in enum} == PROTOCOL[enum]


def test_the_design_page_lists_every_status_code() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    section = text[text.index("### drive") : text.index("### pose and slam")]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    cells = {cell.strip() for row in rows for cell in row.split("|")}
    for enum in (DriveStatus, avoid.AvoidStatus, avoid.GotoStatus, codes.MovetoStatus, codes.MotionStatus):
        for member in enum:
            listed = str(member.value) in cells or any(str(member.value) in c.split(", ") for c in cells)
            assert listed, f"{enum.__name__}.{member.name} = {member.value} is not in docs/design.md's tables"


def test_the_old_names_are_the_same_numbers() -> None:
    assert (motion.MOVETO, motion.AT_GOAL, motion.SCANNING, motion.WAITING_AVOID) == (42, 1, 1, 9)
    assert (motion.MOVETO_SET, motion.NEARING, motion.RESTART_LOST, motion.THREAD_STOPPED) == (-1, -2, -3, -10)
    assert (avoid.LASER_SLOW, avoid.GOTO_STUCK, avoid.HALT, avoid.THREAD_STOPPED, avoid.AVOID_BOTH) == (6, 2, 4, -10, 3)
    assert (follow.START, follow.LOST, follow.NO_POSE, follow.THREAD_STOPPED) == (1, -1, -3, -10)
    assert str(motion.MOVETO) == "42" and f"{avoid.GOTO_RUNNING}" == "-1"  # they print as the numbers
