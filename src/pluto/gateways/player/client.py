"""PlayerClient: a Python client of a Player 1.5 server (Pluto's or any other), with a playerc-like API.

    from pluto.player.client import PlayerClient

    with PlayerClient("127.0.0.1", 6665) as client:
        client.subscribe("position", access="a")
        client.subscribe("laser")
        client.set_speed(0.3, 0.0)            # m/s, rad/s
        client.read()                         # one round of data (up to its SYNCH)
        print(client.position.px, client.laser.ranges[180])

Everything is in SI units (m, rad, s); the protocol's mm, degrees and arc-seconds stay in the codec. Requests wait
for their reply and keep the data that arrives meanwhile, as libplayerc does.
"""

# Strategy: a thin blocking socket shell over the sans-I/O PlayerConnection (client role) and the structs, so the
# client and the server share every byte of the codec. A reply is recognised by its type (RESP_*) and by echoing
# the request's device and index; data and SYNCH messages read while waiting for it update the device states.

from __future__ import annotations

import math
import socket
import time
from dataclasses import dataclass, field
from typing import Final, Self

from pluto.errors import PlutoError, RemoteProtocolError
from pluto.gateways.player.devices import (
    from_arcsec,
    from_centidegrees,
    from_degrees,
    from_mm,
    to_arcsec,
    to_degrees,
    to_mm,
)
from pluto.gateways.player.protocol import (
    NEED_DATA,
    Access,
    Banner,
    ConnectionClosed,
    DataMode,
    DeviceCode,
    Message,
    MsgType,
    PlayerConnection,
    encode_message,
)
from pluto.gateways.player.structs import (
    AuthRequest,
    DataFreqRequest,
    DataModeRequest,
    DataRequest,
    DeviceList,
    DeviceReply,
    DeviceRequest,
    DriverInfo,
    LaserConfig,
    LaserData,
    LaserGeometry,
    LaserRequest,
    MotorPower,
    Position3dCommand,
    Position3dData,
    PositionCommand,
    PositionData,
    PositionGeometry,
    PositionMode,
    PositionRequest,
    ResetOdometry,
    SetOdometry,
    SonarData,
    SonarGeometry,
)

__all__ = [
    "Geometry",
    "LaserState",
    "PlayerClient",
    "PlayerClientError",
    "Position3dState",
    "PositionState",
    "RequestRefused",
    "SonarState",
]

DEFAULT_PORT: Final = 6665


class PlayerClientError(PlutoError):
    """The connection failed: refused, closed by the server, timed out, or garbled."""


class RequestRefused(PlayerClientError):
    """The server answered a request with RESP_NACK or RESP_ERR, or granted another access than the one asked."""


@dataclass
class PositionState:
    """The newest position data: pose (m, m, rad) and velocities (m/s, m/s, rad/s) in the odometry frame."""

    px: float = 0.0
    py: float = 0.0
    pa: float = 0.0
    vx: float = 0.0
    vy: float = 0.0
    va: float = 0.0
    stall: bool = False
    timestamp: float = 0.0
    count: int = 0


@dataclass
class Position3dState:
    """The newest position3d data: position m, angles rad (roll, pitch, yaw), speeds m/s and rad/s."""

    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    angles: tuple[float, float, float] = (0.0, 0.0, 0.0)
    speeds: tuple[float, float, float] = (0.0, 0.0, 0.0)
    angular_speeds: tuple[float, float, float] = (0.0, 0.0, 0.0)
    stall: bool = False
    timestamp: float = 0.0
    count: int = 0


@dataclass
class LaserState:
    """The newest laser scan: ranges m at bearings rad (right to left), the scan's angles and resolution (rad)."""

    ranges: list[float] = field(default_factory=list)
    bearings: list[float] = field(default_factory=list)
    intensity: list[int] = field(default_factory=list)
    min_angle: float = 0.0
    max_angle: float = 0.0
    resolution: float = 0.0
    range_res: int = 1
    timestamp: float = 0.0
    count: int = 0


@dataclass
class SonarState:
    """The newest sonar ranges, m."""

    ranges: list[float] = field(default_factory=list)
    timestamp: float = 0.0
    count: int = 0


@dataclass(frozen=True)
class Geometry:
    """Where a device sits on the robot: pose (x m, y m, yaw rad), size (width m, length m)."""

    pose: tuple[float, float, float]
    size: tuple[float, float]


def _device_code(device: int | str) -> int:
    if isinstance(device, str):
        try:
            return int(DeviceCode[device.upper()])
        except KeyError:
            raise ValueError(
                f"unknown device {device!r}; known: {', '.join(d.name.lower() for d in DeviceCode)}"
            ) from None
    return int(device)


