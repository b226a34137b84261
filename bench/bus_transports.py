"""The peers of the bus benchmark (``bench/bus.py``): its two payloads, each transport's two ends (this
process's ping/sender end and the spawned process's echo/receiver end) and the echo process's entry point.

One idea: what runs on each side of a link, for pluto.bus, raw zenoh-python and pyzmq alike; what is measured
over the links is in ``bench/bus.py``, the fan-out in ``bench/bus_fanout.py`` and the tables in
``bench/bus_report.py``. The control pipe's helpers (:class:`BenchError`, :func:`expect`, :func:`progress`) are
here because both the measurements and the fan-out talk to a spawned process through one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Protocol

import msgspec
import zenoh
import zmq

from pluto import msgs
from pluto.bus import Bus, BusTimeout, StateReader, StateWriter, Subscription

# Payloads ---------------------------------------------------------------------------------------------------

KINDS: tuple[str, ...] = ("small", "scan")
LABELS = {"small": "64 B Heartbeat", "scan": "LaserScan 361"}
TYPES: dict[str, type[msgs.Message]] = {"small": msgs.Heartbeat, "scan": msgs.LaserScan}

# Special stamps: data messages have stamp >= 0.
PROBE = -2.0  # "is the link up?" (answered, never counted)
MARKER = -1.0  # end of a flood

SMALL_SIZE = 64
BATCH = 256  # values per message of the "pluto.bus batch" row's flood writer
BEAMS = 361


def small_message() -> msgs.Heartbeat:
    """A Heartbeat whose encoding is exactly 64 bytes (``source`` padded; the stamp is always a float64)."""
    for pad in range(SMALL_SIZE):
        msg = msgs.Heartbeat(stamp=0.0, seq=0, source="bench" + "." * pad)
        if len(msgs.encode(msg)) >= SMALL_SIZE:
            return msg
    raise AssertionError("unreachable")


def scan_message() -> msgs.LaserScan:
    """A 361-beam scan over 180° at half-degree steps."""
    angles = [-math.pi / 2 + i * math.pi / (BEAMS - 1) for i in range(BEAMS)]
    ranges = [2.0 + 0.5 * math.sin(i / 17.0) for i in range(BEAMS)]
    return msgs.LaserScan(stamp=0.0, arrival=0.0, ranges=ranges, angles=angles, count=BEAMS)


def base_message(kind: str) -> msgs.Message:
    return small_message() if kind == "small" else scan_message()


def with_stamp(msg: msgs.Message, stamp: float) -> msgs.Message:
    return msgspec.structs.replace(msg, stamp=stamp)


def stamp_of(msg: msgs.Message) -> float:
    return float(msg.stamp)  # type: ignore[attr-defined]  # both payload types have one


# Transports -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One row of the table: a transport and its settings, as handed to the echo process."""

    name: str
    backend: str  # "pluto", "zenoh" or "zmq"
    # zenoh only: CongestionControl.BLOCK and no express (zenoh's defaults) instead of pluto.bus's QoS
    block: bool = False
    # zenoh only: the echo publishes from inside the subscriber callback (discouraged by zenoh-python's guidance)
    inline: bool = False
    # pluto only: the flood writer batches up to this many values per message (reliable: it waits, never drops)
    batch: int = 0
    env: dict[str, str] = field(default_factory=dict)
    endpoint: str = ""
    prefix: str = ""


