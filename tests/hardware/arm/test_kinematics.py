"""Arm kinematics: the LynxArm6 model file, forward kinematics against the reference vector, point inverse
kinematics on random reachable targets, unreachable targets, and model-file errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.errors import ConfigError
from pluto.hardware.arm.kinematics import ArmModel, available_models, rot_x, rot_z, trans


@pytest.fixture(scope="module")
def lynx() -> ArmModel:
    return ArmModel.load("LynxArm6")


def test_lynxarm6_ships_with_its_links_in_output_order(lynx: ArmModel) -> None:
    assert "LynxArm6" in available_models()
    assert lynx.output_names == ("Shldr:rot", "Shldr:elv", "Elbow", "Wrist:elv", "Wrist:rot", "Gripper")
    assert [link.name for link in lynx.links[6:]] == ["BaseFrame", "GripperFrame"]
    assert lynx.link("GripperFrame").index == 7
    assert np.allclose(lynx.lower[:5], -math.pi / 2) and np.allclose(lynx.upper[:5], math.pi / 2)
    assert (lynx.lower[5], lynx.upper[5]) == (0.0, pytest.approx(0.1))  # gripper 0..100 mm, in m
    assert not lynx.link("GripperFrame").movable


def test_forward_kinematics_matches_the_reference_vector_at_zero(lynx: ArmModel) -> None:
    frames = lynx.forward_kinematics(np.zeros(6))
    expected = np.array(
        [
            [1.0, 0.0, 0.0, 125.0],
            [0.0, 6.123234e-17, -1.0, 5.616536e-15],
            [0.0, 1.0, 6.123234e-17, 153.247],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )
    link3 = frames[3].copy()
    link3[:3, 3] *= 1000.0  # m -> mm
    assert np.allclose(link3, expected, rtol=1e-6, atol=1e-22)
    assert np.allclose(frames[7][:3, 3] * 1000.0, [219.448, 0.0, 153.247], atol=1e-9)
    assert np.allclose(frames[6], np.eye(4))


def test_each_link_is_its_parent_times_the_documented_product(lynx: ArmModel) -> None:
    q = np.random.default_rng(4).uniform(lynx.lower, lynx.upper)
    frames = lynx.forward_kinematics(q)
    for link in lynx.links:
        value = q[link.index] if link.index < lynx.num_outputs else 0.0
        local = rot_z(link.theta) @ trans(0, 0, link.d) @ trans(link.r, 0, 0) @ rot_x(link.alpha)
        local = local @ (
            trans(0, 0, value + link.q_offset) if link.type == "prismatic" else rot_z(value + link.q_offset)
        )
        parent = np.eye(4) if link.parent < 0 else frames[link.parent]
        assert np.allclose(frames[link.index], parent @ local), link.name
        assert np.allclose(lynx.link_transform(q, link.name), frames[link.index])


def test_turning_the_shoulder_swings_the_gripper_about_the_vertical(lynx: ArmModel) -> None:
    q = np.zeros(6)
    q[0] = math.pi / 2
    assert np.allclose(lynx.link_transform(q, 7)[:3, 3] * 1000.0, [0.0, 219.448, 153.247], atol=1e-9)


def _targets(model: ArmModel, link: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    q = np.random.default_rng(seed).uniform(model.lower, model.upper, size=(n, model.num_outputs))
    return q, np.array([model.forward_kinematics(row)[link][:3, 3] for row in q])


def test_point_ik_reaches_random_reachable_targets_within_limits(lynx: ArmModel) -> None:
    _, targets = _targets(lynx, 7, 1000, seed=11)
    successes = 0
    for target in targets:
        result = lynx.point_ik(7, target, np.zeros(6))
        assert np.all(result.q >= lynx.lower) and np.all(result.q <= lynx.upper)
        reached = np.linalg.norm(lynx.link_transform(result.q, 7)[:3, 3] - target)
        assert reached == pytest.approx(result.error, abs=1e-9)
        if result.success:
            assert reached < 1e-3
            successes += 1
    assert successes >= 995


@pytest.mark.parametrize("link", [2, 3, 4, 5])
def test_point_ik_places_other_links(lynx: ArmModel, link: int) -> None:
    _, targets = _targets(lynx, link, 60, seed=link)
    results = [lynx.point_ik(link, t, lynx.home) for t in targets]
    assert sum(r.success for r in results) >= 59
    for r, t in zip(results, targets, strict=True):
        if r.success:
            assert np.linalg.norm(lynx.link_transform(r.q, link)[:3, 3] - t) < 1e-3


def test_point_ik_keeps_the_arm_where_it_is_when_already_there(lynx: ArmModel) -> None:
    q = np.array([0.3, -0.4, 0.5, 0.2, 0.7, 0.05])
    target = lynx.link_transform(q, 7)[:3, 3]
    result = lynx.point_ik("GripperFrame", target, q)
    assert result.success and result.iterations == 0
    assert np.allclose(result.q, q)  # the wrist roll and the gripper, which IK does not use, keep their values


def test_point_ik_prefers_the_solution_nearest_the_current_joints(lynx: ArmModel) -> None:
    q = np.array([0.2, -0.3, 0.6, 0.4, 0.0, 0.0])
    target = lynx.link_transform(q, 7)[:3, 3] + [0.004, -0.003, 0.002]
    result = lynx.point_ik(7, target, q)
    assert result.success
    assert np.abs(result.q - q).max() < 0.2


def test_an_unreachable_target_gives_the_best_reachable_solution(lynx: ArmModel) -> None:
    result = lynx.point_ik(7, [1.0, 0.0, 0.2], np.zeros(6))  # a metre away: the arm reaches about 0.31 m
    assert not result.success
    reached = lynx.link_transform(result.q, 7)[:3, 3]
    assert result.error == pytest.approx(np.linalg.norm(reached - [1.0, 0.0, 0.2]), abs=1e-9)
    assert result.error < 1.0 - 0.29  # it stretched toward the target
    assert np.all(result.q >= lynx.lower) and np.all(result.q <= lynx.upper)


def test_point_ik_refuses_bad_requests(lynx: ArmModel) -> None:
    with pytest.raises(ValueError, match="no joint"):
        lynx.point_ik("BaseFrame", [0.1, 0.1, 0.1])
    with pytest.raises(KeyError, match=r"links 0\.\.7"):
        lynx.point_ik(9, [0.1, 0.1, 0.1])
    with pytest.raises(ValueError, match="finite"):
        lynx.point_ik(7, [math.nan, 0.1, 0.1])
    with pytest.raises(ValueError, match="6 joint values"):
        lynx.point_ik(7, [0.1, 0.1, 0.1], [0.0, 0.0])


MINIMAL = """
name = "two"
[[joint]]
name = "a"
d = 100
min = -1
max = 1
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = ", "model.toml"),
        ("name = 'x'", "needs \\[\\[joint\\]\\]"),
        (MINIMAL + "colour = 'red'\n", "unknown key"),
        (MINIMAL.replace("min = -1", "min = 2"), "min .* above max"),
        (MINIMAL + "[[joint]]\nname = 'b'\nparent = 'zzz'\n", "parent 'zzz'"),
        (MINIMAL + "[[joint]]\nname = 'a'\n", "appears twice"),
        (MINIMAL.replace("d = 100", 'd = "far"'), "d must be a finite number"),
        (MINIMAL + "ssc32 = { channel = 40, pulse_at_min = 600, pulse_at_max = 2400 }\n", "channel must be 0..31"),
        ("angle_unit = 'grads'\n" + MINIMAL, "angle_unit"),
    ],
)
def test_bad_model_files_are_refused_with_the_file_and_reason(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        ArmModel.from_toml(text, where="model.toml")
    assert "model.toml" in str(info.value)


def test_a_model_file_by_path_and_an_unknown_name(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "two.toml"  # type: ignore[operator]
    path.write_text(MINIMAL)
    model = ArmModel.load(path)
    assert model.output_names == ("a",) and model.link("a").d == pytest.approx(0.1)
    with pytest.raises(ConfigError, match="no arm model named 'Nope'"):
        ArmModel.load("Nope")


def test_a_cancelled_table_build_leaves_the_solver_usable(lynx: ArmModel) -> None:
    import threading

    from pluto.hardware.arm.kinematics import PointIK

    solver = PointIK(lynx, 2)  # the elbow: no closed form, so the numerical solver and its table
    cancel = threading.Event()
    cancel.set()
    solver.prepare(cancel)
    assert not solver.table_built
    target = lynx.link_transform(np.array([0.1, 0.2, -0.3, 0, 0, 0]), 2)[:3, 3]
    assert solver.solve(target, np.zeros(6)).success
    assert solver.table_built
