"""Both names of the Foxglove WebSocket protocol reach ``pluto foxglove``: ``foxglove.websocket.v1`` (Lichtblick,
PlotJuggler, ``@foxglove/ws-protocol``) and ``foxglove.sdk.v1`` (Foxglove's app), on the simulated robot.

- The recorded exchanges of Foxglove's JavaScript client (``vectors/``, see :mod:`.exchanges`) are replayed with the
  ``websockets`` library: the same handshake gets the same answer (the subprotocol the client offered, the same
  accept key), the same channels are advertised with the same schemas, and the client's recorded subscriptions
  bring messages of the recorded shape.
- The npm client itself runs when ``node`` and an install of ``@foxglove/ws-protocol`` are here (skipped, saying
  how to install it, otherwise: the tests download nothing).
- A WebSocket that offers neither name is refused with a reason that says which names to offer, and counted.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from pluto.bus import Bus
from pluto.gateways.foxglove.module import FoxgloveModule, FoxgloveParams
from tests.gateways.foxglove.client import message_class
from tests.gateways.foxglove.exchanges import (
    RECORDED_MESSAGES,
    SUBPROTOCOLS,
    load_vector,
    npm_client_missing,
    run_npm_client,
    split_head,
    vector_name,
)
from tests.scenarios.stack import Lockstep

WAIT = 60.0
"""Wall seconds a handshake or a message may take (only a hang takes that long)."""

CLOSE = b"\x88\x80\x00\x00\x00\x00"
"""A client's close frame (no status, a zero mask): the end of a WebSocket opened by hand."""

# Headers the websockets library writes itself; the others of a recorded request are sent as they were.
MANAGED = {
    "host",
    "upgrade",
    "connection",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
    "user-agent",
}


@pytest.fixture
def simulated(bus: Bus) -> Iterator[FoxgloveModule]:
    """``foxglove`` on the simulated robot (world office, twice real time), as the vectors were recorded."""
    with Lockstep(bus) as sim:
        sim.start(world="office", seed=2, rate=2.0)
        module = sim.add(FoxgloveModule(bus, FoxgloveParams(port=0)))
        sim.resume()
        yield module


@pytest.fixture
def gateway(bus: Bus) -> Iterator[FoxgloveModule]:
    module = FoxgloveModule(bus, FoxgloveParams(port=0, map="office"))
    module.start()
    try:
        yield module
    finally:
        module.stop()


def _headers(head: str) -> list[tuple[str, str]]:
    return [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:])]


def _header(head: str, name: str) -> str | None:
    return next((v for k, v in _headers(head) if k.lower() == name), None)


def _offered(head: str) -> list[str]:
    return [p.strip() for k, v in _headers(head) if k.lower() == "sec-websocket-protocol" for p in v.split(",")]


