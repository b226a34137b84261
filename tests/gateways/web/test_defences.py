"""``pluto web`` against hostile pages and clients: DNS rebinding, token guessing, idle sockets crowding the
browsers out, and requests that are not HTTP."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.gateways.web.commands import CommandLimits
from pluto.gateways.web.module import WebModule, WebParams
from pluto.gateways.web.server import EVICT_CODE, WebServer, WebSettings
from tests.gateways.web.test_server import Commands, receive_until
from tests.helpers import wait_until

WAIT = 60.0
"""Wall seconds a scenario may take (only a hang takes that long)."""


def run(scenario: Callable[[aiohttp.ClientSession], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            return await asyncio.wait_for(scenario(session), WAIT)

    return asyncio.run(main())


@pytest.fixture
def web(bus: Bus) -> Iterator[WebModule]:
    module = WebModule(bus, WebParams(port=0, map="office", allow_hosts=["robot.local"]))
    module.start()
    try:
        yield module
    finally:
        module.stop()


@pytest.fixture
def server() -> Iterator[WebServer]:
    server = WebServer(WebSettings(port=0, limits=CommandLimits()), lambda _c: None)
    server.start()
    try:
        yield server
    finally:
        server.close()


def _base(server: WebServer) -> str:
    host, port = server.address
    return f"http://{host}:{port}"


# -- DNS rebinding ---------------------------------------------------------------------------------------------


def test_dns_rebinding_is_refused_and_the_robot_is_not_commanded(bus: Bus, web: WebModule) -> None:
    commands = Commands(bus)
    base = _base(web.server)
    port = web.server.address[1]
    # what a browser sends once a hostile site's name resolves to 127.0.0.1: its own name, in Host and Origin
    evil = {"Host": f"evil.example:{port}"}
    origin = f"http://evil.example:{port}"

    async def scenario(session: aiohttp.ClientSession) -> tuple[list[int], list[str], dict[str, Any] | None]:
        statuses, texts = [], []
        for path in ("/", "/stats"):
            async with session.get(base + path, headers=evil) as reply:
                statuses.append(reply.status)
                texts.append(await reply.text())
        hello = None
        try:
            async with session.ws_connect(base + "/ws", headers=evil, origin=origin) as ws:
                statuses.append(101)
                hello = await receive_until(ws, lambda m: m["type"] == "hello")
                await ws.send_str(json.dumps({"op": "teleop", "v": 0.0, "w": 0.8}))  # what the page would do
                await ws.send_str(json.dumps({"op": "stop"}))
                await receive_until(ws, lambda m: m["type"] == "ack")
        except aiohttp.WSServerHandshakeError as err:
            statuses.append(err.status)
        # the user's own page, opened at 127.0.0.1, still commands
        async with session.ws_connect(base + "/ws", origin=base) as ws:
            await ws.send_str(json.dumps({"op": "moveto", "x": 3.5, "y": 2.0}))
            await receive_until(ws, lambda m: m["type"] == "ack")
        return statuses, texts, hello

    statuses, texts, hello = run(scenario)
    assert hello is None, f"the hostile page got a hello: {hello}"
    assert statuses == [403, 403, 403]
    assert "evil.example" in texts[0] and "--allow-host evil.example" in texts[0]
    assert web.server.stats().refused_hosts == 3
    wait_until(lambda: commands.values, WAIT, message="the moveto of the user's own page")
    assert [(c.cmd_flags, c.position) for c in commands.values] == [(42, [3.5, 2.0])]  # nothing from the hostile page


def test_the_loopback_names_and_an_allowed_name_are_served_with_commands_open(web: WebModule) -> None:
    base = _base(web.server)
    port = web.server.address[1]

    async def scenario(session: aiohttp.ClientSession) -> list[Any]:
        hellos: list[Any] = []
        for name in ("localhost", "127.0.0.1", "[::1]", "robot.local"):
            async with session.get(base + "/stats", headers={"Host": f"{name}:{port}"}) as reply:
                assert reply.status == 200, name
            headers = {"Host": f"{name}:{port}"}
            async with session.ws_connect(base + "/ws", headers=headers, origin=f"http://{name}:{port}") as ws:
                hellos.append(await receive_until(ws, lambda m: m["type"] == "hello"))
        return hellos

    hellos = run(scenario)
    assert [(h["commands"], h["authorized"]) for h in hellos] == [("open", True)] * 4
    assert web.server.stats().refused_hosts == 0


# -- token guessing --------------------------------------------------------------------------------------------


class FakeClock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_wrong_tokens_back_off_and_the_right_one_is_checked_once_the_back_off_is_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    sent: list[msgs.ActuatorState] = []
    settings = WebSettings(port=0, token="s3cret", limits=CommandLimits(), auth_backoff=0.5, auth_backoff_max=4.0)
    server = WebServer(settings, sent.append, monotonic=clock)
    server.start()
    caplog.set_level(logging.WARNING, logger="pluto.web")

    async def scenario(session: aiohttp.ClientSession) -> list[str]:
        async def auth(ws: aiohttp.ClientWebSocketResponse, token: str) -> str:
            await ws.send_str(json.dumps({"op": "auth", "token": token}))
            reply = await receive_until(ws, lambda m: m["type"] in ("auth", "error"))
            return "authorized" if reply["type"] == "auth" else str(reply["error"])

        async with session.ws_connect(_base(server) + "/ws") as ws:
            replies = [await auth(ws, "guess-0")]  # checked: wrong
            replies += [await auth(ws, f"guess-{k}") for k in range(1, 21)]  # refused unchecked
            replies.append(await auth(ws, "s3cret"))  # the right one, still in the back-off: refused unchecked
            clock.now += 0.5
            replies.append(await auth(ws, "guess-21"))  # checked again: wrong, a back-off twice as long
            clock.now += 0.5
            replies.append(await auth(ws, "s3cret"))  # refused unchecked: 0.5 s of it left
            clock.now += 0.5
            replies.append(await auth(ws, "s3cret"))  # checked: right
            await ws.send_str(json.dumps({"op": "stop"}))
            await receive_until(ws, lambda m: m["type"] == "ack")
        async with session.ws_connect(_base(server) + "/ws?token=wrong") as ws:  # the token in the address counts
            hello = await receive_until(ws, lambda m: m["type"] == "hello")
            replies.append(str((await receive_until(ws, lambda m: m["type"] == "error"))["error"]))
            assert not hello["authorized"]
        return replies

    try:
        replies = run(scenario)
    finally:
        server.close()
    assert replies[0] == "wrong token; the next attempt from 127.0.0.1 is checked after 0.5 s"
    assert all(
        r == "wrong tokens from 127.0.0.1: the next attempt is checked in 0.5 s, not before" for r in replies[1:22]
    )
    assert replies[22] == "wrong token; the next attempt from 127.0.0.1 is checked after 1 s"
    assert replies[23] == "wrong tokens from 127.0.0.1: the next attempt is checked in 0.5 s, not before"
    assert replies[24] == "authorized"
    assert replies[25] == "wrong token; the next attempt from 127.0.0.1 is checked after 0.5 s"  # afresh after success
    assert len(sent) == 1 and sent[0].velocity == [0.0, 0.0]
    stats = server.stats()
    assert (stats.auth_failures, stats.auth_refused) == (3, 22)
    # one line about the wrong tokens of that address (the rest are counted for the next line), no flood
    lines = [r for r in caplog.records if "token refused" in r.getMessage()]
    assert len(lines) == 1 and "127.0.0.1" in lines[0].getMessage()


# -- crowding --------------------------------------------------------------------------------------------------


async def raw_websocket(server: WebServer, local: str = "127.0.0.1") -> tuple[asyncio.StreamReader, Any, bytes]:
    """A WebSocket opened by hand from ``local`` that then never reads nor sends (what a flood of idle sockets is),
    with the status line of the server's answer."""
    host, port = server.address
    reader, writer = await asyncio.open_connection(host, port, local_addr=(local, 0))
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    return reader, writer, head.split(b"\r\n")[0]


