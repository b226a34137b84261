"""The configuration file and module parameters: clear errors that say where and what."""

from __future__ import annotations

from pathlib import Path

import pytest

from pluto.errors import ConfigError
from pluto.runtime.config import Config, build_params, find_config_file, load_config, parse_override
from pluto.runtime.heartbeat import HeartbeatMonitorParams
from pluto.runtime.module import ModuleParams


def test_an_explicit_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "pluto.toml"
    with pytest.raises(ConfigError, match="does not exist") as err:
        load_config(missing)
    assert str(missing) in str(err.value)


def test_pluto_config_naming_a_missing_file_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "gone.toml"
    monkeypatch.setenv("PLUTO_CONFIG", str(missing))
    with pytest.raises(ConfigError) as err:
        load_config()
    assert str(missing) in str(err.value)


def test_invalid_toml_is_an_error_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[bus]\nrobot = "ok"\nrate = \n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert str(path) in text
    assert "line 3" in text


def test_no_file_at_all_gives_the_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    config = load_config()
    assert config == Config()
    assert config.module_table("heartbeat") == {}


def test_pluto_toml_in_the_current_directory_is_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pluto.toml").write_text("[modules.heartbeat]\nrate_hz = 5.0\n")
    assert find_config_file() == Path("pluto.toml")
    assert load_config().module_table("heartbeat") == {"rate_hz": 5.0}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rate_hz=2", ("rate_hz", 2)),
        ("rate_hz = 2.5", ("rate_hz", 2.5)),
        ("autostart=false", ("autostart", False)),
        ("name=hello", ("name", "hello")),
        ('name="two words"', ("name", "two words")),
        ("ids=[1, 2]", ("ids", [1, 2])),
        ("empty=", ("empty", "")),
    ],
)
def test_parse_override(text: str, expected: tuple[str, object]) -> None:
    name, value = parse_override(text)
    assert (name, value) == expected
    assert type(value) is type(expected[1])


@pytest.mark.parametrize("text", ["bad", "=3", " = 3"])
def test_parse_override_rejects_what_is_not_name_value(text: str) -> None:
    with pytest.raises(ConfigError, match="name=value"):
        parse_override(text)


def test_build_params_merges_layers_later_ones_winning() -> None:
    params = build_params(HeartbeatMonitorParams, {"rate_hz": 5.0, "stale_after": 2.0}, {"rate_hz": 7})
    assert params == HeartbeatMonitorParams(rate_hz=7.0, stale_after=2.0)


def test_build_params_wrong_type_names_the_parameter() -> None:
    with pytest.raises(ConfigError) as err:
        build_params(ModuleParams, {"rate_hz": "abc"}, where="parameters of heartbeat")
    text = str(err.value)
    assert "rate_hz" in text
    assert "parameters of heartbeat" in text


def test_build_params_unknown_parameter_is_named_with_the_known_ones() -> None:
    with pytest.raises(ConfigError) as err:
        build_params(ModuleParams, {"rate_hs": 3.0})
    text = str(err.value)
    assert "rate_hs" in text
    assert "rate_hz" in text  # the list of known parameters helps to spot the typo


@pytest.mark.parametrize("rate", [0, -1.0, 20_000.0])
def test_build_params_rejects_a_rate_out_of_range(rate: float) -> None:
    with pytest.raises(ConfigError, match="rate_hz"):
        build_params(ModuleParams, {"rate_hz": rate})


def test_bus_robot_comes_from_the_file_unless_pluto_robot_is_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "robot.toml"
    path.write_text('[bus]\nrobot = "filebot"\n\n[modules.heartbeat]\nrate_hz = 3.0\n')
    monkeypatch.delenv("PLUTO_ROBOT")
    config = load_config(path)
    assert config.path == path
    assert config.bus.robot == "filebot"
    assert config.module_table("heartbeat") == {"rate_hz": 3.0}
    monkeypatch.setenv("PLUTO_ROBOT", "envbot")
    assert config.bus.robot == "envbot"


def test_a_bad_bus_section_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bus.toml"
    path.write_text('[bus]\nmode = "broker"\n')
    with pytest.raises(ConfigError) as err:
        _ = load_config(path).bus
    assert str(path) in str(err.value)
    assert "mode" in str(err.value)


def test_a_module_table_that_is_not_a_table_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "mod.toml"
    path.write_text("[modules]\nheartbeat = 3\n")
    with pytest.raises(ConfigError, match=r"modules\.heartbeat"):
        load_config(path).module_table("heartbeat")