def _raw_handshake(port: int, request: str) -> str:
    """Send ``request`` (a recorded head) as it was; the head of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(request.encode("latin-1") + b"\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, f"the server closed during the handshake after {data!r}"
            data += chunk
        sock.sendall(CLOSE)
    return split_head(data)[0]


def _recv_text(ws: ClientConnection) -> dict[str, Any]:
    while True:
        data = ws.recv(timeout=WAIT)
        if isinstance(data, str):
            doc: dict[str, Any] = json.loads(data)
            return doc


def _decode(channel: dict[str, Any], payload: bytes) -> Any:
    if channel["encoding"] == "json":
        return json.loads(payload)
    return message_class(channel["schemaName"], base64.b64decode(channel["schema"])).FromString(payload)


def _shape(message: Any) -> Any:
    """What must match between a recorded message and a replayed one: the fields present (their values differ)."""
    if isinstance(message, dict):
        return sorted(message)
    return sorted(field.name for field, _ in message.ListFields())


def _advertised(frames: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    channels: dict[str, dict[str, Any]] = {}
    for frame in frames:
        doc = json.loads(frame["text"]) if "text" in frame else {}
        if doc.get("op") == "advertise":
            channels.update({c["topic"]: c for c in doc["channels"]})
    return channels


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
def test_a_recorded_exchange_of_the_npm_client_replays(simulated: FoxgloveModule, subprotocol: str) -> None:
    vector = load_vector(vector_name(subprotocol))
    _check_raw_handshake(simulated.port, vector, subprotocol)

    # The exchange, with the websockets library offering what the client offered.
    recorded_channels = _advertised(vector["server_frames"])
    extras = [(k, v) for k, v in _headers(vector["request"]) if k.lower() not in MANAGED]
    compression = "deflate" if _header(vector["request"], "sec-websocket-extensions") else None
    with connect(
        f"ws://127.0.0.1:{simulated.port}",
        subprotocols=_offered(vector["request"]),  # type: ignore[arg-type]
        additional_headers=extras,
        compression=compression,
        user_agent_header=_header(vector["request"], "user-agent"),
        proxy=None,
        open_timeout=WAIT,
        max_size=None,
    ) as ws:
        assert ws.subprotocol == subprotocol
        info = _recv_text(ws)
        recorded_info = json.loads(vector["server_frames"][0]["text"])
        assert info["op"] == recorded_info["op"] == "serverInfo"
        assert sorted(info) == sorted(recorded_info)
        channels = _same_channels(ws, recorded_channels)
        subscriptions = _replay_client_frames(ws, vector, recorded_channels, channels)
        recorded_messages = _recorded_messages(vector, recorded_channels, subscriptions)
        assert sorted(recorded_messages) == sorted(subscriptions.values())

        got: dict[str, list[Any]] = {topic: [] for topic in subscriptions.values()}
        while any(len(messages) < RECORDED_MESSAGES for messages in got.values()):
            data = ws.recv(timeout=WAIT)
            if isinstance(data, bytes) and data[:1] == b"\x01":
                (sub,) = struct.unpack_from("<I", data, 1)
                topic = subscriptions[sub]  # only the subscription ids the client chose
                got[topic].append(_decode(channels[topic], data[13:]))
    for topic, messages in got.items():
        for message in messages:
            assert _shape(message) == _shape(recorded_messages[topic][0]), topic
    scan = got["/scan"][0]
    assert scan.frame_id == "laser" and len(scan.ranges) == len(recorded_messages["/scan"][0].ranges)
    assert simulated.front.accepted[subprotocol] == 2  # the raw handshake and the exchange


def _check_raw_handshake(port: int, vector: dict[str, Any], subprotocol: str) -> None:
    """The handshake as the client wrote it, byte for byte: the same answer (the accept key is the key's)."""
    assert _offered(vector["request"]) == [subprotocol]
    answered = _header(vector["response"], "sec-websocket-protocol")
    assert answered == subprotocol  # what the client was told when the vector was recorded
    answer = _raw_handshake(port, vector["request"])
    assert answer.startswith("HTTP/1.1 101"), answer
    assert _header(answer, "sec-websocket-protocol") == subprotocol
    assert _header(answer, "sec-websocket-accept") == _header(vector["response"], "sec-websocket-accept")


def _same_channels(ws: Any, recorded_channels: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The channels this server advertises, once every recorded one is among them, each with the recorded schema."""
    channels: dict[str, dict[str, Any]] = {}
    while not set(recorded_channels) <= set(channels):
        doc = _recv_text(ws)
        if doc["op"] == "advertise":
            channels.update({c["topic"]: c for c in doc["channels"]})
    for topic, recorded in recorded_channels.items():
        live = channels[topic]
        for key in ("encoding", "schemaName", "schemaEncoding", "schema"):
            assert live[key] == recorded[key], (topic, key)
    return channels


def _replay_client_frames(
    ws: Any,
    vector: dict[str, Any],
    recorded_channels: dict[str, dict[str, Any]],
    channels: dict[str, dict[str, Any]],
) -> dict[int, str]:
    """Send the client's own operations, its channel ids turned into this server's by topic; its subscriptions."""
    recorded_by_id = {c["id"]: topic for topic, c in recorded_channels.items()}
    subscriptions: dict[int, str] = {}
    for frame in vector["client_frames"]:
        doc = json.loads(frame["text"])
        assert doc["op"] == "subscribe"
        for sub in doc["subscriptions"]:
            topic = recorded_by_id[sub["channelId"]]
            sub["channelId"] = channels[topic]["id"]
            subscriptions[sub["id"]] = topic
        ws.send(json.dumps(doc))
    return subscriptions


def _recorded_messages(
    vector: dict[str, Any], recorded_channels: dict[str, dict[str, Any]], subscriptions: dict[int, str]
) -> dict[str, list[Any]]:
    """The messages the server sent when the vector was recorded, by topic."""
    recorded_messages: dict[str, list[Any]] = {}
    for frame in vector["server_frames"]:
        payload = base64.b64decode(frame.get("binary", ""))
        if payload[:1] == b"\x01":
            (sub,) = struct.unpack_from("<I", payload, 1)
            topic = subscriptions[sub]
            recorded_messages.setdefault(topic, []).append(_decode(recorded_channels[topic], payload[13:]))
    return recorded_messages


@pytest.mark.skipif(
    npm_client_missing() is not None, reason=f"Foxglove's npm client cannot run: {npm_client_missing()}"
)
@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
def test_the_npm_client_receives_the_simulated_robot(simulated: FoxgloveModule, subprotocol: str) -> None:
    topics = ("/scan", "Base/Drive/State")
    run = run_npm_client(f"ws://127.0.0.1:{simulated.port}", subprotocol, topics, 3, WAIT)
    assert run.returncode == 0, (run.events[-3:], run.stderr[-2000:])
    assert run.of("open") == [{"event": "open", "protocol": subprotocol}]
    (info,) = run.of("serverInfo")
    assert info["name"].startswith("pluto ")
    messages = run.of("message")
    assert {m["topic"] for m in messages} == set(topics)
    subscribed = {s["topic"]: s for s in run.of("subscribe")}
    assert subscribed["/scan"]["schemaName"] == "foxglove.LaserScan"
    drive = json.loads(base64.b64decode(next(m["data"] for m in messages if m["topic"] == "Base/Drive/State")))
    assert drive["type"] == "Odometry" and {"x", "y", "theta", "v"} <= set(drive)
    assert simulated.front.accepted[subprotocol] == 1


def test_a_client_offering_both_names_gets_the_sdk_name(gateway: FoxgloveModule) -> None:
    for offer in (["foxglove.websocket.v1", "foxglove.sdk.v1"], ["foxglove.sdk.v1", "foxglove.websocket.v1"]):
        with connect(f"ws://127.0.0.1:{gateway.port}", subprotocols=offer, proxy=None) as ws:  # type: ignore[arg-type]
            assert ws.subprotocol == "foxglove.sdk.v1"
            assert _recv_text(ws)["op"] == "serverInfo"
    with connect(
        f"ws://127.0.0.1:{gateway.port}",
        subprotocols=["other.v2", "foxglove.websocket.v1"],  # type: ignore[list-item]
        proxy=None,
    ) as ws:
        assert ws.subprotocol == "foxglove.websocket.v1"
        assert _recv_text(ws)["op"] == "serverInfo"
    assert gateway.front.accepted == {"foxglove.sdk.v1": 2, "foxglove.websocket.v1": 1}


def test_a_websocket_offering_neither_name_is_refused_with_the_reason(gateway: FoxgloveModule) -> None:
    url = f"ws://127.0.0.1:{gateway.port}"
    for offer, said in ((["other.v1", "chat"], "offered other.v1, chat"), (None, "offered no WebSocket subprotocol")):
        with pytest.raises(InvalidStatus) as refused:
            connect(url, subprotocols=offer, proxy=None)  # type: ignore[arg-type]
        response = refused.value.response
        assert response.status_code == 400
        body = response.body.decode()
        assert "foxglove.sdk.v1 or foxglove.websocket.v1" in body and said in body, body
    # A plain HTTP request (a browser opening the address) is told the same.
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=WAIT) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n") and b"foxglove.websocket.v1" in answer
    assert gateway.front.refused == 3 and not gateway.front.accepted
    with connect(url, subprotocols=["foxglove.websocket.v1"], proxy=None) as ws:  # type: ignore[list-item]
        assert _recv_text(ws)["op"] == "serverInfo"  # the server goes on
