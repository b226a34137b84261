"""Readers: the read API of a module's proxy, with the data taken from a log instead of the robot (as the
original's readers did for some sensors: docs/design.md, "Processes and commands").

A reader has a current time (a log time, s). Like a proxy, it numbers the module's interfaces from 0, opens those
chosen by a mask (the sum of 2^n), and :meth:`LogReader.get` returns the newest value of an interface *at the
current time*, :meth:`LogReader.wait` the next one (moving the current time to it). A reader also offers what only
a file can: :meth:`LogReader.seek` to any time, and iteration over every value in time order::

    with SickReader("run.mcap") as sick:
        for scan in sick.scans():
            ...
        sick.seek(sick.start + 10.0)
        scan = sick.get_scan()          # the scan the robot had 10 s into the log

At the end of the log, :meth:`LogReader.wait` raises :class:`EndOfLog`, a :class:`~pluto.errors.BusTimeout`, so
code written for a proxy's timeouts stops cleanly.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Generic, Self, TypeVar

from pluto import msgs, names
from pluto.errors import BusTimeout
from pluto.record.logfile import LogFile, LoggedMessage

__all__ = [
    "BaseReader",
    "DmuReader",
    "EndOfLog",
    "GpsReader",
    "LocReader",
    "LogReader",
    "SickReader",
]

M = TypeVar("M", bound=msgs.Message)


class EndOfLog(BusTimeout):
    """A reader was asked for a value after the last one of its log."""


class _Series(Generic[M]):
    """The values of one interface and their log times."""

    def __init__(self, entries: list[LoggedMessage]) -> None:
        self.entries = entries
        self.times = [e.log_time for e in entries]

    def index_at(self, t: float) -> int:
        """Index of the newest value written at or before ``t``; -1 if none."""
        return bisect.bisect_right(self.times, t) - 1


class LogReader:
    """Base of the readers: the interfaces of one module, read from a log.

    Subclasses set ``interfaces`` (numbered from 0, as the module's proxy numbers them) and add the methods the
    proxy has.

    Args:
        log: the log file, or an opened :class:`~pluto.record.logfile.LogFile` (shared by several readers).
        mask: which interfaces to open (sum of 2^n); None opens all of them.
        remap: where the log has an interface under another name: ``{"Sick/Scan_mm": "Rear/Scan_mm"}``.

    Raises:
        ValueError: the mask selects an interface the reader does not have.
        LogError: the log cannot be read.
    """

    interfaces: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self, log: str | os.PathLike[str] | LogFile, mask: int | None = None, *, remap: Mapping[str, str] | None = None
    ) -> None:
        full = (1 << len(self.interfaces)) - 1
        if mask is None:
            mask = full
        if mask < 0 or mask & ~full:
            raise ValueError(
                f"{type(self).__name__}: mask {mask} selects interfaces it does not have "
                f"(numbers 0..{len(self.interfaces) - 1}, so at most {full})"
            )
        self.mask = mask
        self.log = log if isinstance(log, LogFile) else LogFile(log)
        remap = dict(remap or {})
        self._series: dict[int, _Series[Any]] = {}
        for n, name in enumerate(self.interfaces):
            if mask & (1 << n):
                stored = remap.get(name, name)
                self._series[n] = _Series([e for e in self.log.messages([stored])])
        times = [s.times[0] for s in self._series.values() if s.times]
        ends = [s.times[-1] for s in self._series.values() if s.times]
        self.start = min(times) if times else self.log.start
        """Log time of the first value of the open interfaces, s."""
        self.end = max(ends) if ends else self.log.end
        """Log time of the last value of the open interfaces, s."""
        self.time = self.start - 1e-9 if times else self.start
        """The reader's current time, s: :meth:`get` returns the values written up to it."""

    # -- interfaces by number -----------------------------------------------------------------------------------

    def selected(self, n: int) -> bool:
        """True if interface ``n`` was opened."""
        return n in self._series

    def _get_series(self, n: int) -> _Series[Any]:
        try:
            return self._series[n]
        except KeyError:
            raise ValueError(
                f"{type(self).__name__}: interface {n} was not opened (mask {self.mask}; add {1 << n} to it)"
            ) from None

    def count(self, n: int) -> int:
        """How many values interface ``n`` has in the log."""
        return len(self._get_series(n).entries)

    def get(self, n: int) -> Any:
        """The newest value of interface ``n`` at the current time (None if it had none yet).

        Raises:
            ValueError: interface ``n`` was not opened.
        """
        series = self._get_series(n)
        i = series.index_at(self.time)
        return series.entries[i].message if i >= 0 else None

    def wait(self, n: int, timeout: float | None = None) -> Any:
        """The next value of interface ``n`` after the current time; the current time moves to it.

        ``timeout`` (log s) limits how far ahead to look, as a proxy's wall-clock timeout would.

        Raises:
            EndOfLog: there is no later value (within ``timeout``).
            ValueError: interface ``n`` was not opened.
        """
        series = self._get_series(n)
        i = series.index_at(self.time) + 1
        if i >= len(series.entries) or (timeout is not None and series.times[i] > self.time + timeout):
            within = "" if timeout is None else f" within {timeout} s"
            raise EndOfLog(f"no value of {self.interfaces[n]} after {self.time:.3f} s{within} in {self.log.path}")
        self.time = series.times[i]
        return series.entries[i].message

    def seek(self, t: float) -> None:
        """Set the current time to log time ``t``, s (anywhere: before, within or after the log)."""
        self.time = float(t)

    def rewind(self) -> None:
        """Back to just before the first value."""
        self.time = self.start - 1e-9

    def messages(self, n: int | None = None) -> Iterator[LoggedMessage]:
        """Every value of interface ``n`` (of all open interfaces if None), with its name and log time, in time
        order; the current time does not move."""
        if n is not None:
            yield from self._get_series(n).entries
            return
        merged = [e for s in self._series.values() for e in s.entries]
        merged.sort(key=lambda e: e.log_time)
        yield from merged

    def __iter__(self) -> Iterator[LoggedMessage]:
        return self.messages()

    def close(self) -> None:
        """Nothing to release (the log is in memory); for the proxy's API."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _values(self, n: int) -> Iterator[Any]:
        for entry in self._get_series(n).entries:
            yield entry.message


class SickReader(LogReader):
    """The laser's interfaces (docs/design.md): 0 ``Sick/Scan`` (181 points, stamped on arrival), 1 ``Sick/Scan_mm``
    (all points, stamped at the centre of the scan), 2 ``Sick/Timing``."""

    interfaces: ClassVar[tuple[str, ...]] = (names.SICK_SCAN, names.SICK_SCAN_MM, names.SICK_TIMING)

    def get_scan(self, n: int = 1) -> msgs.LaserScan | None:
        """The newest scan at the current time: interface 1 (``Sick/Scan_mm``) or 0 (``Sick/Scan``)."""
        value: msgs.LaserScan | None = self.get(n)
        return value

    def wait_scan(self, n: int = 1, timeout: float | None = None) -> msgs.LaserScan:
        """The next scan (see :meth:`LogReader.wait`)."""
        value: msgs.LaserScan = self.wait(n, timeout)
        return value

    def scans(self, n: int = 1) -> Iterator[msgs.LaserScan]:
        """Every scan of interface ``n`` in time order."""
        return self._values(n)

    def get_timing(self) -> msgs.ScanTiming | None:
        """The newest ``Sick/Timing`` at the current time."""
        value: msgs.ScanTiming | None = self.get(2)
        return value


class BaseReader(LogReader):
    """The base's interfaces: 0 ``Base/Drive/State`` (odometry), 1 ``Base/Sonar``, 2 ``Base/Contact``,
    3 ``Base/Power``."""

    interfaces: ClassVar[tuple[str, ...]] = (
        names.BASE_DRIVE_STATE,
        names.BASE_SONAR,
        names.BASE_CONTACT,
        names.BASE_POWER,
    )

    def get_odometry(self) -> msgs.Odometry | None:
        """The newest odometry at the current time."""
        value: msgs.Odometry | None = self.get(0)
        return value

    def wait_odometry(self, timeout: float | None = None) -> msgs.Odometry:
        """The next odometry (see :meth:`LogReader.wait`)."""
        value: msgs.Odometry = self.wait(0, timeout)
        return value

    def odometry(self) -> Iterator[msgs.Odometry]:
        """Every odometry value in time order."""
        return self._values(0)

    def get_sonar(self) -> msgs.SonarScan | None:
        value: msgs.SonarScan | None = self.get(1)
        return value

    def get_contact(self) -> msgs.Contact | None:
        value: msgs.Contact | None = self.get(2)
        return value

    def get_power(self) -> msgs.Power | None:
        value: msgs.Power | None = self.get(3)
        return value


class DmuReader(LogReader):
    """The inertial unit's interfaces: 0 ``DMU/State`` (filtered, integrated heading), 1 ``DMU/Raw``."""

    interfaces: ClassVar[tuple[str, ...]] = (names.DMU_STATE, names.DMU_RAW)

    def get_state(self) -> msgs.DmuState | None:
        """The newest ``DMU/State`` at the current time."""
        value: msgs.DmuState | None = self.get(0)
        return value

    def wait_state(self, timeout: float | None = None) -> msgs.DmuState:
        value: msgs.DmuState = self.wait(0, timeout)
        return value

    def states(self) -> Iterator[msgs.DmuState]:
        return self._values(0)

    def get_raw(self) -> msgs.DmuRaw | None:
        """The newest ``DMU/Raw`` at the current time."""
        value: msgs.DmuRaw | None = self.get(1)
        return value


class GpsReader(LogReader):
    """The GPS's interface (docs/design.md): 0 ``GPS/State``."""

    interfaces: ClassVar[tuple[str, ...]] = (names.GPS_STATE,)

    def get_fix(self) -> msgs.GpsFix | None:
        """The newest fix at the current time."""
        value: msgs.GpsFix | None = self.get(0)
        return value

    def wait_fix(self, timeout: float | None = None) -> msgs.GpsFix:
        value: msgs.GpsFix = self.wait(0, timeout)
        return value

    def fixes(self) -> Iterator[msgs.GpsFix]:
        return self._values(0)


class LocReader(LogReader):
    """The localization service's five pose interfaces, numbered as the ``LocProxy`` numbers them (docs/design.md)."""

    interfaces: ClassVar[tuple[str, ...]] = names.LOCALIZATION_INTERFACES

    def get_pose(self, n: int) -> msgs.PoseEstimate | None:
        """The newest value of pose interface ``n`` (0..4) at the current time."""
        value: msgs.PoseEstimate | None = self.get(n)
        return value

    def wait_pose(self, n: int, timeout: float | None = None) -> msgs.PoseEstimate:
        value: msgs.PoseEstimate = self.wait(n, timeout)
        return value
