"""Closed-form point IK: the chains it recognises, forward kinematics of its solutions over thousands of random
reachable targets, joint limits, the pitch and elbow it keeps, and the numerical solver behind it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.hardware.arm.closed_form import PITCH_MARGIN, YawPlanarIK
from pluto.hardware.arm.kinematics import ArmModel, PointIK

# A yaw, a shoulder off the yaw axis, an elbow and a wrist with offsets in every place the closed form allows:
# turned frames (theta), a shoulder set forward (r), links off the plane (d on the elbow and the tip), joint
# offsets, and limits wide enough for both elbow branches and for reaching over the yaw axis.
OFFSET_ARM = """
name = "offset-arm"
angle_unit = "degrees"
[[joint]]
name = "yaw"
theta = 30
d = 60
min = -170
max = 170
[[joint]]
name = "shoulder"
d = 10
r = 15
alpha = 90
q_offset = 20
min = -170
max = 170
[[joint]]
name = "elbow"
r = 100
d = 12
theta = 10
min = -170
max = 170
[[joint]]
name = "wrist"
r = 80
theta = -15
q_offset = 5
min = -120
max = 120
[[frame]]
name = "tip"
parent = "wrist"
theta = 8
d = -4
r = 50
"""


@pytest.fixture(scope="module")
def lynx() -> ArmModel:
    return ArmModel.load("LynxArm6")


@pytest.fixture(scope="module")
def offset_arm() -> ArmModel:
    return ArmModel.from_toml(OFFSET_ARM)


def _closed_form(model: ArmModel, link: int | str) -> YawPlanarIK:
    closed = model.solver(link).closed_form
    assert closed is not None
    return closed


def _targets(model: ArmModel, link: int | str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    q = np.random.default_rng(seed).uniform(model.lower, model.upper, size=(n, model.num_outputs))
    index = model.link(link).index
    return q, np.array([model.forward_kinematics(row)[index][:3, 3] for row in q])


def test_the_chains_with_a_closed_form(lynx: ArmModel, offset_arm: ArmModel) -> None:
    # The gripper frame and the wrist (yaw + three or two planar joints); not the elbow (two joints) nor the
    # gripper's finger (a prismatic joint).
    assert [lynx.solver(link).closed_form is not None for link in (2, 3, 4, 5, 7)] == [False, True, True, False, True]
    assert offset_arm.solver("tip").closed_form is not None
    tilted = OFFSET_ARM.replace("theta = 10\n", "theta = 10\nalpha = 5\n")  # the elbow's axis not parallel
    assert ArmModel.from_toml(tilted).solver("tip").closed_form is None


@pytest.mark.parametrize(("model_name", "link"), [("lynx", 7), ("lynx", 3), ("offset_arm", "tip")])
def test_closed_form_solutions_reach_random_targets_within_limits(
    model_name: str, link: int | str, request: pytest.FixtureRequest
) -> None:
    model: ArmModel = request.getfixturevalue(model_name)
    solver = model.solver(link)
    closed = _closed_form(model, link)
    rng = np.random.default_rng(5)
    joints = solver.joints
    reached = rng.uniform(model.lower, model.upper, size=(3000, model.num_outputs))[:, joints]
    targets = solver.positions(reached)  # the whole batch's forward kinematics at once
    starts = rng.uniform(model.lower[joints], model.upper[joints], size=reached.shape)
    starts[::2] = model.home[joints]  # half of them from the home posture, as a cold start
    solutions = [closed.solve(*t, s) for t, s in zip(targets.tolist(), starts.tolist(), strict=True)]
    found = np.array([s for s in solutions if s is not None])
    # The rest: slivers of pitch at the edge of the workspace, left to the numerical solver.
    assert len(found) >= 0.98 * len(targets)
    assert np.all(found >= model.lower[joints]) and np.all(found <= model.upper[joints])
    hit = np.array([s is not None for s in solutions])
    assert np.abs(solver.positions(found) - targets[hit]).max() < 1e-9
    # And by the model's own forward kinematics, link by link, for some of them.
    index = model.link(link).index
    for q in found[:50]:
        full = model.home.copy()
        full[joints] = q
        assert np.linalg.norm(model.forward_kinematics(full)[index][:3, 3] - solver.positions(q)[0]) < 1e-12


def test_point_ik_reaches_every_random_target(lynx: ArmModel) -> None:
    # What the closed form leaves (slivers of pitch at the workspace's edge), the numerical solver finishes.
    rng = np.random.default_rng(21)
    solver = lynx.solver(7)
    targets = solver.positions(rng.uniform(lynx.lower, lynx.upper, size=(1000, 6))[:, solver.joints])
    results = [lynx.point_ik(7, target, lynx.home) for target in targets]
    q = np.array([r.q for r in results])
    assert np.all(q >= lynx.lower) and np.all(q <= lynx.upper)
    distance = np.linalg.norm(solver.positions(q[:, solver.joints]) - targets, axis=1)
    assert np.all(distance < 1e-3)  # the benchmark's test of success
    assert distance == pytest.approx([r.error for r in results], abs=1e-9)
    assert sum(r.success and r.iterations == 0 for r in results) >= 0.98 * len(results)  # most in closed form


def test_the_starting_pitch_is_kept_when_it_reaches(lynx: ArmModel) -> None:
    closed = _closed_form(lynx, 7)
    start = np.array([0.3, -0.2, 0.4, -0.5, 0.7, 0.02])
    for offset in ([0.01, 0.0, 0.0], [0.0, -0.02, 0.01], [-0.015, 0.01, -0.01]):
        target = lynx.link_transform(start, 7)[:3, 3] + offset
        result = lynx.point_ik(7, target, start)
        assert result.success and result.iterations == 0  # the closed form
        assert closed.pitch(result.q[:4].tolist()) == pytest.approx(closed.pitch(start[:4].tolist()), abs=1e-12)
        assert result.q[4:] == pytest.approx(start[4:])  # the wrist roll and the gripper keep their values
        assert np.abs(result.q - start).max() < 0.3  # a small move is a small motion


def _pitch_runs(closed: YawPlanarIK, target: np.ndarray, start: list[float]) -> list[tuple[float, float]]:
    """The runs of pitch (rad, sampled every 0.25°, from -π) at which some branch reaches ``target``.

    It samples the closed form's own branches (private: how it solves, which no caller of ``solve`` needs) to know
    every pitch that reaches, so that the test can check the one ``solve`` chooses."""
    branches = closed._branches(*target.tolist(), start)
    runs: list[list[float]] = []
    for step in range(-720, 720):
        pitch = math.radians(step / 4)
        if any(closed._at_pitch(q0, px, py, pitch, start) for q0, px, py in branches):
            if runs and pitch - runs[-1][1] < math.radians(0.3):
                runs[-1][1] = pitch
            else:
                runs.append([pitch, pitch])
    return [(first, last) for first, last in runs]


def test_the_pitch_nearest_the_starting_one_is_taken_when_that_cannot_reach(lynx: ArmModel) -> None:
    closed = _closed_form(lynx, 7)
    _, targets = _targets(lynx, 7, 150, seed=8)
    home = [0.0] * 4  # the home posture's pitch is 0: the gripper level

    def distance(pitch: float) -> float:
        return abs(math.remainder(pitch - closed.pitch(home), math.tau))

    checked = 0
    for target in targets:
        runs = _pitch_runs(closed, target, home)
        solution = closed.solve(*target.tolist(), home)
        if solution is None or any(first <= 0.0 <= last for first, last in runs):
            continue  # out of the closed form's reach, or the level gripper reaches
        checked += 1
        taken = distance(closed.pitch(solution))
        assert taken >= min(distance(p) for run in runs for p in run) - math.radians(0.25)
        # At most a margin (and the table's cell and sampling) beyond the nearest run wide enough to hold one.
        wide = [run for run in runs if run[1] - run[0] >= 2.0 * PITCH_MARGIN]
        if wide:
            assert taken <= min(distance(p) for run in wide for p in run) + PITCH_MARGIN + math.radians(6.0)
    assert checked > 50


def test_the_elbow_branch_nearest_the_start_is_taken(offset_arm: ArmModel) -> None:
    closed = _closed_form(offset_arm, "tip")
    q = np.array([0.4, 0.5, 0.9, -0.3])
    target = offset_arm.link_transform(q, "tip")[:3, 3]
    # The other elbow at the same pitch and wrist point: the elbow angle δ mirrored, the shoulder turned by twice
    # the angle between the upper arm and the shoulder-wrist line, the wrist making up the pitch.
    a1, a2, k2 = closed._a1, closed._a2, closed._k2  # its link constants (private: derived, not part of the API)
    delta = q[2] - k2
    other = q.copy()
    other[2] = k2 - delta
    other[1] = q[1] + 2.0 * math.atan2(a2 * math.sin(delta), a1 + a2 * math.cos(delta))
    other[3] = q[1] + q[2] + q[3] - other[1] - other[2]
    assert np.all(other >= offset_arm.lower) and np.all(other <= offset_arm.upper)
    assert np.linalg.norm(offset_arm.link_transform(other, "tip")[:3, 3] - target) < 1e-9
    assert np.allclose(closed.solve(*target.tolist(), q.tolist()), q)
    assert np.allclose(closed.solve(*target.tolist(), other.tolist()), other)
    nearer_other = (0.3 * q + 0.7 * other).tolist()  # the same pitch, nearer the other elbow
    assert np.allclose(closed.solve(*target.tolist(), nearer_other), other)


def test_the_yaw_reaches_over_its_axis_when_that_is_nearer(offset_arm: ArmModel) -> None:
    closed = _closed_form(offset_arm, "tip")
    over = np.array([-2.8, 2.4, -0.6, 0.3])  # turned away from the target, the shoulder leaning back over the axis
    target = offset_arm.link_transform(over, "tip")[:3, 3]
    assert np.allclose(closed.solve(*target.tolist(), over.tolist()), over)
    front = closed.solve(*target.tolist(), [over[0] + math.pi, 0.3, 0.6, -0.2])
    assert front is not None and abs(front[0] - (over[0] + math.pi)) < 0.3  # turned toward it instead
    assert np.linalg.norm(offset_arm.link_transform(np.array(front), "tip")[:3, 3] - target) < 1e-9


@pytest.fixture(scope="module")
def solvers(lynx: ArmModel) -> tuple[PointIK, PointIK]:
    """The gripper frame's solver, and the same without its closed form (the solver as it was); small tables."""
    with_closed_form, numerical = PointIK(lynx, 7, table_size=20_000), PointIK(lynx, 7, table_size=20_000)
    assert with_closed_form.closed_form is not None
    numerical.closed_form = None
    return with_closed_form, numerical


