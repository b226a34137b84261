"""How a ``pluto`` command finds its robot: the ``--config`` and ``--robot`` options, and the bus they name.

Every bus setting is taken, first found first: from the command line (``--robot``), from the ``PLUTO_*`` environment
variables (see :func:`pluto.bus.config.bus_config`), from the ``[bus]`` table of the configuration file, else its
default. Nothing here writes to ``os.environ``: the processes a command starts are told the settings of its bus
explicitly (see :func:`pluto.runtime.launcher.bus_environment`).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pluto.bus import Bus, BusConfig, bus_config
from pluto.cli.command import add_bus_arguments
from pluto.errors import ConfigError
from pluto.runtime.config import Config, load_config

__all__ = [
    "ARGUMENT_VARIABLES",
    "CommandConfig",
    "add_bus_arguments",
    "bus_config_from_args",
    "config_from_args",
    "open_bus",
]

ARGUMENT_VARIABLES = {"robot": "PLUTO_ROBOT"}
"""The bus options of the command line (their ``argparse`` destinations) and the environment variable each one
overrides."""


@dataclass(frozen=True)
class CommandConfig(Config):
    """The configuration file, with the bus settings the command line, the environment and the file give together.

    It goes wherever a :class:`~pluto.runtime.config.Config` goes (a supervisor, modules run in this process): they
    all join the bus the command was told about.

    Attributes:
        bus_settings: the bus settings, already resolved.
    """

    bus_settings: BusConfig = field(default_factory=BusConfig)

    @property
    def bus(self) -> BusConfig:
        """The bus settings: the command line's, else the environment's, else the file's."""
        return self.bus_settings


def config_from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> CommandConfig:
    """Load the configuration file and resolve the bus settings for a command.

    Args:
        args: the parsed command line; the options of :func:`add_bus_arguments` it lacks count as not given.
        env: the environment to read ``PLUTO_CONFIG`` and the bus variables from (default ``os.environ``, which is
            read and never written).

    Raises:
        ConfigError: the file named does not exist or cannot be read, or a bus setting is not valid (the message
            says where it came from).
    """
    variables = dict(os.environ if env is None else env)
    config = load_config(getattr(args, "config", None) or variables.get("PLUTO_CONFIG") or None)
    for dest, variable in ARGUMENT_VARIABLES.items():
        value = getattr(args, dest, None)
        if value:
            variables[variable] = value
    where = str(config.path) if config.path else "configuration"
    section = config.data.get("bus", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: [bus] must be a table")
    try:
        settings = bus_config(section, variables)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None
    return CommandConfig(config.path, config.data, bus_settings=settings)


def bus_config_from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> BusConfig:
    """The bus settings for a command (see :func:`config_from_args`).

    Raises:
        ConfigError: as :func:`config_from_args`.
    """
    return config_from_args(args, env).bus


def open_bus(args: argparse.Namespace) -> Bus:
    """Open the bus of the robot the command line, the environment or the configuration file names.

    The writers the command creates are named after it while it runs (``pluto-drive-velocity-4242``: the command,
    its action and the process id), so MOM tells them from a module (:attr:`pluto.bus.Bus.writer_label`).

    Returns:
        the opened bus; the caller closes it (``with open_bus(args) as bus:``).

    Raises:
        ConfigError: as :func:`config_from_args`.
        BusError: the bus cannot be opened (an unreachable router, ...).
    """
    bus = Bus(bus_config_from_args(args))
    words = [str(getattr(args, key)) for key in ("command", "action") if getattr(args, key, None)]
    label = "-".join(["pluto", *words, str(os.getpid())])
    bus.writer_label = re.sub(r"[^A-Za-z0-9_.-]", "_", label)  # a key chunk
    return bus