SPECS: tuple[Spec, ...] = (
    Spec("pluto.bus", "pluto"),
    Spec("pluto.bus batch", "pluto", batch=BATCH),
    Spec("zenoh", "zenoh"),
    Spec("zenoh inline", "zenoh", inline=True),
    Spec("zenoh BLOCK", "zenoh", block=True),
    Spec("pyzmq", "zmq"),
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def zenoh_config(listen: list[str], connect: list[str]) -> zenoh.Config:
    conf = zenoh.Config()
    conf.insert_json5("mode", '"peer"')
    conf.insert_json5("scouting/multicast/enabled", "false")
    conf.insert_json5("listen/endpoints", json.dumps(listen))
    conf.insert_json5("connect/endpoints", json.dumps(connect))
    return conf


def zenoh_qos(spec: Spec) -> dict[str, Any]:
    """Publisher options: pluto.bus's own (DROP, express) unless the row asks for BLOCK."""
    if spec.block:
        return {"congestion_control": zenoh.CongestionControl.BLOCK, "express": False}
    return {"congestion_control": zenoh.CongestionControl.DROP, "express": True}


def close_zenoh(session: Any, entities: list[Any]) -> None:
    """Undeclare ``entities`` (newest first), then close ``session``."""
    for entity in reversed(entities):
        with contextlib.suppress(Exception):
            entity.undeclare()
    session.close()


def start_zenoh_log() -> None:
    with contextlib.suppress(Exception):
        zenoh.init_log_from_env_or("error")


class FloodCounter:
    """Counts the data messages of a flood on the receiving side; a probe arms it, a marker ends it."""

    def __init__(self) -> None:
        self.probe = threading.Event()
        self.done = threading.Event()
        self.armed = False
        self.count = 0
        self.first_ns = 0
        self.last_ns = 0
        self.stats: Callable[[], dict[str, int]] | None = None  # extra counters of the transport
        self._base: dict[str, int] = {}
        self._end: dict[str, int] = {}

    def reset(self) -> None:
        self.armed = False
        self.count = self.first_ns = self.last_ns = 0
        self.probe.clear()
        self.done.clear()

    def arm(self) -> None:
        self._base = self.stats() if self.stats else {}
        self.armed = True

    def on_message(self, msg: msgs.Message) -> None:
        stamp = stamp_of(msg)
        if stamp >= 0.0:
            if self.armed:
                now = time.perf_counter_ns()
                if not self.count:
                    self.first_ns = now
                self.last_ns = now
                self.count += 1
        elif stamp == MARKER:
            if self.armed and not self.done.is_set():
                self._end = self.stats() if self.stats else {}
                self.done.set()
        elif stamp == PROBE:
            self.probe.set()

    def result(self) -> dict[str, Any]:
        extra = {key: self._end.get(key, 0) - value for key, value in self._base.items()}
        return {"count": self.count, "first_ns": self.first_ns, "last_ns": self.last_ns, "extra": extra}


class PingSide(Protocol):
    """This process's end of a transport."""

    def connect(self, info: dict[str, Any]) -> None: ...
    def ping(self, kind: str, msg: msgs.Message, timeout: float) -> bool: ...
    def sender(self, kind: str) -> Callable[[msgs.Message], None]: ...
    def close(self) -> None: ...


class EchoSide(Protocol):
    """The echo process's end: echoes ``ping/<kind>`` on ``pong/<kind>``, counts ``flood/<kind>``."""

    info: dict[str, Any]
    counters: dict[str, FloodCounter]

    def close(self) -> None: ...


# pluto.bus --------------------------------------------------------------------------------------------------


class PlutoPing:
    def __init__(self, batch: int = 0) -> None:
        self.bus = Bus()
        self.pings: dict[str, StateWriter[Any]] = {}
        self.pongs: dict[str, StateReader[Any]] = {}
        self.floods: dict[str, StateWriter[Any]] = {}
        for kind in KINDS:
            cls = TYPES[kind]
            self.pings[kind] = self.bus.create_publisher(f"bench/ping/{kind}", cls)
            self.floods[kind] = self.bus.create_publisher(f"bench/flood/{kind}", cls, batch=batch, reliable=batch > 0)
            self.pongs[kind] = self.bus.create_reader(f"bench/pong/{kind}", cls, fetch_timeout=0.2)

    def connect(self, info: dict[str, Any]) -> None:
        pass

    def ping(self, kind: str, msg: msgs.Message, timeout: float) -> bool:
        reader = self.pongs[kind]
        self.pings[kind].write(msg)
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = reader.wait_for_update(max(deadline - time.monotonic(), 0.0))
            except BusTimeout:
                return False
            if stamp_of(got) == stamp_of(msg):
                return True

    def sender(self, kind: str) -> Callable[[msgs.Message], None]:
        return self.floods[kind].write

    def close(self) -> None:
        self.bus.close()


class PlutoEcho:
    def __init__(self, spec: Spec) -> None:
        self.info: dict[str, Any] = {}
        self.counters = {kind: FloodCounter() for kind in KINDS}
        self.bus = Bus()
        self.subs: list[Subscription[Any]] = []
        for kind in KINDS:
            cls = TYPES[kind]
            pong = self.bus.create_publisher(f"bench/pong/{kind}", cls)
            self.subs.append(self.bus.create_subscription(f"bench/ping/{kind}", pong.write, cls))
            counter = self.counters[kind]
            # A consumer that wants every message queues them (depth); the default depth=1 skips to the newest.
            sub = self.bus.create_subscription(f"bench/flood/{kind}", counter.on_message, cls, depth=FLOOD_DEPTH)
            counter.stats = lambda sub=sub: {"bus_received": sub.received, "skipped": sub.overflowed}
            self.subs.append(sub)

    def close(self) -> None:
        self.bus.close()


# raw zenoh --------------------------------------------------------------------------------------------------


class ZenohPing:
    def __init__(self, spec: Spec) -> None:
        start_zenoh_log()
        self.session = zenoh.open(zenoh_config([spec.endpoint], []))
        qos = zenoh_qos(spec)
        self.pings = {k: self.session.declare_publisher(f"{spec.prefix}/ping/{k}", **qos) for k in KINDS}
        self.floods = {k: self.session.declare_publisher(f"{spec.prefix}/flood/{k}", **qos) for k in KINDS}
        self.replies: dict[str, queue.SimpleQueue[msgs.Message]] = {k: queue.SimpleQueue() for k in KINDS}
        self.subs = [self.session.declare_subscriber(f"{spec.prefix}/pong/{k}", self._on_pong(k)) for k in KINDS]

    def _on_pong(self, kind: str) -> Callable[[zenoh.Sample], None]:
        cls, replies = TYPES[kind], self.replies[kind]

        def on_sample(sample: zenoh.Sample) -> None:
            replies.put(msgs.decode(sample.payload.to_bytes(), cls))

        return on_sample

    def connect(self, info: dict[str, Any]) -> None:
        pass

    def ping(self, kind: str, msg: msgs.Message, timeout: float) -> bool:
        replies = self.replies[kind]
        self.pings[kind].put(msgs.encode(msg))
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = replies.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                return False
            if stamp_of(got) == stamp_of(msg):
                return True

    def sender(self, kind: str) -> Callable[[msgs.Message], None]:
        put = self.floods[kind].put
        encode = msgs.encode

        def send(msg: msgs.Message) -> None:
            put(encode(msg))

        return send

    def close(self) -> None:
        close_zenoh(self.session, [*self.subs, *self.pings.values(), *self.floods.values()])


class ZenohEcho:
    """Echoes as zenoh-python's guidance says: the callback only hands the sample to a thread of the echo's own,
    which decodes, re-encodes and publishes (never call Zenoh from a callback). With ``inline`` the callback
    publishes itself, the fastest but discouraged way, shown for reference."""

    def __init__(self, spec: Spec, inline: bool = False) -> None:
        start_zenoh_log()
        self.info: dict[str, Any] = {}
        self.counters = {kind: FloodCounter() for kind in KINDS}
        self.session = zenoh.open(zenoh_config([], [spec.endpoint]))
        qos = zenoh_qos(spec)
        self.entities: list[Any] = []
        self._work: queue.SimpleQueue[tuple[zenoh.Publisher, type[msgs.Message], bytes] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="zenoh-echo", daemon=True)
        self._thread.start()
        for kind in KINDS:
            pong = self.session.declare_publisher(f"{spec.prefix}/pong/{kind}", **qos)
            self.entities.append(pong)
            echo = self._echo_inline(kind, pong) if inline else self._echo(kind, pong)
            self.entities.append(self.session.declare_subscriber(f"{spec.prefix}/ping/{kind}", echo))
            self.entities.append(self.session.declare_subscriber(f"{spec.prefix}/flood/{kind}", self._count(kind)))

    def _run(self) -> None:
        while (item := self._work.get()) is not None:
            pong, cls, data = item
            pong.put(msgs.encode(msgs.decode(data, cls)))

    def _echo(self, kind: str, pong: zenoh.Publisher) -> Callable[[zenoh.Sample], None]:
        cls, put = TYPES[kind], self._work.put

        def on_sample(sample: zenoh.Sample) -> None:
            put((pong, cls, sample.payload.to_bytes()))

        return on_sample

    @staticmethod
    def _echo_inline(kind: str, pong: zenoh.Publisher) -> Callable[[zenoh.Sample], None]:
        cls = TYPES[kind]

        def on_sample(sample: zenoh.Sample) -> None:
            pong.put(msgs.encode(msgs.decode(sample.payload.to_bytes(), cls)))

        return on_sample

    def _count(self, kind: str) -> Callable[[zenoh.Sample], None]:
        cls, on_message = TYPES[kind], self.counters[kind].on_message

        def on_sample(sample: zenoh.Sample) -> None:
            on_message(msgs.decode(sample.payload.to_bytes(), cls))

        return on_sample

    def close(self) -> None:
        self._work.put(None)
        close_zenoh(self.session, self.entities)


# pyzmq ------------------------------------------------------------------------------------------------------


def zmq_topic(direction: str, kind: str) -> bytes:
    return f"{direction}/{kind}".encode()


class ZmqPing:
    def __init__(self, spec: Spec) -> None:
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.port = self.pub.bind_to_random_port("tcp://127.0.0.1")
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"pong/")

    def connect(self, info: dict[str, Any]) -> None:
        self.sub.connect(f"tcp://127.0.0.1:{info['port']}")

    def ping(self, kind: str, msg: msgs.Message, timeout: float) -> bool:
        topic, cls = zmq_topic("pong", kind), TYPES[kind]
        self.pub.send_multipart([zmq_topic("ping", kind), msgs.encode(msg)])
        deadline = time.monotonic() + timeout
        while True:
            if not self.sub.poll(max(int((deadline - time.monotonic()) * 1000), 0)):
                return False
            got_topic, data = self.sub.recv_multipart()
            if got_topic == topic and stamp_of(msgs.decode(data, cls)) == stamp_of(msg):
                return True

    def sender(self, kind: str) -> Callable[[msgs.Message], None]:
        send_multipart, topic, encode = self.pub.send_multipart, zmq_topic("flood", kind), msgs.encode

        def send(msg: msgs.Message) -> None:
            send_multipart([topic, encode(msg)])

        return send

    def close(self) -> None:
        self.sub.close()
        self.pub.close()
        self.ctx.term()


