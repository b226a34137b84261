"""What a waiting command tells its user: what it waits for, and a live progress line.

Every ``pluto`` command that waits says so on stderr (stdout stays for results a script reads): once, when the
wait starts to be noticeable, and as a progress line while it lasts. On a terminal the line is rewritten in place;
elsewhere (a log, a pipe) a new line is printed only when its words change or every few seconds, so a log stays
short. The outcome of the wait is a result: it goes to stdout.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from typing import TextIO, TypeVar

__all__ = ["ProgressLine", "first_value", "say"]

T = TypeVar("T")


def say(text: str, stream: TextIO | None = None) -> None:
    """One line on stderr (what the command is waiting for, what it did on the user's behalf)."""
    print(text, file=stream or sys.stderr, flush=True)


def first_value(current: Callable[[], T | None], wait: Callable[[float], T], what: str, timeout: float) -> T:
    """The value ``current()`` has now, else the first one ``wait(timeout)`` gets, after saying on stderr what the
    command waits for.

    Raises:
        BusTimeout: as ``wait`` does, when nothing came within ``timeout`` s.
    """
    value = current()
    if value is not None:
        return value
    say(f"waiting for {what} (up to {timeout:g} s) ...")
    return wait(timeout)


class ProgressLine:
    """A progress line on stderr: rewritten in place on a terminal, else printed when its words change.

    Args:
        stream: where to write (default stderr).
        every: s between two lines with the same words when not on a terminal.
    """

    def __init__(self, stream: TextIO | None = None, every: float = 5.0) -> None:
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._every = every
        self._words = ""
        self._printed = -float("inf")
        self._open = False

    def show(self, text: str) -> None:
        """Show ``text`` as the current progress."""
        if self._tty:
            self._stream.write("\r\x1b[K" + text)
            self._stream.flush()
            self._open = True
            return
        words = re.sub(r"-?\d+(\.\d+)?", "#", text)  # the same words with other numbers are no news
        now = time.monotonic()
        if words != self._words or now - self._printed >= self._every:
            self._words, self._printed = words, now
            print(text, file=self._stream, flush=True)

    def finish(self, text: str = "") -> None:
        """End the progress line; print the outcome ``text``, if given, on stdout (a result a script may read)."""
        if self._tty and self._open:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._open = False
        if text:
            print(text, flush=True)
