"""Angle arithmetic inside the navigation's compiled kernels.

Strategy: code compiled by numba (``@numba.njit``) cannot call :func:`pluto.geometry.wrap_angle`, a Python function,
so the kernels call its compiled twin here instead of writing the formula out again in each loop. It is the same
arithmetic (numba's ``%`` on floats is Python's floor modulo), so a kernel and the Python code around it wrap an
angle to the same bits.
"""

from __future__ import annotations

import math

import numba

__all__ = ["compiled_wrap_angle"]

_TWO_PI = 2.0 * math.pi


@numba.njit(cache=True)
def compiled_wrap_angle(angle: float) -> float:
    """``angle`` (rad) wrapped to [-π, π): :func:`pluto.geometry.wrap_angle` for compiled kernels."""
    return (angle + math.pi) % _TWO_PI - math.pi
