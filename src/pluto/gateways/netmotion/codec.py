"""The NetworkMotionServer's text protocol, without I/O: datagrams in, commands out; replies in, datagrams out.

    decoder = CommandDecoder()
    decoder.receive_data(datagram)
    while (command := decoder.next_event()) is not NEED_DATA:
        replies = handle(command)                       # a BadCommand carries the reason it was refused
    transport.sendto(encode(Pong()), address)

Commands (case-sensitive, one per line, a datagram may hold several lines; a line ends with LF, CR LF or the end
of the datagram)::

    PING                    -> PONG
    FK <link>               -> FK <link> ROW <i> : <a> <b> <c> <d>     four lines, one datagram; translation in mm
    RUNMS <file>            -> MOTMANREG <id>, later MOTMANRESP <id> STATUS and MOTMANRESP <id> DEACTIVATE
    IKP <link> <X> <Y> <Z>  -> the same as RUNMS; X, Y, Z in mm in the base frame
    STOP <id>               -> STOPPED <id> (and MOTMANRESP <id> DEACTIVATE to the client that started it)
    LIST                    -> LIST <n>, then n lines MOTION <id> <SEQUENCE|POSTURE> <what>
    JOINTS                  -> JOINTS <v0> ... <vn-1>     rad, mm for prismatic joints (the gripper)
    anything else           -> ERR <reason>

Numbers in replies are C's ``%.6E`` (``1.000000E+00``, ``-4.371139E-08``), as in the published transcript
(docs/protocols/netmotion.md). Every reply is one datagram ending with LF.
"""

# Strategy: UDP keeps message boundaries, so a datagram is always complete: the decoder holds no bytes between
# datagrams, only the queue of commands decoded from the last ones. What a peer sends is never trusted: an
# oversized datagram is dropped whole and counted (no reply: replying to floods of junk would amplify them), a
# line that is not printable ASCII, too long, or not a known command becomes a BadCommand event whose reason is
# safe to echo (the offending text is cut and its odd characters replaced), and numbers are checked for form and
# range before anything is done with them. Units: the wire speaks mm, the events carry m (SI inside).

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pluto.codec import NEED_DATA, NeedData
from pluto.errors import LocalProtocolError

__all__ = [
    "MAX_COMMANDS_PER_DATAGRAM",
    "MAX_DATAGRAM",
    "MAX_LINE",
    "NEED_DATA",
    "BadCommand",
    "Command",
    "CommandDecoder",
    "DecoderStatistics",
    "ErrorReply",
    "ForwardKinematics",
    "ForwardKinematicsReply",
    "GetJoints",
    "JointValues",
    "ListMotions",
    "MotionList",
    "MotionRegistered",
    "MotionResponse",
    "NeedData",
    "Ping",
    "PointIK",
    "Pong",
    "Reply",
    "RunMotion",
    "StopMotion",
    "Stopped",
    "encode",
    "format_number",
]

MAX_DATAGRAM = 512
"""Largest datagram accepted, bytes; larger ones are dropped whole."""
MAX_LINE = 256
"""Longest command line, bytes."""
MAX_COMMANDS_PER_DATAGRAM = 8
"""Most commands taken from one datagram; the rest are refused with one BadCommand."""
MAX_COORDINATE_MM = 100_000.0
"""Largest IKP coordinate accepted, mm."""
MM = 1e-3


# -- commands (what clients send) -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ping:
    """``PING``: is the server alive?"""


@dataclass(frozen=True)
class ForwardKinematics:
    """``FK <link>``: the pose of a link in the base frame."""

    link: int


@dataclass(frozen=True)
class RunMotion:
    """``RUNMS <file>``: run a motion sequence (or posture) file of the motion directory."""

    filename: str


@dataclass(frozen=True)
class PointIK:
    """``IKP <link> <X> <Y> <Z>``: move a link's origin to a point; ``target`` in m (the wire's mm converted)."""

    link: int
    target: tuple[float, float, float]


@dataclass(frozen=True)
class StopMotion:
    """``STOP <id>``: stop a running motion."""

    id: int


@dataclass(frozen=True)
class ListMotions:
    """``LIST``: the running motions."""


@dataclass(frozen=True)
class GetJoints:
    """``JOINTS``: the current joint values."""


@dataclass(frozen=True)
class BadCommand:
    """A line that is not a valid command; ``reason`` is safe to send back."""

    reason: str


Command = Ping | ForwardKinematics | RunMotion | PointIK | StopMotion | ListMotions | GetJoints | BadCommand
"""What :meth:`CommandDecoder.next_event` returns besides NEED_DATA."""


