"""The Crossbow DMU/VG host driver: the unit behind a serial port, a TCP socket or a pty, in SI and Pluto's frame.

    with CrossbowDriver("/dev/ttyUSB0") as dmu:       # R -> H (ping), a -> A (angle mode), then C (continuous)
        sample = dmu.wait_for_sample(1.0)             # raw reading (z up, y left) and the filtered state
        print(sample.raw.rates, sample.state.theta)

The port is opened with ``serial.serial_for_url``, so ``/dev/ttyUSB0``, ``socket://127.0.0.1:8102``, a pty path and
``loop://`` all work. In ``continuous`` mode the unit sends packets at its own rate; in ``polled`` mode the driver
asks for one (``G``) every ``1/poll_hz`` s, or as soon as the previous one came.

Frames: the unit's is x forward, y right, z down (:mod:`.codec`); Pluto's is x forward, y left, z up. So the rates
(x, y, z) become (x, −y, −z); roll about x is unchanged (ψ = roll), and pitch about y right becomes φ = −pitch about
y left. The unit counts gravity as a downward acceleration (+1 g on its z when it sits level, as its manual says);
``DMU/Raw`` carries the specific force in Pluto's frame, as the simulated unit does: the unit's accelerations
(x, y, z) become (−x, y, z), so a unit at rest reads +g on z (up).
"""

# Strategy: one reader thread owns the port (SerialDriver's, which reopens it after a lost link): it opens it, runs
# the handshake (P to stop a unit left in continuous mode, R until H answers, the mode letter until its answer, then
# C or the first G), and reads. Every packet is
# stamped with the driver's clock when its bytes were read, turned into Pluto's frame and fed to the shared DMU
# filter (.filter.DmuFilter: low-pass, integrated heading, delayed stamp), so the state never depends on who reads
# it or when. No packet for ``link_timeout`` s (or a port error) is a lost link: the port is closed, nothing more is
# handed out as fresh, and the thread opens the port again after a back-off, as long as ``reconnect`` holds. After
# a reconnection the filter's timing restarts (the first packet is not integrated over the outage); the heading
# keeps its value, so the rotation during an outage is lost, as it is when a real unit's cable is pulled.

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pluto.errors import PlutoError
from pluto.hardware.host_driver import DriverStatistics
from pluto.hardware.serial_driver import SerialDriver, SerialPort

from .codec import MODE_COMMAND, MODE_REPLY, AngleData, CrossbowDecoder, DmuScale, Reply, ScaledData
from .filter import DmuFilter, FilteredState

__all__ = [
    "CrossbowDriver",
    "CrossbowError",
    "DmuReading",
    "DmuSample",
    "DriverStatistics",
    "to_body_frame",
]

log = logging.getLogger("pluto.dmu")

READ_TIMEOUT = 0.02
"""s: the longest one read of the port blocks."""


class CrossbowError(PlutoError):
    """The unit cannot be reached (the port does not open, or no unit answers the handshake)."""


@dataclass(frozen=True, slots=True)
class DmuReading:
    """One packet in Pluto's frame (x forward, y left, z up), SI.

    Attributes:
        stamp: when its bytes were read, s by the driver's clock.
        phi: pitch about y, rad (0 in scaled mode, which has no angles).  psi: roll about x, rad.
        rates: about x, y, z, rad/s.  accelerations: along x, y, z, m/s².  temperature: °C.
    """

    stamp: float
    phi: float
    psi: float
    rates: tuple[float, float, float]
    accelerations: tuple[float, float, float]
    temperature: float


@dataclass(frozen=True, slots=True)
class DmuSample:
    """A reading and the filtered state after it; ``number`` counts the packets since the driver was made."""

    number: int
    raw: DmuReading
    state: FilteredState


def to_body_frame(packet: AngleData | ScaledData, stamp: float) -> DmuReading:
    """The packet (unit's frame: x forward, y right, z down, gravity counted positive down) in Pluto's frame (x
    forward, y left, z up; accelerations as the specific force, +g on z at rest)."""
    r, a = packet.rates, packet.accelerations
    roll, pitch = (packet.roll, packet.pitch) if isinstance(packet, AngleData) else (0.0, 0.0)
    return DmuReading(
        stamp=stamp,
        phi=-pitch,
        psi=roll,
        rates=(r[0], -r[1], -r[2]),
        accelerations=(-a[0], a[1], a[2]),  # the negated specific force, then y and z turned over
        temperature=packet.temperature,
    )


