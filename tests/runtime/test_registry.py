"""Finding module classes and their drivers by name (the ``pluto.modules`` and ``pluto.drivers.<module>`` groups)."""

from __future__ import annotations

from importlib.metadata import EntryPoint, EntryPoints
from importlib.metadata import entry_points as installed_entry_points

import pytest

from pluto.cli.main import main
from pluto.errors import ModuleNotFound
from pluto.hardware.base.module import SimBase
from pluto.hardware.base.p2os_module import P2osBase
from pluto.runtime import registry
from pluto.runtime.heartbeat import HeartbeatModule
from pluto.runtime.registry import available_drivers, load_driver_class, load_module_class
from tests.runtime.sample_modules import SlowProvider


def test_the_base_drivers_are_installed() -> None:
    assert available_drivers("base") == {
        "sim": "pluto.hardware.base.module:SimBase",
        "p2os": "pluto.hardware.base.p2os_module:P2osBase",
    }
    assert available_drivers("drive") == {}


def test_the_driver_parameter_picks_the_class() -> None:
    assert load_module_class("base") is SimBase
    assert load_module_class("base", {"port": "/dev/ttyUSB0"}) is SimBase
    assert load_module_class("base", {"driver": "p2os", "port": "/dev/ttyUSB0"}) is P2osBase
    assert load_module_class("base", {"driver": "sim"}) is SimBase
    # a module given by its class finds the drivers of its bus name
    assert load_module_class("pluto.hardware.base.module:SimBase", {"driver": "p2os"}) is P2osBase


def test_an_unknown_driver_is_refused_with_the_installed_ones() -> None:
    with pytest.raises(ModuleNotFound, match=r"module 'base' has no driver 'lms' \(installed drivers: p2os, sim\)"):
        load_module_class("base", {"driver": "lms"})
    with pytest.raises(ModuleNotFound, match=r"has no driver 2 \(installed drivers: p2os, sim\)"):
        load_module_class("base", {"driver": 2})
    with pytest.raises(ModuleNotFound, match=r"module 'heartbeat' has no driver 'x' \(it has no drivers installed\)"):
        load_module_class("heartbeat", {"driver": "x"})


def test_pluto_run_with_an_unknown_driver_fails_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "base", "--driver", "lms"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pluto run: module 'base' has no driver 'lms' (installed drivers: p2os, sim)"]


def test_any_module_registers_drivers_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    # a package installing sensor drivers: pluto.drivers.heartbeat with a working one and a broken one
    group = "pluto.drivers.heartbeat"
    extra = EntryPoints(
        [
            EntryPoint("slow", "tests.runtime.sample_modules:SlowProvider", group),
            EntryPoint("gone", "tests.runtime.no_such_module:Gone", group),
            EntryPoint("odd", "pluto.runtime.registry:available_drivers", group),
        ]
    )

    def entry_points(*, group: str) -> EntryPoints:
        return extra if group == "pluto.drivers.heartbeat" else installed_entry_points(group=group)

    monkeypatch.setattr(registry, "entry_points", entry_points)
    assert load_module_class("heartbeat") is HeartbeatModule
    assert load_module_class("heartbeat", {"driver": "slow"}) is SlowProvider
    assert load_driver_class("heartbeat", "slow") is SlowProvider
    with pytest.raises(ModuleNotFound, match="driver 'gone' of module 'heartbeat': cannot load"):
        load_module_class("heartbeat", {"driver": "gone"})
    with pytest.raises(ModuleNotFound, match=r"driver 'odd' of module 'heartbeat': \S+ is not a pluto Module class"):
        load_module_class("heartbeat", {"driver": "odd"})
    with pytest.raises(ModuleNotFound, match=r"installed drivers: gone, odd, slow\)"):
        load_module_class("heartbeat", {"driver": "fast"})
    assert load_module_class("base", {"driver": "p2os"}) is P2osBase  # other groups as installed
