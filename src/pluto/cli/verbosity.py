"""How much a ``pluto`` command logs: Pluto's own lines by ``-v``, the libraries' only by ``-vv``.

Strategy: ``-v`` is for Pluto's details, so it raises Pluto's loggers (``pluto.*``) alone; the libraries under it
log through the root logger, which stays at WARNING, because numba logs every step of a compilation at DEBUG (tens
of thousands of lines a minute while the navigation kernels compile) and Zenoh's own log (Rust's tracing, on
stderr) is as talkative. Only a ``-v`` counted twice by the user (``-vv``) lets them through: the root logger at
DEBUG, and Zenoh's log at debug too (:func:`pluto.bus.session.zenoh_log_filter` reads it from the ``zenoh``
logger's level when the first bus opens). A command that logs more by default (``pluto run``: a module in the
foreground logs its start) raises Pluto's level only: its ``base_verbosity`` never counts towards the libraries'.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["LIBRARIES_AT", "pluto_level", "setup_logging"]

LIBRARIES_AT = 2
"""The user's ``-v`` count from which the libraries' own log lines (numba, Zenoh, ...) are shown."""

FORMAT = "%(asctime)s %(name)s %(levelname)s: %(message)s"


def pluto_level(verbose: int, base: int = 0) -> int:
    """The level of Pluto's loggers for ``verbose`` ``-v`` given by the user over a command's ``base`` ones:
    WARNING, then INFO, then DEBUG."""
    return max(logging.WARNING - 10 * (verbose + base), logging.DEBUG)


def setup_logging(verbose: int, base: int = 0) -> None:
    """Configure the process's logging for a command: Pluto's loggers at :func:`pluto_level`, every other logger
    at WARNING unless the user gave ``-v`` :data:`LIBRARIES_AT` times or more (then DEBUG), all on stderr.

    Args:
        verbose: how many ``-v`` the user gave.
        base: how many more the command adds for Pluto's own loggers (``base_verbosity``).
    """
    libraries = logging.DEBUG if verbose >= LIBRARIES_AT else logging.WARNING
    logging.basicConfig(level=libraries, format=FORMAT, stream=sys.stderr)
    logging.getLogger().setLevel(libraries)  # also when logging was configured before (a test, an embedding)
    logging.getLogger("pluto").setLevel(pluto_level(verbose, base))