class ZmqEcho:
    """Receives on one thread of its own (zmq sockets are not thread-safe): echoes pings, counts floods."""

    def __init__(self, spec: Spec) -> None:
        self.counters = {kind: FloodCounter() for kind in KINDS}
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(spec.endpoint)
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.info: dict[str, Any] = {"port": self.pub.bind_to_random_port("tcp://127.0.0.1")}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zmq-echo", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        handlers: dict[bytes, Callable[[bytes], None]] = {}
        for kind in KINDS:
            handlers[zmq_topic("ping", kind)] = self._echo(kind)
            handlers[zmq_topic("flood", kind)] = self._count(kind)
        sub = self.sub
        while not self._stop.is_set():
            if sub.poll(100):
                topic, data = sub.recv_multipart()
                handlers[topic](data)
        sub.close()
        self.pub.close()

    def _echo(self, kind: str) -> Callable[[bytes], None]:
        cls, send_multipart, topic = TYPES[kind], self.pub.send_multipart, zmq_topic("pong", kind)

        def on_data(data: bytes) -> None:
            send_multipart([topic, msgs.encode(msgs.decode(data, cls))])

        return on_data

    def _count(self, kind: str) -> Callable[[bytes], None]:
        cls, on_message = TYPES[kind], self.counters[kind].on_message

        def on_data(data: bytes) -> None:
            on_message(msgs.decode(data, cls))

        return on_data

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.ctx.term()


