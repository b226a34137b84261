"""Replay behind ``pluto replay``: a log's messages back on the bus, with their original timing, and its time as the
``Clock``.

Strategy: downstream modules must not be able to tell a replay from the live robot. So each message goes out under
its interface name (or a remapped one) at its log time, scaled by the rate, and the replay publishes the log's time
on ``Clock`` (as the simulator does): a ``Clock`` value at a message's log time just before the message, and one
every ``1/clock_hz`` wall seconds in between, so modules with ``use_sim_time`` step in time with the log. Each pass
of the log (each replay, and each pass of a loop) carries a ``run`` id of its own in its ``Clock`` values, so modules
see a new pass as a new run and forget the previous one even though the loop's times keep rising. The replay
also announces the modules that wrote the replayed interfaces (``base``, ``sick``, ...), so a profile or proxy that
needs them finds them, and refuses to run if one of them is alive: live and replayed values would mix.

:class:`ReplaySchedule` is the pure part (what goes out, in which order, at which log time); :class:`Replayer` does
the waiting and the writing. Times are absolute (the due wall time of every event is computed from the start), so
lateness never accumulates.
"""

from __future__ import annotations

import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from pluto import msgs, names
from pluto.bus import Bus, StateWriter
from pluto.errors import PlutoError
from pluto.record.logfile import LogFile, LoggedMessage
from pluto.record.recorder import CLOCK
from pluto.runtime.registry import available_modules

__all__ = [
    "ReplayEvent",
    "ReplayProgress",
    "ReplayResult",
    "ReplaySchedule",
    "Replayer",
    "parse_remap",
    "shift_stamps",
]


def parse_remap(pairs: Sequence[str]) -> dict[str, str]:
    """``["A=B", ...]`` as ``{A: B}``.

    Raises:
        PlutoError: a pair is not ``OLD=NEW`` or names a bad interface.
    """
    result: dict[str, str] = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise PlutoError(f"--remap takes OLD=NEW, got {pair!r}")
        try:
            names.check_name(old)
            names.check_name(new)
        except ValueError as err:
            raise PlutoError(f"--remap {pair}: {err}") from None
        result[old] = new
    return result


def shift_stamps(message: msgs.Message, offset: float) -> msgs.Message:
    """The message with its time fields (``stamp``, and ``arrival`` of a laser scan) moved by ``offset`` s."""
    if offset == 0.0:
        return message
    changes: dict[str, Any] = {}
    for name in ("stamp", "arrival"):
        value = getattr(message, name, None)
        if isinstance(value, float):
            changes[name] = value + offset
    return msgspec.structs.replace(message, **changes) if changes else message


@dataclass(frozen=True)
class ReplayEvent:
    """One thing a replay does at log time ``t`` (s): publish ``message`` on ``name``, or (message None) only
    a ``Clock`` value."""

    t: float
    name: str = ""
    message: msgs.Message | None = None
    lap: int = 0
    """The pass it belongs to (0 for the first; with ``loop``, 1, 2, ... for the passes after it)."""


