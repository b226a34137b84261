"""Benchmark of the simulator's ray casting: one laser scan against a 2,000-wall world.

A scan is 361 beams over 180° (half-degree steps, a SICK LMS) with an 80 m range, from a random pose in free
space. The world is seeded (``numpy.random.default_rng``): the four walls of a square and 1,996 walls of 0.5 to
5 m at random positions and headings. Two worlds are timed: ``open`` (a 100 m x 100 m square: most walls in range,
each covering a few beams) and ``dense`` (the same 2,000 walls packed into 25 m x 25 m: every wall in range and
near, many beams per wall).

Methods, each computing the same ranges:

* ``pluto RayCaster``: :class:`pluto.sim.raycast.RayCaster`, built once per world, ``cast`` per scan.
* ``shapely STRtree``: what a user would write with shapely 2, vectorised: the walls as LineStrings in an
  STRtree (built once); per scan, the beams as LineStrings from the origin to max range, ``tree.query(beams,
  predicate="intersects")``, ``shapely.intersection`` of the pairs, ``shapely.distance`` from the origin, and the
  minimum per beam.
* ``numpy brute force``: every beam against every wall in one broadcast (K x N) array expression.

Each method runs the same scans (after a warm-up); the table gives the median and 90th percentile time per scan
and the speed-up of Pluto's caster over each; the largest difference from Pluto's ranges is printed per method.
Targets: <= 1 ms per scan in the open world, and >= 20x faster than shapely.

Run from the project root (shapely is optional: ``.venv/bin/pip install shapely``):

    .venv/bin/python bench/sim_raycast.py
    .venv/bin/python bench/sim_raycast.py --scans 50      # quicker
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pluto.sim.raycast import RayCaster, segment_distance

WALLS = 2000
BEAMS = 361
MAX_RANGE = 80.0
FIELD_OF_VIEW = math.pi
TARGET_MS = 1.0
TARGET_SPEEDUP = 20.0

Scan = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass
class Result:
    world: str
    method: str
    times: list[float]  # s per scan
    max_diff: float  # m, against Pluto

    @property
    def median_ms(self) -> float:
        return 1e3 * statistics.median(self.times)

    @property
    def p90_ms(self) -> float:
        return 1e3 * float(np.percentile(self.times, 90))


def random_world(rng: np.random.Generator, size: float) -> np.ndarray:
    """``(WALLS, 4)`` segments: the four sides of a ``size`` square and random walls inside it."""
    n = WALLS - 4
    centre = rng.uniform(0.0, size, (n, 2))
    length = rng.uniform(0.5, 5.0, n)
    heading = rng.uniform(0.0, math.pi, n)
    half = 0.5 * length[:, None] * np.column_stack((np.cos(heading), np.sin(heading)))
    inner = np.clip(np.hstack((centre - half, centre + half)), 0.0, size)
    box = np.array([[0, 0, size, 0], [size, 0, size, size], [size, size, 0, size], [0, size, 0, 0]], dtype=float)
    return np.vstack((box, inner))


def free_poses(
    rng: np.random.Generator, segments: np.ndarray, size: float, count: int
) -> list[tuple[np.ndarray, float]]:
    """``count`` poses (origin, heading) at least 0.3 m from every wall."""
    poses: list[tuple[np.ndarray, float]] = []
    while len(poses) < count:
        origin = rng.uniform(0.5, size - 0.5, 2)
        if segment_distance(origin, segments).min() >= 0.3:
            poses.append((origin, float(rng.uniform(-math.pi, math.pi))))
    return poses


def pluto_method(segments: np.ndarray) -> Scan:
    caster = RayCaster(segments)
    return lambda origin, angles: caster.cast(origin, angles, MAX_RANGE)


def shapely_method(segments: np.ndarray, shapely: Any) -> Scan:
    walls = shapely.linestrings(segments.reshape(-1, 2, 2))
    tree = shapely.STRtree(walls)

    def scan(origin: np.ndarray, angles: np.ndarray) -> np.ndarray:
        ends = origin + MAX_RANGE * np.column_stack((np.cos(angles), np.sin(angles)))
        beams = shapely.linestrings(np.stack((np.broadcast_to(origin, ends.shape), ends), axis=1))
        beam_index, wall_index = tree.query(beams, predicate="intersects")
        hits = shapely.intersection(beams[beam_index], walls[wall_index])
        distance = shapely.distance(shapely.points(origin), hits)
        ranges = np.full(len(angles), MAX_RANGE)
        np.minimum.at(ranges, beam_index, distance)
        return ranges

    return scan


def brute_force_method(segments: np.ndarray) -> Scan:
    p1 = segments[:, :2]
    e = segments[:, 2:] - p1

    def scan(origin: np.ndarray, angles: np.ndarray) -> np.ndarray:
        d = np.column_stack((np.cos(angles), np.sin(angles)))
        w = p1 - origin
        den = d[:, 0:1] * e[:, 1] - d[:, 1:2] * e[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (w[:, 0] * e[:, 1] - w[:, 1] * e[:, 0]) / den
            u = (w[:, 0] * d[:, 1:2] - w[:, 1] * d[:, 0:1]) / den
        t = np.where((t >= 0.0) & (u >= 0.0) & (u <= 1.0), t, MAX_RANGE)
        return np.minimum(t.min(axis=1), MAX_RANGE)

    return scan


def time_scans(scan: Scan, poses: list[tuple[np.ndarray, float]], angles: np.ndarray) -> tuple[list[float], list]:
    for origin, heading in poses[:5]:  # warm-up
        scan(origin, angles + heading)
    times: list[float] = []
    ranges: list[np.ndarray] = []
    gc.disable()
    try:
        for origin, heading in poses:
            start = time.perf_counter()
            result = scan(origin, angles + heading)
            times.append(time.perf_counter() - start)
            ranges.append(result)
    finally:
        gc.enable()
    return times, ranges


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scans", type=int, default=200, help="scans per method and world (default 200)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the worlds and poses (default 1)")
    args = parser.parse_args()

    try:
        import shapely
    except ImportError:
        shapely = None

    print(f"ray casting: {BEAMS} beams over {math.degrees(FIELD_OF_VIEW):.0f}°, range {MAX_RANGE:g} m, {WALLS} walls")
    print(f"{args.scans} scans per method from random free poses; seed {args.seed}")
    print(f"python {platform.python_version()}, numpy {np.__version__}", end="")
    print(f", shapely {shapely.__version__} (GEOS {shapely.geos_version_string})" if shapely else "", end="")
    print(f"; {os.cpu_count()} CPUs")
    if shapely is None:
        print("shapely is not installed: timing Pluto and numpy only (.venv/bin/pip install shapely to compare)")
    print()

    angles = np.linspace(-FIELD_OF_VIEW / 2, FIELD_OF_VIEW / 2, BEAMS)
    results: list[Result] = []
    for world, size in (("open", 100.0), ("dense", 25.0)):
        rng = np.random.default_rng(args.seed)
        segments = random_world(rng, size)
        poses = free_poses(rng, segments, size, args.scans)
        methods: list[tuple[str, Scan]] = [("pluto RayCaster", pluto_method(segments))]
        if shapely is not None:
            methods.append(("shapely STRtree", shapely_method(segments, shapely)))
        methods.append(("numpy brute force", brute_force_method(segments)))
        reference: list[np.ndarray] = []
        for method, scan in methods:
            times, ranges = time_scans(scan, poses, angles)
            if not reference:
                reference = ranges
            diff = max(float(np.max(np.abs(a - b))) for a, b in zip(ranges, reference, strict=True))
            results.append(Result(world, method, times, diff))

    header = f"{'world':<7}{'method':<20}{'median ms':>11}{'p90 ms':>10}{'pluto speed-up':>16}{'max |diff| m':>15}"
    print(header)
    print("-" * len(header))
    pluto = {r.world: r for r in results if r.method == "pluto RayCaster"}
    for r in results:
        speedup = r.median_ms / pluto[r.world].median_ms
        speed = "1.0x" if r is pluto[r.world] else f"{speedup:.1f}x"
        print(f"{r.world:<7}{r.method:<20}{r.median_ms:>11.3f}{r.p90_ms:>10.3f}{speed:>16}{r.max_diff:>15.2e}")
    print()

    open_pluto = pluto["open"]
    met = open_pluto.median_ms <= TARGET_MS
    print(
        f"target <= {TARGET_MS:g} ms per scan (open world, median): {open_pluto.median_ms:.3f} ms -> "
        f"{'met' if met else 'NOT met'}"
    )
    for r in results:
        if r.method == "shapely STRtree":
            speedup = r.median_ms / pluto[r.world].median_ms
            verdict = "met" if speedup >= TARGET_SPEEDUP else "NOT met"
            print(f"target >= {TARGET_SPEEDUP:g}x faster than shapely ({r.world} world): {speedup:.1f}x -> {verdict}")
    if shapely is None:
        print(f"target >= {TARGET_SPEEDUP:g}x faster than shapely: not measured (shapely is not installed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
