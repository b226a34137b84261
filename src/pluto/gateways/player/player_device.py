"""The payloads of the player device (code 1, the server itself): the device list, driver info, opening a device,
the data mode and rate, the key and the name service, and :func:`parse_player_request`, which turns a client's
request into the right struct or says why it cannot.

Each struct is a frozen value with ``pack() -> bytes`` and ``unpack(bytes)``; ``SIZE`` is its size on the wire.
Every name here is importable from :mod:`pluto.gateways.player.structs` too.
"""

# Strategy: docs/protocols/player.md ("Requests to the player device") gives each struct's format and size. A
# DEVLIST request is read by its subtype alone, the rest of its payload ignored whatever its size (the 1.5 server
# never reads it; libplayerc 1.5 sends the whole 388-byte struct with only the subtype filled in, the count and the
# entries left as its stack had them); every other request must have exactly its struct's size.

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar, Final

from pluto.errors import LocalProtocolError, RemoteProtocolError
from pluto.gateways.player.packing import (
    NAME_SIZE,
    FixedStruct,
    check_size,
    fixed_format,
    name_bytes,
    name_text,
    pack_fields,
)
from pluto.gateways.player.protocol import MAX_DEVICES, PlayerRequest

__all__ = [
    "AUTH_KEY_SIZE",
    "AuthRequest",
    "DataFreqRequest",
    "DataModeRequest",
    "DataRequest",
    "DeviceAddress",
    "DeviceList",
    "DeviceReply",
    "DeviceRequest",
    "DriverInfo",
    "NameService",
    "PlayerRequestStruct",
    "parse_player_request",
]

AUTH_KEY_SIZE: Final = 32
"""Bytes of an AUTH request's key."""


@dataclass(frozen=True, slots=True)
class DeviceAddress:
    """A device as the device list names it: code, index and the server port."""

    code: int
    index: int
    port: int


@dataclass(frozen=True, slots=True)
class DeviceList:
    """DEVLIST request (its subtype; whatever follows is ignored) and reply (388 bytes): the devices the server
    offers."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">HH")
    ENTRY: ClassVar[struct.Struct] = fixed_format(">HHH")
    SIZE: ClassVar[int] = 4 + MAX_DEVICES * 6
    devices: tuple[DeviceAddress, ...] = ()
    subtype: int = PlayerRequest.DEVLIST

    def pack(self) -> bytes:
        """The 388-byte reply.

        Raises:
            LocalProtocolError: more than 64 devices or a field out of range.
        """
        if len(self.devices) > MAX_DEVICES:
            raise LocalProtocolError(f"DeviceList: {len(self.devices)} devices, at most {MAX_DEVICES}")
        parts = [pack_fields(self.FORMAT, "DeviceList", self.subtype, len(self.devices))]
        parts += [pack_fields(self.ENTRY, "DeviceList", d.code, d.index, d.port) for d in self.devices]
        parts.append(bytes(6 * (MAX_DEVICES - len(self.devices))))
        return b"".join(parts)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> DeviceList:
        """Parse a reply.

        Raises:
            RemoteProtocolError: not 388 bytes, or a count over 64.
        """
        check_size("DeviceList", data, cls.SIZE)
        subtype, count = cls.FORMAT.unpack_from(data)
        if count > MAX_DEVICES:
            raise RemoteProtocolError(f"DeviceList: count {count} is over {MAX_DEVICES}")
        devices = tuple(DeviceAddress(*cls.ENTRY.unpack_from(data, 4 + 6 * i)) for i in range(count))
        return cls(devices, subtype)


@dataclass(frozen=True, slots=True)
class DriverInfo:
    """DRIVERINFO request and reply (72 bytes): a device and the name of the driver behind it."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">HHHH")
    SIZE: ClassVar[int] = 8 + NAME_SIZE
    code: int
    index: int
    port: int = 0
    name: str = ""
    subtype: int = PlayerRequest.DRIVERINFO

    def pack(self) -> bytes:
        """The 72 bytes.

        Raises:
            LocalProtocolError: a field out of range or a name over 64 bytes.
        """
        head = pack_fields(self.FORMAT, "DriverInfo", self.subtype, self.code, self.index, self.port)
        return head + name_bytes(self.name, "driver name")

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> DriverInfo:
        """Parse the 72 bytes.

        Raises:
            RemoteProtocolError: not 72 bytes.
        """
        check_size("DriverInfo", data, cls.SIZE)
        subtype, code, index, port = cls.FORMAT.unpack_from(data)
        return cls(code, index, port, name_text(bytes(data[8:])), subtype)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """DEV request (7 bytes): open a device with an access mode (``r``, ``w``, ``a``, ``c``)."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">HHHc")
    SIZE: ClassVar[int] = 7
    code: int
    index: int
    access: bytes
    subtype: int = PlayerRequest.DEV

    def pack(self) -> bytes:
        """The 7 bytes.

        Raises:
            LocalProtocolError: a field out of range or an access that is not one byte.
        """
        return pack_fields(self.FORMAT, "DeviceRequest", self.subtype, self.code, self.index, self.access)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> DeviceRequest:
        """Parse the 7 bytes.

        Raises:
            RemoteProtocolError: not 7 bytes.
        """
        check_size("DeviceRequest", data, cls.SIZE)
        subtype, code, index, access = cls.FORMAT.unpack(data)
        return cls(code, index, access, subtype)


@dataclass(frozen=True, slots=True)
class DeviceReply:
    """DEV reply (71 bytes): the request with the access granted, then the driver's name."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">HHHc")
    SIZE: ClassVar[int] = 7 + NAME_SIZE
    code: int
    index: int
    access: bytes
    driver_name: str = ""
    subtype: int = PlayerRequest.DEV

    def pack(self) -> bytes:
        """The 71 bytes.

        Raises:
            LocalProtocolError: a field out of range or a name over 64 bytes.
        """
        head = pack_fields(self.FORMAT, "DeviceReply", self.subtype, self.code, self.index, self.access)
        return head + name_bytes(self.driver_name, "driver name")

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> DeviceReply:
        """Parse the 71 bytes.

        Raises:
            RemoteProtocolError: not 71 bytes.
        """
        check_size("DeviceReply", data, cls.SIZE)
        subtype, code, index, access = cls.FORMAT.unpack_from(data)
        return cls(code, index, access, name_text(bytes(data[7:])), subtype)