class ReplaySchedule:
    """What a replay publishes, in order, with the log time of each event.

    Args:
        entries: the messages to replay, in log-time order (already selected and renamed).
        clock_period: log seconds between ``Clock`` values when no message comes (0: a value only with messages).
        loop: repeat forever; each pass comes after the previous one, its times (and the messages' stamps) moved
            on by the log's span plus one clock period, so time never runs backwards.
        tail: log seconds of ``Clock`` values after the last message (without ``loop``), so that modules stepping
            on the log's time get to handle it.
    """

    def __init__(
        self, entries: Sequence[LoggedMessage], clock_period: float = 0.0, loop: bool = False, tail: float = 0.0
    ) -> None:
        if clock_period < 0 or tail < 0:
            raise ValueError("clock_period and tail must be >= 0")
        self.entries = list(entries)
        self.clock_period = clock_period
        self.loop = loop
        self.tail = tail if clock_period > 0 else 0.0
        self.start = self.entries[0].log_time if self.entries else 0.0
        self.end = self.entries[-1].log_time if self.entries else 0.0
        self.pass_length = (self.end - self.start) + max(clock_period, 1e-3)

    def events(self) -> Iterator[ReplayEvent]:
        """The events in order (endless with ``loop``, unless the log is empty)."""
        if not self.entries:
            return
        k = 0
        period = self.clock_period
        while True:
            offset = k * self.pass_length
            ticks = 0  # Clock values on a regular grid from the pass's start, none at or before a message's time
            for entry in self.entries:
                t = entry.log_time + offset
                if period > 0:
                    while (tick := self.start + offset + ticks * period) < t:
                        yield ReplayEvent(tick, lap=k)
                        ticks += 1
                yield ReplayEvent(
                    t, entry.name, shift_stamps(entry.message, offset) if offset else entry.message, lap=k
                )
                if period > 0:
                    while self.start + offset + ticks * period <= t:
                        ticks += 1
            if not self.loop:
                while period > 0 and (tick := self.start + ticks * period) <= self.end + self.tail:
                    yield ReplayEvent(tick)
                    ticks += 1
                return
            k += 1


@dataclass(frozen=True)
class ReplayProgress:
    """Where a replay is.

    Attributes:
        t: log time reached, s.
        start, end: log times of the first and last message, s.
        messages: messages published so far.
        passes: passes completed (with ``loop``).
        max_late: the most an event went out after its due time so far, wall s.
    """

    t: float
    start: float
    end: float
    messages: int
    passes: int
    max_late: float

    @property
    def fraction(self) -> float:
        """Share of the current pass done, 0..1."""
        span = self.end - self.start
        if span <= 0:
            return 1.0
        return min(1.0, max(0.0, ((self.t - self.start) % (span + 1e-9)) / span))


@dataclass
class ReplayResult:
    """What a replay published: per interface, in all, and how long it took (wall s)."""

    counts: dict[str, int] = field(default_factory=dict)
    messages: int = 0
    clock_ticks: int = 0
    wall: float = 0.0
    max_late: float = 0.0
    stopped: bool = False


def _check_timing(rate: float, clock_hz: float, tail: float) -> None:
    """Raises PlutoError if the rate, the clock rate or the tail of a replay is out of range."""
    if not (math.isfinite(rate) and rate > 0):
        raise PlutoError(f"rate must be > 0, got {rate}")
    if not clock_hz > 0:
        raise PlutoError(f"clock rate must be > 0 Hz, got {clock_hz}")
    if not tail >= 0:
        raise PlutoError(f"tail must be >= 0 s, got {tail}")


