"""An emulated Crossbow DMU/VG unit that real host programs talk to, over TCP or a pseudo-terminal; as a command
(``pluto dmu-emulate``, :mod:`.command`) or as the ``dmu-emulator`` module (:class:`DmuEmulatorModule`).

    with DeviceEmulator(CrossbowDevice(SyntheticMotion())) as unit:      # TCP on 127.0.0.1, a free port
        port = serial.serial_for_url(unit.url)                           # socket://127.0.0.1:PORT
        port.write(b"R")                                                 # answered b"H"

:class:`CrossbowDevice` is the unit (sans-I/O: commands in, packets out, stepped with a time); it measures an
:class:`InertialSource`: :class:`SyntheticMotion` (a robot driving circles on a gentle swell) or
:class:`SimTruthSource` (the simulator's inertial model of the simulated robot, from ``Sim/Truth`` on the bus).
:class:`~pluto.hardware.link.DeviceEmulator` serves any such device core (the NMEA receiver's too) in a background
thread; it, :class:`~pluto.hardware.link.LinkNoise` and :class:`~pluto.hardware.link.EmulatorError` are importable
from here too.
"""

# Strategy: the device core knows the protocol and time, nothing of ports (principle 2); the emulator moves bytes
# and steps the core every tick with time.monotonic. The links (a TCP listener serving one client at a time, a pty
# whose slave end stays open), the link noise and the serving loop are pluto.hardware.link's, so every emulated
# device behaves alike on the wire. The unit starts as a real one does: polled, angle mode. In continuous mode it
# sends one packet every 1/rate s of its time; a late step sends the packets it owes (at most a few, then it skips),
# each measured at its own time. Sources give readings in Pluto's frame (z up, y left, the specific force); the
# device turns them into its own (z down, y right, gravity counted positive down, as the unit's manual has it):
# rates (x, y, z) -> (x, -y, -z), accelerations (x, y, z) -> (-x, y, z) (+1 g on z at rest), roll unchanged, pitch
# negated.
# Commands are answered as the DMU/VG and AHRS manuals have it (codec.py lists them): G also ends the continuous
# mode; S and v answer with the serial-number and version packets; z measures the rate sensors' biases (the source
# is what the unit measures, so the zeroing is recorded, not applied) and T sets the erection rate, both kept for a
# host to read back from the device; b (autobaud) is answered B, the line's rate being nominal on TCP and a pty.

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pluto import msgs, names
from pluto.bus import Bus
from pluto.codec import NEED_DATA
from pluto.geometry import wrap_angle
from pluto.hardware.dmu.sim import SimDmu
from pluto.hardware.emulate import EmulatorParams
from pluto.hardware.link import DeviceCore, DeviceEmulator, EmulatorError, LinkNoise
from pluto.runtime.module import Module
from pluto.runtime.ranges import Port, Rate
from pluto.sim.noise import IDEAL, NoiseProfile

from .codec import (
    MODE_REPLY,
    AngleData,
    Command,
    CrossbowDecoder,
    DmuScale,
    Mode,
    Reply,
    ScaledData,
    VoltageData,
    encode,
    serial_number_packet,
    version_packet,
)
from .filter import GRAVITY

__all__ = [
    "CrossbowDevice",
    "DeviceCore",
    "DeviceEmulator",
    "DmuEmulatorModule",
    "DmuEmulatorParams",
    "EmulatorError",
    "InertialReading",
    "InertialSource",
    "LinkNoise",
    "SimTruthSource",
    "SyntheticMotion",
]

DEFAULT_VERSION = "DMU-VG400CA-100 Ver 3.1"
"""What an emulated unit answers to ``v`` (padded to 24 characters on the wire)."""
MAX_OWED = 5
"""Packets a late step of the unit sends at most (the rest of the backlog is skipped)."""


# ------------------------------------------------------------------------------------------------ sources


@dataclass(frozen=True, slots=True)
class InertialReading:
    """What an inertial unit measures, in Pluto's frame (x forward, y left, z up).

    Attributes:
        phi: pitch about y, rad.  psi: roll about x, rad.
        rates: about x, y, z, rad/s.  accelerations: specific force along x, y, z, m/s² (+g on z at rest).
    """

    phi: float = 0.0
    psi: float = 0.0
    rates: tuple[float, float, float] = (0.0, 0.0, 0.0)
    accelerations: tuple[float, float, float] = (0.0, 0.0, GRAVITY)


