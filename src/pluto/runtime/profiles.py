"""Profiles: named sets of modules started together (the original's ``startbasic`` script, docs/design.md, without its
races).

A profile is a TOML file::

    description = "A heartbeat and its monitor"
    lockstep = false     # optional: run the simulator (every module with a `lockstep` parameter) in lock-step
    robots = 1           # optional: a profile with the `sim` module run for this many robots of its world at once
                         #   (pluto.sim.fleet; `pluto up PROFILE --robots N` sets it for a run)

    [restart]            # optional: how the supervisor restarts crashed modules
    max_restarts = 5     # within `window` seconds, then it gives up on that module
    window = 60.0
    backoff = 0.5        # first delay, doubled at each crash up to `backoff_max`
    backoff_max = 10.0
    liveness = true      # also kill and restart a module whose steps stopped (hung), as if it had crashed:
    step_timeout = 10.0  #   a step running this long (wall seconds),
    due_timeout = 10.0   #   a step due this long without beginning,
    missed_polls = 5     #   or this many liveness queries (one every `poll_period` s) unanswered in a row
    poll_period = 1.0

    [modules.heartbeat]  # the name on the bus; `module = "..."` picks another class
    rate_hz = 5.0        # parameters

    [modules.heartbeat-monitor]

Profiles ship in the package (``pluto/runtime/profiles``); ``./profiles/`` and ``~/.config/pluto/profiles/`` add
or override them. The start order comes from what each module ``requires``, not from the order in the file.

A run can change a profile's parameters without editing it (``pluto up robot --set sick.port=/dev/ttyUSB2``):
:func:`parse_overrides` reads such settings, :func:`load_profile` applies them before the profile is built, so a
changed ``driver`` changes the module's class and requirements too.
"""

from __future__ import annotations

import difflib
import graphlib
import tomllib
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import msgspec

from pluto.errors import ConfigError, ModuleNotFound
from pluto.runtime.config import build_params
from pluto.runtime.ranges import check_ranges
from pluto.runtime.registry import load_module_class, without_driver
from pluto.runtime.runner import ModuleSpec

MAX_ROBOTS = 100
"""Most robots one profile may run in one simulated world."""


class RestartPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How the supervisor restarts a crashed module, and when it takes a running one for hung.

    Attributes:
        enabled: restart crashed modules at all.
        max_restarts: restarts within ``window`` s, after which the supervisor gives up on the module.
        window: s, see ``max_restarts``.
        backoff: s before the first restart, doubled at each crash within the window up to ``backoff_max`` s.
        backoff_max: s, see ``backoff``.
        liveness: watch each module's steps, not only its process: a module that stopped stepping (below) is
            killed and restarted like a crash, with the reason in the log.
        step_timeout: wall seconds a control step may run before the module is taken for hung.
        due_timeout: wall seconds a step may be due (its clock reached its time or, in lock-step, a tick offered
            it) without beginning before the module is taken for hung.
        poll_period: wall seconds between two liveness queries of a module (its ``mom/<name>`` service).
        missed_polls: liveness queries a module may leave unanswered in a row (a stopped process) before it is
            taken for hung.
    """

    enabled: bool = True
    max_restarts: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 5
    window: Annotated[float, msgspec.Meta(gt=0.0, le=86_400.0)] = 60.0
    backoff: Annotated[float, msgspec.Meta(ge=0.0, le=3600.0)] = 0.5
    backoff_max: Annotated[float, msgspec.Meta(ge=0.0, le=3600.0)] = 10.0
    liveness: bool = True
    step_timeout: Annotated[float, msgspec.Meta(ge=0.05, le=3600.0)] = 10.0
    due_timeout: Annotated[float, msgspec.Meta(ge=0.05, le=3600.0)] = 10.0
    poll_period: Annotated[float, msgspec.Meta(ge=0.02, le=60.0)] = 1.0
    missed_polls: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 5


@dataclass(frozen=True)
class ProfileEntry:
    """One module of a profile."""

    spec: ModuleSpec
    requires: tuple[str, ...]
    restart: bool = True

    @property
    def name(self) -> str:
        assert self.spec.name is not None
        return self.spec.name


@dataclass(frozen=True)
class Profile:
    """A loaded profile, its modules in start order."""

    name: str
    description: str
    entries: tuple[ProfileEntry, ...]
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    path: Path | None = None
    robots: int = 1
    """Robots of the simulator's world the profile runs for (more than 1: :class:`pluto.sim.fleet.Fleet`)."""