class PlayerClient:
    """A blocking client of a Player 1.5 server.

    Args:
        host, port: where the server listens.
        timeout: s to wait for the connection, a reply or a round.

    Attributes:
        position, position3d, laser, sonar: the newest data of each device (SI).
        rounds: rounds read (SYNCH messages); round_time: the server's time of the last one, s.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, timeout: float = 5.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.banner = ""
        self.position = PositionState()
        self.position3d = Position3dState()
        self.laser = LaserState()
        self.sonar = SonarState()
        self.rounds = 0
        self.round_time = 0.0
        self.data_messages = 0
        self._sock: socket.socket | None = None
        self._conn = PlayerConnection("client")
        self._synched = False
        self._updated: set[tuple[int, int]] = set()

    # -- connection -----------------------------------------------------------------------------------------------

    def connect(self) -> str:
        """Connect and read the banner; return its text (``Player v.1.5``).

        Raises:
            PlayerClientError: no server there, or it sent no banner in time.
        """
        if self._sock is not None:
            return self.banner
        try:
            self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as err:
            raise PlayerClientError(f"cannot connect to {self.host}:{self.port}: {err}") from err
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        event = self._next_event(time.monotonic() + self.timeout)
        if not isinstance(event, Banner):
            raise PlayerClientError(f"expected the server's banner, got {event}")
        self.banner = event.text
        return self.banner

    def close(self) -> None:
        """Close the connection (idempotent)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- low level ------------------------------------------------------------------------------------------------

    def send(self, mtype: int, device: int, index: int, payload: bytes = b"") -> None:
        """Send one message.

        Raises:
            PlayerClientError: not connected, or the connection broke.
        """
        if self._sock is None:
            raise PlayerClientError("not connected")
        try:
            self._sock.sendall(encode_message(mtype, device, index, payload, time=time.time()))
        except OSError as err:
            raise PlayerClientError(f"sending to {self.host}:{self.port} failed: {err}") from err

    def _next_event(self, deadline: float) -> Banner | Message:
        while True:
            try:
                event = self._conn.next_event()
            except RemoteProtocolError as err:
                raise PlayerClientError(f"the server sent garbage: {err}") from err
            if isinstance(event, ConnectionClosed):
                raise PlayerClientError("the server closed the connection")
            if event is not NEED_DATA:
                return event
            if self._sock is None:
                raise PlayerClientError("not connected")
            left = deadline - time.monotonic()
            if left <= 0:
                raise PlayerClientError(f"nothing from {self.host}:{self.port} within {self.timeout} s")
            self._sock.settimeout(left)
            try:
                data = self._sock.recv(65536)
            except TimeoutError:
                continue
            except OSError as err:
                raise PlayerClientError(f"receiving from {self.host}:{self.port} failed: {err}") from err
            self._conn.receive_data(data)

    def _next_message(self, deadline: float) -> Message:
        event = self._next_event(deadline)
        if not isinstance(event, Message):
            raise PlayerClientError(f"unexpected {event}")
        if event.type == MsgType.DATA:
            self._take_data(event)
        elif event.type == MsgType.SYNCH:
            self.rounds += 1
            self.round_time = event.header.time
            self._synched = True
        return event

    def request(self, device: int | str, index: int, payload: bytes, timeout: float | None = None) -> bytes:
        """Send a request and return the payload of its ACK; data arriving meanwhile is kept.

        Raises:
            RequestRefused: RESP_NACK or RESP_ERR.
            PlayerClientError: no reply in time, or the connection broke.
        """
        code = _device_code(device)
        self.send(MsgType.REQ, code, index, payload)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            message = self._next_message(deadline)
            if message.type not in (MsgType.RESP_ACK, MsgType.RESP_NACK, MsgType.RESP_ERR):
                continue
            if (message.device, message.index) != (code, index):
                continue
            if message.type == MsgType.RESP_ACK:
                return message.payload
            kind = "NACK" if message.type == MsgType.RESP_NACK else "ERR"
            raise RequestRefused(f"request to device {code}:{index} answered with RESP_{kind}")

    def read(self, timeout: float | None = None) -> set[tuple[int, int]]:
        """Read up to the end of the next round (its SYNCH); return the devices that got data in it.

        In a PULL mode, call :meth:`request_data` first.

        Raises:
            PlayerClientError: no SYNCH in time, or the connection broke.
        """
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        self._synched = False
        self._updated = set()
        while not self._synched:
            self._next_message(deadline)
        return set(self._updated)

    # -- player device --------------------------------------------------------------------------------------------

    def subscribe(self, device: int | str, index: int = 0, access: str = "r") -> str:
        """Open a device (``r`` read, ``w`` write, ``a`` both); return the access granted.

        Raises:
            RequestRefused: another access was granted (``e``: the device is not there or its module is not
                running).
        """
        code = _device_code(device)
        wanted = Access(access.encode())
        reply = DeviceReply.unpack(self.request(DeviceCode.PLAYER, 0, DeviceRequest(code, index, wanted.value).pack()))
        granted = reply.access.decode("latin-1")
        if granted != access:
            raise RequestRefused(f"device {code}:{index}: asked for access {access!r}, granted {granted!r}")
        return granted

    def unsubscribe(self, device: int | str, index: int = 0) -> None:
        """Close a device."""
        code = _device_code(device)
        self.request(DeviceCode.PLAYER, 0, DeviceRequest(code, index, Access.CLOSE.value).pack())

    def device_list(self) -> list[tuple[int, int]]:
        """The devices the server offers, as (code, index)."""
        reply = DeviceList.unpack(self.request(DeviceCode.PLAYER, 0, DeviceList().pack()[:2]))
        return [(d.code, d.index) for d in reply.devices]

    def driver_info(self, device: int | str, index: int = 0) -> str:
        """The name of the driver behind a device."""
        request = DriverInfo(_device_code(device), index, 0, "")
        return DriverInfo.unpack(self.request(DeviceCode.PLAYER, 0, request.pack())).name

    def set_datamode(self, mode: DataMode | int) -> None:
        """Choose PUSH_ALL, PULL_ALL, PUSH_NEW (the default) or PULL_NEW."""
        self.request(DeviceCode.PLAYER, 0, DataModeRequest(mode=int(mode)).pack())

    def set_frequency(self, hz: int) -> None:
        """Rounds per second in the PUSH modes."""
        self.request(DeviceCode.PLAYER, 0, DataFreqRequest(frequency=hz).pack())

    def request_data(self) -> None:
        """Ask for a round (PULL modes); :meth:`read` then reads it."""
        self.request(DeviceCode.PLAYER, 0, DataRequest().pack())

    def authenticate(self, key: str | bytes) -> None:
        """Send the server's key."""
        raw = key.encode() if isinstance(key, str) else key
        self.request(DeviceCode.PLAYER, 0, AuthRequest(raw).pack())

    # -- position -------------------------------------------------------------------------------------------------

    def set_speed(self, vx: float, va: float, index: int = 0) -> None:
        """Drive at ``vx`` m/s and turn at ``va`` rad/s (position, velocity mode; needs write access)."""
        command = PositionCommand(0, 0, 0, to_mm(vx), 0, to_degrees(va), 1, 0)
        self.send(MsgType.CMD, DeviceCode.POSITION, index, command.pack())

    def goto(self, x: float, y: float, a: float = 0.0, index: int = 0) -> None:
        """Go to (x, y) m in the odometry frame (position, position mode; needs the avoid module)."""
        command = PositionCommand(to_mm(x), to_mm(y), to_degrees(a), 0, 0, 0, 1, 1)
        self.send(MsgType.CMD, DeviceCode.POSITION, index, command.pack())

    def set_speed3d(self, vx: float, va: float, index: int = 0) -> None:
        """Drive at ``vx`` m/s and turn at ``va`` rad/s through position3d (velocity mode)."""
        command = Position3dCommand(xspeed=to_mm(vx), yawspeed=to_arcsec(va))
        self.send(MsgType.CMD, DeviceCode.POSITION3D, index, command.pack())

    def set_odometry(self, x: float, y: float, a: float, index: int = 0) -> None:
        """Declare the odometry pose: (x m, y m, a rad) (whole mm and degrees on the wire)."""
        request = SetOdometry(PositionRequest.SET_ODOM, to_mm(x), to_mm(y), to_degrees(a))
        self.request(DeviceCode.POSITION, index, request.pack())

    def reset_odometry(self, index: int = 0) -> None:
        """Odometry back to (0, 0, 0)."""
        self.request(DeviceCode.POSITION, index, ResetOdometry().pack())

    def set_motor_power(self, on: bool, index: int = 0) -> None:
        """Switch the motors on or off."""
        self.request(DeviceCode.POSITION, index, MotorPower(PositionRequest.MOTOR_POWER, 1 if on else 0).pack())

    def set_position_mode(self, position: bool, device: int | str = "position", index: int = 0) -> None:
        """Position control (goto) or velocity control."""
        request = PositionMode(PositionRequest.POSITION_MODE, 1 if position else 0)
        self.request(device, index, request.pack())

    def geometry(self, device: int | str = "position", index: int = 0) -> Geometry:
        """Where a position, position3d or laser device sits on the robot, and its size."""
        code = _device_code(device)
        if code == DeviceCode.LASER:
            laser = LaserGeometry.unpack(self.request(code, index, b"\x01"))
            return Geometry(
                (from_mm(laser.pose_x), from_mm(laser.pose_y), from_degrees(laser.pose_yaw)),
                (from_mm(laser.width), from_mm(laser.length)),
            )
        geom = PositionGeometry.unpack(self.request(code, index, b"\x01"))
        yaw = geom.pose_yaw - 65536 if geom.pose_yaw >= 32768 else geom.pose_yaw
        return Geometry(
            (from_mm(geom.pose_x), from_mm(geom.pose_y), from_degrees(yaw)),
            (from_mm(geom.width), from_mm(geom.length)),
        )

    def sonar_geometry(self, index: int = 0) -> list[tuple[float, float, float]]:
        """Pose of each sonar on the robot: (x m, y m, heading rad)."""
        geom = SonarGeometry.unpack(self.request(DeviceCode.SONAR, index, b"\x01"))
        return [(from_mm(x), from_mm(y), from_degrees(a)) for x, y, a in geom.poses]

    # -- laser ----------------------------------------------------------------------------------------------------

    def laser_config(self, index: int = 0) -> LaserConfig:
        """The laser's configuration (protocol units: 0.01°, mm)."""
        return LaserConfig.unpack(self.request(DeviceCode.LASER, index, bytes([LaserRequest.GET_CONFIG])))

    def set_laser_config(
        self,
        min_angle: float,
        max_angle: float,
        resolution: float = math.radians(0.5),
        range_res: int = 1,
        intensity: bool = False,
        index: int = 0,
    ) -> LaserConfig:
        """Set the laser's field of view (rad), resolution (rad: 0.25°, 0.5° or 1°) and range unit (mm: 1, 10 or
        100); return the configuration in force."""
        request = LaserConfig(
            LaserRequest.SET_CONFIG,
            round(math.degrees(min_angle) * 100),
            round(math.degrees(max_angle) * 100),
            round(math.degrees(resolution) * 100),
            range_res,
            1 if intensity else 0,
        )
        return LaserConfig.unpack(self.request(DeviceCode.LASER, index, request.pack()))

    # -- data -----------------------------------------------------------------------------------------------------

    def _take_data(self, message: Message) -> None:
        self.data_messages += 1
        key = (message.device, message.index)
        stamp = message.header.timestamp
        try:
            if message.device == DeviceCode.POSITION:
                d = PositionData.unpack(message.payload)
                p = self.position
                p.px, p.py, p.pa = from_mm(d.xpos), from_mm(d.ypos), from_degrees(d.yaw)
                p.vx, p.vy, p.va = from_mm(d.xspeed), from_mm(d.yspeed), from_degrees(d.yawspeed)
                p.stall, p.timestamp, p.count = bool(d.stall), stamp, p.count + 1
            elif message.device == DeviceCode.POSITION3D:
                e = Position3dData.unpack(message.payload)
                q = self.position3d
                q.position = (from_mm(e.xpos), from_mm(e.ypos), from_mm(e.zpos))
                q.angles = (from_arcsec(e.roll), from_arcsec(e.pitch), from_arcsec(e.yaw))
                q.speeds = (from_mm(e.xspeed), from_mm(e.yspeed), from_mm(e.zspeed))
                q.angular_speeds = (from_arcsec(e.rollspeed), from_arcsec(e.pitchspeed), from_arcsec(e.yawspeed))
                q.stall, q.timestamp, q.count = bool(e.stall), stamp, q.count + 1
            elif message.device == DeviceCode.LASER:
                scan = LaserData.unpack(message.payload)
                laser = self.laser
                step = from_centidegrees(scan.resolution)
                laser.min_angle, laser.max_angle = from_centidegrees(scan.min_angle), from_centidegrees(scan.max_angle)
                laser.resolution, laser.range_res = step, scan.range_res
                laser.ranges = [r * scan.range_res / 1000.0 for r in scan.ranges]
                laser.bearings = [laser.min_angle + i * step for i in range(len(scan.ranges))]
                laser.intensity = list(scan.intensity)
                laser.timestamp, laser.count = stamp, laser.count + 1
            elif message.device == DeviceCode.SONAR:
                sonar = SonarData.unpack(message.payload)
                self.sonar.ranges = [from_mm(r) for r in sonar.ranges]
                self.sonar.timestamp, self.sonar.count = stamp, self.sonar.count + 1
            else:
                return
        except RemoteProtocolError as err:
            raise PlayerClientError(f"bad data from device {key}: {err}") from err
        self._updated.add(key)