@pytest.mark.parametrize(
    "target",
    [[1.0, 0.0, 0.2], [0.0, 0.0, 0.5], [0.05, 0.02, -0.3], [0.0, 0.0, 0.03]],
    ids=["a metre away", "above its reach", "under the base", "in the base"],
)
def test_targets_the_closed_form_cannot_take_fail_as_the_numerical_solver_does(
    lynx: ArmModel, solvers: tuple[PointIK, PointIK], target: list[float]
) -> None:
    with_closed_form, numerical = solvers
    assert with_closed_form.closed_form is not None
    assert with_closed_form.closed_form.solve(*target, [0.0] * 4) is None
    ours, theirs = with_closed_form.solve(target, lynx.home), numerical.solve(target, lynx.home)
    assert not ours.success and ours.error == pytest.approx(theirs.error) and np.allclose(ours.q, theirs.q)


def test_bad_input_still_gets_the_numerical_solvers_errors(lynx: ArmModel) -> None:
    with pytest.raises(ValueError, match="finite"):
        lynx.point_ik(7, [math.inf, 0.1, 0.1])
    with pytest.raises(ValueError, match="finite"):
        lynx.point_ik(7, np.array([0.1, math.nan, 0.1]))
    with pytest.raises(ValueError, match="could not convert"):
        lynx.point_ik(7, ["a", "b", "c"])
    with pytest.raises(ValueError, match="6 joint values"):
        lynx.point_ik(7, [0.1, 0.1, 0.1], np.zeros(5))
    # Lists, tuples and integer arrays are targets too; a start outside the limits is held to them.
    target = lynx.link_transform(np.zeros(6), 7)[:3, 3]
    for given in (target.tolist(), tuple(target.tolist()), (target * 1000).astype(int) / 1000):
        assert lynx.point_ik(7, given).success
    result = lynx.point_ik(7, target, [0.0, 0.0, 0.0, 0.0, 9.0, -9.0])
    assert result.success and result.q[4] == lynx.upper[4] and result.q[5] == lynx.lower[5]


