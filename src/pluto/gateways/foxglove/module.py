"""The ``foxglove`` module: the live robot served to Foxglove over its WebSocket protocol.

``pluto foxglove`` (or ``pluto run foxglove``) starts a Foxglove WebSocket server (the ``foxglove-sdk`` package) on
``host:port`` (127.0.0.1:8765 by default) and serves:

- Foxglove's well-known schemas (protobuf), from :class:`.translate.FoxgloveTranslator`: ``/scan`` (LaserScan),
  ``/tf`` (FrameTransform: map -> odom -> base_link -> laser), ``/pose`` and ``/truth`` (PoseInFrame), ``/path``
  (PosesInFrame), ``/map`` (SceneUpdate: the world's walls, sent again every ``map_period`` s for viewers that
  join later) and ``/log`` (Log: this gateway's own log and the modules that come and go);
- Pluto's own interfaces as JSON with their JSON Schemas, under their names (``Base/Drive/State``, ...), as in
  ``pluto record``'s logs, so a plot panel can show any field.

Several robots: besides its bus's robot the gateway serves every other robot of the simulator's world (a simulation
of several, :mod:`pluto.sim.fleet`), or those named in ``robots``, each read from its own interfaces
(``pluto/<robot>/...``): one frame tree per robot under the one ``map`` (``<robot>/odom``, ``<robot>/base_link``,
``<robot>/laser``) and its own topics (``/<robot>/scan``, ``/<robot>/pose``, ``/<robot>/truth``, ``/<robot>/path``);
``/tf``, ``/map``, ``/log`` and the JSON channels (the gateway's own robot's) are shared. The shipped layout's 3-D
panel shows the lone robot's topics; add the robots' to it.

A message is encoded only when a viewer subscribes to its channel; every message is logged at its own stamp.
Connect from Foxglove with "Open connection" -> ``ws://127.0.0.1:8765``, and import the layout shipped beside
this file (:data:`LAYOUT_PATH`).

Clients name the protocol by either of its two WebSocket subprotocols: ``foxglove.sdk.v1`` (Foxglove's app) or
``foxglove.websocket.v1`` (Lichtblick, PlotJuggler, ``@foxglove/ws-protocol``). The SDK's server accepts only the
first and has no option for the second, so it listens on 127.0.0.1 at a free port behind a thin front
(:class:`.front.SubprotocolFront`) on ``host:port``: the front hands the SDK a client's handshake with
``foxglove.websocket.v1`` offered as ``foxglove.sdk.v1`` (the same protocol under its new name), gives the client
the SDK's answer under the name it offered, then relays the bytes unchanged. A client that offers neither name is
answered ``400`` with the reason, counted (:attr:`FoxgloveModule.front` ``.refused``) and logged.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Final

import foxglove
import msgspec

from pluto import msgs, names
from pluto.bus.config import check_robot_name
from pluto.errors import ConfigError
from pluto.record.format import SCHEMA_ENCODING, encode_message, schema_bytes, schema_name, to_ns
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.ranges import Offset, Port, Rate, Timeout, between
from pluto.sim.world import World, load_world

from .front import SubprotocolFront
from .translate import (
    FOXGLOVE_TOPICS,
    INPUTS,
    MAP_POSES,
    ROBOT_TOPICS,
    TOPIC_LOG,
    TOPIC_MAP,
    FoxgloveTranslator,
    Output,
    log_message,
    robot_topics,
    walls_scene,
)

__all__ = ["DEFAULT_JSON_INTERFACES", "DEFAULT_PORT", "LAYOUT_PATH", "FoxgloveModule", "FoxgloveParams", "layout_text"]

DEFAULT_PORT: Final = 8765
"""Foxglove's usual WebSocket port."""

LAYOUT_PATH: Final = Path(str(files("pluto.gateways.foxglove").joinpath("pluto-layout.json")))
"""The Foxglove layout shipped with Pluto: a 3-D panel with the map, the scan and the robot, and a plot of speed."""

