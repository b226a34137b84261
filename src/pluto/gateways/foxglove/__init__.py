"""Foxglove: the live robot, and recordings, in Foxglove's well-known schemas.

- :mod:`.translate`: the pure core turning Pluto's interfaces into Foxglove messages (LaserScan, FrameTransform,
  PoseInFrame, PosesInFrame, SceneUpdate for the walls, Log), shared by the live server and ``pluto record
  --foxglove``.
- :mod:`.module`: the ``foxglove`` module, a Foxglove WebSocket server (``foxglove-sdk``) in front of the bus.
- :mod:`.front`: the front of that server that accepts both names of the protocol (``foxglove.sdk.v1`` and
  ``foxglove.websocket.v1``).
- :mod:`.layout`: the shipped Foxglove layout (``pluto-layout.json``).
"""

from .module import DEFAULT_PORT, LAYOUT_PATH, FoxgloveModule, FoxgloveParams, layout_text
from .translate import FOXGLOVE_TOPICS, INPUTS, FoxgloveTranslator, Output, walls_scene

__all__ = [
    "DEFAULT_PORT",
    "FOXGLOVE_TOPICS",
    "INPUTS",
    "LAYOUT_PATH",
    "FoxgloveModule",
    "FoxgloveParams",
    "FoxgloveTranslator",
    "Output",
    "layout_text",
    "walls_scene",
]