async def close_frame(reader: asyncio.StreamReader) -> tuple[int, str]:
    """Skip the server's frames up to its close frame; return the code and the reason of that one."""
    while True:
        first, second = await reader.readexactly(2)
        size = second & 0x7F
        if size == 126:
            size = int.from_bytes(await reader.readexactly(2), "big")
        elif size == 127:
            size = int.from_bytes(await reader.readexactly(8), "big")
        payload = await reader.readexactly(size)
        if first & 0x0F == 0x8:
            return int.from_bytes(payload[:2], "big"), payload[2:].decode()


def test_hundreds_of_idle_sockets_never_lock_a_real_browser_out(web: WebModule) -> None:
    server = web.server
    limit = server.settings.max_clients
    flood = 300

    async def scenario(
        session: aiohttp.ClientSession,
    ) -> tuple[dict[str, Any], dict[str, Any], tuple[int, str], set[bytes]]:
        sockets = [await raw_websocket(server) for _ in range(flood)]
        try:
            async with session.ws_connect(_base(server) + "/ws") as ws:
                hello = await receive_until(ws, lambda m: m["type"] == "hello")
                frame = await receive_until(ws, lambda m: m["type"] == "frame")
                closed = await close_frame(sockets[0][0])  # the first idle socket went first
            return hello, frame, closed, {status for _, _, status in sockets}
        finally:
            for _, writer, _ in sockets:
                writer.close()

    hello, frame, (code, reason), statuses = run(scenario)
    assert hello["commands"] == "open" and frame["clients"] >= 1
    assert statuses == {b"HTTP/1.1 101 Switching Protocols"}
    assert code == EVICT_CODE and "idle longest" in reason and f"at most {limit} browsers" in reason
    stats = server.stats()
    assert stats.evicted == flood + 1 - limit and stats.connections == flood + 1
    assert stats.clients <= limit


