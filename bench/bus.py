"""Benchmark of the bus: round-trip latency and one-way throughput of pluto.bus, raw zenoh-python and pyzmq.

Every measurement is between two processes on this machine, over loopback TCP with multicast scouting off:
this process is the ping/sender side, and each transport has a spawned echo/receiver process of its own.

* Round trip (RTT): this side publishes a message and waits for it to come back; the echo side decodes it and
  republishes it on a second key. N sequential round trips after a warm-up, split in rounds that take turns
  between the transports so that a slow spell of the machine does not favour one of them; p50 and p99.
* One-way throughput: this side publishes as fast as it can for a while; the other side counts what it
  receives and reports the received messages per second (and the sent and received counts, so drops show).

Two payloads: a 64-byte message (a ``Heartbeat`` whose encoding is 64 bytes) and a 361-beam ``LaserScan``
(about 6.6 kB). The raw transports carry the msgspec-encoded bytes of the same messages and decode them on
receipt, so every transport pays for the same encoding and decoding.

Run from the project root:

    .venv/bin/python bench/bus.py                 # 2000 round trips after 200 warm-up, 2 s floods
    .venv/bin/python bench/bus.py --quick         # smoke run
    .venv/bin/python bench/bus.py --count 5000 --duration 3 --transport pluto.bus --transport zenoh
    .venv/bin/python bench/bus.py --timeouts      # only: how long each wait takes to give up at its timeout
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import multiprocessing as mp
import os
import queue
import secrets
import socket
import statistics
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from multiprocessing.connection import Connection
from typing import Any, Protocol

import msgspec
import zenoh
import zmq

from pluto import msgs
from pluto.bus import Bus, BusConfig, BusError, BusTimeout, StateReader, StateWriter, Subscription

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


# The echo process -------------------------------------------------------------------------------------------

READY_TIMEOUT = 60.0  # s for the echo process to start
LINK_TIMEOUT = 15.0  # s for a link to come up (first echo, first probe)
FLOOD_DEPTH = 4096  # values a flood subscription may queue
FLOOD_TIMEOUT = 120.0  # s for the end marker of a flood to arrive


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


# Measurements -----------------------------------------------------------------------------------------------


class BenchError(RuntimeError):
    pass


@dataclass
class Row:
    transport: str
    kind: str
    rtt_ns: list[int] = field(default_factory=list)
    rtt_lost: int = 0
    next_stamp: int = 0
    sent: int = 0
    send_ns: int = 0
    received: int = 0
    recv_rate: float = 0.0
    extra: dict[str, int] = field(default_factory=dict)

    def quantile(self, q: int) -> float | None:
        if len(self.rtt_ns) < 2:
            return None
        return statistics.quantiles(self.rtt_ns, n=100, method="inclusive")[q - 1] / 1000.0


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def wait_for_link(side: PingSide, kind: str, base: msgs.Message) -> None:
    """Ping with probes until the first echo comes back."""
    probe = with_stamp(base, PROBE)
    deadline = time.monotonic() + LINK_TIMEOUT
    while not side.ping(kind, probe, 0.1):
        if time.monotonic() > deadline:
            raise BenchError(f"no echo of ping/{kind} within {LINK_TIMEOUT} s")


def measure_rtt(side: PingSide, kind: str, row: Row, count: int, warmup: int) -> None:
    """``warmup`` then ``count`` sequential round trips; the measured ones are added to ``row``."""
    base = base_message(kind)
    wait_for_link(side, kind, base)
    first, row.next_stamp = row.next_stamp, row.next_stamp + warmup + count  # unique across rounds
    messages = [with_stamp(base, float(first + i)) for i in range(warmup + count)]
    ping, clock = side.ping, time.perf_counter_ns
    gc.collect()
    for i, msg in enumerate(messages):
        t0 = clock()
        ok = ping(kind, msg, 1.0)
        t1 = clock()
        if not ok:
            row.rtt_lost += 1
        elif i >= warmup:
            row.rtt_ns.append(t1 - t0)


def expect(conn: Connection, timeout: float, what: str) -> tuple[Any, ...]:
    if not conn.poll(timeout):
        raise BenchError(f"the echo process did not answer ({what}) within {timeout} s")
    reply: tuple[Any, ...] = conn.recv()
    if reply[0] == "error":
        raise BenchError(f"echo process: {reply[1]}")
    return reply


def send_until_reply(conn: Connection, send: Callable[[msgs.Message], None], msg: msgs.Message) -> None:
    """Send ``msg`` every 20 ms until the echo process answers (the answer stays in the pipe)."""
    deadline = time.monotonic() + LINK_TIMEOUT
    send(msg)
    while not conn.poll(0.02):
        if time.monotonic() > deadline:
            raise BenchError(f"the echo process did not answer within {LINK_TIMEOUT} s")
        send(msg)


def measure_flood(side: PingSide, conn: Connection, kind: str, row: Row, duration: float) -> None:
    """Publish as fast as possible for ``duration`` s; the echo process counts what arrives."""
    base = with_stamp(base_message(kind), 0.0)
    send = side.sender(kind)
    conn.send(("arm", kind))
    send_until_reply(conn, send, with_stamp(base, PROBE))  # the receiver has seen the flood's key
    expect(conn, 0, "armed")
    gc.collect()
    batch, sent, clock = 16, 0, time.perf_counter_ns
    t0 = clock()
    end = t0 + int(duration * 1e9)
    while True:
        for _ in range(batch):
            send(base)
        sent += batch
        t1 = clock()
        if t1 >= end:
            break
    send_until_reply(conn, send, with_stamp(base, MARKER))  # resent if a DROP publisher dropped it
    result: dict[str, Any] = expect(conn, 0, "result")[1]
    row.sent, row.send_ns = sent, t1 - t0
    row.received = result["count"]
    window = result["last_ns"] - result["first_ns"]
    row.recv_rate = (row.received - 1) * 1e9 / window if row.received > 1 and window > 0 else 0.0
    row.extra = result["extra"]


def keep_best_flood(row: Row, flood: Row) -> None:
    """Keep the flood of the highest receive rate in ``row`` (a slow spell of the machine only slows a flood down)."""
    if not row.sent or flood.recv_rate > row.recv_rate:
        row.sent, row.send_ns, row.received = flood.sent, flood.send_ns, flood.received
        row.recv_rate, row.extra = flood.recv_rate, flood.extra


def open_ping(spec: Spec) -> tuple[PingSide, Spec]:
    """Open this process's end and return it with the spec the echo process needs."""
    token = secrets.token_hex(4)
    if spec.backend == "pluto":
        env = {
            "PLUTO_ROBOT": f"bench-{os.getpid()}-{token}",
            "PLUTO_RENDEZVOUS": f"tcp/127.0.0.1:{free_port()}",
            "PLUTO_MULTICAST": "0",
        }
        os.environ.update(env)
        for var in ("PLUTO_CONNECT", "PLUTO_LISTEN"):
            os.environ.pop(var, None)
        return PlutoPing(spec.batch), Spec(spec.name, spec.backend, batch=spec.batch, env=env)
    if spec.backend == "zenoh":
        endpoint = f"tcp/127.0.0.1:{free_port()}"
        spec = Spec(spec.name, spec.backend, spec.block, spec.inline, endpoint=endpoint, prefix=f"bench/{token}")
        return ZenohPing(spec), spec
    zmq_side = ZmqPing(spec)
    return zmq_side, Spec(spec.name, spec.backend, endpoint=f"tcp://127.0.0.1:{zmq_side.port}")


