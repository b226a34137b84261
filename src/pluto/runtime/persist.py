"""A module's continuation state: what a restarted module needs to go on where its crashed instance was.

docs/design.md, principle 8: a module that restarts continues from its last published estimate, never from a default.
A module keeps a :class:`Continuation` of a msgspec type of its own; it saves its state as it goes
(:meth:`Continuation.save_due`, at most every ``period`` wall seconds, and :meth:`Continuation.save` on a clean
shutdown) and, when it starts, asks :meth:`Continuation.load` for the state of the instance it replaces.

Strategy: the state goes to ``<runtime dir>/state/<module>.state`` (the robot's runtime directory of
:func:`pluto.runtime.launcher.runtime_dir`, beside the logs), as MessagePack in an envelope that says whose state it is:
the module, the supervised session, the simulated run and the time of the state. It is written to a temporary file
in the same folder and renamed over the old one, so a module killed in the middle of a save leaves the previous state
whole (a process being killed, not a power cut: nothing is synced to the disk). Renaming over a file still makes
some file systems (ext4) write its data out at once, a millisecond or several, tens on a busy disk: the periodic
saves of :meth:`Continuation.save_due` are therefore written by the process's saving thread, not on the module's
step; the step only encodes the state (microseconds). A newer state always wins: a queued one that a direct
:meth:`Continuation.save` overtook is dropped, and a killed process loses at most the state still queued, never the
one on disk.

A state is used only when all of these hold, and each refusal is logged and counted, never silent:

* the module is a *restart*: the supervisor behind ``pluto up`` starts a module again after a crash with
  ``PLUTO_RESUME=1`` (:data:`RESUME_ENV`) in its environment; a first start, ``pluto run`` and ``pluto start`` start
  fresh;
* the state belongs to the same supervised session (``PLUTO_SESSION``, :data:`SESSION_ENV`, a new id at every
  ``pluto up``, which also removes the old state files of its modules when it starts): a new session never resumes
  a stale one;
* it belongs to the same simulated run (``SimTime.run``, 0 on the wall clock) and its time is not in the future of
  the module's clock (a state from the future belongs to another time base);
* the file decodes: a corrupt one gives one error line, is counted in :attr:`Continuation.corrupt`, is kept aside as
  ``<module>.state.corrupt`` for a look, and the module starts fresh.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec

RESUME_ENV = "PLUTO_RESUME"
"""Set to ``1`` by the supervisor in a module process it starts again after a crash: load the saved state."""

SESSION_ENV = "PLUTO_SESSION"
"""The id of the supervised session (one ``pluto up``) that started a module process."""

STATE_FOLDER = "state"
"""The folder of the state files in the robot's runtime directory."""

FUTURE_SLACK = 1e-6
"""s: a state stamped up to this much after the clock's time is not from the future (rounding)."""

_VERSION = 1

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)

S = TypeVar("S")


class _Envelope(msgspec.Struct, kw_only=True):
    """What a state file holds: the state and what it belongs to."""

    version: int
    module: str
    session: str
    run: int
    stamp: float
    saved: float
    state: msgspec.Raw


def state_folder(robot: str) -> Path:
    """Where the state files of ``robot`` are (created if needed)."""
    from pluto.runtime.launcher import runtime_dir  # the launcher imports the module runtime, which may import this

    folder = runtime_dir(robot) / STATE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def state_path(robot: str, module: str) -> Path:
    """The state file of a module of ``robot``."""
    return state_folder(robot) / f"{module}.state"


def new_session() -> str:
    """A new session id (for :data:`SESSION_ENV`)."""
    return secrets.token_hex(8)


def clear_states(robot: str, modules: Iterable[str]) -> list[str]:
    """Remove the state files of these modules of ``robot`` (a new session starts fresh); return those removed."""
    removed = []
    for module in modules:
        path = state_path(robot, module)
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(module)
    return removed


def restarted() -> bool:
    """This process was started again by its supervisor after a crash (:data:`RESUME_ENV`)."""
    return os.environ.get(RESUME_ENV, "") not in ("", "0")