def with_params(profile: Profile, module: str, **params: Any) -> Profile:
    """The profile with some parameters of one of its modules replaced.

    Raises:
        ModuleNotFound: the profile has no module of that name.
    """
    if module not in {e.name for e in profile.entries}:
        raise ModuleNotFound(f"profile {profile.name} has no module {module}")
    entries = tuple(
        replace(e, spec=replace(e.spec, params={**e.spec.params, **params})) if e.name == module else e
        for e in profile.entries
    )
    return replace(profile, entries=entries)


def with_robots(profile: Profile, robots: int) -> Profile:
    """The profile run for ``robots`` robots of its simulator's world (1: a lone robot).

    Raises:
        ConfigError: not from 1 to :data:`MAX_ROBOTS`, or several robots and no ``sim`` module in the profile.
    """
    if not 1 <= robots <= MAX_ROBOTS:
        raise ConfigError(f"robots must be from 1 to {MAX_ROBOTS}, got {robots}")
    if robots > 1 and "sim" not in {e.name for e in profile.entries}:
        raise ConfigError(
            f"profile {profile.name} has no sim module: several robots need a simulated world (try the sim, mission "
            "or fleet profile)"
        )
    return replace(profile, robots=robots)


def _profile_dirs() -> list[Path]:
    return [Path("profiles"), Path.home() / ".config" / "pluto" / "profiles"]


def _builtin() -> dict[str, str]:
    folder = resources.files("pluto.runtime") / "profiles"
    return {
        item.name.removesuffix(".toml"): item.read_text() for item in folder.iterdir() if item.name.endswith(".toml")
    }


def available_profiles() -> dict[str, str]:
    """Profile names and their descriptions."""
    found: dict[str, str] = {}
    for name, text in _builtin().items():
        found[name] = _description(text)
    for folder in reversed(_profile_dirs()):
        for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
            found[path.stem] = _description(path.read_text(errors="replace"))
    return dict(sorted(found.items()))


def _description(text: str) -> str:
    try:
        return str(tomllib.loads(text).get("description", ""))
    except tomllib.TOMLDecodeError:
        return "(not valid TOML)"


def parse_overrides(settings: list[str]) -> dict[str, dict[str, Any]]:
    """Parameter settings of the form ``MODULE.PARAM=VALUE``, by module.

    The value is read as a TOML value (``500000``, ``0.5``, ``true``, ``"text"``, ``[10.0, 9.7, 0.0]``); anything
    that is not one is taken as a string, so ``base.port=/dev/ttyUSB0`` needs no quotes.

    Raises:
        ConfigError: a setting not of that form.
    """
    found: dict[str, dict[str, Any]] = {}
    for setting in settings:
        key, equals, text = setting.partition("=")
        module, dot, param = key.strip().rpartition(".")
        if not equals or not dot or not module or not param:
            raise ConfigError(f"a setting is MODULE.PARAM=VALUE (e.g. base.port=/dev/ttyUSB0), not {setting!r}")
        try:
            value: Any = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = text.strip()
        found.setdefault(module, {})[param] = value
    return found


