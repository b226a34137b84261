"""A Foxglove WebSocket client written from the protocol's description, for the tests: the handshake (subprotocol
``foxglove.sdk.v1``, or the older ``foxglove.websocket.v1``), the ``serverInfo`` and ``advertise`` operations,
``subscribe``, and the binary message frames (opcode 1, subscription id u32, log time u64 ns, then the payload,
little-endian), decoded with the protobuf schema each channel advertises (a FileDescriptorSet, base64)."""

from __future__ import annotations

import base64
import json
import struct
import time
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from websockets.sync.client import ClientConnection, connect

SUBPROTOCOLS = ["foxglove.sdk.v1", "foxglove.websocket.v1"]
MESSAGE_DATA = 0x01


def message_class(schema_name: str, file_descriptor_set: bytes) -> Any:
    """The protobuf message class ``schema_name`` from a serialized FileDescriptorSet."""
    fds = descriptor_pb2.FileDescriptorSet.FromString(file_descriptor_set)
    pool = descriptor_pool.DescriptorPool()
    for proto in fds.file:
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema_name))


@dataclass
class Received:
    """A message frame: the channel's topic, its log time (ns) and the decoded protobuf message (or the JSON)."""

    topic: str
    log_time: int
    message: Any


class FoxgloveClient:
    """A connection to a Foxglove WebSocket server."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        # An unbounded queue of frames read: a client that stops reading while the server still streams must
        # still see the server's answer to its close.
        self._connect = connect(
            url,
            subprotocols=SUBPROTOCOLS,  # type: ignore[arg-type]
            open_timeout=timeout,
            max_queue=None,
            max_size=None,
        )
        self.ws: ClientConnection = self._connect.__enter__()
        self.server_info: dict[str, Any] = {}
        self.channels: dict[str, dict[str, Any]] = {}  # topic -> its advertisement
        self._subscriptions: dict[int, str] = {}  # subscription id -> topic
        self._classes: dict[str, Any] = {}
        self._next_id = 1
        self.other_ops: list[dict[str, Any]] = []

    def close(self) -> None:
        self._connect.__exit__(None, None, None)

    def __enter__(self) -> FoxgloveClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _handle_text(self, text: str) -> None:
        doc = json.loads(text)
        op = doc.get("op")
        if op == "serverInfo":
            self.server_info = doc
        elif op == "advertise":
            for channel in doc["channels"]:
                self.channels[channel["topic"]] = channel
        elif op == "unadvertise":
            gone = set(doc["channelIds"])
            self.channels = {t: c for t, c in self.channels.items() if c["id"] not in gone}
        else:
            self.other_ops.append(doc)

    def _decode(self, frame: bytes) -> Received | None:
        if not frame or frame[0] != MESSAGE_DATA:
            return None
        sub_id, log_time = struct.unpack_from("<IQ", frame, 1)
        payload = frame[13:]
        topic = self._subscriptions.get(sub_id)
        if topic is None:
            return None
        channel = self.channels[topic]
        if channel["encoding"] == "json":
            return Received(topic, log_time, json.loads(payload))
        cls = self._classes.get(topic)
        if cls is None:
            schema = base64.b64decode(channel["schema"])
            cls = self._classes[topic] = message_class(channel["schemaName"], schema)
        return Received(topic, log_time, cls.FromString(payload))

    def receive(self, timeout: float) -> Received | None:
        """The next message frame within ``timeout`` s (text operations in between are handled), or None."""
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            try:
                data = self.ws.recv(timeout=left)
            except TimeoutError:
                return None
            if isinstance(data, str):
                self._handle_text(data)
                continue
            received = self._decode(data)
            if received is not None:
                return received
        return None

    def wait_for_channels(self, topics: list[str], timeout: float) -> None:
        """Read operations until ``serverInfo`` came and every topic is advertised.

        Raises:
            TimeoutError: they did not come in time.
        """
        end = time.monotonic() + timeout
        while not self.server_info or not all(t in self.channels for t in topics):
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"advertised {sorted(self.channels)}, wanted {topics}")
            try:
                data = self.ws.recv(timeout=left)
            except TimeoutError:
                continue
            if isinstance(data, str):
                self._handle_text(data)

    def subscribe(self, *topics: str) -> None:
        subs = []
        for topic in topics:
            sub_id = self._next_id
            self._next_id += 1
            self._subscriptions[sub_id] = topic
            subs.append({"id": sub_id, "channelId": self.channels[topic]["id"]})
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))

    def collect(self, timeout: float, until: Any) -> list[Received]:
        """Messages until ``until(messages)`` is true or ``timeout`` s passed."""
        got: list[Received] = []
        end = time.monotonic() + timeout
        while not until(got) and (left := end - time.monotonic()) > 0:
            received = self.receive(min(left, 0.5))
            if received is not None:
                got.append(received)
        return got
