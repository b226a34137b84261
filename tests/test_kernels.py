"""The progress a module compiling its numba kernels tells (its starter shows the log's last line as it changes)."""

from __future__ import annotations

import numba

from pluto import kernels
from pluto.navigation.pose import update


@numba.njit(cache=False)
def _inner(x: float) -> float:
    return x + 1.0


@numba.njit(cache=False)
def _outer(x: float) -> float:
    return 2.0 * _inner(x)  # compiled within _outer's compilation


def test_each_kernel_is_told_as_numba_begins_compiling_it() -> None:
    # the progress teller is private: the public warm() drives it with the navigation's kernels, whose compilation
    # takes tens of seconds, so it is tried here on two small kernels of the test's own
    said: list[str] = []
    lacking = [f"{__name__}._outer", f"{__name__}._inner"]
    with kernels._compile_progress(lacking, said.append):
        assert _outer(1.0) == 4.0
    assert said == [
        "compiling numba kernel 1 of 2: test_kernels._outer",
        "compiling numba kernel 2 of 2: test_kernels._inner",
    ]
    with kernels._compile_progress([], said.append):  # nothing missing: nothing told, no listener
        assert _outer(2.0) == 6.0
    assert len(said) == 2


def test_a_kernel_inlined_into_its_callers_is_not_counted_as_missing_from_the_cache() -> None:
    """A kernel with ``inline="always"`` has no machine code of its own (it is compiled, and cached, inside each
    caller), so it is never "in the cache": ``pluto warm`` must not take it for a missing one."""
    inlined = [
        f"pluto.navigation.pose.update.{name}"
        for name, value in vars(update).items()
        if isinstance(value, numba.core.dispatcher.Dispatcher) and value.targetoptions.get("inline") == "always"
    ]
    assert inlined  # the update's small matrix helpers
    assert not set(inlined) & set(kernels.missing("pose"))
