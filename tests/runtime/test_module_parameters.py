"""A module's parameters at run time: listed with their meaning, read, and changed (validated against its Params,
applied where the module can, refused where it cannot), through the services every module serves."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus, RemoteError
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from pluto.runtime.heartbeat import HeartbeatModule
from pluto.runtime.module import Module, ModuleParams
from tests.helpers import wait_until


@pytest.fixture
def started() -> Iterator[list[Module[Any]]]:
    modules: list[Module[Any]] = []
    yield modules
    for module in reversed(modules):
        module.stop()


def test_list_get_and_set_through_the_services(bus: Bus, started: list[Module[Any]]) -> None:
    drive = DriveModule(bus, DriveModuleParams(autostart=False))
    drive.start()
    started.append(drive)
    infos = bus.call("drive/list_parameters", reply_type=list[msgs.ParameterInfo])
    by_name = {info.name: info for info in infos}
    assert by_name["max_speed"].dynamic and not by_name["calibration_file"].dynamic
    assert by_name["max_speed"].value == by_name["max_speed"].default == drive.params.max_speed
    assert by_name["max_speed"].type == "float"
    assert by_name["max_speed"].description == "largest linear speed, m/s."
    assert by_name["slow_distance"].description == by_name["stop_distance"].description != ""
    assert by_name["rate_hz"].description == "rate of the control step, Hz."  # from the base class's docstring

    assert bus.call("drive/get_parameters", ["max_speed", "rate_hz"]) == {
        "max_speed": drive.params.max_speed,
        "rate_hz": 20.0,
    }
    assert bus.call("drive/set_parameters", {"max_speed": 0.3}) == {"max_speed": 0.3}
    assert drive.params.max_speed == 0.3
    assert drive.controller.params.max_speed == 0.3  # applied to the controller, which the step uses
    assert bus.call("drive/get_parameters")["max_speed"] == 0.3


def test_bad_changes_are_refused_and_change_nothing(bus: Bus, started: list[Module[Any]]) -> None:
    drive = DriveModule(bus, DriveModuleParams(autostart=False))
    drive.start()
    started.append(drive)
    before = drive.params
    with pytest.raises(RemoteError, match="calibration_file is read-only at run time"):
        bus.call("drive/set_parameters", {"calibration_file": "x.toml"})
    with pytest.raises(RemoteError, match="bad value"):
        bus.call("drive/set_parameters", {"max_speed": -1.0})  # the Params' own range check
    with pytest.raises(RemoteError, match="bad value"):
        bus.call("drive/set_parameters", {"max_speed": "fast"})
    with pytest.raises(RemoteError, match="no parameter top_speed"):
        bus.call("drive/set_parameters", {"top_speed": 1.0})
    with pytest.raises(RemoteError, match="no parameter top_speed"):
        bus.call("drive/get_parameters", ["top_speed"])
    assert drive.params is before


def test_a_new_rate_takes_effect_while_running(bus: Bus, make_bus: Any, started: list[Module[Any]]) -> None:
    beat = HeartbeatModule(bus, ModuleParams(rate_hz=5.0))
    beat.start()
    started.append(beat)
    watcher = make_bus()
    reader = watcher.create_reader("Heartbeat", msgs.Heartbeat)
    reader.wait_for_value(timeout=5.0)
    assert watcher.call("heartbeat/set_parameters", {"rate_hz": 100.0}) == {"rate_hz": 100.0}
    first = reader.received
    # at 5 Hz, 40 beats take 8 s; at 100 Hz well under that, even on a busy machine
    assert wait_until(lambda: reader.received - first >= 40, timeout=6.0)


def test_a_module_changes_nothing_at_run_time_unless_it_says_so(bus: Bus, started: list[Module[Any]]) -> None:
    class Plain(Module[ModuleParams]):
        name = "plain"

    module = Plain(bus, ModuleParams(autostart=False))
    module.start()
    started.append(module)
    with pytest.raises(RemoteError, match=r"rate_hz is read-only at run time \(.*changeable now: none\)"):
        bus.call("plain/set_parameters", {"rate_hz": 3.0})
    assert not any(p.dynamic for p in bus.call("plain/list_parameters", reply_type=list[msgs.ParameterInfo]))


def test_an_applying_hook_that_fails_undoes_the_change(bus: Bus, started: list[Module[Any]]) -> None:
    class Picky(Module[ModuleParams]):
        name = "picky"
        dynamic_params = ("rate_hz",)

        def on_parameters_changed(self, old: ModuleParams, new: ModuleParams) -> None:
            raise RuntimeError("cannot change the rate now")

    module = Picky(bus, ModuleParams(autostart=False))
    module.start()
    started.append(module)
    with pytest.raises(RemoteError, match="cannot change the rate now"):
        bus.call("picky/set_parameters", {"rate_hz": 3.0})
    assert module.params.rate_hz == 10.0


def test_mom_lists_services_writer_ids_and_what_a_module_reads(bus: Bus, started: list[Module[Any]]) -> None:
    drive = DriveModule(bus, DriveModuleParams(autostart=False))
    drive.start()
    started.append(drive)
    writer = bus.create_publisher("drive/command")
    writer.write(msgs.ActuatorState(cmd_flags=0, velocity=[0.0, 0.0]))

    def heard() -> bool:
        info = bus.call("mom/drive", reply_type=msgs.ModuleInfo)
        reads = {r.name: r for r in info.reads}
        return writer.writer_id in reads["drive/command"].writers

    assert wait_until(heard, timeout=5.0)
    info = bus.call("mom/drive", reply_type=msgs.ModuleInfo)
    assert {"drive/set_parameters", "drive/get_parameters", "drive/list_parameters", "mom/drive"} <= set(info.services)
    assert {s.name for s in info.provides} == {"Base/Drive/Command", "drive/status"}
    assert all(s.writer_id != 0 for s in info.provides)
    assert {"Base/Drive/State", "Base/Sonar", "Base/Contact"} <= {r.name for r in info.reads}


def test_the_avoid_tuning_reaches_its_controller(bus: Bus, started: list[Module[Any]]) -> None:
    from pluto.movement.avoid.module import AvoidModule, AvoidModuleParams

    avoid = AvoidModule(bus, AvoidModuleParams(autostart=False))
    avoid.start()
    started.append(avoid)
    assert bus.call("avoid/set_parameters", {"goal_tolerance": 0.5, "wall_speed": 0.2}) == {
        "goal_tolerance": 0.5,
        "wall_speed": 0.2,
    }
    assert (avoid.core.params.goal_tolerance, avoid.core.params.wall_speed) == (0.5, 0.2)


def test_subset_gives_a_core_the_fields_it_shares_with_the_module() -> None:
    """A module's core takes its tuning from the module's parameters by name; what the module does not have stays at
    the core's default, and what only the module has (its rate) is not passed."""
    import dataclasses

    from pluto.runtime.module import ModuleParams

    @dataclasses.dataclass(frozen=True)
    class CoreParams:
        speed: float = 1.0
        gain: float = 2.0

    class Params(ModuleParams, kw_only=True, forbid_unknown_fields=True):
        speed: float = 0.5
        port: int = 0

    core = Params(speed=0.3, port=7, rate_hz=5.0).subset(CoreParams)
    assert core == CoreParams(speed=0.3, gain=2.0)