def load_profile(name_or_path: str, overrides: dict[str, dict[str, Any]] | None = None) -> Profile:
    """Load a profile by name (or from a ``.toml`` path) and order its modules.

    Args:
        name_or_path: a profile's name or a ``.toml`` file.
        overrides: parameters replaced or added, by module (see :func:`parse_overrides`).

    Raises:
        ModuleNotFound: no profile of that name, it names an unknown module, or an override names a module the
            profile does not have.
        ConfigError: the file is not valid, or the modules' requirements form a cycle.
    """
    path = Path(name_or_path)
    text: str | None = None
    where: Path | None = None
    if name_or_path.endswith(".toml"):
        if not path.is_file():
            raise ModuleNotFound(f"profile file {path} does not exist")
        text, where = path.read_text(errors="replace"), path
    else:
        for folder in _profile_dirs():
            candidate = folder / f"{name_or_path}.toml"
            if candidate.is_file():
                text, where = candidate.read_text(errors="replace"), candidate
                break
        else:
            text = _builtin().get(name_or_path)
    if text is None:
        close = difflib.get_close_matches(name_or_path, available_profiles(), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `pluto profiles` lists them"
        raise ModuleNotFound(f"no profile named {name_or_path!r}{hint}")
    label = str(where) if where else f"profile {name_or_path}"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{label}: not valid TOML: {err}") from None
    modules = data.get("modules")
    for module, params in (overrides or {}).items():
        if not isinstance(modules, dict) or not isinstance(modules.get(module), dict):
            known = ", ".join(modules) if isinstance(modules, dict) else "none"
            raise ModuleNotFound(f"{label} has no module {module!r} to set parameters of (its modules: {known})")
        table = modules[module]
        table.update(params)
        # checked now, not when the module starts: a misspelt setting stops the run before anything moves
        params_now = {k: v for k, v in table.items() if k not in ("module", "restart")}
        cls = load_module_class(str(table.get("module", module)), params_now)
        build_params(cls.Params, without_driver(params_now), where=f"{label}: parameters of {module}")
    return parse_profile(path.stem if where else name_or_path, data, label, where)


def parse_profile(name: str, data: dict[str, Any], label: str, path: Path | None = None) -> Profile:
    """Build a profile from its parsed TOML table (see the module docstring)."""
    unknown = set(data) - {"description", "restart", "modules", "lockstep", "robots"}
    if unknown:
        raise ConfigError(
            f"{label}: unknown keys {sorted(unknown)} (expected description, restart, lockstep, robots, modules)"
        )
    lockstep = data.get("lockstep", False)
    if not isinstance(lockstep, bool):
        raise ConfigError(f"{label}: lockstep must be true or false, got {lockstep!r}")
    robots = data.get("robots", 1)
    if not isinstance(robots, int) or isinstance(robots, bool) or not 1 <= robots <= MAX_ROBOTS:
        raise ConfigError(f"{label}: robots must be a whole number from 1 to {MAX_ROBOTS}, got {robots!r}")
    try:
        table = data.get("restart", {})
        if isinstance(table, dict):
            check_ranges(RestartPolicy, table)
        restart = msgspec.convert(table, RestartPolicy)
    except (ValueError, msgspec.ValidationError) as err:
        raise ConfigError(f"{label}: [restart] {err}") from None
    modules = data.get("modules", {})
    if not isinstance(modules, dict) or not modules:
        raise ConfigError(f"{label}: a profile needs at least one [modules.<name>] table")
    entries: dict[str, ProfileEntry] = {}
    for bus_name, table in modules.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{label}: modules.{bus_name} must be a table")
        params = dict(table)
        module = str(params.pop("module", bus_name))
        keep_alive = bool(params.pop("restart", True))
        cls = load_module_class(module, params)
        if lockstep and "lockstep" in cls.Params.__struct_fields__:
            params.setdefault("lockstep", True)
        entries[bus_name] = ProfileEntry(ModuleSpec(module, bus_name, params), tuple(cls.requires), keep_alive)
    if robots > 1 and "sim" not in entries:
        raise ConfigError(f"{label}: robots = {robots} needs the sim module in the profile (the robots' world)")
    order = tuple(start_order(entries, label))
    return Profile(name, str(data.get("description", "")), order, restart, path, robots)


def start_order(entries: dict[str, ProfileEntry], label: str = "profile") -> list[ProfileEntry]:
    """Order modules so that each comes after the modules it requires that are in the set.

    A requirement outside the set must already be running when the profile starts (the supervisor checks).

    Raises:
        ConfigError: the requirements form a cycle.
    """
    # graphlib hands out the modules whose requirements are started, a batch at a time; each batch in the order of
    # the profile, so a profile's order is kept wherever the requirements allow it.
    position = {name: i for i, name in enumerate(entries)}
    sorter = graphlib.TopologicalSorter({name: [n for n in e.requires if n in entries] for name, e in entries.items()})
    try:
        sorter.prepare()
    except graphlib.CycleError as err:
        cycle = [str(name) for name in err.args[1]]
        raise ConfigError(f"{label}: modules require each other in a cycle: {' -> '.join(reversed(cycle))}") from None
    order: list[ProfileEntry] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=position.__getitem__)
        order.extend(entries[name] for name in ready)
        sorter.done(*ready)
    return order
