"""CPU time of the localization core per odometry update and per scan update.

Run by hand: ``python bench/localization.py``. Prints a table; asserts nothing. The target (issue 5) is < 5% of one
core at 100 Hz odometry and 5 Hz scans.
"""

from __future__ import annotations

import math
import time

from pluto.navigation.localization.core import DeadReckoning, PoseAdjustment

ODOMETRY_HZ = 100.0
SCAN_HZ = 5.0


def main(seconds: float = 120.0) -> None:
    dr = DeadReckoning()
    adjustment = PoseAdjustment()
    odometry_cpu = scan_cpu = 0.0
    n_odometry = n_scans = 0
    steps_per_scan = int(ODOMETRY_HZ / SCAN_HZ)
    for k in range(int(seconds * ODOMETRY_HZ)):
        t = k / ODOMETRY_HZ
        theta = 0.3 * math.sin(0.1 * t)
        start = time.process_time()
        dr.add_dmu(t - 0.1, theta, 0.0, 0.0, 0.03)
        dr.add_wrist(t, 0.0, 0.0)
        dr.add_odometry(t, t, 0.1 * math.sin(t), theta)
        pose = dr.pose()
        adjustment.apply(pose.pose)
        adjustment.covariance(pose.absolute)
        odometry_cpu += time.process_time() - start
        n_odometry += 1
        if k % steps_per_scan == steps_per_scan - 1:
            start = time.process_time()
            laser = dr.scan(t - 0.05)
            if laser is not None:
                adjustment.apply(laser.pose)
                adjustment.covariance(laser.absolute)
            scan_cpu += time.process_time() - start
            n_scans += 1
    per_odometry = odometry_cpu / n_odometry
    per_scan = scan_cpu / max(n_scans, 1)
    load = per_odometry * ODOMETRY_HZ + per_scan * SCAN_HZ
    print(f"{'what':<34}{'Pluto':>12}{'target':>12}")
    print(f"{'CPU per odometry update (µs)':<34}{per_odometry * 1e6:>12.1f}{'':>12}")
    print(f"{'CPU per scan update (µs)':<34}{per_scan * 1e6:>12.1f}{'':>12}")
    print(f"{'one core at 100 Hz + 5 Hz (%)':<34}{load * 100:>12.2f}{'< 5':>12}")
    print(f"({n_odometry} odometry updates, {n_scans} scans; core only, bus encoding not included)")


if __name__ == "__main__":
    main()
