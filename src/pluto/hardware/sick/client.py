"""The host side of an LMS 200/291, sans-I/O: the start-up sequence, the stream of scans, faults and recovery.

    client = LmsClient(LmsSettings(baud=38400, resolution=50, units="cm", range_m=80))
    client.start(now)
    # the shell: port.write(client.data_to_send()); client.receive_data(port.read(...), now); client.step(now)
    while (event := client.next_event()) is not NEED_DATA:
        ...                      # BaudRate: set the port's rate; Scan: a scan arrived; Fault; LinkLost; Ready

The client never touches a port or a clock: the shell passes ``now`` (s, monotonic) with each call.
"""

# Strategy: the sequence is that of the original's sick server and of the open LMS drivers (docs/protocols/sick-lms.md).
# The scanner starts at 9600 baud (unless told otherwise in its flash), so the client asks for the status at 9600 and,
# with no answer within probe_timeout, at 19200, 38400 and 500 k in turn (a scanner left streaming by a previous run
# answers at its streaming rate). Then: stop any continuous output (0x20 0x25), set the variant (0x3B: 180° at the
# chosen resolution), read the configuration (0x74) and, only if its units or measuring mode differ, enter the
# installation mode (0x20 0x00 "SICK_LMS") and write it (0x77): the block lives in EEPROM, so an unchanged one is not
# rewritten at every start. Then switch the baud rate (0x20 0x40/0x48/...; the reply still comes at the old rate, the
# port is switched after it), wait BAUD_SETTLE s (a real scanner misses a telegram sent straight after its rate changed;
# sicktoolbox waits as long) and start continuous output (0x20 0x24). A configuration write gets config_timeout
# (15 s, as in sicktoolbox: the scanner writes its EEPROM before it answers). Each request is retried (retries) when
# its reply does not come within its timeout; a sequence that fails is started again from the probe after a pause.
# While streaming, a scan whose status byte reports a fatal error, or link_timeout s without a scan,
# is a fault: the client reports it (the module publishes -1 ranges), sends a reset (0x10) and starts the sequence
# again; a scanner that reboots (about 20 s on a real one) answers the probe once it is back. A port that fails is
# the shell's to reopen (LinkLost, then start again). Stopping ends the continuous output and puts the scanner back
# at the rate it starts at (9600 baud), so that the next host, which probes 9600 first, finds it at once.
# Timing of a scan: arrival is the time its last byte was read; the telegram took len·10/baud s on the line (8N1)
# before that, and the sweep it carries ended just before the transmission began. The mirror turns at 75 Hz: the
# 180° half of a turn takes 6.7 ms, and a 0.5° scan interlaces two turns (0.25°: four), so the sweep lasts
# (turns - 1) / 75 + 1 / 150 s; the centre of the scan is arrival - transmission - sweep / 2.

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Final, Literal

import numpy as np
from numpy.typing import NDArray

from pluto.codec import NEED_DATA, NeedData
from pluto.errors import PlutoError
from pluto.runtime.params import Params
from pluto.runtime.ranges import Timeout, between

from .telegram import (
    BAUD_CODES,
    RANGE_MODES,
    Ack,
    Command,
    ConfigReply,
    LmsConfig,
    LmsDecoder,
    MeasuredValues,
    Mode,
    ModeReply,
    Nak,
    RangeMode,
    Request,
    StatusReply,
    VariantReply,
    encode,
    mode_request,
    status_request,
    variant_request,
)
from .telegram import config_read_request as _config_read
from .telegram import config_request as _config_write

__all__ = [
    "BAUD_RATES",
    "BAUD_SETTLE",
    "MIRROR_HZ",
    "BaudRate",
    "ClientEvent",
    "Fault",
    "LinkLost",
    "LmsClient",
    "LmsError",
    "LmsSettings",
    "Ready",
    "Scan",
    "scan_timing",
]

BAUD_RATES: Final = (9600, 19200, 38400, 500000)
"""The rates an LMS speaks, in the order they are probed."""
MIRROR_HZ: Final = 75.0
"""Turns of the LMS's mirror per second."""
BAUD_SETTLE: Final = 0.25
"""s between a baud-rate change and the next telegram (a real scanner needs it; sicktoolbox waits as long)."""


class LmsError(PlutoError):
    """The scanner cannot be set up as asked (a setting it refused) or a setting is impossible."""


