"""The simulated base in the known room, for the base's tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from pluto.bus import Bus
from pluto.hardware.base.module import SimBase
from pluto.sim.module import SimModule, SimParams
from tests.scenarios.stack import ROOM


@contextlib.contextmanager
def sim_base_in_room(bus: Bus, folder: Path) -> Iterator[SimBase]:
    """A started simulated base (and its ``sim`` module, 5x real time) in the room of ``tests.scenarios.stack``."""
    room = folder / "room.xml"
    room.write_text(ROOM)
    sim = SimModule(bus, SimParams(world=str(room), rate=5.0))
    sim.start()
    base = SimBase(bus)
    try:
        base.start()
        yield base
    finally:
        base.stop()
        sim.stop()
