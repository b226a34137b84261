"""Motion sequence (``.mot``) and posture (``.pos``) files: parsing, and a motion directory that is safe to serve.

A motion sequence file::

    #MSq
    degrees
    advanceTime 50
    Elbow   15
    Shldr:rot~ -45  0.5
    advanceTime 850
    load grip_open.pos
    #END

starts with ``#MSq`` and ends with ``#END``; other lines starting with ``#`` are comments. Commands are
case-insensitive: ``advanceTime N`` / ``delay N`` move the playhead forward N ms, ``setTime N`` sets it; ``load FILE``
/ ``overlay FILE`` apply a posture at the playhead (only its non-zero weights) or overlay another sequence (leaving
the playhead at its end), ``loadExplicit FILE`` applies a posture's zero weights too; ``radians`` (the default) and
``degrees`` set the unit of the values that follow. A joint line is ``<output> <value> [weight]`` (weight 1 if
omitted); names match case-sensitively, a trailing ``~`` is stripped, and a name that matches no output tries
``L<name>`` and ``R<name>`` (one line sets both sides). A posture file starts with ``#POS``, holds joint lines (and
``degrees``/``radians``) and ends with ``#END``. Values of prismatic joints (the gripper) are in mm whatever the
angle unit.

Every error names the file, the line and the reason (:class:`MotionFileError`).
"""

# Strategy: parsing is pure (text in, keyframes out); the files a `load` names are fetched through a loader the
# caller passes, so the parser never touches the file system. :class:`MotionLibrary` is that loader for a motion
# directory served to the network: a name is a relative path of plain parts (no `..`, no absolute path, no hidden
# or odd characters), it is resolved with symlinks followed and must still be inside the directory, and the file is
# size-capped, so a client can read nothing else. Nesting depth and the total number of keyframes are capped too,
# so a file that loads itself, or a huge one, fails with an error instead of eating memory. The time-0 keyframes
# are kept as written: the player replaces their values with the arm's position when it starts (reference:
# "the time-0 keyframe of every output is replaced by its current position").

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pluto.errors import PlutoError
from pluto.hardware.arm.kinematics import MM, ArmModel

__all__ = [
    "Keyframe",
    "MotionFileError",
    "MotionLibrary",
    "MotionSequence",
    "Posture",
    "parse_motion",
]

MAX_DEPTH = 8
"""Deepest nesting of ``load``/``overlay``."""
MAX_KEYFRAMES = 100_000
"""Most keyframes one motion may hold (all outputs, nested files included)."""
MAX_FILE_BYTES = 256 * 1024
"""Largest motion or posture file read."""


class MotionFileError(PlutoError, ValueError):
    """A motion or posture file is invalid, or cannot be read.

    Attributes:
        source: the file (as the client named it).
        line: the line number, 1-based (0 when the whole file is at fault).
        reason: what is wrong.
    """

    def __init__(self, source: str, line: int, reason: str) -> None:
        self.source, self.line, self.reason = source, line, reason
        super().__init__(f"{source}:{line}: {reason}" if line else f"{source}: {reason}")


@dataclass(frozen=True)
class Keyframe:
    """A keyframe of one output: at ``time`` s, ``value`` rad or m, ``weight`` (0 lets other motions drive it)."""

    time: float
    value: float
    weight: float


@dataclass(frozen=True)
class MotionSequence:
    """A parsed motion sequence.

    Attributes:
        source: the file name.
        keyframes: per output index, its keyframes sorted by time (only outputs the file sets).
        end: the playhead at the end of the file or the last keyframe, whichever is later, s (where an overlay
            leaves the playhead).
    """

    source: str
    keyframes: dict[int, tuple[Keyframe, ...]]
    end: float

    @property
    def last_keyframe(self) -> float:
        """Time of the last keyframe, s: playback ends when the playhead passes it."""
        return max((frames[-1].time for frames in self.keyframes.values() if frames), default=0.0)


@dataclass(frozen=True)
class Posture:
    """A parsed posture: per output index, its (value rad or m, weight)."""

    source: str
    values: dict[int, tuple[float, float]]


Loader = Callable[[str], tuple[str, str]]
"""Fetches a file a motion loads: name -> (text, source name for errors). Raises MotionFileError."""

_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _number(token: str, source: str, line: int, what: str) -> float:
    if not _NUMBER.match(token):
        raise MotionFileError(source, line, f"{what} must be a number, not {token!r}")
    value = float(token)
    if not math.isfinite(value):
        raise MotionFileError(source, line, f"{what} is too large: {token!r}")
    return value


