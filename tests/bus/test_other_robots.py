"""Reading another robot's interfaces: ``create_reader(..., robot=...)`` reads ``pluto/<robot>/<name>``."""

from __future__ import annotations

import threading
from collections.abc import Callable

import msgspec
import pytest

from pluto import msgs
from pluto.bus import Bus, bus_config
from pluto.errors import ConfigError


def robot_bus(make_bus: Callable[..., Bus], suffix: str) -> Bus:
    config = bus_config()
    bus: Bus = make_bus(msgspec.structs.replace(config, robot=f"{config.robot}-{suffix}"))
    return bus


def test_a_reader_of_another_robot_gets_its_value_and_not_its_own_robots(make_bus: Callable[..., Bus]) -> None:
    a, b = robot_bus(make_bus, "a"), robot_bus(make_bus, "b")
    writer = a.create_publisher("Sim/Truth", msgs.Odometry)
    writer.write(msgs.Odometry(stamp=1.0, x=1.0))
    other = b.create_reader("Sim/Truth", msgs.Odometry, robot=a.robot)  # joins late: asks for the current value
    own = b.create_reader("Sim/Truth", msgs.Odometry)
    value = other.read()
    assert value is not None and value.x == 1.0
    assert other.key == f"pluto/{a.robot}/Sim/Truth" and other.robot == a.robot
    seen: list[float] = []
    got = threading.Event()

    def take(odometry: msgs.Odometry) -> None:
        seen.append(odometry.x)
        if odometry.x == 2.0:
            got.set()

    b.create_subscription("Sim/Truth", take, msgs.Odometry, robot=a.robot)
    writer.write(msgs.Odometry(stamp=2.0, x=2.0))
    assert other.wait_for_update(timeout=10.0).x == 2.0
    assert got.wait(10.0) and seen[-1] == 2.0
    assert own.read() is None  # robot b has no true pose: the two robots' interfaces stay apart


def test_keys_of_other_robots(bus: Bus) -> None:
    assert bus.key("Base/Sonar", "scout") == "pluto/scout/Base/Sonar"
    assert bus.key("Base/Sonar", bus.robot) == bus.key("Base/Sonar") == f"pluto/{bus.robot}/Base/Sonar"
    for bad in ("a/b", "", "x*", "two words"):
        with pytest.raises(ConfigError, match="a robot name may not be empty or contain"):
            bus.create_reader("Base/Sonar", msgs.SonarScan, robot=bad)
