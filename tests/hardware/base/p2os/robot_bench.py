"""What the P2OS robot core's tests share: the byte vectors of docs/protocols/p2os.md, a robot core with a
client-side decoder on a hand-driven clock, and a corridor to bump into."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pluto.hardware.base.p2os import (
    Command,
    P2osDecoder,
    Sip,
    encode_command,
)
from pluto.hardware.base.p2os.decoder import Event
from pluto.hardware.base.p2os.robot import P2osRobot
from pluto.sim.world import World

# Byte vectors of docs/protocols/p2os.md.
SYNC0 = bytes.fromhex("FA FB 03 00 00 00")
SYNC1 = bytes.fromhex("FA FB 03 01 00 01")
SYNC2 = bytes.fromhex("FA FB 03 02 00 02")
OPEN = bytes.fromhex("FA FB 06 01 3B 01 00 02 3B")
CONFIG = bytes.fromhex("FA FB 06 12 3B 01 00 13 3B")
ENABLE_1 = bytes.fromhex("FA FB 06 04 3B 01 00 05 3B")
VEL_300 = bytes.fromhex("FA FB 06 0B 3B 2C 01 37 3C")
RVEL_MINUS_20 = bytes.fromhex("FA FB 06 15 1B 14 00 29 1B")
SETV_2200 = bytes.fromhex("FA FB 06 06 3B 98 08 9E 43")
CLOSE = bytes.fromhex("FA FB 06 02 3B 01 00 03 3B")
SYNC2_REPLY_AMRISIM = bytes.fromhex("FA FB 18 02") + b"AMRISim\x00Pioneer\x00p3dx\x00" + bytes.fromhex("EB BD")

DT = 0.01


def state_of(robot: P2osRobot) -> str:
    """The link state, read afresh (a plain comparison would let the type checker narrow it for good)."""
    return robot.state


class Bench:
    """A robot core, a client-side decoder and a hand-driven clock."""

    def __init__(self, robot: P2osRobot | None = None) -> None:
        self.robot = robot if robot is not None else P2osRobot()
        self.decoder = P2osDecoder("client")
        self.t = 0.0
        self.robot.step(self.t)

    def send(self, command: Command | int, argument: int | None = None) -> None:
        self.robot.receive_data(encode_command(command, argument))

    def run(
        self,
        seconds: float,
        *,
        pulse: float | None = None,
        repeat: tuple[tuple[Command, int], ...] = (),
        until: Callable[[], bool] | None = None,
    ) -> None:
        """Step the robot for ``seconds`` in 10 ms steps, sending PULSE every ``pulse`` s if given; or, with
        ``repeat``, those commands instead (a live client renews its velocity commands, as ARIA does every 0.5 s);
        stop early once ``until`` is true."""
        next_pulse = self.t + pulse if pulse else math.inf
        for _ in range(round(seconds / DT)):
            self.t += DT
            self.robot.step(self.t)
            if until is not None and until():
                return
            if self.t >= next_pulse - 1e-9:
                for command, argument in repeat or ((Command.PULSE, None),):
                    self.send(command, argument)
                next_pulse += pulse or math.inf

    def packets(self) -> list[Event]:
        data = self.robot.data_to_send()
        if data:  # b"" would tell the decoder the stream ended
            self.decoder.receive_data(data)
        return list(self.decoder.events())

    def sips(self) -> list[Sip]:
        return [p for p in self.packets() if isinstance(p, Sip)]

    @staticmethod
    def sips_in(data: bytes) -> list[Sip]:
        """The SIPs in ``data`` (robot bytes), decoded by a decoder of their own."""
        decoder = P2osDecoder("client")
        decoder.receive_data(data)
        return [p for p in decoder.events() if isinstance(p, Sip)]

    def last_sip(self) -> Sip:
        self.run(0.1)
        sips = self.sips()
        assert sips, "no SIP"
        return sips[-1]

    def open(self, *, enable: bool = True) -> None:
        for packet in (SYNC0, SYNC1, SYNC2, OPEN):
            self.robot.receive_data(packet)
        if enable:
            self.robot.receive_data(ENABLE_1)
        self.robot.data_to_send()
        assert self.robot.state == "open"
        assert self.robot.motors_enabled == enable


def corridor(length: float = 6.0, width: float = 2.0) -> World:
    """A straight corridor along +x from x=0 to ``length``, closed at both ends, the robot at (1, 0) facing +x."""
    half = width / 2
    walls = [
        (0.0, -half, length, -half),
        (0.0, half, length, half),
        (0.0, -half, 0.0, half),
        (length, -half, length, half),
    ]
    return World(name="corridor", walls=np.array(walls), start=(1.0, 0.0, 0.0))
