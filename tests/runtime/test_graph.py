"""Who writes and reads what, from MOM's rows: writers by module or unnamed, the warning of two writers, and the
graph as text and as SVG (no bus: rows made by hand)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from pluto import msgs
from pluto.runtime import graph, mom

NOW = 1000.0
SVG = "{http://www.w3.org/2000/svg}"


def stats(name: str, kind: str, wid: int, last: float = NOW - 0.1) -> msgs.InterfaceStats:
    return msgs.InterfaceStats(name=name, type=kind, count=10, rate_hz=10.0, last_write=last, writer_id=wid)


def reads(name: str, kind: str, *writers: int) -> msgs.ReadStats:
    return msgs.ReadStats(name=name, type=kind, count=5, writers=list(writers))


def stack(cli_writer: int | None = None) -> list[mom.MomRow]:
    """base <- drive <- avoid, as MOM would show them; a command line writing drive/command if ``cli_writer``."""
    heard = [20] if cli_writer is None else [20, cli_writer]
    return [
        mom.MomRow(
            "avoid",
            msgs.ModuleInfo(
                name="avoid",
                requires=["drive"],
                provides=[stats("drive/command", "ActuatorState", 20), stats("avoidance/status", "FVectorState", 21)],
                reads=[reads("drive/status", "FVectorState", 30)],
            ),
        ),
        mom.MomRow(
            "base",
            msgs.ModuleInfo(
                name="base",
                provides=[stats("Base/Drive/State", "Odometry", 10)],
                reads=[reads("Base/Drive/Command", "ActuatorState", 31)],
            ),
        ),
        mom.MomRow(
            "drive",
            msgs.ModuleInfo(
                name="drive",
                requires=["base"],
                provides=[stats("Base/Drive/Command", "ActuatorState", 31), stats("drive/status", "FVectorState", 30)],
                reads=[reads("drive/command", "ActuatorState", *heard), reads("Base/Drive/State", "Odometry", 10)],
            ),
        ),
        mom.MomRow("mute", None),
    ]


def test_writers_and_readers_of_each_interface() -> None:
    uses = mom.interface_uses(stack(cli_writer=99), NOW)
    assert list(uses) == sorted(uses)
    command = uses["drive/command"]
    assert [(w.module, w.writer_id) for w in command.writers] == [("avoid", 20), (None, 99)]
    assert command.readers == ["drive"]
    assert "an unnamed writer (id 0x63" in command.writers[1].describe()
    assert uses["Base/Drive/State"].readers == ["drive"]
    assert uses["avoidance/status"].readers == []


def test_two_recent_writers_are_a_warning_and_one_is_not() -> None:
    assert mom.writer_warnings(mom.interface_uses(stack(), NOW)) == []
    [warning] = mom.writer_warnings(mom.interface_uses(stack(cli_writer=99), NOW))
    assert warning.startswith("warning: drive/command has 2 writers in the last 10 s: avoid, an unnamed writer")
    table = mom.render(stack(cli_writer=99), "r1", now=NOW)
    assert table.splitlines()[-1] == warning


def test_a_module_that_wrote_long_ago_does_not_count_as_a_writer_now() -> None:
    rows = stack()
    other = msgs.ModuleInfo(name="player", provides=[stats("drive/command", "ActuatorState", 40, last=NOW - 60.0)])
    rows.append(mom.MomRow("player", other))
    uses = mom.interface_uses(rows, NOW)
    assert [w.module for w in uses["drive/command"].writers] == ["avoid", "player"]
    assert [w.module for w in uses["drive/command"].recent_writers()] == ["avoid"]
    assert mom.writer_warnings(uses) == []


def test_graph_as_text() -> None:
    found = graph.build_graph(stack(cli_writer=99), NOW)
    assert found.modules == {"avoid": 2, "base": 0, "drive": 1, "mute": 0}  # columns by what each requires
    text = graph.render_text(found, "r1")
    lines = text.splitlines()
    assert lines[0] == "robot r1: 4 modules, 5 interfaces"
    assert lines.index("base") < lines.index("drive") < lines.index("avoid")
    assert "  writes drive/command -> drive" in lines
    assert "  reads  drive/command <- avoid, unnamed writer 0x63" in lines
    assert "  writes avoidance/status -> (no module reads it)" in lines
    assert lines[-1].startswith("warning: drive/command has 2 recent writers")
    assert graph.render_text(graph.build_graph([]), "r1") == "robot r1: no modules running"


def test_graph_as_svg() -> None:
    svg = graph.render_svg(graph.build_graph(stack(cli_writer=99), NOW), "r<1>")
    root = ET.fromstring(svg)  # well-formed, names escaped
    assert root.tag == f"{SVG}svg"
    modules = [g.find(f"{SVG}text").text for g in root.iter(f"{SVG}g") if g.get("class") == "module"]  # type: ignore[union-attr]
    interfaces = {
        g.find(f"{SVG}text").text: g.find(f"{SVG}rect").get("stroke")  # type: ignore[union-attr]
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "interface"
    }
    assert sorted(modules) == ["avoid", "base", "drive", "mute"]
    assert set(interfaces) == {
        "drive/command",
        "avoidance/status",
        "Base/Drive/State",
        "Base/Drive/Command",
        "drive/status",
    }
    assert interfaces["drive/command"] == "#c00"  # two writers: red
    assert interfaces["drive/status"] != "#c00"
    edges = [p.find(f"{SVG}title").text for p in root.iter(f"{SVG}path") if p.find(f"{SVG}title") is not None]  # type: ignore[union-attr]
    # writes and reads: avoid -> drive/command -> drive, drive -> drive/status -> avoid, ...
    assert {"avoid / drive/command", "drive / drive/command", "drive / drive/status", "avoid / drive/status"} <= set(
        edges
    )
    x = {g.find(f"{SVG}text").text: float(g.find(f"{SVG}rect").get("x")) for g in root.iter(f"{SVG}g")}  # type: ignore[union-attr, arg-type]
    assert x["base"] < x["Base/Drive/State"] < x["drive"] < x["drive/status"] < x["avoid"]  # layered left to right
    # the writer no module owns, dashed, just before the interface it writes
    [unnamed] = [g for g in root.iter(f"{SVG}g") if g.get("class") == "writer"]
    assert unnamed.find(f"{SVG}text").text == "unnamed 0x63"  # type: ignore[union-attr]
    assert x["unnamed 0x63"] < x["drive/command"]
    assert "unnamed writer / drive/command" in edges


def test_a_writer_named_by_its_command_line() -> None:
    labels = {99: "pluto-drive-velocity-4242"}
    uses = mom.interface_uses(stack(cli_writer=99), NOW, labels)
    [warning] = mom.writer_warnings(uses)
    assert "2 writers in the last 10 s: avoid, pluto-drive-velocity-4242 (not a module);" in warning
    found = graph.build_graph(stack(cli_writer=99), NOW, labels)
    assert "  reads  drive/command <- avoid, pluto-drive-velocity-4242" in graph.render_text(found, "r1").splitlines()
    root = ET.fromstring(graph.render_svg(found, "r1"))
    [writer] = [g for g in root.iter(f"{SVG}g") if g.get("class") == "writer"]
    assert writer.find(f"{SVG}text").text == "pluto-drive-velocity-4242"  # type: ignore[union-attr]


def test_a_module_that_wrote_once_has_handed_over_and_does_not_fight() -> None:
    def post(module: str, wid: int, count: int) -> mom.MomRow:
        written = msgs.InterfaceStats(
            name="Localization/Post_Pose",
            type="PoseEstimate",
            count=count,
            rate_hz=0.0,
            last_write=NOW - 1.0,
            writer_id=wid,
        )
        return mom.MomRow(module, msgs.ModuleInfo(name=module, provides=[written]))

    handed_over = [post("localization", 50, 1), post("pose", 51, 40)]
    uses = mom.interface_uses(handed_over, NOW)
    assert [w.module for w in uses["Localization/Post_Pose"].recent_writers()] == ["localization", "pose"]
    assert mom.writer_warnings(uses) == []
    assert "warning" not in graph.render_text(graph.build_graph(handed_over, NOW), "r1")
    both_correct = [post("pose", 51, 40), post("slam", 52, 30)]
    [warning] = mom.writer_warnings(mom.interface_uses(both_correct, NOW))
    assert warning.startswith("warning: Localization/Post_Pose has 2 writers in the last 10 s: pose, slam")


def test_columns_follow_the_requirements_and_a_circle_is_drawn_not_refused() -> None:
    assert graph.build_graph(stack(), NOW).modules == {"avoid": 2, "base": 0, "drive": 1, "mute": 0}
    circle = [
        mom.MomRow(name, msgs.ModuleInfo(name=name, requires=[needs]))
        for name, needs in (("a", "b"), ("b", "c"), ("c", "a"), ("d", "a"))
    ]
    columns = graph.build_graph(circle, NOW).modules
    assert sorted(columns) == ["a", "b", "c", "d"]
    assert sorted(columns[n] for n in "abc") == [0, 1, 2]  # the circle opened at one place, a chain of three
    assert columns["d"] == columns["a"] + 1


def test_one_module_and_one_interface_are_counted_in_the_singular() -> None:
    alone = [mom.MomRow("base", msgs.ModuleInfo(name="base", provides=[stats("Base/Drive/State", "Odometry", 10)]))]
    found = graph.build_graph(alone, NOW)
    assert graph.render_text(found, "r1").splitlines()[0] == "robot r1: 1 module, 1 interface"
    assert "robot r1: 1 module, 1 interface</text>" in graph.render_svg(found, "r1")


def test_the_table_of_a_paused_simulation_says_paused_not_a_rate_of_zero() -> None:
    never = msgs.InterfaceStats(name="drive/status", type="FVectorState", count=0, rate_hz=0.0, writer_id=30)
    rows = [
        mom.MomRow("base", msgs.ModuleInfo(name="base", provides=[stats("Base/Drive/State", "Odometry", 10)])),
        mom.MomRow("drive", msgs.ModuleInfo(name="drive", provides=[never])),
    ]
    paused = mom.render(rows, "r1", now=NOW, paused=True).splitlines()
    assert "simulated time paused" in paused[0]
    assert "Hz" not in "\n".join(paused) and "never" not in "\n".join(paused)
    assert paused[2].split()[-4:] == ["paused", "100", "ms", "10"]  # written once before: its age is known
    assert paused[3].split()[-3:] == ["paused", "paused", "0"]
    running = mom.render(rows, "r1", now=NOW)
    assert "10.0 Hz" in running and "never" in running and "paused" not in running
