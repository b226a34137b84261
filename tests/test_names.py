"""The interface table: every name of the design with its type, the localization numbering, name checks."""

from __future__ import annotations

import pytest
import zenoh

from pluto import msgs, names

# The interface table of docs/design.md.
DESIGN_TABLE: dict[str, type[msgs.Message]] = {
    "Base/Drive/Command": msgs.ActuatorState,
    "Base/Drive/State": msgs.Odometry,
    "Base/Sonar": msgs.SonarScan,
    "Base/Contact": msgs.Contact,
    "Base/Power": msgs.Power,
    "Sick/Scan": msgs.LaserScan,
    "Sick/Scan_mm": msgs.LaserScan,
    "Sick/Timing": msgs.ScanTiming,
    "DMU/Raw": msgs.DmuRaw,
    "DMU/State": msgs.DmuState,
    "Wrist/Command": msgs.ActuatorState,
    "Wrist/State": msgs.ActuatorState,
    "GPS/State": msgs.GpsFix,
    "Localization/Dead-Reckoning": msgs.PoseEstimate,
    "Localization/Laser_Dead-Reckoning": msgs.PoseEstimate,
    "Localization/Post_Pose": msgs.PoseEstimate,
    "Localization/Pose": msgs.PoseEstimate,
    "Localization/Laser_Pose": msgs.PoseEstimate,
    "drive/command": msgs.ActuatorState,
    "drive/status": msgs.FVectorState,
    "avoidance/command": msgs.ActuatorState,
    "avoidance/status": msgs.FVectorState,
    "motion/command": msgs.ActuatorState,
    "motion/status": msgs.FVectorState,
    "pose/status": msgs.FVectorState,
    "slam/status": msgs.FVectorState,
    "Arm/Command": msgs.ActuatorState,
    "Arm/State": msgs.ActuatorState,
    "Clock": msgs.SimTime,
}


@pytest.mark.parametrize(("name", "cls"), sorted(DESIGN_TABLE.items()), ids=sorted(DESIGN_TABLE))
def test_design_interface_exists_with_its_type(name: str, cls: type[msgs.Message]) -> None:
    row = names.interface(name)
    assert row.name == name
    assert row.type is cls
    assert names.message_type_of(name) is cls
    assert row.writer and row.description


def test_every_type_in_the_table_is_a_registered_message() -> None:
    registered = set(msgs.message_types().values())
    for row in names.INTERFACES.values():
        assert row.type in registered, row.name


def test_every_table_name_is_a_valid_bus_name_and_its_own_key() -> None:
    for key, row in names.INTERFACES.items():
        assert key == row.name
        assert names.check_name(key) == key


def test_the_base_is_base_whatever_the_robot() -> None:
    # The original (docs/design.md) named it ATRV2/ after its robot.
    assert not any(name.startswith("ATRV2/") for name in names.INTERFACES)


def test_localization_interfaces_in_the_proxy_numbering() -> None:
    assert names.LOCALIZATION_INTERFACES == (
        "Localization/Dead-Reckoning",
        "Localization/Laser_Dead-Reckoning",
        "Localization/Post_Pose",
        "Localization/Pose",
        "Localization/Laser_Pose",
    )
    for number, name in enumerate(names.LOCALIZATION_INTERFACES):
        row = names.interface(name)
        assert row.type is msgs.PoseEstimate
        assert row.description.startswith(f"({number})"), row.description


def test_unknown_interface() -> None:
    assert names.message_type_of("Nope/Nothing") is None
    with pytest.raises(KeyError) as info:
        names.interface("Nope/Nothing")
    assert "Nope/Nothing" in str(info.value)


@pytest.mark.parametrize(
    "name",
    ["*", "Base/*", "a/**", "$", "a$b", "a?", "a#b", "", "a//b", "/a", "a/", "@x", "Base/@srv", "a/@module/b"],
)
def test_check_name_rejects(name: str) -> None:
    with pytest.raises(ValueError) as info:
        names.check_name(name)
    assert repr(name) in str(info.value)


@pytest.mark.parametrize("name", ["Base/Drive/State", "Clock", "test/custom_1", "a-b/c.d", "x@y"])
def test_check_name_accepts(name: str) -> None:
    assert names.check_name(name) == name
    zenoh.KeyExpr(f"pluto/robot/{name}")  # and Zenoh takes it as a key
