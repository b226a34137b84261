"""``pluto key``'s command line: its pages and options, checked before anything opens."""

from __future__ import annotations

import pytest

from pluto.cli import key_cmd
from pluto.cli.key.keymap import PAGES
from pluto.cli.main import build_parser
from pluto.errors import ConfigError


def test_every_page_is_on_the_command_line() -> None:
    assert set(key_cmd.PAGE_NAMES) == set(PAGES)
    args = build_parser().parse_args(["key", "motion", "--speed", "0.3", "--release", "0.5"])
    assert (args.page, args.speed, args.turn_rate, args.release, args.first_repeat) == ("motion", 0.3, 0.5, 0.5, 0.7)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["key", "teleport"])


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [("--speed", "-1", "speed"), ("--release", "0", "release_after"), ("--first-repeat", "nan", "first_repeat")],
)
def test_bad_options_are_refused(option: str, value: str, match: str) -> None:
    args = build_parser().parse_args(["key", "drive", option, value])
    with pytest.raises(ConfigError, match=match):
        key_cmd.run(args)
