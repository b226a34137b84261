"""``pluto dmu-sim`` and ``pluto gps-sim``: their options, and bad ones refused with a clear message."""

from __future__ import annotations

import pytest

from pluto.cli.main import build_parser


def test_dmu_sim_options() -> None:
    args = build_parser().parse_args(["dmu-sim", "--pty", "--link-noise", "0.01", "--rate", "50"])
    assert args.pty and args.link_noise == 0.01 and args.rate == 50.0 and not args.sim


def test_gps_sim_options() -> None:
    args = build_parser().parse_args(["gps-sim", "--port", "9000", "--origin", "48.1173,11.5167", "--replay", "f"])
    assert args.port == 9000 and args.origin == (48.1173, 11.5167) and args.replay == "f"


@pytest.mark.parametrize(
    "argv",
    [
        ["dmu-sim", "--link-noise", "1.5"],
        ["dmu-sim", "--port", "1", "--pty"],
        ["gps-sim", "--origin", "95,10"],
        ["gps-sim", "--origin", "north"],
        ["gps-sim", "--replay", "f", "--sim"],
    ],
)
def test_bad_options_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err
