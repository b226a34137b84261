"""The recorder behind ``pluto record``: every chosen interface of the robot's bus, as it is written, to MCAP.

Strategy: one Zenoh subscriber on all the robot's keys (``pluto/<robot>/**``) sees every value written, whatever
the interface and whenever it first appears, so globs like ``Sick/*`` also catch interfaces that start later. The
Zenoh callback only copies the sample (key, bytes, the write time from its attachment) into a queue; the recorder's
own thread decodes it, turns it into JSON, stamps it with the robot's time and writes it, and every second closes
the chunk in progress so a kill loses at most that second.

The robot's time: a robot on simulated time (a ``Clock`` interface is written) is logged on that time, so a replay
that publishes the log's time as the ``Clock`` recreates what the modules saw; otherwise on the wall clock. A
write's robot time comes from the newest ``Clock`` value written before it, advanced at that value's rate by the
wall time between the two writes (both times from the writers' attachments, so queueing in between does not
matter), but never past the next ``Clock`` value: a write after the newest value known waits for the next one (at
most ``max_extrapolation`` s). A clock that fell behind its rate (a simulator or a replay held up by a busy machine)
would otherwise carry a write past the values written after it, and a writer's values out of order. ``Clock``
itself is the log's time axis: it is recorded as a channel only when named. In the file, MCAP's ``log_time`` is
the wall-clock time of the write and ``publish_time`` the robot's (see :mod:`pluto.record.format`), so viewers show
real dates.

Writers drop values under congestion rather than stall (a state's newest value is what counts), so a recorder on a
busy machine can miss some. Each sample's attachment carries its writer's sequence number; a jump in it is counted
as values lost on the way, per interface, so the summary says what the log lacks.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import zenoh

from pluto import __version__, msgs, names
from pluto.bus import Bus
from pluto.bus.executor import on_zenoh_thread
from pluto.bus.session import write_stamp
from pluto.errors import DecodeError, PlutoError
from pluto.record.format import WALL_LOG_TIME, LogError, encode_message
from pluto.record.logfile import match_names
from pluto.record.writer import CHUNK_SIZE, ForeignMessage, SplitLogWriter
from pluto.runtime.profiles import Profile
from pluto.runtime.registry import load_module_class

__all__ = [
    "CLOCK",
    "InterfaceCount",
    "RecordStatus",
    "Recorder",
    "RobotTime",
    "Selection",
    "profile_for",
]

log = logging.getLogger("pluto.record")

CLOCK = "Clock"

# A sample's attachment as every Pluto writer makes it (pluto.bus.session): wall-clock time of the write (s), and
# the writer's sequence number.


class RobotTime:
    """Turns the wall-clock time of a write into the robot's time.

    On the wall clock (``sim=False``) the two are the same. On simulated time, feed every ``Clock`` value with
    :meth:`tick`; :meth:`at` then advances the newest value written before the given wall time at its rate, up to
    the value written after it (time only runs on: a write never gets a later time than a value written after it,
    unless that value starts time again). :meth:`settled` tells whether that later value is known yet.

    Args:
        sim: the robot runs on simulated time.
        max_extrapolation: wall seconds past a ``Clock`` value beyond which time is not advanced further (a
            stalled simulator must not make the log run on).
    """

    KEEP = 64

    def __init__(self, sim: bool, max_extrapolation: float = 0.5) -> None:
        self.sim = sim
        self.max_extrapolation = max_extrapolation
        self._walls: list[float] = []
        self._ticks: list[tuple[float, float]] = []  # (stamp, rate), in the order of _walls

    @property
    def ready(self) -> bool:
        """Robot times can be given (always on the wall clock; after the first tick on simulated time)."""
        return not self.sim or bool(self._walls)

    def tick(self, stamp: float, rate: float, wall: float) -> None:
        """A ``Clock`` value: simulated time ``stamp`` (s) advancing at ``rate``, written at wall time ``wall``."""
        i = bisect.bisect_right(self._walls, wall)
        self._walls.insert(i, wall)
        self._ticks.insert(i, (stamp, rate))
        if len(self._walls) > self.KEEP:
            del self._walls[: self.KEEP // 2]
            del self._ticks[: self.KEEP // 2]

    def at(self, wall: float) -> float | None:
        """The robot's time of a write at wall time ``wall`` (s); None on simulated time before the first tick."""
        if not self.sim:
            return wall
        if not self._walls:
            return None
        i = bisect.bisect_right(self._walls, wall) - 1
        if i < 0:  # written before the oldest tick known: go back from it
            stamp, rate = self._ticks[0]
            return max(0.0, stamp - (self._walls[0] - wall) * rate)
        stamp, rate = self._ticks[i]
        t = stamp + min(wall - self._walls[i], self.max_extrapolation) * rate
        if i + 1 < len(self._ticks):
            following = self._ticks[i + 1][0]
            if following >= stamp:  # (a smaller one: time started again, and says nothing of this write)
                t = min(t, following)
        return t

    def settled(self, wall: float) -> bool:
        """Whether :meth:`at` of a write at wall time ``wall`` (s) is final: on the wall clock always; on simulated
        time once a ``Clock`` value written at or after it is known."""
        return not self.sim or (bool(self._walls) and wall <= self._walls[-1])