# -- replies (what the server sends) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Pong:
    """``PONG``."""


@dataclass(frozen=True)
class ForwardKinematicsReply:
    """The four ``FK <link> ROW <i> : ...`` lines; ``matrix`` is 4x4 row-major with the translation in m."""

    link: int
    matrix: tuple[tuple[float, float, float, float], ...]

    def __post_init__(self) -> None:
        if len(self.matrix) != 4 or any(len(row) != 4 for row in self.matrix):
            raise LocalProtocolError("an FK reply needs a 4x4 matrix")


@dataclass(frozen=True)
class MotionRegistered:
    """``MOTMANREG <id>``: the id the command's motion got."""

    id: int


@dataclass(frozen=True)
class MotionResponse:
    """``MOTMANRESP <id> STATUS`` or ``MOTMANRESP <id> DEACTIVATE``."""

    id: int
    kind: Literal["STATUS", "DEACTIVATE"]


@dataclass(frozen=True)
class Stopped:
    """``STOPPED <id>``: the motion was stopped."""

    id: int


@dataclass(frozen=True)
class MotionList:
    """``LIST <n>`` and a ``MOTION <id> <description>`` line per running motion."""

    motions: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class JointValues:
    """``JOINTS <v0> ...``: ``values`` in rad or m; ``prismatic`` says which are lengths (sent in mm)."""

    values: tuple[float, ...]
    prismatic: tuple[bool, ...]

    def __post_init__(self) -> None:
        if len(self.values) != len(self.prismatic):
            raise LocalProtocolError("JointValues needs one prismatic flag per value")


@dataclass(frozen=True)
class ErrorReply:
    """``ERR <reason>``."""

    reason: str


Reply = (
    Pong | ForwardKinematicsReply | MotionRegistered | MotionResponse | Stopped | MotionList | JointValues | ErrorReply
)


def format_number(value: float) -> str:
    """A number as C's ``%.6E`` prints it (``1.000000E+00``; ``NAN``/``INF`` for the odd ones)."""
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INF" if value > 0 else "-INF"
    return f"{value:.6E}"


def _text(words: str) -> str:
    """One line of printable ASCII, at most 200 characters (for reasons and descriptions)."""
    clean = "".join(c if " " <= c <= "~" else "?" for c in words.replace("\n", " "))
    return clean[:197] + "..." if len(clean) > 200 else clean


def encode(reply: Reply) -> bytes:
    """The datagram of a reply.

    Raises:
        LocalProtocolError: not a reply, or an id that is negative.
    """
    match reply:
        case Pong():
            lines = ["PONG"]
        case ForwardKinematicsReply(link=link, matrix=matrix):
            lines = []
            for i, row in enumerate(matrix):
                values = list(row) if i == 3 else [row[0], row[1], row[2], row[3] / MM]
                lines.append(f"FK {link} ROW {i} : " + " ".join(format_number(v) for v in values))
        case MotionRegistered(id=motion_id):
            lines = [f"MOTMANREG {_id(motion_id)}"]
        case MotionResponse(id=motion_id, kind=kind):
            if kind not in ("STATUS", "DEACTIVATE"):
                raise LocalProtocolError(f"MOTMANRESP is STATUS or DEACTIVATE, not {kind!r}")
            lines = [f"MOTMANRESP {_id(motion_id)} {kind}"]
        case Stopped(id=motion_id):
            lines = [f"STOPPED {_id(motion_id)}"]
        case MotionList(motions=motions):
            lines = [f"LIST {len(motions)}"] + [f"MOTION {_id(i)} {_text(what)}" for i, what in motions]
        case JointValues(values=values, prismatic=prismatic):
            shown = [v / MM if p else v for v, p in zip(values, prismatic, strict=True)]
            lines = ["JOINTS " + " ".join(format_number(v) for v in shown)]
        case ErrorReply(reason=reason):
            lines = [f"ERR {_text(reason)}"]
        case _:
            raise LocalProtocolError(f"not a NetworkMotionServer reply: {reply!r}")
    return ("\n".join(lines) + "\n").encode("ascii")


def _id(value: int) -> int:
    if value < 0:
        raise LocalProtocolError(f"motion ids are >= 0, not {value}")
    return value


# -- decoding ---------------------------------------------------------------------------------------------------

_INT = re.compile(r"^[0-9]{1,9}$")
_FLOAT = re.compile(r"^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,3})?$")


@dataclass(frozen=True)
class DecoderStatistics:
    """What the decoder has seen.

    Attributes:
        datagrams: datagrams received (oversized ones included).
        oversized: datagrams dropped for being larger than the limit.
        commands: valid commands decoded.
        bad: lines refused (BadCommand events).
    """

    datagrams: int = 0
    oversized: int = 0
    commands: int = 0
    bad: int = 0


