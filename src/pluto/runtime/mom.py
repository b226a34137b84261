"""MOM: which modules are alive, what they write, how fast, and how fresh; who writes and reads each interface.

Presence comes from the modules' liveliness tokens (a module that dies vanishes as soon as its connection drops);
the details come from each module's ``mom/<name>`` service.

Strategy for writers: every value on the bus carries its writer's id (:mod:`pluto.bus.session`), a module lists the
ids of its writers and, for each interface it reads, the ids it heard from lately. So a writer is known by name when
a module owns it, by the label a command line gives its writers while it runs (:attr:`pluto.bus.Bus.writer_label`),
and is "unnamed" when only its readers heard it (a script, a proxy in a program, a command line that has ended).
Two writers of one command interface in the same few seconds fight: the newest command wins each time (the README's
`pluto avoid goto` followed by `pluto drive velocity`, while avoid keeps writing ``drive/command``).

Every robot on the bus (``pluto mom --all-robots``): robots share a network under their own names
(``pluto/<robot>/...``), so the modules of all of them are the tokens ``pluto/*/@module/*`` and their details the
services ``pluto/*/@srv/mom/*``: two queries, whatever the number of robots (:func:`fleet_snapshot`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import msgspec

from pluto import msgs
from pluto.bus import Bus


@dataclass(frozen=True)
class MomRow:
    """One module as MOM sees it; ``info`` is None if it did not answer in time."""

    name: str
    info: msgs.ModuleInfo | None


RECENT = 10.0
"""s: a writer counts as writing an interface now if it wrote it this recently."""


@dataclass(frozen=True)
class Writer:
    """One writer of an interface: the module that owns it (None if no module does), its id and its statistics
    (zero when only a reader heard it)."""

    module: str | None
    writer_id: int
    rate_hz: float = 0.0
    count: int = 0
    last_write: float = 0.0
    recent: bool = False
    label: str = ""

    def describe(self) -> str:
        """``avoid``, ``pluto-drive-4242 (not a module)`` or ``an unnamed writer (id 0x1f2e...: ...)``."""
        if self.module is not None:
            return self.module
        if self.label:
            return f"{self.label} (not a module)"
        return f"an unnamed writer (id {self.writer_id:#x}: a script, a program's proxy or a command that ended)"

    @property
    def short(self) -> str:
        """``avoid``, ``pluto-drive-4242`` or ``unnamed writer 0x1f2e...``."""
        return self.module or self.label or f"unnamed writer {self.writer_id:#x}"


@dataclass
class InterfaceUse:
    """Who writes and who reads one interface, as the live modules tell."""

    name: str
    type: str
    writers: list[Writer] = field(default_factory=list)
    readers: list[str] = field(default_factory=list)

    def recent_writers(self) -> list[Writer]:
        """The writers that wrote it in the last :data:`RECENT` seconds."""
        return [writer for writer in self.writers if writer.recent]

    def rivals(self) -> list[Writer]:
        """The recent writers that keep writing it: two or more fight.

        A module that wrote it just once has handed it over rather than fights for it: the localization service
        writes ``Localization/Post_Pose`` once at its start with setter 0 ("nobody sets the pose", the spec's
        hand-over), and the pose or slam module takes it from there."""
        return [writer for writer in self.recent_writers() if writer.module is None or writer.count != 1]


def interface_uses(
    rows: list[MomRow], now: float | None = None, labels: dict[int, str] | None = None
) -> dict[str, InterfaceUse]:
    """Every interface some live module writes or reads, with its writers and readers, sorted by name.

    Args:
        labels: the names of writers no module owns, by id (:meth:`pluto.bus.Bus.writer_labels`).
    """
    labels = labels or {}
    now = time.time() if now is None else now
    uses: dict[str, InterfaceUse] = {}
    owners: dict[int, str] = {}
    for row in rows:
        for stats in row.info.provides if row.info is not None else []:
            use = uses.setdefault(stats.name, InterfaceUse(stats.name, stats.type))
            recent = bool(stats.last_write) and now - stats.last_write <= RECENT
            use.writers.append(Writer(row.name, stats.writer_id, stats.rate_hz, stats.count, stats.last_write, recent))
            if stats.writer_id:
                owners[stats.writer_id] = row.name
    heard: dict[str, set[int]] = {}
    for row in rows:
        for read in row.info.reads if row.info is not None else []:
            use = uses.setdefault(read.name, InterfaceUse(read.name, read.type))
            if row.name not in use.readers:
                use.readers.append(row.name)
            heard.setdefault(read.name, set()).update(read.writers)
    for name, ids in heard.items():
        use = uses[name]
        known = {writer.writer_id for writer in use.writers}
        for wid in sorted(ids - known):
            # heard lately by a reader, but no module owns that writer on this interface
            use.writers.append(Writer(owners.get(wid), wid, recent=True, label=labels.get(wid, "")))
        for i, writer in enumerate(use.writers):
            if writer.writer_id in ids and not writer.recent:
                use.writers[i] = replace(writer, recent=True)
    return dict(sorted(uses.items()))


def writer_warnings(uses: dict[str, InterfaceUse]) -> list[str]:
    """One line for each interface that more than one writer keeps writing (:meth:`InterfaceUse.rivals`)."""
    out = []
    for use in uses.values():
        recent = use.rivals()
        if len(recent) > 1:
            who = ", ".join(writer.describe() for writer in recent)
            out.append(
                f"warning: {use.name} has {len(recent)} writers in the last {RECENT:g} s: {who}; "
                "each new value replaces the other's (they fight)"
            )
    return out


def other_writers(bus: Bus, name: str, timeout: float = 0.5) -> list[Writer]:
    """The modules that wrote interface ``name`` lately: what a command line writing it too would fight."""
    use = interface_uses(snapshot(bus, timeout)).get(name)
    return [] if use is None else [w for w in use.recent_writers() if w.module is not None]


def snapshot(bus: Bus, timeout: float = 1.0) -> list[MomRow]:
    """The live modules of the robot and their details, sorted by name.

    A module is alive if its token is known or if it answered: right after this process joined, a session's
    module token can still be on its way when its ``mom`` service (sent before tokens on a new link) answers."""
    alive = bus.live_modules(timeout=timeout)
    replies: list[msgs.ModuleInfo] = bus.call_all("mom", msgs.ModuleInfo, timeout=timeout)
    infos = {info.name: info for info in replies}
    return [MomRow(name, infos.get(name)) for name in sorted(set(alive) | set(infos))]


def fleet_snapshot(bus: Bus, timeout: float = 1.0) -> dict[str, list[MomRow]]:
    """Every robot with a live module on the bus, and its modules as :func:`snapshot` gives them, by robot name
    (sorted). A module answers for its robot only: the robot is the ``<robot>`` of its token's and its service's key.
    """
    bus.settle()
    alive: dict[str, set[str]] = {}
    for reply in bus.query_tokens("pluto/*/@module/*", timeout=timeout):
        if reply.ok is not None:
            parts = str(reply.ok.key_expr).split("/")
            if len(parts) == 4:
                alive.setdefault(parts[1], set()).add(parts[3])
    infos: dict[str, dict[str, msgs.ModuleInfo]] = {}
    for reply in bus.query("pluto/*/@srv/mom/*", timeout=timeout):
        if reply.ok is None:
            continue
        parts = str(reply.ok.key_expr).split("/")
        try:
            info = msgspec.msgpack.decode(reply.ok.payload.to_bytes(), type=msgs.ModuleInfo)
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            bus.drops.drop("mom", err)
            continue
        if len(parts) == 5:
            infos.setdefault(parts[1], {})[info.name] = info
    robots = sorted(set(alive) | set(infos))
    return {
        robot: [
            MomRow(name, infos.get(robot, {}).get(name))
            for name in sorted(alive.get(robot, set()) | set(infos.get(robot, {})))
        ]
        for robot in robots
    }


def render_fleet(
    snapshots: dict[str, list[MomRow]], now: float | None = None, labels: dict[str, dict[int, str]] | None = None
) -> str:
    """Every robot's table (:func:`render`), after a line that lists the robots and how many modules each runs.

    Args:
        snapshots: each robot's modules (:func:`fleet_snapshot`).
        labels: each robot's writer labels (:meth:`pluto.bus.Bus.writer_labels`), for the robots that have some.
    """
    if not snapshots:
        return "no robot on the bus: no module running"
    now = time.time() if now is None else now
    counts = ", ".join(
        f"{robot} ({len(rows)} module{'s' if len(rows) != 1 else ''})" for robot, rows in snapshots.items()
    )
    out = [f"{len(snapshots)} robot{'s' if len(snapshots) != 1 else ''} on the bus: {counts}"]
    for robot, rows in snapshots.items():
        out += ["", render(rows, robot, now, (labels or {}).get(robot))]
    return "\n".join(out)


def _age(last: float, now: float) -> str:
    if not last:
        return "never"
    age = max(0.0, now - last)
    return f"{age * 1000:.0f} ms" if age < 1 else f"{age:.1f} s"


PAUSED = "paused"
"""What the table says for a rate, and for the age of a value never written, while the simulated time is held."""


def render(
    rows: list[MomRow],
    robot: str,
    now: float | None = None,
    labels: dict[int, str] | None = None,
    *,
    paused: bool = False,
) -> str:
    """A text table: one line per interface a module writes (or one line for a module that writes none), then the
    modules' notes and the warnings of interfaces with more than one writer (``labels``: as for
    :func:`interface_uses`).

    ``paused``: the simulated time is held (a lock-stepped simulator before its run is let go): the modules that
    follow it write nothing meanwhile, so the rates say :data:`PAUSED` rather than 0.0 Hz, and so does the age of a
    value not written yet rather than "never".
    """
    now = time.time() if now is None else now
    header = ("MODULE", "PID", "ACTIVE", "INTERFACE", "TYPE", "RATE", "AGE", "COUNT")
    lines = [line for row in rows for line in _row_lines(row, now, paused)]
    if not lines:
        return f"robot {robot}: no modules running"
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    held = " (simulated time paused: rates once it runs)" if paused else ""
    out = [f"robot {robot}: {len(rows)} module{'s' if len(rows) != 1 else ''}{held}", fmt.format(*header)]
    out += [fmt.format(*line).rstrip() for line in lines]
    for row in rows:
        for note in row.info.notes if row.info is not None else []:
            out.append(f"{row.name}: {note}")
    out += writer_warnings(interface_uses(rows, now, labels))
    return "\n".join(out)


def _row_lines(row: MomRow, now: float, paused: bool) -> list[tuple[str, ...]]:
    """A module's lines of :func:`render`'s table: one per interface it writes, its name, pid and state on the
    first; one line for a module that writes none, or that did not answer."""
    info = row.info
    if info is None:
        return [(row.name, "?", "?", "(no answer)", "", "", "", "")]
    first = (row.name, str(info.pid), "yes" if info.active else "no")
    if not info.provides:
        return [(*first, "-", "", "", "", "")]
    return [
        (
            *(first if i == 0 else ("", "", "")),
            iface.name,
            iface.type,
            PAUSED if paused else f"{iface.rate_hz:.1f} Hz",
            PAUSED if paused and not iface.last_write else _age(iface.last_write, now),
            str(iface.count),
        )
        for i, iface in enumerate(info.provides)
    ]
