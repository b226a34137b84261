"""The LMS telegram codec, byte by byte: CRC, framing, replies, resynchronisation after garbage."""

from __future__ import annotations

import numpy as np
import pytest

from pluto.codec import NEED_DATA, ConnectionClosed
from pluto.errors import LocalProtocolError
from pluto.hardware.sick.telegram import (
    MAX_TELEGRAM,
    UNITS_CM,
    UNITS_MM,
    Ack,
    ConfigReply,
    LmsConfig,
    LmsDecoder,
    MeasuredValues,
    Mode,
    ModeReply,
    Nak,
    Reply,
    ReplyCode,
    Request,
    StatusReply,
    VariantReply,
    crc16,
    encode,
    measured_values_reply,
    mode_request,
    status_reply,
    status_request,
    variant_request,
)


def documented_crc(data: bytes) -> int:
    """The LMS telegram listing's CRC, step by step: shift left, xor 0x8005 on carry, xor (byte | previous << 8)."""
    crc, previous = 0, 0
    for byte in data:
        carry = crc & 0x8000
        crc = (crc << 1) & 0xFFFF
        if carry:
            crc ^= 0x8005
        crc ^= byte | (previous << 8)
        previous = byte
    return crc


# Telegrams as printed in LMS manuals and driver documentation (CRC low byte first).
PUBLISHED = [
    bytes.fromhex("02 00 01 00 31 15 12"),  # status request
    bytes.fromhex("02 00 0a 00 20 00 53 49 43 4b 5f 4c 4d 53 be c5"),  # installation mode, "SICK_LMS"
    bytes.fromhex("02 00 02 00 20 24 34 08"),  # continuous output
    bytes.fromhex("02 00 02 00 20 25 35 08"),  # stop continuous output
    bytes.fromhex("02 00 02 00 20 40 50 08"),  # 38400 baud
    bytes.fromhex("02 00 02 00 20 48 58 08"),  # 500 kbaud
]


@pytest.mark.parametrize("frame", PUBLISHED)
def test_published_frames_have_the_documented_crc(frame: bytes) -> None:
    assert crc16(frame[:-2]) == documented_crc(frame[:-2]) == frame[-2] | frame[-1] << 8


def test_encoded_requests_are_the_published_frames() -> None:
    assert encode(status_request()) == PUBLISHED[0]
    assert encode(mode_request(Mode.INSTALLATION)) == PUBLISHED[1]
    assert encode(mode_request(Mode.CONTINUOUS)) == PUBLISHED[2]
    assert encode(mode_request(Mode.REQUEST)) == PUBLISHED[3]
    assert encode(mode_request(Mode.BAUD_38400)) == PUBLISHED[4]
    assert encode(mode_request(Mode.BAUD_500K)) == PUBLISHED[5]


@pytest.mark.parametrize("size", [1, 63, 64, 65, 300, 732, MAX_TELEGRAM])
def test_table_crc_equals_the_documented_loop(size: int) -> None:
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    assert crc16(data) == documented_crc(data)


def test_variant_request_bytes() -> None:
    frame = encode(variant_request(180, 50))
    assert frame[:9] == bytes.fromhex("02 00 05 00 3b b4 00 32 00")
    assert frame[9] | frame[10] << 8 == documented_crc(frame[:9])
    with pytest.raises(LocalProtocolError):
        variant_request(180, 33)


def scan_frame(words: list[int], units: int = UNITS_CM, status: int = 0) -> bytes:
    return encode(measured_values_reply(np.array(words, dtype=np.uint16), units, status))


def test_measured_values_layout_and_decoding() -> None:
    frame = scan_frame([100, 0x1FFF, 0x2000 | 250], units=UNITS_MM, status=0x10)
    # STX, 0x80, length 1 + 2 + 6 + 1 = 10, 0xB0, count word 3 | mm << 14, the words, status, CRC
    assert frame[:7] == bytes((0x02, 0x80, 10, 0, 0xB0, 3, 0x40))
    assert frame[7:13] == bytes((100, 0, 0xFF, 0x1F, 250, 0x20))
    assert frame[13] == 0x10
    decoder = LmsDecoder("host")
    decoder.receive_data(frame)
    event = decoder.next_event()
    assert isinstance(event, MeasuredValues)
    assert event.units == UNITS_MM and event.status == 0x10 and not event.fatal
    # 100 mm; an error code reads as the largest range (8183 mm); the field-A flag is stripped
    assert event.ranges(13).tolist() == pytest.approx([0.1, 8.183, 0.25])
    assert decoder.next_event() is NEED_DATA


def test_fatal_status_is_seen() -> None:
    decoder = LmsDecoder("host")
    decoder.receive_data(scan_frame([1, 2], status=0x04))
    event = decoder.next_event()
    assert isinstance(event, MeasuredValues) and event.fatal