class InertialSource(Protocol):
    """What the emulated unit measures: ``reading(t)`` at time ``t`` (s, the emulator's clock)."""

    def reading(self, t: float) -> InertialReading: ...


class SyntheticMotion:
    """A robot driving a circle at ``v`` m/s and ``omega`` rad/s on a gentle swell (pitch and roll sinusoids).

    Args:
        v: speed, m/s.  omega: turn rate, rad/s.  tilt: amplitude of the pitch and roll, rad.  period: of the
        swell, s.
    """

    def __init__(self, v: float = 0.5, omega: float = 0.3, tilt: float = 0.02, period: float = 4.0) -> None:
        self.v, self.omega, self.tilt, self.period = v, omega, tilt, period

    def reading(self, t: float) -> InertialReading:
        w = 2.0 * math.pi / self.period
        phi = self.tilt * math.sin(w * t)
        psi = self.tilt * math.cos(w * t)
        return InertialReading(
            phi=phi,
            psi=psi,
            rates=(-self.tilt * w * math.sin(w * t), self.tilt * w * math.cos(w * t), self.omega),
            accelerations=(-GRAVITY * math.sin(phi), self.v * self.omega, GRAVITY),
        )


class SimTruthSource:
    """The simulated robot's inertial data: its true motion on ``Sim/Truth`` turned into readings by the
    simulator's inertial model (:class:`pluto.hardware.dmu.sim.SimDmu`). Before the first pose: a unit at rest.

    Args:
        bus: an open bus of the running simulation's robot.
        noise: the inertial model's errors.  rng: its random generator.
    """

    def __init__(self, bus: Bus, noise: NoiseProfile = IDEAL, rng: np.random.Generator | None = None) -> None:
        self._dmu = SimDmu(noise, rng or np.random.default_rng(0))
        self._lock = threading.Lock()
        self._newest = InertialReading()
        self._last: msgs.Odometry | None = None
        self._subscription = bus.create_subscription(names.SIM_TRUTH, self._on_truth, msgs.Odometry, depth=256)

    def _on_truth(self, truth: msgs.Odometry) -> None:
        with self._lock:
            last, self._last = self._last, truth
            if last is not None and truth.stamp < last.stamp - 1.0:
                last = None  # the simulation started again
            if last is not None and truth.stamp <= last.stamp:
                return
            dt = 0.0 if last is None else truth.stamp - last.stamp
            turned = None if last is None else wrap_angle(truth.theta - last.theta)
            s = self._dmu.step(truth.stamp, dt, truth.v, truth.omega, turned)
            self._newest = InertialReading(s.phi, s.psi, s.rates, s.accelerations)

    def reading(self, t: float) -> InertialReading:
        with self._lock:
            return self._newest

    def close(self) -> None:
        """Stop listening to the simulation."""
        self._subscription.close()


# ------------------------------------------------------------------------------------------------ the unit


