"""What a waiting command prints: a progress line rewritten in place on a terminal, printed only when its words
change elsewhere; the outcome on stdout; what it waits for, said once, only when it has to wait. And the options
that say how long the module commands wait, the same in each."""

from __future__ import annotations

import io

import pytest

from pluto.bus import BusTimeout
from pluto.cli.main import build_parser
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


@pytest.mark.parametrize("command", ["drive", "avoid", "motion", "follow"])
def test_every_module_command_waits_for_its_status_up_to_a_timeout(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build_parser().parse_args([command, "status"]).timeout == 5.0
    assert build_parser().parse_args([command, "status", "--timeout", "0.5"]).timeout == 0.5
    for bad in ("0", "-1", "nan", "inf", "soon"):
        with pytest.raises(SystemExit) as exit_info:
            build_parser().parse_args([command, "status", "--timeout", bad])
        assert exit_info.value.code == 2
        assert "--timeout" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "stopped"),
    [
        (["avoid", "goto", "1", "2"], "the robot"),
        (["motion", "moveto", "1", "2"], "the motion"),
        (["motion", "explore", "1", "2"], "the motion"),
    ],
)
def test_goal_waits_take_the_same_wait_and_timeout(
    argv: list[str], stopped: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(argv)
    assert (args.wait, args.timeout) == (False, None)
    args = build_parser().parse_args([*argv, "--wait", "--timeout", "30"])
    assert (args.wait, args.timeout) == (True, 30.0)
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--wait", "--timeout", "-5"])  # not a wait that times out at once
    assert "a wait is > 0 s" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--help"])
    assert f"({stopped} is stopped, exit 1)" in " ".join(capsys.readouterr().out.split())
