"""A seeded stream of hostile input at the player module on the simulated robot, interleaved with a well-behaved
client that must keep being served: it keeps receiving position data, and its commands reach the base.

Hostile input: random bytes, malformed headers (wrong stx, random types, devices and sizes, payloads shorter or
longer than the header says), requests and commands of the wrong size, commands and requests whose numbers are the
extremes of their fields (Player 1.5 sends only integers, so "huge" is the largest i32 or u32: 2,147 km, 596,523
hours of arc a second), access letters that are not one, and connections that end inside a message. One hostile
connection stays open the whole time and gets garbage at every turn; the others open, often take write access,
send a burst and close. Every number that reaches the bus must be within pluto.limits.
"""

from __future__ import annotations

import contextlib
import math
import random
import socket
from collections.abc import Callable, Iterator

import pytest

from pluto import limits, msgs
from pluto.bus import Bus
from pluto.gateways.player.module import PlayerModule
from pluto.gateways.player.protocol import BANNER, HEADER, MAX_PAYLOAD, STX, DeviceCode, MsgType, encode_message
from pluto.gateways.player.structs import (
    AuthRequest,
    DataFreqRequest,
    DataModeRequest,
    DataRequest,
    DeviceRequest,
    LaserConfig,
    MotorPower,
    PidRequest,
    Position3dCommand,
    PositionCommand,
    PositionMode,
    SetOdometry,
    SpeedProfile,
)
from pluto.player.client import PlayerClient
from tests.gateways.player.test_module import Stack, read_until, stack  # noqa: F401 (stack is a fixture)
from tests.helpers import wait_until
from tests.scenarios.stack import Collector

SEED = 20040602
ROUNDS = 60
I32 = (0, 1, -1, 2**31 - 1, -(2**31), 1000, -1000)
U32 = (0, 1, 2**32 - 1, 2**31, 1_296_000)
I16 = (0, 1, -1, 2**15 - 1, -(2**15))


def i32(rng: random.Random) -> int:
    return rng.choice(I32) if rng.random() < 0.7 else rng.randint(-(2**31), 2**31 - 1)


def random_bytes(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(1, 200))


def malformed_header(rng: random.Random) -> bytes:
    stx = rng.choice([STX, STX, STX, 0x7858, rng.getrandbits(16)])
    mtype = rng.choice([1, 2, 3, 4, 5, 6, 7, 0, rng.getrandbits(16)])
    device = rng.choice([1, 4, 5, 6, 30, 0, 256, rng.getrandbits(16)])
    size = rng.choice([rng.randint(0, 80), rng.randint(MAX_PAYLOAD - 10, MAX_PAYLOAD + 10), rng.getrandbits(32)])
    junk = [rng.getrandbits(32) for _ in range(5)]
    header = HEADER.pack(stx, mtype, device, rng.randint(0, 3), *junk, size)
    return header + rng.randbytes(min(size, rng.randint(0, 100)))  # often shorter than it says: the next eats it


def wrong_size(rng: random.Random) -> bytes:
    mtype = rng.choice([MsgType.REQ, MsgType.CMD])
    device = rng.choice([1, 4, 30, 6, 5])
    return encode_message(mtype, device, 0, rng.randbytes(rng.randint(1, 60)))


def huge_command(rng: random.Random) -> bytes:
    if rng.random() < 0.6:
        fields = [i32(rng) for _ in range(6)]
        command = PositionCommand(*fields, rng.choice([0, 1, 255]), rng.choice([0, 0, 1, 1, 2, 255]))
        return encode_message(MsgType.CMD, DeviceCode.POSITION, 0, command.pack())
    angles = [rng.choice(U32) for _ in range(3)]
    command3d = Position3dCommand(*(i32(rng) for _ in range(3)), *angles, *(i32(rng) for _ in range(6)))
    return encode_message(MsgType.CMD, DeviceCode.POSITION3D, 0, command3d.pack())


def hostile_request(rng: random.Random) -> bytes:
    choices: list[tuple[int, bytes]] = [
        (DeviceCode.POSITION, SetOdometry(9, i32(rng), i32(rng), i32(rng)).pack()),
        (DeviceCode.POSITION, SpeedProfile(8, rng.choice(I16), rng.choice(I16)).pack()),
        (DeviceCode.POSITION, PidRequest(rng.choice([6, 7]), i32(rng), i32(rng), i32(rng)).pack()),
        (DeviceCode.POSITION, MotorPower(2, rng.randint(0, 255)).pack()),
        (DeviceCode.POSITION3D, PositionMode(5, rng.randint(0, 255)).pack()),
        (DeviceCode.LASER, LaserConfig(2, *(rng.choice(I16) for _ in range(2)), 50, 10, 1).pack()),
        (DeviceCode.PLAYER, DeviceRequest(rng.choice([4, 30, 6, 5, 13]), 0, rng.randbytes(1)).pack()),
        (DeviceCode.PLAYER, DataModeRequest(mode=rng.randint(0, 255)).pack()),
        (DeviceCode.PLAYER, DataFreqRequest(frequency=rng.randint(0, 65535)).pack()),
        (DeviceCode.PLAYER, AuthRequest(rng.randbytes(rng.randint(0, 32))).pack()),
        (DeviceCode.PLAYER, DataRequest().pack()),
    ]
    device, payload = rng.choice(choices)
    return encode_message(MsgType.REQ, device, 0, payload)


