"""The shell every real serial device's module shares: its driver opened at configure and closed at shutdown, and the
link's status written at every step.

    class CrossbowDmu(DeviceModule[CrossbowDmuParams]):
        def on_configure(self) -> None:
            self.driver = self.open_driver(CrossbowDriver(self.params.port))   # connected, or the start fails
            self.status = self.create_publisher(names.DMU_STATUS)

        def step(self, now: float) -> None:
            self.write_status(now, self.driver.connected, self.driver.statistics().garbage_bytes)

The status is an ``FVectorState``: data = [s since the device last answered], element = [link up 1/0, reconnects,
then the device's own counts (bytes or sentences dropped, faults)].
"""

from __future__ import annotations

from typing import TypeVar

from pluto import msgs
from pluto.bus import StateWriter
from pluto.runtime.module import Module, ModuleParams

from .serial_driver import SerialDriver

__all__ = ["DeviceModule"]

D = TypeVar("D", bound=SerialDriver)
P = TypeVar("P", bound=ModuleParams)


class DeviceModule(Module[P]):
    """A module around a :class:`~pluto.hardware.serial_driver.SerialDriver` (the driver owns the port)."""

    driver: SerialDriver
    status: StateWriter[msgs.FVectorState]
    """Where :meth:`write_status` writes (the module creates it under its interface's name)."""

    def open_driver(self, driver: D, *, wait: bool = True) -> D:
        """Start ``driver`` and keep it for :meth:`on_shutdown`.

        Args:
            driver: the driver, not started.
            wait: wait until it is connected (:meth:`SerialDriver.connect`); False starts its reader and returns
                (a device that may be plugged in later).

        Returns:
            ``driver``.

        Raises:
            PlutoError: the driver's error when it cannot connect (it is closed again: no reader is left behind,
                and the module does not start, with the reason in one line).
        """
        self.driver = driver
        try:
            if wait:
                driver.connect()
            else:
                driver.start()
        except Exception:
            driver.close()
            raise
        return driver

    def on_shutdown(self) -> None:
        driver = getattr(self, "driver", None)
        if driver is not None:
            driver.close()

    def write_status(self, now: float, up: bool, *counts: int) -> None:
        """Write the link's status: data = [s since the device last answered], element = [up 1/0, reconnects,
        *counts]."""
        driver = self.driver
        self.status.write(
            msgs.FVectorState(stamp=now, data=[driver.silence()], element=[int(up), driver.reconnects, *counts])
        )
