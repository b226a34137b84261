"""The Pluto bus: typed state interfaces, request/reply and liveliness on one Zenoh session per process.

>>> from pluto.bus import Bus
>>> with Bus() as bus:
...     odom = bus.create_reader("Base/Drive/State")
...     odom.read()
"""

from pluto.bus.config import BusConfig, bus_config
from pluto.bus.session import Bus, Service, StateReader, StateWriter, Subscription, open_bus
from pluto.errors import BusError, BusTimeout, RemoteError

__all__ = [
    "Bus",
    "BusConfig",
    "BusError",
    "BusTimeout",
    "RemoteError",
    "Service",
    "StateReader",
    "StateWriter",
    "Subscription",
    "bus_config",
    "open_bus",
]
