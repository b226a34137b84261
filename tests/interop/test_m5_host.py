"""A small host in the manner of Schunk's M5 library (libm5api) drives the emulated PowerCube wrist on python-can's
virtual bus: its broadcasts carry a second byte (reset-all ``0x100 [00 00]``, home-all ``[01 00]``, halt-all
``[02 00]``), its requests go to 0x0E0 + id (PUT) and 0x0C0 + id (GET), the answers come on 0x0A0 + id. The host
is written here from those frame layouts, byte for byte, with nothing of Pluto's codec.
"""

from __future__ import annotations

import struct
import time
import uuid

import can
import pytest

from pluto.hardware.wrist.emulate import PowerCubeEmulator

GUARD = 10.0  # s: the host's waits end on answers; this only guards against a hang
HOME_OK, HALTED, RAMP_END, ERROR = 0x2, 0x4, 0x8000, 0x1


class M5Host:
    """Reset, home, move and halt as libm5api sends them."""

    def __init__(self, bus: can.BusABC) -> None:
        self.bus = bus

    def send(self, ident: int, data: bytes) -> None:
        self.bus.send(can.Message(arbitration_id=ident, data=data, is_extended_id=False))

    def reset_all(self) -> None:
        self.send(0x100, bytes((0x00, 0x00)))

    def home_all(self) -> None:
        self.send(0x100, bytes((0x01, 0x00)))

    def halt_all(self) -> None:
        self.send(0x100, bytes((0x02, 0x00)))

    def get(self, module: int, param: int) -> bytes:
        """GET_EXTENDED: the 4 value bytes of the answer ``0x0A0 + id [0A pp vv vv vv vv]``."""
        self.send(0x0C0 + module, bytes((0x0A, param)))
        deadline = time.monotonic() + GUARD
        while time.monotonic() < deadline:
            reply = self.bus.recv(0.5)
            if (
                reply is not None
                and reply.arbitration_id == 0x0A0 + module
                and bytes(reply.data[:2]) == bytes((0x0A, param))
            ):
                return bytes(reply.data[2:6])
        raise AssertionError(f"module {module} did not answer GET 0x{param:02X}")

    def state(self, module: int) -> int:
        return int(struct.unpack("<I", self.get(module, 0x27))[0])

    def position(self, module: int) -> float:
        return float(struct.unpack("<f", self.get(module, 0x3C))[0])

    def move_ramp(self, module: int, target: float, velocity: float, acceleration: float) -> None:
        self.send(0x0E0 + module, bytes((0x08, 0x4F)) + struct.pack("<f", velocity))  # TARGET_VEL
        self.send(0x0E0 + module, bytes((0x08, 0x50)) + struct.pack("<f", acceleration))  # TARGET_ACC
        self.send(0x0E0 + module, bytes((0x0B, 0x04)) + struct.pack("<f", target))  # SET_MOTION FRAMP

    def wait_state(self, module: int, bits: int, present: bool = True) -> int:
        deadline = time.monotonic() + GUARD
        while time.monotonic() < deadline:
            state = self.state(module)
            if bool(state & bits == bits) == present:
                return state
        raise AssertionError(f"module {module}: state bits 0x{bits:X} never {'set' if present else 'clear'}")


def test_a_schunk_style_host_homes_moves_and_halts_the_emulated_wrist() -> None:
    channel = f"m5-{uuid.uuid4().hex[:8]}"
    with PowerCubeEmulator(channel, homed=False) as unit, can.Bus(interface="virtual", channel=channel) as bus:
        host = M5Host(bus)
        host.reset_all()
        host.home_all()
        for module in (1, 2):
            host.wait_state(module, HOME_OK)
        host.move_ramp(1, 0.3, 1.0, 4.0)
        host.wait_state(1, RAMP_END)
        assert host.position(1) == pytest.approx(0.3, abs=1e-4)
        host.move_ramp(2, -0.3, 1.0, 4.0)
        host.halt_all()  # the emergency stop of every module, as libm5api sends it
        for module in (1, 2):
            assert host.wait_state(module, HALTED) & HALTED
        stopped = host.position(2)
        host.move_ramp(2, 0.2, 1.0, 4.0)  # ignored while halted
        assert host.position(2) == pytest.approx(stopped, abs=1e-6) and unit.position()[1] == pytest.approx(stopped)
        host.reset_all()
        for module in (1, 2):
            host.wait_state(module, HALTED, present=False)
