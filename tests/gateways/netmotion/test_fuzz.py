"""Fuzzing the NetworkMotionServer: streams of malformed and hostile datagrams (random bytes, 1e308, nan and inf,
overlong lines, many fields, partial commands, motion files with absurd values) interleaved with a well-behaved
client whose every request must be answered correctly; what is out of range gets ``ERR`` and is counted, and never
reaches the arm.

Two levels: the server core with hypothesis and an arm that checks every value it is handed; and the whole netmotion
module (simulated arm on the bus, real UDP sockets) with a seeded random stream, printing its counts (``-s``).
"""

from __future__ import annotations

import math
import random
import re
import socket
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from pluto.bus import Bus
from pluto.gateways.netmotion.codec import MAX_COORDINATE_MM
from pluto.gateways.netmotion.module import NetMotionModule, NetMotionParams
from pluto.gateways.netmotion.server import Address, NetMotionService, ServerLimits
from pluto.hardware.arm.kinematics import ArmModel
from pluto.hardware.arm.module import ArmModule
from pluto.hardware.arm.motion import MotionFileError
from tests.gateways.netmotion.udp import Client, ScaledClock

GOOD: Address = ("127.0.0.1", 40000)
HOSTILE: list[Address] = [("127.0.0.1", 41000 + i) for i in range(4)]
GENEROUS = ServerLimits(rate=1e9, burst=1e9, budget=1e9, budget_burst=1e9)
"""Limits that drop nothing: every hostile datagram reaches the parser."""

ODD_NUMBERS = [
    "1e308",
    "-1e308",
    "1e309",
    "-1e999",
    "1.7976931348623157e308",
    "nan",
    "NaN",
    "-nan",
    "inf",
    "-inf",
    "+inf",
    "Infinity",
    "1e-400",
    "9" * 60,
    "0x1F",
    "1_0",
    "--1",
    "1e",
    ".",
    "e5",
    "100000",
    "100000.0001",
    "-99999.9",
    "0",
    "-0",
    "7",
    "12",
]
WORDS = ["PING", "FK", "RUNMS", "IKP", "STOP", "LIST", "JOINTS", "IK", "RUN", "STO", "P", "ping", "Ikp", "FK7"]
NUMBER = re.compile(r"-?\d\.\d{6}E[-+]\d{2,3}")


