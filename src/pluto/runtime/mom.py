"""MOM: which modules are alive, what they write, how fast, and how fresh.

Presence comes from the modules' liveliness tokens (a module that dies vanishes as soon as its connection drops);
the details come from each module's ``mom/<name>`` service.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pluto import msgs
from pluto.bus import Bus


@dataclass(frozen=True)
class MomRow:
    """One module as MOM sees it; ``info`` is None if it did not answer in time."""

    name: str
    info: msgs.ModuleInfo | None


def snapshot(bus: Bus, timeout: float = 1.0) -> list[MomRow]:
    """The live modules of the robot and their details, sorted by name."""
    alive = bus.live_modules(timeout=timeout)
    replies: list[msgs.ModuleInfo] = bus.call_all("mom", msgs.ModuleInfo, timeout=timeout)
    infos = {info.name: info for info in replies}
    return [MomRow(name, infos.get(name)) for name in alive]


def _age(last: float, now: float) -> str:
    if not last:
        return "never"
    age = max(0.0, now - last)
    return f"{age * 1000:.0f} ms" if age < 1 else f"{age:.1f} s"


def render(rows: list[MomRow], robot: str, now: float | None = None) -> str:
    """A text table: one line per interface a module writes (or one line for a module that writes none)."""
    now = time.time() if now is None else now
    header = ("MODULE", "PID", "ACTIVE", "INTERFACE", "TYPE", "RATE", "AGE", "COUNT")
    lines: list[tuple[str, ...]] = []
    for row in rows:
        info = row.info
        if info is None:
            lines.append((row.name, "?", "?", "(no answer)", "", "", "", ""))
            continue
        first = (row.name, str(info.pid), "yes" if info.active else "no")
        if not info.provides:
            lines.append((*first, "-", "", "", "", ""))
        for i, iface in enumerate(info.provides):
            lead = first if i == 0 else ("", "", "")
            lines.append(
                (
                    *lead,
                    iface.name,
                    iface.type,
                    f"{iface.rate_hz:.1f} Hz",
                    _age(iface.last_write, now),
                    str(iface.count),
                )
            )
    if not lines:
        return f"robot {robot}: no modules running"
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [f"robot {robot}: {len(rows)} module{'s' if len(rows) != 1 else ''}", fmt.format(*header)]
    out += [fmt.format(*line).rstrip() for line in lines]
    for row in rows:
        for note in row.info.notes if row.info is not None else []:
            out.append(f"{row.name}: {note}")
    return "\n".join(out)
