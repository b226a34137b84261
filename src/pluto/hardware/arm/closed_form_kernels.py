"""The closed-form point IK's arithmetic, compiled by numba: yaw branches, elbow branches, the pitch a table picks.

    ok = place(constants, table_starts, table_intervals, x, y, z, q, joints, limits)   # q: the start, then the answer
    warm_up()                                        # numba loads them from its cache now (or compiles them into it)

:class:`~pluto.hardware.arm.closed_form.YawPlanarIK` derives the constants from a chain and builds the pitch table;
the functions here solve with them (the derivation is in that module's docstring). Every function takes the
constants as one float array laid out by the offsets below, and the pitch table as the start of each cell's
intervals in ``table_intervals`` (``table_starts``, one more than the cells) and the intervals themselves (rows:
safe start, safe width, edge start, edge width; see :data:`~pluto.hardware.arm.closed_form.PitchIntervals`).
A joint value that does not exist (no turn of the angle within the limits) is NaN, a solution that does not exist
costs inf; a found solution is written into the caller's array and nothing is written otherwise.
"""

# Strategy: a solve is a few dozen float operations, so in Python the interpreter, not the arithmetic, was the whole
# cost (a few µs); compiled, the arithmetic takes a tenth of a µs and the call from Python (numba's dispatch of the
# arguments) most of the rest. So the whole solve, clamping the start and picking the joints out of the outputs
# included, is one call: ``place``. The helpers are small functions, which numba inlines. Compiled with
# ``cache=True``: the first process compiles them (seconds) and leaves the machine code in numba's cache beside the
# module; later ones load it. numba's ``%`` on floats is Python's floor modulo, and the order of every sum is the
# one of the Python version it replaced, so the answers are the same to the bit.

from __future__ import annotations