KINDS: tuple[Callable[[random.Random], bytes], ...] = (
    random_bytes,
    malformed_header,
    wrong_size,
    huge_command,
    huge_command,
    hostile_request,
)
WRITE_ACCESS = encode_message(MsgType.REQ, 1, 0, DeviceRequest(4, 0, b"a").pack()) + encode_message(
    MsgType.REQ, 1, 0, DeviceRequest(30, 0, b"a").pack()
)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    banner = b""
    while len(banner) < len(BANNER):
        chunk = sock.recv(len(BANNER) - len(banner))
        assert chunk, "closed before the banner"
        banner += chunk
    return sock


def send_quietly(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):  # the server may have closed it: a right answer to garbage too
        sock.sendall(data)


@pytest.fixture
def target(stack: Callable[..., tuple[Stack, PlayerModule]]) -> Iterator[PlayerModule]:  # noqa: F811
    _, player = stack(profile_modules=("sim", "base"))
    yield player


def test_hostile_input_never_stops_a_well_behaved_client(bus: Bus, target: PlayerModule) -> None:
    player = target
    rng = random.Random(SEED)
    commands = Collector(bus, "Base/Drive/Command", msgs.ActuatorState)
    sent = {"messages": 0, "bytes": 0, "connections": 0}
    served = {"rounds": 0, "position data": 0, "commands seen on the bus": 0}
    persistent = connect(player.port)
    with PlayerClient(port=player.port, timeout=30.0) as good:
        good.subscribe("position", access="a")
        read_until(good, lambda: good.position.count > 0)
        for turn in range(ROUNDS):
            # garbage on the connection that stays open
            send_quietly(persistent, b"".join(rng.choice(KINDS[:3])(rng) for _ in range(rng.randint(1, 3))))
            # a burst on a connection of its own, often with write access first, then the end
            frames = [rng.choice(KINDS)(rng) for _ in range(rng.randint(1, 8))]
            sent["messages"] += len(frames) + 1
            burst = (WRITE_ACCESS if rng.random() < 0.7 else b"") + b"".join(frames)
            sent["bytes"] += len(burst)
            sent["connections"] += 1
            with connect(player.port) as sock:
                if rng.random() < 0.5:
                    send_quietly(sock, burst)
                else:
                    cut = rng.randint(0, len(burst))
                    send_quietly(sock, burst[:cut])
                    send_quietly(sock, burst[cut:])
            wait_until(lambda: player.server.clients == 2, timeout=60, message="the burst's connection is gone")
            # the well-behaved client: a command of its own, seen on the bus; and its data keeps coming
            v, degrees = 0.001 * (turn + 1), (turn % 40) - 20
            good.set_speed(v, math.radians(degrees))  # a velocity no earlier turn used
            commands.wait_for(lambda c, v=v, d=degrees: c.velocity == pytest.approx([v, math.radians(d)]), timeout=60)
            served["commands seen on the bus"] += 1
            before = good.position.count
            read_until(good, lambda: good.position.count > before)  # noqa: B023 (called at once)
        good.set_speed(0.0, 0.0)
        served["rounds"], served["position data"] = good.rounds, good.position.count
    persistent.close()
    stats = player.server.statistics()
    report = (
        f"sent {sent['messages']} hostile messages ({sent['bytes']} bytes) on {sent['connections']} connections; "
        f"counted {stats.garbage_bytes} garbage bytes, {stats.oversized} oversized headers, {stats.nacks} NACKs, "
        f"{stats.errors} ERRs, {stats.ignored} ignored, {stats.refused_commands} refused commands, "
        f"{stats.protocol_errors} truncated streams, {stats.failures} failures; the good client got "
        f"{served['rounds']} rounds, {served['position data']} position data, "
        f"{served['commands seen on the bus']}/{ROUNDS} commands through"
    )
    print(report)
    assert stats.failures == 0, report
    assert served["commands seen on the bus"] == ROUNDS, report
    assert stats.refused_commands > 0 and stats.garbage_bytes > 0 and stats.nacks > 0, report
    for command in commands.snapshot():  # nothing out of range ever reached the bus
        limits.check("Base/Drive/Command", command)
