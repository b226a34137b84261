"""The emulated PowerCube modules on the wire: CAN frames a host sends (identifier, data bytes) and the frames the
modules answer. The broadcasts are those of Schunk's M5 library (libm5api), which carry a second byte."""

from __future__ import annotations

import struct
import uuid

import can
import pytest

from pluto.hardware.wrist import powercube as pc
from pluto.hardware.wrist.emulate import PowerCubeEmulator
from tests.helpers import wait_until

GUARD = 5.0  # s: waits are for conditions; this only guards against a hang


def send(raw: can.BusABC, ident: int, data: str) -> None:
    raw.send(can.Message(arbitration_id=ident, data=bytes.fromhex(data), is_extended_id=False))


def state_of(raw: can.BusABC, module: int) -> int:
    """The state word module ``module`` answers to GET_EXTENDED CUBE_STATE (``0x0C0 + id [0A 27]``)."""
    send(raw, 0x0C0 + module, "0a 27")
    while (reply := raw.recv(GUARD)) is not None:
        if reply.arbitration_id == 0x0A0 + module and bytes(reply.data[:2]) == bytes.fromhex("0a 27"):
            return int(struct.unpack_from("<I", bytes(reply.data), 2)[0])
    raise AssertionError(f"module {module} did not answer")


@pytest.mark.parametrize("halt_all", ["02 00", "02"])
def test_halt_reset_and_home_of_every_module_are_carried_out(halt_all: str) -> None:
    channel = f"wire-{uuid.uuid4().hex[:8]}"
    with PowerCubeEmulator(channel, homed=False) as unit, can.Bus(interface="virtual", channel=channel) as raw:
        send(raw, 0x100, halt_all)  # halt all
        wait_until(lambda: all(unit.state_word(a) & pc.STATE_HALTED for a in (0, 1)), timeout=GUARD)
        assert state_of(raw, 1) & pc.STATE_HALTED and state_of(raw, 2) & pc.STATE_HALTED
        send(raw, 0x100, "00 00")  # reset all
        wait_until(lambda: not any(unit.state_word(a) & pc.STATE_HALTED for a in (0, 1)), timeout=GUARD)
        send(raw, 0x100, "01 00")  # home all
        wait_until(lambda: all(unit.state_word(a) & pc.STATE_HOME_OK for a in (0, 1)), timeout=GUARD)
        assert state_of(raw, 2) & pc.STATE_HOME_OK


def test_the_module_codec_takes_one_and_two_byte_broadcasts_only() -> None:
    codec = pc.PowerCubeCodec("module", (1, 2))
    for data in ("02", "02 00", "00 00", "01 00", "02 00 00"):
        codec.receive_frame(0x100, bytes.fromhex(data))
    assert list(codec.events()) == [pc.Halt(0), pc.Halt(0), pc.Reset(0), pc.Home(0)]
    assert codec.statistics().malformed == 1  # three bytes are not a broadcast
