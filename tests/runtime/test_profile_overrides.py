"""Parameters of a profile set for one run (``pluto up PROFILE --set MODULE.PARAM=VALUE``), and the profiles of the
real robot and of its rehearsal on emulators."""

from __future__ import annotations

import pytest

from pluto.errors import ConfigError, ModuleNotFound
from pluto.runtime.profiles import load_profile, parse_overrides


def params(profile_name: str, settings: list[str]) -> dict[str, dict[str, object]]:
    profile = load_profile(profile_name, parse_overrides(settings))
    return {e.name: e.spec.params for e in profile.entries}


def test_values_are_read_as_toml_else_as_strings() -> None:
    found = parse_overrides(
        ["sick.baud=500000", "sick.resolution=1.0", "wrist.emulate=true", "base.port=/dev/ttyUSB3",
         'gps.port="socket://127.0.0.1:9103"', "localization.start_pose=[1.0, 2.0, 0.5]", "dmu-emulator.port=9102"]
    )  # fmt: skip
    assert found == {
        "sick": {"baud": 500000, "resolution": 1.0},
        "wrist": {"emulate": True},
        "base": {"port": "/dev/ttyUSB3"},
        "gps": {"port": "socket://127.0.0.1:9103"},
        "localization": {"start_pose": [1.0, 2.0, 0.5]},
        "dmu-emulator": {"port": 9102},
    }


@pytest.mark.parametrize("setting", ["noequals", "=1", "port=1", ".port=1", "sick.=1"])
def test_a_setting_not_of_the_form_is_refused(setting: str) -> None:
    with pytest.raises(ConfigError, match=r"MODULE\.PARAM=VALUE"):
        parse_overrides([setting])


def test_the_robot_profile_takes_its_ports_for_a_run() -> None:
    default = params("robot", [])
    assert default["base"] == {"driver": "p2os", "port": "/dev/ttyUSB0"}
    assert {default[m]["driver"] for m in ("sick", "dmu", "gps", "wrist")} == {"lms", "crossbow", "nmea", "can"}
    changed = params("robot", ["base.port=/dev/ttyUSB1", "sick.port=/dev/ttyUSB0", "sick.baud=500000"])
    assert changed["base"]["port"] == "/dev/ttyUSB1"
    assert changed["sick"] == {**default["sick"], "port": "/dev/ttyUSB0", "baud": 500000}
    assert changed["dmu"] == default["dmu"]


@pytest.mark.parametrize(
    ("setting", "error", "message"),
    [
        ("sick.bard=38400", ConfigError, "unknown field `bard`"),
        ("sick.baud=fast", ConfigError, "baud"),
        ("pose.map=office", ModuleNotFound, "no module 'pose'"),
        ("base.driver=nonsense", ModuleNotFound, "no driver 'nonsense'"),
        ("base.driver=sim", ConfigError, "unknown field `port`"),  # the simulated base has no port
    ],
)
def test_a_bad_setting_stops_the_run_before_anything_starts(setting: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        load_profile("robot", parse_overrides([setting]))


def test_the_emulated_profile_pairs_each_driver_with_its_emulator() -> None:
    found = params("emulated", [])
    for emulator, driver in (("p2os-emulator", "base"), ("sick-emulator", "sick"), ("dmu-emulator", "dmu"),
                             ("gps-emulator", "gps")):  # fmt: skip
        assert found[driver]["port"] == f"socket://127.0.0.1:{found[emulator]['port']}"
        assert found[emulator]["noise"] == "realistic"
    assert found["wrist"]["emulate"] is True
    order = [e.name for e in load_profile("emulated").entries]
    for emulator, driver in (("p2os-emulator", "base"), ("sick-emulator", "sick")):
        assert order.index(emulator) < order.index(driver)  # listening before its driver connects