@dataclass(frozen=True, slots=True)
class DataRequest(FixedStruct):
    """DATA request (2 bytes): send one round of data now (PULL modes)."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">H")
    SIZE: ClassVar[int] = 2
    subtype: int = PlayerRequest.DATA


@dataclass(frozen=True, slots=True)
class DataModeRequest(FixedStruct):
    """DATAMODE request (3 bytes): the data mode, 0..3 (:class:`~.protocol.DataMode`)."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">HB")
    SIZE: ClassVar[int] = 3
    subtype: int = PlayerRequest.DATAMODE
    mode: int = 2


@dataclass(frozen=True, slots=True)
class DataFreqRequest(FixedStruct):
    """DATAFREQ request (4 bytes): rounds per second in the PUSH modes, Hz."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">HH")
    SIZE: ClassVar[int] = 4
    subtype: int = PlayerRequest.DATAFREQ
    frequency: int = 10


@dataclass(frozen=True, slots=True)
class AuthRequest:
    """AUTH request (34 bytes): the key, NUL-padded to 32 bytes."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">H32s")
    SIZE: ClassVar[int] = 2 + AUTH_KEY_SIZE
    key: bytes = b""
    subtype: int = PlayerRequest.AUTH

    def pack(self) -> bytes:
        """The 34 bytes.

        Raises:
            LocalProtocolError: a key over 32 bytes.
        """
        if len(self.key) > AUTH_KEY_SIZE:
            raise LocalProtocolError(f"AuthRequest: the key is {len(self.key)} bytes, at most {AUTH_KEY_SIZE}")
        return pack_fields(self.FORMAT, "AuthRequest", self.subtype, self.key)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> AuthRequest:
        """Parse the 34 bytes (the key without its padding).

        Raises:
            RemoteProtocolError: not 34 bytes.
        """
        check_size("AuthRequest", data, cls.SIZE)
        subtype, key = cls.FORMAT.unpack(data)
        return cls(key.split(b"\0", 1)[0], subtype)


@dataclass(frozen=True, slots=True)
class NameService:
    """NAMESERVICE request and reply (68 bytes): a robot name and the port it is served on."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">H64sH")
    SIZE: ClassVar[int] = 4 + NAME_SIZE
    name: str = ""
    port: int = 0
    subtype: int = PlayerRequest.NAMESERVICE

    def pack(self) -> bytes:
        """The 68 bytes.

        Raises:
            LocalProtocolError: a name over 64 bytes or a port out of range.
        """
        return pack_fields(self.FORMAT, "NameService", self.subtype, name_bytes(self.name, "robot name"), self.port)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> NameService:
        """Parse the 68 bytes.

        Raises:
            RemoteProtocolError: not 68 bytes.
        """
        check_size("NameService", data, cls.SIZE)
        subtype, name, port = cls.FORMAT.unpack(data)
        return cls(name_text(name), port, subtype)


PlayerRequestStruct = (
    DeviceList
    | DriverInfo
    | DeviceRequest
    | DataRequest
    | DataModeRequest
    | DataFreqRequest
    | AuthRequest
    | NameService
)


def parse_player_request(payload: bytes) -> PlayerRequestStruct:
    """A request to the player device (a DEVLIST request is its subtype alone: what follows is not read).

    Raises:
        RemoteProtocolError: shorter than its subtype, an unknown subtype, or the wrong size for it.
    """
    if len(payload) < 2:
        raise RemoteProtocolError(f"a player request starts with a u16 subtype; got {len(payload)} bytes")
    (subtype,) = struct.unpack_from(">H", payload)
    if subtype == PlayerRequest.DEVLIST:
        return DeviceList()  # the rest of the payload, whatever its size, is not read (as the 1.5 server)
    parsers: dict[int, type[DriverInfo | DeviceRequest | DataRequest | DataModeRequest | DataFreqRequest]] = {
        PlayerRequest.DRIVERINFO: DriverInfo,
        PlayerRequest.DEV: DeviceRequest,
        PlayerRequest.DATA: DataRequest,
        PlayerRequest.DATAMODE: DataModeRequest,
        PlayerRequest.DATAFREQ: DataFreqRequest,
    }
    if subtype in parsers:
        return parsers[subtype].unpack(payload)
    if subtype == PlayerRequest.AUTH:
        return AuthRequest.unpack(payload)
    if subtype == PlayerRequest.NAMESERVICE:
        return NameService.unpack(payload)
    raise RemoteProtocolError(f"unknown player request subtype {subtype}")
