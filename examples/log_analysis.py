"""Analysis code pointed at a log instead of the robot: the distance driven, and the nearest obstacle seen.

Record a run first (``pluto record --start sim -o run.mcap --duration 60``, or import a public data set with
``pluto log import-carmen intel.log.gz -o run.mcap``), then run ``python examples/log_analysis.py run.mcap``.
The readers have the read API of the proxies (``get``, ``wait``, interface numbers and masks) plus ``seek`` and
iteration; ``LogFile`` opens the file once for all of them.
"""

from __future__ import annotations

import math
import sys

from pluto.record.logfile import LogFile
from pluto.record.readers import BaseReader, EndOfLog, SickReader


def main(path: str) -> None:
    log = LogFile(path)
    print(f"{path}: {log.duration:.1f} s of {log.info.get('robot', '?')}, {log.message_count} messages")

    base = BaseReader(log, mask=1)  # interface 0 only: Base/Drive/State
    distance, last = 0.0, None
    for odometry in base.odometry():
        if last is not None:
            distance += math.hypot(odometry.x - last.x, odometry.y - last.y)
        last = odometry
    print(f"driven: {distance:.1f} m")

    sick = SickReader(log, mask=2)  # interface 1 only: Sick/Scan_mm
    nearest = (math.inf, 0.0)
    while True:
        try:
            scan = sick.wait_scan(timeout=5.0)  # the next scan, as a program on the robot would wait for it
        except EndOfLog:
            break
        valid = [r for r in scan.ranges if 0.0 < r < scan.max_range]
        if valid and min(valid) < nearest[0]:
            nearest = (min(valid), sick.time)
    if math.isfinite(nearest[0]):
        base.seek(nearest[1])  # where was the robot then?
        odometry = base.get_odometry()
        where = f" at ({odometry.x:.2f}, {odometry.y:.2f}) m" if odometry else ""
        print(f"nearest obstacle: {nearest[0]:.2f} m, {nearest[1] - log.start:.1f} s into the log{where}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "run.mcap")
