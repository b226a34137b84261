"""The extras: pyproject.toml and :mod:`pluto.extras` agree, and a missing one is named, never a traceback.

A runtime install has none of the extras' libraries; here they are all installed, so a missing one is played by a
``None`` in ``sys.modules`` (what makes ``import aiohttp`` fail as if it were not installed), in a fresh interpreter
so that no module this process imported is in the way.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from pluto.errors import MissingExtra
from pluto.extras import EXTRAS, PACKAGE, extra_of, missing_extra

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(requirement: str) -> str:
    """The canonical distribution name of a requirement (``foxglove-sdk>=0.30,<0.31`` -> ``foxglove-sdk``)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]).lower()


def test_the_extras_of_pyproject_are_those_pluto_names() -> None:
    optional = PROJECT["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        assert {_name(r) for r in optional[extra]} == set(modules.values()), extra
    everything = f"{PACKAGE}[{','.join(EXTRAS)}]"
    assert optional["all"] == [everything]
    assert f"{PACKAGE}[all]" in optional["dev"]  # make installs .[dev]: every test runs
    in_extras = {package for modules in EXTRAS.values() for package in modules.values()}
    assert in_extras.isdisjoint(_name(r) for r in PROJECT["dependencies"])


def test_every_dependency_below_1_0_has_an_upper_bound() -> None:
    requirements = PROJECT["dependencies"] + [r for rs in PROJECT["optional-dependencies"].values() for r in rs]
    for requirement in requirements:
        lower = re.search(r">=\s*(\d+)\.(\d+)", requirement)
        if lower and lower.group(1) == "0":
            upper = re.search(r"<\s*0\.(\d+)", requirement)
            assert upper and int(upper.group(1)) > int(lower.group(2)), requirement


def test_the_constraints_pin_every_dependency() -> None:
    pinned = {
        _name(line): line.partition("==")[2]
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert all(pinned.values())
    optional = PROJECT["optional-dependencies"]
    installed = PROJECT["dependencies"] + [r for extra, rs in optional.items() if extra != "bench" for r in rs]
    for requirement in installed:
        assert requirement.startswith(PACKAGE) or _name(requirement) in pinned, requirement


@pytest.mark.parametrize(
    ("module", "extra"), [("aiohttp", "web"), ("foxglove.websocket", "foxglove"), ("can", "can"), ("numpy", None)]
)
def test_the_extra_of_a_module(module: str, extra: str | None) -> None:
    assert extra_of(module) == extra


def test_a_missing_library_of_an_extra_is_named_with_its_extra() -> None:
    error = missing_extra(ModuleNotFoundError("No module named 'pyproj'", name="pyproj"), "module 'gps'")
    assert isinstance(error, MissingExtra)
    assert str(error) == "module 'gps' needs the gps extra (pyproj is not installed): pip install 'pluto-robot[gps]'"
    assert missing_extra(ModuleNotFoundError("No module named 'numpy'", name="numpy"), "x") is None
    assert missing_extra(ValueError("aiohttp"), "x") is None


_WITHOUT_AIOHTTP = """
import sys
sys.modules["aiohttp"] = None  # as if the web extra were not installed
from pluto.cli.main import main
from pluto.runtime.registry import load_module_class
print("exit", main(["web"]))
try:
    load_module_class("web")
except Exception as err:
    print(type(err).__name__, err)
"""


def test_a_command_and_a_module_without_their_extra_say_which_to_install() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_AIOHTTP], capture_output=True, text=True, timeout=60, check=False
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == (
        "pluto web needs the web extra (aiohttp is not installed): pip install 'pluto-robot[web]'"
    )
    assert done.stdout.splitlines() == [
        "exit 1",
        "MissingExtra module 'web' needs the web extra (aiohttp is not installed): pip install 'pluto-robot[web]'",
    ]


def test_the_demo_runs_without_the_web_extra_and_says_how_to_watch_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from pluto.cli.demo import watch_live_hint

    monkeypatch.setitem(sys.modules, "pluto.gateways.web.server", None)  # its aiohttp is not installed
    assert "pip install 'pluto-robot[web]'" in watch_live_hint("pluto", 1.0)
