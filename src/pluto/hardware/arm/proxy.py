"""ArmProxy: the client API of the arm module.

Interfaces: 0 ``Arm/State`` (what the servos are driven to now, open loop). Commands go to ``Arm/Command``: targets
in rad (m for the gripper), NaN for a joint to leave alone, optional top speeds, optional move time.

Kinematics with the arm's own model (its joint table, limits and frames, from the module's ``arm/model`` service):
:attr:`ArmProxy.model`, :meth:`ArmProxy.forward_kinematics`, :meth:`ArmProxy.point_ik`. They are computed here, in
the client, so an IK solve costs no round trip and a slow one holds up no one else.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pluto import msgs
from pluto.bus import Bus, BusTimeout
from pluto.hardware.arm.kinematics import ArmModel, IKResult
from pluto.hardware.arm.module import ArmModelFile
from pluto.runtime.proxy import Proxy

__all__ = ["ArmProxy"]

COMMAND = "Arm/Command"


class ArmProxy(Proxy):
    """Client of the arm module.

    Args:
        bus: the process's bus.
        mask: 1 opens the state (the only interface); None opens it; 0 for the model and kinematics alone.
        model: the arm's model; by default the arm module's own, asked for once, when first needed.
        start, timeout: as for :class:`~pluto.runtime.proxy.Proxy`.
    """

    module: ClassVar[str] = "arm"
    interfaces: ClassVar[tuple[str, ...]] = ("Arm/State",)

    def __init__(
        self,
        bus: Bus,
        mask: int | None = None,
        *,
        model: ArmModel | None = None,
        start: bool = True,
        timeout: float = 15.0,
    ) -> None:
        super().__init__(bus, mask, start=start, timeout=timeout)
        self._model = model
        self._model_lock = threading.Lock()

    @property
    def model(self) -> ArmModel:
        """The arm's model (the arm module's own, from its ``model`` service, unless one was given).

        Raises:
            BusTimeout: the arm module does not answer.
            ConfigError: its model file is not valid here.
        """
        with self._model_lock:
            if self._model is None:
                self._model = self.call("model", reply_type=ArmModelFile, timeout=5.0).model()
            return self._model

    def joints(self) -> list[float] | None:
        """The joint values driven now (rad; m for the gripper), or None before the first state."""
        state = self.get(0)
        return list(state.position) if isinstance(state, msgs.ActuatorState) else None

    def move(
        self,
        targets: Sequence[float] | Mapping[str, float],
        speeds: Sequence[float] = (),
        duration: float | None = None,
    ) -> None:
        """Move joints to ``targets``: a list by output number (NaN leaves a joint alone) or {joint name: value}.

        Args:
            speeds: top speed per output, rad/s (m/s), 0 or missing for the arm's own.
            duration: the time the move should take, s (all named joints arrive together).

        Raises:
            ValueError: a joint name the model does not have, a speed or duration not finite and >= 0.
        """
        position = self._positions(targets)
        if any(not math.isfinite(s) or s < 0 for s in speeds):
            raise ValueError(f"speeds must be finite and >= 0, got {list(speeds)}")
        if duration is not None and (not math.isfinite(duration) or duration < 0):
            raise ValueError(f"duration must be finite and >= 0, got {duration}")
        force = [] if duration is None else [duration]
        self.write(COMMAND, msgs.ActuatorState(position=position, velocity=list(speeds), force=force))

    def wait_until(self, targets: Sequence[float], tolerance: float = 1e-3, timeout: float = 10.0) -> list[float]:
        """Wait until every joint with a finite target is within ``tolerance`` of it; return the joint values.

        Raises:
            BusTimeout: not there within ``timeout`` s.
        """

        def there(state: object) -> bool:
            if not isinstance(state, msgs.ActuatorState):
                return False
            return all(
                i < len(state.position) and abs(state.position[i] - t) <= tolerance
                for i, t in enumerate(targets)
                if math.isfinite(t)
            )

        current = self.get(0)
        reader = self.reader(0)
        deadline = time.monotonic() + timeout
        while not there(current):
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise BusTimeout("late")
                current = reader.wait_for_update(left)
            except BusTimeout:
                raise BusTimeout(f"the arm did not reach {list(targets)} within {timeout} s") from None
        assert isinstance(current, msgs.ActuatorState)
        return list(current.position)

    def forward_kinematics(self, link: int | str, joints: ArrayLike | None = None) -> NDArray[np.float64]:
        """The pose of a link (index or name) in the arm's base frame.

        Args:
            link: a joint (0 .. outputs - 1) or a frame (the indices after them), or its name.
            joints: joint values, one per output, rad (m for a prismatic joint); None for those the arm is driven
                to now (its home posture until it has published them; the state must be opened).

        Returns:
            (4, 4) homogeneous transform; translation in m.

        Raises:
            KeyError: no such link.
            ValueError: not one joint value per output.
        """
        return self.model.link_transform(self._joint_values(joints), link)

    def point_ik(
        self,
        link: int | str,
        target: ArrayLike,
        start: ArrayLike | None = None,
        *,
        tolerance: float = 1e-5,
    ) -> IKResult:
        """Joint values that put a link's origin at ``target``, within the joint limits (nothing is moved).

        Args:
            link: index or name of the link to place.
            target: (x, y, z) in the base frame, m.
            start: the joint values to start from (the solution nearest them wins); None for those the arm is
                driven to now.
            tolerance: distance below which the target counts as reached, m.

        Returns:
            The solution (or the nearest the arm gets, with ``success`` False and the distance left): joint
            values for every output; those :meth:`ik_joints` does not name keep their ``start`` values.

        Raises:
            KeyError: no such link.
            ValueError: no joint moves the link, a target that is not three finite numbers, or not one start
                value per output.
        """
        return self.model.solver(link).solve(target, self._joint_values(start), tolerance=tolerance)

    def ik_joints(self, link: int | str) -> tuple[int, ...]:
        """The outputs :meth:`point_ik` moves to place ``link`` (the joints that can move its origin).

        Raises:
            KeyError: no such link.  ValueError: no joint moves it.
        """
        return tuple(int(j) for j in self.model.solver(link).joints)

    def prepare_ik(self, link: int | str, cancel: threading.Event | None = None) -> None:
        """Build the workspace table of ``link``'s point IK now (else the first :meth:`point_ik` does: a fraction
        of a second). A build under way stops soon when ``cancel`` is set.

        Raises:
            KeyError: no such link.  ValueError: no joint moves it.
        """
        self.model.solver(link).prepare(cancel)

    def _joint_values(self, joints: ArrayLike | None) -> NDArray[np.float64]:
        if joints is not None:
            return np.asarray(joints, dtype=np.float64)
        model = self.model
        driven = self.joints()
        if driven is None or len(driven) != model.num_outputs:
            return model.home.copy()
        return np.asarray(driven, dtype=np.float64)

    def _positions(self, targets: Sequence[float] | Mapping[str, float]) -> list[float]:
        if not isinstance(targets, Mapping):
            return [float(t) for t in targets]
        names = list(self.model.output_names)
        position = [math.nan] * len(names)
        for name, value in targets.items():
            if name not in names:
                raise ValueError(f"the {self.model.name} arm has no joint {name!r} (it has {', '.join(names)})")
            position[names.index(name)] = float(value)
        return position