class _Parser:
    """Parses one file (and, through the loader, the files it loads) into keyframes."""

    def __init__(self, model: ArmModel, loader: Loader | None, depth: int, budget: list[int]) -> None:
        self.model = model
        self.loader = loader
        self.depth = depth
        self.budget = budget  # keyframes still allowed, shared with nested parsers
        self.frames: dict[int, dict[float, tuple[float, float]]] = {}
        self.degrees = False
        self.playhead = 0.0  # ms

    # -- names and values ---------------------------------------------------------------------------------------

    def outputs_of(self, name: str, source: str, line: int) -> list[int]:
        names = self.model.output_names
        name = name.removesuffix("~")
        if name in names:
            return [names.index(name)]
        sides = [names.index(side) for side in (f"L{name}", f"R{name}") if side in names]
        if not sides:
            known = ", ".join(names)
            raise MotionFileError(source, line, f"unknown output or command {name!r} (outputs: {known})")
        return sides

    def joint_line(self, words: list[str], source: str, line: int) -> list[tuple[int, float, float]]:
        if len(words) not in (2, 3):
            raise MotionFileError(source, line, f"a joint line is '<output> <value> [weight]', got {' '.join(words)}")
        outputs = self.outputs_of(words[0], source, line)
        raw = _number(words[1], source, line, "the value")
        weight = _number(words[2], source, line, "the weight") if len(words) == 3 else 1.0
        if weight < 0.0:
            raise MotionFileError(source, line, f"the weight must be >= 0, got {weight:g}")
        result = []
        for index in outputs:
            if self.model.links[index].type == "prismatic":
                value = raw * MM
            else:
                value = math.radians(raw) if self.degrees else raw
            result.append((index, value, weight))
        return result

    def set_frame(self, index: int, time_ms: float, value: float, weight: float, source: str, line: int) -> None:
        frames = self.frames.setdefault(index, {})
        if time_ms not in frames:
            self.budget[0] -= 1
            if self.budget[0] < 0:
                raise MotionFileError(source, line, f"the motion has more than {MAX_KEYFRAMES} keyframes")
        frames[time_ms] = (value, weight)

    # -- files --------------------------------------------------------------------------------------------------

    def lines(self, text: str, source: str, header: str) -> list[tuple[int, list[str]]]:
        """The meaningful lines of a file between its header and ``#END``, as (line number, words)."""
        rows = text.splitlines()
        first = next((i for i, row in enumerate(rows) if row.strip()), None)
        if first is None or rows[first].strip() != header:
            raise MotionFileError(source, (first or 0) + 1, f"the file must start with {header}")
        body: list[tuple[int, list[str]]] = []
        for i in range(first + 1, len(rows)):
            row = rows[i].strip()
            if row == "#END":
                extra = next((j for j in range(i + 1, len(rows)) if rows[j].strip()), None)
                if extra is not None:
                    raise MotionFileError(source, extra + 1, "text after #END")
                return body
            if row and not row.startswith("#"):
                body.append((i + 1, row.split()))
        raise MotionFileError(source, len(rows), "missing #END at the end of the file")

    def posture(self, text: str, source: str) -> Posture:
        values: dict[int, tuple[float, float]] = {}
        for line, words in self.lines(text, source, "#POS"):
            command = words[0].lower()
            if command in ("degrees", "radians") and len(words) == 1:
                self.degrees = command == "degrees"
                continue
            for index, value, weight in self.joint_line(words, source, line):
                values[index] = (value, weight)
        return Posture(source, values)

    def sequence(self, text: str, source: str) -> None:
        for line, words in self.lines(text, source, "#MSq"):
            command = words[0].lower()
            if command in ("advancetime", "delay", "settime"):
                if len(words) != 2:
                    raise MotionFileError(source, line, f"{words[0]} takes one number of ms")
                ms = _number(words[1], source, line, f"the time of {words[0]}")
                if ms < 0:
                    raise MotionFileError(source, line, f"{words[0]} needs a time >= 0 ms, got {ms:g}")
                self.playhead = ms if command == "settime" else self.playhead + ms
            elif command in ("degrees", "radians"):
                if len(words) != 1:
                    raise MotionFileError(source, line, f"{words[0]} takes no argument")
                self.degrees = command == "degrees"
            elif command in ("load", "overlay", "loadexplicit"):
                if len(words) != 2:
                    raise MotionFileError(source, line, f"{words[0]} takes one file name")
                self.load(words[1], explicit=command == "loadexplicit", source=source, line=line)
            else:
                for index, value, weight in self.joint_line(words, source, line):
                    self.set_frame(index, self.playhead, value, weight, source, line)

    def load(self, name: str, *, explicit: bool, source: str, line: int) -> None:
        if self.loader is None:
            raise MotionFileError(source, line, f"cannot load {name!r}: no motion directory")
        if self.depth >= MAX_DEPTH:
            raise MotionFileError(source, line, f"files nested more than {MAX_DEPTH} deep (does a file load itself?)")
        try:
            text, nested_source = self.loader(name)
        except MotionFileError as err:
            raise MotionFileError(source, line, f"cannot load {name!r}: {err.reason}") from None
        nested = _Parser(self.model, self.loader, self.depth + 1, self.budget)
        try:
            parsed = nested.parse(text, nested_source)
        except MotionFileError as err:
            # The error stays at its place in the nested file; the chain of loads that led there follows it.
            raise MotionFileError(err.source, err.line, f"{err.reason} (loaded from {source}:{line})") from None
        if isinstance(parsed, Posture):
            self.apply_posture(parsed, explicit, source, line)
            return
        if explicit:
            raise MotionFileError(source, line, f"loadExplicit takes a posture (.pos) file, {name!r} is a sequence")
        for index, frames in parsed.keyframes.items():
            for frame in frames:
                self.set_frame(index, self.playhead + frame.time * 1000.0, frame.value, frame.weight, source, line)
        self.playhead += parsed.end * 1000.0

    def apply_posture(self, posture: Posture, explicit: bool, source: str, line: int) -> None:
        for index in range(self.model.num_outputs):
            value, weight = posture.values.get(index, (math.nan, 0.0))
            if weight > 0.0 or (explicit and index in posture.values):
                self.set_frame(index, self.playhead, value, weight, source, line)
            elif explicit:
                # Released (weight 0) where it is: the value is the one it has at the playhead.
                self.set_frame(index, self.playhead, self.value_at(index, self.playhead), 0.0, source, line)

    def value_at(self, index: int, time_ms: float) -> float:
        before = [(t, v) for t, (v, _w) in self.frames.get(index, {}).items() if t <= time_ms]
        return max(before)[1] if before else math.nan

    def parse(self, text: str, source: str) -> MotionSequence | Posture:
        head = text.lstrip()
        if head.startswith("#POS"):
            return self.posture(text, source)
        self.sequence(text, source)
        keyframes = {
            index: tuple(Keyframe(t / 1000.0, v, w) for t, (v, w) in sorted(frames.items()))
            for index, frames in sorted(self.frames.items())
        }
        last = max((frames[-1].time for frames in keyframes.values()), default=0.0)
        return MotionSequence(source, keyframes, max(last, self.playhead / 1000.0))


