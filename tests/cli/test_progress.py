"""What a waiting command prints: a progress line rewritten in place on a terminal, printed only when its words
change elsewhere; the outcome on stdout; what it waits for, said once, only when it has to wait."""

from __future__ import annotations

import io

import pytest

from pluto.bus import BusTimeout
from pluto.cli.progress import ProgressLine, first_value


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_line_is_rewritten_in_place(capsys: pytest.CaptureFixture[str]) -> None:
    screen = Terminal()
    line = ProgressLine(screen)
    line.show("goto (1, 0): 0.90 m to go")
    line.show("goto (1, 0): 0.50 m to go")
    line.finish("goal reached")
    assert screen.getvalue() == "\r\x1b[Kgoto (1, 0): 0.90 m to go\r\x1b[Kgoto (1, 0): 0.50 m to go\r\x1b[K"
    assert capsys.readouterr().out == "goal reached\n"


def test_in_a_log_only_new_words_make_a_new_line(capsys: pytest.CaptureFixture[str]) -> None:
    log = io.StringIO()
    line = ProgressLine(log, every=3600.0)
    line.show("goto (1, 0): 0.90 m to go; goto running")
    line.show("goto (1, 0): 0.80 m to go; goto running")  # only numbers changed: no news
    line.show("goto (1, 0): 0.10 m to go; goal reached")
    line.finish()
    assert log.getvalue().splitlines() == [
        "goto (1, 0): 0.90 m to go; goto running",
        "goto (1, 0): 0.10 m to go; goal reached",
    ]
    assert capsys.readouterr().out == ""


def test_first_value_waits_only_when_there_is_none(capsys: pytest.CaptureFixture[str]) -> None:
    waited: list[float] = []

    def wait(timeout: float) -> str:
        waited.append(timeout)
        return "later"

    assert first_value(lambda: "now", wait, "the status", 5.0) == "now"
    assert (waited, capsys.readouterr().err) == ([], "")
    assert first_value(lambda: None, wait, "the status", 5.0) == "later"
    assert waited == [5.0]
    assert capsys.readouterr().err == "waiting for the status (up to 5 s) ...\n"

    def never(timeout: float) -> str:
        raise BusTimeout(f"nothing within {timeout} s")

    with pytest.raises(BusTimeout):
        first_value(lambda: None, never, "the status", 0.5)
