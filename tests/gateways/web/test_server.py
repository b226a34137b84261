"""``pluto web``'s server against aiohttp's WebSocket client: the page, frames that carry what was written on the bus,
commands that reach motion/command, the token, the dead-man stop, bad input, and newest-wins for a slow browser."""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.errors import ConfigError
from pluto.gateways.web.commands import CommandLimits
from pluto.gateways.web.module import WebModule, WebParams, command_token, is_loopback
from pluto.gateways.web.server import WebServer, WebSettings
from pluto.sim.module import SimSettings
from tests.helpers import wait_until

WAIT = 20.0
"""Wall seconds something may take (only a hang takes that long)."""

BEAMS = 181
ANGLES = [-math.pi / 2 + math.pi * k / (BEAMS - 1) for k in range(BEAMS)]
RANGES = [2.0] * BEAMS
TRUTH = (5.0, 4.0, 0.0)


class FakeRobot:
    """Writes the true pose, a pose estimate and a scan again and again until stopped (a view that connects later
    sees them in its next frame)."""

    def __init__(self, bus: Bus) -> None:
        self.truth = bus.create_publisher(names.SIM_TRUTH)
        self.pose = bus.create_publisher(names.LOCALIZATION_POSE)
        self.scan = bus.create_publisher(names.SICK_SCAN_MM)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="fake-robot")

    def _run(self) -> None:
        stamp = 0.0
        x, y, theta = TRUTH
        while not self.stop.is_set():
            stamp += 0.05
            self.truth.write(msgs.Odometry(stamp=stamp, x=x, y=y, theta=theta))
            cov = [0.01, 0.0, 0.0, 0.0, 0.04, 0.0, 0.0, 0.0, 0.001]
            self.pose.write(msgs.PoseEstimate(stamp=stamp, pose=[x, y, 0.0, theta, 0.0, 0.0], covariance=cov))
            self.scan.write(msgs.LaserScan(stamp=stamp, ranges=RANGES, angles=ANGLES, count=BEAMS))
            self.stop.wait(0.05)  # pacing the writes, not a wait for a result

    def __enter__(self) -> FakeRobot:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


class Commands:
    """Every value written to motion/command."""

    def __init__(self, bus: Bus) -> None:
        self.values: list[msgs.ActuatorState] = []
        self._sub = bus.create_subscription(names.MOTION_COMMAND, self.values.append, depth=64)


def _start(bus: Bus, **params: Any) -> WebModule:
    module = WebModule(bus, WebParams(port=0, **params))
    module.start()
    return module


@pytest.fixture
def web(bus: Bus) -> Iterator[WebModule]:
    module = _start(bus, map="office")
    try:
        yield module
    finally:
        module.stop()


def _base(module: WebModule) -> str:
    host, port = module.server.address
    return f"http://{host}:{port}"


