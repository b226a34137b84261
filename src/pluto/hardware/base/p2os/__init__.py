"""The Pioneer P2OS/ARCOS protocol as a pure codec (no I/O, no clock, no threads).

- :mod:`.packets`: framing, checksum, client commands (:class:`Command`, :class:`CommandPacket`,
  :func:`encode_command`) and the errors.
- :mod:`.sip`: the robot's packets (:class:`Sip`, :class:`ConfigPacket`, :class:`EncoderPacket`, :class:`IoPacket`,
  :class:`GripperPacket`, :class:`SerauxPacket`, :class:`SyncReply`), decoded and encoded.
- :mod:`.decoder`: :class:`P2osDecoder`, the streaming decoder for either side of the link.
- :mod:`.models`: per-model parameters (:func:`robot_params`) and conversions between robot units and SI.
- :mod:`.odometry`: :class:`OdometryIntegrator`, a continuous pose in SI from successive SIPs.

Example (a client)::

    decoder = P2osDecoder(role="client")
    transport.write(encode_command(Command.SYNC0))
    decoder.receive_data(transport.read(512))
    while (event := decoder.next_event()) is not NEED_DATA:
        ...
"""

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
    "Command",
    "CommandPacket",
    "ConfigPacket",
    "ConnectionClosed",
    "DecoderStatistics",
    "EncoderPacket",
    "Event",
    "GripperPacket",
    "IoPacket",
    "LocalProtocolError",
    "NeedData",
    "OdometryIntegrator",
    "OdometryUpdate",
    "P2osDecoder",
    "ProtocolError",
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