# The control pipe -------------------------------------------------------------------------------------------

READY_TIMEOUT = 60.0  # s for the echo process to start
LINK_TIMEOUT = 15.0  # s for a link to come up (first echo, first probe)
FLOOD_DEPTH = 4096  # values a flood subscription may queue
FLOOD_TIMEOUT = 120.0  # s for the end marker of a flood to arrive


class BenchError(RuntimeError):
    pass


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def expect(conn: Connection, timeout: float, what: str) -> tuple[Any, ...]:
    if not conn.poll(timeout):
        raise BenchError(f"the echo process did not answer ({what}) within {timeout} s")
    reply: tuple[Any, ...] = conn.recv()
    if reply[0] == "error":
        raise BenchError(f"echo process: {reply[1]}")
    return reply


# The echo process -------------------------------------------------------------------------------------------


def open_echo(spec: Spec) -> EchoSide:
    if spec.backend == "pluto":
        return PlutoEcho(spec)
    if spec.backend == "zenoh":
        return ZenohEcho(spec, inline=spec.inline)
    return ZmqEcho(spec)


def echo_main(spec: Spec, conn: Connection) -> None:
    """Entry point of the echo process: serve until told to quit."""
    os.environ.update(spec.env)
    for var in ("PLUTO_CONNECT", "PLUTO_LISTEN"):
        os.environ.pop(var, None)
    echo = open_echo(spec)
    conn.send(("ready", echo.info))
    try:
        while True:
            command, *args = conn.recv()
            if command == "quit":
                break
            if command == "arm":  # count one flood: wait for a probe, arm, wait for the end marker
                counter = echo.counters[args[0]]
                counter.reset()
                if not counter.probe.wait(LINK_TIMEOUT):
                    conn.send(("error", f"no probe arrived on flood/{args[0]}"))
                    continue
                counter.arm()
                conn.send(("armed",))
                if not counter.done.wait(FLOOD_TIMEOUT):
                    conn.send(("error", f"no end marker arrived on flood/{args[0]}"))
                    continue
                conn.send(("result", counter.result()))
    finally:
        echo.close()
        conn.close()
