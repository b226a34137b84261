"""Kinematics of a serial arm described by a model file: forward kinematics of every link, point inverse kinematics.

    model = ArmModel.load("LynxArm6")                 # a model shipped with Pluto, or a path to a .toml file
    frames = model.forward_kinematics(q)              # (links, 4, 4): every link's pose in the base frame, m
    result = model.point_ik("GripperFrame", [0.2, 0.05, 0.1], q)
    result.q, result.success, result.error            # joint values within limits, reached?, distance left (m)

A link index is the output offset: the joints (outputs) first, 0 .. num_outputs - 1, then the extra frames (base,
gripper, ...). A link's transform from its parent is ``Rz(θ) · Tz(d) · Tx(r) · Rx(α) · Rz(q + q_offset)`` for a
revolute joint, with ``Tz(q + q_offset)`` as the last factor for a prismatic one; frames and joints whose limits are
equal are immobile. Inside, lengths are in m and angles in rad; model files give lengths in mm (the convention of the
arms' documentation) and angles in degrees or radians, as their header says.
"""

# Strategy: forward kinematics walks the links in index order (a parent always comes first, checked on load) and
# multiplies 4x4 transforms; it is not on a hot path. The pieces live by idea: a link and its transforms in
# pluto.hardware.arm.links, reading a model file in pluto.hardware.arm.model_file, point IK (closed form, else damped
# least squares) in pluto.hardware.arm.point_ik; their public names are importable from here too.

from __future__ import annotations

import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from pluto.errors import ConfigError
from pluto.hardware.arm.links import FloatArray, JointType, Link, ServoChannel, rot_x, rot_z, trans
from pluto.hardware.arm.model_file import MM, links_from_toml
from pluto.hardware.arm.point_ik import CLOSED_FORM_TOLERANCE, IKResult, PointIK

__all__ = [
    "CLOSED_FORM_TOLERANCE",
    "MM",
    "ArmModel",
    "IKResult",
    "JointType",
    "Link",
    "PointIK",
    "ServoChannel",
    "available_models",
    "rot_x",
    "rot_z",
    "trans",
]


def available_models() -> list[str]:
    """Names of the arm models shipped with Pluto."""
    folder = resources.files("pluto.hardware.arm") / "models"
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


