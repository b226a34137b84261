"""The web view's HTTP and WebSocket server (aiohttp), on an asyncio loop of its own thread.

Strategy: ``GET /`` serves the page (``static/index.html``: plain HTML, JavaScript and a canvas, no build step);
``GET /ws`` is one WebSocket per browser; ``GET /stats`` the counters as JSON. The module hands the server each new
message once, already encoded (:meth:`WebServer.publish`, from any thread); the server leaves it in every browser's
:class:`~.mailbox.Mailbox` (newest wins per kind) and wakes that browser's sender task, which sends whatever is
waiting whenever its socket takes more. So the cost of a message is one encoding plus one socket write per browser
that keeps up, a slow browser skips frames instead of queueing them (aiohttp's writer waits for the socket to drain
past ``writer_limit`` bytes, which holds up only that browser's task), and nothing a browser does slows another.

Requests from the page (:mod:`.commands`) are decoded, checked and, if this connection may command, written to
``motion/command`` through the callback the module gives. A bad request gets ``{"type": "error", ...}`` with the
reason and the connection's count of bad requests; it is counted, rate-limited in the log, and the connection goes
on. Watching needs no token. Defences against hostile pages and clients (each counted in :class:`ServerStats`):

- *Names* (DNS rebinding, :mod:`.access`): a request whose ``Host`` is not a name of this server (the loopback
  names, the address it binds or was reached at, ``allow_hosts``) is refused with HTTP 403 saying which option
  would allow it: the page, ``/stats`` and the WebSocket alike. A WebSocket opened by a page of another site (its
  ``Origin`` is not this server) is refused too, so a web page the user visits can neither drive the robot through
  a browser on the robot's computer nor watch it.
- *Commands*: with no token (the server binds 127.0.0.1 by default), a connection whose ``Host`` and ``Origin``
  passed both checks may command; every other connection only after it sent the token (``{"op": "auth"}``, or
  ``?token=`` in the WebSocket's address, which the page passes on from its own), and the hello says which
  (``"commands": "open"`` or ``"token"``).
- *Token guessing* (:class:`pluto.gateways.guard.AuthLimiter`): after a wrong token, the attempts from the same
  address are refused unchecked, the reply saying when the next one will be checked, for a back-off that starts at
  ``auth_backoff`` and doubles with each wrong token up to ``auth_backoff_max``; a right token ends it.
- *Crowding*: at ``max_clients`` a new browser is served and another one goes: the one that sent nothing for the
  longest among the connections of the address that holds the most (the newcomer's own when it holds as many as
  any), closed cleanly with code 1013 and the reason. So idle sockets, however many, from the user's own address
  never lock a real browser out: each newcomer pushes out the longest-idle one of the crowd.
- *The log*: a malformed HTTP request (aiohttp answers it 400) is one line without a traceback, refused names,
  wrong tokens and bad requests one line per address per :data:`LOG_INTERVAL` s, and connections coming and going
  a few lines per address per interval (:class:`pluto.gateways.guard.LogLimiter`); the lines held back are counted
  and the counts logged with the next line, or within a second once one is due.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import hmac
import logging
import threading
import time
from collections.abc import Callable
from importlib.resources import files
from typing import Annotated, Any, Final
from urllib.parse import urlsplit

import msgspec
from aiohttp import WSCloseCode, WSMsgType, web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler

from pluto import msgs
from pluto.gateways.guard import AuthLimiter, LogLimiter
from pluto.runtime.params import Params
from pluto.runtime.ranges import CommandTimeout, Port, Timeout, between

from .access import HostPolicy, host_name
from .commands import DEADMAN_TIMEOUT, Auth, CommandError, CommandLimits, DeadMan, Stop, Teleop, parse_request
from .mailbox import Mailbox

__all__ = [
    "DEFAULT_PORT",
    "EVICT_CODE",
    "LOG_INTERVAL",
    "PAGE",
    "STICKY_KINDS",
    "ServerStats",
    "WebServer",
    "WebSettings",
]

DEFAULT_PORT: Final = 8080
"""The usual port of a web view on a robot."""

PAGE: Final = files("pluto.gateways.web").joinpath("static", "index.html")
"""The page the server serves at ``/``."""

STICKY_KINDS: Final = ("map", "path", "mom")
"""Kinds of message a browser that connects later gets at once (the newest of each); frames come by themselves."""

LOG_INTERVAL: Final = 10.0
"""s over which the lines about one address are limited (the first is logged at once)."""
CLIENT_LOG_BURST: Final = 10
"""Lines about the connections of one address (connected, evicted, disconnected) per LOG_INTERVAL."""
HOUSEKEEPING_PERIOD: Final = 1.0
"""s between two looks for log lines held back."""
EVICT_CODE: Final = WSCloseCode.TRY_AGAIN_LATER
"""The close code of a browser pushed out by a newcomer at ``max_clients``."""
CLOSE_TIMEOUT: Final = 5.0
"""s a browser pushed out gets to answer the close before its connection is cut."""

_HELD: Final = {
    "host": "requests naming another host refused",
    "origin": "WebSockets of other sites refused",
    "token": "wrong tokens or attempts refused during the back-off",
    "request": "bad requests",
    "http": "malformed HTTP requests",
    "client": "lines about its connections",
}
"""What the lines held back of each kind were about (for the line that counts them)."""


class WebSettings(Params, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    host, port: where to listen (port 0: any free one).
    token: the secret a connection must send before it may command; None: every connection whose Host and Origin
        are allowed may.
    limits: range checks of the commands.
    allow_hosts: names and addresses a request's Host may give besides the loopback names and the bound address.
    max_clients: browsers served at once (a newcomer then pushes out the longest-idle one of the biggest crowd).
    writer_limit: bytes buffered for one browser before its sender waits for the socket to drain.
    deadman_timeout: s without a teleop repetition before the server stops the robot.
    auth_backoff: s during which the token attempts from an address are refused unchecked after its first wrong
        token; it doubles with each further one.
    auth_backoff_max: the longest back-off, s.
    """

    host: str = "127.0.0.1"
    port: Port = DEFAULT_PORT
    token: str | None = None
    limits: CommandLimits = msgspec.field(default_factory=CommandLimits)
    allow_hosts: tuple[str, ...] = ()
    max_clients: Annotated[int, between(1, 100_000)] = 64
    writer_limit: Annotated[int, between(1024, 2**30)] = 64 * 1024
    deadman_timeout: CommandTimeout = DEADMAN_TIMEOUT
    auth_backoff: Timeout = 0.5
    auth_backoff_max: Timeout = 30.0


