"""Every module's proxy in one place: ``from pluto.proxies import HeartbeatProxy``.

A proxy finds its module (or starts it) and offers simple methods; see :class:`pluto.runtime.proxy.Proxy`.
"""

from pluto.navigation.localization.proxy import LocProxy
from pluto.runtime.heartbeat import HeartbeatProxy
from pluto.runtime.proxy import Proxy, interface_mask

__all__ = ["HeartbeatProxy", "LocProxy", "Proxy", "interface_mask"]
