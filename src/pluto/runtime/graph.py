"""The robot's graph: modules and the interfaces between them, as text and as an SVG picture (``pluto graph``).

Strategy: a layered drawing, no layout engine. Modules sit in columns by how deep they are in the chain of what
they require (the base first, then what needs it: the launcher already relies on ``requires`` having no cycle);
each interface sits in the column right after the module that writes it, or before its first reader when no
module writes it. Edges go writer -> interface -> reader as curves; the few that go back (a status read by the
module that commands, ``drive/status`` -> avoid) bend back over the columns. An interface with more than one
recent writer is drawn in red, as MOM warns of it. Everything here is pure: rows in, text out.
"""

from __future__ import annotations

import graphlib
import html
from dataclasses import dataclass

from pluto.runtime.mom import InterfaceUse, MomRow, interface_uses

__all__ = ["Graph", "build_graph", "render_svg", "render_text"]


@dataclass(frozen=True)
class Graph:
    """Modules (with the column of each), and the interfaces they write and read."""

    modules: dict[str, int]
    interfaces: dict[str, InterfaceUse]


def _depths(rows: list[MomRow]) -> dict[str, int]:
    """Column of each module: 0 if it requires no running module, else one more than the deepest it requires."""
    requires = {row.name: [r for r in (row.info.requires if row.info else []) if r != row.name] for row in rows}
    graph = {name: [r for r in needs if r in requires] for name, needs in sorted(requires.items())}
    while True:
        try:
            order = list(graphlib.TopologicalSorter(graph).static_order())
            break
        except graphlib.CycleError as err:
            # Modules that require each other in a circle (the launcher refuses such a profile, but the graph draws
            # whatever runs): the circle's last requirement is drawn as one that goes back.
            cycle = err.args[1]  # each one a requirement of the next
            graph[cycle[1]].remove(cycle[0])
    depth: dict[str, int] = {}
    for name in order:
        depth[name] = max((depth[r] + 1 for r in graph[name]), default=0)
    return depth


def build_graph(rows: list[MomRow], now: float | None = None, labels: dict[int, str] | None = None) -> Graph:
    """The graph of the live modules ``rows`` (from :func:`pluto.runtime.mom.snapshot`; ``labels`` name the writers
    no module owns, as for :func:`pluto.runtime.mom.interface_uses`)."""
    return Graph(_depths(rows), interface_uses(rows, now, labels))


def _writers_text(use: InterfaceUse) -> str:
    return ", ".join(w.short for w in use.writers) or "nobody"