class ServerStats(msgspec.Struct, frozen=True, kw_only=True):
    """The server's counters (``GET /stats``).

    Attributes:
        clients: browsers connected now.
        connections: WebSockets accepted since the start.
        refused: WebSockets refused because a page of another site opened them.
        refused_hosts: requests refused because their Host is not a name of this server (DNS rebinding).
        evicted: browsers pushed out by a newcomer at max_clients.
        published, sent, skipped: messages handed to the server, sent to browsers, replaced by a newer one unsent.
        commands: commands written to motion/command.
        bad_requests: requests from browsers refused (malformed, out of range, without or with a wrong token).
        auth_failures: wrong tokens (checked).
        auth_refused: token attempts refused unchecked during a back-off.
        malformed_http: requests that were not HTTP (answered 400 and closed).
        deadman_stops: stops the server sent itself (teleop no longer repeated, or its browser gone).
    """

    clients: int
    connections: int
    refused: int
    refused_hosts: int
    evicted: int
    published: int
    sent: int
    skipped: int
    commands: int
    bad_requests: int
    auth_failures: int
    auth_refused: int
    malformed_http: int
    deadman_stops: int


class _Browser:
    """One WebSocket connection."""

    def __init__(
        self, ws: web.WebSocketResponse, request: web.Request, authorized: bool, deadman_timeout: float, now: float
    ) -> None:
        self.ws = ws
        self.address = str(request.remote)
        """The client's IP address (what the back-off and the crowding count by)."""
        self.peer = _peer(request)
        self.transport = request.transport
        self.authorized = authorized
        self.mailbox = Mailbox()
        self.wake = asyncio.Event()
        self.deadman = DeadMan(deadman_timeout)
        self.sender: asyncio.Task[None] | None = None
        self.number = 0
        """Its place among the connections accepted (among browsers idle as long, the first one goes)."""
        self.last_heard = now
        """When it connected or last sent a message (monotonic s): the longest-idle one is pushed out first."""
        self.bad = 0
        self.sent = 0

    def post(self, kind: str, data: str) -> None:
        self.mailbox.post(kind, data)
        self.wake.set()


