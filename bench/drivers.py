"""Device drivers' decoding cost: CPU per second of device data, at the devices' real rates.

Run by hand: ``python bench/drivers.py [--seconds 20]``. Each row decodes ``seconds`` of a device's data as the port
would hand it over, and reports the CPU time it took as a share of one core for one second of data (the project's
target: under 2 %). Each device has a baseline measured in the same run: the least a decoder can do (split the
frames, convert the numbers; no checks), so the cost of the codec's checks and events shows. Prints a table; asserts
nothing.

- SICK LMS: scans at 38400 baud and at 500 kbaud (75 scans/s), in reads of at most READ bytes;
- Crossbow DMU: 100 angle packets a second, a read per packet (the driver reads what is waiting, and at 38400 baud
  a packet is all that has arrived between two reads);
- NMEA GPS: 10 epochs of GGA, GSA and RMC a second, a read per epoch;
- CAN wrist: 20 polls a second of two PowerCube modules (three parameters each: six requests and six replies), one
  python-can message per frame.

Adding a device: write a function returning a list of :class:`Row` and add it to MEASUREMENTS.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

READ = 4096
"""Bytes of one read from the port at most."""


@dataclass(frozen=True)
class Row:
    device: str
    rate: str
    path: str
    cpu_per_s: float
    """CPU seconds per second of device data."""
    items: int


def _cpu(work: Callable[[], int], runs: int = 2) -> tuple[float, int]:
    """The CPU time of ``work`` (the least of ``runs`` runs: the first pays for first calls and caches) and what it
    counted."""
    best, items = float("inf"), 0
    for _ in range(runs):
        start = time.process_time()
        items = work()
        best = min(best, time.process_time() - start)
    return best, items


def _chunks(stream: bytes) -> list[bytes]:
    return [stream[i : i + READ] for i in range(0, len(stream), READ)]


# ------------------------------------------------------------------------------------------------ SICK LMS


def _lms_paths(chunks: list[bytes], baud: int, resolution: int) -> list[tuple[str, Callable[[], int]]]:
    """The three decoding paths of an LMS byte stream, each returning the scans it decoded."""
    from pluto.codec import NEED_DATA
    from pluto.hardware.sick.client import LmsClient, LmsSettings, Scan
    from pluto.hardware.sick.telegram import STX, LmsDecoder

    def raw() -> int:
        n, buffer = 0, b""
        for chunk in chunks:
            buffer += chunk
            pos = 0
            while (start := buffer.find(STX, pos)) >= 0 and start + 4 <= len(buffer):
                end = start + 4 + (buffer[start + 2] | buffer[start + 3] << 8) + 2
                if end > len(buffer):
                    break
                words = np.frombuffer(buffer, "<u2", (end - start - 10) // 2, start + 7)
                _ = (words & 0x1FFF) * 0.01
                n += 1
                pos = end
            buffer = buffer[pos:]
        return n

    def decoder() -> int:
        d, n = LmsDecoder("host"), 0
        for chunk in chunks:
            d.receive_data(chunk)
            while (event := d.next_event()) is not NEED_DATA:
                n += 1
                _ = event
        return n

    def client() -> int:
        c = LmsClient(LmsSettings(baud=baud, resolution=resolution))
        c.phase = "streaming"  # as after the start-up sequence
        c.baud = baud
        n, now = 0, 0.0
        for chunk in chunks:
            now += len(chunk) * 10 / baud
            c._last_scan = now  # no link timeout in a replay at CPU speed
            c.receive_data(chunk, now)
            while (event := c.next_event()) is not NEED_DATA:
                n += isinstance(event, Scan)
        return n

    return [
        ("baseline: split + numpy", raw),
        ("LmsDecoder (CRC, events)", decoder),
        ("LmsClient (+ m, stamps)", client),
    ]


def lms_rows(seconds: float) -> list[Row]:
    """The LMS: 361-point scans at 38400 baud (4.7/s) and 181-point scans at 500 kbaud (75/s)."""
    from pluto.hardware.sick.telegram import encode, measured_values_reply

    rng = np.random.default_rng(0)
    rows: list[Row] = []
    for label, baud, resolution, per_s in (
        ("38400 baud, 361 pts", 38400, 50, 37.5 / 8),
        ("500 k, 181 pts", 500000, 100, 75.0),
    ):
        points = 18000 // resolution + 1
        count = max(1, round(seconds * per_s))
        frames = [encode(measured_values_reply(rng.integers(0, 8000, points).astype(np.uint16), 0)) for _ in range(16)]
        stream = b"".join(frames[i % 16] for i in range(count))
        chunks = _chunks(stream)
        data_seconds = count / per_s

        for path, work in _lms_paths(chunks, baud, resolution):
            cpu, items = _cpu(work)
            rows.append(Row(f"SICK LMS {label}", f"{per_s:.1f} scans/s", path, cpu / data_seconds, items))
    return rows


# ------------------------------------------------------------------------------------------------ Crossbow DMU


def dmu_rows(seconds: float) -> list[Row]:
    """The DMU/VG in angle mode, 100 packets/s; the driver's path adds the body frame and the DMU/State filter."""
    import struct

    from pluto.codec import NEED_DATA
    from pluto.hardware.dmu.codec import HEADER, AngleData, CrossbowDecoder, DmuScale, encode
    from pluto.hardware.dmu.driver import to_body_frame
    from pluto.hardware.dmu.filter import DmuFilter

    per_s = 100.0
    scale = DmuScale()
    rng = np.random.default_rng(1)
    frames = [
        encode(
            AngleData(
                roll=float(rng.normal(0, 0.05)),
                pitch=float(rng.normal(0, 0.05)),
                rates=(float(rng.normal(0, 0.1)), float(rng.normal(0, 0.1)), float(rng.normal(0, 0.3))),
                accelerations=(float(rng.normal(0, 0.5)), float(rng.normal(0, 0.5)), -9.81),
                time=i,
            ),
            scale,
        )
        for i in range(16)
    ]
    count = max(1, round(seconds * per_s))
    chunks = [frames[i % 16] for i in range(count)]
    size = len(frames[0])
    words = struct.Struct(f">{(size - 2) // 2}h")
    factors = np.array([scale.angle_per_count] * 2 + [scale.rate_per_count] * 3 + [scale.accel_per_count] * 3)

    def raw() -> int:
        n, buffer = 0, b""
        for chunk in chunks:
            buffer += chunk
            pos = 0
            while (start := buffer.find(HEADER, pos)) >= 0 and start + size <= len(buffer):
                values = np.array(words.unpack_from(buffer, start + 1)[:8]) * factors
                _ = values
                n += 1
                pos = start + size
            buffer = buffer[pos:]
        return n

    def decoder() -> int:
        d, n = CrossbowDecoder("host", "angle", scale), 0
        for chunk in chunks:
            d.receive_data(chunk)
            while (event := d.next_event()) is not NEED_DATA:
                n += isinstance(event, AngleData)
        return n

    def driver() -> int:
        d, f, n = CrossbowDecoder("host", "angle", scale), DmuFilter(0.1), 0
        stamp, last = 0.0, None
        for chunk in chunks:
            stamp += 1.0 / per_s
            d.receive_data(chunk)
            while (event := d.next_event()) is not NEED_DATA:
                if isinstance(event, AngleData):
                    reading = to_body_frame(event, stamp)
                    f.update(stamp, 0.0 if last is None else stamp - last, reading.rates, reading.accelerations)
                    last = stamp
                    n += 1
        return n

    rows = []
    for path, work in (
        ("baseline: split + numpy", raw),
        ("CrossbowDecoder (sums)", decoder),
        ("+ body frame + filter", driver),
    ):
        cpu, items = _cpu(work)
        rows.append(Row("Crossbow DMU, angle mode", f"{per_s:.0f} packets/s", path, cpu / (count / per_s), items))
    return rows


