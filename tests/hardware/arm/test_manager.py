"""Playing motions and the motion manager: keyframe interpolation from the arm's position, postures reached or
timed out, ids, blending and the activate / status / deactivate events."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.hardware.arm.kinematics import ArmModel
from pluto.hardware.arm.manager import MAX_MOTIONS, MotionEventKind, MotionManager, MotionManagerFull
from pluto.hardware.arm.motion import MotionSequence, Posture, parse_motion
from pluto.hardware.arm.playback import PosturePlayer, SequencePlayer

ACTIVATE, STATUS, DEACTIVATE = MotionEventKind.ACTIVATE, MotionEventKind.STATUS, MotionEventKind.DEACTIVATE


@pytest.fixture(scope="module")
def lynx() -> ArmModel:
    return ArmModel.load("LynxArm6")


def player(lynx: ArmModel, text: str) -> SequencePlayer:
    seq = parse_motion(text, lynx, "t.mot")
    assert isinstance(seq, MotionSequence)
    return SequencePlayer(seq, lynx.num_outputs, lynx.lower, lynx.upper)


def posture(lynx: ArmModel, values: dict[int, tuple[float, float]], **kw: float) -> PosturePlayer:
    prismatic = np.array([link.type == "prismatic" for link in lynx.links[:6]])
    return PosturePlayer(Posture("p.pos", values), 6, lynx.lower, lynx.upper, prismatic, **kw)  # type: ignore[arg-type]


def test_a_sequence_starts_from_the_arm_position_and_interpolates_per_joint(lynx: ArmModel) -> None:
    p = player(lynx, "#MSq\nadvanceTime 100\nElbow 1.0\nadvanceTime 100\nShldr:rot 0.5\nElbow 0.0 0.5\n#END\n")
    current = np.array([0.2, 0.0, -0.4, 0.0, 0.0, 0.0])
    p.start(10.0, current)
    values, weights = p.outputs(10.0)
    assert values[2] == pytest.approx(-0.4) and weights[2] == 0.0  # time 0: where it is, not driven yet
    values, weights = p.outputs(10.05)
    assert values[2] == pytest.approx(0.3) and weights[2] == pytest.approx(0.5)
    assert values[0] == pytest.approx(0.2 + 0.5 * 0.15) and weights[0] == pytest.approx(0.5 * 0.5)
    values, weights = p.outputs(10.15)
    assert values[2] == pytest.approx(0.5) and weights[2] == pytest.approx(0.75)
    assert not p.done(10.19, current)
    values, weights = p.outputs(11.0)  # after the end every joint holds its last keyframe
    assert values[0] == pytest.approx(0.5) and values[2] == pytest.approx(0.0)
    assert np.isnan(values[1]) and weights[1] == 0.0  # never mentioned: never driven
    assert p.done(10.2, current)


def test_an_explicit_time_zero_keyframe_takes_the_arm_position(lynx: ArmModel) -> None:
    p = player(lynx, "#MSq\nElbow 1.0\nadvanceTime 200\nElbow 0.6\n#END\n")
    p.start(0.0, np.array([0.0, 0.0, 0.2, 0.0, 0.0, 0.0]))
    values, weights = p.outputs(0.0)
    assert values[2] == pytest.approx(0.2) and weights[2] == 1.0
    assert p.outputs(0.1)[0][2] == pytest.approx(0.4)


def test_sequence_values_are_held_within_the_limits(lynx: ArmModel) -> None:
    p = player(lynx, "#MSq\ndegrees\nadvanceTime 10\nElbow 170\nGripper 500\n#END\n")
    p.start(0.0, np.zeros(6))
    values, _ = p.outputs(1.0)
    assert values[2] == pytest.approx(math.pi / 2) and values[5] == pytest.approx(0.1)


def test_a_posture_is_done_when_reached_or_timed_out(lynx: ArmModel) -> None:
    p = posture(lynx, {0: (0.5, 1.0), 5: (0.05, 1.0), 3: (1.0, 0.0)}, tolerance=0.035, timeout=2.0)
    p.start(0.0, np.zeros(6))
    values, weights = p.outputs(0.1)
    assert values[0] == 0.5 and weights.tolist() == [1.0, 0, 0, 0.0, 0, 1.0]
    assert not p.done(0.5, np.zeros(6))
    assert not p.done(0.5, np.array([0.47, 0, 0, 0, 0, 0.0485]))  # the gripper is judged to 1 mm
    assert p.done(0.5, np.array([0.47, 0, 0, 0, 0, 0.0495])) and p.reached
    late = posture(lynx, {0: (0.5, 1.0)}, timeout=2.0)
    late.start(0.0, np.zeros(6))
    assert not late.done(1.99, np.zeros(6))
    assert late.done(2.0, np.zeros(6)) and not late.reached


def test_ids_are_slots_taken_in_turn_and_freed(lynx: ArmModel) -> None:
    manager = MotionManager(6)
    hold = {0: (0.5, 1.0)}
    ids = [manager.add(posture(lynx, hold), 0.0, np.zeros(6), owner=i) for i in range(3)]
    assert ids == [0, 1, 2]
    assert manager.remove(1, 0.1) and not manager.remove(1, 0.1)
    assert manager.add(posture(lynx, hold), 0.2, np.zeros(6)) == 3  # not the freed 1 at once
    for _ in range(MAX_MOTIONS - 3):
        manager.add(posture(lynx, hold), 0.3, np.zeros(6))
    assert len(manager) == MAX_MOTIONS
    with pytest.raises(MotionManagerFull):
        manager.add(posture(lynx, hold), 0.4, np.zeros(6))
    assert 1 in manager and [m.id for m in manager.running()] == list(range(MAX_MOTIONS))


def test_events_activate_then_status_then_deactivate_with_their_owner(lynx: ArmModel) -> None:
    manager = MotionManager(6)
    assert manager.step(0.0, np.zeros(6)) is None  # nothing runs: nothing to command
    seq_id = manager.add(player(lynx, "#MSq\nadvanceTime 100\nElbow 0.3\n#END\n"), 0.0, np.zeros(6), owner="a")
    pos_id = manager.add(posture(lynx, {0: (0.4, 1.0)}), 0.0, np.zeros(6), owner="b")
    assert [(e.id, e.kind, e.owner) for e in manager.take_events()] == [
        (seq_id, ACTIVATE, "a"),
        (pos_id, ACTIVATE, "b"),
    ]
    command = manager.step(0.05, np.zeros(6))
    assert command is not None and command[0] == pytest.approx(0.4) and command[2] == pytest.approx(0.15)
    assert np.isnan(command[1])
    assert manager.take_events() == []
    manager.step(0.1, np.array([0.1, 0, 0.3, 0, 0, 0]))
    assert [(e.id, e.kind, e.owner) for e in manager.take_events()] == [
        (seq_id, STATUS, "a"),
        (seq_id, DEACTIVATE, "a"),
    ]
    manager.step(0.2, np.array([0.39, 0, 0.3, 0, 0, 0]))
    assert [(e.id, e.kind) for e in manager.take_events()] == [(pos_id, STATUS), (pos_id, DEACTIVATE)]
    assert len(manager) == 0 and manager.step(0.3, np.zeros(6)) is None


def test_a_stopped_motion_gets_no_status(lynx: ArmModel) -> None:
    manager = MotionManager(6)
    motion_id = manager.add(posture(lynx, {0: (0.4, 1.0)}), 0.0, np.zeros(6), owner="a")
    manager.take_events()
    assert manager.remove(motion_id, 0.5)
    assert [(e.id, e.kind, e.time) for e in manager.take_events()] == [(motion_id, DEACTIVATE, 0.5)]


def test_outputs_blend_by_weight(lynx: ArmModel) -> None:
    manager = MotionManager(6)
    manager.add(posture(lynx, {0: (0.6, 1.0), 1: (0.2, 1.0)}), 0.0, np.zeros(6))
    manager.add(posture(lynx, {0: (0.0, 3.0), 2: (0.1, 0.0)}), 0.0, np.zeros(6))
    command = manager.step(0.0, np.zeros(6))
    assert command is not None
    assert command[0] == pytest.approx(0.15) and command[1] == pytest.approx(0.2)
    assert np.isnan(command[2:]).all()