def all_replies() -> bytes:
    config = LmsConfig(blanking=3, sensitivity=1, measuring_mode=0x04, units=UNITS_MM, rest=bytes(range(27)))
    return b"".join(
        [
            bytes((0x06,)),
            encode(Reply(ReplyCode.OPERATING_MODE, b"\x00")),
            encode(
                status_reply(
                    version="V02.10",
                    operating_mode=0x25,
                    measuring_mode=0,
                    angle=180,
                    resolution=50,
                    units=UNITS_CM,
                    baud=38400,
                )
            ),
            encode(Reply(ReplyCode.VARIANT, bytes((1, 180, 0, 100, 0)))),
            encode(Reply(ReplyCode.CONFIG, b"\x01" + config.pack())),
            bytes((0x15,)),
            scan_frame(list(range(361))),
        ]
    )


def check_replies(events: list[object]) -> None:
    kinds = [type(e) for e in events]
    assert kinds == [Ack, ModeReply, StatusReply, VariantReply, ConfigReply, Nak, MeasuredValues]
    status = events[2]
    assert isinstance(status, StatusReply)
    assert (status.version, status.operating_mode, status.angle, status.resolution) == ("V02.10", 0x25, 180, 50)
    config = events[4]
    assert isinstance(config, ConfigReply) and config.accepted
    assert config.config == LmsConfig(
        blanking=3, sensitivity=1, measuring_mode=4, units=UNITS_MM, rest=bytes(range(27))
    )
    scan = events[6]
    assert isinstance(scan, MeasuredValues) and scan.words.tolist() == list(range(361))


@pytest.mark.parametrize("chunk", [1, 7, 10_000])
def test_replies_in_any_chunking(chunk: int) -> None:
    data = all_replies()
    decoder = LmsDecoder("host")
    for i in range(0, len(data), chunk):
        decoder.receive_data(data[i : i + chunk])
    check_replies(list(decoder.events()))
    assert decoder.statistics().garbage_bytes == 0 and decoder.buffered_bytes == 0


def test_garbage_around_and_inside_is_skipped_and_counted() -> None:
    good = scan_frame([50, 60, 70])  # no byte of a dropped telegram looks like ACK or NAK
    broken = bytearray(good)
    broken[8] ^= 0xFF  # a corrupted range: the CRC fails
    decoder = LmsDecoder("host")
    decoder.receive_data(b"\x00\x02\x80\xff\xff" + bytes(broken) + b"junk" + good + b"\x02\x80")
    events = list(decoder.events())
    assert [type(e) for e in events] == [MeasuredValues]
    stats = decoder.statistics()
    assert stats.bad_crc == 1 and stats.bad_header >= 1 and stats.telegrams == 1
    assert decoder.buffered_bytes == 2  # the start of what may be a telegram
    decoder.receive_data(b"")
    assert isinstance(decoder.next_event(), ConnectionClosed)


def test_a_corrupted_length_does_not_swallow_the_next_telegram() -> None:
    first = bytearray(scan_frame([1] * 20))
    first[2] = 0xFF  # claims 255 bytes
    second = scan_frame([2] * 3)
    decoder = LmsDecoder("host")
    decoder.receive_data(bytes(first) + second + scan_frame([3] * 300))
    values = [e.words[0] for e in decoder.events() if isinstance(e, MeasuredValues)]
    assert values == [2, 3]


def test_one_percent_corruption_keeps_every_intact_telegram() -> None:
    rng = np.random.default_rng(7)
    # scans of 5 to 60 points (at 1 % a 361-point telegram is almost never intact), and 361-point ones
    frames = [scan_frame(rng.integers(0, 8000, int(rng.integers(5, 60))).tolist()) for _ in range(300)]
    frames += [scan_frame(rng.integers(0, 8000, 361).tolist()) for _ in range(5)]
    stream = bytearray(b"".join(frames))
    hit = rng.random(len(stream)) < 0.01
    for i in np.flatnonzero(hit):
        stream[i] ^= int(rng.integers(1, 256))
    intact, pos = [], 0
    for frame in frames:
        if not hit[pos : pos + len(frame)].any():
            intact.append(frame[7:-3])
        pos += len(frame)
    decoder = LmsDecoder("host")
    for start in range(0, len(stream), 333):
        decoder.receive_data(bytes(stream[start : start + 333]))
    got = [e.words.astype("<u2").tobytes() for e in decoder.events() if isinstance(e, MeasuredValues)]
    assert len(intact) > 100
    assert got == intact
    assert decoder.buffered_bytes < MAX_TELEGRAM


def test_device_side_decodes_requests_and_ignores_replies() -> None:
    decoder = LmsDecoder("device")
    decoder.receive_data(encode(status_request()) + scan_frame([1]) + encode(mode_request(Mode.CONTINUOUS)))
    events = list(decoder.events())
    assert events == [Request(0x31, b""), Request(0x20, b"\x24")]
    assert decoder.statistics().bad_header >= 1


def test_a_malformed_reply_is_counted_not_raised() -> None:
    decoder = LmsDecoder("host")
    decoder.receive_data(encode(Reply(ReplyCode.MEASURED_VALUES, bytes((10, 0, 1, 2)))))  # 10 points, 1 sent
    assert decoder.next_event() is NEED_DATA
    assert decoder.statistics().malformed == 1 and "10 points" in (decoder.last_error or "")


def test_the_buffer_is_capped_by_garbage() -> None:
    decoder = LmsDecoder("host")
    decoder.receive_data(bytes(200_000))
    assert decoder.buffered_bytes == 0 and decoder.statistics().garbage_bytes == 200_000
