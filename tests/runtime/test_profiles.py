"""Profiles: loading by name or path, dependency order, cycles, unknown names, local profiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from pluto.errors import ConfigError, ModuleNotFound
from pluto.runtime.profiles import RestartPolicy, available_profiles, load_profile, parse_profile, with_params

SAMPLES = "tests.runtime.sample_modules"


def names(profile_entries: tuple) -> list[str]:  # type: ignore[type-arg]
    return [entry.name for entry in profile_entries]


def test_builtin_heartbeat_profile_starts_the_heartbeat_before_its_monitor() -> None:
    profile = load_profile("heartbeat")
    assert profile.name == "heartbeat"
    assert profile.description
    assert names(profile.entries) == ["heartbeat", "heartbeat-monitor"]
    assert profile.entries[1].requires == ("heartbeat",)
    assert profile.entries[0].spec.params == {"rate_hz": 10.0}


def test_start_order_follows_requires_not_the_file_order() -> None:
    data = {"modules": {"heartbeat-monitor": {"rate_hz": 2.0}, "heartbeat": {}}}
    profile = parse_profile("reversed", data, "test profile")
    assert names(profile.entries) == ["heartbeat", "heartbeat-monitor"]
    monitor = profile.entries[1]
    assert monitor.spec.module == "heartbeat-monitor"
    assert monitor.spec.params == {"rate_hz": 2.0}
    assert monitor.restart is True


def test_sample_consumer_comes_after_its_provider() -> None:
    data = {
        "modules": {
            "late-consumer": {"module": f"{SAMPLES}:LateConsumer"},
            "slow-provider": {"module": f"{SAMPLES}:SlowProvider", "delay": 0.1},
        }
    }
    profile = parse_profile("pair", data, "test profile")
    assert names(profile.entries) == ["slow-provider", "late-consumer"]
    assert profile.entries[0].spec.params == {"delay": 0.1}  # `module` is not a parameter


def test_a_cycle_is_an_error_showing_the_cycle() -> None:
    data = {"modules": {"cycle-a": {"module": f"{SAMPLES}:CycleA"}, "cycle-b": {"module": f"{SAMPLES}:CycleB"}}}
    with pytest.raises(ConfigError) as err:
        parse_profile("loop", data, "loop.toml")
    text = str(err.value)
    assert "loop.toml" in text
    assert "cycle" in text
    assert "cycle-a -> cycle-b -> cycle-a" in text


def test_an_unknown_module_is_module_not_found() -> None:
    with pytest.raises(ModuleNotFound, match="nope"):
        parse_profile("bad", {"modules": {"nope": {}}}, "test profile")


def test_an_unknown_module_close_to_a_known_one_gets_a_suggestion() -> None:
    with pytest.raises(ModuleNotFound, match="did you mean heartbeat"):
        parse_profile("bad", {"modules": {"heartbaet": {}}}, "test profile")


def test_an_unknown_profile_is_module_not_found_with_a_suggestion() -> None:
    with pytest.raises(ModuleNotFound, match="did you mean heartbeat"):
        load_profile("heartbaet")
    with pytest.raises(ModuleNotFound, match="no profile named 'zzz-nothing'"):
        load_profile("zzz-nothing")


def test_a_missing_profile_file_is_module_not_found(tmp_path: Path) -> None:
    with pytest.raises(ModuleNotFound, match="does not exist"):
        load_profile(str(tmp_path / "missing.toml"))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"modules": {}}, "at least one"),
        ({}, "at least one"),
        ({"modules": {"heartbeat": {}}, "extra": 1}, "unknown keys"),
        ({"modules": {"heartbeat": 3}}, "must be a table"),
        ({"modules": {"heartbeat": {}}, "restart": {"max_restart": 2}}, "restart"),
        ({"modules": {"heartbeat": {}}, "restart": {"backoff": "fast"}}, "restart"),
    ],
)
def test_bad_profiles_are_config_errors(data: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError, match=message):
        parse_profile("bad", data, "bad.toml")


def test_restart_table_and_per_module_restart_flag() -> None:
    data = {
        "restart": {"max_restarts": 2, "backoff": 0.05},
        "modules": {"heartbeat": {"restart": False}},
    }
    profile = parse_profile("r", data, "r.toml")
    assert profile.restart == RestartPolicy(max_restarts=2, backoff=0.05)
    assert profile.entries[0].restart is False
    assert profile.entries[0].spec.params == {}


def test_a_profile_file_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('description = "mine"\n[modules.heartbeat]\nrate_hz = 4.0\n')
    profile = load_profile(str(path))
    assert profile.name == "mine"
    assert profile.path == path
    assert names(profile.entries) == ["heartbeat"]


def test_invalid_toml_in_a_profile_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[modules.heartbeat\n")
    with pytest.raises(ConfigError, match=r"broken\.toml.*line 1"):
        load_profile(str(path))


def test_local_profiles_override_and_add(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "heartbeat.toml").write_text('description = "local demo"\n[modules.heartbeat]\nrate_hz = 3.0\n')
    (folder / "extra.toml").write_text(
        'description = "an extra one"\n[modules.heartbeat-monitor]\n[modules.heartbeat]\n'
    )
    demo = load_profile("heartbeat")
    assert demo.description == "local demo"
    assert names(demo.entries) == ["heartbeat"]
    assert demo.entries[0].spec.params == {"rate_hz": 3.0}
    extra = load_profile("extra")
    assert names(extra.entries) == ["heartbeat", "heartbeat-monitor"]
    listed = available_profiles()
    assert listed["heartbeat"] == "local demo"
    assert listed["extra"] == "an extra one"


def test_available_profiles_lists_the_builtin_heartbeat(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    listed = available_profiles()
    assert "heartbeat" in listed
    assert "heartbeat" in listed["heartbeat"]


def test_with_params_replaces_parameters_of_one_module() -> None:
    profile = load_profile("heartbeat")
    changed = with_params(profile, "heartbeat", rate_hz=50.0, autostart=False)
    assert changed.entries[0].spec.params == {"rate_hz": 50.0, "autostart": False}
    assert changed.entries[1] == profile.entries[1]
    assert profile.entries[0].spec.params == {"rate_hz": 10.0}  # the original is unchanged
    with pytest.raises(ModuleNotFound, match="no module nope"):
        with_params(profile, "nope", rate_hz=1.0)
