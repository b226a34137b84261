"""Serve an emulated LMS (:class:`.device.LmsDevice`) over TCP or a pseudo-terminal, in real time.

    with LmsEmulator(LmsDevice(SyntheticRoom())) as emulator:      # TCP on 127.0.0.1, a free port
        driver = LmsDriver(emulator.url)                           # socket://127.0.0.1:PORT

Scan sources: :class:`SyntheticRoom` (a square room around the scanner), :class:`FixedScan` (the same ranges every
time) and :class:`WorldScan` (the simulator's laser in a world, from a fixed pose or from the robot's true pose on
``Sim/Truth`` when joined to a running simulation). Faults: :class:`~pluto.hardware.base.p2os.emulator.LinkNoise`
(bytes dropped and corrupted in both directions) and :meth:`LmsEmulator.inject_fault` (a fatal error; the scanner
then needs its reboot time after the host resets it).
"""

# Strategy: the transport is the P2OS emulator's (its TCP and pty links and its link noise are reused, not copied):
# select() on the link with a short tick, feed what arrives to the device with the wall clock's time, step the device
# and write the bytes whose transmission has ended (the device models the line's rate, so a nominal-rate transport
# still shows the scanner's timing). The tick is short (2 ms) so that a scan is handed out within a few ms of the
# end of its transmission even at 500 kbaud. A new TCP client starts with a fresh decoder (no half telegram of the
# previous one); the scanner itself keeps its state, as a real one does when its cable is replugged.

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import NDArray

from pluto.hardware.base.p2os.emulator import (
    EmulatorError,
    LinkNoise,
    _PtyLink,
    _TcpLink,
)

from .device import LmsDevice

if TYPE_CHECKING:
    from pluto.sim.noise import NoiseProfile

__all__ = ["DEFAULT_PORT", "EmulatorError", "FixedScan", "LinkNoise", "LmsEmulator", "SyntheticRoom", "WorldScan"]

DEFAULT_PORT = 8104
"""The TCP port of ``pluto sick-sim`` (the P2OS emulator's is 8101)."""
TICK = 0.002

Transport = Literal["tcp", "pty"]


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
    """The simulator's laser (pluto.sim.laser) in ``world`` from the pose ``pose()`` gives: (x, y, θ) in m, rad.

    Args:
        world: a :class:`pluto.sim.world.World`.
        pose: the robot's pose now (a fixed one, or the newest ``Sim/Truth`` of a running simulation).
        noise: the simulator's laser errors (a :class:`pluto.sim.noise.NoiseProfile`: range noise and dropouts);
            None for exact ranges.
        rng: the random generator of the noise.
    """

    def __init__(
        self,
        world: object,
        pose: Callable[[], tuple[float, float, float]],
        noise: NoiseProfile | None = None,
        rng: np.random.Generator | None = None,
    ) -> None:
        from pluto.sim.raycast import RayCaster
        from pluto.sim.world import World

        if not isinstance(world, World):
            raise TypeError(f"a World, not {type(world).__name__}")
        self.world = world
        self.caster = RayCaster(world.segments(), world.circles)
        self.pose = pose
        self.noise = noise
        self.rng = rng or np.random.default_rng(0)
        self._lasers: dict[int, object] = {}

    def scan(self, t: float, angles: NDArray[np.float64]) -> NDArray[np.float64]:
        from pluto.sim.laser import LaserParams, SimLaser
        from pluto.sim.noise import IDEAL

        laser = self._lasers.get(angles.size)
        if not isinstance(laser, SimLaser):
            fov = float(angles[-1] - angles[0])
            noise = self.noise if self.noise is not None else IDEAL
            params = LaserParams(beams=angles.size, fov=fov, resolution=0.001)
            laser = SimLaser(self.caster, params, noise, self.rng)
            self._lasers[angles.size] = laser
        ranges = laser.scan(t, self.pose(), movers=self.world.mover_circles(t))
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


class LmsEmulator:
    """An emulated scanner served in a background thread over TCP or a pty; a context manager.

    Args:
        device: the scanner.  transport: "tcp" or "pty".  host, port: where to listen (port 0: a free one).
        link_noise: noise on the bytes in both directions, or None.
        fault_at: s after start of a fatal error (None: none).
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
        if transport not in ("tcp", "pty"):
            raise ValueError(f"transport must be 'tcp' or 'pty', not {transport!r}")
        self.device = device
        self.transport: Transport = transport
        self.link_noise = link_noise
        self.fault_at = fault_at
        self.lock = threading.Lock()
        self._host, self._port = host, port
        self._clock = clock
        self._link: _TcpLink | _PtyLink | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> LmsEmulator:
        """Open the transport and serve in a background thread.

        Raises:
            EmulatorError: the port cannot be listened on, no pty, or already running.
        """
        if self._thread is not None:
            raise EmulatorError("the emulator is already running")
        self._link = _TcpLink(self._host, self._port) if self.transport == "tcp" else _PtyLink()
        self._stop.clear()
        self._thread = threading.Thread(target=self._guarded, name=f"lms-emulator-{self._link.url}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the transport (the cable is unplugged); safe to call twice.

        Raises:
            EmulatorError: the serving loop had failed.
        """
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()
        if self._link is not None:
            self._link.close()
            self._link = None
        error, self._error = self._error, None
        if error is not None:
            raise EmulatorError(f"the emulator's loop failed: {error!r}") from error

    def __enter__(self) -> LmsEmulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """What a host opens: ``socket://127.0.0.1:PORT`` or the pty's path.

        Raises:
            EmulatorError: not started.
        """
        if self._link is None:
            raise EmulatorError("the emulator is not started")
        return self._link.url

    def inject_fault(self) -> None:
        """A fatal error now (the host must reset the scanner, which then reboots)."""
        with self.lock:
            self.device.inject_fault()

    def serve(self, stop: threading.Event) -> None:
        """Serve in this thread until ``stop`` is set (after :meth:`start`'s link is open: use :meth:`run`)."""
        link = self._link
        assert link is not None
        device, clock = self.device, self._clock
        started = clock()
        fault_at = self.fault_at
        connections = getattr(link, "connections", 0)
        while not stop.is_set():
            now = clock()
            timeout = min(TICK, max(0.0, device.next_release() - now))
            try:
                readable, _, _ = select.select(link.handles(), [], [], timeout)
            except InterruptedError:
                continue
            for handle in readable:
                data = link.on_readable(handle)
                if not data:
                    continue
                if self.link_noise is not None:
                    data = self.link_noise.apply(data)
                with self.lock:
                    device.receive_data(data, clock())
            if getattr(link, "connections", 0) != connections:  # a new host on the line
                connections = getattr(link, "connections", 0)
                with self.lock:
                    device.reset_session()
            now = clock()
            with self.lock:
                if fault_at is not None and now - started >= fault_at:
                    fault_at = None
                    device.inject_fault()
                device.step(now)
                out = device.data_to_send(now)
            if out:
                if self.link_noise is not None:
                    out = self.link_noise.apply(out)
                link.write(out)

    def run(self, stop: threading.Event, on_ready: Callable[[str], None] | None = None) -> None:
        """Open the transport, serve in this thread until ``stop`` is set, close it (the ``pluto sick-sim`` loop)."""
        self._link = _TcpLink(self._host, self._port) if self.transport == "tcp" else _PtyLink()
        try:
            (on_ready or print)(self._link.url)
            self.serve(stop)
        finally:
            self._link.close()
            self._link = None

    def _guarded(self) -> None:
        try:
            self.serve(self._stop)
        except BaseException as err:  # reported by stop()
            self._error = err