class Continuation(Generic[S]):
    """The saved state of one module, of type ``kind`` (a msgspec Struct, or anything msgspec encodes).

    Args:
        path: the state file.
        kind: the state's type.
        module: the module's name (stored, and checked at load).
        resume: load the state at all (default: this process is a supervisor's restart, :func:`restarted`).
        session: the session the state must belong to (default: ``PLUTO_SESSION``, "" outside a supervisor).
        period: wall seconds between two saves of :meth:`save_due`.
        wall: the wall clock for the throttling, s (``time.monotonic``; tests give their own).
        log: where to tell what happened.

    Attributes:
        saves: states written.  save_errors: writes that failed (logged).
        corrupt: files that did not decode.  refused: states of another session, run or time, or module.
    """

    def __init__(
        self,
        path: Path,
        kind: type[S],
        module: str,
        *,
        resume: bool | None = None,
        session: str | None = None,
        period: float = 0.2,
        wall: Callable[[], float] = time.monotonic,
        log: logging.Logger | None = None,
    ) -> None:
        if not period >= 0:
            raise ValueError(f"period must be >= 0, got {period}")
        self.path = path
        self.kind = kind
        self.module = module
        self.resume = restarted() if resume is None else resume
        self.session = os.environ.get(SESSION_ENV, "") if session is None else session
        self.period = period
        self.wall = wall
        self.log = log or logging.getLogger(f"pluto.{module}")
        self._last_save: float | None = None
        self._encoder = msgspec.msgpack.Encoder()
        self._sequence = 0  # of the states encoded
        self._on_disk = 0  # the sequence number of the state in the file
        self._file_lock = threading.Lock()  # one write at a time, the newest last
        self._queue = threading.Condition()
        self._queued: tuple[int, bytes] | None = None
        self.saves = 0
        self.save_errors = 0
        self.corrupt = 0
        self.refused = 0

    @classmethod
    def of(cls, module: Any, kind: type[S], *, period: float = 0.2, resume: bool | None = None) -> Continuation[S]:
        """The continuation of a :class:`~pluto.runtime.module.Module` (its file in its robot's state folder)."""
        return cls(
            state_path(module.bus.robot, module.module_name),
            kind,
            module.module_name,
            resume=resume,
            period=period,
            log=module.get_logger(),
        )

    # -- saving -------------------------------------------------------------------------------------------------

    def due(self) -> bool:
        """A save would be taken now (``period`` wall seconds since the last)."""
        return self._last_save is None or self.wall() - self._last_save >= self.period

    def save_due(self, make: Callable[[], S], stamp: float, run: int = 0, *, now: bool = False) -> bool:
        """Save the state ``make()`` builds if ``period`` has passed since the last save, or at once with ``now``
        (the state took a change a restart must not go back before: a command accepted); ``make`` is not called
        otherwise. True if it was taken. It is encoded now and written by the saving thread (:meth:`flush` waits for
        it). ``stamp`` and ``run`` as in :meth:`save`."""
        if not (now or self.due()):
            return False
        item = self._encode(make(), stamp, run)
        if item is None:
            return False
        with self._queue:
            self._queued = item  # an older one not written yet is superseded
        _SAVER.queue(self)
        return True

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every state taken so far is on disk (or its write failed); False if ``timeout`` s passed."""
        deadline = time.monotonic() + timeout
        with self._queue:
            while self._queued is not None or self._on_disk < self._sequence:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._queue.wait(left)
        return True

    def _write_queued(self) -> None:
        """Write the state queued, if any (on the saving thread)."""
        with self._queue:
            item, self._queued = self._queued, None
        if item is not None:
            self._write(*item)

    def save(self, state: S, stamp: float, run: int = 0) -> bool:
        """Write ``state`` now (atomically: a temporary file renamed over the old one).

        Args:
            state: the module's state.
            stamp: the time of the state on the module's clock, s (a restart refuses it if it is in the future of
                its own clock).
            run: the simulated run it belongs to (``SimTime.run``; 0 on the wall clock).

        Returns:
            True if written; False if the write failed (logged, counted in :attr:`save_errors`; the old file stays).
        """
        item = self._encode(state, stamp, run)
        return item is not None and self._write(*item)

    def _encode(self, state: S, stamp: float, run: int) -> tuple[int, bytes] | None:
        """The file's bytes for ``state`` with their sequence number; None if it does not encode (counted)."""
        self._last_save = self.wall()
        try:
            envelope = _Envelope(
                version=_VERSION,
                module=self.module,
                session=self.session,
                run=int(run),
                stamp=float(stamp),
                saved=time.time(),
                state=msgspec.Raw(self._encoder.encode(state)),
            )
            data = self._encoder.encode(envelope)
        except (TypeError, msgspec.EncodeError) as err:
            self._failed(err)
            return None
        with self._queue:
            self._sequence += 1
            return self._sequence, data

    def _write(self, sequence: int, data: bytes) -> bool:
        """Write one encoded state unless a newer one is on disk already; True if the file holds it or a newer."""
        with self._file_lock:
            if sequence <= self._on_disk:
                return True
            # the temporary file is this process's own (one writer at a time here, and a module restarted while
            # its old process lives has another pid); plain os calls, as a fleet's hundred modules save 5 times a
            # second each
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            try:
                try:
                    handle = os.open(temporary, _CREATE, 0o600)
                except FileNotFoundError:  # the folder went (or never was): make it, once
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    handle = os.open(temporary, _CREATE, 0o600)
                try:
                    try:
                        view = memoryview(data)
                        while view:
                            view = view[os.write(handle, view) :]
                    finally:
                        os.close(handle)
                    os.replace(temporary, self.path)
                except BaseException:
                    temporary.unlink(missing_ok=True)
                    raise
            except OSError as err:
                self._failed(err)
                self._written(sequence)  # done with it: a flush does not wait on it
                return False
            self.saves += 1
            self._written(sequence)
            return True

    def _written(self, sequence: int) -> None:
        with self._queue:
            self._on_disk = max(self._on_disk, sequence)
            self._queue.notify_all()

    def _failed(self, err: Exception) -> None:
        self.save_errors += 1
        if self.save_errors == 1 or self.save_errors % 100 == 0:
            self.log.error("cannot save the state to %s (%d failures): %s", self.path, self.save_errors, err)

    def clear(self) -> None:
        """Remove the state file (nothing to continue from)."""
        self.path.unlink(missing_ok=True)

    # -- loading ------------------------------------------------------------------------------------------------

    def load(self, now: float | None, run: int | None = 0) -> tuple[S, float] | None:
        """The state of the crashed instance this one replaces, with its stamp; None to start fresh.

        Args:
            now: the module's clock, s: a state stamped later is refused (None: no such check, for the clock's own
                source, the simulator).
            run: the simulated run the module is in (``SimTime.run``; 0: the wall clock or not known yet); a state
                of another run is refused (None: no such check, for the simulator, whose run the state says).

        Returns:
            (state, its stamp), or None: not a restart, no file, or a file refused (why is logged).
        """
        if not self.resume:
            return None
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self.log.warning("restarted, but no saved state in %s: starting fresh", self.path)
            return None
        except OSError as err:
            self.log.error("restarted, but the saved state %s cannot be read: %s; starting fresh", self.path, err)
            self.corrupt += 1
            return None
        try:
            envelope = msgspec.msgpack.decode(data, type=_Envelope)
            if envelope.version != _VERSION:
                raise ValueError(f"version {envelope.version}, this program reads {_VERSION}")
            state = msgspec.msgpack.decode(envelope.state, type=self.kind)
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as err:
            self.corrupt += 1
            aside = self.path.with_name(self.path.name + ".corrupt")
            try:
                os.replace(self.path, aside)
            except OSError:
                aside = self.path
            self.log.error(
                "restarted, but the saved state %s is corrupt (%s; %d so far): starting fresh; the file is kept as %s",
                self.path,
                err,
                self.corrupt,
                aside,
            )
            return None
        why = self._refusal(envelope, now, run)
        if why:
            self.refused += 1
            self.log.warning("restarted, but the saved state %s is %s: starting fresh", self.path, why)
            return None
        return state, envelope.stamp

    def _refusal(self, envelope: _Envelope, now: float | None, run: int | None) -> str:
        if envelope.module != self.module:
            return f"module {envelope.module}'s, not {self.module}'s"
        if envelope.session != self.session:
            return f"of another session ({envelope.session or 'none'}, this one is {self.session or 'none'})"
        if run is not None and envelope.run != run and (envelope.run or run):
            return f"of another simulated run ({envelope.run}, the clock's is {run})"
        if now is not None and envelope.stamp > now + FUTURE_SLACK:
            return f"from the future of the clock (stamped {envelope.stamp:.3f} s, the clock says {now:.3f} s)"
        return ""


class _Saver:
    """The process's saving thread: writes the states that :meth:`Continuation.save_due` queued, in the order they
    came, and ends when none is left (the next one starts it again). One for every module of the process: a fleet
    in one process has a hundred."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[Continuation[Any], None] = {}  # a set in the order they came
        self._thread: threading.Thread | None = None

    def queue(self, continuation: Continuation[Any]) -> None:
        with self._lock:
            self._waiting[continuation] = None
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pluto-saver", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._waiting:
                    self._thread = None
                    return
                continuation = next(iter(self._waiting))
                del self._waiting[continuation]
            continuation._write_queued()

    def forked(self) -> None:
        """In a forked child: the parent's thread is not there."""
        self._lock = threading.Lock()
        self._waiting = {}
        self._thread = None


_SAVER = _Saver()
os.register_at_fork(after_in_child=_SAVER.forked)


def clock_run(clock: Any) -> int:
    """The simulated run of a module's clock (``SimTime.run``; 0 for the wall clock or before the first tick)."""
    run = getattr(clock, "run", 0)
    return run if isinstance(run, int) else 0
