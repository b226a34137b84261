"""The NetworkMotionServer end to end: the netmotion module and a simulated arm module on the bus, real UDP sockets,
and the modules' clock running faster than real time.

The published transcript (docs/protocols/netmotion.md: PING/PONG, FK, RUNMS, IKP and the MOTMANREG / MOTMANRESP order),
the reference's FK vector byte for byte, two clients interleaving, the added commands, hostile input, and the launcher.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from pluto.bus import Bus
from pluto.errors import LaunchError
from pluto.gateways.netmotion.module import NetMotionModule, NetMotionParams
from pluto.hardware.arm.kinematics import ArmModel
from pluto.hardware.arm.module import ArmModule
from pluto.runtime import launcher
from tests.gateways.netmotion.udp import Client, ScaledClock
from tests.helpers import wait_until

FK3_AT_ZERO = (
    "FK 3 ROW 0 : 1.000000E+00 0.000000E+00 0.000000E+00 1.250000E+02\n"
    "FK 3 ROW 1 : 0.000000E+00 6.123234E-17 -1.000000E+00 5.616536E-15\n"
    "FK 3 ROW 2 : 0.000000E+00 1.000000E+00 6.123234E-17 1.532470E+02\n"
    "FK 3 ROW 3 : 0.000000E+00 0.000000E+00 0.000000E+00 1.000000E+00\n"
)


@pytest.fixture
def motions(tmp_path: Path) -> Path:
    root = tmp_path / "motions"
    root.mkdir()
    (root / "arm_pickup_move.mot").write_text(
        "#MSq\ndegrees\nadvanceTime 200\nShldr:elv -20\nElbow 30\nload open.pos\nadvanceTime 200\n"
        "Shldr:rot 20\nShldr:elv 0\n#END\n"
    )
    (root / "open.pos").write_text("#POS\nGripper 30\n#END\n")
    (root / "long.mot").write_text("#MSq\nadvanceTime 60000\nWrist:rot 0.5\n#END\n")
    (tmp_path / "outside.mot").write_text("#MSq\n#END\n")
    os.symlink(tmp_path / "outside.mot", root / "escape.mot")
    return root


@pytest.fixture
def start_server(
    bus: Bus, motions: Path, arm: ArmModule, clock: ScaledClock
) -> Iterator[Callable[..., NetMotionModule]]:
    started: list[NetMotionModule] = []

    def start(**params: object) -> NetMotionModule:
        settings: dict[str, object] = {"port": 0, "motions": str(motions), "prepare_ik": False, **params}
        module = NetMotionModule(bus, NetMotionParams(**settings), clock=clock)  # type: ignore[arg-type]
        module.start()
        started.append(module)
        return module

    yield start
    for module in started:
        module.stop()


@pytest.fixture
def server(start_server: Callable[..., NetMotionModule]) -> NetMotionModule:
    return start_server()


@pytest.fixture
def client(server: NetMotionModule) -> Iterator[Client]:
    with Client(server.address) as c:
        yield c


def registered(reply: str) -> int:
    match = re.fullmatch(r"MOTMANREG (\d+)\n", reply)
    assert match, reply
    return int(match.group(1))


def test_fk_of_the_reference_vector_byte_for_byte(client: Client) -> None:
    client.send("FK 3")
    data, _ = client.sock.recvfrom(65535)
    assert data == FK3_AT_ZERO.encode("ascii")
    rows = client.ask("FK 7").splitlines()
    assert [row.split(" : ")[0] for row in rows] == [f"FK 7 ROW {i}" for i in range(4)]
    assert [row.split()[-1] for row in rows[:3]] == ["2.194480E+02", "-1.667357E-16", "1.532470E+02"]


def test_the_seed_transcript(server: NetMotionModule, client: Client) -> None:
    assert client.ask("PING") == "PONG\n"
    assert client.ask("FK 3") == FK3_AT_ZERO
    first = registered(client.ask("RUNMS arm_pickup_move.mot"))
    assert client.recv() == f"MOTMANRESP {first} STATUS\n"
    assert client.recv() == f"MOTMANRESP {first} DEACTIVATE\n"
    second = registered(client.ask("IKP 4 1.0 1.0 1.0"))  # unreachable: the best solution is applied anyway
    assert second == first + 1
    assert client.recv() == f"MOTMANRESP {second} STATUS\n"
    assert client.recv() == f"MOTMANRESP {second} DEACTIVATE\n"
    assert client.nothing_more()


def test_ikp_puts_the_link_at_the_point(server: NetMotionModule, client: Client) -> None:
    motion = registered(client.ask("IKP 7 150 60 90"))
    assert client.until(f"MOTMANRESP {motion} DEACTIVATE\n") == [
        f"MOTMANRESP {motion} STATUS\n",
        f"MOTMANRESP {motion} DEACTIVATE\n",
    ]

    model = ArmModel.load("LynxArm6")

    def gripper_error() -> float:  # mm; the posture is done within 0.035 rad: the servos finish the last bit after
        joints = client.ask("JOINTS")
        assert re.fullmatch(r"JOINTS( -?\d\.\d{6}E[-+]\d\d){6}\n", joints)
        values = [float(v) for v in joints.split()[1:]]
        q = np.array([*values[:5], values[5] / 1000.0])
        return float(np.linalg.norm(model.link_transform(q, 7)[:3, 3] * 1000.0 - [150.0, 60.0, 90.0]))

    wait_until(lambda: gripper_error() < 1.0, timeout=10.0)


def test_two_clients_interleaving_get_only_their_own_replies(server: NetMotionModule) -> None:
    with Client(server.address) as a, Client(server.address) as b:
        a.send("RUNMS arm_pickup_move.mot")
        b.send("IKP 7 120 -80 150")
        a_id = registered(a.recv())
        b_id = registered(b.recv())
        assert a_id != b_id
        assert b.ask("PING") == "PONG\n"
        a.send("FK 3")
        b.send("RUNMS arm_pickup_move.mot")
        b_second = registered(b.recv())
        got_a = a.until(f"MOTMANRESP {a_id} DEACTIVATE\n")
        if not any(g.startswith("FK 3 ROW 0") for g in got_a):
            got_a.append(a.recv())
        got_b = b.until(f"MOTMANRESP {b_id} DEACTIVATE\n")
        if f"MOTMANRESP {b_second} DEACTIVATE\n" not in got_b:
            got_b += b.until(f"MOTMANRESP {b_second} DEACTIVATE\n")
        assert [g for g in got_a if g.startswith("FK")] == [a.ask("FK 3")] or len(got_a) == 3
        assert [g for g in got_a if not g.startswith("FK")] == [
            f"MOTMANRESP {a_id} STATUS\n",
            f"MOTMANRESP {a_id} DEACTIVATE\n",
        ]
        assert sorted(got_b) == sorted(
            [f"MOTMANRESP {i} {kind}\n" for i in (b_id, b_second) for kind in ("STATUS", "DEACTIVATE")]
        )
        for got in (got_a, got_b):  # each motion's STATUS comes before its DEACTIVATE
            for line in got:
                if line.endswith("DEACTIVATE\n"):
                    assert got.index(line.replace("DEACTIVATE", "STATUS")) < got.index(line)
        assert a.nothing_more() and b.nothing_more()


def test_stop_list_and_joints(server: NetMotionModule, client: Client) -> None:
    assert client.ask("LIST") == "LIST 0\n"
    motion = registered(client.ask("RUNMS long.mot"))
    assert client.ask("LIST") == f"LIST 1\nMOTION {motion} SEQUENCE long.mot\n"
    with Client(server.address) as other:
        assert other.ask(f"STOP {motion}") == f"STOPPED {motion}\n"
        assert other.ask(f"STOP {motion}") == f"ERR no running motion has id {motion}\n"
        assert other.nothing_more()
    assert client.recv() == f"MOTMANRESP {motion} DEACTIVATE\n"  # to its owner, and no STATUS
    assert client.ask("LIST") == "LIST 0\n"
    assert client.ask("JOINTS").startswith("JOINTS ")


def test_a_clock_jump_stops_the_running_motions(server: NetMotionModule, client: Client) -> None:
    motion = registered(client.ask("RUNMS long.mot"))
    clock = server.clock
    assert isinstance(clock, ScaledClock)
    clock.jump(0.0)  # a new simulation run: the motion was timed on the old one's clock
    assert client.recv() == f"MOTMANRESP {motion} DEACTIVATE\n"  # to its owner, and no STATUS
    assert client.ask("LIST") == "LIST 0\n"
    again = registered(client.ask("RUNMS long.mot"))  # motions of the new run run
    assert client.ask("LIST") == f"LIST 1\nMOTION {again} SEQUENCE long.mot\n"


def test_hostile_input_is_refused_or_dropped_and_the_server_carries_on(
    start_server: Callable[..., NetMotionModule],
) -> None:
    server = start_server(client_rate=20.0, client_burst=20.0)
    with Client(server.address) as c:
        for name, reason in [
            ("../outside.mot", "not a valid motion file name"),
            ("/etc/passwd", "not a valid motion file name"),
            ("escape.mot", "outside the motion directory"),
            ("nothing.mot", "no such motion file"),
        ]:
            reply = c.ask(f"RUNMS {name}")
            assert reply.startswith(f"ERR {name}: ") and reason in reply
        c.send(b"PING" + b"\x00" * (64 * 1024 - 100))  # 64 KB: dropped without a reply
        assert c.nothing_more()
        assert c.ask("PING") == "PONG\n"
        garbage = c.ask(bytes(range(256)).decode("latin-1").encode("latin-1")[:400].replace(b"\n", b" "))
        assert garbage == "ERR not a text command (printable ASCII only)\n"
        assert c.ask("IKP 7 1e999 0 0") == "ERR IKP coordinates must be between -100000 and 100000 mm\n"
        assert c.ask("FK 123456789") == "ERR LynxArm6 has links 0..7, not 123456789\n"
        for _ in range(300):  # a flood: most of it is dropped
            c.send("PING")
        answered = 0
        while not c.nothing_more(0.5):
            answered += 1
        assert 1 <= answered < 300 - 200
    with Client(server.address) as other:
        assert other.ask("PING") == "PONG\n"  # others are served meanwhile
    stats = server.service.statistics()
    assert stats.oversized == 1 and stats.rate_limited >= 200 and stats.failures == 0
    assert server.step_errors == 0 and server.active


def test_the_socket_is_bound_to_the_loopback_and_closed_on_stop(start_server: Callable[..., NetMotionModule]) -> None:
    server = start_server()
    host, port = server.address
    assert host == "127.0.0.1"
    with pytest.raises(Exception, match=r"cannot listen on udp 127\.0\.0\.1"):
        start_server(port=port)
    server.stop()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", port))  # free again


def test_without_the_arm_module_it_says_how_to_start_it(bus: Bus) -> None:
    with pytest.raises(LaunchError, match=r"arm module, which is not running.*pluto start arm"):
        NetMotionModule(bus, NetMotionParams(port=0, prepare_ik=False, arm_timeout=0.5)).start()


def test_pluto_start_netmotion_runs_it_as_a_daemon_beside_the_arm(bus: Bus, arm: ArmModule) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    launcher.start_daemon(bus, "netmotion", params={"port": port, "prepare_ik": False}, timeout=60.0)
    try:
        with Client(("127.0.0.1", port)) as c:
            assert c.ask("PING") == "PONG\n"
            assert c.ask("FK 3") == FK3_AT_ZERO
    finally:
        launcher.stop_daemon(bus.robot, "netmotion")