def _plural(count: int, noun: str) -> str:
    """``1 module``, ``2 modules``: a count and its noun, in the number the count asks for."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _counted(graph: Graph) -> str:
    return f"{_plural(len(graph.modules), 'module')}, {_plural(len(graph.interfaces), 'interface')}"


def render_text(graph: Graph, robot: str) -> str:
    """One block per module: what it writes (and who reads each) and what it reads (and who writes each)."""
    if not graph.modules:
        return f"robot {robot}: no modules running"
    out = [f"robot {robot}: {_counted(graph)}"]
    for module in sorted(graph.modules, key=lambda m: (graph.modules[m], m)):
        out.append(module)
        for use in graph.interfaces.values():
            if any(w.module == module for w in use.writers):
                out.append(f"  writes {use.name} -> {', '.join(use.readers) or '(no module reads it)'}")
        for use in graph.interfaces.values():
            if module in use.readers:
                out.append(f"  reads  {use.name} <- {_writers_text(use)}")
    unowned = [use for use in graph.interfaces.values() if use.writers and all(w.module is None for w in use.writers)]
    for use in unowned:
        out.append(f"{use.name}: written by {_writers_text(use)} (not a module), read by {', '.join(use.readers)}")
    for use in graph.interfaces.values():
        recent = use.rivals()
        if len(recent) > 1:
            out.append(f"warning: {use.name} has {len(recent)} recent writers: {_writers_text(use)}")
    return "\n".join(out)


# -- SVG ---------------------------------------------------------------------------------------------------------

_CHAR = 7.2  # px per character of the 12 px monospace font
_ROW = 34.0  # px between the centres of two nodes of a column
_GAP = 70.0  # px between columns
_PAD = 20.0  # px around the drawing
_DIP = 40.0  # px below the lower end of an edge that goes back, at its lowest


@dataclass(frozen=True)
class _Node:
    key: str
    label: str
    column: int
    module: bool
    warn: bool = False
    unnamed: bool = False


def _columns(graph: Graph) -> list[list[_Node]]:
    # module column c at 2c + 2, what it writes at 2c + 3; an interface no module writes just before its first
    # reader; a writer no module owns just before its interface
    nodes: list[_Node] = [_Node(f"m:{m}", m, 2 * c + 2, True) for m, c in graph.modules.items()]
    for use in graph.interfaces.values():
        writers = [graph.modules[w.module] for w in use.writers if w.module in graph.modules]
        readers = [graph.modules[r] for r in use.readers if r in graph.modules]
        column = 2 * min(writers) + 3 if writers else 2 * min(readers, default=0) + 1
        nodes.append(_Node(f"i:{use.name}", use.name, column, False, len(use.rivals()) > 1))
        for writer in use.writers:
            if writer.module is None:  # a writer no module owns: beside the interface, in the column before it
                label = writer.label or f"unnamed {writer.writer_id:#x}"
                nodes.append(_Node(f"w:{writer.writer_id}", label, column - 1, False, unnamed=True))
    width = max((n.column for n in nodes), default=0) + 1
    columns: list[list[_Node]] = [[] for _ in range(width)]
    for node in sorted(nodes, key=lambda n: n.label):
        columns[node.column].append(node)
    return [column for column in columns if column]


def render_svg(graph: Graph, robot: str) -> str:
    """A standalone SVG picture of the graph: modules as boxes, interfaces as rounded labels, arrows for writes
    (module -> interface) and reads (interface -> module)."""
    columns = _columns(graph)
    place: dict[str, tuple[float, float, float]] = {}  # key -> (x of the left edge, y of the centre, width)
    x = _PAD + _GAP / 2  # room for the edges that come back into the first column
    tallest = 0
    for column in columns:
        width = max(len(node.label) * _CHAR + 20.0 for node in column)
        for i, node in enumerate(column):
            place[node.key] = (x, _PAD + 40.0 + i * _ROW, width)
        tallest = max(tallest, len(column))
        x += width + _GAP
    total_w = max(x - _GAP / 2 + _PAD, 300.0)
    floor = _PAD + 40.0 + (max(tallest, 1) - 1) * _ROW + 12.0
    total_h = floor + 10.0 + _DIP + _PAD
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{total_h:.0f}" '
        f'viewBox="0 0 {total_w:.0f} {total_h:.0f}" font-family="monospace" font-size="12">',
        "<defs><marker id='arrow' viewBox='0 0 10 10' refX='10' refY='5' markerWidth='7' markerHeight='7' "
        "orient='auto-start-reverse'><path d='M 0 0 L 10 5 L 0 10 z' fill='#555'/></marker></defs>",
        f'<rect width="100%" height="100%" fill="white"/>'
        f'<text x="{_PAD}" y="{_PAD + 8}" font-size="14">robot {html.escape(robot)}: '
        f"{_counted(graph)}</text>",
    ]
    for use in graph.interfaces.values():
        target = f"i:{use.name}"
        for writer in use.writers:
            if writer.module in graph.modules:
                parts.append(_edge(place[f"m:{writer.module}"], place[target], use.name, writer.module, floor))
            elif writer.module is None:
                parts.append(_edge(place[f"w:{writer.writer_id}"], place[target], use.name, "unnamed writer", floor))
        for reader in use.readers:
            if reader in graph.modules:
                parts.append(_edge(place[target], place[f"m:{reader}"], use.name, reader, floor))
    for column in columns:
        for node in column:
            left, y, width = place[node.key]
            label = html.escape(node.label)
            if node.unnamed:
                parts.append(
                    f'<g class="writer"><title>a writer no module owns: a command line, a script</title>'
                    f'<rect x="{left:.1f}" y="{y - 12:.1f}" width="{width:.1f}" height="24" fill="#fff" '
                    f'stroke="#c00" stroke-dasharray="4 3"/>'
                    f'<text x="{left + width / 2:.1f}" y="{y + 4:.1f}" text-anchor="middle">{label}</text></g>'
                )
            elif node.module:
                parts.append(
                    f'<g class="module"><rect x="{left:.1f}" y="{y - 12:.1f}" width="{width:.1f}" height="24" '
                    f'fill="#dde8f8" stroke="#345"/>'
                    f'<text x="{left + width / 2:.1f}" y="{y + 4:.1f}" text-anchor="middle">{label}</text></g>'
                )
            else:
                colour = "#c00" if node.warn else "#777"
                title = "<title>more than one recent writer</title>" if node.warn else ""
                parts.append(
                    f'<g class="interface">{title}<rect x="{left:.1f}" y="{y - 11:.1f}" width="{width:.1f}" '
                    f'height="22" rx="11" fill="#fafafa" stroke="{colour}"/>'
                    f'<text x="{left + width / 2:.1f}" y="{y + 4:.1f}" text-anchor="middle" fill="{colour}">'
                    f"{label}</text></g>"
                )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _edge(
    start: tuple[float, float, float], end: tuple[float, float, float], interface: str, module: str, floor: float
) -> str:
    """A curve from the right side of ``start`` to the left side of ``end``. One that goes back (right to left)
    goes down in the gap after ``start``'s column, runs under every row (``floor``: the bottom of the lowest; the
    longer the edge, the lower), and comes up in the gap before ``end``'s column to enter it from the left."""
    title = html.escape(f"{module} / {interface}")
    x1, y1 = end[0], end[1]
    if x1 > start[0]:
        x0, y0 = start[0] + start[2], start[1]
        bend = max(40.0, (x1 - x0) / 2)
        path = f"M {x0:.1f} {y0:.1f} C {x0 + bend:.1f} {y0:.1f}, {x1 - bend:.1f} {y1:.1f}, {x1:.1f} {y1:.1f}"
    else:
        x0, y0 = start[0] + start[2], start[1]
        down = x0 + _GAP / 3  # the way down, between the columns
        gap = x1 - _GAP / 3  # the way up
        dip = floor + 10.0 + min(_DIP - 10.0, 0.05 * (x0 - x1))
        r = 10.0  # radius of the turns
        path = (
            f"M {x0:.1f} {y0:.1f} L {down - r:.1f} {y0:.1f} Q {down:.1f} {y0:.1f}, {down:.1f} {y0 + r:.1f} "
            f"L {down:.1f} {dip - r:.1f} Q {down:.1f} {dip:.1f}, {down - r:.1f} {dip:.1f} "
            f"L {gap + r:.1f} {dip:.1f} Q {gap:.1f} {dip:.1f}, {gap:.1f} {dip - r:.1f} "
            f"L {gap:.1f} {y1 + r:.1f} Q {gap:.1f} {y1:.1f}, {gap + r:.1f} {y1:.1f} L {x1:.1f} {y1:.1f}"
        )
    return f'<path d="{path}" fill="none" stroke="#555" marker-end="url(#arrow)"><title>{title}</title></path>'
