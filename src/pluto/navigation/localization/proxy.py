"""LocProxy: the client API of the localization service (the original's ``loc_proxy``: docs/design.md, "Interfaces").

Interfaces are numbered 0..4 as in :data:`pluto.names.LOCALIZATION_INTERFACES`; choose them with a mask
(``LocProxy(bus, 9)`` opens 0 and 3). The setter protocol of §7.1: stop the pose module, post a robot pose with
``setter = -1``, wait until the service shows setter -1, then restart the pose module.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import ClassVar

from pluto import msgs, names
from pluto.errors import BusTimeout
from pluto.runtime.proxy import Proxy

POST_POSE = names.LOCALIZATION_INTERFACES[2]


class LocProxy(Proxy):
    """Client of the localization service.

    Args:
        bus: the process's bus.
        mask: which interfaces to open (sum of 2^n over n in 0..4); None opens all.
        start, timeout: as for :class:`~pluto.runtime.proxy.Proxy`.
    """

    module: ClassVar[str] = "localization"
    interfaces: ClassVar[tuple[str, ...]] = names.LOCALIZATION_INTERFACES

    def get_pose(self, n: int) -> msgs.PoseEstimate | None:
        """The newest value of pose interface ``n`` (0..4); None before the first one.

        Raises:
            ValueError: interface ``n`` was not opened.
        """
        value = self.get(n)
        return value if isinstance(value, msgs.PoseEstimate) else None

    def wait_pose(self, n: int, timeout: float | None = None) -> msgs.PoseEstimate:
        """Wait for the next value of pose interface ``n`` and return it (``timeout`` in s)."""
        value: msgs.PoseEstimate = self.wait(n, timeout)
        return value

    def post_pose(
        self, pose: Sequence[float], setter: int, covariance: Sequence[float] | None = None, stamp: float = 0.0
    ) -> None:
        """Post an improved pose to interface 2.

        Args:
            pose: a robot pose (x, y, z, θ, φ, ψ) when ``setter < 0``, else a laser pose (6-D or 8-D); m and rad.
                Empty: only announce the setter (0 when a module stops setting the pose).
            setter: -1 a robot pose by hand, 1 the pose module, 2 and 3 SLAM, 0 nobody.
            covariance: 9 row-major values of the (x, y, θ) covariance, m², m·rad, rad²; zeros if None.
            stamp: time the pose holds for, s; 0 means the service's newest odometry (now).

        Raises:
            ValueError: a pose of the wrong size or not finite, or a covariance not of 9 values; a covariance that
                cannot be one (:class:`~pluto.limits.LimitError`: a negative variance, asymmetric, not positive
                semi-definite).
        """
        values = [float(v) for v in pose]
        if values and (len(values) not in (6, 8) or not all(math.isfinite(v) for v in values)):
            raise ValueError(f"a posted pose is 6-D or 8-D and finite, got {values}")
        cov = [0.0] * 9 if covariance is None else [float(v) for v in covariance]
        if len(cov) != 9:
            raise ValueError(f"covariance must have 9 values, got {len(cov)}")
        self.write(POST_POSE, msgs.PoseEstimate(stamp=stamp, pose=values, covariance=cov, cmd_flags=int(setter)))

    def setter(self) -> int | None:
        """The current setter, from cmd_flags of the first open interface among 3, 4 and 2 (None if unknown)."""
        for n in (3, 4, 2):
            if self.selected(n):
                value = self.get(n)
                if isinstance(value, msgs.PoseEstimate):
                    return value.cmd_flags
        return None

    def wait_for_setter(self, value: int, timeout: float = 5.0) -> None:
        """Wait until the service shows ``value`` as its setter (wall-clock ``timeout`` in s).

        Raises:
            ValueError: none of interfaces 2, 3, 4 is open.
            BusTimeout: the setter did not change to ``value`` in time.
        """
        if not any(self.selected(n) for n in (2, 3, 4)):
            raise ValueError("LocProxy: open interface 2, 3 or 4 (mask 4, 8 or 16) to read the setter")
        deadline = time.monotonic() + timeout
        watch = next(n for n in (3, 4, 2) if self.selected(n))
        while self.setter() != value:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BusTimeout(
                    f"localization setter did not become {value} within {timeout} s (it is {self.setter()})"
                )
            try:
                self.wait(watch, min(left, 0.1))
            except BusTimeout:
                continue