class CrossbowDriver(SerialDriver):
    """A host of a Crossbow DMU/VG unit (or of its emulator).

    Args:
        url: the port (a device path, a pty path or a pyserial URL such as ``socket://127.0.0.1:8102``).
        baud: the unit's baud rate (38400 on the DMU/VG series).
        mode: ``"continuous"`` (the unit streams) or ``"polled"`` (the driver asks for each packet).
        poll_hz: packets asked for per second in polled mode.
        measurement: ``"angle"`` (pitch and roll too) or ``"scaled"`` (rates and accelerations only).
        scale: the unit's ranges.
        time_constant: of the state's low-pass filter, s (also the delay of its stamp).
        handshake_timeout: s to wait for each answer of the handshake (three tries each).
        link_timeout: s without a packet after which the link is lost.
        reconnect: open the port again after a lost link.
        clock: the time of stamps and timers, s (monotonic).

    Raises:
        ValueError: an unknown mode or measurement, or a time that is not positive.
    """

    error = CrossbowError
    device = "Crossbow unit"

    def __init__(
        self,
        url: str,
        *,
        baud: int = 38400,
        mode: Literal["continuous", "polled"] = "continuous",
        poll_hz: float = 50.0,
        measurement: Literal["angle", "scaled"] = "angle",
        scale: DmuScale | None = None,
        time_constant: float = 0.1,
        handshake_timeout: float = 0.3,
        link_timeout: float = 0.5,
        reconnect: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if mode not in ("continuous", "polled"):
            raise ValueError(f"mode must be 'continuous' or 'polled', not {mode!r}")
        if measurement not in ("angle", "scaled"):
            raise ValueError(f"measurement must be 'angle' or 'scaled', not {measurement!r}")
        for name, value in (("poll_hz", poll_hz), ("handshake_timeout", handshake_timeout)):
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be > 0, got {value!r}")
        self.poll_period = 1.0 / poll_hz
        super().__init__(
            url,
            baud=baud,
            read_timeout=min(READ_TIMEOUT, self.poll_period / 4.0),
            link_timeout=link_timeout,
            reconnect=reconnect,
            clock=clock,
            log=log,
        )
        self.mode = mode
        self.measurement: Literal["angle", "scaled"] = measurement
        self.handshake_timeout = handshake_timeout
        self._decoder = CrossbowDecoder("host", measurement, scale)
        self._filter = DmuFilter(time_constant)
        self._sample: DmuSample | None = None
        self._last_stamp: float | None = None

    def _connect_timeout(self) -> float:
        return 8 * self.handshake_timeout + 1.0  # the three tries of each handshake step

    # -- what it hands out ----------------------------------------------------------------------------------------

    @property
    def sample(self) -> DmuSample | None:
        """The newest sample (None before the first); check :attr:`connected` before taking it as fresh."""
        return self._sample

    def statistics(self) -> DriverStatistics:
        """A snapshot of the counters."""
        s = self._decoder.statistics()
        return DriverStatistics(s.packets, s.bad_checksum, s.garbage_bytes, self.reconnects)

    def wait_for_sample(self, timeout: float | None = None) -> DmuSample | None:
        """Wait for the next sample (one after this call); None if none came within ``timeout`` s."""
        return self._sample if self._wait_for_update(timeout) else None

    # -- the reader thread ----------------------------------------------------------------------------------------

    def _session_ended(self, port: SerialPort) -> None:
        if not self._closing.is_set():
            port.write(b"P")  # polled: leave the unit quiet

    def _read(self, port: SerialPort) -> list[AngleData | ScaledData | Reply]:
        data = port.read(port.in_waiting or 1)
        now = self._clock()
        if self._closing.is_set() or not data:
            return []
        self._decoder.receive_data(data)
        events = [e for e in self._decoder.events() if isinstance(e, AngleData | ScaledData | Reply)]
        if events:
            self._heard_at(now)
        packets = [e for e in events if not isinstance(e, Reply)]
        # Packets read together arrived one packet's time on the wire apart: the last one now.
        wire = self._decoder.packet_size * 10.0 / self.baud
        for i, packet in enumerate(packets):
            self._take(packet, now - (len(packets) - 1 - i) * wire)
        return events

    def _ask(self, port: SerialPort, command: bytes, answer: str) -> bool:
        """Send ``command`` until the unit answers ``answer`` (three tries)."""
        for _ in range(3):
            port.write(command)
            deadline = self._clock() + self.handshake_timeout
            while self._clock() < deadline and not self._closing.is_set():
                if any(isinstance(e, Reply) and e.code == answer for e in self._read(port)):
                    return True
        return False

    def _session(self, port: SerialPort) -> None:
        port.write(b"P")  # a unit left streaming by a previous host stops (R alone resets it too)
        self._decoder.mode = self.measurement
        if not self._ask(port, b"R", "H"):
            self._fail(f"no Crossbow unit answering on {self.url} (no H to R)")
            return
        if not self._ask(port, MODE_COMMAND[self.measurement], MODE_REPLY[self.measurement].decode()):
            self._fail(f"the unit on {self.url} did not take {self.measurement} mode")
            return
        self._filter.restart_timing()
        self._last_stamp = None
        polled = self.mode == "polled"
        port.write(b"G" if polled else b"C")
        now = self._clock()
        asked = now
        self._link_up()
        last_packet = now
        pending = polled  # a G is out, not answered yet
        log.info("Crossbow unit on %s: %s mode, %s", self.url, self.measurement, self.mode)
        while not self._closing.is_set():
            got = any(not isinstance(e, Reply) for e in self._read(port))
            now = self._clock()
            if got:
                last_packet = now
                pending = False
            elif now - last_packet > self.link_timeout:
                return
            # polled: the next G one period after the last, or again if its packet was lost on the line
            if polled and now - asked >= (self.handshake_timeout if pending else self.poll_period):
                port.write(b"G")
                asked, pending = now, True

    def _take(self, packet: AngleData | ScaledData, stamp: float) -> None:
        last = self._last_stamp
        if last is not None:
            stamp = max(stamp, last + 1e-6)  # strictly increasing: every packet's rate is integrated
        self._last_stamp = stamp
        dt = 0.0 if last is None else stamp - last
        reading = to_body_frame(packet, stamp)
        state = self._filter.update(stamp, dt, reading.rates, reading.accelerations)
        with self._changed:
            self._updates += 1
            self._sample = DmuSample(self._updates, reading, state)
            self._changed.notify_all()
