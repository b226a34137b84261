"""The server's logic without sockets: dispatch, errors as ERR, rate limits per client host, the bounded client
table, and a fuzz run that nothing a client sends can break."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from pluto.gateways.netmotion.server import Address, NetMotionService, ServerLimits
from pluto.hardware.arm.motion import MotionFileError

A: Address = ("127.0.0.1", 40001)
B: Address = ("127.0.0.2", 40002)
"""A client on another host (every 127/8 address is this computer's loopback)."""


class FakeArm:
    """A motion service that records what it is asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []
        self.next_id = 0
        self.broken = False

    def forward_kinematics(self, link: int) -> NDArray[np.float64]:
        if link > 7:
            raise KeyError(f"LynxArm6 has links 0..7, not {link}")
        if self.broken:
            raise RuntimeError("a bug")
        return np.eye(4)

    def run_motion(self, filename: str, owner: Address) -> int:
        self.calls.append(("run", filename, owner))
        if filename.startswith("."):
            raise MotionFileError(filename, 0, "not a valid motion file name")
        self.next_id += 1
        return self.next_id

    def point_ik(self, link: int, target: tuple[float, float, float], owner: Address) -> int:
        self.calls.append(("ikp", link, target, owner))
        self.next_id += 1
        return self.next_id

    def stop_motion(self, motion_id: int) -> bool:
        return motion_id == 1

    def motions(self) -> list[tuple[int, str]]:
        return [(1, "SEQUENCE a.mot")]

    def joints(self) -> tuple[NDArray[np.float64], Sequence[bool]]:
        return np.array([0.1, 0.02]), [False, True]


def test_commands_reach_the_arm_with_their_owner() -> None:
    arm = FakeArm()
    service = NetMotionService(arm)
    assert service.datagram_received(b"PING", A, 0.0) == [b"PONG\n"]
    assert service.datagram_received(b"RUNMS a.mot\nIKP 7 100 0 50", B, 0.0) == [b"MOTMANREG 1\n", b"MOTMANREG 2\n"]
    assert arm.calls == [("run", "a.mot", B), ("ikp", 7, (0.1, 0.0, 0.05), B)]
    assert service.datagram_received(b"STOP 1", A, 0.0) == [b"STOPPED 1\n"]
    assert service.datagram_received(b"STOP 2", A, 0.0) == [b"ERR no running motion has id 2\n"]
    assert service.datagram_received(b"LIST", A, 0.0) == [b"LIST 1\nMOTION 1 SEQUENCE a.mot\n"]
    assert service.datagram_received(b"JOINTS", A, 0.0) == [b"JOINTS 1.000000E-01 2.000000E+01\n"]
    assert service.motion_response(2, "STATUS") == b"MOTMANRESP 2 STATUS\n"


def test_errors_become_err_replies_and_are_counted() -> None:
    arm = FakeArm()
    service = NetMotionService(arm)
    assert service.datagram_received(b"FK 9", A, 0.0) == [b"ERR LynxArm6 has links 0..7, not 9\n"]
    assert service.datagram_received(b"RUNMS .x", A, 0.0) == [b"ERR .x: not a valid motion file name\n"]
    arm.broken = True
    assert service.datagram_received(b"FK 1", A, 0.0) == [b"ERR internal error (logged by the server)\n"]
    arm.broken = False
    assert service.datagram_received(b"FK 1", A, 0.0)[0].startswith(b"FK 1 ROW 0 : 1.000000E+00")
    stats = service.statistics()
    assert (stats.refused, stats.failures, stats.commands, stats.datagrams) == (3, 1, 4, 4)


def test_each_client_host_is_rate_limited_on_its_own() -> None:
    service = NetMotionService(FakeArm(), ServerLimits(rate=10.0, burst=5.0))
    answered = [service.datagram_received(b"PING", A, 100.0) for _ in range(8)]
    assert answered.count([b"PONG\n"]) == 5 and answered.count([]) == 3
    assert service.datagram_received(b"PING", B, 100.0) == [b"PONG\n"]  # a client on another host is not affected
    assert service.datagram_received(b"PING", A, 100.05) == []  # half a token back
    assert service.datagram_received(b"PING", A, 100.2) == [b"PONG\n"]
    assert service.statistics().rate_limited == 4


def test_the_ports_of_one_host_share_its_rate_and_each_reply_goes_to_its_port() -> None:
    service = NetMotionService(FakeArm(), ServerLimits(rate=10.0, burst=5.0))
    ports: list[Address] = [("127.0.0.1", 50000 + i) for i in range(8)]
    answered = [service.datagram_received(b"PING", port, 100.0) for port in ports]
    assert answered == [[b"PONG\n"]] * 5 + [[]] * 3  # one burst for the host, however many ports it sends from
    assert service.clients == 1 and service.statistics().rate_limited == 3
    assert service.datagram_received(b"PING", B, 100.0) == [b"PONG\n"]
    tight = NetMotionService(FakeArm(), ServerLimits(budget=1.0, budget_burst=1.0))
    assert tight.receive(b"STOP 2", ports[0], 0.0) and tight.receive(b"PING", ports[1], 0.0)
    assert tight.serve(0.0) == [(ports[0], b"ERR no running motion has id 2\n")]
    assert tight.serve(1.0) == [(ports[1], b"PONG\n")]  # it waited for the budget: the reply goes to its port


def test_the_client_table_is_bounded() -> None:
    service = NetMotionService(FakeArm(), ServerLimits(max_clients=16))
    for port in range(1000):  # one host
        service.datagram_received(b"PING", ("127.0.0.1", port), 0.0)
    assert service.clients == 1
    for host in range(1000):
        service.datagram_received(b"PING", (f"127.1.{host // 250}.{host % 250 + 1}", 40000), 0.0)
    assert service.clients == 16


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=600) | st.sampled_from([b"IKP 7 1 2 3", b"RUNMS ../../x", b"FK 99999"]), max_size=8))
def test_no_datagram_breaks_the_service(datagrams: list[bytes]) -> None:
    service = NetMotionService(FakeArm())
    for data in datagrams:
        for reply in service.datagram_received(data, A, 0.0):
            text = reply.decode("ascii")
            assert text.endswith("\n") and len(reply) < 1024
    assert service.datagram_received(b"PING", B, 0.0) == [b"PONG\n"]
    assert service.statistics().failures == 0