def parse_motion(
    text: str, model: ArmModel, source: str = "<motion>", loader: Loader | None = None
) -> MotionSequence | Posture:
    """Parse a motion sequence (``#MSq``) or a posture (``#POS``) for an arm.

    Args:
        text: the file's text.
        model: the arm (its output names and joint types).
        source: the file's name, for errors.
        loader: fetches the files ``load``/``overlay`` name; without it, loading is an error.

    Returns:
        A MotionSequence or a Posture (times in s, values in rad or m).

    Raises:
        MotionFileError: the file (or one it loads) is invalid; says which file, which line and why.
    """
    return _Parser(model, loader, 0, [MAX_KEYFRAMES]).parse(text, source)


_SAFE_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")


class MotionLibrary:
    """The motion directory served to clients: names are resolved inside it and nowhere else.

    Args:
        root: the directory.
        model: the arm the motions are for.

    Raises:
        MotionFileError: the directory does not exist.
    """

    def __init__(self, root: str | Path, model: ArmModel) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise MotionFileError(str(root), 0, "the motion directory does not exist")
        self.model = model

    def resolve(self, name: str) -> Path:
        """The file ``name`` stands for, checked to be a regular file inside the directory.

        Raises:
            MotionFileError: an absolute path, a ``..`` or odd part, a symlink leading out, or no such file.
        """
        parts = name.split("/")
        if not name or len(name) > 255 or name.startswith("/") or not all(_SAFE_PART.match(p) for p in parts):
            raise MotionFileError(_printable(name), 0, "not a valid motion file name (a relative path of plain parts)")
        path = self.root.joinpath(*parts)
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            raise MotionFileError(name, 0, "no such motion file") from None
        if not real.is_relative_to(self.root):
            raise MotionFileError(name, 0, "the file is outside the motion directory")
        if not real.is_file():
            raise MotionFileError(name, 0, "not a regular file")
        return real

    def read(self, name: str) -> tuple[str, str]:
        """The text of a motion file and its name (a :data:`Loader`).

        Raises:
            MotionFileError: see :meth:`resolve`; too large, unreadable or not UTF-8 text.
        """
        path = self.resolve(name)
        try:
            with open(path, "rb") as handle:
                if os.fstat(handle.fileno()).st_size > MAX_FILE_BYTES:
                    raise MotionFileError(name, 0, f"larger than {MAX_FILE_BYTES} bytes")
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as err:
            raise MotionFileError(name, 0, f"cannot read it: {err.strerror}") from None
        try:
            return data.decode("utf-8"), name
        except UnicodeDecodeError:
            raise MotionFileError(name, 0, "not UTF-8 text") from None

    def load(self, name: str) -> MotionSequence | Posture:
        """Parse the motion file ``name`` (files it loads come from the same directory).

        Raises:
            MotionFileError: the file cannot be served or is invalid.
        """
        text, source = self.read(name)
        return parse_motion(text, self.model, source, self.read)

    def names(self) -> Sequence[str]:
        """The motion and posture files in the directory (relative names), sorted."""
        found = []
        for path in self.root.rglob("*"):
            if path.suffix in (".mot", ".pos") and path.is_file():
                found.append(path.relative_to(self.root).as_posix())
        return sorted(found)


def _printable(text: str) -> str:
    shown = "".join(c if c.isprintable() else "?" for c in text[:40])
    return shown + ("..." if len(text) > 40 else "")
