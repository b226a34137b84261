"""Faults during a mission: what happens when a module's process is killed (SIGKILL) or hangs (SIGSTOP) while the
robot drives a moveto down the office's corridor.

Run by hand: ``python bench/faults.py [--noise realistic|basic] [--rate 5] [--seed 1] [--faults localization,...]``.
Prints one row per fault; asserts nothing.

The mission profile runs in lock-step, one process per module, supervised as ``pluto up`` does it (a killed module is
restarted after the profile's back-off), with the simulated time capped at ``--rate`` times the wall clock (5 by
default) and NOT held while a module restarts: the outage lasts what the restart takes on this machine, at that
rate. Columns (simulated seconds unless said):

- stop: from the input the movement chain steers by going stale (the dead module's last value plus the readers'
  deadline) to the base being commanded to stop (for the drive, which commands the base: to the base stopping on
  its own); "-" where no input of the chain goes stale (the pose module: the localization goes on by dead reckoning);
- still: from the fault to the robot at rest (truth; with the base dead, to its stop command: nothing moves the body);
  "-" where the robot drives on;
- back: wall seconds from the fault to the module writing its interfaces again (restart, start-up, first step);
- error: the localization's distance from the truth 2 s after the module came back, m;
- outcome: how the moveto ended, and the truth's distance from the goal then.

The same harness runs in ``tests/faults/``, there with the time held while a module restarts.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.faults (the fault harness)

from tests.faults.mission import FaultMission, Outcome, steers

from pluto.bus import Bus

FAULTS = ("localization", "pose", "drive", "avoid", "motion", "sick", "base", "sim", "hang:localization")


def row(out: Outcome) -> str:
    stop = "-" if out.target == "pose" or not math.isfinite(out.time_to_stop) else f"{out.time_to_stop:+.2f}"
    still = f"{out.stopped_at - out.injected_at:.2f}" if steers(out.target) else "-"
    ending = out.describe()
    fault = out.target if out.fault == "kill" else f"{out.target} ({out.fault})"
    return f"| {fault} | {stop} | {still} | {out.back_wall:.1f} | {out.pose_error:.3f} | {ending} |" + (
        f" {'; '.join(out.notes)}" if out.notes else ""
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--noise",
        choices=("ideal", "basic", "realistic"),
        default="realistic",
        help="noise profile of the simulation (default realistic: the rough world; basic: the devices' errors alone)",
    )
    parser.add_argument("--rate", type=float, default=5.0, help="simulated seconds per wall second at most")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated; hang:NAME for SIGSTOP")
    args = parser.parse_args()
    print(f"faults during a moveto, mission profile, noise {args.noise}, seed {args.seed}, at most {args.rate:g}x")
    print("| fault | stop after stale (s) | still after fault (s) | back (wall s) | pose error after (m) | outcome |")
    print("|---|---|---|---|---|---|")
    with Bus() as bus:
        for spec in args.faults.split(","):
            fault, _, target = spec.rpartition(":")
            with FaultMission(bus, noise=args.noise, seed=args.seed, rate=args.rate, hold=False) as mission:
                out = mission.inject(target, fault or "kill")
            print(row(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