class CheckingArm:
    """A motion service that fails the test if a value out of range ever reaches it."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def forward_kinematics(self, link: int) -> NDArray[np.float64]:
        assert 0 <= link <= 999_999_999
        self.calls["fk"] += 1
        if link > 7:
            raise KeyError(f"LynxArm6 has links 0..7, not {link}")
        return np.eye(4)

    def run_motion(self, filename: str, owner: Address) -> int:
        assert filename.isprintable() and " " not in filename
        self.calls["run"] += 1
        raise MotionFileError(filename, 0, "no such motion file")

    def point_ik(self, link: int, target: tuple[float, float, float], owner: Address) -> int:
        assert all(math.isfinite(c) and abs(c) <= MAX_COORDINATE_MM * 1e-3 for c in target), target
        self.calls["ikp"] += 1
        return 1

    def stop_motion(self, motion_id: int) -> bool:
        assert 0 <= motion_id <= 999_999_999
        return False

    def motions(self) -> list[tuple[int, str]]:
        return []

    def joints(self) -> tuple[NDArray[np.float64], Sequence[bool]]:
        return np.array([0.1, 0.02]), [False, True]


GOOD_REQUESTS = [
    ("PING", "PONG\n"),
    ("JOINTS", "JOINTS 1.000000E-01 2.000000E+01\n"),
    ("LIST", "LIST 0\n"),
    ("IKP 7 100 -50 20", "MOTMANREG 1\n"),
    ("FK 3", "".join(f"FK 3 ROW {i} : " + " ".join(f"{v:.6E}" for v in np.eye(4)[i]) + "\n" for i in range(4))),
]

token = st.sampled_from(ODD_NUMBERS) | st.floats().map(repr) | st.integers().map(str) | st.text(max_size=12)
line = st.builds(lambda word, args: " ".join([word, *args]), st.sampled_from(WORDS), st.lists(token, max_size=40))
datagram = (
    st.lists(line, min_size=1, max_size=12).map(lambda lines: "\n".join(lines).encode("utf-8", "replace"))
    | st.builds(lambda xs: ("IKP 7 " + " ".join(xs)).encode(), st.lists(st.sampled_from(ODD_NUMBERS), max_size=5))
    | st.binary(max_size=700)
    | st.integers(200, 700).map(lambda n: b"IKP 7 " + b"9" * n)
    | st.sampled_from([b"IKP 7 1", b"FK", b"RUN", b"STOP", b"\r\n", b"\x00PING", b"PING\r\nFK 3\r", b" " * 513])
)


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from(HOSTILE), datagram), max_size=30), st.randoms(use_true_random=False))
def test_hostile_streams_leave_the_good_client_served_and_the_arm_untouched(
    stream: list[tuple[Address, bytes]], rng: random.Random
) -> None:
    arm = CheckingArm()
    service = NetMotionService(arm, GENEROUS)
    errors_seen = good = 0
    for n, (sender, data) in enumerate(stream):
        service.receive(data, sender, float(n))
        for address, reply in service.serve(float(n)):
            assert address == sender
            text = reply.decode("ascii")
            assert text.endswith("\n") and len(reply) < 1024
            errors_seen += text.startswith("ERR ")
        request, expected = rng.choice(GOOD_REQUESTS)
        arm_before = arm.calls["ikp"]
        assert service.datagram_received(request.encode(), GOOD, float(n)) == [expected.encode()]
        if request.startswith("IKP"):
            assert arm.calls["ikp"] == arm_before + 1
        good += 1
    stats = service.statistics()
    counts = f"{len(stream)} hostile datagrams, {good} good requests, {stats.refused} errors counted"
    assert stats.refused == errors_seen, counts
    assert stats.failures == 0 and stats.rate_limited == 0, counts


@pytest.mark.parametrize(
    "request_line",
    [
        "IKP 7 1e308 0 0",
        "IKP 7 0 -1e308 0",
        "IKP 7 1.7976931348623157e308 1 1",
        "IKP 7 1e309 0 0",
        "IKP 7 nan 0 0",
        "IKP 7 inf 0 0",
        "IKP 7 0 0 -Infinity",
        "IKP 7 100000.0001 0 0",
        "IKP 7 " + "9" * 60 + " 0 0",
    ],
)
def test_out_of_range_coordinates_are_refused_counted_and_never_reach_the_arm(request_line: str) -> None:
    arm = CheckingArm()
    service = NetMotionService(arm)
    [reply] = service.datagram_received(request_line.encode(), GOOD, 0.0)
    assert reply.startswith(b"ERR "), reply
    assert service.statistics().refused == 1
    assert arm.calls["ikp"] == 0


# -- the whole module on real sockets ---------------------------------------------------------------------------

HOSTILE_MOTIONS = {
    "huge.mot": "#MSq\nadvanceTime 1e308\nElbow 1e308\nadvanceTime 1e308\nElbow 0\n#END\n",
    "late.mot": "#MSq\nsetTime 1e308\nElbow 1\n#END\n",
    "hour.mot": "#MSq\nadvanceTime 3600001\nElbow 0.5\n#END\n",
    "far.pos": "#POS\nElbow 1e308\n#END\n",
    "wide.pos": "#POS\nGripper -1e308\n#END\n",
    "heavy.pos": "#POS\nElbow 0.5 1e308\n#END\n",
    "notanumber.pos": "#POS\nElbow nan\n#END\n",
}
"""Motion files with times, values or weights out of range: RUNMS must refuse each with ERR."""
GOOD_MOTIONS = {
    "short.mot": "#MSq\nadvanceTime 100\nElbow 0.3\nadvanceTime 100\nElbow 0\n#END\n",
    "grip.pos": "#POS\nGripper 10\n#END\n",
}
FILES = [*HOSTILE_MOTIONS, *GOOD_MOTIONS, "../x.mot", "/etc/passwd", "nothing.mot", "a" * 300, "x\x01.mot"]


def hostile_datagram(rng: random.Random) -> tuple[str, bytes]:
    """One hostile datagram and the name of its kind."""
    kind = rng.choice(["bytes", "fields", "ikp", "overlong", "lines", "partial", "runms", "control", "oversized"])
    if kind == "bytes":
        return kind, rng.randbytes(rng.randint(0, 512))
    if kind == "fields":
        args = [rng.choice(ODD_NUMBERS) for _ in range(rng.randint(0, 60))]
        return kind, " ".join([rng.choice(WORDS), *args]).encode()[:512]
    if kind == "ikp":
        return kind, ("IKP " + " ".join(rng.choice(ODD_NUMBERS) for _ in range(rng.randint(3, 5)))).encode()
    if kind == "overlong":
        return kind, (rng.choice(WORDS) + " " + "7" * rng.randint(250, 500)).encode()
    if kind == "lines":
        lines = [f"{rng.choice(WORDS)} {rng.choice(ODD_NUMBERS)}" for _ in range(rng.randint(2, 20))]
        return kind, rng.choice(["\n", "\r\n", "\r"]).join(lines).encode()[:512]
    if kind == "partial":
        whole = rng.choice(["IKP 7 100 50 20", "FK 3", "RUNMS short.mot", "STOP 1", "JOINTS", "PING"])
        return kind, whole[: rng.randint(0, len(whole) - 1)].encode()
    if kind == "runms":
        return kind, f"RUNMS {rng.choice(FILES)}".encode("utf-8", "replace")
    if kind == "control":
        good = rng.choice(["PING", "FK 3", "LIST"])
        cut = rng.randint(0, len(good))
        return kind, good[:cut].encode() + bytes([rng.choice([0, 7, 9, 11, 27, 127, 200, 255])]) + good[cut:].encode()
    return kind, b"PING " + b"x" * rng.randint(600, 4000)


@pytest.fixture
def fuzz_server(bus: Bus, tmp_path: Path, arm: ArmModule, clock: ScaledClock) -> Iterator[NetMotionModule]:
    root = tmp_path / "motions"
    root.mkdir()
    for name, text in {**HOSTILE_MOTIONS, **GOOD_MOTIONS}.items():
        (root / name).write_text(text)
    params = NetMotionParams(
        port=0,
        motions=str(root),
        prepare_ik=False,
        client_rate=1e6,
        client_burst=1e6,
        budget_rate=1e6,
        budget_burst=1e6,
    )
    module = NetMotionModule(bus, params, clock=clock)
    module.start()
    yield module
    module.stop()


def check_good_reply(request: str, reply: str, model: ArmModel) -> None:
    if request == "PING":
        assert reply == "PONG\n"
    elif request == "FK 3":
        rows = reply.splitlines()
        assert [row.split(" : ")[0] for row in rows] == [f"FK 3 ROW {i}" for i in range(4)], reply
        for row in rows:
            numbers = row.split(" : ")[1].split()
            assert len(numbers) == 4 and all(NUMBER.fullmatch(v) for v in numbers), reply
        assert rows[3].split(" : ")[1] == "0.000000E+00 0.000000E+00 0.000000E+00 1.000000E+00", reply
    elif request == "JOINTS":
        values = reply.split()[1:]
        assert reply.startswith("JOINTS ") and len(values) == model.num_outputs and reply.endswith("\n"), reply
        assert all(NUMBER.fullmatch(v) for v in values), reply
        q = np.array([float(v) for v in values])
        q[-1] /= 1000.0  # the gripper is in mm on the wire
        assert np.all(q >= model.lower - 1e-6) and np.all(q <= model.upper + 1e-6), reply
    elif request == "LIST":
        lines = reply.splitlines()
        assert re.fullmatch(r"LIST \d+", lines[0]) and int(lines[0].split()[1]) == len(lines) - 1, reply
        assert all(re.fullmatch(r"MOTION \d+ (SEQUENCE|POSTURE) \S.*", m) for m in lines[1:]), reply
    else:  # RUNMS <hostile motion>
        name = request.split()[1]
        assert reply.startswith(f"ERR {name}:"), reply


def test_a_seeded_hostile_stream_against_the_module(fuzz_server: NetMotionModule, arm: ArmModule) -> None:
    rng = random.Random(20_240_611)
    model = ArmModel.load("LynxArm6")
    senders = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(8)]
    kinds: Counter[str] = Counter()
    sent = good = hostile_replies = hostile_errors = 0

    def drain() -> None:
        nonlocal hostile_replies, hostile_errors
        for sock in senders:
            while True:
                try:
                    reply = sock.recv(65535)
                except BlockingIOError:
                    break
                hostile_replies += 1
                hostile_errors += reply.startswith(b"ERR ")

    requests = ["PING", "FK 3", "JOINTS", "LIST", *(f"RUNMS {name}" for name in HOSTILE_MOTIONS)]
    try:
        for sock in senders:
            sock.bind(("127.0.0.1", 0))
            sock.setblocking(False)
        with Client(fuzz_server.address) as client:
            for n in range(3000):
                kind, data = hostile_datagram(rng)
                kinds[kind] += 1
                senders[n % len(senders)].sendto(data, fuzz_server.address)
                sent += 1
                if n % 25 == 24:  # the good client asks and waits for its answer
                    request = requests[(n // 25) % len(requests)]
                    check_good_reply(request, client.ask(request), model)
                    good += 1
                    drain()
            assert client.ask("PING") == "PONG\n"  # every hostile datagram before it has been handled
        drain()
    finally:
        for sock in senders:
            sock.close()
    stats = fuzz_server.service.statistics()
    state = fuzz_server.arm_state.read()
    counts = (
        f"{sent} hostile datagrams sent ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}); "
        f"server: {stats.datagrams} received, {stats.oversized} oversized, {stats.rate_limited} rate-limited, "
        f"{stats.commands} commands, {stats.refused} errors (ERR) counted, {stats.failures} failures; "
        f"{good} good requests answered correctly; hostile senders got {hostile_replies} replies, "
        f"{hostile_errors} of them ERR; arm commands dropped: {fuzz_server.refused_commands} by netmotion, "
        f"{arm.rejected} by the arm"
    )
    print(counts)
    assert stats.failures == 0 and stats.rate_limited == 0, counts
    assert stats.datagrams == sent + good + 1, counts
    assert stats.oversized == kinds["oversized"], counts
    assert stats.refused >= hostile_errors + good // len(requests) * len(HOSTILE_MOTIONS), counts
    assert fuzz_server.refused_commands == 0 and arm.rejected == 0, counts
    assert fuzz_server.step_errors == 0 and fuzz_server.active, counts
    assert state is not None and np.isfinite(state.position).all(), counts
    assert np.all(np.array(state.position) >= model.lower - 1e-6), counts
    assert np.all(np.array(state.position) <= model.upper + 1e-6), counts


def test_every_hostile_motion_file_is_refused(fuzz_server: NetMotionModule) -> None:
    with Client(fuzz_server.address) as client:
        for name in HOSTILE_MOTIONS:
            before = fuzz_server.service.statistics().refused
            reply = client.ask(f"RUNMS {name}")
            assert reply.startswith(f"ERR {name}:"), reply
            assert fuzz_server.service.statistics().refused == before + 1
        assert client.ask("LIST") == "LIST 0\n"  # none of them runs
        reply = client.ask("RUNMS short.mot")
        assert re.fullmatch(r"MOTMANREG \d+\n", reply), reply  # a good file still does
