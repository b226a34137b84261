"""One client of the Player server, without I/O: what it opened, how it wants its data, and the answers it gets.

    session = ClientSession(DEVICES, port=6665)
    for output in session.handle(message, now, available, samples):
        ...   # Send(bytes) to write, Configure/Command for the backend, Opened to track writers, Close to hang up
    round_bytes = session.tick(now, samples)         # a round of data and its SYNCH when one is due (PUSH modes)
    reply_bytes = session.reply(configure.header, ack=True, payload=..., now=now)   # once the backend answered

The session answers everything the player device (code 1) is asked itself; a configuration request or a command to
a device is handed to the backend as a :class:`Configure` or :class:`Command`.
"""

# Strategy: docs/protocols/player.md. A reply echoes the request's device and index and has
# exactly its struct's size. A REQ to a device the client has not opened gets RESP_ERR (so does a REQ to a device
# that is not served: it cannot have been opened); a REQ that does not parse (unknown subtype, wrong size) gets
# NACK; a CMD from a client without write access, or that does not parse, is ignored and counted (commands are
# never answered); zero-length messages and message types a client does not send are ignored and counted. With an
# AUTH key configured, a client gets nothing (no data, no SYNCH) until it has sent the right AUTH, which is ACKed;
# anything else from it closes the connection without a reply, as the 1.5 server does (ClientData::HandleRequests
# returns -1 and ClientManager::Write skips clients whose auth is pending); a wrong key is reported as such so the
# server can slow down guessing. Once authenticated (or with no key set), an AUTH request gets NACK and changes
# nothing, as the 1.5 server answers one that is not pending ("unnecessary authentication request"). A DEVLIST
# request is answered whatever follows its subtype (structs.parse_player_request). An access letter other than r,
# w, a, c changes nothing: the reply carries the access the client holds, as in the 1.5 server's UpdateRequested,
# which keeps a record of every served device a client asked for: ``c`` once it closed the device (until it opens
# it again), else ``e`` when it has not opened it. Rounds
# follow the clock the caller passes in (the module's, simulated or
# not): a round is due every 1/frequency s; a late tick sends one round and the next ticks catch up one round per
# tick, so a slow spell delays rounds but loses none, unless it lasts over 5 s (then the schedule restarts and the
# rounds given up are counted: a long backlog of stale rounds helps nobody). A pushed round carries the time it was
# due, so a client sees the rounds exactly 1/frequency apart. The frequency is capped at the rate of the ticks. The
# *_NEW modes skip a device's data when its timestamp is the one last sent (as the 1.5 server) and its payload is
# too: a payload rebuilt for the same stamp (after SET_ODOM, or a new laser configuration) is new data.

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pluto.errors import RemoteProtocolError
from pluto.gateways.player.devices import DeviceKey, DeviceSpec
from pluto.gateways.player.protocol import (
    Access,
    DataMode,
    DeviceCode,
    Header,
    Message,
    MsgType,
    encode_message,
)
from pluto.gateways.player.structs import (
    AuthRequest,
    CommandStruct,
    ConfigStruct,
    DataFreqRequest,
    DataModeRequest,
    DataRequest,
    DeviceAddress,
    DeviceList,
    DeviceReply,
    DeviceRequest,
    DriverInfo,
    NameService,
    parse_command,
    parse_config,
    parse_player_request,
)

__all__ = [
    "DEFAULT_FREQUENCY",
    "ClientSession",
    "Close",
    "Command",
    "Configure",
    "Opened",
    "Output",
    "Sample",
    "Send",
    "SessionStatistics",
]

DEFAULT_FREQUENCY: Final = 10.0
"""Rounds per second in the PUSH modes until DATAFREQ changes it, Hz."""
_CATCH_UP_LIMIT = 5.0  # s behind schedule after which rounds restart from now rather than catch up


@dataclass(frozen=True, slots=True)
class Sample:
    """The newest data of a device: when it was produced (s, the module clock) and its payload (a data struct)."""

    timestamp: float
    payload: bytes


@dataclass(frozen=True, slots=True)
class Send:
    """Bytes to write to the client."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Configure:
    """A configuration request for the backend; answer it with :meth:`ClientSession.reply`."""

    device: DeviceKey
    request: ConfigStruct
    header: Header


@dataclass(frozen=True, slots=True)
class Command:
    """A command from a client with write access to ``device``."""

    device: DeviceKey
    command: CommandStruct


@dataclass(frozen=True, slots=True)
class Opened:
    """The client's access to ``device`` changed; None once it is closed."""

    device: DeviceKey
    access: Access | None


