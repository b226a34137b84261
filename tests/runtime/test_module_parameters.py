"""A module's parameters at run time: listed with their meaning, read, and changed (validated against its Params,
applied where the module can, refused where it cannot), through the services every module serves."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from pluto import msgs
from pluto.bus import Bus, RemoteError
from pluto.errors import ConfigError
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from pluto.runtime.config import build_params
from pluto.runtime.heartbeat import HeartbeatModule
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.ranges import parameter_ranges, range_text
from pluto.runtime.registry import available_drivers, available_modules, load_module_class
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
    assert by_name["max_speed"].description == "largest linear speed commanded, m/s."  # from the controller's
    assert by_name["sensor_timeout"].description.startswith("a sonar scan older than this")  # from the module's
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
    with pytest.raises(RemoteError, match=r"bad value: max_speed = -1.0 is out of range: it must be in \(0, 3\]"):
        bus.call("drive/set_parameters", {"max_speed": -1.0})  # the range its Params declares
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
    # the controller's tuning is the module's: listed with the controller's descriptions (two names, one entry)
    infos = {i.name: i for i in bus.call("avoid/list_parameters", reply_type=list[msgs.ParameterInfo])}
    assert infos["progress_distance"].description == infos["progress_time"].description != ""
    assert infos["sectors"].range == "[1, 3600]"


def test_subset_gives_a_core_the_fields_it_shares_with_the_module() -> None:
    """A core whose class the module's parameters do not derive from takes the fields they share by name; what the
    module does not have stays at the core's default, and what only the module has (its port) is not passed."""
    from pluto.runtime.params import ModuleParams, Params

    class CoreParams(Params, kw_only=True, forbid_unknown_fields=True):
        speed: float = 1.0
        gain: float = 2.0

    class ShellParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
        speed: float = 0.5
        port: int = 0

    core = ShellParams(speed=0.3, port=7, rate_hz=5.0).subset(CoreParams)
    assert core == CoreParams(speed=0.3, gain=2.0)


# -- ranges ----------------------------------------------------------------------------------------------------------


def registered_params() -> dict[str, type[ModuleParams]]:
    """The Params class of every installed module and driver, by name (each class once)."""
    found: dict[type[ModuleParams], str] = {}
    for module in available_modules():
        classes = [(module, load_module_class(module))]
        classes += [
            (f"{module} --driver {d}", load_module_class(module, {"driver": d})) for d in available_drivers(module)
        ]
        for label, cls in classes:
            found.setdefault(cls.Params, label)
    return {label: params for params, label in found.items()}


def numeric_fields(cls: type[ModuleParams]) -> list[tuple[str, list[Any]]]:
    """The numeric parameters of ``cls`` and their number types (a list's or tuple's items, a union's numbers)."""
    out = []
    for field in msgspec.inspect.type_info(cls).fields:  # type: ignore[union-attr]
        kind = field.type
        numbers = []
        for member in kind.types if isinstance(kind, msgspec.inspect.UnionType) else (kind,):
            if isinstance(member, msgspec.inspect.ListType | msgspec.inspect.VarTupleType):
                member = member.item_type
            items = member.item_types if isinstance(member, msgspec.inspect.TupleType) else (member,)
            numbers += [t for t in items if isinstance(t, msgspec.inspect.FloatType | msgspec.inspect.IntType)]
        if numbers:
            out.append((field.name, numbers))
    return out


def test_every_numeric_parameter_of_every_module_declares_a_finite_range() -> None:
    missing = []
    for label, cls in registered_params().items():
        cls()  # the defaults are in range
        for name, numbers in numeric_fields(cls):
            for kind in numbers:
                low, high = kind.ge if kind.ge is not None else kind.gt, kind.le if kind.le is not None else kind.lt
                if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
                    missing.append(f"{label}: {name} {range_text(kind)}")
    assert not missing, "numeric parameters without a finite range:\n" + "\n".join(missing)


