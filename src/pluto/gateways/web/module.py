"""The ``web`` module: the live web view (:class:`.server.WebServer`) fed from the bus.

``pluto web`` (or ``pluto run web``) serves a page at ``http://127.0.0.1:8080/`` that draws the map, the robot, its
estimated pose with the covariance ellipse, the path, the laser scan and the sonar, the goals and a MOM table, with
teleop buttons and click-on-map moveto. The module reads the interfaces of :data:`.frames.INPUTS` into a
:class:`.frames.ViewState`; its step (at ``rate_hz``, on the wall clock whatever the simulated time does) builds a
frame and hands it to the server; a thread of its own asks the modules for MOM's details every ``mom_period`` s and,
while no map is known, asks the simulator for its world.

Several robots: the view runs for its bus's robot (``PLUTO_ROBOT``), the one it commands, and also draws every other
robot of the simulator's world (a simulation of several, :mod:`pluto.sim.fleet`), or the robots named in ``robots``:
each with its name, its pose, its laser scan and its goal, read from its own interfaces (``pluto/<robot>/...``).

Who may command: with ``host`` 127.0.0.1 (the default) every browser on this computer; bound elsewhere, only a
browser that has the token: the first line of ``token_file``, else the environment variable ``PLUTO_WEB_TOKEN``, else
a new one made at start (``pluto web`` prints the address to open with it). A given token is needed on 127.0.0.1 too.
The token is never a parameter of its own (a command line can be read by every user of the computer). Watching needs
no token. Wrong tokens from an address make its next attempts wait (``auth_backoff``, doubled up to
``auth_backoff_max``).

Which names the server answers to: the loopback ones, the address it binds and the names in ``allow_hosts``
(``pluto web --allow-host robot.local``); a request naming any other host, as a hostile page does through DNS
rebinding, is refused (:mod:`.access`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import threading
import time
from typing import Annotated, Any

import msgspec

from pluto import msgs, names
from pluto.bus.config import check_robot_name
from pluto.errors import ConfigError
from pluto.runtime import mom
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.ranges import Offset, Port, Rate, Speed, Timeout, TurnRate, between
from pluto.sim.world import World, load_world

from .access import allowed_name
from .commands import CommandLimits
from .frames import INPUTS, OTHER_INPUTS, Path, ViewState, map_message
from .server import DEFAULT_PORT, WebServer, WebSettings

__all__ = ["MAP_MARGIN", "TOKEN_ENV", "WebModule", "WebParams", "command_token", "is_loopback", "mom_message"]

TOKEN_ENV = "PLUTO_WEB_TOKEN"
"""The environment variable holding the token when no ``token_file`` is given."""
MAP_MARGIN = 2.0
"""m around the map's bounds where a moveto is still accepted."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is an address of this computer only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def command_token(host: str, token: str) -> str | None:
    """The secret a browser needs to command: ``token`` if given; else a new random one when ``host`` is not a
    loopback address; else None (every browser on this computer may command)."""
    if token:
        return token
    return None if is_loopback(host) else secrets.token_urlsafe(12)


def mom_message(rows: list[mom.MomRow], now: float) -> dict[str, Any]:
    """``{"type": "mom", "modules": [...]}``: each module, whether it is active, and what it writes (interface,
    type, rate Hz, age s or None if never written, count)."""
    modules: list[dict[str, Any]] = []
    for row in rows:
        info = row.info
        if info is None:
            modules.append({"name": row.name, "answered": False, "interfaces": []})
            continue
        interfaces = [
            {
                "name": i.name,
                "type": i.type,
                "rate": round(i.rate_hz, 1),
                "age": round(max(0.0, now - i.last_write), 3) if i.last_write else None,
                "count": i.count,
            }
            for i in info.provides
        ]
        modules.append(
            {"name": row.name, "answered": True, "active": info.active, "pid": info.pid, "interfaces": interfaces}
        )
    return {"type": "mom", "modules": modules}


class WebParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    rate_hz: frames a second sent to every browser (the step's rate, on the wall clock).
    host: address to listen on (127.0.0.1: this computer only).
    port: TCP port (0: any free one).
    token_file: file whose first line is the token a browser needs to command; "" for the environment variable
        PLUTO_WEB_TOKEN, else none on a loopback address and a new one at start on any other.
    map: the world drawn: a shipped world's name or a map file (a SLAM map saved as XML too); "" asks the running
        ``sim`` module for its world, again every ``mom_period`` s until one answers.
    mom_period: s between two MOM tables.
    path_period: s between two sendings of the path (when it changed).
    laser_mount_x: forward offset of the wrist and laser axis from the robot's centre, m.
    max_speed, max_turn_rate: teleop limits, m/s and rad/s.
    max_clients: browsers served at once; one more pushes out the one idle longest (of the address holding the most).
    allow_hosts: host names or addresses browsers may use for this server besides localhost, 127.0.0.1, [::1] and
        ``host`` (the computer's name on the network, a reverse proxy's); a request naming any other is refused.
    auth_backoff: s during which token attempts from an address are refused unchecked after its first wrong token;
        doubled at each further one.
    auth_backoff_max: the longest back-off, s.
    robots: the other robots drawn beside this one (their names on the bus); empty: every other robot of the
        simulator's world, once a simulator of several robots answers.
    """

    rate_hz: Rate = 20.0
    host: str = "127.0.0.1"
    port: Port = DEFAULT_PORT
    token_file: str = ""
    map: str = ""
    mom_period: Timeout = 2.0
    path_period: Timeout = 0.5
    laser_mount_x: Offset = 0.25
    max_speed: Speed = 0.5
    max_turn_rate: TurnRate = 1.0
    max_clients: Annotated[int, between(1, 100000)] = 64
    allow_hosts: list[str] = msgspec.field(default_factory=list)
    auth_backoff: Timeout = 0.5
    auth_backoff_max: Timeout = 30.0
    robots: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        for robot in self.robots:
            check_robot_name(robot, "robots: ")
        CommandLimits(self.max_speed, self.max_turn_rate)
        for name in self.allow_hosts:
            allowed_name(name)
        if self.auth_backoff_max < self.auth_backoff:
            raise ValueError(f"auth_backoff_max ({self.auth_backoff_max}) is below auth_backoff ({self.auth_backoff})")


class WebModule(Module[WebParams]):
    """The live web view: map, robot, scans, goals and MOM in a browser, with teleop and moveto."""

    name = "web"
    description = "live web view: map, robot, scans, goals, MOM; teleop and click-to-moveto (HTTP + WebSocket)"
    Params = WebParams

    server: WebServer
    token: str | None
    """The secret a browser needs to command; None when every browser on this computer may."""

    def on_configure(self) -> None:
        p = self.params
        log = self.get_logger()
        self._view_lock = threading.Lock()
        self.view = ViewState(p.laser_mount_x)
        self.others: dict[str, ViewState] = {}
        """What the page draws of each other robot, by name."""
        self._fleet_known = bool(p.robots)
        self.world: World | None = load_world(p.map) if p.map else None
        self.token = command_token(p.host, self._given_token())
        self._commands = self.create_publisher(names.MOTION_COMMAND)
        for name in INPUTS:
            self.create_subscription(name, self._receiver(name), depth=4)
        limits = CommandLimits(p.max_speed, p.max_turn_rate, self._area(self.world))
        settings = WebSettings(
            host=p.host,
            port=p.port,
            token=self.token,
            limits=limits,
            allow_hosts=tuple(p.allow_hosts),
            max_clients=p.max_clients,
            auth_backoff=p.auth_backoff,
            auth_backoff_max=p.auth_backoff_max,
        )
        self.server = WebServer(settings, self._commands.write, self._robot_time, log)
        try:
            self.server.start()
        except OSError as err:
            raise ConfigError(f"web cannot listen on {p.host}:{p.port}: {err.strerror or err}") from None
        if self.world is not None:
            self._publish_map(self.world, p.map)
        self._path_version = -1
        self._next_path = 0.0
        # Whether a simulator serves its world: Zenoh's matching status of a querier of sim/world, kept while the
        # module runs so that it follows a simulator that comes (or goes) later without asking one that is not there.
        asks = not p.map or not p.robots
        self._sim_world: Any = self.bus.session.declare_querier(self.bus.service_key("sim/world")) if asks else None
        self._watch_robots(p.robots)
        self._stop_poll = threading.Event()
        self._poll = threading.Thread(target=self._poll_loop, name="web-poll", daemon=True)
        self._poll.start()
        log.info("web view of robot %s at %s", self.bus.robot, self.url)

    def _given_token(self) -> str:
        from pluto.gateways.xmlserver.module import MAX_TOKEN, read_token

        if self.params.token_file:
            token, shared = read_token(self.params.token_file)
            if shared:
                self.get_logger().warning(
                    "token file %s can be read by other users (chmod 600 it)", self.params.token_file
                )
            return token
        token = os.environ.get(TOKEN_ENV, "").strip()
        if "\n" in token or "\r" in token or len(token) > MAX_TOKEN:
            raise ConfigError(f"{TOKEN_ENV}: the token must be one line of at most {MAX_TOKEN} characters")
        return token

    @property
    def url(self) -> str:
        """The address to open in a browser (with the token, if commands need one)."""
        host, port = self.server.address
        shown = f"[{host}]" if ":" in host else host
        query = f"?token={self.token}" if self.token else ""
        return f"http://{shown}:{port}/{query}"

    @staticmethod
    def _area(world: World | None) -> tuple[float, float, float, float] | None:
        if world is None:
            return None
        xmin, ymin, xmax, ymax = world.bounds()
        return xmin - MAP_MARGIN, ymin - MAP_MARGIN, xmax + MAP_MARGIN, ymax + MAP_MARGIN

    def _publish_map(self, world: World | None, source: str) -> None:
        self.server.limits = CommandLimits(self.params.max_speed, self.params.max_turn_rate, self._area(world))
        self.server.publish("map", msgspec.json.encode(map_message(world, source)).decode())

    def _robot_time(self) -> float:
        with self._view_lock:
            clock = self.view.clock
        return clock.stamp if clock is not None else time.time()

    def _receiver(self, name: str) -> Any:
        def receive(msg: msgs.Message) -> None:
            with self._view_lock:
                self.view.feed(name, msg)

        return receive

    def _watch_robots(self, robots: list[str]) -> None:
        """Draw these robots too (this one and those already drawn aside), from their own interfaces."""
        for robot in robots:
            if robot == self.bus.robot or robot in self.others:
                continue
            view = ViewState(self.params.laser_mount_x, Path(max_points=200))
            with self._view_lock:
                self.others[robot] = view
            for name in OTHER_INPUTS:
                self.create_subscription(name, self._other_receiver(view, name), depth=4, robot=robot)
            self.get_logger().info("drawing robot %s too", robot)

    def _other_receiver(self, view: ViewState, name: str) -> Any:
        def receive(msg: msgs.Message) -> None:
            with self._view_lock:
                view.feed(name, msg)

        return receive

    def step(self, now: float) -> None:
        clients = self.server.clients
        with self._view_lock:
            # no browser: no frame to build (the path and the map are kept for the next one)
            frame = None
            if clients:
                others = [view.robot_view(robot) for robot, view in sorted(self.others.items())]
                extra = {
                    "clients": clients,
                    "commands": self.server.commands,
                    "robot": self.bus.robot,
                    "robots": others,
                }
                frame = self.view.frame(extra)
            path = None
            if self.view.path.version != self._path_version and now >= self._next_path:
                self._path_version = self.view.path.version
                self._next_path = now + self.params.path_period
                path = self.view.path.message()
        if frame is not None:
            self.server.publish("frame", msgspec.json.encode(frame).decode())
        if path is not None:
            self.server.publish("path", msgspec.json.encode(path).decode())

    def _poll_loop(self) -> None:
        log = self.get_logger()
        while not self._stop_poll.is_set():
            if (self.world is None and not self.params.map) or not self._fleet_known:
                self._ask_simulator()
            try:
                rows = mom.snapshot(self.bus, timeout=min(1.0, self.params.mom_period))
                self.server.publish("mom", msgspec.json.encode(mom_message(rows, time.time())).decode())
            except Exception as err:  # the bus is closing, or a module answered garbage: try again next time
                log.debug("MOM snapshot failed: %s", err)
            self._stop_poll.wait(self.params.mom_period)

    def _ask_simulator(self) -> None:
        """The simulator's world (when no map was given) and its other robots (when none were named)."""
        from pluto.sim.module import fetch_settings

        try:
            # Asked only of a simulator that serves it: a call to none would wait out its timeout, and hold up a
            # Ctrl-C that comes meanwhile (the module's stop waits for this thread). The status is a MatchingStatus
            # (zenoh's stubs say bool; the object is always true): its flag tells.
            querier = self._sim_world
            if querier is None or not querier.matching_status.matching:
                return
            settings = fetch_settings(self.bus, timeout=1.0)
            world = settings.load_world() if self.world is None and not self.params.map else None
        except Exception:  # no simulator yet, or its world file is gone: ask again later
            return
        if not self._fleet_known:
            self._fleet_known = True
            self._watch_robots([member.name for member in settings.others()])
        if world is not None:
            self.world = world
            self.get_logger().info("drawing the simulator's world %s", world.name)
            self._publish_map(world, settings.world)

    def on_clock_jump(self, old: float, new: float) -> None:
        with self._view_lock:
            self.view.reset()
            for view in self.others.values():
                view.reset()

    def on_shutdown(self) -> None:
        stop = getattr(self, "_stop_poll", None)
        if stop is not None:
            stop.set()
            self._poll.join(timeout=5)
        querier = getattr(self, "_sim_world", None)
        if querier is not None:
            with contextlib.suppress(Exception):  # the bus may be closed already
                querier.undeclare()
        server = getattr(self, "server", None)
        if server is not None:
            server.close()
