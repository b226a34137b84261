"""-v shows Pluto's details and keeps the libraries quiet (numba logs every step of a compilation at DEBUG); -vv
lets them through; Zenoh's own log follows."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from pluto.bus.session import ZENOH_QUIET, zenoh_log_filter
from pluto.cli.verbosity import setup_logging


class Kept(logging.Handler):
    """Every record that reaches the root logger's handlers."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept() -> Iterator[Kept]:
    root, pluto = logging.getLogger(), logging.getLogger("pluto")
    saved = root.level, pluto.level, list(root.handlers)
    handler = Kept()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.setLevel(saved[0])
        pluto.setLevel(saved[1])
        root.handlers[:] = saved[2]


def test_v_on_a_module_in_the_foreground_logs_pluto_debug_and_no_numba(kept: Kept) -> None:
    import numba

    setup_logging(verbose=1, base=1)  # `pluto -v run pose`: its start logged at INFO by default
    logging.getLogger("pluto.pose").debug("pluto's detail")

    @numba.njit(cache=False)
    def twice(x: float) -> float:  # compiled now: numba logs its steps at DEBUG
        return 2.0 * x

    assert twice(2.0) == 4.0
    names = {record.name for record in kept.records}
    assert "pluto.pose" in names
    assert not [name for name in names if name.startswith("numba")]


def test_vv_lets_the_libraries_debug_through(kept: Kept) -> None:
    setup_logging(verbose=2)
    assert logging.getLogger("numba.core.byteflow").isEnabledFor(logging.DEBUG)
    assert logging.getLogger("pluto.drive").isEnabledFor(logging.DEBUG)
    setup_logging(verbose=0, base=1)
    assert not logging.getLogger("numba.core.byteflow").isEnabledFor(logging.INFO)
    assert logging.getLogger("pluto.drive").isEnabledFor(logging.INFO)
    assert not logging.getLogger("pluto.drive").isEnabledFor(logging.DEBUG)


def test_zenoh_shows_its_errors_only_unless_vv() -> None:
    assert zenoh_log_filter(logging.WARNING) == ZENOH_QUIET
    assert "zenoh::api::handlers=off" in ZENOH_QUIET  # "sending on a closed channel" of a late reply
    assert zenoh_log_filter(logging.DEBUG) == "debug"
