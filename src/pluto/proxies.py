"""Every module's proxy in one place: ``from pluto.proxies import LocProxy, DriveProxy``.

A proxy finds its module (or starts it) and offers simple methods; see :class:`pluto.runtime.proxy.Proxy`.
"""

from pluto.hardware.arm.proxy import ArmProxy
from pluto.movement.avoid.proxy import AvoidProxy
from pluto.movement.drive.proxy import DriveProxy
from pluto.movement.follow.proxy import FollowProxy
from pluto.movement.motion.proxy import MotionProxy
from pluto.navigation.localization.proxy import LocProxy
from pluto.navigation.pose.proxy import PoseProxy
from pluto.navigation.slam.proxy import SlamProxy
from pluto.runtime.heartbeat import HeartbeatProxy
from pluto.runtime.proxy import Proxy, interface_mask

__all__ = [
    "ArmProxy",
    "AvoidProxy",
    "DriveProxy",
    "FollowProxy",
    "HeartbeatProxy",
    "LocProxy",
    "MotionProxy",
    "PoseProxy",
    "Proxy",
    "SlamProxy",
    "interface_mask",
]
