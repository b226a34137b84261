"""Serve an emulated LMS (:class:`.device.LmsDevice`) over TCP or a pseudo-terminal, in real time; as a command
(``pluto sick-emulate``, :mod:`.command`) or as the ``sick-emulator`` module (:class:`SickEmulatorModule`).

    with LmsEmulator(LmsDevice(SyntheticRoom())) as emulator:      # TCP on 127.0.0.1, a free port
        driver = LmsDriver(emulator.url)                           # socket://127.0.0.1:PORT

Scan sources: :class:`SyntheticRoom` (a square room around the scanner), :class:`FixedScan` (the same ranges every
time) and :class:`WorldScan` (the simulator's laser in a world, from a fixed pose or from the robot's true pose on
``Sim/Truth`` when joined to a running simulation, the scanner turned with the wrist of ``Wrist/State`` it sits on).
Faults: :class:`~pluto.hardware.link.LinkNoise`
(bytes dropped and corrupted in both directions) and :meth:`LmsEmulator.inject_fault` (a fatal error; the scanner
then needs its reboot time after the host resets it).

The module serves a scanner on the robot of ``Sim/Truth`` in the world as built (:mod:`pluto.hardware.emulate`
describes what every emulator module shares: the noise profile, the seed, the line's noise).
"""

# Strategy: the transport is pluto.hardware.link's, shared by every emulated device (SteppedServer's loop, whose
# hooks this fills): select() on the link with a short tick, feed what arrives to the device with the wall clock's
# time, step the device and write the bytes whose transmission has ended (the device models the line's rate, so a
# nominal-rate transport still shows the scanner's timing). The tick is short (2 ms), and the loop wakes when the
# device's next bytes are due, so that a scan is handed out within a few ms of the end of its transmission even at
# 500 kbaud. A new TCP client starts with a fresh decoder (no half telegram of the previous one); the scanner itself
# keeps its state, as a real one does when its cable is replugged.

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from pluto.hardware.emulate import EmulatorParams
from pluto.hardware.link import EmulatorError, Link, LinkNoise, SteppedServer, Transport
from pluto.runtime.module import Module
from pluto.runtime.ranges import Baud, Port

from .device import LmsDevice

if TYPE_CHECKING:
    from pluto.sim.noise import NoiseProfile

__all__ = [
    "DEFAULT_PORT",
    "WRIST_LEAD",
    "EmulatorError",
    "FixedScan",
    "LinkNoise",
    "LmsEmulator",
    "SickEmulatorModule",
    "SickEmulatorParams",
    "SyntheticRoom",
    "WorldScan",
    "follow_truth",
    "follow_wrist",
]

DEFAULT_PORT = 8104
"""The TCP port of ``pluto sick-emulate`` (the P2OS emulator's is 8101)."""
TICK = 0.002


class SyntheticRoom:
    """A square room of side 2·``half`` m centred on the scanner, turned by ``spin`` rad/s (so scans change)."""

    def __init__(self, half: float = 4.0, spin: float = 0.0) -> None:
        self.half = half
        self.spin = spin

    def scan(self, t: float, angles: NDArray[np.float64]) -> NDArray[np.float64]:
        a = angles + self.spin * t
        with np.errstate(divide="ignore"):
            return np.minimum(self.half / np.abs(np.cos(a)), self.half / np.abs(np.sin(a)))