def test_a_crowd_from_one_address_pushes_out_its_own_sockets_not_a_viewer_of_another() -> None:
    settings = WebSettings(port=0, limits=CommandLimits(), max_clients=4)
    crowded = WebServer(settings, lambda _c: None)
    crowded.start()

    async def scenario(session: aiohttp.ClientSession) -> tuple[dict[str, Any], tuple[int, str]]:
        other = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
        async with (
            aiohttp.ClientSession(connector=other) as viewer_session,
            viewer_session.ws_connect(_base(crowded) + "/ws") as viewer,  # the oldest and idle longest
        ):
            await receive_until(viewer, lambda m: m["type"] == "hello")
            sockets = [await raw_websocket(crowded) for _ in range(10)]
            try:
                crowded.publish("note", json.dumps({"type": "note", "text": "still here"}))
                note = await receive_until(viewer, lambda m: m["type"] == "note")
                return note, await close_frame(sockets[0][0])
            finally:
                for _, writer, _ in sockets:
                    writer.close()

    try:
        note, (code, _reason) = run(scenario)
        stats = crowded.stats()
    finally:
        crowded.close()
    assert note["text"] == "still here" and code == EVICT_CODE
    assert stats.evicted == 10 - 3  # the 127.0.0.1 crowd made room among its own


# -- requests that are not HTTP --------------------------------------------------------------------------------

GARBAGE = [
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 a TLS hello to an HTTP port\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nthis is no header\r\n\r\n",
    b"GET / HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n",
    b"\x00\xff\x00\xff\r\n\r\n",
]


def test_malformed_http_is_answered_counted_and_logged_in_one_line_without_a_traceback(
    server: WebServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario(session: aiohttp.ClientSession) -> tuple[list[bytes], dict[str, Any]]:
        host, port = server.address
        answers = []
        for garbage in GARBAGE:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(garbage)
            answers.append(await reader.read())  # the server answers and closes
            writer.close()
        async with session.get(_base(server) + "/stats") as reply:  # and goes on serving
            return answers, await reply.json()

    answers, stats = run(scenario)
    assert all(a.split(b"\r\n")[0] in (b"HTTP/1.0 400 Bad Request", b"HTTP/1.1 400 Bad Request") for a in answers)
    assert stats["malformed_http"] == len(GARBAGE)
    assert [r for r in caplog.records if r.exc_info or r.exc_text] == []  # no traceback anywhere
    lines = [r.getMessage() for r in caplog.records if "malformed HTTP request" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("malformed HTTP request from 127.0.0.1: "), lines