# ------------------------------------------------------------------------------------------------ NMEA GPS


def gps_rows(seconds: float) -> list[Row]:
    """An NMEA receiver at 10 Hz (RMC, VTG, GGA, GSA, GSV an epoch); the driver's path adds the fix on the local
    grid."""
    from pluto.codec import NEED_DATA
    from pluto.hardware.gps.codec import Gga, NmeaDecoder
    from pluto.hardware.gps.emulate import CircleTrack, NmeaReceiver
    from pluto.hardware.gps.fix import FixAssembler
    from pluto.hardware.gps.grid import LocalGrid

    per_s = 10.0
    grid = LocalGrid(59.3498, 18.0707)
    count = max(1, round(seconds * per_s))
    clock = iter(range(10**9))
    receiver = NmeaReceiver(CircleTrack(grid), period=1.0 / per_s, wall=lambda: 1.7e9 + next(clock) / per_s)
    chunks = [receiver.epoch(i / per_s) for i in range(count)]

    def raw() -> int:
        n, buffer = 0, b""
        for chunk in chunks:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                fields = line.split(b",")
                if fields[0].endswith(b"GGA") and fields[2]:
                    lat = float(fields[2][:2]) + float(fields[2][2:]) / 60.0
                    lon = float(fields[4][:3]) + float(fields[4][3:]) / 60.0
                    _ = (lat, lon, int(fields[6]), int(fields[7]))
                    n += 1
        return n

    def decoder() -> int:
        d, n = NmeaDecoder(), 0
        for chunk in chunks:
            d.receive_data(chunk)
            while (event := d.next_event()) is not NEED_DATA:
                n += isinstance(event, Gga)
        return n

    def driver() -> int:
        d, fixes, n = NmeaDecoder(), FixAssembler(grid), 0
        for i, chunk in enumerate(chunks):
            d.receive_data(chunk)
            while (event := d.next_event()) is not NEED_DATA:
                n += len(fixes.update(event, i / per_s))
        return n

    rows = []
    for path, work in (
        ("baseline: split + float", raw),
        ("NmeaDecoder (pynmea2)", decoder),
        ("+ fix on the grid", driver),
    ):
        cpu, items = _cpu(work)
        rows.append(Row("NMEA GPS, RMC+VTG+GGA+GSA+GSV", f"{per_s:.0f} epochs/s", path, cpu / (count / per_s), items))
    return rows