import math

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = [
    "CONSTANTS",
    "LIMIT_SLACK",
    "REACH_SLACK",
    "at_pitch",
    "branches",
    "place",
    "solve",
    "solve_at_pitch",
    "solve_into",
    "start_pitch",
    "warm_up",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

LIMIT_SLACK = 1e-9
"""A joint value this far outside its limits (rad) is rounding and is held to the limit."""
REACH_SLACK = 1e-12
"""A cosine of the elbow this far beyond ±1 is rounding (a fully stretched or folded arm)."""
CELL = 0.004
"""Edge of the pitch table's cells in the plane, m."""
SEARCH_STEP = math.radians(10.0)
"""Spacing of the pitches searched when the table's choice fails, rad."""
SEARCH_BISECTIONS = 7
"""Halvings of the last search step toward the starting pitch (10° / 2⁷ ≈ 0.08°)."""

# Offsets in the constants array.
BASE = 0
"""12: joint 0's frame in the base frame, rotation rows r00 .. r22 then origin (to bring targets into it)."""
PLANE = 12
"""9: c, angle of h (η), sign of Z relative to h (σ), o1·h, o1·ẑ, X·h, Y·h, X·ẑ, Y·ẑ."""
LINKS = 21
"""3: a1, a2, a3 (a3 = 0 with two planar joints), m."""
JOINT_CONSTANTS = 24
"""3: k1, k2, k3, rad."""
PITCH_ZERO = 27
"""The sum of joints 1..3 at pitch 0, rad."""
YAW = 28
"""3: the yaw's lower limit, its range, the angle of h from the yaw's zero plus the lower limit."""
REACH = 31
"""Half the edge of the pitch table's square around joint 1, m."""
CELLS = 32
"""Cells along an edge of the pitch table."""
NUM_JOINTS = 33
"""3 or 4."""
LOWER = 34
"""4: the joints' lower limits (the fourth unused with three joints), rad."""
UPPER = 38
"""4: the joints' upper limits, rad."""
CONSTANTS = 42
"""Length of the constants array."""

_TAU = 2.0 * math.pi
_PI = math.pi


@numba.njit(cache=True, error_model="numpy")
def turn_within(angle: float, lower: float, upper: float) -> float:
    """The value of a joint at ``angle`` within [lower, upper] (the ranges are under a full turn, so there is at
    most one); NaN if there is none. A value within :data:`LIMIT_SLACK` outside is held to the limit."""
    value = (angle - lower + LIMIT_SLACK) % _TAU - LIMIT_SLACK
    span = upper - lower
    if value > span + LIMIT_SLACK:
        return math.nan
    if value < 0.0:
        return lower
    return upper if value > span else lower + value


@numba.njit(cache=True, error_model="numpy")
def start_pitch(c: FloatArray, start: FloatArray) -> float:
    """The pitch (Φ_3, the last link's angle in the plane) of the joint values ``start``, rad."""
    if c[NUM_JOINTS] == 3.0:
        return 0.0
    return float(start[1] + start[2] + start[3] - c[PITCH_ZERO])


@numba.njit(cache=True, error_model="numpy")
def branches(c: FloatArray, x: float, y: float, z: float, yaw_start: float, out: FloatArray) -> int:
    """The yaws within limits that turn the plane to (x, y, z), each with the target in the plane's coordinates:
    (q_0, P_x, P_y) at ``out[0:3]`` and ``out[3:6]``; returns how many."""
    dx, dy, dz = x - c[BASE + 9], y - c[BASE + 10], z - c[BASE + 11]
    px = c[BASE] * dx + c[BASE + 1] * dy + c[BASE + 2] * dz
    py = c[BASE + 3] * dx + c[BASE + 4] * dy + c[BASE + 5] * dz
    offset, sigma, o1h = c[PLANE], c[PLANE + 2], c[PLANE + 3]
    xh, yh, xz, yz = c[PLANE + 5], c[PLANE + 6], c[PLANE + 7], c[PLANE + 8]
    rho2 = px * px + py * py - offset * offset
    if not rho2 >= 0.0:
        return 0
    w = c[BASE + 6] * dx + c[BASE + 7] * dy + c[BASE + 8] * dz - c[PLANE + 4]
    if rho2 == 0.0 and offset == 0.0:
        # On the yaw axis: every yaw reaches it, and the one the arm has moves least.
        out[0], out[1], out[2] = yaw_start, -xh * o1h + xz * w, -yh * o1h + yz * w
        return 1
    lower, span = c[YAW], c[YAW + 1]
    heading = math.atan2(py, px) - c[YAW + 2]
    rho = math.sqrt(rho2)
    count = 0
    for side in range(2 if rho > 0.0 else 1):
        r = -rho if side else rho
        # The plane's point c Z + ρ h lies at atan2(σ c, ρ) from h: 0 or π with no offset off the plane.
        q0 = heading - (math.atan2(sigma * offset, r) if offset else 0.0 if r >= 0.0 else _PI)
        q0 = (q0 + LIMIT_SLACK) % _TAU - LIMIT_SLACK
        if q0 <= span + LIMIT_SLACK:
            u = r - o1h
            q0 = lower if q0 < 0.0 else lower + span if q0 > span else lower + q0
            out[3 * count], out[3 * count + 1], out[3 * count + 2] = q0, xh * u + xz * w, yh * u + yz * w
            count += 1
    return count


@numba.njit(cache=True, error_model="numpy")
def _elbow_cosine(c: FloatArray, wx: float, wy: float) -> float:
    """cos δ of the two-link arm reaching the wrist (wx, wy); NaN when it cannot (beyond rounding)."""
    a1, a2 = c[LINKS], c[LINKS + 1]
    cos_elbow = (wx * wx + wy * wy - a1 * a1 - a2 * a2) / (2.0 * a1 * a2)
    if cos_elbow > 1.0:
        return 1.0 if cos_elbow <= 1.0 + REACH_SLACK else math.nan
    if cos_elbow < -1.0:
        return -1.0 if cos_elbow >= -1.0 - REACH_SLACK else math.nan
    return float(cos_elbow)


@numba.njit(cache=True, error_model="numpy")
def _elbow_branch(
    c: FloatArray,
    q0: float,
    pitch: float,
    toward: float,
    cos_elbow: float,
    delta: float,
    sin_delta: float,
    start: FloatArray,
    best: float,
    out: FloatArray,
) -> float:
    """The joint values of one elbow branch (elbow angle δ), written into ``out`` if they are within limits and cost
    less than ``best`` (sum of absolute changes from ``start``); returns the lower of the two costs."""
    a1, a2 = c[LINKS], c[LINKS + 1]
    q2 = turn_within(delta + c[JOINT_CONSTANTS + 1], c[LOWER + 2], c[UPPER + 2])
    if q2 != q2:
        return best
    phi1 = toward - math.atan2(a2 * sin_delta, a1 + a2 * cos_elbow)
    q1 = turn_within(phi1 + c[JOINT_CONSTANTS], c[LOWER + 1], c[UPPER + 1])
    if q1 != q1:
        return best
    cost = abs(q0 - start[0]) + abs(q1 - start[1]) + abs(q2 - start[2])
    q3 = 0.0
    if c[NUM_JOINTS] == 4.0:
        q3 = turn_within(pitch - phi1 - delta + c[JOINT_CONSTANTS + 2], c[LOWER + 3], c[UPPER + 3])
        if q3 != q3:
            return best
        cost += abs(q3 - start[3])
    if not cost < best:
        return best
    out[0], out[1], out[2] = q0, q1, q2
    if c[NUM_JOINTS] == 4.0:
        out[3] = q3
    return float(cost)


@numba.njit(cache=True, error_model="numpy")
def at_pitch(c: FloatArray, q0: float, px: float, py: float, pitch: float, start: FloatArray, out: FloatArray) -> float:
    """Of the elbow branches that place the point at (px, py) in the plane with this pitch, the one within limits
    nearest ``start``: its joint values into ``out``, and its cost (sum of absolute joint changes; inf if none)."""
    a3 = c[LINKS + 2]
    wx, wy = px - a3 * math.cos(pitch), py - a3 * math.sin(pitch)
    cos_elbow = _elbow_cosine(c, wx, wy)
    if cos_elbow != cos_elbow:
        return math.inf
    elbow = math.acos(cos_elbow)
    sin_elbow = math.sqrt(1.0 - cos_elbow * cos_elbow)
    toward = math.atan2(wy, wx)
    if not elbow > 0.0:
        return _elbow_branch(c, q0, pitch, toward, cos_elbow, 0.0, 0.0, start, math.inf, out)
    best = _elbow_branch(c, q0, pitch, toward, cos_elbow, elbow, sin_elbow, start, math.inf, out)
    return _elbow_branch(c, q0, pitch, toward, cos_elbow, -elbow, -sin_elbow, start, best, out)


@numba.njit(cache=True, error_model="numpy")
def _search(c: FloatArray, q0: float, px: float, py: float, wanted: float, start: FloatArray, out: FloatArray) -> float:
    """The solution at the pitch nearest ``wanted`` that reaches, on a grid refined by bisection; its cost."""
    steps = math.ceil(_PI / SEARCH_STEP)
    for n in range(steps + 1):
        for k in range(2 if n else 1):
            side = (-1.0 if k else 1.0) if n else 0.0
            offset = side * min(n * SEARCH_STEP, _PI)
            found = at_pitch(c, q0, px, py, wanted + offset, start, out)
            if found == math.inf:
                continue
            if n == 0:
                return found
            bad, good = side * (n - 1) * SEARCH_STEP, offset
            for _ in range(SEARCH_BISECTIONS):
                middle = 0.5 * (bad + good)
                nearer = at_pitch(c, q0, px, py, wanted + middle, start, out)
                if nearer == math.inf:
                    bad = middle
                else:
                    good, found = middle, nearer
            return found
    return math.inf


@numba.njit(cache=True, error_model="numpy")
def _nearest_safe_pitch(
    intervals: FloatArray, first: int, last: int, wanted: float
) -> tuple[float, float, float, bool]:
    """Among the table intervals ``first .. last - 1``: the pitch nearest ``wanted`` taken to reach for sure, twice
    (summed in two orders: the table's first pick, and the retry after it failed, which may differ in the last bit,
    as they always did), its distance (0: ``wanted`` itself; inf: no interval), and whether ``wanted`` lies at an
    interval's edge."""
    nearest, careful, distance, near_edge = wanted, wanted, math.inf, False
    for row in range(first, last):
        safe_first, safe_width = intervals[row, 0], intervals[row, 1]
        edge_first, edge_width = intervals[row, 2], intervals[row, 3]
        into = (wanted - safe_first) % _TAU
        if into <= safe_width:
            return wanted, wanted, 0.0, near_edge
        if (wanted - edge_first) % _TAU <= edge_width:
            near_edge = True
        down, up = into - safe_width, _TAU - into  # to the safe part's end below, its start above
        if down < distance:
            nearest, careful, distance = wanted - into + safe_width, wanted - down, down
        if up < distance:
            nearest, careful, distance = wanted + _TAU - into, wanted + up, up
    return nearest, careful, distance, near_edge


@numba.njit(cache=True, error_model="numpy")
def pitched(
    c: FloatArray,
    starts: IntArray,
    intervals: FloatArray,
    q0: float,
    px: float,
    py: float,
    wanted: float,
    start: FloatArray,
    out: FloatArray,
) -> float:
    """The solution of one yaw branch at the pitch the table picks for (px, py), or by search; its cost."""
    if c[NUM_JOINTS] == 3.0:
        return at_pitch(c, q0, px, py, 0.0, start, out)
    n, reach = int(c[CELLS]), c[REACH]
    i, j = int((px + reach) / CELL), int((py + reach) / CELL)
    first = last = 0
    if 0 <= i < n and 0 <= j < n:
        first, last = starts[i * n + j], starts[i * n + j + 1]
    nearest, careful, distance, near_edge = _nearest_safe_pitch(intervals, first, last, wanted)
    # The table's pick: the starting pitch well inside an interval, else the nearest pitch well inside one.
    if distance == 0.0 or not (near_edge or distance == math.inf):
        found = at_pitch(c, q0, px, py, nearest, start, out)
        if found < math.inf or distance == 0.0:
            return found if found < math.inf else _search(c, q0, px, py, wanted, start, out)
    # Near an interval's edge, or the pick failed: the starting pitch, the nearest one again, then the search.
    if near_edge:
        found = at_pitch(c, q0, px, py, wanted, start, out)
        if found < math.inf:
            return found
    if distance < math.inf:
        found = at_pitch(c, q0, px, py, careful, start, out)
        if found < math.inf:
            return found
    return _search(c, q0, px, py, wanted, start, out)


@numba.njit(cache=True, error_model="numpy")
def solve_into(
    c: FloatArray,
    starts: IntArray,
    intervals: FloatArray,
    x: float,
    y: float,
    z: float,
    start: FloatArray,
    out: FloatArray,
    work: FloatArray,
) -> bool:
    """Joint values within the limits that place the point at (x, y, z), nearest ``start`` at the pitch the table
    picks, into ``out``; False if there are none (out of reach or limits). ``work``: room for 10 values."""
    wanted = start_pitch(c, start)
    if wanted != wanted:
        return False  # a starting value that is not a number (one in the yaw or the shoulder fails the cost)
    candidate = work[6:10]
    best = math.inf
    for b in range(branches(c, x, y, z, start[0], work)):
        cost = pitched(c, starts, intervals, work[3 * b], work[3 * b + 1], work[3 * b + 2], wanted, start, candidate)
        if cost < best:
            best = cost
            out[: len(start)] = candidate[: len(start)]
    return best < math.inf


@numba.njit(cache=True, error_model="numpy")
def solve(
    c: FloatArray,
    starts: IntArray,
    intervals: FloatArray,
    x: float,
    y: float,
    z: float,
    start: FloatArray,
    out: FloatArray,
) -> bool:
    """:func:`solve_into` with room of its own."""
    return bool(solve_into(c, starts, intervals, x, y, z, start, out, np.empty(10)))


@numba.njit(cache=True, error_model="numpy")
def solve_at_pitch(
    c: FloatArray, x: float, y: float, z: float, start: FloatArray, pitch: float, out: FloatArray
) -> bool:
    """Joint values within the limits that place the point at (x, y, z) with this pitch, nearest ``start``, into
    ``out``; False if there are none."""
    work = np.empty(10)
    candidate = work[6:10]
    best = math.inf
    for b in range(branches(c, x, y, z, start[0], work)):
        cost = at_pitch(c, work[3 * b], work[3 * b + 1], work[3 * b + 2], pitch, start, candidate)
        if cost < best:
            best = cost
            out[: len(start)] = candidate[: len(start)]
    return best < math.inf


@numba.njit(cache=True, error_model="numpy")
def place(
    c: FloatArray,
    starts: IntArray,
    intervals: FloatArray,
    x: float,
    y: float,
    z: float,
    q: FloatArray,
    joints: IntArray,
    limits: FloatArray,
) -> bool:
    """Point IK of a whole arm in one call: ``q`` (every output's starting value) is held to ``limits`` (2, outputs)
    and, if the closed form solves (x, y, z) from it, its ``joints`` get the solution; False if it does not (a
    target that is not finite, out of reach or limits)."""
    if not math.isfinite(x + y + z):
        return False
    for i in range(len(q)):
        value, lower, upper = q[i], limits[0, i], limits[1, i]
        q[i] = lower if value < lower else upper if value > upper else value
    k = len(joints)
    work = np.empty(2 * k + 10)  # one allocation: the start, the solution, and solve_into's room
    start, solution = work[:k], work[k : 2 * k]
    for i in range(k):
        start[i] = q[joints[i]]
    if not solve_into(c, starts, intervals, x, y, z, start, solution, work[2 * k :]):
        return False
    for i in range(k):
        q[joints[i]] = solution[i]
    return True


def warm_up() -> None:
    """Have numba load every kernel from its cache now, or compile it into the cache if it lacks it (seconds; a
    loaded kernel takes milliseconds): each is run once on a small made-up arm, with the argument types of the
    real calls."""
    c = np.zeros(CONSTANTS)
    c[LINKS], c[LINKS + 1], c[LINKS + 2] = 0.1, 0.1, 0.05
    c[REACH], c[CELLS], c[NUM_JOINTS] = 0.3, 1.0, 4.0
    c[LOWER : LOWER + 4], c[UPPER : UPPER + 4] = -1.5, 1.5
    c[YAW + 1] = 3.0
    table_starts, intervals = np.zeros(2, dtype=np.int64), np.zeros((1, 4))
    start, out = np.zeros(4), np.empty(4)
    start_pitch(c, start)
    branches(c, 0.1, 0.05, 0.1, 0.0, np.empty(6))
    at_pitch(c, 0.0, 0.1, 0.05, 0.0, start, out)
    solve(c, table_starts, intervals, 0.1, 0.05, 0.1, start, out)
    solve_at_pitch(c, 0.1, 0.05, 0.1, start, 0.0, out)
    place(c, table_starts, intervals, 0.1, 0.05, 0.1, np.zeros(6), np.arange(4, dtype=np.int64), np.zeros((2, 6)))
