"""Finding module classes and their drivers by name (the ``pluto.modules`` and ``pluto.drivers.<module>`` groups)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from importlib.metadata import EntryPoint, EntryPoints
from importlib.metadata import entry_points as installed_entry_points
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs
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


# -- modules in files and in the current directory ------------------------------------------------------------------

COUNTER = """
from pluto import msgs
from pluto.runtime.module import Module, ModuleParams
from {helper} import START


class CounterParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    start: int = START


class Counter(Module[CounterParams]):
    name = "counter"
    Params = CounterParams

    def on_configure(self) -> None:
        self.count = self.params.start
        self.out = self.create_publisher("counter/value", msgs.FVectorState)

    def step(self, now: float) -> None:
        self.count += 1
        self.out.write(msgs.FVectorState(stamp=now, data=[float(self.count)]))


NotAModule = int
"""


def _write_counter(folder: Path, helper: str) -> Path:
    """A counter module in ``folder``/counter.py that imports START from ``helper`` (a module beside it)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{helper.rpartition('.')[2]}.py").write_text("START = 100\n")
    path = folder / "counter.py"
    path.write_text(COUNTER.format(helper=helper))
    return path


def test_a_class_in_a_file_by_its_path(tmp_path: Path) -> None:
    helper = f"helper_{uuid.uuid4().hex[:8]}"  # a name of its own: the module cache outlives the test
    path = _write_counter(tmp_path / "mods", helper)
    cls = load_module_class(f"{path}:Counter")
    assert cls.name == "counter"
    assert cls.Params().start == 100  # imported from the file beside it
    assert load_module_class(f"{path}:Counter") is cls  # loaded once
    assert registry.module_name_of(f"{path}:Counter") == "counter"


def test_a_relative_path_is_from_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helper = f"helper_{uuid.uuid4().hex[:8]}"
    _write_counter(tmp_path / "mods", helper)
    monkeypatch.chdir(tmp_path)
    assert load_module_class("mods/counter.py:Counter").name == "counter"


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("missing/counter.py:Counter", "no file"),
        ("mods/counter.py:Nothing", "has no attribute 'Nothing'"),
        ("mods/counter.py:NotAModule", "is not a pluto Module class"),
        ("mods/broken.py:Counter", "invalid syntax"),
    ],
)
def test_a_bad_file_spec_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, needle: str
) -> None:
    _write_counter(tmp_path / "mods", f"helper_{uuid.uuid4().hex[:8]}")
    (tmp_path / "mods" / "broken.py").write_text("def (:\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModuleNotFound) as info:
        load_module_class(spec)
    assert spec in str(info.value)
    assert needle in str(info.value)


def test_the_current_directory_is_searched_after_the_installed_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = f"mypkg_{uuid.uuid4().hex[:8]}"
    _write_counter(tmp_path / package, f"{package}.helper")
    (tmp_path / package / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert load_module_class(f"{package}.counter:Counter").name == "counter"
    assert sys.path[-1] == str(tmp_path)


@pytest.mark.parametrize("form", ["file", "package"])
def test_pluto_run_without_pythonpath(tmp_path: Path, make_bus: Any, form: str) -> None:
    # The installed `pluto` script, whose own folder (not the current one) is first on its path.
    script = Path(sys.executable).with_name("pluto")
    if not script.exists():
        pytest.skip(f"no pluto script beside {sys.executable}")
    _write_counter(tmp_path / "mypkg", "mypkg.helper")
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    spec = "mypkg/counter.py:Counter" if form == "file" else "mypkg.counter:Counter"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with subprocess.Popen(
        [str(script), "run", spec, "-p", "start=5", "-p", "rate_hz=50"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            reader = make_bus().create_reader("counter/value", msgs.FVectorState)
            value = reader.read() or reader.wait_for_update(timeout=20)
            assert value.data[0] > 5
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
