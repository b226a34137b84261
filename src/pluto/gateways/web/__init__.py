"""The live web view: ``pluto web`` serves a page that draws the robot on its map and steers it.

- :mod:`.frames`: the pure core turning the newest values of the bus into the JSON frames the page draws (map,
  robot, estimate and its covariance ellipse, path, laser scan, sonar, goals).
- :mod:`.mailbox`: newest wins, per browser (a slow browser skips frames, never queues them).
- :mod:`.commands`: what a browser may send (teleop, stop, moveto, the token), range-checked, and the dead-man rule.
- :mod:`.access`: which names (``Host``) the server answers to: its own, never a hostile site's (DNS rebinding).
- :mod:`.server`: the aiohttp server (the page, one WebSocket per browser, ``/stats``) on a thread of its own.
- :mod:`.module`: the ``web`` module binding them to the bus; the page is ``static/index.html`` (no build step).
"""

from .commands import CommandError, CommandLimits, DeadMan, parse_request
from .frames import INPUTS, Path, ViewState, covariance_ellipse, map_message
from .mailbox import Mailbox
from .module import WebModule, WebParams
from .server import DEFAULT_PORT, ServerStats, WebServer, WebSettings

__all__ = [
    "DEFAULT_PORT",
    "INPUTS",
    "CommandError",
    "CommandLimits",
    "DeadMan",
    "Mailbox",
    "Path",
    "ServerStats",
    "ViewState",
    "WebModule",
    "WebParams",
    "WebServer",
    "WebSettings",
    "covariance_ellipse",
    "map_message",
    "parse_request",
]
