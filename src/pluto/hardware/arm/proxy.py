"""ArmProxy: the client API of the arm module.

Interfaces: 0 ``Arm/State`` (what the servos are driven to now, open loop). Commands go to ``Arm/Command``: targets
in rad (m for the gripper), NaN for a joint to leave alone, optional top speeds, optional move time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import ClassVar

from pluto import msgs
from pluto.bus import Bus, BusTimeout
from pluto.hardware.arm.kinematics import ArmModel
from pluto.runtime.proxy import Proxy

__all__ = ["ArmProxy"]

COMMAND = "Arm/Command"


class ArmProxy(Proxy):
    """Client of the arm module.

    Args:
        bus: the process's bus.
        mask: 1 opens the state (the only interface); None opens it.
        model: the arm's model, for joints named rather than numbered (default LynxArm6, the module's default).
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
        self.model = model or ArmModel.load("LynxArm6")

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