class Replayer:
    """Publishes a log's messages on the bus with their original timing (``pluto replay``).

    Args:
        bus: where to publish.
        log: the log (a path or an opened :class:`~pluto.record.logfile.LogFile`).
        rate: log seconds per wall second (2 replays twice as fast).
        start, end: replay only log times from ``start`` to ``end``, s after the log's first message.
        loop: replay again and again until stopped.
        only: interface names or globs to replay (all if empty).
        remap: publish interface OLD as NEW.
        clock: publish the log's time on ``Clock``.
        clock_hz: ``Clock`` values per wall second between messages.
        tail: log seconds the ``Clock`` runs on after the last message (so modules handle it).
        announce: announce the modules that wrote the replayed interfaces.

    Raises:
        LogError: the log cannot be read.
        PlutoError: bad options, nothing to replay, or a remapped name that would carry the wrong type.
    """

    def __init__(
        self,
        bus: Bus,
        log: str | os.PathLike[str] | LogFile,
        *,
        rate: float = 1.0,
        start: float | None = None,
        end: float | None = None,
        loop: bool = False,
        only: Sequence[str] = (),
        remap: Mapping[str, str] | None = None,
        clock: bool = True,
        clock_hz: float = 100.0,
        tail: float = 1.0,
        announce: bool = True,
    ) -> None:
        _check_timing(rate, clock_hz, tail)
        self.bus = bus
        self.log = log if isinstance(log, LogFile) else LogFile(Path(log))
        self.rate = rate
        self.remap = dict(remap or {})
        self.clock = clock
        self.announce = announce
        self.names = self._replayed(only)
        self.outputs = {n: self.remap.get(n, n) for n in self.names}
        self._check_output_types()
        entries = self._entries(start, end)
        self.schedule = ReplaySchedule(entries, rate / clock_hz if clock else 0.0, loop, tail)
        self._writers: dict[str, StateWriter[Any]] = {}
        self._clock_writer: StateWriter[msgs.SimTime] | None = None
        self._owned: list[Any] = []
        self._started = 0.0

    def _replayed(self, only: Sequence[str]) -> list[str]:
        """The interfaces to replay: those of the log matching ``only`` (all if empty) that have a type, the clock
        left out.

        Raises:
            PlutoError: there is none, or ``remap`` names an interface that is not replayed.
        """
        chosen = [n for n in self.log.names(only or None) if n != CLOCK]
        chosen = [n for n in chosen if self.log.channels[n].type is not None]
        if not chosen:
            what = f" matching {', '.join(only)}" if only else ""
            raise PlutoError(
                f"{self.log.path} has no interface{what} to replay (it has: {', '.join(self.log.names())})"
            )
        unknown = sorted(set(self.remap) - set(chosen))
        if unknown:
            raise PlutoError(f"--remap names interfaces that are not replayed: {', '.join(unknown)}")
        return chosen

    def _check_output_types(self) -> None:
        """Raises PlutoError if an interface would go out under a name that carries another type."""
        for old, new in self.outputs.items():
            cls = self.log.channels[old].type
            known = names.message_type_of(new)
            if known is not None and cls is not None and known is not cls:
                raise PlutoError(
                    f"cannot replay {old} as {new}: {new} carries {known.__name__}, the log has {cls.__name__}"
                )

    def _entries(self, start: float | None, end: float | None) -> list[LoggedMessage]:
        """The messages to replay, from ``start`` to ``end`` s after the log's first message, under their output
        names.

        Raises:
            PlutoError: ``end`` is before ``start``, or no message is between them.
        """
        t0 = self.log.start
        lo = None if start is None else t0 + start
        hi = None if end is None else t0 + end
        if lo is not None and hi is not None and hi < lo:
            raise PlutoError(f"--end ({end} s) is before --start ({start} s)")
        entries = [
            LoggedMessage(self.outputs[m.name], m.log_time, m.publish_time, m.sequence, m.message)
            for m in self.log.messages(self.names, lo, hi)
        ]
        if not entries:
            raise PlutoError(f"{self.log.path} has no message between {start} s and {end} s")
        return entries

    # -- setting up ---------------------------------------------------------------------------------------------

    def writer_modules(self) -> list[str]:
        """The modules that wrote the replayed interfaces (from the interface table), which the replay announces."""
        installed = set(available_modules())
        found = set()
        for name in self.outputs.values():
            row = names.INTERFACES.get(name)
            if row is not None and row.writer in installed and row.writer != "sim":
                found.add(row.writer)
        return sorted(found)

    def _open(self) -> None:
        bus = self.bus
        if self.announce:
            alive = set(bus.live_modules())
            clash = [m for m in self.writer_modules() if m in alive]
            if clash:
                raise PlutoError(
                    f"module{'s' if len(clash) > 1 else ''} {', '.join(clash)} "
                    f"{'are' if len(clash) > 1 else 'is'} running on robot {bus.robot}: replayed and live values "
                    "would mix; stop them, or replay under other names with --remap"
                )
        for old, new in self.outputs.items():
            cls = self.log.channels[old].type
            assert cls is not None
            if new not in self._writers:
                writer = bus.create_publisher(new, cls, reliable=True)
                self._writers[new] = writer
                self._owned.append(writer)
        if self.clock:
            self._clock_writer = bus.create_publisher(CLOCK, msgs.SimTime, reliable=True)
            self._owned.append(self._clock_writer)
        if self.announce:
            for module in ["replay", *self.writer_modules()]:
                self._owned.append(bus.declare_module(module))
                self._owned.append(bus.create_service(f"mom/{module}", self._mom_handler(module)))
        bus.settle()

    def _mom_handler(self, module: str) -> Callable[[Any], msgs.ModuleInfo]:
        def info(_request: Any) -> msgs.ModuleInfo:
            now = time.time()
            mine = [
                w
                for w in [*self._writers.values(), *([self._clock_writer] if self._clock_writer else [])]
                if (module == "replay" and w.name == CLOCK)
                or (names.INTERFACES.get(w.name) is not None and names.INTERFACES[w.name].writer == module)
            ]
            return msgs.ModuleInfo(
                name=module,
                pid=os.getpid(),
                host=socket.gethostname(),
                started=self._started,
                active=True,
                provides=[
                    msgs.InterfaceStats(
                        name=w.name,
                        type=w.type.__name__,
                        count=w.meter.count,
                        rate_hz=round(w.meter.current_rate(now), 3),
                        last_write=w.meter.last,
                    )
                    for w in mine
                ],
            )

        return info

    def close(self) -> None:
        """Withdraw the replay's writers, services and module announcements (idempotent)."""
        owned, self._owned = self._owned, []
        for thing in reversed(owned):
            self.bus.release(thing)
        self._writers.clear()
        self._clock_writer = None

    # -- running ------------------------------------------------------------------------------------------------

    def run(
        self,
        stop: threading.Event | None = None,
        progress: Callable[[ReplayProgress], None] | None = None,
        progress_interval: float = 0.5,
    ) -> ReplayResult:
        """Replay until the end of the log (forever with ``loop``) or until ``stop`` is set.

        Args:
            stop: set it to end the replay early.
            progress: called about every ``progress_interval`` wall seconds, and at the end.

        Raises:
            PlutoError: a module that wrote a replayed interface is running (see the class docstring).
        """
        stop = stop or threading.Event()
        result = ReplayResult()
        schedule = self.schedule
        self._open()
        try:
            self._started = time.time()
            wall0 = time.monotonic()
            t0 = schedule.start
            last_clock = -math.inf
            next_report = wall0
            passes = 0
            lap, run = -1, 0
            for event in schedule.events():
                due = wall0 + (event.t - t0) / self.rate
                wait = due - time.monotonic()
                if wait > 0 and stop.wait(wait):
                    result.stopped = True
                    break
                if stop.is_set():
                    result.stopped = True
                    break
                if event.lap != lap:  # each pass is a run of its own: modules start it afresh
                    lap, run = event.lap, secrets.randbits(63) | 1
                if self._clock_writer is not None and event.t > last_clock:
                    self._clock_writer.write(msgs.SimTime(stamp=event.t, rate=self.rate, run=run))
                    last_clock = event.t
                    result.clock_ticks += 1
                if event.message is not None:
                    self._writers[event.name].write(event.message)
                    result.counts[event.name] = result.counts.get(event.name, 0) + 1
                    result.messages += 1
                # measured after the writes: neither went out later than this after its due time
                result.max_late = max(result.max_late, time.monotonic() - due)
                passes = int((event.t - t0) // schedule.pass_length) if schedule.loop else 0
                if progress is not None and time.monotonic() >= next_report:
                    next_report += progress_interval
                    progress(ReplayProgress(event.t, t0, schedule.end, result.messages, passes, result.max_late))
            result.wall = time.monotonic() - wall0
            if progress is not None:
                end_t = last_clock if math.isfinite(last_clock) else t0
                progress(ReplayProgress(end_t, t0, schedule.end, result.messages, passes, result.max_late))
        finally:
            self.close()
        return result
