"""The Pioneer P2OS/ARCOS protocol as a pure codec (no I/O, no clock, no threads).

- :mod:`.packets`: framing, checksum, client commands (:class:`Command`, :class:`CommandPacket`,
  :func:`encode_command`) and the errors.
- :mod:`.sip`: the robot's packets (:class:`Sip`, :class:`ConfigPacket`, :class:`EncoderPacket`, :class:`IoPacket`,
  :class:`GripperPacket`, :class:`SerauxPacket`, :class:`SyncReply`), decoded and encoded.
- :mod:`.decoder`: :class:`P2osDecoder`, the streaming decoder for either side of the link.
- :mod:`.models`: per-model parameters (:func:`robot_params`) and conversions between robot units and SI.
- :mod:`.odometry`: :class:`OdometryIntegrator`, a continuous pose in SI from successive SIPs.
- :mod:`.client`: :class:`P2osClient`, the client's side of the link (handshake, limits, keepalive, command
  timeout, link timeout, reconnection) as a state machine fed bytes and times; :mod:`.driver` runs it on a port.
  Its parts: :mod:`.handshake` (the handshake as a table), :mod:`.state` (the robot's state from its SIPs, in SI),
  :mod:`.commands` (commands in robot units within the speed limits), :mod:`.events` (events, errors, counters).
- :mod:`.robot`: :class:`.robot.P2osRobot`, a Pioneer serving the protocol (the emulator's model), with
  :mod:`.physics` (its servos, body and sonar) and :mod:`.reports` (its SIP and CONFIGpac); :mod:`.emulate` serves
  it over TCP or a pty.

Example (a client)::

    decoder = P2osDecoder(role="client")
    transport.write(encode_command(Command.SYNC0))
    decoder.receive_data(transport.read(512))
    while (event := decoder.next_event()) is not NEED_DATA:
        ...
"""

from .client import (
    BaudRate,
    ClientEvent,
    Connected,
    ConnectFailed,
    HandshakeStep,
    LinkLost,
    P2osClient,
    P2osConnectError,
    P2osError,
    P2osLinkError,
    P2osState,
    P2osStatistics,
    P2osTimeout,
    Phase,
    Reconnecting,
    handshake_table,
)
from .decoder import NEED_DATA, ConnectionClosed, DecoderStatistics, Event, NeedData, P2osDecoder, Role
from .models import (
    ANGLE_CONV,
    DEFAULT_SUBCLASS,
    ROBOT_PARAMS,
    RobotParams,
    SipReading,
    SonarPose,
    UnknownRobotWarning,
    from_deg,
    from_mm,
    robot_params,
    signed_15bit,
    to_deg,
    to_mm,
)
from .odometry import OdometryIntegrator, OdometryUpdate, heading_delta, unwrap_15bit
from .packets import (
    HEADER,
    MAX_ARGUMENT,
    MAX_BYTE_COUNT,
    MAX_PACKET_SIZE,
    MAX_PAYLOAD_SIZE,
    MAX_STRING_LENGTH,
    MIN_BYTE_COUNT,
    ArgumentKind,
    Command,
    CommandPacket,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    UnknownPacket,
    checksum,
    command_argument_kind,
    encode_command,
    frame,
    pack_byte_pair,
    parse_command,
    unframe,
    unpack_byte_pair,
)
from .sip import (
    ConfigPacket,
    EncoderPacket,
    GripperPacket,
    IoPacket,
    SerauxPacket,
    ServerPacket,
    Sip,
    SonarReading,
    SyncReply,
    parse_server_packet,
)

__all__ = [
    "ANGLE_CONV",
    "DEFAULT_SUBCLASS",
    "HEADER",
    "MAX_ARGUMENT",
    "MAX_BYTE_COUNT",
    "MAX_PACKET_SIZE",
    "MAX_PAYLOAD_SIZE",
    "MAX_STRING_LENGTH",
    "MIN_BYTE_COUNT",
    "NEED_DATA",
    "ROBOT_PARAMS",
    "ArgumentKind",
    "BaudRate",
    "ClientEvent",
    "Command",
    "CommandPacket",
    "ConfigPacket",
    "ConnectFailed",
    "Connected",
    "ConnectionClosed",
    "DecoderStatistics",
    "EncoderPacket",
    "Event",
    "GripperPacket",
    "HandshakeStep",
    "IoPacket",
    "LinkLost",
    "LocalProtocolError",
    "NeedData",
    "OdometryIntegrator",
    "OdometryUpdate",
    "P2osClient",
    "P2osConnectError",
    "P2osDecoder",
    "P2osError",
    "P2osLinkError",
    "P2osState",
    "P2osStatistics",
    "P2osTimeout",
    "Phase",
    "ProtocolError",
    "Reconnecting",
    "RemoteProtocolError",
    "RobotParams",
    "Role",
    "SerauxPacket",
    "ServerPacket",
    "Sip",
    "SipReading",
    "SonarPose",
    "SonarReading",
    "SyncReply",
    "UnknownPacket",
    "UnknownRobotWarning",
    "checksum",
    "command_argument_kind",
    "encode_command",
    "frame",
    "from_deg",
    "from_mm",
    "handshake_table",
    "heading_delta",
    "pack_byte_pair",
    "parse_command",
    "parse_server_packet",
    "robot_params",
    "signed_15bit",
    "to_deg",
    "to_mm",
    "unframe",
    "unpack_byte_pair",
    "unwrap_15bit",
]