class LmsSettings(Params, kw_only=True, forbid_unknown_fields=True):
    """What the client sets the scanner to.

    Attributes:
        baud: streaming rate (9600, 19200, 38400 or 500000).  resolution: 25, 50 or 100 (1/100 °).
        angle: 180 or 100 °.  units, range_m: ("cm", 80) or ("mm", 8 | 16 | 32).
        probe_timeout: s to wait for the status at each rate.  reply_timeout: s to wait for a reply.
        config_timeout: s to wait for the reply to a configuration write (a real scanner takes seconds).
        link_timeout: s without a scan while streaming before the scanner is taken as failed.
        retries: tries of each request.  pause: s between two start-up sequences that failed.

    Raises:
        LmsError: a setting the LMS does not have.
        ValueError: a time or the retries out of its range.
    """

    baud: int = 38400
    resolution: int = 50
    angle: int = 180
    units: str = "cm"
    range_m: int = 80
    probe_timeout: Timeout = 0.3
    reply_timeout: Timeout = 1.0
    config_timeout: Timeout = 15.0
    link_timeout: Timeout = 1.0
    retries: Annotated[int, between(1, 100)] = 3
    pause: Timeout = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.baud not in BAUD_CODES:
            raise LmsError(f"baud must be one of {', '.join(map(str, BAUD_CODES))}, not {self.baud}")
        if self.angle not in (100, 180) or self.resolution not in (25, 50, 100):
            raise LmsError(f"no LMS variant of {self.angle}° at {self.resolution / 100:g}°")
        if self.resolution == 25 and self.angle != 100:
            raise LmsError("0.25° resolution is only over 100°")
        if (self.units, self.range_m) not in RANGE_MODES:
            raise LmsError(
                f"units and range must be cm with 80 m, or mm with 8, 16 or 32 m; not {self.units} {self.range_m} m"
            )

    @property
    def points(self) -> int:
        """Points per scan."""
        return self.angle * 100 // self.resolution + 1

    @property
    def range_mode(self) -> RangeMode:
        return RANGE_MODES[(self.units, self.range_m)]

    def angles(self) -> NDArray[np.float64]:
        """Bearing of each point, rad, from -angle/2 (right) to +angle/2 (left)."""
        half = math.radians(self.angle) / 2
        return np.linspace(-half, half, self.points)


def scan_timing(points: int, resolution: int, angle: int, baud: int) -> tuple[float, float]:
    """(transmission, sweep) of one scan, s: the time its telegram takes on the line (8N1) and the sweep's length."""
    telegram = 4 + 1 + 2 + 2 * points + 1 + 2
    turns = 100 // resolution if resolution < 100 else 1
    sweep = (turns - 1) / MIRROR_HZ + (angle / 360.0) / MIRROR_HZ
    return telegram * 10.0 / baud, sweep


# ------------------------------------------------------------------------------------------------ events


@dataclass(frozen=True)
class BaudRate:
    """Set the port's rate to ``baud`` now (the following bytes are at that rate)."""

    baud: int


@dataclass(frozen=True)
class Ready:
    """The scanner streams as set up; ``version`` is its software version."""

    version: str


@dataclass(frozen=True)
class Scan:
    """A scan: ``ranges`` in m (index 0 rightmost), ``arrival`` of its last byte and ``centre`` of its sweep, s."""

    ranges: NDArray[np.float64] = field(compare=False)
    arrival: float
    centre: float
    status: int
    telegram: MeasuredValues = field(compare=False, repr=False)


@dataclass(frozen=True)
class Fault:
    """The scanner failed (``reason``): no valid data until it has been set up again."""

    reason: str


@dataclass(frozen=True)
class LinkLost:
    """The port failed (``reason``): the shell closes it and reopens it at ``baud``, then calls start again."""

    reason: str
    baud: int


ClientEvent = BaudRate | Ready | Scan | Fault | LinkLost

Phase = Literal["idle", "probe", "stop", "variant", "read", "install", "write", "baud", "stream", "streaming", "pause"]


@dataclass
class _Pending:
    phase: Phase
    request: Request
    reply: type
    timeout: float
    deadline: float = 0.0
    tries: int = 0


