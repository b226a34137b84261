"""How a Player 1.5 payload struct is packed: the helpers every struct of :mod:`.structs` and :mod:`.player_device`
shares, and :class:`FixedStruct`, the base of a struct whose fields map one to one to a ``struct`` format.

Packing checks ranges and raises :class:`~pluto.errors.LocalProtocolError` (the caller's mistake); unpacking checks
sizes and raises :class:`~pluto.errors.RemoteProtocolError` (the peer's).
"""

from __future__ import annotations

import dataclasses
import struct
from typing import ClassVar, Final, Self

from pluto.errors import LocalProtocolError, RemoteProtocolError

__all__ = ["NAME_SIZE", "FixedStruct", "check_size", "fixed_format", "name_bytes", "name_text", "pack_fields"]

NAME_SIZE: Final = 64
"""Bytes of a driver or robot name (NUL-padded)."""


def pack_fields(fmt: struct.Struct, name: str, *values: int | bytes) -> bytes:
    """``values`` packed with ``fmt``.

    Raises:
        LocalProtocolError: a value does not fit its field (the message names the struct, ``name``).
    """
    try:
        return fmt.pack(*values)
    except struct.error as err:
        raise LocalProtocolError(f"{name}: a field is out of range ({err})") from err


def check_size(name: str, data: bytes | bytearray | memoryview, *sizes: int) -> None:
    """Check that ``data`` is one of ``sizes`` bytes long.

    Raises:
        RemoteProtocolError: it is not (the message names the struct, ``name``).
    """
    if len(data) not in sizes:
        expected = " or ".join(str(s) for s in sizes)
        raise RemoteProtocolError(f"{name} is {expected} bytes, got {len(data)}")


def name_bytes(text: str, what: str) -> bytes:
    """``text`` as a NUL-padded name field of :data:`NAME_SIZE` bytes (Latin-1).

    Raises:
        LocalProtocolError: it is longer than the field (the message calls it ``what``).
    """
    raw = text.encode("latin-1", errors="replace")
    if len(raw) > NAME_SIZE:
        raise LocalProtocolError(f"{what} {text!r} is longer than {NAME_SIZE} bytes")
    return raw.ljust(NAME_SIZE, b"\0")


def name_text(raw: bytes) -> str:
    """A name field's text: up to its first NUL, Latin-1."""
    return raw.split(b"\0", 1)[0].decode("latin-1")


class FixedStruct:
    """A struct of fixed size whose fields map one to one, in order, to ``FORMAT``."""

    FORMAT: ClassVar[struct.Struct]
    SIZE: ClassVar[int]
    __slots__ = ()

    def _values(self) -> tuple[int, ...]:
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self))  # type: ignore[arg-type]

    def pack(self) -> bytes:
        """The struct's bytes.

        Raises:
            LocalProtocolError: a field does not fit its type.
        """
        return pack_fields(self.FORMAT, type(self).__name__, *self._values())

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> Self:
        """Parse the struct.

        Raises:
            RemoteProtocolError: ``data`` is not ``SIZE`` bytes.
        """
        check_size(cls.__name__, data, cls.SIZE)
        return cls(*cls.FORMAT.unpack(data))


def fixed_format(fmt: str) -> struct.Struct:
    """The compiled ``struct`` format of a payload struct (a class attribute, compiled once)."""
    return struct.Struct(fmt)