DEFAULT_JSON_INTERFACES: Final = (
    names.BASE_DRIVE_STATE.name,
    names.LOCALIZATION_POSE.name,
    names.SIM_TRUTH.name,
    "drive/status",
    "motion/status",
)
"""Pluto interfaces served as JSON too by default (the speed plot of the layout reads ``Base/Drive/State.v``)."""


def layout_text() -> str:
    """The shipped Foxglove layout (JSON)."""
    return LAYOUT_PATH.read_text(encoding="utf-8")


class FoxgloveParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    host: address to listen on (127.0.0.1: this computer only).
    port: TCP port (0: any free one).
    map: the world whose walls are drawn: a shipped world's name or a map file; "" asks the running ``sim`` module
        for its world, and draws no walls if none answers.
    map_period: s between two sendings of the walls (for viewers that join later).
    json: Pluto interfaces also served as JSON under their own names.
    laser_mount: the laser's pan/tilt centre in the robot frame (x forward, y left, z up), m.
    map_pose: what places the robot in the map: ``localization`` (Localization/Pose; Sim/Truth until one comes) or
        ``truth`` (Sim/Truth: the simulated world's frame, when the localization was not given the world's start
        pose).
    max_rate_hz: most messages a second (wall clock) sent on a topic about one thing (a scan; a transform of one
        frame), the first of each 1/max_rate_hz s: a viewer draws a few tens of frames a second, and a simulation
        run faster than real time would otherwise send every message to every viewer (0: send every message).
    backlog: messages buffered per viewer before the oldest are dropped.
    robots: the other robots served beside this one (their names on the bus); empty: every other robot of the
        simulator's world (asked with the world, when no ``map`` is given).
    """

    rate_hz: Rate = 2.0  # the step only sends the walls again
    host: str = "127.0.0.1"
    port: Port = DEFAULT_PORT
    map: str = ""
    map_period: Timeout = 2.0
    json: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_JSON_INTERFACES))
    laser_mount: tuple[Offset, Offset, Offset] = (0.25, 0.0, 0.9)
    map_pose: str = "localization"
    max_rate_hz: Annotated[float, between(0.0, 1000.0)] = 30.0
    backlog: Annotated[int, between(1, 1000000)] = 1024
    robots: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        for robot in self.robots:
            check_robot_name(robot, "robots: ")
        if self.map_pose not in MAP_POSES:
            raise ValueError(f"map_pose must be one of {', '.join(MAP_POSES)}, not {self.map_pose!r}")
        unknown = [name for name in self.json if names.message_type_of(name) is None]
        if unknown:
            raise ValueError(f"json names interfaces that are not in the table: {', '.join(unknown)}")


class _LogToFoxglove(logging.Handler):
    """Sends the records of a logger to the ``/log`` channel."""

    def __init__(self, module: FoxgloveModule) -> None:
        super().__init__(logging.INFO)
        self._module = module

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._module.send_log(record.levelno, record.name, record.getMessage())
        except Exception:  # a log line must never break what logged it
            self.handleError(record)


class FoxgloveModule(Module[FoxgloveParams]):
    """The Foxglove gateway: Foxglove (or any client of its WebSocket protocol) sees the live robot."""

    name = "foxglove"
    description = "Foxglove WebSocket gateway: scans, poses, frames, walls and logs in Foxglove's schemas"
    Params = FoxgloveParams

    server: Any
    """The running :class:`foxglove.WebSocketServer` (on 127.0.0.1, behind :attr:`front`)."""
    front: SubprotocolFront
    """Where viewers connect: the front of :attr:`server` that accepts both names of the protocol."""

    def on_configure(self) -> None:
        p = self.params
        log = self.get_logger()
        self._lock = threading.Lock()
        self._sim_robots: list[str] = []  # the simulator's other robots, asked with its world
        self._latest_stamp = 0.0
        self._next_map = 0.0
        self._min_interval = 1.0 / p.max_rate_hz if p.max_rate_hz > 0 else 0.0
        self._last_sent: dict[tuple[str, str], float] = {}
        self.thinned = 0
        """Messages not sent because one about the same thing went less than 1/max_rate_hz s before."""
        self.sent = 0
        """Foxglove messages encoded and handed to the server (those nobody subscribed to are not counted)."""
        self.world = self._load_world(p.map)
        own = self.bus.robot
        self.robots = [own, *[r for r in dict.fromkeys(p.robots or self._sim_robots) if r != own]]
        """The robots served, this bus's first."""
        several = len(self.robots) > 1
        self._translators = {
            robot: FoxgloveTranslator(p.laser_mount, map_pose=p.map_pose, robot=robot if several else "")
            for robot in self.robots
        }
        self._translator = self._translators[own]
        self._context = foxglove.Context()
        self._start_server()
        self._open_channels(several)
        self._subscribe()
        self._handler = _LogToFoxglove(self)
        log.addHandler(self._handler)
        self._module_watch = self.bus.watch_modules(self._on_module)
        served = f"robots {', '.join(self.robots)}" if several else f"robot {own}"
        log.info("serving %s to Foxglove on ws://%s:%d", served, p.host, self.port)

    def _start_server(self) -> None:
        """Start the SDK's server on 127.0.0.1 at a free port, and the front viewers connect to on ``host:port``.

        Raises:
            ConfigError: either cannot start (the SDK's server is stopped again if the front cannot listen).
        """
        p = self.params
        try:
            self.server = foxglove.start_server(
                name=f"pluto {self.bus.robot}",
                host="127.0.0.1",
                port=0,
                context=self._context,
                message_backlog_size=p.backlog,
            )
        except Exception as err:  # the SDK raises its own error type
            raise ConfigError(f"foxglove cannot start its WebSocket server: {err}") from None
        self.front = SubprotocolFront(("127.0.0.1", self.server.port), p.host, p.port, logger=self.get_logger())
        try:
            self.front.start()
        except OSError as err:
            self.server.stop()
            raise ConfigError(f"foxglove cannot listen on {p.host}:{p.port}: {err.strerror or err}") from None

    def _open_channels(self, several: bool) -> None:
        """The Foxglove topics (each robot's under its name when there are ``several``) and the JSON channels."""
        topics = dict(FOXGLOVE_TOPICS)
        if several:  # each robot's topics under its name; only /tf, /map and /log are shared
            topics = {t: cls for t, cls in topics.items() if t not in ROBOT_TOPICS}
            for robot in self.robots:
                topics.update(robot_topics(robot))
        self._channels: dict[str, foxglove.Channel] = {
            topic: foxglove.Channel(topic, schema=cls.get_schema(), message_encoding="protobuf", context=self._context)
            for topic, cls in topics.items()
        }
        self._json: dict[str, foxglove.Channel] = {}
        for name in self.params.json:
            cls = names.message_type_of(name)
            assert cls is not None  # checked with the parameters
            schema = foxglove.Schema(name=schema_name(cls), encoding=SCHEMA_ENCODING, data=schema_bytes(cls))
            self._json[name] = foxglove.Channel(name, schema=schema, message_encoding="json", context=self._context)

    def _subscribe(self) -> None:
        """Read the translated inputs and the JSON interfaces of this bus's robot, and the inputs of the others."""
        for name in sorted(set(INPUTS) | set(self.params.json)):
            self.create_subscription(name, self._receiver(name), depth=8)
        for robot in self.robots[1:]:
            for name in INPUTS:
                self.create_subscription(name, self._receiver(name, robot), depth=8, robot=robot)

    @property
    def port(self) -> int:
        """The port viewers connect to."""
        return self.front.address[1]

    def has_viewers(self, topic: str) -> bool:
        """Whether a viewer is subscribed to ``topic`` (a Foxglove topic or a Pluto interface served as JSON)."""
        channel = self._channels.get(topic) or self._json.get(topic)
        return channel is not None and channel.has_sinks()

    def _load_world(self, source: str) -> World | None:
        log = self.get_logger()
        if source:
            given = load_world(source)  # a bad name or file is the user's to fix: ConfigError
            log.info("drawing the walls of %s (%d segments)", given.name, len(given.segments()))
            return given
        from pluto.sim.module import fetch_settings

        try:
            settings = fetch_settings(self.bus, timeout=1.0)
            world = settings.load_world()
        except Exception as err:  # no simulator, or its world file is gone: no walls to draw
            log.info("no walls to draw (no map given and no simulator answers: %s)", type(err).__name__)
            return None
        self._sim_robots = [member.name for member in settings.others()]
        log.info("drawing the walls of the simulator's world %s (%d segments)", world.name, len(world.segments()))
        return world

    # -- from the bus to the viewers --------------------------------------------------------------------------------

    def _receiver(self, name: str, robot: str | None = None) -> Any:
        """What to do with a value of ``name`` of ``robot`` (this bus's if None)."""
        json_channel = self._json.get(name) if robot is None else None
        translated = name in INPUTS
        translator = self._translators[robot or self.bus.robot]

        def receive(msg: msgs.Message) -> None:
            stamp = getattr(msg, "stamp", 0.0)
            if json_channel is not None and json_channel.has_sinks():
                json_channel.log(encode_message(msg), log_time=_ns(stamp))
            if translated:
                with self._lock:
                    outputs = translator.feed(name, msg)
                    if stamp > self._latest_stamp:
                        self._latest_stamp = stamp
                self._send(outputs)

        return receive

    def _send(self, outputs: list[Output], thin: bool = True) -> None:
        for out in outputs:
            channel = self._channels[out.topic]
            if not channel.has_sinks():
                continue
            if thin and self._min_interval and not out.keep:
                # Pacing what viewers are sent by the wall clock, not the robot's: a viewer's frames are real time.
                now, key = time.monotonic(), (out.topic, out.about)
                if now - self._last_sent.get(key, -math.inf) < self._min_interval:
                    self.thinned += 1
                    continue
                self._last_sent[key] = now
            channel.log(out.message.encode(), log_time=_ns(out.log_time))
            self.sent += 1

    def send_log(self, level: int, name: str, message: str) -> None:
        """Send a log line on ``/log``, stamped with the newest stamp seen (the robot's time)."""
        stamp = self._latest_stamp
        self._send([Output(TOPIC_LOG, log_message(stamp, level, name, message), stamp)], thin=False)

    def _on_module(self, name: str, alive: bool) -> None:
        self.send_log(logging.INFO, "mom", f"module {name} {'is up' if alive else 'is gone'}")

    def step(self, now: float) -> None:
        if self.world is None or now < self._next_map:
            return
        self._next_map = now + self.params.map_period
        stamp = self._latest_stamp
        self._send([Output(TOPIC_MAP, walls_scene(self.world, stamp), stamp)], thin=False)

    def on_clock_jump(self, old: float, new: float) -> None:
        with self._lock:
            for translator in self._translators.values():
                translator.reset()
            self._latest_stamp = new
        self._next_map = 0.0

    def on_shutdown(self) -> None:
        handler = getattr(self, "_handler", None)
        if handler is not None:
            self.get_logger().removeHandler(handler)
        watch = getattr(self, "_module_watch", None)
        if watch is not None:
            self.bus.release(watch)
        front = getattr(self, "front", None)
        if front is not None:
            front.close()
        server = getattr(self, "server", None)
        if server is not None:
            server.stop()
        for channel in [*getattr(self, "_channels", {}).values(), *getattr(self, "_json", {}).values()]:
            channel.close()


def _ns(stamp: float) -> int:
    try:
        return to_ns(stamp)
    except Exception:  # a negative or non-finite stamp: log it at 0 rather than drop it
        return 0