class FixedScan:
    """The same ranges (m) every time, resampled to the scanner's number of points."""

    def __init__(self, ranges: NDArray[np.float64] | list[float]) -> None:
        self.ranges = np.asarray(ranges, dtype=np.float64)

    def scan(self, t: float, angles: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.ranges.size == angles.size:
            return self.ranges
        x = np.linspace(0.0, 1.0, self.ranges.size)
        return np.interp(np.linspace(0.0, 1.0, angles.size), x, self.ranges)


class WorldScan:
    """The simulator's laser (:mod:`.sim`) in ``world`` from the pose ``pose()`` gives: (x, y, θ) in m, rad, on
    the wrist at the (pan, tilt) ``wrist()`` gives, rad (tilt positive down).

    Args:
        world: a :class:`pluto.sim.world.World`.
        pose: the robot's pose now (a fixed one, or the newest ``Sim/Truth`` of a running simulation).
        noise: the simulator's laser errors (a :class:`pluto.sim.noise.NoiseProfile`: range noise and dropouts);
            None for exact ranges.
        rng: the random generator of the noise.
        wrist: the wrist's (pan, tilt) now (:func:`follow_wrist`); None: the scanner looks straight ahead, level.
        surfaces: the remission and glass of the world's surfaces (:class:`pluto.sim.site.Surfaces`, a site's);
            None: plain surfaces, no glass.
    """

    def __init__(
        self,
        world: object,
        pose: Callable[[], tuple[float, float, float]],
        noise: NoiseProfile | None = None,
        rng: np.random.Generator | None = None,
        wrist: Callable[[], tuple[float, float]] | None = None,
        *,
        surfaces: object = None,
    ) -> None:
        from pluto.sim.raycast import RayCaster
        from pluto.sim.site import Surfaces
        from pluto.sim.world import World

        if not isinstance(world, World):
            raise TypeError(f"a World, not {type(world).__name__}")
        self.world = world
        self.caster = RayCaster(world.segments(), world.circles)
        self.pose = pose
        self.noise = noise
        self.rng = rng or np.random.default_rng(0)
        self.wrist = wrist
        if surfaces is not None and not isinstance(surfaces, Surfaces):
            raise TypeError(f"Surfaces, not {type(surfaces).__name__}")
        self.surfaces = surfaces
        self._lasers: dict[int, object] = {}

    def scan(self, t: float, angles: NDArray[np.float64]) -> NDArray[np.float64]:
        from pluto.sim.noise import IDEAL

        from .sim import LaserParams, SimLaser

        laser = self._lasers.get(angles.size)
        if not isinstance(laser, SimLaser):
            fov = float(angles[-1] - angles[0])
            noise = self.noise if self.noise is not None else IDEAL
            params = LaserParams(beams=angles.size, fov=fov, resolution=0.001)
            laser = SimLaser(self.caster, params, noise, self.rng, surfaces=self.surfaces)
            self._lasers[angles.size] = laser
        pan, tilt = self.wrist() if self.wrist is not None else (0.0, 0.0)
        ranges = laser.scan(t, self.pose(), pan, tilt, movers=self.world.mover_circles(t))
        return np.where(ranges >= laser.params.max_range, np.inf, ranges)


def follow_truth(bus: object) -> Callable[[], tuple[float, float, float]]:
    """The robot's newest true pose from ``Sim/Truth`` on ``bus`` (a :class:`pluto.bus.Bus`); (0, 0, 0) before one."""
    from pluto import names
    from pluto.bus import Bus

    if not isinstance(bus, Bus):
        raise TypeError(f"a Bus, not {type(bus).__name__}")
    reader = bus.create_reader(names.SIM_TRUTH)

    def pose() -> tuple[float, float, float]:
        truth = reader.read()
        return (0.0, 0.0, 0.0) if truth is None else (truth.x, truth.y, truth.theta)

    return pose


WRIST_LEAD = 0.2
"""s a wrist reading is carried forward by its velocity at most (a reading older than that is taken as it is)."""


def follow_wrist(bus: object, clock: Callable[[], float] = time.time) -> Callable[[], tuple[float, float]]:
    """The wrist's (pan, tilt) now, rad, from its newest ``Wrist/State`` on ``bus`` (a :class:`pluto.bus.Bus`),
    carried forward to ``clock()`` (the stamps' clock) by its velocity, for up to :data:`WRIST_LEAD` s: the reading
    is a poll's, up to a poll period old, and the wrist may be panning at a radian a second. (0, 0) before one.

    What the wrist reports stands for where it is: the scanner sits on it.
    """
    from pluto import names
    from pluto.bus import Bus

    if not isinstance(bus, Bus):
        raise TypeError(f"a Bus, not {type(bus).__name__}")
    reader = bus.create_reader(names.WRIST_STATE)

    def wrist() -> tuple[float, float]:
        state = reader.read()
        if state is None or len(state.position) < 2:
            return (0.0, 0.0)
        lead = min(max(clock() - state.stamp, 0.0), WRIST_LEAD)
        velocity = [*state.velocity, 0.0, 0.0]
        return (state.position[0] + velocity[0] * lead, state.position[1] + velocity[1] * lead)

    return wrist


class LmsEmulator(SteppedServer):
    """An emulated scanner served in a background thread over TCP or a pty; a context manager.

    Args:
        device: the scanner.  transport: "tcp" or "pty".  host, port: where to listen (port 0: a free one).
        link_noise: noise on the bytes in both directions, or None.
        fault_at: s after serving starts of a fatal error (None: none).
        clock: the wall clock, s.
    """

    def __init__(
        self,
        device: LmsDevice,
        *,
        transport: Transport = "tcp",
        host: str = "127.0.0.1",
        port: int = 0,
        link_noise: LinkNoise | None = None,
        fault_at: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            tick=TICK,
            clock=clock,
            transport=transport,
            host=host,
            port=port,
            link_noise=link_noise,
            name="lms-emulator",
        )
        self.device = device
        self.fault_at = fault_at
        self._fault_due: float | None = None

    def inject_fault(self) -> None:
        """A fatal error now (the host must reset the scanner, which then reboots)."""
        with self.lock:
            self.device.inject_fault()

    def _serve(self, link: Link, stop: threading.Event) -> None:
        self._fault_due = None if self.fault_at is None else self._clock() + self.fault_at
        super()._serve(link, stop)

    def _receive(self, data: bytes, now: float) -> None:
        self.device.receive_data(data, now)

    def _new_client(self) -> None:  # a fresh decoder: no half telegram of the previous host
        self.device.reset_session()

    def _due(self) -> float:
        return self.device.next_release()

    def _output(self, now: float) -> bytes:
        if self._fault_due is not None and now >= self._fault_due:
            self._fault_due = None
            self.device.inject_fault()
        self.device.step(now)
        return self.device.data_to_send(now)


class SickEmulatorParams(EmulatorParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    port: TCP port (8104 by default).
    world: the world the laser sees (the Pioneer's: the same name or file).
    baud: the rate the scanner starts at (9600, as set in its flash; the driver switches it).
    on_wrist: the scanner sits on the pan/tilt wrist and turns with it (its ``Wrist/State``); else it looks
        straight ahead, level.
    """

    port: Port = 8104
    world: str = "office"
    baud: Baud = 9600
    on_wrist: bool = True


class SickEmulatorModule(Module[SickEmulatorParams]):
    """A SICK LMS 200 on the robot of ``Sim/Truth``, served over its telegrams."""

    name = "sick-emulator"
    description = "an emulated SICK LMS laser on the robot of Sim/Truth, served over its telegrams on TCP"
    Params = SickEmulatorParams

    def on_configure(self) -> None:
        from pluto.sim.world import load_world

        p = self.params
        wrist = follow_wrist(self.bus) if p.on_wrist else None
        site = p.site(load_world(p.world))
        source = WorldScan(
            site.world, follow_truth(self.bus), p.profile(), p.rng("sick"), wrist, surfaces=site.surfaces
        )
        self.emulator = LmsEmulator(LmsDevice(source, baud=p.baud), port=p.port, link_noise=p.line_noise("sick"))
        self.emulator.start()
        self.get_logger().info("SICK LMS in world %s on %s", p.world, self.emulator.url)

    def on_shutdown(self) -> None:
        emulator = getattr(self, "emulator", None)
        if emulator is not None:
            emulator.stop()
