"""The web view's HTTP and WebSocket server (aiohttp), on an asyncio loop of its own thread.

Strategy: ``GET /`` serves the page (``static/index.html``: plain HTML, JavaScript and a canvas, no build step);
``GET /ws`` is one WebSocket per browser; ``GET /stats`` the counters as JSON. The module hands the server each new
message once, already encoded (:meth:`WebServer.publish`, from any thread); the server leaves it in every browser's
:class:`~.mailbox.Mailbox` (newest wins per kind) and wakes that browser's sender task, which sends whatever is
waiting whenever its socket takes more. So the cost of a message is one encoding plus one socket write per browser
that keeps up, a slow browser skips frames instead of queueing them (aiohttp's writer waits for the socket to drain
past ``writer_limit`` bytes, which holds up only that browser's task), and nothing a browser does slows another.

Requests from the page (:mod:`.commands`) are decoded, checked and, if this connection may command, written to
``motion/command`` through the callback the module gives. Who may command: every connection when the server has no
token (it binds 127.0.0.1 by default), else only those that sent the token (``{"op": "auth"}``, or ``?token=`` in
the WebSocket's address, which the page passes on from its own). Watching needs no token. A WebSocket opened by a
page of another site (its ``Origin`` is not this server) is refused, so a web page the user visits cannot drive the
robot through a browser on the robot's computer. A bad request gets ``{"type": "error", ...}`` with the reason and
the connection's count of bad requests; it is counted, rate-limited in the log, and the connection goes on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hmac
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec
from aiohttp import WSCloseCode, WSMsgType, web

from pluto import msgs

from .commands import DEADMAN_TIMEOUT, Auth, CommandError, CommandLimits, DeadMan, Stop, Teleop, parse_request
from .mailbox import Mailbox

__all__ = ["DEFAULT_PORT", "PAGE", "STICKY_KINDS", "ServerStats", "WebServer", "WebSettings"]

DEFAULT_PORT: Final = 8080
"""The usual port of a web view on a robot."""

PAGE: Final = files("pluto.gateways.web").joinpath("static", "index.html")
"""The page the server serves at ``/``."""

STICKY_KINDS: Final = ("map", "path", "mom")
"""Kinds of message a browser that connects later gets at once (the newest of each); frames come by themselves."""

_LOG_INTERVAL = 5.0
"""s between two log lines about bad requests (the first is logged at once)."""


@dataclass(frozen=True)
class WebSettings:
    """Attributes:
    host, port: where to listen (port 0: any free one).
    token: the secret a connection must send before it may command; None: every connection may.
    limits: range checks of the commands.
    max_clients: browsers served at once (more get HTTP 503).
    writer_limit: bytes buffered for one browser before its sender waits for the socket to drain.
    deadman_timeout: s without a teleop repetition before the server stops the robot.
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None
    limits: CommandLimits = field(default_factory=CommandLimits)
    max_clients: int = 64
    writer_limit: int = 64 * 1024
    deadman_timeout: float = DEADMAN_TIMEOUT


class ServerStats(msgspec.Struct, frozen=True, kw_only=True):
    """The server's counters (``GET /stats``)."""

    clients: int
    connections: int
    refused: int
    published: int
    sent: int
    skipped: int
    commands: int
    bad_requests: int
    deadman_stops: int


class _Browser:
    """One WebSocket connection."""

    def __init__(self, ws: web.WebSocketResponse, peer: str, authorized: bool, deadman_timeout: float) -> None:
        self.ws = ws
        self.peer = peer
        self.authorized = authorized
        self.mailbox = Mailbox()
        self.wake = asyncio.Event()
        self.deadman = DeadMan(deadman_timeout)
        self.bad = 0
        self.sent = 0

    def post(self, kind: str, data: str) -> None:
        self.mailbox.post(kind, data)
        self.wake.set()


