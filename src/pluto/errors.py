"""The exception tree of Pluto.

Every error a user can meet derives from :class:`PlutoError`, so ``except PlutoError`` catches them all and the
command line prints one clear line for each without a traceback.
"""

from __future__ import annotations

import os


class PlutoError(Exception):
    """Base of every error raised by Pluto."""


class ConfigError(PlutoError):
    """A configuration file, profile or parameter is wrong; the message says where and why."""


class BusError(PlutoError):
    """The bus could not be opened or used."""


class BusTimeout(BusError, TimeoutError):
    """A request got no reply (or a wait got no update) within its timeout."""


class RemoteError(BusError):
    """The module serving a request replied with an error."""


class DecodeError(PlutoError, ValueError):
    """Bytes received from the bus are not a valid message of the expected type."""


class ModuleNotFound(PlutoError, LookupError):
    """No module or profile of that name is installed."""


class LaunchError(PlutoError):
    """A module could not be started, stopped or found running."""


class ProtocolError(PlutoError, ValueError):
    """Base of the wire-protocol codecs' errors (P2OS, Player, ...)."""


class LocalProtocolError(ProtocolError):
    """The caller asked for something the protocol cannot express (API misuse); nothing was sent."""


class RemoteProtocolError(ProtocolError):
    """Bytes from the peer do not form a valid packet or message; the message says where and why."""


class MissingExtra(PlutoError, ImportError):
    """A feature needs a library of an extra that is not installed; the message names the extra to install."""


class MapError(ConfigError):
    """A map file is unreadable or invalid; the message is ``"<file>:<line>: <reason>"``.

    Attributes:
        reason: what is wrong.
        file: the file (or ``"<string>"``), or None.
        line: the 1-based line of the offending element, or None when the problem is not at a line.
    """

    def __init__(self, reason: str, file: str | os.PathLike[str] | None = None, line: int | None = None) -> None:
        self.reason = reason
        self.file = None if file is None else os.fspath(file)
        self.line = line
        where = ":".join(str(part) for part in (self.file, line) if part is not None)
        super().__init__(f"{where}: {reason}" if where else reason)