@dataclass(frozen=True, slots=True)
class Close:
    """Hang up on the client; ``auth_failed`` when it sent a wrong AUTH key."""

    reason: str
    auth_failed: bool = False


Output = Send | Configure | Command | Opened | Close


@dataclass(frozen=True, slots=True)
class SessionStatistics:
    """What a session has seen.

    Attributes:
        requests: REQ messages handled.  commands: commands passed on.  rounds: rounds sent.
        skipped: rounds given up because the ticks fell more than 5 s behind the schedule.
        nacks, errors: RESP_NACK and RESP_ERR replies sent.
        ignored: messages ignored (zero-length, of a type a client does not send, commands without write access
            or that do not parse).
        last_problem: the reason of the last NACK, RESP_ERR or ignored message.
    """

    requests: int
    commands: int
    rounds: int
    skipped: int
    nacks: int
    errors: int
    ignored: int
    last_problem: str


class ClientSession:
    """The protocol state of one client.

    Args:
        devices: the devices the server offers.
        port: the server's TCP port (device lists and the name service report it).
        key: the AUTH key clients must send first; empty for none.
        robot: the robot's name (for NAMESERVICE).
        max_frequency: the largest data frequency honoured, Hz (the rate of the caller's ticks).
    """

    def __init__(
        self,
        devices: Sequence[DeviceSpec],
        *,
        port: int,
        key: bytes = b"",
        robot: str = "",
        max_frequency: float = 50.0,
    ) -> None:
        self.devices: dict[DeviceKey, DeviceSpec] = {d.key: d for d in devices}
        self.port = port
        self.key = key
        self.robot = robot
        self.max_frequency = max_frequency
        self.authenticated = not key
        self.opened: dict[DeviceKey, Access] = {}
        self._closed: set[DeviceKey] = set()  # served devices this client closed last (they read back as 'c')
        self.mode = DataMode.PUSH_NEW
        self.frequency = min(DEFAULT_FREQUENCY, max_frequency)
        self._next_round: float | None = None
        self._sent: dict[DeviceKey, Sample] = {}
        self._requests = self._commands = self._rounds = self._skipped = 0
        self._nacks = self._errors = self._ignored = 0
        self._last_problem = ""

    def statistics(self) -> SessionStatistics:
        """A snapshot of the counters."""
        return SessionStatistics(
            self._requests,
            self._commands,
            self._rounds,
            self._skipped,
            self._nacks,
            self._errors,
            self._ignored,
            self._last_problem,
        )

    def writes(self, device: DeviceKey) -> bool:
        """The client holds write access to ``device``."""
        access = self.opened.get(device)
        return access is not None and access.writes

    # -- messages -------------------------------------------------------------------------------------------------

    def handle(
        self,
        message: Message,
        now: float,
        available: Callable[[DeviceSpec], bool],
        samples: Mapping[DeviceKey, Sample],
    ) -> list[Output]:
        """React to one message from the client.

        Args:
            message: the message.
            now: the server's time, s.
            available: whether a device's backend is running (a device opens only then).
            samples: the newest data of each device (for a DATA request).

        Returns:
            What to do, in order.
        """
        header = message.header
        if header.size == 0:
            return self._ignore("a zero-length message")
        if not self.authenticated:
            return self._authenticate(message, now)
        if header.type == MsgType.CMD:
            return self._command(message)
        if header.type != MsgType.REQ:
            return self._ignore(f"a message of type {header.type}, which clients do not send")
        self._requests += 1
        if header.device == DeviceCode.PLAYER:
            return self._player_request(message, now, available, samples)
        key = (header.device, header.index)
        if key not in self.opened:
            return [Send(self._problem(header, MsgType.RESP_ERR, f"device {key} is not open", now))]
        try:
            request = parse_config(header.device, message.payload)
        except RemoteProtocolError as err:
            return [Send(self._problem(header, MsgType.RESP_NACK, str(err), now))]
        return [Configure(key, request, header)]

    def reply(self, header: Header, ack: bool, payload: bytes = b"", now: float = 0.0, reason: str = "") -> bytes:
        """The reply to a request (a :class:`Configure` once the backend has answered).

        Args:
            header: the request's header.
            ack: RESP_ACK with ``payload``, else RESP_NACK without one.
            payload: the reply struct's bytes.
            now: the server's time, s.
            reason: why it is a NACK (for the statistics).
        """
        if not ack:
            return self._problem(header, MsgType.RESP_NACK, reason or "refused by the backend", now)
        return encode_message(MsgType.RESP_ACK, header.device, header.index, payload, time=now)

    def closed(self) -> list[Output]:
        """The connection is gone: every device it had open closes."""
        outputs: list[Output] = [Opened(key, None) for key in self.opened]
        self.opened.clear()
        return outputs

    def _ignore(self, what: str) -> list[Output]:
        self._ignored += 1
        self._last_problem = f"ignored {what}"
        return []

    def _problem(self, header: Header, mtype: MsgType, reason: str, now: float) -> bytes:
        if mtype == MsgType.RESP_ERR:
            self._errors += 1
        else:
            self._nacks += 1
        self._last_problem = reason
        return encode_message(mtype, header.device, header.index, b"", time=now)

    def _ack(self, header: Header, payload: bytes, now: float) -> Send:
        return Send(encode_message(MsgType.RESP_ACK, header.device, header.index, payload, time=now))

    def _authenticate(self, message: Message, now: float) -> list[Output]:
        header = message.header
        if header.type == MsgType.REQ and header.device == DeviceCode.PLAYER:
            try:
                request = parse_player_request(message.payload)
            except RemoteProtocolError:
                request = None
            if isinstance(request, AuthRequest):
                if request.key != self.key:
                    self._last_problem = "wrong AUTH key"
                    return [Close("wrong AUTH key", auth_failed=True)]
                self.authenticated = True
                self._requests += 1
                return [self._ack(header, b"", now)]
        self._last_problem = "a message before AUTH"
        return [Close(f"not authenticated: a message of type {header.type} to device {header.device} before AUTH")]

    def _command(self, message: Message) -> list[Output]:
        header = message.header
        key = (header.device, header.index)
        if not self.writes(key):
            return self._ignore(f"a command to {key} without write access")
        try:
            command = parse_command(header.device, message.payload)
        except RemoteProtocolError as err:
            return self._ignore(f"a command to {key}: {err}")
        self._commands += 1
        return [Command(key, command)]

    # -- the player device ----------------------------------------------------------------------------------------

    def _player_request(
        self,
        message: Message,
        now: float,
        available: Callable[[DeviceSpec], bool],
        samples: Mapping[DeviceKey, Sample],
    ) -> list[Output]:
        header = message.header
        try:
            request = parse_player_request(message.payload)
        except RemoteProtocolError as err:
            return [Send(self._problem(header, MsgType.RESP_NACK, str(err), now))]
        if isinstance(request, DeviceList):
            addresses = tuple(DeviceAddress(code, index, self.port) for code, index in self.devices)
            return [self._ack(header, DeviceList(addresses).pack(), now)]
        if isinstance(request, DriverInfo):
            spec = self.devices.get((request.code, request.index))
            if spec is None:
                reason = f"no device {request.code}:{request.index}"
                return [Send(self._problem(header, MsgType.RESP_NACK, reason, now))]
            info = DriverInfo(request.code, request.index, self.port, spec.driver)
            return [self._ack(header, info.pack(), now)]
        if isinstance(request, DeviceRequest):
            return self._open(header, request, now, available)
        if isinstance(request, DataRequest):
            if self.mode.pushed:
                return [Send(self._problem(header, MsgType.RESP_NACK, "DATA request in a PUSH mode", now))]
            return [self._ack(header, b"", now), Send(self.round(now, samples))]
        if isinstance(request, DataModeRequest):
            try:
                mode = DataMode(request.mode)
            except ValueError:
                return [Send(self._problem(header, MsgType.RESP_NACK, f"unknown data mode {request.mode}", now))]
            if mode.pushed and not self.mode.pushed:
                self._next_round = None
            self.mode = mode
            return [self._ack(header, b"", now)]
        if isinstance(request, DataFreqRequest):
            if request.frequency == 0:
                return [Send(self._problem(header, MsgType.RESP_NACK, "a data frequency of 0 Hz", now))]
            self.frequency = min(float(request.frequency), self.max_frequency)
            return [self._ack(header, b"", now)]
        if isinstance(request, AuthRequest):
            why = "already authenticated" if self.key else "no key is set"
            reason = f"an AUTH request when none is pending ({why})"
            return [Send(self._problem(header, MsgType.RESP_NACK, reason, now))]
        port = self.port if request.name in ("", self.robot) else 0
        return [self._ack(header, NameService(request.name, port).pack(), now)]

    def _open(
        self, header: Header, request: DeviceRequest, now: float, available: Callable[[DeviceSpec], bool]
    ) -> list[Output]:
        key = (request.code, request.index)
        spec = self.devices.get(key)
        name = spec.driver if spec is not None else ""
        try:
            asked = Access(request.access)
        except ValueError:
            asked = Access.ERROR
        if asked == Access.ERROR:
            # Not a mode a client may ask for: nothing changes, and the reply says what the client holds.
            held = self.opened.get(key, Access.CLOSE if key in self._closed else Access.ERROR)
            self._last_problem = (
                f"access {request.access!r} to device {key} is not r, w, a or c; it stays {held.value.decode()!r}"
            )
            reply = DeviceReply(request.code, request.index, held.value, name)
            return [self._ack(header, reply.pack(), now)]
        if asked == Access.CLOSE:
            granted = Access.CLOSE
        elif spec is None or not available(spec):
            granted = Access.ERROR
            self._last_problem = f"device {key} could not be opened"
        else:
            granted = asked
        outputs: list[Output] = []
        if granted == Access.CLOSE and spec is not None:
            self._closed.add(key)  # at most one per served device
        else:
            self._closed.discard(key)
        if granted in (Access.CLOSE, Access.ERROR):
            if self.opened.pop(key, None) is not None:
                outputs.append(Opened(key, None))
        elif self.opened.get(key) != granted:
            self.opened[key] = granted
            self._sent.pop(key, None)
            outputs.append(Opened(key, granted))
        reply = DeviceReply(request.code, request.index, granted.value, name)
        return [self._ack(header, reply.pack(), now), *outputs]

    # -- data -----------------------------------------------------------------------------------------------------

    def round(self, now: float, samples: Mapping[DeviceKey, Sample]) -> bytes:
        """One round: the data of every device the client reads (in the *_NEW modes only what is new since it was
        last sent to this client: a new timestamp, or a payload rebuilt for the same one, as after SET_ODOM or a
        laser configuration), then a SYNCH.

        Args:
            now: the server's time, s.
            samples: the newest data of each device.
        """
        parts: list[bytes] = []
        only_new = self.mode.only_new
        for key, access in self.opened.items():
            sample = samples.get(key)
            if sample is None or not access.reads:
                continue
            sent = self._sent.get(key)
            if only_new and sent is not None and sent.timestamp == sample.timestamp and sent.payload == sample.payload:
                continue
            self._sent[key] = sample
            parts.append(
                encode_message(MsgType.DATA, key[0], key[1], sample.payload, time=now, timestamp=sample.timestamp)
            )
        parts.append(encode_message(MsgType.SYNCH, DeviceCode.PLAYER, 0, b"", time=now))
        self._rounds += 1
        return b"".join(parts)

    def restart(self) -> None:
        """The clock went back (a new simulation run, a replay started again): the next tick sends a round at once,
        and every device's data counts as new (a stamp of the new run may equal one sent in the old run)."""
        self._next_round = None
        self._sent.clear()

    def tick(self, now: float, samples: Mapping[DeviceKey, Sample], offset: float = 0.0) -> bytes | None:
        """The round due at ``now`` in the PUSH modes, or None (nothing due, a PULL mode, or not authenticated).

        The round's messages carry the time it was due (at most a tick before ``now``, or more while catching up),
        plus ``offset``.

        Args:
            now: the server's time, s (monotonic but for a restarted simulation): the schedule follows it.
            samples: the newest data of each device.
            offset: the clock the data is stamped with, less ``now``, s: header times are on the data's clock.
        """
        if not self.mode.pushed or not self.authenticated:
            return None
        period = 1.0 / self.frequency
        due = self._next_round
        if due is None or now < due - 2.0 * period:  # the first tick, or the clock went back
            due = now
        if now + 1e-9 < due:
            self._next_round = due
            return None
        this_round = due
        due += period
        if due < now - _CATCH_UP_LIMIT:
            self._skipped += int((now - due) / period) + 1
            due = now + period
        self._next_round = due
        return self.round(this_round + offset, samples)
