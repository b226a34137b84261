"""Point inverse kinematics of the LynxArm6 gripper frame: Pluto against ikpy and roboticstoolbox-python's ``ik_LM``.

Run by hand: ``python bench/ik.py [--targets 1000] [--seed 7]``. Prints a table; asserts nothing.

The targets are the gripper frame's origin at random joint values within the limits (so every one is reachable).
Every solver starts cold from the home posture (all joints 0), gets the same targets, and is judged by Pluto's
forward kinematics of the joint values it returns: success is a distance below 1 mm with every joint within its
limits. Each solver is set up (chain built, Pluto's pitch and workspace tables filled) and called once before timing.
Pluto's row is its closed form, with the numerical solver for the few targets the closed form leaves. The peers
are optional (``pip install -e '.[bench]'``); a missing one is reported and its column skipped.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pluto.hardware.arm.kinematics import ArmModel, Link

LINK = "GripperFrame"
SUCCESS = 1e-3  # m


@dataclass
class Outcome:
    name: str
    times: list[float]
    errors: list[float]
    note: str = ""

    def row(self) -> str:
        if not self.times:
            return f"{self.name:<28}{'-':>12}{'-':>12}{'-':>12}   {self.note}"
        ms = sorted(t * 1e3 for t in self.times)
        p95 = ms[min(len(ms) - 1, math.ceil(0.95 * len(ms)) - 1)]
        ok = 100.0 * sum(e < SUCCESS for e in self.errors) / len(self.errors)
        return f"{self.name:<28}{statistics.median(ms):>12.4f}{p95:>12.4f}{ok:>11.1f}%   {self.note}"


def path_links(model: ArmModel, link: str) -> tuple[list[Link], Link]:
    """The moving joints from the base to ``link`` (its parent chain) and the link itself."""
    end = model.link(link)
    chain: list[Link] = []
    node = end
    while node.parent >= 0:
        node = model.links[node.parent]
        chain.append(node)
    chain.reverse()
    return chain, end


def measure(name: str, solve: Callable[[np.ndarray], np.ndarray], model: ArmModel, targets: np.ndarray) -> Outcome:
    """Time ``solve`` (target m -> full joint vector) on every target and check its answers."""
    solve(targets[0])  # set-up costs are not timed
    times, errors = [], []
    index = model.link(LINK).index
    for target in targets:
        start = time.perf_counter()
        q = solve(target)
        times.append(time.perf_counter() - start)
        inside = bool(np.all(q >= model.lower - 1e-9) and np.all(q <= model.upper + 1e-9))
        reached = float(np.linalg.norm(model.forward_kinematics(q)[index][:3, 3] - target))
        errors.append(reached if inside else math.inf)
    return Outcome(name, times, errors)


def pluto_solver(model: ArmModel) -> Callable[[np.ndarray], np.ndarray]:
    home = np.zeros(model.num_outputs)
    model.solver(LINK).prepare()
    return lambda target: model.point_ik(LINK, target, home).q


def _fixed_parts(model: ArmModel) -> tuple[list[Link], Link, list[float]]:
    """The chain to the gripper frame, with each joint's q_offset folded into the next link's θ (so a peer
    without joint offsets computes the same kinematics)."""
    joints, end = path_links(model, LINK)
    thetas = [j.theta for j in [*joints, end]]
    for i, joint in enumerate(joints):
        thetas[i + 1] += joint.q_offset
    return joints, end, thetas


def rtb_solver(model: ArmModel) -> Callable[[np.ndarray], np.ndarray]:
    from roboticstoolbox import ET, ETS

    joints, end, thetas = _fixed_parts(model)
    ets = ETS()
    for joint, theta in zip([*joints, end], thetas, strict=True):
        ets *= ET.Rz(theta) * ET.tz(joint.d) * ET.tx(joint.r) * ET.Rx(joint.alpha)
        if joint is not end:
            ets *= ET.Rz(qlim=[joint.lower, joint.upper])
    full = np.zeros(model.num_outputs)
    index = [j.index for j in joints]
    mask = np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    q0 = np.zeros(len(joints))
    check = np.random.default_rng(3).uniform(model.lower, model.upper)
    assert np.allclose(ets.fkine(check[index]).A[:3, 3], model.link_transform(check, LINK)[:3, 3])

    def solve(target: np.ndarray) -> np.ndarray:
        pose = np.eye(4)
        pose[:3, 3] = target
        q = ets.ik_LM(pose, q0=q0, mask=mask, joint_limits=True, tol=1e-10)[0]
        out = full.copy()
        out[index] = q
        return out

    return solve


def ikpy_solver(model: ArmModel) -> Callable[[np.ndarray], np.ndarray]:
    import warnings

    from ikpy.chain import Chain
    from ikpy.link import OriginLink, URDFLink

    warnings.filterwarnings("ignore", module="ikpy")
    joints, end, thetas = _fixed_parts(model)
    links: list[object] = [OriginLink()]
    for joint, theta in zip([*joints, end], thetas, strict=True):
        c = math.cos(theta)
        s = math.sin(theta)
        links.append(
            URDFLink(
                name=joint.name,
                origin_translation=[c * joint.r, s * joint.r, joint.d],
                origin_orientation=[joint.alpha, 0.0, theta],
                rotation=None if joint is end else [0.0, 0.0, 1.0],
                bounds=None if joint is end else (joint.lower, joint.upper),
                joint_type="fixed" if joint is end else "revolute",
            )
        )
    chain = Chain(links, active_links_mask=[False] + [True] * len(joints) + [False])
    index = [j.index for j in joints]
    check = np.random.default_rng(3).uniform(model.lower, model.upper)
    frame = chain.forward_kinematics([0.0, *check[index], 0.0])
    assert np.allclose(frame[:3, 3], model.link_transform(check, LINK)[:3, 3])
    start = np.zeros(len(links))

    def solve(target: np.ndarray) -> np.ndarray:
        q = chain.inverse_kinematics(target_position=target, initial_position=start)
        out = np.zeros(model.num_outputs)
        out[index] = q[1 : 1 + len(index)]
        return out

    return solve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    model = ArmModel.load("LynxArm6")
    rng = np.random.default_rng(args.seed)
    index = model.link(LINK).index
    targets = np.array(
        [model.forward_kinematics(q)[index][:3, 3] for q in rng.uniform(model.lower, model.upper, (args.targets, 6))]
    )
    outcomes = [measure("Pluto (closed form)", pluto_solver(model), model, targets)]
    for name, make, package in (
        ("roboticstoolbox ik_LM (C++)", rtb_solver, "roboticstoolbox-python"),
        ("ikpy", ikpy_solver, "ikpy"),
    ):
        try:
            solve = make(model)
        except ImportError as err:
            outcomes.append(Outcome(name, [], [], f"skipped: {package} is not installed ({err.name})"))
            continue
        outcomes.append(measure(name, solve, model, targets))
    print(f"Point IK, {model.name} {LINK}, {len(targets)} random reachable targets, cold start (home posture)")
    print(f"{'solver':<28}{'median ms':>12}{'p95 ms':>12}{'success':>12}")
    for outcome in outcomes:
        print(outcome.row())
    pluto = outcomes[0]
    by_name = {o.name: o for o in outcomes if o.times}
    for peer in ("roboticstoolbox ik_LM (C++)", "ikpy"):
        if peer in by_name:
            ratio = statistics.median(by_name[peer].times) / statistics.median(pluto.times)
            print(f"median time of {peer} / Pluto: {ratio:.2f}")


if __name__ == "__main__":
    main()