class ArmModel:
    """An arm: its links (joints, then frames), limits and servo channels.

    Args:
        name: the model's name.
        links: every link in index order (joints first); each parent must come before its child.
        num_outputs: how many of the links are joints (outputs).

    Raises:
        ConfigError: a parent index is out of order, or names repeat.
    """

    def __init__(self, name: str, links: Sequence[Link], num_outputs: int) -> None:
        self.name = name
        self.links: tuple[Link, ...] = tuple(links)
        self.num_outputs = num_outputs
        seen: set[str] = set()
        for i, link in enumerate(self.links):
            if link.index != i:
                raise ConfigError(f"arm model {name}: link {link.name} has index {link.index}, expected {i}")
            if not -1 <= link.parent < i:
                raise ConfigError(f"arm model {name}: link {link.name} must come after its parent")
            if link.name in seen:
                raise ConfigError(f"arm model {name}: link name {link.name!r} appears twice")
            seen.add(link.name)
        self._by_name = {link.name: link for link in self.links}
        outputs = self.links[:num_outputs]
        self.output_names: tuple[str, ...] = tuple(link.name for link in outputs)
        self.lower: FloatArray = np.array([link.lower for link in outputs])
        self.upper: FloatArray = np.array([link.upper for link in outputs])
        self.home: FloatArray = np.array([link.home for link in outputs])
        self.max_speed: FloatArray = np.array([link.max_speed for link in outputs])
        self._solvers: dict[int, PointIK] = {}
        self._solvers_by_key: dict[int | str, PointIK] = {}  # by index and by name, as asked for
        self._solvers_lock = threading.Lock()

    # -- loading ------------------------------------------------------------------------------------------------

    @classmethod
    def load(cls, source: str | Path) -> ArmModel:
        """Load a model shipped with Pluto by name (``LynxArm6``) or a model file by path.

        Raises:
            ConfigError: no such model, the file cannot be read, or it is not a valid model (file and reason).
        """
        text_path = Path(source)
        if isinstance(source, str) and source in available_models():
            resource = resources.files("pluto.hardware.arm") / "models" / f"{source}.toml"
            return cls.from_toml(resource.read_text(encoding="utf-8"), where=f"{source}.toml")
        if not text_path.suffix:
            raise ConfigError(f"no arm model named {source!r}; shipped models: {', '.join(available_models())}")
        try:
            text = text_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"cannot read arm model {text_path}: {err}") from err
        return cls.from_toml(text, where=str(text_path))

    @classmethod
    def from_toml(cls, text: str, where: str = "<model>") -> ArmModel:
        """Build a model from the text of a model file (format: see ``models/LynxArm6.toml``).

        Raises:
            ConfigError: the file is not valid TOML or describes an invalid arm; the message names ``where``.
        """
        name, links, num_outputs = links_from_toml(text, where)
        return cls(name, links, num_outputs)

    # -- lookup -------------------------------------------------------------------------------------------------

    def link(self, key: int | str) -> Link:
        """The link with this index or name.

        Raises:
            KeyError: no such link.
        """
        if isinstance(key, str):
            try:
                return self._by_name[key]
            except KeyError:
                raise KeyError(f"{self.name} has no link named {key!r}") from None
        if not 0 <= key < len(self.links):
            raise KeyError(f"{self.name} has links 0..{len(self.links) - 1}, not {key}")
        return self.links[key]

    def clamp(self, q: ArrayLike) -> FloatArray:
        """Joint values held within the limits, (num_outputs,)."""
        return np.minimum(np.maximum(self._check_q(q), self.lower), self.upper)

    def _check_q(self, q: ArrayLike) -> FloatArray:
        values = np.asarray(q, dtype=np.float64)
        if values.shape != (self.num_outputs,):
            raise ValueError(f"{self.name} needs {self.num_outputs} joint values, got shape {values.shape}")
        return values

    # -- kinematics ---------------------------------------------------------------------------------------------

    def forward_kinematics(self, q: ArrayLike) -> FloatArray:
        """The pose of every link in the base frame.

        Args:
            q: joint values, (num_outputs,), rad or m (not clamped).

        Returns:
            (len(links), 4, 4) homogeneous transforms; translations in m.

        Raises:
            ValueError: ``q`` has the wrong shape.
        """
        values = self._check_q(q)
        out = np.empty((len(self.links), 4, 4))
        for link in self.links:
            local = link.transform(float(values[link.index]) if link.index < self.num_outputs else 0.0)
            out[link.index] = local if link.parent < 0 else out[link.parent] @ local
        return out

    def link_transform(self, q: ArrayLike, link: int | str) -> FloatArray:
        """The pose of one link in the base frame, (4, 4), m (see :meth:`forward_kinematics`).

        Raises:
            KeyError: no such link.  ValueError: ``q`` has the wrong shape.
        """
        frames = self.forward_kinematics(q)
        out: FloatArray = frames[self.link(link).index]
        return out

    def solver(self, link: int | str) -> PointIK:
        """The point-IK solver of a link (built, with its workspace table, on first use and kept)."""
        found = self._solvers_by_key.get(link)
        if found is not None:
            return found
        index = self.link(link).index
        with self._solvers_lock:
            if index not in self._solvers:
                self._solvers[index] = PointIK(self, index)
            self._solvers_by_key[link] = self._solvers[index]
            return self._solvers[index]

    def point_ik(
        self, link: int | str, target: ArrayLike, q_start: ArrayLike | None = None, *, tolerance: float = 1e-5
    ) -> IKResult:
        """Joint values that put the origin of ``link`` at ``target``, within the joint limits.

        Args:
            link: link index or name.
            target: (x, y, z) in the base frame, m.
            q_start: the current joint values, (num_outputs,); the home posture if None.
            tolerance: distance below which the target counts as reached, m.

        Returns:
            The solution nearest ``q_start`` among those found, or the best reachable one with its error.

        Raises:
            KeyError: no such link.  ValueError: bad shapes or a target that is not finite.
        """
        solver = self._solvers_by_key.get(link)  # self.solver(link) without the call, when it is built
        if solver is None:
            solver = self.solver(link)
        return solver.solve(target, self.home if q_start is None else q_start, tolerance=tolerance)