class CrossbowDevice:
    """The unit's side of the protocol: decodes the host's commands, answers them and sends packets.

    Args:
        source: what the unit measures.
        rate_hz: packets per second in continuous mode.
        scale: the unit's ranges.
        temperature: of the unit, °C.
        serial: the serial number it reports.  version: its type and firmware version (at most 24 characters).

    Raises:
        ValueError: a rate that is not positive.
    """

    def __init__(
        self,
        source: InertialSource | None = None,
        *,
        rate_hz: float = 100.0,
        scale: DmuScale | None = None,
        temperature: float = 30.0,
        serial: int = 9911750,
        version: str = DEFAULT_VERSION,
    ) -> None:
        if not (math.isfinite(rate_hz) and rate_hz > 0.0):
            raise ValueError(f"rate_hz must be > 0, got {rate_hz!r}")
        self._serial_packet = serial_number_packet(serial)
        self._version_packet = version_packet(version)
        self.serial, self.version = serial, version
        self.source: InertialSource = source if source is not None else SyntheticMotion()
        self.period = 1.0 / rate_hz
        self.scale = scale or DmuScale()
        self.temperature = temperature
        self.mode: Mode = "angle"
        self.continuous = False
        self.packets_sent = 0
        self.commands = 0
        self.erection_rate: int | None = None
        """°/min set by the last T command (None: the unit's own)."""
        self.bias_zeroings = 0
        """z commands that measured the rate sensors' biases."""
        self.biases_erased = 0
        """z commands with argument 0 (the stored biases erased)."""
        self._decoder = CrossbowDecoder("device")
        self._out = bytearray()
        self._now: float | None = None
        self._next: float | None = None  # time of the next continuous packet

    def receive_data(self, data: bytes) -> None:
        """Take the host's bytes (commands; anything else is ignored)."""
        if not data:
            return
        self._decoder.receive_data(data)
        while (event := self._decoder.next_event()) is not NEED_DATA:
            if isinstance(event, Command):
                self.commands += 1
                self._command(event.code, event.argument)

    def _command(self, code: str, argument: int | None = None) -> None:
        if code == "R":
            self.continuous = False
            self._out += encode(Reply("H"))
        elif code == "P":
            self.continuous = False
        elif code == "C":
            self.continuous = True
            self._next = None
        elif code == "G":  # one packet; a unit that was streaming is polled from now on
            self.continuous = False
            self._packet(self._now if self._now is not None else time.monotonic())
        elif code == "S":
            self._out += self._serial_packet
        elif code == "v":
            self._out += self._version_packet
        elif code == "B":  # built-in test: passed
            self._out += encode(Reply("b"))
        elif code == "b":  # autobaud: the host switches its rate and sends "a" at the new one
            self.continuous = False
            self._out += encode(Reply("B"))
        elif code == "z":
            if argument == 0:
                self.biases_erased += 1
            else:
                self.bias_zeroings += 1
            self._out += encode(Reply("Z"))
        elif code == "T":
            self.erection_rate = argument
        else:
            self.mode = {"a": "angle", "c": "scaled", "r": "voltage"}[code]  # type: ignore[assignment]
            self._out += MODE_REPLY[self.mode]

    def _packet(self, t: float) -> None:
        r = self.source.reading(t)
        rates = (r.rates[0], -r.rates[1], -r.rates[2])
        acc = (-r.accelerations[0], r.accelerations[1], r.accelerations[2])  # gravity positive down: +1 g on z at rest
        counter = int(t * 1e6 / 0.79) & 0xFFFF  # a free-running counter
        packet: AngleData | ScaledData | VoltageData
        if self.mode == "angle":
            packet = AngleData(r.psi, -r.phi, rates, acc, self.temperature, counter)
        elif self.mode == "scaled":
            packet = ScaledData(rates, acc, self.temperature, counter)
        else:
            s = self.scale
            counts = [2048 + round(w / s.rate_per_count / 16.0) for w in rates]
            counts += [2048 + round(a / s.accel_per_count / 16.0) for a in acc]
            counts.append(round((self.temperature / 44.4 + 1.375) * 4096.0 / 5.0))
            c = [max(0, min(4095, x)) for x in counts]
            packet = VoltageData((c[0], c[1], c[2], c[3], c[4], c[5], c[6]), counter)
        self._out += encode(packet, self.scale)
        self.packets_sent += 1

    def step(self, now: float) -> None:
        """Advance the unit to ``now`` (s): in continuous mode, send the packets due."""
        self._now = now
        if not self.continuous:
            return
        if self._next is None:
            self._next = now
        owed = 0
        while self._next <= now + 1e-9:
            if owed < MAX_OWED:
                self._packet(self._next)
            owed += 1
            self._next += self.period
        if owed > MAX_OWED:
            self._next = now + self.period

    def data_to_send(self) -> bytes:
        """What the unit has to send now."""
        data = bytes(self._out)
        self._out.clear()
        return data


# ------------------------------------------------------------------------------------------------ module


class DmuEmulatorParams(EmulatorParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    port: TCP port (8102 by default).
    packet_hz: packets per second when the unit streams.
    """

    port: Port = 8102
    packet_hz: Rate = 100.0


class DmuEmulatorModule(Module[DmuEmulatorParams]):
    """A Crossbow DMU on the robot of ``Sim/Truth``, served over its serial protocol."""

    name = "dmu-emulator"
    description = "an emulated Crossbow DMU inertial unit on the robot of Sim/Truth, served on TCP"
    Params = DmuEmulatorParams

    def on_configure(self) -> None:
        p = self.params
        self.source = SimTruthSource(self.bus, p.profile(), p.rng("dmu"))
        device = CrossbowDevice(self.source, rate_hz=p.packet_hz)
        self.emulator = DeviceEmulator(device, port=p.port, link_noise=p.line_noise("dmu"))
        self.emulator.start()
        self.get_logger().info("Crossbow DMU on %s", self.emulator.url)

    def on_shutdown(self) -> None:
        emulator = getattr(self, "emulator", None)
        if emulator is not None:
            emulator.stop()
        source = getattr(self, "source", None)
        if source is not None:
            source.close()
