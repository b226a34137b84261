"""The optional parts of Pluto, and the extras of the ``pluto-robot`` package that install them.

``pip install pluto-robot`` installs what runs a robot and ``pluto demo``: the bus, the simulator, the drivers of
the base, the laser and the inertial unit, localization, pose, slam, the movement chain, the recorder and the Player
gateway. A feature whose library nothing else needs is an extra, installed on demand: ``pip install
'pluto-robot[web]'``, or several at once, ``'pluto-robot[web,foxglove]'``; ``[all]`` installs every one.

Strategy: the code of a feature imports its library as any code does, at the top of its own modules, which nothing
else imports. When the library is missing, the import fails with Python's ``ModuleNotFoundError``, and the places
that turn errors into messages (the ``pluto`` command, the module registry) ask :func:`missing_extra` whether the
missing module is one of an extra's: then the user is told which extra to install instead of a traceback. So the
table here is the only place that knows which library belongs to which extra (pyproject.toml lists the same
packages, and a test checks that the two agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from pluto.errors import MissingExtra

__all__ = ["EXTRAS", "PACKAGE", "extra_of", "missing_extra"]

PACKAGE = "pluto-robot"

EXTRAS: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType(
    {
        "web": {"aiohttp": "aiohttp"},  # pluto web, the browser view
        "foxglove": {"foxglove": "foxglove-sdk"},  # pluto foxglove, pluto record --foxglove
        "tui": {"textual": "textual"},  # pluto key, the keyboard pages
        "gps": {"pyproj": "pyproj", "pynmea2": "pynmea2"},  # the NMEA receiver's driver and emulator, its local grid
        "can": {"can": "python-can"},  # the wrist's CAN driver and its emulator
        "xml": {"defusedxml": "defusedxml"},  # pluto xmlserver, the XML gateway
        "secure": {"cryptography": "cryptography"},  # pluto certs, pluto router --secure, PLUTO_TLS
        "plot": {"matplotlib": "matplotlib"},  # the demo's picture, pluto log plot
        "ros": {"rosbags": "rosbags", "yaml": "pyyaml"},  # ROS bags, map_server occupancy grids
    }
)
"""Each extra: the modules it installs, by import name, and the package (distribution) each one comes in."""


def extra_of(module: str) -> str | None:
    """The extra that installs ``module`` (a dotted import name: its top-level package counts), or None."""
    top = module.partition(".")[0]
    return next((extra for extra, modules in EXTRAS.items() if top in modules), None)


def missing_extra(err: BaseException, what: str) -> MissingExtra | None:
    """The error to raise instead of ``err`` when ``err`` says that a module of an extra is not installed.

    Args:
        err: an exception caught while importing or running a feature.
        what: the feature, as the message should name it (``"pluto web"``, ``"module 'web'"``).

    Returns:
        a :class:`~pluto.errors.MissingExtra` naming the extra and how to install it, or None when ``err`` is not a
        missing module of an extra.
    """
    if not isinstance(err, ModuleNotFoundError) or not err.name:
        return None
    extra = extra_of(err.name)
    if extra is None:
        return None
    return MissingExtra(_message(what, extra, err.name.partition(".")[0]), name=err.name)


def _message(what: str, extra: str, module: str) -> str:
    package = EXTRAS[extra][module]
    return f"{what} needs the {extra} extra ({package} is not installed): pip install '{PACKAGE}[{extra}]'"