def test_a_closed_form_solve_holds_the_start_to_the_limits_and_leaves_the_callers_array_as_it_was(
    lynx: ArmModel,
) -> None:
    start = np.array([0.2, -0.1, 0.3, 1.2, 9.0, -1.0])  # the wrist roll and the gripper beyond their limits
    given = start.copy()
    target = lynx.link_transform(lynx.clamp(start), 7)[:3, 3] + [0.01, -0.005, 0.0]
    result = lynx.point_ik(7, target, start)
    assert result.success and result.iterations == 0  # the closed form
    assert np.array_equal(start, given) and result.q is not start
    assert result.q[4] == lynx.upper[4] and result.q[5] == lynx.lower[5]
    assert np.all(result.q >= lynx.lower) and np.all(result.q <= lynx.upper)
    assert np.linalg.norm(lynx.link_transform(result.q, 7)[:3, 3] - target) < 1e-9


# A slide defined first, on the base: the yaw chain's joints are outputs 1-4, picked out of the outputs and put back
# by the compiled call. A small arm: a small pitch table.
SLID_ARM = """
name = "slid-arm"
angle_unit = "degrees"
[[joint]]
name = "slide"
type = "prismatic"
parent = ""
min = 0
max = 50
[[joint]]
name = "yaw"
parent = ""
d = 15
min = -170
max = 170
[[joint]]
name = "shoulder"
alpha = 90
q_offset = 20
min = -170
max = 170
[[joint]]
name = "elbow"
r = 25
min = -170
max = 170
[[joint]]
name = "wrist"
r = 20
min = -120
max = 120
[[frame]]
name = "tip"
parent = "wrist"
r = 12
"""