class _HttpLog(logging.Logger):
    """The logger given to aiohttp's connection handler: every record it makes goes to ``route`` instead of handlers
    (aiohttp logs a malformed request with its traceback)."""

    def __init__(self, route: Callable[[logging.LogRecord], None]) -> None:
        super().__init__("pluto.web.http", logging.DEBUG)
        self._route = route

    def handle(self, record: logging.LogRecord) -> None:
        self._route(record)


class WebServer:
    """Serves the page and the WebSocket of every browser.

    Args:
        settings: where to listen and the limits.
        send_command: writes a checked command to ``motion/command`` (called on the server's thread).
        robot_time: the stamp to give a command (the robot's time, s).
        logger: where connections and bad requests are logged.
        monotonic: the clock of the dead-man rule and the defences, s (tests pass their own).

    Raises:
        ValueError: an allowed host that is not a bare name or address, or back-off limits out of order.
    """

    def __init__(
        self,
        settings: WebSettings,
        send_command: Callable[[msgs.ActuatorState], None],
        robot_time: Callable[[], float] = time.time,
        logger: logging.Logger | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.limits = settings.limits
        """The range checks in force (the module narrows the moveto area once it knows the map)."""
        self.hosts = HostPolicy(settings.host, settings.allow_hosts)
        """The names a request's Host may give."""
        self._send_command = send_command
        self._robot_time = robot_time
        self._monotonic = monotonic
        self._log = logger or logging.getLogger("pluto.web")
        self._page = PAGE.read_bytes()
        self._browsers: set[_Browser] = set()
        self._browsers_lock = threading.Lock()  # the set changes on the loop and is counted from other threads
        self._sticky: dict[str, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._address: tuple[str, int] = (settings.host, settings.port)
        self._auth = AuthLimiter(settings.auth_backoff, settings.auth_backoff_max)
        self._lines: LogLimiter[tuple[str, str]] = LogLimiter(LOG_INTERVAL, 1)
        self._client_lines: LogLimiter[tuple[str, str]] = LogLimiter(LOG_INTERVAL, CLIENT_LOG_BURST)
        self._closing: set[asyncio.Task[None]] = set()
        self.connections = 0
        self.refused = 0
        self.refused_hosts = 0
        self.evicted = 0
        self.published = 0
        self.commands = 0
        self.bad_requests = 0
        self.auth_failures = 0
        self.auth_refused = 0
        self.malformed_http = 0
        self.deadman_stops = 0
        self._sent_closed = 0
        self._skipped_closed = 0

    # -- life cycle (from the module's thread) ----------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """The host and the port listened on (the real port when 0 was asked for)."""
        return self._address

    def start(self, timeout: float = 10.0) -> None:
        """Listen; return once listening.

        Raises:
            OSError: the address cannot be bound.
        """
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._main, args=(ready,), name="web-server", daemon=True)
        self._thread.start()
        try:
            ready.result(timeout)
        except BaseException:
            self._thread.join(timeout)
            self._thread = None
            raise

    def close(self, timeout: float = 5.0) -> None:
        """Close every connection and stop listening (safe to call twice, or before :meth:`start`)."""
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(stop.set)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._thread = None

    def publish(self, kind: str, data: str) -> None:
        """Give every browser ``data`` (a JSON text) of ``kind``, newest wins; from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # closing
            loop.call_soon_threadsafe(self._post, kind, data)

    @property
    def clients(self) -> int:
        """Browsers connected now."""
        return len(self._browsers)

    def stats(self) -> ServerStats:
        """The counters (from any thread)."""
        with self._browsers_lock:
            browsers = list(self._browsers)
            sent, skipped = self._sent_closed, self._skipped_closed
        return ServerStats(
            clients=len(browsers),
            connections=self.connections,
            refused=self.refused,
            refused_hosts=self.refused_hosts,
            evicted=self.evicted,
            published=self.published,
            sent=sent + sum(b.sent for b in browsers),
            skipped=skipped + sum(b.mailbox.skipped for b in browsers),
            commands=self.commands,
            bad_requests=self.bad_requests,
            auth_failures=self.auth_failures,
            auth_refused=self.auth_refused,
            malformed_http=self.malformed_http,
            deadman_stops=self.deadman_stops,
        )

    # -- the loop ---------------------------------------------------------------------------------------------

    def _main(self, ready: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(ready))
        except BaseException as err:  # the server could not start: tell start()
            if not ready.done():
                ready.set_exception(err)
            else:
                self._log.exception("the web server stopped on an error")
        finally:
            loop.close()

    async def _serve(self, ready: concurrent.futures.Future[None]) -> None:
        app = web.Application(middlewares=[self._check_host])
        app.router.add_get("/", self._index)
        app.router.add_get("/ws", self._websocket)
        app.router.add_get("/stats", self._stats)
        app.on_shutdown.append(self._close_browsers)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, logger=_HttpLog(self._http_record))
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.settings.host, self.settings.port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        host, port = runner.addresses[0][:2]
        self._address = (str(host), int(port))
        self._stop = asyncio.Event()
        chores = [asyncio.create_task(self._deadman_watch()), asyncio.create_task(self._housekeep())]
        ready.set_result(None)
        try:
            await self._stop.wait()
        finally:
            for task in chores:
                task.cancel()
            await runner.cleanup()
            for task in list(self._closing):
                task.cancel()

    def _post(self, kind: str, data: str) -> None:
        self.published += 1
        if kind in STICKY_KINDS:
            self._sticky[kind] = data
        for browser in self._browsers:
            browser.post(kind, data)

    @web.middleware
    async def _check_host(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Answer only requests that name this server in their Host (DNS rebinding, :mod:`.access`)."""
        header = request.headers.get("Host")
        if self.hosts.allows(header, _local(request)):
            return await handler(request)
        self.refused_hosts += 1
        name = host_name(header) if header is not None else None
        address = str(request.remote)
        if header is None:
            reason = "a request without a Host header is refused (every browser sends one)"
        else:
            option = f"--allow-host {name}" if name is not None else "--allow-host NAME"
            reason = (
                f"Host {header[:100]!r} is not a name of this server (it answers to localhost, 127.0.0.1, [::1] "
                "and the address it listens on); if this computer is reached by that name, start the server with "
                f"`pluto web {option}` (parameter allow_hosts)"
            )
        self._line(
            "host",
            address,
            logging.WARNING,
            "refused %s %s from %s: %s",
            request.method,
            request.path[:100],
            address,
            reason,
        )
        return web.Response(status=403, text=f"refused: {reason}\n")

    async def _index(self, _request: web.Request) -> web.Response:
        return web.Response(
            body=self._page,
            content_type="text/html",
            charset="utf-8",
            headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
        )

    async def _stats(self, _request: web.Request) -> web.Response:
        return web.Response(body=msgspec.json.encode(self.stats()), content_type="application/json")

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        address = str(request.remote)
        origin = request.headers.get("Origin")
        # The Host passed _check_host; a page may open the WebSocket only from this server's own origin.
        same_site = origin is None or urlsplit(origin).netloc.lower() == request.headers.get("Host", "").lower()
        if not same_site:
            self.refused += 1
            self._line(
                "origin",
                address,
                logging.WARNING,
                "refused a WebSocket from %s opened by a page of %s",
                _peer(request),
                origin,
            )
            return web.Response(status=403, text=f"WebSocket from a page of another site ({origin}) refused\n")
        token = self.settings.token
        # Commands without the token only where no token is set and the request named this server (Host and
        # Origin checked): the conditions are written out here so that no later relaxing of a refusal above opens
        # the commands with it.
        trusted = self.hosts.allows(request.headers.get("Host"), _local(request)) and same_site
        commands_open = token is None and trusted
        offered = request.query.get("token")
        refusal = None
        if not commands_open and offered is not None and token is not None:
            refusal = self._try_token(address, offered, token)
        authorized = commands_open or (offered is not None and token is not None and refusal is None)
        ws = web.WebSocketResponse(
            compress=False, max_msg_size=4096, writer_limit=self.settings.writer_limit, heartbeat=30.0
        )
        await ws.prepare(request)
        browser = _Browser(ws, request, authorized, self.settings.deadman_timeout, self._monotonic())
        if len(self._browsers) >= self.settings.max_clients:
            self._evict(self._crowded(browser.address))
        self.connections += 1
        browser.number = self.connections
        with self._browsers_lock:
            self._browsers.add(browser)
        self._client_line(browser, "browser %s connected (%d now)", browser.peer, len(self._browsers))
        hello = {
            "type": "hello",
            "commands": "open" if commands_open else "token",
            "authorized": authorized,
            "max_speed": self.limits.max_speed,
            "max_turn_rate": self.limits.max_turn_rate,
        }
        browser.post("hello", msgspec.json.encode(hello).decode())
        if refusal is not None:
            self._refuse(browser, refusal, kind="token")
        for kind, data in self._sticky.items():
            browser.post(kind, data)
        browser.sender = asyncio.create_task(self._sender(browser))
        try:
            async for message in ws:
                browser.last_heard = self._monotonic()
                if message.type == WSMsgType.TEXT:
                    self._request(browser, message.data)
                elif message.type == WSMsgType.BINARY:
                    self._refuse(browser, "binary messages are not understood; send JSON text")
                elif message.type == WSMsgType.ERROR:
                    break
        finally:
            browser.sender.cancel()
            self._forget(browser)
            if browser.deadman.closed():
                self._stop_robot("its browser went away")
            self._client_line(browser, "browser %s disconnected (%d now)", browser.peer, len(self._browsers))
        return ws

    def _forget(self, browser: _Browser) -> None:
        """Take a browser out of the ones served, adding its counts to those of the closed ones (once)."""
        with self._browsers_lock:
            if browser in self._browsers:
                self._browsers.discard(browser)
                self._sent_closed += browser.sent
                self._skipped_closed += browser.mailbox.skipped

    def _crowded(self, address: str) -> _Browser:
        """The browser a newcomer from ``address`` pushes out: the one heard from longest ago among the connections
        of the address holding the most (the newcomer's own when it holds as many as any)."""
        per_address = collections.Counter(b.address for b in self._browsers)
        most = max(per_address.values())
        crowd = {address} if per_address[address] >= most else {a for a, n in per_address.items() if n == most}
        return min((b for b in self._browsers if b.address in crowd), key=lambda b: (b.last_heard, b.number))

    def _evict(self, browser: _Browser) -> None:
        """Close ``browser`` to make room for a newcomer: at once out of the count, cleanly closed in the background
        (its connection cut if it does not answer within CLOSE_TIMEOUT)."""
        self._forget(browser)
        self.evicted += 1
        idle = self._monotonic() - browser.last_heard
        limit = self.settings.max_clients
        reason = f"pushed out by a newcomer: at most {limit} browsers, and this one was idle longest ({idle:.0f} s)"
        self._client_line(browser, "browser %s %s", browser.peer, reason)
        task = asyncio.create_task(self._close_evicted(browser, reason))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close_evicted(self, browser: _Browser, reason: str) -> None:
        if browser.sender is not None:
            browser.sender.cancel()  # nothing more after the close frame
        try:
            await asyncio.wait_for(browser.ws.close(code=EVICT_CODE, message=reason.encode()[:123]), CLOSE_TIMEOUT)
        except Exception:
            # It does not read (its socket is full) or answer, or the connection broke: cut it, so that it holds
            # nothing here.
            if browser.transport is not None:
                browser.transport.abort()

    async def _sender(self, browser: _Browser) -> None:
        ws = browser.ws
        try:
            while not ws.closed:
                await browser.wake.wait()
                browser.wake.clear()
                for data in browser.mailbox.take():
                    await ws.send_str(data)
                    browser.sent += 1
        except asyncio.CancelledError:
            raise
        except Exception as err:  # the connection broke while sending: the receiving side ends it
            self._log.debug("sending to %s failed: %s", browser.peer, err)

    def _request(self, browser: _Browser, data: str) -> None:
        try:
            request = parse_request(data)
            if isinstance(request, Auth):
                token = self.settings.token
                if token is None and not browser.authorized:
                    raise CommandError("this server has no token: commands are open only to its own page")
                refusal = None if token is None else self._try_token(browser.address, request.token, token)
                if refusal is None:
                    browser.authorized = True
                    self._reply(browser, {"type": "auth", "authorized": True})
                    return
                self._refuse(browser, refusal, kind="token")
                return
            if not browser.authorized:
                raise CommandError("commands need the token (open the address printed by `pluto web`)")
            command = self.limits.command(request, self._robot_time())
            self._send_command(command)
            self.commands += 1
            browser.deadman.sent(request, self._monotonic())
            if not isinstance(request, Teleop):  # a held button repeats every 0.1 s: no answer to each
                self._reply(browser, {"type": "ack", "op": "stop" if isinstance(request, Stop) else "moveto"})
        except CommandError as err:
            self._refuse(browser, str(err))

    def _try_token(self, address: str, offered: str, token: str) -> str | None:
        """Check a token from ``address`` unless it is in a back-off: None if it is right, else why it is refused."""
        now = self._monotonic()
        wait = self._auth.wait(address, now)
        if wait > 0.0:
            self.auth_refused += 1
            return f"wrong tokens from {address}: the next attempt is checked in {wait:.1f} s, not before"
        if _same(offered, token):
            self._auth.succeeded(address)
            return None
        self.auth_failures += 1
        delay = self._auth.failed(address, now)
        return f"wrong token; the next attempt from {address} is checked after {delay:g} s"

    def _refuse(self, browser: _Browser, reason: str, kind: str = "request") -> None:
        browser.bad += 1
        self.bad_requests += 1
        self._reply(browser, {"type": "error", "error": reason, "count": browser.bad})
        what = "token refused" if kind == "token" else "bad request"
        self._line(kind, browser.address, logging.WARNING, "%s from %s: %s", what, browser.peer, reason)

    def _reply(self, browser: _Browser, reply: dict[str, Any]) -> None:
        browser.post("reply", msgspec.json.encode(reply).decode())

    def _stop_robot(self, why: str) -> None:
        try:
            command = self.limits.command(Stop(), self._robot_time())
            self._send_command(command)
        except Exception:
            self._log.exception("stopping the robot failed")
            return
        self.deadman_stops += 1
        self._log.info("stopped the robot: %s", why)

    async def _deadman_watch(self) -> None:
        period = min(0.1, self.settings.deadman_timeout / 4)
        while True:
            await asyncio.sleep(period)
            now = self._monotonic()
            for browser in list(self._browsers):
                if browser.deadman.expired(now):
                    self._stop_robot(f"the teleop of {browser.peer} stopped repeating")

    async def _close_browsers(self, _app: web.Application) -> None:
        closing = [b.ws.close(code=WSCloseCode.GOING_AWAY, message=b"server stopping") for b in self._browsers]
        if closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), timeout=2.0)

    # -- the log ----------------------------------------------------------------------------------------------

    def _line(self, kind: str, address: str, level: int, message: str, *args: Any) -> None:
        """Log a line of ``kind`` about ``address``, unless that address had its line of the kind lately."""
        held = self._lines.note((kind, address), self._monotonic())
        if held is None:
            return
        if held:
            message += " (%d more %s from %s since the last line)"
            args = (*args, held, _HELD[kind], address)
        self._log.log(level, message, *args)

    def _client_line(self, browser: _Browser, message: str, *args: Any) -> None:
        """Log a line about a connection of ``browser``'s address, unless that address had its share lately."""
        held = self._client_lines.note(("client", browser.address), self._monotonic())
        if held is None:
            return
        if held:
            message += " (%d more lines about the connections of %s held back)"
            args = (*args, held, browser.address)
        self._log.info(message, *args)

    async def _housekeep(self) -> None:
        """Report the lines held back once they are due, though nothing else comes from their address."""
        while True:
            await asyncio.sleep(HOUSEKEEPING_PERIOD)
            now = self._monotonic()
            for (kind, address), count in self._lines.flush(now):
                self._log.warning("%s: %d more %s", address, count, _HELD[kind])
            for (_kind, address), count in self._client_lines.flush(now):
                self._log.info("%s: %d more lines about its connections held back", address, count)

    def _http_record(self, record: logging.LogRecord) -> None:
        """A log record of aiohttp's connection handler: a malformed request becomes one counted, rate-limited line
        without a traceback; anything else (a fault of this server) goes to the log as it is."""
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            self.malformed_http += 1
            args = record.args if isinstance(record.args, tuple) else ()
            address = str(args[0]) if args else "?"
            what = " ".join(str(error.message).split())[:160] or f"HTTP {error.code}"
            self._line("http", address, logging.WARNING, "malformed HTTP request from %s: %s", address, what)
        elif self._log.isEnabledFor(record.levelno):
            self._log.handle(record)


def _same(offered: str, token: str) -> bool:
    return hmac.compare_digest(offered.encode("utf-8", "replace"), token.encode("utf-8"))


def _peer(request: web.Request) -> str:
    """``address:port`` of the client (``address`` alone when the port is unknown)."""
    peername = request.transport.get_extra_info("peername") if request.transport is not None else None
    if isinstance(peername, tuple) and len(peername) >= 2:
        host = str(peername[0])
        return f"[{host}]:{peername[1]}" if ":" in host else f"{host}:{peername[1]}"
    return str(request.remote)


def _local(request: web.Request) -> str | None:
    """The address the client's connection arrived at (the socket's own)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    return str(sockname[0]) if isinstance(sockname, tuple) and sockname else None
