"""Recorded exchanges of real Foxglove clients with ``pluto foxglove``, and the npm client that made them.

A test vector (``vectors/<client>-<subprotocol>.json``) is the start of one connection, byte for byte as it crossed
the wire: the client's handshake request, the server's answer, then the first WebSocket frames each way (the
client's unmasked), in order. It was recorded by running the client against ``pluto foxglove`` on ``pluto sim``
(the simulated robot, world ``office``) through :class:`TapRelay`, which relays the connection and keeps what it
sees. ``python -m tests.gateways.foxglove.exchanges`` records them again (it needs ``node`` and the npm install
below; it starts ``pluto sim`` and ``pluto foxglove`` on a robot name of its own).

The npm client is Foxglove's JavaScript library ``@foxglove/ws-protocol`` (its ``FoxgloveClient``) on the ``ws``
package, driven by ``ws_protocol_client.js``. The tests never download it: they look for an install in
``$PLUTO_WS_PROTOCOL_DIR`` or ``~/.cache/pluto/foxglove-ws-protocol``, made once with::

    npm install --prefix ~/.cache/pluto/foxglove-ws-protocol @foxglove/ws-protocol ws
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VECTORS = HERE / "vectors"
CLIENT_SCRIPT = HERE / "ws_protocol_client.js"
INSTALL_ENV = "PLUTO_WS_PROTOCOL_DIR"
DEFAULT_INSTALL = Path.home() / ".cache" / "pluto" / "foxglove-ws-protocol"
RECORDED_TOPICS = ("/scan", "Base/Drive/State")
"""The channels the recorded clients subscribe to: a protobuf one and a JSON one."""
RECORDED_MESSAGES = 2
"""Messages per channel kept in a vector."""
SUBPROTOCOLS = ("foxglove.websocket.v1", "foxglove.sdk.v1")


# -- the npm client ---------------------------------------------------------------------------------------------


def node_modules() -> Path | None:
    """The ``node_modules`` folder of the install of ``@foxglove/ws-protocol`` and ``ws``, if there is one."""
    root = Path(os.environ.get(INSTALL_ENV) or DEFAULT_INSTALL)
    modules = root / "node_modules"
    if (modules / "@foxglove" / "ws-protocol" / "package.json").is_file() and (modules / "ws").is_dir():
        return modules
    return None


def npm_client_missing() -> str | None:
    """Why the npm client cannot run here (None if it can)."""
    if shutil.which("node") is None:
        return "node is not installed (apt-get install -y nodejs)"
    if node_modules() is None:
        where = os.environ.get(INSTALL_ENV) or DEFAULT_INSTALL
        hint = f"npm install --prefix {where} @foxglove/ws-protocol ws"
        return f"@foxglove/ws-protocol and ws are not installed in {where} (once: {hint})"
    return None


def npm_client_version() -> str:
    """The versions of the npm client's packages and of node."""
    modules = node_modules()
    assert modules is not None
    versions = [
        f"{name} {json.loads((modules / name / 'package.json').read_text())['version']}"
        for name in ("@foxglove/ws-protocol", "ws")
    ]
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    return f"{', '.join(versions)}, node {node}"


@dataclass
class NodeRun:
    """What the npm client printed (one event a line) and how it ended."""

    returncode: int
    events: list[dict[str, Any]]
    stderr: str

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == kind]


def run_npm_client(url: str, subprotocol: str, topics: tuple[str, ...], messages: int, timeout: float) -> NodeRun:
    """Run FoxgloveClient against ``url`` offering ``subprotocol``, until ``messages`` messages came on each topic.

    Raises:
        RuntimeError: the npm client is not installed (see :func:`npm_client_missing`).
    """
    modules = node_modules()
    if modules is None or shutil.which("node") is None:
        raise RuntimeError(npm_client_missing() or "no npm client")
    env = {**os.environ, "NODE_PATH": str(modules)}
    args = ["node", str(CLIENT_SCRIPT), url, subprotocol, ",".join(topics), str(messages), str(timeout)]
    try:
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout + 30)
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        return NodeRun(-1, _events(out), "node did not end")
    return NodeRun(done.returncode, _events(done.stdout), done.stderr)


def _events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


# -- the wire ---------------------------------------------------------------------------------------------------


class TapRelay:
    """A TCP relay on 127.0.0.1 in front of ``target`` that keeps every byte it passes, per direction.

    Use as a context manager; :attr:`port` is where to connect; :meth:`wait` waits for the connections to end.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.to_server = bytearray()
        self.to_client = bytearray()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept, daemon=True, name="tap-accept")

    def __enter__(self) -> TapRelay:
        self._accepter.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._listener.close()
        self.wait(5.0)

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        server = socket.create_connection(self.target)
        for source, sink, kept in ((client, server, self.to_server), (server, client, self.to_client)):
            thread = threading.Thread(target=self._copy, args=(source, sink, kept), daemon=True, name="tap-copy")
            thread.start()
            self._threads.append(thread)

    @staticmethod
    def _copy(source: socket.socket, sink: socket.socket, kept: bytearray) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                kept.extend(data)
                sink.sendall(data)
        for sock in (sink, source):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def wait(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(end - time.monotonic(), 0.0))


def split_head(data: bytes) -> tuple[str, bytes]:
    """An HTTP head (text, without its blank line) and the bytes after it."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    assert sep, "no complete HTTP head"
    return head.decode("latin-1"), rest


