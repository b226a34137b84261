"""The scanner's side of the LMS 200/291 protocol, sans-I/O: an emulated LMS that real hosts can talk to.

    device = LmsDevice(SyntheticRoom())
    device.receive_data(bytes_from_host, now)
    device.step(now)
    link.write(device.data_to_send(now))        # only the bytes whose transmission has ended by ``now``

It answers the telegrams of the LMS 2xx listing that hosts use (status, type, error messages, one scan on request,
operating modes with the installation password, baud rates and the rate kept at power-on, variant, configuration
read and write, reset), and in continuous mode streams measured values as fast as the line allows. Every reply
carries the status byte a real LMS 200 sends (0x10 when all is well; its low three bits 4 on a fatal error).
"""

# Strategy: time is the caller's (``now``, s). The line is modelled, not the bytes' arrival: each telegram occupies
# the line for len·10/baud s (8N1) after the previous one, and is handed out by data_to_send once its last byte would
# have left, so a host reading the port sees the scanner's real timing whatever the transport (on TCP or a pty the
# baud rate is nominal). ACK/NAK go first, as the scanner acknowledges a telegram before it works on it. The mirror
# turns at 75 Hz; a scan at 0.5° interlaces two turns (0.25°: four), so scans complete every turns/75 s. In
# continuous mode the next scan sent is the first that completes after the line is free, and its telegram starts
# then: at 38400 baud a 361-point scan takes 190 ms on the line and one goes out every 213 ms; at 500 k, every
# 26.7 ms (37.5/s; 75/s at 1°). Its ranges are taken from the source at the centre of its sweep. A baud-rate change
# is answered at the old rate; the new one applies after that reply. A fatal error (inject_fault) sets the status
# byte of every telegram to "fatal error" and every point to an error code until the host resets the scanner
# (0x10); the reset makes it silent for reboot_time s, after which it announces itself (0x90) at 9600 baud in the
# request mode, its variant and configuration (EEPROM) unchanged.
# Requests are answered as a real LMS 200 answers them (facts from the telegram listing and recordings of real units,
# as used by sicktoolbox): the type (0x3A) is "LMS200;30106", one digit (3 in cm, 1 in mm), ";" and the software
# version; the error request (0x32) lists (type, number) pairs, none while healthy; a poll (0x30 0x01) is answered
# with the newest complete scan; 0x66 chooses the power-on rate (0x00: 9600, 0x01: the rate in force). A request the
# scanner does not know, or with data it cannot take, is answered with "not acknowledged" (0x92) carrying its command.

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import ClassVar, Protocol

import numpy as np
from numpy.typing import NDArray

from .client import MIRROR_HZ, scan_timing
from .telegram import (
    ACK,
    BAUD_CODES,
    NAK,
    PASSWORD,
    RANGE_MODES,
    UNITS_MM,
    Command,
    LmsConfig,
    LmsDecoder,
    Mode,
    RangeMode,
    Reply,
    Request,
    encode,
    measured_values_reply,
    status_reply,
)
from .telegram import ReplyCode as R

__all__ = ["FATAL_STATUS", "OK_STATUS", "TYPE", "LmsDevice", "ScanSource"]

OK_STATUS = 0x10
"""Status byte of a healthy LMS 200 (a real one answers a mode change with ``06 02 80 03 00 A0 00 10 16 0A``)."""
FATAL_STATUS = OK_STATUS | 0x04
"""Status byte of a scanner with a fatal error (low three bits 4)."""
TYPE = "LMS200;30106"
"""The model an emulated scanner reports (sicktoolbox looks for this string in the type reply)."""
FATAL_ERROR = (0x04, 0x01)
"""(type, number) the error request reports while the scanner has a fatal error."""
_MODES: dict[int, int] = {int(v): k for k, v in BAUD_CODES.items()}


class ScanSource(Protocol):
    """Where the emulated scanner's ranges come from."""

    def scan(self, t: float, angles: NDArray[np.float64]) -> NDArray[np.float64]:
        """Ranges in m at the bearings ``angles`` (rad, 0 ahead, counter-clockwise) for a scan centred at ``t``;
        inf (or beyond the range) where no echo comes back."""
        ...


