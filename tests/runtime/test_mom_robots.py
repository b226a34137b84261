"""``pluto mom --all-robots``: every robot on the bus with its modules, from two queries."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest

from pluto.bus import Bus, bus_config
from pluto.cli.main import main
from pluto.runtime import mom
from pluto.runtime.heartbeat import HeartbeatModule, HeartbeatMonitor, HeartbeatMonitorParams
from pluto.runtime.module import ModuleParams
from tests.helpers import wait_until


def test_every_robot_on_the_bus_is_listed_with_its_modules(
    make_bus: Callable[..., Bus], capsys: pytest.CaptureFixture[str]
) -> None:
    base = bus_config()
    scout = make_bus(msgspec.structs.replace(base, robot=f"{base.robot}-scout"))
    carrier = make_bus(msgspec.structs.replace(base, robot=f"{base.robot}-carrier"))
    viewer = make_bus()  # the command's own robot runs nothing
    modules = [
        HeartbeatModule(scout, ModuleParams(rate_hz=20.0)),
        HeartbeatMonitor(scout, HeartbeatMonitorParams(rate_hz=5.0)),
        HeartbeatModule(carrier, ModuleParams(rate_hz=20.0)),
    ]
    for module in modules:
        module.start()
    try:

        def listed() -> dict[str, list[mom.MomRow]]:
            found = mom.fleet_snapshot(viewer, timeout=1.0)
            mine = {robot: rows for robot, rows in found.items() if robot.startswith(base.robot)}
            ready = len(mine) == 2 and all(row.info is not None for rows in mine.values() for row in rows)
            return mine if ready and sum(len(rows) for rows in mine.values()) == 3 else {}

        wait_until(listed, timeout=15.0, message="both robots and their three modules listed")
        snapshot = listed()
        assert {robot: [row.name for row in rows] for robot, rows in snapshot.items()} == {
            carrier.robot: ["heartbeat"],
            scout.robot: ["heartbeat", "heartbeat-monitor"],
        }
        table = mom.render_fleet(snapshot)
        assert table.splitlines()[0] == (f"2 robots on the bus: {carrier.robot} (1 module), {scout.robot} (2 modules)")
        assert f"robot {scout.robot}: 2 modules" in table and f"robot {carrier.robot}: 1 module" in table
        assert "Heartbeat" in table  # each module's interfaces, as `pluto mom` shows them for one robot

        assert main(["mom", "--all-robots"]) == 0
        out = capsys.readouterr().out
        assert f"{scout.robot} (2 modules)" in out and f"{carrier.robot} (1 module)" in out
        assert "heartbeat-monitor" in out
    finally:
        for module in reversed(modules):
            module.stop()
    assert mom.render_fleet({}) == "no robot on the bus: no module running"