@dataclass(frozen=True)
class Selection:
    """Which interfaces to record: those matching ``include`` (all if empty) and no pattern of ``exclude``.

    ``Clock`` is recorded only when a pattern names it exactly (it is the log's time axis).
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for pattern in (*self.include, *self.exclude):
            if not pattern or pattern.startswith("/") or "@" in pattern:
                raise PlutoError(f"bad interface name or pattern {pattern!r}")

    def wants(self, name: str) -> bool:
        """True if interface ``name`` is to be recorded."""
        if "@" in name or match_names(name, self.exclude):
            return False
        if name == CLOCK:
            return CLOCK in self.include
        return not self.include or match_names(name, self.include)

    def unmatched(self, seen: Iterable[str]) -> list[str]:
        """The include patterns that matched none of the interfaces ``seen``."""
        seen = list(seen)
        return [p for p in self.include if not any(match_names(n, [p]) for n in seen)]


@dataclass(frozen=True)
class InterfaceCount:
    """What was recorded of one interface."""

    name: str
    type: str
    count: int
    first: float
    last: float
    lost: int = 0
    """Values its writer wrote that never reached the log (dropped under congestion on the way, or because the
    recorder fell too far behind)."""

    @property
    def rate(self) -> float:
        """Mean rate in log time, Hz."""
        span = self.last - self.first
        return (self.count - 1) / span if self.count > 1 and span > 0 else 0.0


@dataclass(frozen=True)
class RecordStatus:
    """A snapshot of a recording.

    Attributes:
        elapsed: wall seconds since it started.
        messages: messages written.
        size: bytes on disk (the chunk in progress not counted).
        log_start, log_end: log times of the first and last message, s (0 before the first).
        interfaces: per interface, sorted by name.
        undecodable: samples that were not valid Pluto messages (not recorded).
        unstamped: messages written before the first ``Clock`` value that could not be given a time.
        lost: values written that never reached the recorder (see :attr:`InterfaceCount.lost`).
        parts: the files written so far.
        time_base: ``sim`` or ``wall``.
        error: why the recording stopped early, if it did.
        foreign: messages written in other tools' schemas (``--foxglove``), per topic, sorted by topic.
        foreign_errors: values the translation to those schemas failed on (the bus message itself was recorded).
    """

    elapsed: float
    messages: int
    size: int
    log_start: float
    log_end: float
    interfaces: tuple[InterfaceCount, ...]
    undecodable: int
    unstamped: int
    lost: int
    parts: tuple[Path, ...]
    time_base: str
    error: str | None = None
    foreign: tuple[tuple[str, int], ...] = ()
    foreign_errors: int = 0

    @property
    def duration(self) -> float:
        """Log time recorded, s."""
        return self.log_end - self.log_start


# A sample as the Zenoh callback hands it over: key, payload, write time (s, 0 if unknown), writer's sequence
# number (0 if unknown), receive time (s). A plain tuple: this is the hot path.
_Sample = tuple[str, bytes, float, int, float]


@dataclass
class _Tally:
    """What was written of one interface (mutable: updated for every message)."""

    type: str
    count: int
    first: float
    last: float


@dataclass
class _Counts:
    by_name: dict[str, _Tally] = field(default_factory=dict)
    lost: dict[str, int] = field(default_factory=dict)
    messages: int = 0
    log_start: float = 0.0
    log_end: float = 0.0


WRITER_WAIT = 2.0
"""s a recorder waits, after the bus settled, for a writer's declaration still on its way
(:func:`_writer_declared`); on a robot with no simulator, recording starts that much later."""


def _writer_declared(bus: Bus, name: str) -> bool:
    """Whether a writer of interface ``name`` is declared on the bus (its queryable of the current value is
    known to this session): Zenoh's matching status of a querier of its key.

    Settled, the session knows the declarations of the other peers, but one may still be on its way: from a router
    (the rendezvous owner, or the router a client is linked to), which tells of its queryables only in answer to the
    interest a new querier sends it, or from a peer that a busy machine held up. A matching listener waits for it,
    up to :data:`WRITER_WAIT` s."""
    bus.settle()  # every session's declarations are known from here on, but for those still on their way
    querier = bus.session.declare_querier(bus.key(name))
    found = threading.Event()
    try:
        listener = querier.declare_matching_listener(
            on_zenoh_thread(lambda change: found.set() if change.matching else None)
        )
        try:
            # a MatchingStatus (zenoh's stubs say bool; the object is always true): its flag tells
            status: Any = querier.matching_status
            if status.matching:
                return True
            with bus.executor.blocking():
                return found.wait(WRITER_WAIT)
        finally:
            with contextlib.suppress(zenoh.ZError):
                listener.undeclare()  # type: ignore[no-untyped-call]
    finally:
        with contextlib.suppress(zenoh.ZError):
            querier.undeclare()  # type: ignore[no-untyped-call]


class Recorder:
    """Records the chosen interfaces of a robot's bus to an MCAP log (``pluto record``).

    Use as a context manager, or call :meth:`start` and :meth:`stop`.

    Args:
        bus: the bus to record from.
        path: the log file (with a split limit, the pattern of its parts: ``run.mcap`` -> ``run_000.mcap``...).
        names: interface names or globs to record; all if empty.
        exclude: names or globs not to record.
        time_base: ``auto`` (simulated time if a writer of ``Clock`` is on the bus when the recording starts),
            ``sim`` or ``wall``.
        force: overwrite existing files.
        split_size: bytes after which a new part starts (0: never).
        split_duration: log seconds after which a new part starts (0: never).
        chunk_interval: wall seconds after which the chunk in progress is written out (the most a kill loses).
        compression: ``zstd``, ``lz4`` or ``none``.
        metadata: extra entries of the log's ``pluto`` metadata.
        translate: also write, for each recorded value, the messages this gives (in other tools' schemas, on
            topics of their own): called on the recorder's thread with the interface, the value and its log time.

    Raises:
        PlutoError: a bad pattern, time base or chunk interval (:meth:`start` raises
            :class:`~pluto.record.format.LogError` if the file cannot be created).
    """

    QUEUE_LIMIT = 100_000
    """Samples waiting to be written beyond which new ones are dropped rather than eat memory (counted in
    :attr:`overflowed`, and as lost on their interface)."""

    def __init__(
        self,
        bus: Bus,
        path: str | Path,
        *,
        names: Sequence[str] = (),
        exclude: Sequence[str] = (),
        time_base: str = "auto",
        force: bool = False,
        split_size: int = 0,
        split_duration: float = 0.0,
        chunk_interval: float = 1.0,
        compression: str = "zstd",
        chunk_size: int = CHUNK_SIZE,
        metadata: Mapping[str, str] | None = None,
        translate: Callable[[str, msgs.Message, float], Iterable[ForeignMessage]] | None = None,
    ) -> None:
        if time_base not in ("auto", "sim", "wall"):
            raise PlutoError(f"time base must be auto, sim or wall, not {time_base!r}")
        if not chunk_interval > 0:
            raise PlutoError(f"chunk interval must be > 0 s, got {chunk_interval}")
        self.bus = bus
        self.path = Path(path)
        self.selection = Selection(tuple(names), tuple(exclude))
        self.chunk_interval = chunk_interval
        self._requested_base = time_base
        self._writer_options: dict[str, Any] = {
            "split_size": split_size,
            "split_duration": split_duration,
            "force": force,
            "compression": compression,
            "chunk_size": chunk_size,
        }
        self._extra_metadata = dict(metadata or {})
        self._translate = translate
        self._foreign: dict[str, int] = {}
        self._foreign_errors = 0
        self._queue: queue.SimpleQueue[_Sample | None] = queue.SimpleQueue()
        self.overflowed = 0
        self._lock = threading.Lock()
        self._counts = _Counts()
        self._names: dict[str, str | None] = {}  # key -> interface name, None if not recorded
        self._sequence: dict[str, int] = {}  # interface -> last writer sequence number seen
        self._undecodable = 0
        self._unstamped = 0
        self._pending: list[tuple[str, msgs.Message, float]] = []  # waiting for the first Clock value
        # written after the newest Clock value known, waiting for the next one: (name, value, wall, due), due the
        # monotonic time when it is written all the same (the clock stalled)
        self._unsettled: list[tuple[str, msgs.Message, float, float]] = []
        self._subscriber: Any = None
        self._thread: threading.Thread | None = None
        self._writer: SplitLogWriter | None = None
        self._error: str | None = None
        self.failed = threading.Event()
        """Set when writing failed (see :attr:`RecordStatus.error`); the recorder then stops taking samples."""
        self._started = 0.0
        self.time = RobotTime(sim=time_base == "sim")

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Open the log and start recording.

        Raises:
            LogError: the file cannot be created (it exists and not ``force``, the folder is missing, the disk is
                full, ...).
        """
        if self._thread is not None:
            return
        if self._requested_base == "auto":
            self._detect_clock()
        self._started = time.time()
        info = {
            "robot": self.bus.robot,
            "pluto_version": __version__,
            "start_time": datetime.fromtimestamp(self._started, UTC).isoformat(),
            "start_time_unix": f"{self._started:.6f}",
            "time_base": "sim" if self.time.sim else "wall",
            "host": socket.gethostname(),
            **WALL_LOG_TIME,  # viewers show the real date of the run; the robot's time is in publish_time
            **self._extra_metadata,
        }
        self._writer = SplitLogWriter(self.path, metadata=info, **self._writer_options)
        self._thread = threading.Thread(target=self._run, name="pluto-recorder", daemon=True)
        self._thread.start()
        self._subscriber = self.bus.declare_subscriber(f"{self.bus.prefix}/**", self._on_sample)

    def _detect_clock(self) -> None:
        """Simulated time if a writer of ``Clock`` is on the bus, decided by its declaration (which this session
        knows once settled), not by whether its value arrives within some time: a busy machine can hold a value up
        for longer than any such window. Its current value, if it comes soon, is the first tick; else the first
        tick recorded is, and what comes before it waits for it."""
        if not _writer_declared(self.bus, CLOCK):
            return
        self.time = RobotTime(sim=True)
        reader = self.bus.create_reader(CLOCK, msgs.SimTime, fetch_timeout=0.5)
        try:
            tick = reader.read()
            if tick is not None:
                self.time.tick(tick.stamp, tick.rate, reader.last_write_time)
        finally:
            self.bus.release(reader)

    def stop(self) -> RecordStatus:
        """Stop recording, write what is queued and close the log (idempotent); return the final status."""
        subscriber, self._subscriber = self._subscriber, None
        if subscriber is not None:
            self.bus.release(subscriber)
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._queue.put(None)
            thread.join()
        return self.status()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the Zenoh side: copy and hand over -----------------------------------------------------------------------

    def _on_sample(self, sample: zenoh.Sample) -> None:
        if sample.kind != zenoh.SampleKind.PUT:
            return
        if self._queue.qsize() >= self.QUEUE_LIMIT:
            self.overflowed += 1
            return
        attachment = sample.attachment
        written, seq = write_stamp(attachment)
        self._queue.put((str(sample.key_expr), sample.payload.to_bytes(), written, seq, time.time()))

    # -- the recorder's thread ----------------------------------------------------------------------------------

    def _run(self) -> None:
        writer = self._writer
        assert writer is not None
        last_flush = time.monotonic()
        try:
            while True:
                try:
                    item = self._queue.get(timeout=min(0.1, self.chunk_interval))
                except queue.Empty:
                    pass  # nothing new: only the chunk timer to check
                else:
                    if item is None:
                        break
                    self._take(writer, item)
                now = time.monotonic()
                if self._unsettled and self._unsettled[0][3] <= now:
                    self._write_unsettled(writer, now)
                if now - last_flush >= self.chunk_interval:
                    writer.flush()
                    last_flush = now
            self._write_unsettled(writer, None)
            self._unstamped += len(self._pending)
            self._pending.clear()
            writer.close()
        except LogError as err:
            self._fail(str(err))
        except Exception as err:  # a bug must not leave a recording that silently stopped
            log.exception("the recorder failed")
            self._fail(f"the recorder failed: {type(err).__name__}: {err}")
            with contextlib.suppress(LogError):
                writer.close()

    def _fail(self, reason: str) -> None:
        with self._lock:
            self._error = reason
        self.failed.set()
        subscriber, self._subscriber = self._subscriber, None
        if subscriber is not None:
            with contextlib.suppress(zenoh.ZError):
                subscriber.undeclare()

    def _name_of(self, key: str) -> str | None:
        try:
            return self._names[key]
        except KeyError:
            name = key.removeprefix(self.bus.prefix + "/")
            chosen = name if name != key and self.selection.wants(name) else None
            if name == CLOCK:
                chosen = name  # always decoded: it is the time axis
            self._names[key] = chosen
            return chosen

    def _take(self, writer: SplitLogWriter, sample: _Sample) -> None:
        key, payload, written, seq, received = sample
        name = self._name_of(key)
        if name is None:
            return
        if seq:
            last = self._sequence.get(name)
            self._sequence[name] = seq
            if last is not None and seq > last + 1:  # (a smaller one: another writer, or a restart)
                with self._lock:
                    self._counts.lost[name] = self._counts.lost.get(name, 0) + seq - last - 1
        try:
            value = msgs.decode(payload, msgs.Message)
        except DecodeError:
            with self._lock:
                self._undecodable += 1
            return
        wall = written or received
        if name == CLOCK:
            if isinstance(value, msgs.SimTime):
                was_ready = self.time.ready
                self.time.tick(value.stamp, value.rate, wall)
                if not was_ready and self._pending:
                    self._write_pending(writer)
                if self._unsettled:
                    self._write_unsettled(writer, time.monotonic())
            if not self.selection.wants(CLOCK):
                return
        if not self.time.ready:
            if len(self._pending) < self.QUEUE_LIMIT:
                self._pending.append((name, value, wall))
            else:
                self._unstamped += 1
            return
        self._write_when_settled(writer, name, value, wall)

    def _write_when_settled(self, writer: SplitLogWriter, name: str, value: msgs.Message, wall: float) -> None:
        """Write the value now if its robot time is final, else when the next ``Clock`` value comes."""
        if self.time.settled(wall):
            self._write(writer, name, value, wall)
        else:
            self._unsettled.append((name, value, wall, time.monotonic() + self.time.max_extrapolation))

    def _write_pending(self, writer: SplitLogWriter) -> None:
        pending, self._pending = self._pending, []
        for name, value, wall in pending:
            self._write_when_settled(writer, name, value, wall)

    def _write_unsettled(self, writer: SplitLogWriter, now: float | None) -> None:
        """Write the values waiting for a ``Clock`` value that has come, and those that waited until ``now``
        (monotonic s; all of them if None), in the order they came."""
        waiting, self._unsettled = self._unsettled, []
        for item in waiting:
            name, value, wall, due = item
            if now is None or due <= now or self.time.settled(wall):
                self._write(writer, name, value, wall)
            else:
                self._unsettled.append(item)

    def _write(self, writer: SplitLogWriter, name: str, value: msgs.Message, wall: float) -> None:
        t = self.time.at(wall)
        assert t is not None
        writer.add_encoded(name, type(value), encode_message(value), t, wall)
        if self._translate is not None:
            self._write_translated(writer, name, value, t, wall)
        with self._lock:
            counts = self._counts
            tally = counts.by_name.get(name)
            if tally is None:
                counts.by_name[name] = _Tally(type(value).__name__, 1, t, t)
            else:
                tally.count += 1
                if t > tally.last:
                    tally.last = t
            if counts.messages == 0:
                counts.log_start = counts.log_end = t
            counts.messages += 1
            if t < counts.log_start:
                counts.log_start = t
            elif t > counts.log_end:
                counts.log_end = t

    def _write_translated(self, writer: SplitLogWriter, name: str, value: msgs.Message, t: float, wall: float) -> None:
        assert self._translate is not None
        try:
            translated = list(self._translate(name, value, t))
        except Exception:  # a value the translation cannot take must not stop the recording of the bus
            if self._foreign_errors == 0:
                log.exception("cannot translate a value of %s; the bus message is recorded all the same", name)
            with self._lock:
                self._foreign_errors += 1
            return
        for message in translated:
            writer.add_foreign(message, wall)
            with self._lock:
                self._foreign[message.topic] = self._foreign.get(message.topic, 0) + 1

    # -- status -------------------------------------------------------------------------------------------------

    def status(self) -> RecordStatus:
        """A snapshot of the recording (safe to call from any thread)."""
        writer = self._writer
        with self._lock:
            counts = self._counts
            interfaces = tuple(
                InterfaceCount(n, tally.type, tally.count, tally.first, tally.last, counts.lost.get(n, 0))
                for n, tally in sorted(counts.by_name.items())
            )
            lost = sum(v for n, v in counts.lost.items() if n in counts.by_name)
            error = self._error
            messages, start, end = counts.messages, counts.log_start, counts.log_end
            foreign = tuple(sorted(self._foreign.items()))
            foreign_errors = self._foreign_errors
        try:
            size = writer.size if writer is not None else 0
        except (OSError, ValueError):
            size = 0
        return RecordStatus(
            elapsed=time.time() - self._started if self._started else 0.0,
            messages=messages,
            size=size,
            log_start=start,
            log_end=end,
            interfaces=interfaces,
            undecodable=self._undecodable,
            unstamped=self._unstamped,
            lost=lost,
            parts=tuple(writer.parts) if writer is not None else (),
            time_base="sim" if self.time.sim else "wall",
            error=error,
            foreign=foreign,
            foreign_errors=foreign_errors,
        )