class LmsDevice:
    """An emulated LMS 2xx (see the module's strategy).

    Args:
        source: gives the ranges of each scan.
        version: the software version it reports (7 characters).
        reboot_time: s of silence after a reset that follows a fatal error (about 20 s on a real scanner).
        reset_time: s of silence after a reset of a healthy scanner.
        baud: the rate it starts at (9600 unless its flash says otherwise).
    """

    def __init__(
        self,
        source: ScanSource,
        *,
        version: str = "V02.10 ",
        reboot_time: float = 20.0,
        reset_time: float = 1.0,
        baud: int = 9600,
    ) -> None:
        self.source = source
        self.version = version
        self.reboot_time = reboot_time
        self.reset_time = reset_time
        self.power_on_baud = baud
        self.baud = baud
        self.angle = 180
        self.resolution = 100
        self.config = LmsConfig()
        self.mode = int(Mode.REQUEST)
        self.failed = False
        self.scans_sent = 0
        self.requests = 0
        self.naks = 0
        self._decoder = LmsDecoder("device")
        self._queue: deque[tuple[float, bytes]] = deque()  # (time the last byte leaves, bytes)
        self._line_free = -math.inf
        self._silent_until = -math.inf
        self._announce = False
        self._now = 0.0

    # -- the transport's calls -------------------------------------------------------------------------------------

    @property
    def streaming(self) -> bool:
        return self.mode == Mode.CONTINUOUS and not self.rebooting

    @property
    def rebooting(self) -> bool:
        return self._now < self._silent_until

    def receive_data(self, data: bytes, now: float) -> None:
        """Bytes from the host at ``now``."""
        self._now = now
        if self.rebooting or not data:
            return  # a restarting scanner hears nothing
        bad = self._decoder.statistics().bad_crc
        self._decoder.receive_data(data)
        for _ in range(self._decoder.statistics().bad_crc - bad):
            self.naks += 1
            self._emit(bytes((NAK,)), now)
        for request in self._decoder.events():
            if isinstance(request, Request):
                self.requests += 1
                self._emit(bytes((ACK,)), now)
                self._answer(request, now)

    def step(self, now: float) -> None:
        """Stream the next scan if one is due (continuous mode)."""
        self._now = now
        if self._announce and not self.rebooting:
            self._announce = False
            self.baud = self.power_on_baud
            self._reply(R.POWER_ON, self.version.encode("ascii"), now)
        if not self.streaming:
            return
        period = self._period()
        start = max(self._line_free, now - period)
        sweep_end = math.ceil(start / period - 1e-9) * period
        if sweep_end > now:
            return
        points = self.angle * 100 // self.resolution + 1
        _, sweep = scan_timing(points, self.resolution, self.angle, self.baud)
        self._send(encode(self._scan(sweep_end - sweep / 2, points)), sweep_end)
        self.scans_sent += 1

    def data_to_send(self, now: float) -> bytes:
        """The bytes whose transmission has ended by ``now``."""
        out = bytearray()
        queue = self._queue
        while queue and queue[0][0] <= now:
            out += queue.popleft()[1]
        return bytes(out)

    def next_release(self) -> float:
        """When the next queued bytes will have left (inf if none)."""
        return self._queue[0][0] if self._queue else math.inf

    def inject_fault(self) -> None:
        """A fatal error: every telegram reports it until the host resets the scanner."""
        self.failed = True

    def reset_session(self) -> None:
        """Forget half-received bytes (a new host on the line)."""
        self._decoder = LmsDecoder("device")

    def type_string(self) -> str:
        """What the scanner answers to the type request: model, a digit (3 in cm, 1 in mm) and software version."""
        digit = "1" if self.config.units == UNITS_MM else "3"
        return f"{TYPE}{digit};{self.version.strip()}"

    # -- answers ---------------------------------------------------------------------------------------------------

    def _period(self) -> float:
        turns = 100 // self.resolution if self.resolution < 100 else 1
        return turns / MIRROR_HZ

    def _status(self) -> int:
        return FATAL_STATUS if self.failed else OK_STATUS

    def _send(self, telegram: bytes, start: float) -> None:
        begin = max(start, self._line_free)
        self._line_free = begin + len(telegram) * 10.0 / self.baud
        self._queue.append((self._line_free, telegram))

    def _emit(self, single: bytes, now: float) -> None:
        self._send(single, now)

    def _reply(self, command: int, data: bytes, now: float) -> None:
        self._send(encode(Reply(command, data, self._status())), now)

    def _scan(self, t: float, points: int) -> Reply:
        mode = self._range_mode(self.config) or RANGE_MODES[("cm", 80)]
        field_max = (1 << mode.range_bits) - 1
        if self.failed:
            words = np.full(points, field_max, dtype=np.uint16)
        else:
            angles = np.linspace(-math.radians(self.angle) / 2, math.radians(self.angle) / 2, points)
            ranges = np.asarray(self.source.scan(t, angles), dtype=np.float64)
            counts = np.round(np.nan_to_num(ranges, nan=np.inf, posinf=np.inf) / mode.unit)
            no_echo = ~(counts < min(mode.max_range / mode.unit, field_max - 8))
            words = np.where(no_echo, field_max, np.clip(counts, 0, field_max - 9)).astype(np.uint16)
        return measured_values_reply(words, mode.units, self._status())

    @staticmethod
    def _range_mode(config: LmsConfig) -> RangeMode | None:
        for mode in RANGE_MODES.values():
            if mode.measuring_mode == config.measuring_mode and mode.units == config.units:
                return mode
        return None

    def _answer(self, request: Request, now: float) -> None:
        """Carry out a host's request (:attr:`_REQUESTS`); one the scanner does not know, or whose data it cannot
        take, is answered "not acknowledged" with its command."""
        handler = self._REQUESTS.get(request.command)
        if handler is None or not handler(self, request.data, now):
            self._reply(R.NOT_ACKNOWLEDGED, bytes((request.command,)), now)

    # Each request's handler: whether it took the request's data (False: not acknowledged, nothing changed).

    def _reset(self, data: bytes, now: float) -> bool:
        self._reply(R.RESET, b"", now)
        self._silent_until = max(now, self._line_free) + (self.reboot_time if self.failed else self.reset_time)
        self.failed = False
        self.mode = int(Mode.REQUEST)
        self._announce = True
        return True

    def _send_status(self, data: bytes, now: float) -> bool:
        status = status_reply(
            version=self.version,
            operating_mode=self.mode,
            measuring_mode=self.config.measuring_mode,
            angle=self.angle,
            resolution=self.resolution,
            units=self.config.units,
            baud=self.baud,
            device_error=self.failed,
            status=self._status(),
        )
        self._send(encode(status), now)
        return True

    def _change_mode(self, data: bytes, now: float) -> bool:
        if not data:
            return False
        self._operating_mode(data, now)
        return True

    def _send_type(self, data: bytes, now: float) -> bool:
        if data:
            return False
        self._reply(R.TYPE, self.type_string().encode("ascii"), now)
        return True

    def _send_errors(self, data: bytes, now: float) -> bool:
        if data:
            return False
        self._reply(R.ERRORS, bytes(FATAL_ERROR) if self.failed else b"", now)
        return True

    def _send_scan(self, data: bytes, now: float) -> bool:
        if data != b"\x01":  # one scan: the newest complete one
            return False
        points = self.angle * 100 // self.resolution + 1
        period = self._period()
        sweep_end = math.floor(now / period + 1e-9) * period
        _, sweep = scan_timing(points, self.resolution, self.angle, self.baud)
        self._send(encode(self._scan(sweep_end - sweep / 2, points)), now)
        return True

    def _keep_baud(self, data: bytes, now: float) -> bool:
        if len(data) != 1 or data[0] not in (0, 1):
            return False
        self.power_on_baud = self.baud if data[0] else 9600
        self._reply(R.PERMANENT_BAUD, bytes((1, data[0])), now)
        return True

    def _set_variant(self, data: bytes, now: float) -> bool:
        if len(data) != 4:
            return False
        angle, resolution = data[0] | data[1] << 8, data[2] | data[3] << 8
        ok = angle in (100, 180) and resolution in (25, 50, 100) and not (resolution == 25 and angle != 100)
        if ok:
            self.angle, self.resolution = angle, resolution
        variant = self.angle.to_bytes(2, "little") + self.resolution.to_bytes(2, "little")
        self._reply(R.VARIANT, bytes((1 if ok else 0,)) + variant, now)
        return True

    def _send_config(self, data: bytes, now: float) -> bool:
        self._reply(R.CONFIG_READ, self.config.pack(), now)
        return True

    def _write_config(self, data: bytes, now: float) -> bool:
        if len(data) != len(self.config.pack()):
            return False
        ok = self.mode == Mode.INSTALLATION
        if ok:
            new = LmsConfig.unpack(data)
            ok = self._range_mode(new) is not None
            if ok:
                self.config = new
        self._reply(R.CONFIG, bytes((1 if ok else 0,)) + self.config.pack(), now)
        return True

    _REQUESTS: ClassVar[dict[int, Callable[[LmsDevice, bytes, float], bool]]] = {
        Command.RESET: _reset,
        Command.STATUS: _send_status,
        Command.OPERATING_MODE: _change_mode,
        Command.TYPE: _send_type,
        Command.ERRORS: _send_errors,
        Command.MEASURED_VALUES: _send_scan,
        Command.PERMANENT_BAUD: _keep_baud,
        Command.VARIANT: _set_variant,
        Command.CONFIG_READ: _send_config,
        Command.CONFIG: _write_config,
    }
    """The requests the scanner answers, each with its handler."""

    def _operating_mode(self, data: bytes, now: float) -> None:
        mode = data[0]
        if mode == Mode.INSTALLATION:
            ok = data[1:] == PASSWORD
        else:
            ok = mode in (Mode.CONTINUOUS, Mode.REQUEST) or mode in _MODES
        self._reply(R.OPERATING_MODE, bytes((0 if ok else 1,)), now)
        if not ok:
            return
        if mode in _MODES:
            self.baud = _MODES[mode]  # after the reply, which went at the old rate
        else:
            self.mode = mode
            if mode == Mode.CONTINUOUS:
                self._line_free = max(self._line_free, now)
