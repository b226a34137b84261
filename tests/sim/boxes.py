"""Geometry of the square test rooms the simulator tests use."""

from __future__ import annotations

import math


def ray_to_box(x: float, y: float, angle: float, size: float = 10.0) -> float:
    """Distance from (x, y) inside [0, size]² along ``angle`` to the box's wall."""
    c, s = math.cos(angle), math.sin(angle)
    hits = []
    if c > 1e-12:
        hits.append((size - x) / c)
    if c < -1e-12:
        hits.append(-x / c)
    if s > 1e-12:
        hits.append((size - y) / s)
    if s < -1e-12:
        hits.append(-y / s)
    return min(hits)