class Link:
    """One transport: this process's end, and the echo process with its control pipe."""

    def __init__(self, spec: Spec) -> None:
        self.name = spec.name
        self.side, child_spec = open_ping(spec)
        ctx = mp.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(target=echo_main, args=(child_spec, child_conn), name=f"echo {spec.name}")
        self.proc.daemon = True
        try:
            self.proc.start()
        except Exception:
            self.side.close()
            raise
        finally:
            child_conn.close()
        self.closed = False

    def wait_ready(self) -> None:
        self.side.connect(expect(self.conn, READY_TIMEOUT, "ready")[1])

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            self.conn.send(("quit",))
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=5)
        self.conn.close()
        self.side.close()


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def run(specs: list[Spec], args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """Round trips of every transport in interleaved rounds, then the floods, also in rounds that take turns between
    the transports (the best flood of each row counts)."""
    rows = {(spec.name, kind): Row(spec.name, kind) for spec in specs for kind in KINDS}
    failures: list[str] = []
    links: list[Link] = []

    def fail(link: Link, err: Exception) -> None:
        failures.append(f"{link.name}: {type(err).__name__}: {err}")
        progress(f"{link.name} failed: {err}")
        links.remove(link)
        link.close()

    try:
        for spec in specs:
            links.append(Link(spec))
        for link in list(links):
            try:
                link.wait_ready()
            except Exception as err:  # report it and go on with the other transports
                fail(link, err)
        rounds = min(args.rounds, args.count)
        for n, count in enumerate(split(args.count, rounds)):
            warmup = args.warmup if n == 0 else min(args.warmup, 20)
            progress(f"round trips: round {n + 1} of {rounds}")
            for link in list(links):
                try:
                    for kind in KINDS:
                        measure_rtt(link.side, kind, rows[link.name, kind], count, warmup)
                except Exception as err:
                    fail(link, err)
        for n in range(args.flood_rounds):
            for link in list(links):
                try:
                    for kind in KINDS:
                        progress(f"one-way flood {n + 1} of {args.flood_rounds}: {link.name}, {LABELS[kind]}")
                        flood = Row(link.name, kind)
                        measure_flood(link.side, link.conn, kind, flood, args.duration)
                        keep_best_flood(rows[link.name, kind], flood)
                except Exception as err:
                    fail(link, err)
    finally:
        for link in links:
            link.close()
    return list(rows.values()), failures


# Report -----------------------------------------------------------------------------------------------------


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def find(rows: list[Row], transport: str, kind: str) -> Row | None:
    return next((row for row in rows if row.transport == transport and row.kind == kind), None)


def table(rows: list[Row]) -> str:
    head = (
        f"{'transport':<16} {'payload':<15} {'RTT p50 (µs)':>12} {'RTT p99 (µs)':>12} "
        f"{'one-way (msg/s)':>15} {'sent':>9} {'received':>9} {'lost':>7} {'sent/s':>9}"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        p50, p99 = fmt(row.quantile(50)), fmt(row.quantile(99))
        rate = fmt(row.recv_rate, 0) if row.sent else "-"
        send_rate = fmt(row.sent * 1e9 / row.send_ns, 0) if row.send_ns else "-"
        lost = row.sent - row.received
        lines.append(
            f"{row.transport:<16} {LABELS[row.kind]:<15} {p50:>12} {p99:>12} "
            f"{rate:>15} {row.sent:>9,} {row.received:>9,} {lost:>7,} {send_rate:>9}"
        )
    return "\n".join(lines)


def verdicts(rows: list[Row]) -> list[str]:
    lines = []
    met: list[bool] = []
    ratios = []
    for kind in KINDS:
        pluto, raw = find(rows, "pluto.bus", kind), find(rows, "zenoh", kind)
        ours, theirs = (pluto.quantile(50) if pluto else None), (raw.quantile(50) if raw else None)
        if ours is not None and theirs is not None:
            met.append(ours / theirs <= 1.25)
            ratios.append(f"{LABELS[kind]} {ours / theirs:.2f}x ({ours:.1f} / {theirs:.1f} µs)")
    if ratios:
        verdict = "MET" if all(met) else "NOT MET"
        lines.append(f"RTT p50 pluto.bus / raw zenoh: {'; '.join(ratios)}. Target <= 1.25x: {verdict}.")
    small, block = find(rows, "pluto.bus batch", "small"), find(rows, "zenoh BLOCK", "small")
    if small is not None and block is not None and small.sent and block.recv_rate:
        share = small.recv_rate / block.recv_rate
        verdict = "MET" if share >= 0.5 else "NOT MET"
        lines.append(
            f"64 B one way, pluto.bus with batching / zenoh BLOCK: {share:.0%} ({small.recv_rate:,.0f} / "
            f"{block.recv_rate:,.0f} msg/s). Target >= 50 %: {verdict}."
        )
    scan = find(rows, "pluto.bus", "scan")
    if scan is not None and scan.sent:
        verdict = "MET" if scan.recv_rate >= 5000 else "NOT MET"
        lines.append(f"LaserScans one way through pluto.bus: {scan.recv_rate:,.0f}/s. Target >= 5,000/s: {verdict}.")
    for row in rows:
        if row.rtt_lost:
            lines.append(f"{row.transport}, {LABELS[row.kind]}: {row.rtt_lost} round trips got no echo within 1 s.")
    return lines


def notes(rows: list[Row], args: argparse.Namespace) -> list[str]:
    small, scan = len(msgs.encode(small_message())), len(msgs.encode(scan_message()))
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in ("eclipse-zenoh", "pyzmq", "msgspec"))
    lines = [
        f"Two processes per transport (this one pings and sends; a spawned one per transport echoes and "
        f"receives), loopback TCP, multicast scouting off. {args.count} round trips per row after "
        f"{args.warmup} warm-up, in "
        f"{min(args.rounds, args.count)} rounds that take turns between the transports (so a slow spell of the "
        f"machine hits all of them); floods of {args.duration:g} s in "
        f"{args.flood_rounds} rounds that also take turns; a row shows its best flood.",
        f"pluto.bus batch: the same, but the flood writer is created with batch={BATCH} and reliable=True: up to "
        f"{BATCH} values per Zenoh sample (sent when full or 2 ms after the first), BLOCK instead of DROP; the "
        "receiver decodes a batch in one call and its Subscription gets every value, in order. Its RTT rows are "
        "those of an ordinary writer (round trips never batch).",
        "Fan-out: one pluto.bus writer of a 64 B Heartbeat at 2 kHz (paced by this process) and 50 Subscriptions "
        "(depth 256) of it in one other process; in a process every reader and subscription of an interface "
        "shares one Zenoh subscriber, and a sample is decoded once. Latency = the receiver's wall clock at the "
        "callback minus the writer's at the write (one machine, one clock).",
        f"Payloads: 64 B = a msgs.Heartbeat encoded to {small} B; LaserScan = {BEAMS} ranges and {BEAMS} angles, "
        f"count={BEAMS}, encoded to {scan:,} B.",
        "Fair comparison: the raw transports (zenoh, pyzmq) send the msgspec-encoded bytes of the same message "
        "(pluto.msgs.encode) and decode them on receipt (pluto.msgs.decode); echo sides decode and re-encode, "
        "as pluto.bus does.",
        "pluto.bus: StateWriter.write (its publisher uses CongestionControl.DROP, express, and a 25 B "
        "attachment; its Zenoh callbacks run in place, on threads that keep their Python thread state); the echo "
        "is a Subscription (callback on the bus's executor, "
        "depth=1) that writes back, the flood "
        "receiver a Subscription with depth=4096 (every message delivered); the "
        "ping side waits with StateReader.wait_for_update.",
        "zenoh: the same QoS as pluto.bus (DROP, express); as zenoh-python's guidance says (never call Zenoh from "
        "a callback), the echo's callback hands the sample to a thread of its own that republishes it, and the "
        "ping side's callback hands replies over a queue; this row is the one the target compares with. zenoh "
        "inline: the echo republishes inside the callback (fastest, but what the guidance warns against). "
        "zenoh BLOCK: CongestionControl.BLOCK with express "
        "off (zenoh's default batching), the fairer setting for throughput. The raw zenoh rows use zenoh-python's "
        "default callbacks (a Python thread per subscriber).",
        "pyzmq: PUB/SUB over tcp://127.0.0.1 (topic frame + payload frame), default high-water mark 1000 (a full "
        "PUB drops); the ping side polls its SUB socket on the main thread; the echo side has one receive thread.",
        "One-way: received messages per second between the first and the last one at the receiver; for "
        "pluto.bus, the ones delivered to the Subscription's callback. lost = sent - received: DROP publishers "
        "and zmq PUB drop when their queue is full; zenoh BLOCK waits instead.",
    ]
    for row in rows:
        if row.transport == "pluto.bus" and row.extra:
            decoded = row.extra.get("bus_received", 0) - 1  # less the end marker
            lines.append(
                f"pluto.bus {LABELS[row.kind]} flood: sent {row.sent:,}; reached the subscriber ~{decoded:,} "
                f"(the rest dropped by DROP); skipped by depth=1 {row.extra.get('skipped', 0):,}; delivered to "
                f"the callback {row.received:,}."
            )
    lines.append(f"Python {sys.version.split()[0]}, {versions}, libzmq {zmq.zmq_version()}, {os.cpu_count()} CPUs.")
    return lines


def report(rows: list[Row], failures: list[str], args: argparse.Namespace) -> None:
    print()
    print(table(rows))
    print()
    for line in verdicts(rows):
        print(line)
    for text in failures:
        print(f"FAILED {text}")
    print()
    print("Notes:")
    for line in notes(rows, args):
        print(textwrap.fill(line, width=110, initial_indent="- ", subsequent_indent="  "))


# Fan-out ----------------------------------------------------------------------------------------------------

FANOUT_SUBSCRIBERS = 50
FANOUT_HZ = 2000.0
FANOUT_DEPTH = 256  # values each subscription may queue (128 ms at 2 kHz)


@dataclass
class FanoutResult:
    label: str
    sent: int = 0
    received: list[int] = field(default_factory=list)  # per subscriber
    latencies_ms: list[float] = field(default_factory=list)  # every delivery's, write to callback
    send_rate: float = 0.0

    @property
    def worst_share(self) -> float:
        return min(self.received) / self.sent if self.sent and self.received else 0.0

    def latency(self, q: int) -> float | None:
        if len(self.latencies_ms) < 2:
            return None
        return statistics.quantiles(self.latencies_ms, n=100, method="inclusive")[q - 1]


def fanout_main(env: dict[str, str], subscribers: int, conn: Connection) -> None:
    """Entry point of the fan-out receiver: ``subscribers`` Subscriptions of ``bench/fan`` in one process, each
    recording when its values arrive (write stamp to callback, wall clock of this machine)."""
    os.environ.update(env)
    for var in ("PLUTO_CONNECT", "PLUTO_LISTEN"):
        os.environ.pop(var, None)
    bus = Bus()
    probes = [threading.Event() for _ in range(subscribers)]
    ends = [threading.Event() for _ in range(subscribers)]
    arrivals: list[list[float]] = [[] for _ in range(subscribers)]
    armed = threading.Event()

    def callback(i: int) -> Callable[[msgs.Heartbeat], None]:
        seen, probe, end, now = arrivals[i].append, probes[i], ends[i], time.time

        def on_value(msg: msgs.Heartbeat) -> None:
            if msg.stamp >= 0.0:
                if armed.is_set():
                    seen(now() - msg.stamp)
            elif msg.stamp == MARKER:
                end.set()
            elif msg.stamp == PROBE:
                probe.set()

        return on_value

    try:
        for i in range(subscribers):
            bus.create_subscription("bench/fan", callback(i), msgs.Heartbeat, depth=FANOUT_DEPTH, current=False)
        conn.send(("ready",))
        while True:
            command, *_ = conn.recv()
            if command == "quit":
                break
            for i in range(subscribers):
                arrivals[i].clear()
                probes[i].clear()
                ends[i].clear()
            armed.clear()
            if not all(probe.wait(LINK_TIMEOUT) for probe in probes):
                conn.send(("error", "not every subscriber saw a probe"))
                continue
            armed.set()
            conn.send(("armed",))
            if not all(end.wait(FLOOD_TIMEOUT) for end in ends):
                conn.send(("error", "not every subscriber saw the end marker"))
                continue
            counts = [len(a) for a in arrivals]
            latencies = [1000.0 * x for a in arrivals for x in a]
            conn.send(("result", counts, latencies))
    finally:
        bus.close()
        conn.close()


def measure_fanout(label: str, batch: int, duration: float) -> FanoutResult:
    """One writer at FANOUT_HZ (paced by this process's clock) to FANOUT_SUBSCRIBERS subscriptions in another
    process, for ``duration`` s."""
    env = {
        "PLUTO_ROBOT": f"fan-{os.getpid()}-{secrets.token_hex(4)}",
        "PLUTO_RENDEZVOUS": f"tcp/127.0.0.1:{free_port()}",
        "PLUTO_MULTICAST": "0",
    }
    saved = {k: os.environ.get(k) for k in (*env, "PLUTO_CONNECT", "PLUTO_LISTEN")}
    os.environ.update(env)
    for var in ("PLUTO_CONNECT", "PLUTO_LISTEN"):
        os.environ.pop(var, None)
    result = FanoutResult(label)
    ctx = mp.get_context("spawn")
    conn, child_conn = ctx.Pipe()
    proc = ctx.Process(target=fanout_main, args=(env, FANOUT_SUBSCRIBERS, child_conn), name="fan-out", daemon=True)
    bus = Bus()
    try:
        proc.start()
        child_conn.close()
        expect(conn, READY_TIMEOUT, "ready")
        writer = bus.create_publisher("bench/fan", msgs.Heartbeat, batch=batch)
        base = small_message()
        conn.send(("go",))
        deadline = time.monotonic() + LINK_TIMEOUT
        while not conn.poll(0.05):  # probes until every subscriber has one
            writer.write(with_stamp(base, PROBE))  # type: ignore[arg-type]
            writer.flush()
            if time.monotonic() > deadline:
                raise BenchError("fan-out: the subscribers never saw a probe")
        expect(conn, 0, "armed")
        period = 1.0 / FANOUT_HZ
        start = time.perf_counter()
        end = start + duration
        sent = 0
        while True:
            due = start + sent * period
            now = time.perf_counter()
            if due >= end:
                break
            if due > now:
                time.sleep(due - now)
            writer.write(msgspec.structs.replace(base, stamp=time.time(), seq=sent))
            sent += 1
        result.send_rate = sent / (time.perf_counter() - start)
        result.sent = sent
        marker = with_stamp(base, MARKER)
        while not conn.poll(0.05):
            writer.write(marker)  # type: ignore[arg-type]
            writer.flush()
        reply = conn.recv()
        if reply[0] != "result":
            raise BenchError(f"fan-out: {reply[1]}")
        result.received, result.latencies_ms = reply[1], reply[2]
        conn.send(("quit",))
        proc.join(timeout=10)
    finally:
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=5)
        bus.close()
        conn.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return result