def test_the_closed_form_of_joints_that_are_not_the_first_outputs() -> None:
    arm = ArmModel.from_toml(SLID_ARM)
    assert arm.solver("tip").joints.tolist() == [1, 2, 3, 4] and arm.solver("tip").closed_form is not None
    rng = np.random.default_rng(4)
    for q in rng.uniform(arm.lower, arm.upper, size=(20, 5)):
        target = arm.link_transform(q, "tip")[:3, 3]
        start = rng.uniform(arm.lower, arm.upper)
        start[0] = 0.07  # the slide beyond its 50 mm
        result = arm.point_ik("tip", target, start)
        assert result.success and result.iterations == 0  # the closed form
        assert result.q[0] == pytest.approx(0.05) and np.all(result.q >= arm.lower) and np.all(result.q <= arm.upper)
        assert np.linalg.norm(arm.link_transform(result.q, "tip")[:3, 3] - target) < 1e-9


def test_warm_up_loads_every_compiled_kernel_called_from_python() -> None:
    from pluto.hardware.arm import closed_form_kernels as kernels

    kernels.warm_up()
    called = (kernels.start_pitch, kernels.branches, kernels.at_pitch, kernels.solve, kernels.solve_at_pitch)
    assert all(kernel.signatures for kernel in (*called, kernels.place))
