"""Benchmark of the Player gateway: how late a base state change reaches a Player client, and how many rounds per
second the server delivers to 50 clients, against the bus itself as the baseline.

There is no Player server on this machine to compare with, so the peer is the bus: a bare bus subscriber of
``Base/Drive/State`` (its own Zenoh session, like the gateway's) receives the same writes in the same run. The
gateway (``pluto run player``, wall clock) runs in a process of its own; this process writes the base state, is the
bus subscriber(s) and the Player clients, over loopback TCP.

* Latency: this process writes an odometry with a new x, then waits until the bus subscriber and two Player clients
  (PUSH_NEW at 10 Hz, the default, and at 100 Hz) have it; p50, p95 and max over ``--count`` writes, each a random
  0..100 ms after the previous one arrived everywhere (so the writes fall at every phase of the rounds). The
  gateway's latency includes the wait for the next round: half a round period on average.
* Rounds/s with 50 clients: 50 Player clients (asyncio, one thread) receive PUSH_ALL rounds at 100 Hz, then ask for
  PULL_ALL rounds as fast as each gets its previous one (the server's capacity); against 50 bus subscribers of a
  100 Hz writer (deliveries per second).

Run from the project root (prints a table; asserts nothing):

    .venv/bin/python bench/player.py                  # 150 writes, 5 s per throughput run
    .venv/bin/python bench/player.py --quick          # smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.helpers

from tests.helpers import free_tcp_port

from pluto import msgs
from pluto.bus import Bus
from pluto.gateways.player.protocol import (
    NEED_DATA,
    Banner,
    DataMode,
    DeviceCode,
    Message,
    MsgType,
    PlayerConnection,
    encode_message,
)
from pluto.gateways.player.structs import DataFreqRequest, DataModeRequest, DataRequest, DeviceRequest
from pluto.player.client import PlayerClient, PlayerClientError

GATEWAY_RATE = 100.0  # Hz: the player module's ticks, so rounds up to 100 Hz


def start_gateway(port: int) -> subprocess.Popen[bytes]:
    """``pluto run player`` on ``port`` in a process of its own (the environment names this run's bus)."""
    cmd = [sys.executable, "-m", "pluto", "run", "player", "-p", f"port={port}", "-p", f"rate_hz={GATEWAY_RATE}"]
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def connect(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> PlayerClient:
    deadline = time.monotonic() + timeout
    while True:
        client = PlayerClient(port=port, timeout=5.0)
        try:
            client.connect()
            return client
        except PlayerClientError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(
                    f"the gateway did not start: {process.stderr.read() if process.stderr else ''}"
                ) from None
            time.sleep(0.1)


class Seen:
    """When each x value (in whole mm) was first seen by one receiver (monotonic s)."""

    def __init__(self) -> None:
        self.times: dict[int, float] = {}
        self.changed = threading.Condition()

    def saw(self, x_mm: int) -> None:
        now = time.monotonic()
        with self.changed:
            if x_mm not in self.times:
                self.times[x_mm] = now
                self.changed.notify_all()

    def wait(self, x_mm: int, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: x_mm in self.times, timeout)


def follow(client: PlayerClient, seen: Seen, stop: threading.Event) -> None:
    """Read rounds; note each new x."""
    while not stop.is_set():
        try:
            if (DeviceCode.POSITION, 0) in client.read(timeout=2.0):
                seen.saw(round(client.position.px * 1000))
        except PlayerClientError:
            if not stop.is_set():
                raise


def percentiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95, ordered[-1]


def measure_latency(bus: Bus, port: int, process: subprocess.Popen[bytes], count: int) -> dict[str, list[float]]:
    writer = bus.create_publisher("Base/Drive/State", msgs.Odometry)
    writer.write(msgs.Odometry(stamp=time.time()))
    receivers = {name: Seen() for name in ("bus", "player 10 Hz", "player 100 Hz")}
    stop = threading.Event()
    with Bus() as other:
        other.create_subscription(
            "Base/Drive/State", lambda o: receivers["bus"].saw(round(o.x * 1000)), msgs.Odometry, current=False
        )
        clients = []
        threads = []
        for name, hz in (("player 10 Hz", 10), ("player 100 Hz", 100)):
            client = connect(port, process)
            client.subscribe("position")
            client.set_frequency(hz)
            clients.append(client)
            threads.append(threading.Thread(target=follow, args=(client, receivers[name], stop), daemon=True))
        for thread in threads:
            thread.start()
        latencies: dict[str, list[float]] = {name: [] for name in receivers}
        rng = random.Random(7)
        warmup = 20
        try:
            for i in range(warmup + count):
                x_mm = i + 1
                t0 = time.monotonic()
                writer.write(msgs.Odometry(stamp=time.time(), x=x_mm / 1000.0))
                for name, seen in receivers.items():
                    if not seen.wait(x_mm, 5.0):
                        raise SystemExit(f"{name} never saw write {i}")
                    if i >= warmup:
                        latencies[name].append((seen.times[x_mm] - t0) * 1000.0)
                time.sleep(rng.uniform(0.0, 0.1))  # a random phase of the 10 Hz rounds
        finally:
            stop.set()
            for client in clients:
                client.close()
            for thread in threads:
                thread.join(5)
    bus.release(writer)
    return latencies


# -- 50 clients -----------------------------------------------------------------------------------------------------


async def player_client(port: int, mode: DataMode, hz: int, duration: float, counts: list[int]) -> None:
    """One raw Player client: open position, set the data mode, count the rounds (SYNCH) for ``duration`` s."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    conn = PlayerConnection("client")

    async def next_message() -> Message:
        while True:
            event = conn.next_event()
            if isinstance(event, Message):
                return event
            if isinstance(event, Banner):
                continue
            if event is not NEED_DATA:
                raise ConnectionError("closed")
            data = await reader.read(65536)
            conn.receive_data(data)

    async def request(payload: bytes) -> None:
        writer.write(encode_message(MsgType.REQ, DeviceCode.PLAYER, 0, payload))
        while (await next_message()).type not in (MsgType.RESP_ACK, MsgType.RESP_NACK):
            pass

    await request(DeviceRequest(DeviceCode.POSITION, 0, b"r").pack())
    await request(DataFreqRequest(frequency=hz).pack())
    await request(DataModeRequest(mode=int(mode)).pack())
    index = len(counts)
    counts.append(0)
    end = time.monotonic() + duration
    pull = not mode.pushed
    while time.monotonic() < end:
        if pull:
            writer.write(encode_message(MsgType.REQ, DeviceCode.PLAYER, 0, DataRequest().pack()))
        while (await next_message()).type != MsgType.SYNCH:
            pass
        counts[index] += 1
    writer.close()


def player_rounds(port: int, mode: DataMode, hz: int, clients: int, duration: float) -> float:
    """Rounds per second delivered to ``clients`` clients in all (counted after a 1 s warm-up)."""

    async def run() -> float:
        warm: list[int] = []
        await asyncio.gather(*(player_client(port, mode, hz, 1.0, warm) for _ in range(clients)))
        counts: list[int] = []
        await asyncio.gather(*(player_client(port, mode, hz, duration, counts) for _ in range(clients)))
        return sum(counts) / duration

    return asyncio.run(run())


def bus_deliveries(bus: Bus, clients: int, duration: float, hz: float) -> float:
    """Deliveries per second to ``clients`` bus subscribers of a writer at ``hz``."""
    writer = bus.create_publisher("Base/Drive/State", msgs.Odometry)
    with Bus() as other:
        counts = [0] * clients

        def counter(i: int) -> object:
            def count(_value: msgs.Odometry) -> None:
                counts[i] += 1

            return count

        for i in range(clients):
            other.create_subscription("Base/Drive/State", counter(i), msgs.Odometry, current=False)
        time.sleep(0.5)  # let the subscriptions reach the writer's session before counting
        for phase in ("warm-up", "measure"):
            for i in range(clients):
                counts[i] = 0
            length = 1.0 if phase == "warm-up" else duration
            start = time.monotonic()
            n = 0
            while time.monotonic() < start + length:
                n += 1
                writer.write(msgs.Odometry(stamp=time.time(), x=n / 1000.0))
                time.sleep(max(0.0, start + n / hz - time.monotonic()))
            total = sum(counts)
    bus.release(writer)
    return total / duration


# -- main -----------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=150, help="writes timed for the latency (default 150)")
    parser.add_argument("--duration", type=float, default=5.0, help="s per throughput run (default 5)")
    parser.add_argument("--clients", type=int, default=50, help="clients of the throughput runs (default 50)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 30 writes, 1 s runs")
    args = parser.parse_args()
    if args.quick:
        args.count, args.duration = 30, 1.0

    tmp = tempfile.TemporaryDirectory()
    os.environ["PLUTO_ROBOT"] = f"bench-{uuid.uuid4().hex[:8]}"
    os.environ["PLUTO_RENDEZVOUS"] = f"tcp/127.0.0.1:{free_tcp_port()}"
    os.environ["PLUTO_RUNTIME_DIR"] = tmp.name
    port = free_tcp_port()
    with Bus() as bus:
        token = bus.declare_module("base")  # the gateway opens position only while a base is alive
        gateway = start_gateway(port)
        try:
            connect(port, gateway).close()
            latency = measure_latency(bus, port, gateway, args.count)
            n = args.clients
            push = player_rounds(port, DataMode.PUSH_ALL, 100, n, args.duration)
            pull = player_rounds(port, DataMode.PULL_ALL, 100, n, args.duration)
            bus_100 = bus_deliveries(bus, n, args.duration, 100.0)
        finally:
            gateway.send_signal(signal.SIGINT)
            try:
                gateway.wait(10)
            except subprocess.TimeoutExpired:
                gateway.kill()
                gateway.wait()
            bus.release(token)
    tmp.cleanup()

    print(
        f"\nPlayer gateway vs the bus (baseline); loopback, gateway in its own process at {GATEWAY_RATE:g} Hz ticks\n"
    )
    print(f"Latency: Base/Drive/State write -> value received, ms ({args.count} writes)")
    print(f"| {'receiver':<46} | {'p50':>7} | {'p95':>7} | {'max':>7} |")
    print(f"|{'-' * 48}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
    labels = {
        "bus": "bare bus subscriber (baseline)",
        "player 10 Hz": "Player client, PUSH_NEW 10 Hz (default)",
        "player 100 Hz": "Player client, PUSH_NEW 100 Hz",
    }
    for name, label in labels.items():
        p50, p95, worst = percentiles(latency[name])
        print(f"| {label:<46} | {p50:7.2f} | {p95:7.2f} | {worst:7.2f} |")
    print(f"\nDeliveries to {n} receivers, per second ({args.duration:g} s runs)")
    print(f"| {'receivers':<56} | {'total/s':>9} | {'each/s':>8} |")
    print(f"|{'-' * 58}|{'-' * 11}|{'-' * 10}|")
    rows = [
        (f"{n} bare bus subscribers, writer at 100 Hz (baseline)", bus_100),
        (f"{n} Player clients, PUSH_ALL rounds at 100 Hz", push),
        (f"{n} Player clients, PULL_ALL rounds as fast as asked", pull),
    ]
    for label, rate in rows:
        print(f"| {label:<56} | {rate:9.0f} | {rate / n:8.1f} |")
    print()


if __name__ == "__main__":
    main()