def fanout_table(results: list[FanoutResult]) -> str:
    head = (
        f"{'writer':<22} {'sent':>7} {'sent/s':>8} {'worst subscriber':>17} {'mean share':>11}"
        f" {'latency p50 (ms)':>17} {'p99 (ms)':>9}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        mean = sum(r.received) / (len(r.received) * r.sent) if r.sent and r.received else 0.0
        lines.append(
            f"{r.label:<22} {r.sent:>7,} {r.send_rate:>8,.0f} {r.worst_share:>16.1%} {mean:>11.1%}"
            f" {fmt(r.latency(50), 2):>17} {fmt(r.latency(99), 2):>9}"
        )
    return "\n".join(lines)


def fanout_verdicts(results: list[FanoutResult]) -> list[str]:
    lines = []
    for r in results:
        p99 = r.latency(99)
        met = r.worst_share >= 0.95 and p99 is not None and p99 < 20.0
        lines.append(
            f"Fan-out ({r.label}): every one of {FANOUT_SUBSCRIBERS} subscribers received >= {r.worst_share:.1%} of "
            f"{r.sent:,} values, p99 {fmt(p99, 2)} ms. Target >= 95 % and p99 < 20 ms: {'MET' if met else 'NOT MET'}."
        )
    return lines


# Timeouts --------------------------------------------------------------------------------------------------------

TIMEOUT_REPEAT = 5
"""Times each timeout is measured (the median and the largest are printed)."""


def measure_timeouts(repeat: int) -> list[tuple[str, float, list[float]]]:
    """How long each of the bus's waits takes to give up: (what, its timeout s, the wall seconds of each try). The
    tests check that each gives up (and names what it waited for); how long that takes is measured here."""
    config = BusConfig(
        robot=f"timeouts-{os.getpid()}-{secrets.token_hex(4)}", rendezvous=f"tcp/127.0.0.1:{free_port()}"
    )
    release = threading.Event()

    def slow(_request: Any) -> str:
        release.wait(5.0)
        return "late"

    def timed(action: Callable[[float], object], timeout: float) -> float:
        start = time.perf_counter()
        with contextlib.suppress(BusTimeout, BusError):
            action(timeout)
        return time.perf_counter() - start

    out: list[tuple[str, float, list[float]]] = []
    with Bus(config) as bus, Bus(config) as caller:
        bus.create_service("bench/slow", slow)
        writer = bus.create_publisher("bench/timeouts", msgs.Heartbeat)
        writer.write(msgs.Heartbeat(seq=0))
        reader = caller.create_reader("bench/timeouts", msgs.Heartbeat)
        reader.read()
        cases: list[tuple[str, float, Callable[[float], object]]] = [
            ("service call nobody serves", 0.5, lambda t: caller.call("bench/nobody", timeout=t)),
            ("service call, handler holds its reply", 0.3, lambda t: caller.call("bench/slow", timeout=t)),
            ("wait_for_update, nothing written", 0.2, lambda t: reader.wait_for_update(timeout=t)),
            ("wait_for_module, never starts", 0.2, lambda t: caller.wait_for_module("bench-never", timeout=t)),
        ]
        for what, timeout, action in cases:
            progress(f"timeouts: {what}")
            out.append((what, timeout, [timed(action, timeout) for _ in range(repeat)]))
            release.set()  # a held handler answers (late, to nobody) before the next try
            time.sleep(0.05)
            release.clear()
        release.set()
    progress("timeouts: open with an unreachable router")
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    opened = [
        timed(lambda t: Bus(BusConfig(robot="timeouts", connect=[endpoint], connect_timeout=t)), 0.5)
        for _ in range(repeat)
    ]
    out.append(("open, router unreachable (connect_timeout)", 0.5, opened))
    return out


def timeouts_table(results: list[tuple[str, float, list[float]]]) -> str:
    lines = [f"{'wait':<44} {'timeout s':>9} {'gave up after s (median)':>24} {'(largest)':>10}"]
    for what, timeout, times in results:
        lines.append(f"{what:<44} {timeout:>9.2f} {statistics.median(times):>24.3f} {max(times):>10.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Round-trip latency and one-way throughput of the bus.")
    parser.add_argument("--quick", action="store_true", help="fewer messages, for a smoke run")
    parser.add_argument("--count", type=int, help="measured round trips per row (default 2000, quick 300)")
    parser.add_argument("--warmup", type=int, help="round trips before measuring (default 200, quick 50)")
    parser.add_argument("--rounds", type=int, help="rounds the round trips are split in (default 4, quick 2)")
    parser.add_argument("--duration", type=float, help="seconds of each one-way flood (default 2, quick 0.5)")
    parser.add_argument("--flood-rounds", type=int, help="rounds of one-way floods, best one kept (default 3, quick 1)")
    parser.add_argument(
        "--transport", action="append", choices=[spec.name for spec in SPECS], help="only these (repeatable)"
    )
    parser.add_argument("--fanout-duration", type=float, help="seconds of the fan-out run (default 3, quick 1)")
    parser.add_argument("--no-fanout", action="store_true", help="skip the fan-out run")
    parser.add_argument(
        "--timeouts", action="store_true", help="only how long each wait of the bus takes to give up at its timeout"
    )
    args = parser.parse_args(argv)
    if args.timeouts:
        results = measure_timeouts(2 if args.quick else TIMEOUT_REPEAT)
        print(f"Timeouts: each wait tried {2 if args.quick else TIMEOUT_REPEAT} times; a wait gives up at its timeout")
        print(timeouts_table(results))
        return 0
    quick = args.quick
    args.fanout_duration = args.fanout_duration if args.fanout_duration is not None else (1.0 if quick else 3.0)
    args.count = args.count if args.count is not None else (300 if quick else 2000)
    args.warmup = args.warmup if args.warmup is not None else (50 if quick else 200)
    args.rounds = args.rounds if args.rounds is not None else (2 if quick else 4)
    args.duration = args.duration if args.duration is not None else (0.5 if quick else 2.0)
    args.flood_rounds = args.flood_rounds if args.flood_rounds is not None else (1 if quick else 3)
    if args.count < 2 or args.warmup < 0 or args.rounds < 1 or args.duration <= 0 or args.flood_rounds < 1:
        parser.error("need --count >= 2, --warmup >= 0, --rounds >= 1, --duration > 0 and --flood-rounds >= 1")

    specs = [spec for spec in SPECS if not args.transport or spec.name in args.transport]
    rows, failures = run(specs, args) if specs else ([], [])
    fanouts: list[FanoutResult] = []
    if not args.no_fanout:
        for label, batch in (("pluto.bus", 0), ("pluto.bus batch=8", 8)):
            progress(f"fan-out: {label}, {FANOUT_SUBSCRIBERS} subscribers at {FANOUT_HZ:,.0f} Hz")
            try:
                fanouts.append(measure_fanout(label, batch, args.fanout_duration))
            except (BenchError, OSError, EOFError) as err:
                failures.append(f"fan-out {label}: {err}")
    report(rows, failures, args)
    if fanouts:
        print()
        print(f"Fan-out: one writer at {FANOUT_HZ:,.0f} Hz, {FANOUT_SUBSCRIBERS} subscriptions in one other process")
        print(fanout_table(fanouts))
        print()
        for line in fanout_verdicts(fanouts):
            print(line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