def profile_for(profile: Profile, patterns: Sequence[str], alive: Iterable[str]) -> Profile:
    """The part of a profile to start before recording ``patterns``.

    Keeps the modules that write a matching interface (all of them if ``patterns`` is empty) and the modules of the
    profile they require, less the modules already ``alive`` on the bus.

    Raises:
        PlutoError: no module of the profile writes a matching interface.
    """
    entries = {e.name: e for e in profile.entries}

    def writes(entry_name: str) -> bool:
        if not patterns:
            return True
        entry = entries[entry_name]
        cls = load_module_class(entry.spec.module, entry.spec.params)
        return any(match_names(iface, patterns) for iface in cls.provides)

    wanted: set[str] = set()

    def need(name: str) -> None:
        if name in wanted or name not in entries:
            return
        wanted.add(name)
        for other in entries[name].requires:
            need(other)

    for name in entries:
        if writes(name):
            need(name)
    if not wanted:
        known = sorted({i for i in names.INTERFACES if match_names(i, patterns)})
        raise PlutoError(
            f"no module of profile {profile.name} writes {', '.join(patterns)}"
            + (f" (known interfaces matching: {', '.join(known)})" if known else "")
        )
    running = set(alive)
    return replace(profile, entries=tuple(e for e in profile.entries if e.name in wanted and e.name not in running))