@pytest.mark.parametrize("value", [0, -1.0, 1e308, math.nan, math.inf])
def test_absurd_values_are_refused_with_their_range_or_are_in_it(value: float) -> None:
    unclear = []
    for label, cls in registered_params().items():
        defaults = cls()
        ranges = parameter_ranges(cls)
        for name, numbers in numeric_fields(cls):
            current = getattr(defaults, name)
            given: Any = value
            if isinstance(current, list | tuple):  # a list's first element
                given = [value, *list(current)[1:]] if current else [value]
            inside = any(
                not math.isnan(value)
                and (kind.ge is None or value >= kind.ge)
                and (kind.gt is None or value > kind.gt)
                and (kind.le is None or value <= kind.le)
                and (kind.lt is None or value < kind.lt)
                and (isinstance(kind, msgspec.inspect.FloatType) or float(value).is_integer())
                for kind in numbers
            )
            try:
                build_params(cls, {name: given})
            except ConfigError as err:
                if inside and "out of range" in str(err):
                    unclear.append(f"{label}: {name}={value!r} is in {ranges[name]} but was refused: {err}")
                elif not inside and ranges[name] not in str(err):
                    unclear.append(f"{label}: {name}={value!r} was refused without its range {ranges[name]}: {err}")
                continue
            if not inside:
                unclear.append(f"{label}: {name}={value!r} is outside {ranges[name]} but was taken")
    assert not unclear, "\n".join(unclear)


def test_a_params_built_in_python_is_checked_too() -> None:
    with pytest.raises(ValueError, match=r"max_speed = 1e\+308 is out of range: it must be in \(0, 3\]"):
        DriveModuleParams(max_speed=1e308)
    with pytest.raises(ValueError, match=r"rate_hz = nan is out of range"):
        ModuleParams(rate_hz=math.nan)


def test_set_parameters_refuses_a_rate_near_zero_and_the_module_keeps_stepping(
    bus: Bus, make_bus: Any, started: list[Module[Any]]
) -> None:
    beat = HeartbeatModule(bus, ModuleParams(rate_hz=20.0))
    beat.start()
    started.append(beat)
    watcher = make_bus()
    reader = watcher.create_reader("Heartbeat", msgs.Heartbeat)
    reader.wait_for_value(timeout=5.0)
    for bad in (1e-300, 0.0, -1.0, 1e308, math.nan):
        with pytest.raises(RemoteError, match=r"rate_hz = .* is out of range: it must be in \[0\.1, 1000\]"):
            watcher.call("heartbeat/set_parameters", {"rate_hz": bad})
    assert beat.params.rate_hz == 20.0
    first = reader.received
    wait_until(lambda: reader.received - first >= 10, timeout=10.0)
    info = watcher.call("mom/heartbeat", reply_type=msgs.ModuleInfo)
    assert info.steps >= 10 and info.step_overdue < 5.0
    ranges = {p.name: p.range for p in watcher.call("heartbeat/list_parameters", reply_type=list[msgs.ParameterInfo])}
    assert ranges == {"rate_hz": "[0.1, 1000]", "autostart": "", "use_sim_time": ""}


def test_the_slowest_rate_gives_way_at_once_to_a_faster_one(
    bus: Bus, make_bus: Any, started: list[Module[Any]]
) -> None:
    beat = HeartbeatModule(bus, ModuleParams(rate_hz=20.0))
    beat.start()
    started.append(beat)
    watcher = make_bus()
    reader = watcher.create_reader("Heartbeat", msgs.Heartbeat)
    reader.wait_for_value(timeout=5.0)
    watcher.call("heartbeat/set_parameters", {"rate_hz": 0.1})  # a step every 10 s
    reader.wait_for_update(timeout=5.0)
    watcher.call("heartbeat/set_parameters", {"rate_hz": 20.0})
    first = reader.received
    # at 0.1 Hz the next beat would come 10 s after the last; the new rate applies to it at once
    wait_until(lambda: reader.received - first >= 5, timeout=8.0)


def test_config_values_go_through_the_same_range_check() -> None:
    with pytest.raises(ConfigError, match=r"rate_hz = 1e-300 is out of range: it must be in \[0\.1, 1000\]"):
        build_params(DriveModuleParams, {"rate_hz": 1e-300})
    with pytest.raises(ConfigError, match=r"max_speed = 1e\+308 is out of range"):
        build_params(DriveModuleParams, {"max_speed": 1e308})