class CommandDecoder:
    """Decodes the commands of datagrams (sans-I/O).

    Args:
        max_datagram: larger datagrams are dropped whole, bytes.
    """

    def __init__(self, max_datagram: int = MAX_DATAGRAM) -> None:
        self.max_datagram = max_datagram
        self._events: deque[Command] = deque()
        self._datagrams = self._oversized = self._commands = self._bad = 0

    def statistics(self) -> DecoderStatistics:
        """A snapshot of the counters."""
        return DecoderStatistics(self._datagrams, self._oversized, self._commands, self._bad)

    def receive_data(self, datagram: bytes) -> None:
        """Take one whole datagram; its commands wait for :meth:`next_event`. An oversized one is dropped."""
        self._datagrams += 1
        if len(datagram) > self.max_datagram:
            self._oversized += 1
            return
        lines = [line.removesuffix(b"\r") for line in datagram.split(b"\n")]
        lines = [line for line in lines if line.strip()]
        for n, line in enumerate(lines):
            if n == MAX_COMMANDS_PER_DATAGRAM:
                self._push(BadCommand(f"at most {MAX_COMMANDS_PER_DATAGRAM} commands per datagram; the rest ignored"))
                break
            self._push(self._decode_line(line))

    def _push(self, event: Command) -> None:
        if isinstance(event, BadCommand):
            self._bad += 1
        else:
            self._commands += 1
        self._events.append(event)

    def next_event(self) -> Command | NeedData:
        """The next command received, or NEED_DATA."""
        return self._events.popleft() if self._events else NEED_DATA

    def _decode_line(self, raw: bytes) -> Command:
        refused = _refused_line(raw)
        if refused is not None:
            return refused
        words = raw.decode("ascii").split()
        parse = _PARSERS.get(words[0])
        if parse is None:
            return BadCommand(f"unknown command {_text(words[0][:32])!r} (PING, FK, RUNMS, IKP, STOP, LIST, JOINTS)")
        return parse(words[1:])


def _refused_line(raw: bytes) -> BadCommand | None:
    """Why a line is refused before its words are read (too long, or not printable ASCII), or None."""
    if len(raw) > MAX_LINE:
        return BadCommand(f"command longer than {MAX_LINE} bytes")
    if any((b < 0x20 and b != 0x09) or b > 0x7E for b in raw):
        return BadCommand("not a text command (printable ASCII only)")
    return None


def _bare(name: str, command: Callable[[], Command]) -> Callable[[Sequence[str]], Command]:
    """The parser of a command that takes no argument."""

    def parse(args: Sequence[str]) -> Command:
        return command() if not args else BadCommand(f"{name} takes no argument")

    return parse


def _numbered(usage: str, command: Callable[[int], Command]) -> Callable[[Sequence[str]], Command]:
    """The parser of a command that takes one whole number (a link, a motion id)."""

    def parse(args: Sequence[str]) -> Command:
        if len(args) != 1 or not _INT.match(args[0]):
            return BadCommand(usage)
        return command(int(args[0]))

    return parse


def _run_motion(args: Sequence[str]) -> Command:
    if len(args) != 1:
        return BadCommand("usage: RUNMS <motion file>")
    return RunMotion(args[0])


def _point_ik(args: Sequence[str]) -> Command:
    usage = "usage: IKP <link number> <X> <Y> <Z> (mm)"
    if len(args) != 4 or not _INT.match(args[0]) or not all(_FLOAT.match(a) for a in args[1:]):
        return BadCommand(usage)
    coordinates = [float(a) for a in args[1:]]
    if not all(math.isfinite(c) and abs(c) <= MAX_COORDINATE_MM for c in coordinates):
        return BadCommand(f"IKP coordinates must be between -{MAX_COORDINATE_MM:g} and {MAX_COORDINATE_MM:g} mm")
    x, y, z = (c * MM for c in coordinates)
    return PointIK(int(args[0]), (x, y, z))


_PARSERS: dict[str, Callable[[Sequence[str]], Command]] = {
    "PING": _bare("PING", Ping),
    "LIST": _bare("LIST", ListMotions),
    "JOINTS": _bare("JOINTS", GetJoints),
    "FK": _numbered("usage: FK <link number>", ForwardKinematics),
    "STOP": _numbered("usage: STOP <motion id>", StopMotion),
    "RUNMS": _run_motion,
    "IKP": _point_ik,
}
"""The parser of each command's arguments, by its name (case-sensitive)."""