def parse_frames(data: bytes) -> Iterator[tuple[int, bytes]]:
    """The WebSocket messages in ``data`` (RFC 6455 5.2): (opcode, payload), unmasked, fragments joined; a frame cut
    off at the end is left out."""
    offset = 0
    message_opcode, parts = 0, bytearray()
    while offset + 2 <= len(data):
        first, second = data[offset], data[offset + 1]
        fin, opcode, masked, length = first & 0x80, first & 0x0F, second & 0x80, second & 0x7F
        offset += 2
        if length == 126:
            if offset + 2 > len(data):
                return
            (length,) = struct.unpack_from("!H", data, offset)
            offset += 2
        elif length == 127:
            if offset + 8 > len(data):
                return
            (length,) = struct.unpack_from("!Q", data, offset)
            offset += 8
        mask = b""
        if masked:
            mask = data[offset : offset + 4]
            offset += 4
        if offset + length > len(data):
            return
        payload = data[offset : offset + length]
        offset += length
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        if opcode >= 0x8:  # control frames come whole, even between fragments
            yield opcode, payload
            continue
        if opcode:
            message_opcode, parts = opcode, bytearray()
        parts.extend(payload)
        if fin:
            yield message_opcode, bytes(parts)


def frame_record(sender: str, opcode: int, payload: bytes) -> dict[str, Any]:
    if opcode == 0x1:
        return {"from": sender, "text": payload.decode("utf-8")}
    if opcode == 0x2:
        return {"from": sender, "binary": base64.b64encode(payload).decode("ascii")}
    return {"from": sender, "control": opcode, "payload": base64.b64encode(payload).decode("ascii")}


def exchange_from_wire(to_server: bytes, to_client: bytes) -> dict[str, Any]:
    """The vector of one connection from the bytes of each direction: the heads, then the client's frames (its
    operations) and the server's text operations, and its first :data:`RECORDED_MESSAGES` message frames per
    subscription (the server's frames come first, as they did: the client only subscribes once advertised)."""
    request, client_rest = split_head(to_server)
    response, server_rest = split_head(to_client)
    client_frames = [frame_record("client", op, p) for op, p in parse_frames(client_rest) if op in (1, 2)]
    server_frames: list[dict[str, Any]] = []
    per_subscription: dict[int, int] = {}
    for opcode, payload in parse_frames(server_rest):
        if opcode == 0x2 and payload[:1] == b"\x01":
            (sub,) = struct.unpack_from("<I", payload, 1)
            per_subscription[sub] = per_subscription.get(sub, 0) + 1
            if per_subscription[sub] > RECORDED_MESSAGES:
                continue
        if opcode in (1, 2):
            server_frames.append(frame_record("server", opcode, payload))
    return {"request": request, "response": response, "client_frames": client_frames, "server_frames": server_frames}


def load_vector(name: str) -> dict[str, Any]:
    vector: dict[str, Any] = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    return vector


def vector_name(subprotocol: str) -> str:
    return f"ws-protocol-{subprotocol}.json"


# -- recording --------------------------------------------------------------------------------------------------


def _stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.send_signal(2)  # SIGINT: the command's own Ctrl-C path
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def simulated_foxglove() -> Iterator[int]:
    """``pluto sim`` and ``pluto foxglove`` (a free port) on a robot name of their own; yields the port."""
    with tempfile.TemporaryDirectory() as runtime:
        env = {**os.environ, "PLUTO_ROBOT": f"vectors-{uuid.uuid4().hex[:6]}", "PLUTO_RUNTIME_DIR": runtime}
        sim = subprocess.Popen(
            [sys.executable, "-m", "pluto", "sim"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        fox: subprocess.Popen[str] | None = None
        try:
            time.sleep(5.0)  # the simulator up before the gateway asks it for its world
            fox = subprocess.Popen(
                [sys.executable, "-m", "pluto", "foxglove", "--port", "0"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert fox.stdout is not None
            found = re.search(r"listening on ws://127\.0\.0\.1:(\d+)", fox.stdout.readline())
            assert found, "pluto foxglove did not say where it listens"
            yield int(found.group(1))
        finally:
            if fox is not None:
                _stop(fox)
            _stop(sim)


def record(port: int, subprotocol: str) -> dict[str, Any]:
    """One exchange of the npm client offering ``subprotocol`` with the server on ``port``."""
    with TapRelay(("127.0.0.1", port)) as tap:
        run = run_npm_client(f"ws://127.0.0.1:{tap.port}", subprotocol, RECORDED_TOPICS, RECORDED_MESSAGES, 60.0)
        if run.returncode != 0:
            raise RuntimeError(f"the npm client failed: {run.events[-3:]} {run.stderr[-500:]}")
        tap.wait(10.0)
    vector = exchange_from_wire(bytes(tap.to_server), bytes(tap.to_client))
    return {
        "client": f"FoxgloveClient of {npm_client_version()}, offering {subprotocol}",
        "server": "pluto foxglove on pluto sim (world office)",
        "topics": list(RECORDED_TOPICS),
        **vector,
    }


def main() -> None:
    missing = npm_client_missing()
    if missing:
        sys.exit(f"cannot record: {missing}")
    VECTORS.mkdir(exist_ok=True)
    with simulated_foxglove() as port:
        for subprotocol in SUBPROTOCOLS:
            vector = record(port, subprotocol)
            path = VECTORS / vector_name(subprotocol)
            path.write_text(json.dumps(vector, indent=1) + "\n", encoding="utf-8")
            print(f"{path}: {len(vector['client_frames'])} client frames, {len(vector['server_frames'])} server frames")


if __name__ == "__main__":
    main()
