"""Device drivers' decoding cost: CPU per second of device data, at the devices' real rates.

Run by hand: ``python bench/drivers.py [--seconds 20]``. Each row decodes ``seconds`` of a device's byte stream, as a
serial port would hand it over (reads of at most READ bytes), and reports the CPU time it took as a share of one
core for one second of data (the project's target: under 2 %). Each device has a baseline measured in the same run:
the least a decoder can do (split the frames, convert the numbers with numpy; no checks), so the cost of the
codec's checks and events shows. Prints a table; asserts nothing.

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


def _cpu(work: Callable[[], int]) -> tuple[float, int]:
    start = time.process_time()
    items = work()
    return time.process_time() - start, items


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


MEASUREMENTS: list[Callable[[float], list[Row]]] = [lms_rows]
"""One function per device: seconds of data -> rows."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of device data per row (default 20)")
    args = parser.parse_args()
    rows = [row for measure in MEASUREMENTS for row in measure(args.seconds)]
    width = max(len(r.device) for r in rows)
    print(f"{'device':<{width}}  {'rate':>13}  {'path':<26}  {'% of a core':>11}  {'items':>6}")
    for r in rows:
        print(f"{r.device:<{width}}  {r.rate:>13}  {r.path:<26}  {100 * r.cpu_per_s:>10.3f}%  {r.items:>6}")


if __name__ == "__main__":
    main()
