"""A module's status in words, for the pages of ``pluto key``.

Strategy: the proxies already say their modules' codes in words (``describe_status`` of the drive, avoid and motion
proxies, :class:`~pluto.navigation.pose.proxy.PoseStatus`, :class:`~pluto.navigation.slam.proxy.SlamStatus`); this
module reuses them and adds the wrist, the five localization poses and the arm joints, so each page shows a few lines
of text made here from plain messages. Nothing here reads the bus.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pluto import msgs, names
from pluto.movement.avoid.proxy import describe_status as describe_avoid
from pluto.movement.drive.proxy import describe_status as describe_drive
from pluto.movement.motion.proxy import describe_status as describe_motion
from pluto.navigation.pose.proxy import PoseStatus
from pluto.navigation.slam.proxy import SlamStatus

__all__ = [
    "NO_STATUS",
    "describe_arm",
    "describe_avoid",
    "describe_drive",
    "describe_loc",
    "describe_motion",
    "describe_pose",
    "describe_setter",
    "describe_slam",
    "describe_wrist",
]

NO_STATUS = "no status yet"

_SETTERS = {-1: "set by hand", 0: "nobody", 1: "pose module", 2: "slam", 3: "slam"}


def describe_pose(status: msgs.FVectorState | None) -> str:
    """``pose/status`` in words."""
    return NO_STATUS if status is None else PoseStatus.of(status).describe()


def describe_slam(status: msgs.FVectorState | None) -> str:
    """``slam/status`` in words."""
    return NO_STATUS if status is None else SlamStatus.of(status).describe()


def describe_wrist(state: msgs.ActuatorState | None, target: Sequence[float] | None = None) -> str:
    """``Wrist/State`` in words: pan and tilt in degrees (tilt positive down), their rates, and the target sent."""
    if state is None or len(state.position) < 2:
        line = NO_STATUS
    else:
        pan, tilt = (math.degrees(a) for a in state.position[:2])
        rates = [*state.velocity, 0.0, 0.0][:2]
        moving = "moving" if any(abs(r) > 1e-6 for r in rates) else "still"
        line = f"pan {pan:+.1f}°, tilt {tilt:+.1f}° (down +), {moving}"
    if target is not None and len(target) >= 2:
        line += f"; target pan {math.degrees(target[0]):+.1f}°, tilt {math.degrees(target[1]):+.1f}°"
    return line


def describe_setter(setter: int) -> str:
    """Who sets the pose, for a localization setter code (cmd_flags of interfaces 2..4)."""
    return f"setter {setter} ({_SETTERS.get(setter, 'unknown')})"


def describe_loc(poses: Sequence[msgs.PoseEstimate | None]) -> list[str]:
    """One line per localization interface (0..4): its name, x, y, θ and, where there is one, the setter and the
    standard deviations of x, y and θ."""
    lines = []
    for n, name in enumerate(names.LOCALIZATION_INTERFACES):
        estimate = poses[n] if n < len(poses) else None
        short = name.removeprefix("Localization/")
        if estimate is None or len(estimate.pose) < 4:
            lines.append(f"({n}) {short}: {NO_STATUS}")
            continue
        x, y, _, theta = estimate.pose[:4]
        line = f"({n}) {short}: x {x:+.3f} m, y {y:+.3f} m, θ {math.degrees(theta):+.1f}°"
        cov = estimate.covariance
        if len(cov) == 9 and all(math.isfinite(c) and c >= 0 for c in (cov[0], cov[4], cov[8])) and any(cov):
            line += f", σ {math.sqrt(cov[0]):.3f} m {math.sqrt(cov[4]):.3f} m {math.degrees(math.sqrt(cov[8])):.1f}°"
        if n >= 2:
            line += f"; {describe_setter(estimate.cmd_flags)}"
        lines.append(line)
    return lines


def describe_arm(
    state: msgs.ActuatorState | None, joint_names: Sequence[str] = (), selected: int | None = None
) -> list[str]:
    """``Arm/State`` in words: one line per joint, in degrees (rad joints) with its name, the selected one
    marked."""
    if state is None or not state.position:
        return [NO_STATUS]
    lines = []
    for i, value in enumerate(state.position):
        name = joint_names[i] if i < len(joint_names) else f"joint {i}"
        mark = "▶" if i == selected else " "
        lines.append(f"{mark} {i} {name}: {math.degrees(value):+.1f}° ({value:+.4f})")
    return lines