def run(scenario: Callable[[aiohttp.ClientSession], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with aiohttp.ClientSession() as session:
            return await asyncio.wait_for(scenario(session), WAIT)

    return asyncio.run(main())


async def receive_until(
    ws: aiohttp.ClientWebSocketResponse, wanted: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The first message for which ``wanted`` is true."""
    while True:
        msg = await ws.receive()
        assert msg.type == aiohttp.WSMsgType.TEXT, f"the server closed the WebSocket: {msg}"
        data: dict[str, Any] = json.loads(msg.data)
        if wanted(data):
            return data


async def authorize(ws: aiohttp.ClientWebSocketResponse, token: str) -> dict[str, Any]:
    """Send ``token`` until the server checks it (it refuses attempts unchecked during the back-off after a wrong
    one, saying for how long); return its answer."""
    while True:
        await ws.send_str(json.dumps({"op": "auth", "token": token}))
        reply = await receive_until(ws, lambda m: m["type"] in ("auth", "error"))
        waiting = re.search(r"checked in ([\d.]+) s, not before", reply.get("error", ""))
        if waiting is None:
            return reply
        await asyncio.sleep(float(waiting.group(1)) + 0.05)  # the wait the server announced


def test_the_page_and_the_stats_are_served(web: WebModule) -> None:
    async def scenario(session: aiohttp.ClientSession) -> tuple[str, str, dict[str, Any]]:
        async with session.get(_base(web) + "/") as page:
            text = await page.text()
            ctype = page.content_type
        async with session.get(_base(web) + "/stats") as stats:
            return text, ctype, await stats.json()

    text, ctype, stats = run(scenario)
    assert ctype == "text/html" and "<canvas" in text and "/ws" in text
    assert stats["clients"] == 0 and "skipped" in stats


def test_frames_carry_the_robot_the_estimate_and_the_scan_on_the_map(bus: Bus, web: WebModule) -> None:
    async def scenario(session: aiohttp.ClientSession) -> list[dict[str, Any]]:
        async with session.ws_connect(_base(web) + "/ws") as ws:
            hello = await receive_until(ws, lambda m: m["type"] == "hello")
            world = await receive_until(ws, lambda m: m["type"] == "map")
            frame = await receive_until(ws, lambda m: m["type"] == "frame" and "scan" in m and "truth" in m)
            return [hello, world, frame]

    with FakeRobot(bus):
        hello, world, frame = run(scenario)
    assert hello["commands"] == "open" and hello["authorized"] and hello["max_speed"] == 0.5
    assert world["name"] and len(world["walls"]) > 4
    assert frame["truth"] == list(TRUTH)
    assert frame["pose"]["ellipse"][0] == pytest.approx(0.4) and frame["pose"]["ellipse"][1] == pytest.approx(0.2)
    points = frame["scan"]["points"]
    assert len(points) == 2 * BEAMS
    lx = TRUTH[0] + 0.25  # the laser is 0.25 m ahead of the centre
    for k in range(0, len(points), 2):  # every point 2 m from the laser
        assert math.hypot(points[k] - lx, points[k + 1] - TRUTH[1]) == pytest.approx(2.0, abs=2e-3)


def test_a_moveto_and_teleop_reach_motion_command_and_the_deadman_stops_the_robot(bus: Bus, web: WebModule) -> None:
    commands = Commands(bus)

    async def scenario(session: aiohttp.ClientSession) -> dict[str, Any]:
        async with session.ws_connect(_base(web) + "/ws") as ws:
            await ws.send_str(json.dumps({"op": "moveto", "x": 3.5, "y": 2.0}))
            ack = await receive_until(ws, lambda m: m["type"] in ("ack", "error"))
            await ws.send_str(json.dumps({"op": "teleop", "v": 0.3, "w": 0.0}))
            # then nothing: the dead-man rule must stop the robot by itself
            await asyncio.to_thread(
                wait_until,
                lambda: any(c.velocity == [0.0, 0.0] for c in commands.values),
                WAIT,
                message="the dead-man stop",
            )
            return ack

    ack = run(scenario)
    assert ack == {"type": "ack", "op": "moveto"}
    flags = [(c.cmd_flags, c.position or c.velocity) for c in commands.values]
    assert flags[:3] == [(42, [3.5, 2.0]), (20, [0.3, 0.0]), (20, [0.0, 0.0])]
    assert web.server.stats().deadman_stops == 1


def test_closing_the_page_while_driving_stops_the_robot(bus: Bus, web: WebModule) -> None:
    commands = Commands(bus)

    async def scenario(session: aiohttp.ClientSession) -> None:
        async with session.ws_connect(_base(web) + "/ws") as ws:
            await ws.send_str(json.dumps({"op": "teleop", "v": 0.0, "w": 0.5}))
            await asyncio.to_thread(wait_until, lambda: commands.values, WAIT, message="the teleop")

    run(scenario)
    wait_until(lambda: len(commands.values) >= 2, WAIT, message="the stop after closing")
    assert [c.velocity for c in commands.values[:2]] == [[0.0, 0.5], [0.0, 0.0]]


def test_bad_input_gets_an_error_and_a_count_and_the_connection_goes_on(bus: Bus, web: WebModule) -> None:
    commands = Commands(bus)

    async def scenario(session: aiohttp.ClientSession) -> list[dict[str, Any]]:
        async with session.ws_connect(_base(web) + "/ws") as ws:
            replies = []
            for bad in [
                "{",
                '{"op": "warp"}',
                '{"op": "teleop", "v": 9, "w": 0}',
                '{"op": "moveto", "x": 500, "y": 0}',
            ]:
                await ws.send_str(bad)
                replies.append(await receive_until(ws, lambda m: m["type"] == "error"))
            await ws.send_bytes(b"\x00\x01")
            replies.append(await receive_until(ws, lambda m: m["type"] == "error"))
            await ws.send_str(json.dumps({"op": "stop"}))
            replies.append(await receive_until(ws, lambda m: m["type"] == "ack"))
            return replies

    replies = run(scenario)
    assert [r.get("count") for r in replies[:5]] == [1, 2, 3, 4, 5]
    assert "not JSON" in replies[0]["error"]
    assert "out of range" in replies[2]["error"] and "outside the map" in replies[3]["error"]
    assert "binary" in replies[4]["error"]
    assert replies[5] == {"type": "ack", "op": "stop"}
    wait_until(lambda: commands.values, WAIT, message="the stop")
    assert [(c.cmd_flags, c.velocity) for c in commands.values] == [(20, [0.0, 0.0])]  # nothing bad got through
    assert web.server.stats().bad_requests == 5


def test_with_a_token_watching_is_open_and_commanding_needs_the_token(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands = Commands(bus)
    monkeypatch.setenv("PLUTO_WEB_TOKEN", "s3cret")
    module = _start(bus)
    base = _base(module)

    async def scenario(session: aiohttp.ClientSession) -> tuple[dict[str, Any], ...]:
        async with session.ws_connect(base + "/ws") as ws:
            hello = await receive_until(ws, lambda m: m["type"] == "hello")
            await receive_until(ws, lambda m: m["type"] == "frame")  # watching needs no token
            await ws.send_str(json.dumps({"op": "moveto", "x": 1.0, "y": 1.0}))
            refused = await receive_until(ws, lambda m: m["type"] == "error")
            await ws.send_str(json.dumps({"op": "auth", "token": "wrong"}))
            wrong = await receive_until(ws, lambda m: m["type"] == "error")
            auth = await authorize(ws, "s3cret")  # once the back-off after the wrong one has passed
            await ws.send_str(json.dumps({"op": "moveto", "x": 1.0, "y": 1.0}))
            ack = await receive_until(ws, lambda m: m["type"] in ("ack", "error"))
        async with session.ws_connect(base + "/ws?token=s3cret") as ws:
            hello2 = await receive_until(ws, lambda m: m["type"] == "hello")
        return hello, refused, wrong, auth, ack, hello2

    try:
        hello, refused, wrong, auth, ack, hello2 = run(scenario)
    finally:
        module.stop()
    assert hello["commands"] == "token" and not hello["authorized"]
    assert "token" in refused["error"] and wrong["error"].startswith("wrong token; the next attempt")
    assert auth["authorized"] and ack["type"] == "ack" and hello2["authorized"]
    assert "?token=s3cret" in module.url
    wait_until(lambda: commands.values, WAIT, message="the moveto")
    assert [(c.cmd_flags, c.position) for c in commands.values] == [(42, [1.0, 1.0])]


def test_the_token_comes_from_a_file_before_the_environment(
    bus: Bus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUTO_WEB_TOKEN", "from-the-environment")
    token_file = tmp_path / "token"
    token_file.write_text("from-the-file\n")
    token_file.chmod(0o600)
    module = _start(bus, token_file=str(token_file))
    try:
        assert module.token == "from-the-file"
    finally:
        module.stop()
    token_file.write_text("")
    with pytest.raises(ConfigError, match="empty"):
        _start(bus, token_file=str(token_file))


def test_bound_elsewhere_a_token_is_made_and_on_loopback_none_is_needed() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("robot.local")
    assert command_token("127.0.0.1", "") is None
    assert command_token("127.0.0.1", "given") == "given" and command_token("0.0.0.0", "given") == "given"
    made, other = command_token("0.0.0.0", ""), command_token("0.0.0.0", "")
    assert made and other and len(made) >= 16 and made != other


def test_a_websocket_opened_by_a_page_of_another_site_is_refused(web: WebModule) -> None:
    async def scenario(session: aiohttp.ClientSession) -> int:
        try:
            async with session.ws_connect(_base(web) + "/ws", origin="http://evil.example"):
                return 101
        except aiohttp.WSServerHandshakeError as err:
            return err.status

    assert run(scenario) == 403
    assert web.server.stats().refused == 1


def test_a_slow_browser_skips_frames_and_does_not_hold_up_the_others() -> None:
    server = WebServer(WebSettings(port=0, limits=CommandLimits(), writer_limit=16 * 1024), lambda _c: None)
    server.start()
    big = "x" * 200_000  # frames far larger than the socket buffers can hold for a browser that does not read
    count = 300
    try:

        async def scenario(session: aiohttp.ClientSession) -> list[int]:
            host, port = server.address
            async with (
                session.ws_connect(f"http://{host}:{port}/ws") as _slow,
                session.ws_connect(f"http://{host}:{port}/ws") as fast,
            ):
                await asyncio.to_thread(wait_until, lambda: server.stats().clients == 2, WAIT)
                seen: list[int] = []
                for seq in range(count):
                    server.publish("frame", json.dumps({"type": "frame", "seq": seq, "pad": big}))
                    if seq % 10 == 9:
                        await asyncio.sleep(0.01)  # the publisher's pace, not a wait for a result
                while not seen or seen[-1] != count - 1:
                    msg = await receive_until(fast, lambda m: m["type"] == "frame")
                    seen.append(msg["seq"])
                return seen

        seen = run(scenario)
    finally:
        server.close()
    assert seen == sorted(seen)  # in order, newest last, never an old one after a new one
    stats = server.stats()
    # the slow browser could take only a few of the 300 frames of 200 kB: the rest were skipped, not queued
    assert stats.skipped > count // 2
    assert stats.sent < count + len(seen) + 10


def test_an_oversized_message_closes_only_its_own_connection(web: WebModule) -> None:
    async def scenario(session: aiohttp.ClientSession) -> tuple[int | None, dict[str, Any]]:
        async with session.ws_connect(_base(web) + "/ws") as other, session.ws_connect(_base(web) + "/ws") as ws:
            await ws.send_str(json.dumps({"op": "stop", "pad": "x" * 100_000}))
            while (await ws.receive()).type == aiohttp.WSMsgType.TEXT:
                pass  # the frames sent before the server read the message
            await other.send_str(json.dumps({"op": "stop"}))
            return ws.close_code, await receive_until(other, lambda m: m["type"] == "ack")

    code, ack = run(scenario)
    assert code == 1009  # "message too big"
    assert ack == {"type": "ack", "op": "stop"}


def test_without_a_map_it_draws_the_world_of_a_simulator_that_comes_later(bus: Bus) -> None:
    module = _start(bus, mom_period=0.2)
    try:

        async def scenario(session: aiohttp.ClientSession) -> dict[str, Any]:
            async with session.ws_connect(_base(module) + "/ws") as ws:
                await receive_until(ws, lambda m: m["type"] == "hello")
                # a simulator comes up: it answers sim/world with its settings
                service = bus.create_service("sim/world", lambda _request: SimSettings(world="campus"))
                try:
                    return await receive_until(ws, lambda m: m["type"] == "map")
                finally:
                    bus.release(service)

        world = run(scenario)
    finally:
        module.stop()
    assert world["name"] == "campus" and world["source"] == "campus" and len(world["walls"]) > 4
    # a moveto is now checked against the campus's bounds
    assert module.server.limits.area is not None