class LmsClient:
    """The start-up sequence and the stream of one LMS (see the module's strategy).

    Args:
        settings: what to set the scanner to.
    """

    def __init__(self, settings: LmsSettings | None = None) -> None:
        self.settings = settings or LmsSettings()
        self._decoder = LmsDecoder("host")
        self._out = bytearray()
        self._events: deque[ClientEvent] = deque()
        self.phase: Phase = "idle"
        self.baud = BAUD_RATES[0]
        self._probe_index = 0
        self._pending: _Pending | None = None
        self._pause_until = 0.0
        self._last_scan = -math.inf
        self.last_answer = -math.inf
        """Time the scanner last sent a good telegram, s (-inf before)."""
        self.version = ""
        self.scans = 0
        self.faults = 0
        self.restarts = 0
        self.fault: str | None = None
        """Why the scanner is not streaming after it did (cleared by the next scan), or None."""
        self._config: LmsConfig | None = None

    # -- the shell's calls ----------------------------------------------------------------------------------------

    @property
    def streaming(self) -> bool:
        return self.phase == "streaming"

    def start(self, now: float) -> None:
        """Start (or restart) the sequence at the probe, at the rate the port is open at (:attr:`baud`)."""
        self._probe_index = BAUD_RATES.index(self.baud)
        self._probes_left = len(BAUD_RATES)
        self._request("probe", status_request(), StatusReply, self.settings.probe_timeout, now)

    def receive_data(self, data: bytes, now: float) -> None:
        """Feed bytes read from the port at ``now`` (b"" is no bytes, not the end of a stream)."""
        if not data:
            return
        self._decoder.receive_data(data)
        while (event := self._decoder.next_event()) is not NEED_DATA:
            if isinstance(event, Ack | Nak):
                continue
            self.last_answer = now
            if isinstance(event, MeasuredValues):
                self._on_scan(event, now)
            elif self._pending is not None and isinstance(event, self._pending.reply):
                self._on_reply(event, now)

    def step(self, now: float) -> None:
        """Run the timers: retries, the probe's next rate, the stream's silence."""
        pending = self._pending
        if self.phase == "pause" and now >= self._pause_until:
            self.start(now)
        elif pending is not None and now >= pending.deadline:
            if pending.tries < (1 if pending.phase == "probe" else self.settings.retries):
                self._send(pending, now)
            elif pending.phase == "probe":
                self._next_probe(now)
            else:
                self._failed(f"no reply to {pending.phase} after {pending.tries} tries", now)
        elif self.phase == "streaming" and now - self._last_scan > self.settings.link_timeout:
            self._on_fault(f"no scan for {self.settings.link_timeout:g} s", now)

    def port_failed(self, reason: str, now: float) -> None:
        """The port failed: the shell is told to reopen it at the first probe rate."""
        self._pending = None
        self.phase = "idle"
        self.baud = BAUD_RATES[0]
        self._out.clear()
        self._events.append(LinkLost(reason, self.baud))

    def stop(self) -> None:
        """Queue the end of continuous output and the return to the scanner's start rate (at close); the port stays
        at its rate for these bytes, the next :meth:`start` probes the start rate first."""
        self._pending = None
        self.phase = "idle"
        self._out += encode(mode_request(Mode.REQUEST))
        if self.baud != BAUD_RATES[0]:
            self._out += encode(mode_request(BAUD_CODES[BAUD_RATES[0]]))
            self.baud = BAUD_RATES[0]

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out

    def next_event(self) -> ClientEvent | Literal[NeedData.NEED_DATA]:
        return self._events.popleft() if self._events else NEED_DATA

    def statistics(self) -> dict[str, int]:
        """Counters: the decoder's and the client's."""
        s = self._decoder.statistics()
        return {
            "bytes": s.bytes,
            "telegrams": s.telegrams,
            "dropped_bytes": s.garbage_bytes,
            "bad_crc": s.bad_crc,
            "malformed": s.malformed,
            "scans": self.scans,
            "faults": self.faults,
            "restarts": self.restarts,
        }

    # -- the sequence ---------------------------------------------------------------------------------------------

    def _request(
        self, phase: Phase, request: Request, reply: type, timeout: float, now: float, delay: float = 0.0
    ) -> None:
        """Send ``request`` now, or ``delay`` s from now (step sends it then, as a first try)."""
        self.phase = phase
        pending = _Pending(phase, request, reply, timeout)
        self._pending = pending
        if delay > 0:
            pending.deadline = now + delay
        else:
            self._send(pending, now)

    def _send(self, pending: _Pending, now: float) -> None:
        pending.tries += 1
        pending.deadline = now + pending.timeout
        self._out += encode(pending.request)

    def _next_probe(self, now: float) -> None:
        self._probes_left -= 1
        if self._probes_left <= 0:
            self._failed(f"no answer at {', '.join(map(str, BAUD_RATES))} baud", now)
            return
        self._probe_index = (self._probe_index + 1) % len(BAUD_RATES)
        self._set_baud(BAUD_RATES[self._probe_index])
        self._request("probe", status_request(), StatusReply, self.settings.probe_timeout, now)

    def _set_baud(self, baud: int) -> None:
        if baud != self.baud:
            self.baud = baud
            self._events.append(BaudRate(baud))

    def _failed(self, reason: str, now: float) -> None:
        self._pending = None
        self.restarts += 1
        if self.fault is None:
            self.fault = reason
        self.phase = "pause"
        self._pause_until = now + self.settings.pause

    def _on_reply(self, event: object, now: float) -> None:
        """The reply to the pending request (of the type it waits for): the next step of the sequence, by the phase
        the reply ends (:attr:`_REPLY_STEPS`)."""
        assert self._pending is not None
        step = self._REPLY_STEPS.get(self._pending.phase)
        if step is not None:
            step(self, event, now)

    def _probed(self, event: StatusReply, now: float) -> None:
        self.version = event.version
        self._request("stop", mode_request(Mode.REQUEST), ModeReply, self.settings.reply_timeout, now)

    def _stopped(self, event: ModeReply, now: float) -> None:
        s = self.settings
        self._request("variant", variant_request(s.angle, s.resolution), VariantReply, s.reply_timeout, now)

    def _variant_set(self, event: VariantReply, now: float) -> None:
        s = self.settings
        if not event.accepted:
            self._failed(f"the scanner refused the variant {s.angle}° at {s.resolution / 100:g}°", now)
            return
        self._request("read", _config_read(), ConfigReply, s.reply_timeout, now)

    def _config_known(self, event: ConfigReply, now: float) -> None:
        s = self.settings
        self._config = event.config
        if event.config.units == s.range_mode.units and event.config.measuring_mode == s.range_mode.measuring_mode:
            self._switch_baud(now)
        else:
            self._request("install", mode_request(Mode.INSTALLATION), ModeReply, s.reply_timeout, now)

    def _installing(self, event: ModeReply, now: float) -> None:
        s = self.settings
        if not event.accepted:
            self._failed("the scanner refused the installation mode's password", now)
            return
        assert self._config is not None
        config = LmsConfig(
            blanking=self._config.blanking,
            stop_threshold=self._config.stop_threshold,
            sensitivity=self._config.sensitivity,
            availability=self._config.availability,
            measuring_mode=s.range_mode.measuring_mode,
            units=s.range_mode.units,
            rest=self._config.rest,
        )
        self._request("write", _config_write(config), ConfigReply, s.config_timeout, now)

    def _config_written(self, event: ConfigReply, now: float) -> None:
        s = self.settings
        if not event.accepted or event.config.units != s.range_mode.units:
            self._failed(f"the scanner refused the configuration ({s.units}, {s.range_m} m)", now)
            return
        self._switch_baud(now)

    def _baud_switched(self, event: ModeReply, now: float) -> None:
        s = self.settings
        if not event.accepted:
            self._failed(f"the scanner refused {s.baud} baud", now)
            return
        self._set_baud(s.baud)
        self._request("stream", mode_request(Mode.CONTINUOUS), ModeReply, s.reply_timeout, now, BAUD_SETTLE)

    def _stream_started(self, event: ModeReply, now: float) -> None:
        if not event.accepted:
            self._failed("the scanner refused the continuous output", now)
            return
        self._pending = None
        self.phase = "streaming"
        self._last_scan = now
        self._events.append(Ready(self.version))

    _REPLY_STEPS: ClassVar[dict[Phase, Callable[[LmsClient, Any, float], None]]] = {
        "probe": _probed,  # StatusReply
        "stop": _stopped,  # ModeReply
        "variant": _variant_set,  # VariantReply
        "read": _config_known,  # ConfigReply
        "install": _installing,  # ModeReply
        "write": _config_written,  # ConfigReply
        "baud": _baud_switched,  # ModeReply
        "stream": _stream_started,  # ModeReply
    }
    """What each phase does with the reply that ends it (its request's reply type, which :meth:`_request` was told)."""

    def _switch_baud(self, now: float) -> None:
        s = self.settings
        if s.baud == self.baud:
            self._request("stream", mode_request(Mode.CONTINUOUS), ModeReply, s.reply_timeout, now)
        else:
            self._request("baud", mode_request(BAUD_CODES[s.baud]), ModeReply, s.reply_timeout, now)

    def _on_scan(self, values: MeasuredValues, now: float) -> None:
        if self.phase == "probe":  # a scanner still streaming at this rate: the rate is found
            self._request("stop", mode_request(Mode.REQUEST), ModeReply, self.settings.reply_timeout, now)
            return
        if self.phase != "streaming":
            return
        if values.fatal:
            self._on_fault(f"the scanner reports a fatal error (status 0x{values.status:02x})", now)
            return
        s = self.settings
        if values.count != s.points or values.units != s.range_mode.units:
            self._on_fault(f"a scan of {values.count} points in units {values.units}: not as set up", now)
            return
        self._last_scan = now
        self.scans += 1
        self.fault = None
        transmission, sweep = scan_timing(values.count, s.resolution, s.angle, self.baud)
        ranges = values.ranges(s.range_mode.range_bits)
        self._events.append(Scan(ranges, now, now - transmission - sweep / 2, values.status, values))

    def _on_fault(self, reason: str, now: float) -> None:
        self.faults += 1
        self.fault = reason
        self._events.append(Fault(reason))
        self._out += encode(Request(Command.RESET))
        self._failed(reason, now)
