"""Foxglove's schemas in Pluto's recordings: what ``pluto record --foxglove`` writes beside the bus messages.

Strategy: the recorder stays ignorant of Foxglove. It takes a ``translate`` function that turns each recorded value
into :class:`~pluto.record.writer.ForeignMessage` values (topic, schema, encoded bytes, log time) and writes them on
channels of their own; :class:`FoxgloveRecording` is that function, built on the same
:class:`~.translate.FoxgloveTranslator` as the live server. The messages keep the stamps of their Pluto messages
inside them (the 3-D panel places a scan by its stamp) and are logged at the recording's time of the value they come
from, so the file's time axis stays the recorder's. The walls are written with the first message and again every
``map_period`` s of log time, so a viewer that seeks into the file still finds them. Pluto's readers list these
channels and skip their messages: ``pluto replay`` plays back the bus interfaces only.
"""

from __future__ import annotations

import functools

from pluto import msgs
from pluto.record.writer import ForeignMessage
from pluto.sim.world import World

from .translate import FOXGLOVE_TOPICS, TOPIC_MAP, FoxgloveTranslator, Output, walls_scene

__all__ = ["FoxgloveRecording", "foreign_message"]


@functools.cache
def _schema(topic: str) -> tuple[str, str, bytes]:
    schema = FOXGLOVE_TOPICS[topic].get_schema()
    return schema.name, schema.encoding, bytes(schema.data)


def foreign_message(out: Output, log_time: float) -> ForeignMessage:
    """A translated message as the recorder writes it (protobuf, with its schema), logged at ``log_time`` s."""
    name, encoding, data = _schema(out.topic)
    return ForeignMessage(out.topic, name, encoding, data, "protobuf", out.message.encode(), log_time)


class FoxgloveRecording:
    """The ``translate`` function of a :class:`~pluto.record.recorder.Recorder` that adds Foxglove's schemas.

    Args:
        world: the world whose walls are drawn, or None for none.
        laser_mount: the laser's pan/tilt centre in the robot frame, m.
        map_period: log seconds between two writings of the walls.
        map_pose: what places the robot in the map (see :class:`~.translate.FoxgloveTranslator`).
    """

    def __init__(
        self,
        world: World | None,
        laser_mount: tuple[float, float, float] = (0.25, 0.0, 0.9),
        *,
        map_period: float = 5.0,
        map_pose: str = "localization",
    ) -> None:
        self.world = world
        self.map_period = map_period
        self.translator = FoxgloveTranslator(laser_mount, map_pose=map_pose)
        self._next_map: float | None = None

    def __call__(self, name: str, msg: msgs.Message, log_time: float) -> list[ForeignMessage]:
        """The Foxglove messages to write for the value ``msg`` of interface ``name`` recorded at ``log_time`` s."""
        out = [foreign_message(o, log_time) for o in self.translator.feed(name, msg)]
        due = self._next_map
        if self.world is not None and (due is None or log_time >= due or log_time < due - 2 * self.map_period):
            self._next_map = log_time + self.map_period
            stamp = getattr(msg, "stamp", log_time)
            out.insert(0, foreign_message(Output(TOPIC_MAP, walls_scene(self.world, stamp), stamp), log_time))
        return out