class WebServer:
    """Serves the page and the WebSocket of every browser.

    Args:
        settings: where to listen and the limits.
        send_command: writes a checked command to ``motion/command`` (called on the server's thread).
        robot_time: the stamp to give a command (the robot's time, s).
        logger: where connections and bad requests are logged.
    """

    def __init__(
        self,
        settings: WebSettings,
        send_command: Callable[[msgs.ActuatorState], None],
        robot_time: Callable[[], float] = time.time,
        logger: logging.Logger | None = None,
    ) -> None:
        self.settings = settings
        self.limits = settings.limits
        """The range checks in force (the module narrows the moveto area once it knows the map)."""
        self._send_command = send_command
        self._robot_time = robot_time
        self._log = logger or logging.getLogger("pluto.web")
        self._page = PAGE.read_bytes()
        self._browsers: set[_Browser] = set()
        self._browsers_lock = threading.Lock()  # the set changes on the loop and is counted from other threads
        self._sticky: dict[str, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._address: tuple[str, int] = (settings.host, settings.port)
        self._last_log = -_LOG_INTERVAL
        self._held_back = 0
        self.connections = 0
        self.refused = 0
        self.published = 0
        self.commands = 0
        self.bad_requests = 0
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
        return ServerStats(
            clients=len(browsers),
            connections=self.connections,
            refused=self.refused,
            published=self.published,
            sent=self._sent_closed + sum(b.sent for b in browsers),
            skipped=self._skipped_closed + sum(b.mailbox.skipped for b in browsers),
            commands=self.commands,
            bad_requests=self.bad_requests,
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
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_get("/ws", self._websocket)
        app.router.add_get("/stats", self._stats)
        app.on_shutdown.append(self._close_browsers)
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
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
        deadman = asyncio.create_task(self._deadman_watch())
        ready.set_result(None)
        try:
            await self._stop.wait()
        finally:
            deadman.cancel()
            await runner.cleanup()

    def _post(self, kind: str, data: str) -> None:
        self.published += 1
        if kind in STICKY_KINDS:
            self._sticky[kind] = data
        for browser in self._browsers:
            browser.post(kind, data)

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
        peer = str(request.remote)
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != request.host:
            self.refused += 1
            self._log.warning("refused a WebSocket from %s opened by a page of %s", peer, origin)
            return web.Response(status=403, text=f"WebSocket from a page of another site ({origin}) refused\n")
        if len(self._browsers) >= self.settings.max_clients:
            self.refused += 1
            return web.Response(status=503, text=f"at most {self.settings.max_clients} browsers at once\n")
        token = self.settings.token
        offered = request.query.get("token")
        authorized = token is None or (offered is not None and _same(offered, token))
        ws = web.WebSocketResponse(
            compress=False, max_msg_size=4096, writer_limit=self.settings.writer_limit, heartbeat=30.0
        )
        await ws.prepare(request)
        browser = _Browser(ws, peer, authorized, self.settings.deadman_timeout)
        self.connections += 1
        with self._browsers_lock:
            self._browsers.add(browser)
        self._log.info("browser %s connected (%d now)", peer, len(self._browsers))
        hello = {
            "type": "hello",
            "commands": "open" if token is None else "token",
            "authorized": authorized,
            "max_speed": self.limits.max_speed,
            "max_turn_rate": self.limits.max_turn_rate,
        }
        browser.post("hello", msgspec.json.encode(hello).decode())
        for kind, data in self._sticky.items():
            browser.post(kind, data)
        sender = asyncio.create_task(self._sender(browser))
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._request(browser, message.data)
                elif message.type == WSMsgType.BINARY:
                    self._refuse(browser, "binary messages are not understood; send JSON text")
                elif message.type == WSMsgType.ERROR:
                    break
        finally:
            sender.cancel()
            with self._browsers_lock:
                self._browsers.discard(browser)
                self._sent_closed += browser.sent
                self._skipped_closed += browser.mailbox.skipped
            if browser.deadman.closed():
                self._stop_robot("its browser went away")
            self._log.info("browser %s disconnected (%d now)", peer, len(self._browsers))
        return ws

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
                if self.settings.token is None or _same(request.token, self.settings.token):
                    browser.authorized = True
                    self._reply(browser, {"type": "auth", "authorized": True})
                    return
                raise CommandError("wrong token")
            if not browser.authorized:
                raise CommandError("commands need the token (open the address printed by `pluto web`)")
            command = self.limits.command(request, self._robot_time())
            self._send_command(command)
            self.commands += 1
            browser.deadman.sent(request, time.monotonic())
            if not isinstance(request, Teleop):  # a held button repeats every 0.1 s: no answer to each
                self._reply(browser, {"type": "ack", "op": "stop" if isinstance(request, Stop) else "moveto"})
        except CommandError as err:
            self._refuse(browser, str(err))

    def _refuse(self, browser: _Browser, reason: str) -> None:
        browser.bad += 1
        self.bad_requests += 1
        self._reply(browser, {"type": "error", "error": reason, "count": browser.bad})
        now = time.monotonic()
        if now - self._last_log >= _LOG_INTERVAL:
            more = f" ({self._held_back} more since the last report)" if self._held_back else ""
            self._log.warning("bad request from %s: %s%s", browser.peer, reason, more)
            self._last_log, self._held_back = now, 0
        else:
            self._held_back += 1

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
            now = time.monotonic()
            for browser in list(self._browsers):
                if browser.deadman.expired(now):
                    self._stop_robot(f"the teleop of {browser.peer} stopped repeating")

    async def _close_browsers(self, _app: web.Application) -> None:
        closing = [b.ws.close(code=WSCloseCode.GOING_AWAY, message=b"server stopping") for b in self._browsers]
        if closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), timeout=2.0)


def _same(offered: str, token: str) -> bool:
    return hmac.compare_digest(offered.encode("utf-8", "replace"), token.encode("utf-8"))
