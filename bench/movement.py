"""Goto with obstacle avoidance on the simulated robot: success rate and time to goal over seeded runs per world.

Run by hand: ``python bench/movement.py [--runs 20] [--rate 10]``. Each run starts the whole stack (sim with
realistic noise seeded by the run number, localization, drive, avoid) in this process on a bus of its own, sends one
goto (cmd_flags 22) and waits for element[1] = 1 (reached) or 2 (stuck), or gives up after ``--limit`` simulated
seconds. Prints a table; asserts nothing. Times are simulated seconds.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.scenarios (the stack and worlds)

from tests.helpers import free_tcp_port
from tests.scenarios.test_avoid import Stack, office_with_box, start_stack

from pluto import msgs
from pluto.bus import Bus

ROOM_WITH_BOX = """<?xml version="1.0" encoding="UTF-8"?>
<world name="room-box" version="1">
  <start x="2" y="4" theta="0"/>
  <walls>
    <wall x1="0" y1="0" x2="20" y2="0"/>
    <wall x1="20" y1="0" x2="20" y2="8"/>
    <wall x1="20" y1="8" x2="0" y2="8"/>
    <wall x1="0" y1="8" x2="0" y2="0"/>
  </walls>
  <obstacles>
    <polygon name="box"><point x="8" y="3.3"/> <point x="9" y="3.3"/> <point x="9" y="4.5"/> <point x="8" y="4.5"/>
    </polygon>
  </obstacles>
</world>
"""

FLAGS = 22
"""The goto's cmd_flags: laser avoidance (the drive's sonar protection, +10, stops the robot in 2 m doorways)."""

# world name -> (map text, start pose (x, y, θ), goal (x, y)), all in the world frame, m and rad
WORLDS: dict[str, tuple[str, tuple[float, float, float], tuple[float, float]]] = {
    "office (corridor to lobby, box)": (office_with_box(), (10.0, 10.0, math.pi), (2.0, 10.0)),
    "room 20x8 m, box": (ROOM_WITH_BOX, (2.0, 4.0, 0.0), (16.0, 4.0)),
}


def one_run(
    text: str, start: tuple[float, float, float], goal: tuple[float, float], seed: int, rate: float, limit: float
) -> tuple[int, float, float]:
    """One goto; returns (element[1] at the end: 1, 2 or -1 for timeout, time taken s, truth error at the end m)."""
    os.environ["PLUTO_ROBOT"] = f"bench-{uuid.uuid4().hex[:8]}"
    os.environ["PLUTO_RENDEZVOUS"] = f"tcp/127.0.0.1:{free_tcp_port()}"
    with tempfile.TemporaryDirectory() as tmp, Bus() as bus:
        os.environ["PLUTO_RUNTIME_DIR"] = tmp
        stack: Stack | None = None
        try:
            stack = start_stack(bus, Path(tmp), text, start, seed=seed, rate=rate)
            t0 = stack.truth.wait_for(lambda t: True, timeout=20).stamp  # type: ignore[attr-defined]
            stack.command(FLAGS, list(goal), [0.6, 1.0], [1.0])
            try:
                done = stack.status.wait_for(
                    lambda s: (
                        isinstance(s, msgs.FVectorState)
                        and len(s.element) > 1
                        and (s.element[1] in (1, 2) or s.stamp > t0 + limit)
                    ),
                    timeout=limit / rate + 30,
                )
            except AssertionError:
                return -1, math.nan, math.nan
            assert isinstance(done, msgs.FVectorState)
            end = stack.truth.snapshot()[-1]
            state = done.element[1] if done.element[1] in (1, 2) else -1
            return state, done.stamp - t0, math.hypot(end.x - goal[0], end.y - goal[1])
        finally:
            if stack is not None:
                for module in reversed(stack.modules):
                    module.stop()
                stack.supervisor.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20, help="seeded runs per world (default 20)")
    parser.add_argument("--rate", type=float, default=10.0, help="simulated seconds per wall second (default 10)")
    parser.add_argument("--limit", type=float, default=150.0, help="give up after this many simulated s")
    args = parser.parse_args()
    print(
        f"{'world':<34}{'runs':>6}{'reached':>9}{'stuck':>7}{'timeout':>9}{'median s':>10}{'max s':>8}"
        f"{'truth err m':>13}"
    )
    for name, (text, start, goal) in WORLDS.items():
        results = [one_run(text, start, goal, seed, args.rate, args.limit) for seed in range(args.runs)]
        reached = [r for r in results if r[0] == 1]
        times = [r[1] for r in reached]
        errors = [r[2] for r in reached]
        print(
            f"{name:<34}{len(results):>6}{len(reached):>9}{sum(r[0] == 2 for r in results):>7}"
            f"{sum(r[0] == -1 for r in results):>9}"
            f"{statistics.median(times) if times else math.nan:>10.1f}{max(times) if times else math.nan:>8.1f}"
            f"{statistics.median(errors) if errors else math.nan:>13.2f}",
            flush=True,
        )
    print(
        "success rate = reached / runs; times are simulated seconds from the command to element[1] = 1; truth err "
        "is the median distance of the true end pose from the goal (dead-reckoning drift included)"
    )


if __name__ == "__main__":
    main()
