"""The Crossbow DMU/VG codec, byte by byte against packets written from the documented layout."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.codec import NEED_DATA, ConnectionClosed
from pluto.hardware.dmu.codec import (
    ANGLE_PACKET_SIZE,
    REPLIES,
    AngleData,
    Command,
    CrossbowDecoder,
    DmuScale,
    LocalProtocolError,
    Reply,
    ScaledData,
    VoltageData,
    checksum,
    encode,
)
from pluto.hardware.dmu.driver import to_body_frame

G = 9.80665

# An angle-mode packet written from the layout: 0xFF, then big-endian signed words roll 0x1000, pitch 0xF000 (-4096),
# roll rate 0x0100 (256), pitch rate 0, yaw rate 0xFF00 (-256), ax 0, ay 0, az 0xD555 (-10923), temperature 0x0800
# (2048), time 0x1234, then the sum of the 20 body bytes modulo 256:
# 0x10 + 0xF0 + 0x01 + 0xFF + 0xD5 + 0x55 + 0x08 + 0x12 + 0x34 = 16 + 240 + 1 + 255 + 213 + 85 + 8 + 18 + 52 = 888,
# 888 - 3·256 = 120 = 0x78.
BODY = bytes.fromhex("1000 F000 0100 0000 FF00 0000 0000 D555 0800 1234".replace(" ", ""))
PACKET = b"\xff" + BODY + b"\x78"


def decode_all(decoder: CrossbowDecoder, data: bytes) -> list[object]:
    decoder.receive_data(data)
    return list(decoder.events())


def test_the_documented_packet_decodes_to_si_in_the_units_frame() -> None:
    assert len(PACKET) == ANGLE_PACKET_SIZE == 22
    assert checksum(BODY) == 0x78
    [packet] = decode_all(CrossbowDecoder(), PACKET)
    assert isinstance(packet, AngleData)
    assert packet.roll == pytest.approx(math.radians(4096 * 180 / 32768))  # 22.5°
    assert math.degrees(packet.roll) == pytest.approx(22.5)
    assert math.degrees(packet.pitch) == pytest.approx(-22.5)
    # rate = word · 100 °/s · 1.5 / 2^15: 256 counts = 1.171875 °/s
    assert math.degrees(packet.rates[0]) == pytest.approx(1.171875)
    assert packet.rates[1] == 0.0
    assert math.degrees(packet.rates[2]) == pytest.approx(-1.171875)
    # acceleration = word · 2 g · 1.5 / 2^15: -10923 counts = -1.00003 g
    assert packet.accelerations[2] == pytest.approx(-10923 * 3.0 / 32768 * G)
    assert packet.accelerations[2] / G == pytest.approx(-1.0, abs=1e-4)
    assert packet.temperature == pytest.approx((2048 * 5 / 4096 - 1.375) * 44.4)  # 49.95 °C
    assert packet.time == 0x1234


def test_encode_writes_the_documented_bytes() -> None:
    s = DmuScale()
    packet = AngleData(
        roll=4096 * s.angle_per_count,
        pitch=-4096 * s.angle_per_count,
        rates=(256 * s.rate_per_count, 0.0, -256 * s.rate_per_count),
        accelerations=(0.0, 0.0, -10923 * s.accel_per_count),
        temperature=(2048 * 5 / 4096 - 1.375) * 44.4,
        time=0x1234,
    )
    assert encode(packet) == PACKET
    assert encode(Command("R")) == b"R" and encode(Reply("H")) == b"H"


def test_scale_factors_follow_the_units_ranges() -> None:
    wide = DmuScale(rate_range=200.0, g_range=4.0)
    [packet] = decode_all(CrossbowDecoder(scale=wide), PACKET)
    assert isinstance(packet, AngleData)
    assert math.degrees(packet.rates[0]) == pytest.approx(2 * 1.171875)
    assert packet.accelerations[2] / G == pytest.approx(-2.0, abs=1e-3)
    with pytest.raises(LocalProtocolError):
        DmuScale(rate_range=0.0)


def test_one_byte_at_a_time_and_with_garbage_around() -> None:
    decoder = CrossbowDecoder()
    events: list[object] = []
    for byte in b"\x01\x02" + PACKET + b"\x03" + PACKET:
        decoder.receive_data(bytes([byte]))
        events += list(decoder.events())
    assert [type(e) for e in events] == [AngleData, AngleData]
    stats = decoder.statistics()
    assert stats.packets == 2 and stats.garbage_bytes == 3 and stats.bytes == 2 * 22 + 3


def test_a_bad_checksum_costs_one_byte_and_the_next_packet_is_intact() -> None:
    bad = bytearray(PACKET)
    bad[5] ^= 0x20  # 0x01 -> 0x21
    decoder = CrossbowDecoder()
    events = decode_all(decoder, bytes(bad) + PACKET)
    assert len(events) == 1 and isinstance(events[0], AngleData) and events[0].time == 0x1234
    stats = decoder.statistics()
    assert stats.bad_checksum >= 1
    assert stats.garbage_bytes + 22 == stats.bytes  # every byte accounted for


def test_a_stray_header_byte_does_not_swallow_the_packet_behind_it() -> None:
    decoder = CrossbowDecoder()
    events = decode_all(decoder, b"\xff\x00\x00" + PACKET)
    assert [type(e) for e in events] == [AngleData]


def test_replies_between_packets() -> None:
    decoder = CrossbowDecoder()
    events = decode_all(decoder, b"H" + b"A" + PACKET + b"x")
    assert events[:2] == [Reply("H"), Reply("A")] and isinstance(events[2], AngleData)
    assert decoder.statistics().garbage_bytes == 1


def test_buffer_is_capped_and_end_of_stream_counts_the_rest() -> None:
    decoder = CrossbowDecoder()
    garbage = bytes(b for b in range(200) if b not in REPLIES)  # no header, no reply letter
    decoder.receive_data(garbage * 50)  # all garbage, nothing kept
    assert decoder.buffered_bytes == 0 and decoder.statistics().garbage_bytes == len(garbage) * 50
    decoder.receive_data(PACKET[:10])
    assert decoder.buffered_bytes == 10
    decoder.receive_data(b"")
    assert decoder.next_event() == ConnectionClosed(truncated=10)
    assert decoder.next_event() == ConnectionClosed(truncated=10)
    with pytest.raises(LocalProtocolError):
        decoder.receive_data(b"x")


def test_scaled_and_voltage_modes() -> None:
    scaled = ScaledData(rates=(0.1, -0.2, 0.3), accelerations=(1.0, -2.0, -G), temperature=30.0, time=7)
    data = encode(scaled)
    assert len(data) == 18 and data[0] == 0xFF and data[-1] == sum(data[1:-1]) % 256
    [got] = decode_all(CrossbowDecoder(mode="scaled"), data)
    assert isinstance(got, ScaledData)
    assert got.rates == pytest.approx(scaled.rates, abs=DmuScale().rate_per_count)
    assert got.accelerations == pytest.approx(scaled.accelerations, abs=DmuScale().accel_per_count)
    volts = VoltageData(counts=(2048, 2000, 2100, 1024, 3072, 4095, 1500), time=0xBEEF)
    [v] = decode_all(CrossbowDecoder(mode="voltage"), encode(volts))
    assert v == volts
    with pytest.raises(LocalProtocolError):
        CrossbowDecoder(mode="quaternion")  # type: ignore[arg-type]


def test_values_saturate_and_non_finite_ones_are_refused() -> None:
    big = AngleData(roll=0.0, pitch=0.0, rates=(100.0, 0.0, 0.0), accelerations=(0.0, 0.0, 0.0))
    [got] = decode_all(CrossbowDecoder(), encode(big))
    assert isinstance(got, AngleData)
    assert got.rates[0] == pytest.approx(32767 * DmuScale().rate_per_count)
    with pytest.raises(LocalProtocolError):
        encode(AngleData(roll=math.nan, pitch=0.0, rates=(0, 0, 0), accelerations=(0, 0, 0)))


def test_device_role_decodes_commands() -> None:
    decoder = CrossbowDecoder("device")
    events = decode_all(decoder, b"RaCGx")
    assert events == [Command("R"), Command("a"), Command("C"), Command("G")]
    assert decoder.statistics().garbage_bytes == 1
    with pytest.raises(LocalProtocolError):
        Command("Z")
    # z and T take the next byte as their argument, whatever it is
    assert decode_all(CrossbowDecoder("device"), b"z\x00TRS") == [Command("z", 0), Command("T", 0x52), Command("S")]
    assert encode(Command("T", 50)) == b"T2"
    with pytest.raises(LocalProtocolError):
        Command("T")
    with pytest.raises(LocalProtocolError):
        Command("R", 1)


def test_every_intact_packet_survives_one_percent_corrupted_bytes() -> None:
    rng = np.random.default_rng(5)
    packets = [
        AngleData(
            roll=float(rng.uniform(-1, 1)),
            pitch=float(rng.uniform(-1, 1)),
            rates=(float(rng.normal(0, 0.5)), float(rng.normal(0, 0.5)), float(rng.normal(0, 0.5))),
            accelerations=(float(rng.normal(0, 2)), float(rng.normal(0, 2)), float(rng.normal(-G, 2))),
            time=k,
        )
        for k in range(2000)
    ]
    frames = [bytearray(encode(p)) for p in packets]
    intact: list[int] = []
    for k, frame in enumerate(frames):
        hits = rng.random(len(frame)) < 0.01
        for i in np.flatnonzero(hits):
            frame[i] ^= int(rng.integers(1, 256))
        if not hits.any():
            intact.append(k)
    decoder = CrossbowDecoder()
    stream = b"".join(frames)
    got: list[int] = []
    for start in range(0, len(stream), 97):  # in uneven chunks
        decoder.receive_data(stream[start : start + 97])
        got += [e.time for e in decoder.events() if isinstance(e, AngleData)]
    assert 0 < len(frames) - len(intact) < len(frames)  # some were damaged
    assert set(intact) <= set(got)
    assert decoder.statistics().bad_checksum > 0


def test_unit_frame_to_pluto_frame() -> None:
    # x forward, y right, z down -> x forward, y left, z up; roll kept, pitch (nose up, about y right) negated
    packet = AngleData(roll=0.1, pitch=0.2, rates=(0.3, 0.4, 0.5), accelerations=(1.0, 2.0, G))
    r = to_body_frame(packet, stamp=3.0)
    assert (r.psi, r.phi) == (0.1, -0.2)
    assert r.rates == (0.3, -0.4, -0.5)  # a left turn (counter-clockwise seen from above) is +z up, -z down
    # the unit counts gravity positive down (its specific force negated); DMU/Raw has the specific force, z up
    assert r.accelerations == (-1.0, 2.0, G)
    assert r.stamp == 3.0


# A unit sitting level and still, as its manual describes it ("zero g along the x- and y-axes and +1 g along the
# z-axis"): every word 0 but az = +1 g = 0x2AAB (10923 counts of 2 g · 1.5 / 2^15), temperature 0x0800, time 0;
# the sum: 0x2A + 0xAB + 0x08 = 42 + 171 + 8 = 221 = 0xDD.
AT_REST = bytes.fromhex("FF" + "0000" * 7 + "2AAB" + "0800" + "0000" + "DD")


def test_a_level_unit_at_rest_reads_plus_one_g_on_its_z_and_dmu_raw_plus_g_up() -> None:
    [packet] = decode_all(CrossbowDecoder(), AT_REST)
    assert isinstance(packet, AngleData)
    assert packet.accelerations[2] / G == pytest.approx(1.0, abs=1e-4)  # down, in the unit's frame
    raw = to_body_frame(packet, stamp=0.0)
    assert raw.accelerations[:2] == (0.0, 0.0)
    assert raw.accelerations[2] == pytest.approx(9.81, abs=0.01)  # DMU/Raw: z up, the specific force


def test_need_data_when_nothing_waits() -> None:
    decoder = CrossbowDecoder()
    assert decoder.next_event() is NEED_DATA


def test_the_emulated_unit_at_rest_sends_what_the_manual_describes() -> None:
    from pluto.hardware.dmu.emulate import CrossbowDevice, InertialReading

    class AtRest:
        def reading(self, t: float) -> InertialReading:
            return InertialReading()  # level and still: the specific force +g up, in Pluto's frame

    unit = CrossbowDevice(AtRest())  # type: ignore[arg-type]
    unit.step(0.0)
    unit.receive_data(b"G")
    sent = unit.data_to_send()
    assert len(sent) == ANGLE_PACKET_SIZE
    # every word 0 but az, +1 g down (about 0x2AAB: the simulated gravity is 9.81 m/s², the unit's g 9.80665), and
    # the temperature; the time counter may be anything
    assert sent[1:15] == bytes(14)
    assert int.from_bytes(sent[15:17], "big", signed=True) == pytest.approx(0x2AAB, abs=5)
    [packet] = decode_all(CrossbowDecoder(), sent)
    assert isinstance(packet, AngleData)
    assert to_body_frame(packet, stamp=0.0).accelerations[2] == pytest.approx(9.81, abs=0.01)