# ------------------------------------------------------------------------------------------------ CAN wrist


def wrist_rows(seconds: float) -> list[Row]:
    """The PowerCube wrist polled at 20 Hz: the replies as python-can hands them over (one ``can.Message`` a frame),
    and the requests of each poll; the driver's path is its reader's work per frame (decode, the modules' state, a
    reading per complete poll) and the encoding of its requests."""
    import struct

    import can

    from pluto.hardware.wrist.can_driver import POLLED, CanWristDriver
    from pluto.hardware.wrist.powercube import (
        PARAM_CUBE_STATE,
        GetParameter,
        ParameterValue,
        PowerCubeCodec,
        encode_reply,
        encode_request,
    )

    per_s = 20.0
    count = max(1, round(seconds * per_s))
    replies: list[list[can.Message]] = []
    for i in range(count):
        poll = []
        for module in (1, 2):
            for param in POLLED:
                value: float | int = 0x1 if param == PARAM_CUBE_STATE else 0.01 * (i % 100) * module
                frame = encode_reply(ParameterValue(module, param, value))
                poll.append(can.Message(arbitration_id=frame.arbitration_id, data=frame.data, is_extended_id=False))
        replies.append(poll)
    unpack = struct.Struct("<f").unpack_from

    def raw() -> int:
        n = 0
        for poll in replies:
            for module in (1, 2):
                for param in POLLED:
                    _ = can.Message(arbitration_id=0x0E0 + module, data=bytes((0x0A, param)), is_extended_id=False)
            for message in poll:
                _ = unpack(message.data, 2)
            n += 1
        return n

    def codec() -> int:
        c, n = PowerCubeCodec("host", (1, 2)), 0
        for poll in replies:
            for module in (1, 2):
                for param in POLLED:
                    frame = encode_request(GetParameter(module, param))
                    _ = can.Message(arbitration_id=frame.arbitration_id, data=frame.data, is_extended_id=False)
            for message in poll:
                c.receive_message(message)
                n += sum(1 for _ in c.events())
        return n // 6

    def driver() -> int:
        d = CanWristDriver("virtual", "bench", poll_period=1.0 / per_s)
        now = 0.0
        for poll in replies:
            now += 1.0 / per_s
            for module in (1, 2):
                for param in POLLED:
                    frame = encode_request(GetParameter(module, param))
                    _ = can.Message(arbitration_id=frame.arbitration_id, data=frame.data, is_extended_id=False)
            for message in poll:
                with d._changed:
                    d._codec.receive_message(message)
                    for event in d._codec.events():
                        d._apply(event, now)
                    d._changed.notify_all()
        reading = d.reading
        return 0 if reading is None else reading.seq

    rows = []
    for path, work in (
        ("baseline: python-can + unpack", raw),
        ("PowerCubeCodec (checks)", codec),
        ("+ the driver's state", driver),
    ):
        cpu, items = _cpu(work)
        rows.append(Row("PowerCube wrist on CAN", f"{per_s:.0f} polls/s", path, cpu / (count / per_s), items))
    return rows


MEASUREMENTS: list[Callable[[float], list[Row]]] = [lms_rows, dmu_rows, gps_rows, wrist_rows]
"""One function per device: seconds of data -> rows."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of device data per row (default 20)")
    args = parser.parse_args()
    rows = [row for measure in MEASUREMENTS for row in measure(args.seconds)]
    width = max(len(r.device) for r in rows)
    path = max(len(r.path) for r in rows)
    print(f"{'device':<{width}}  {'rate':>14}  {'path':<{path}}  {'% of a core':>11}  {'items':>6}")
    for r in rows:
        print(f"{r.device:<{width}}  {r.rate:>14}  {r.path:<{path}}  {100 * r.cpu_per_s:>10.3f}%  {r.items:>6}")


if __name__ == "__main__":
    main()
