"""The web view of several robots in one world, in a real browser (Debian's Chromium, headless, driven by Playwright).

Four robots of the office share one simulation (:mod:`pluto.sim.fleet`); each is given a goal. The view runs for the
first robot and, asking the simulator, draws the other three too: each with its name, its laser scan and its goal
(checked in the page's state and in the canvas's pixels). A screenshot is written to
``demo-output/fleet-web-view.png`` (the README's ``docs/fleet-web-view.png`` is one). Skipped, saying why, where
Chromium or Playwright is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus, bus_config
from pluto.gateways.web.module import WebModule, WebParams
from pluto.runtime.profiles import load_profile
from tests.helpers import wait_until
from tests.scenarios.fleet_stack import FleetLockstep
from tests.scenarios.stack import Script, without

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = Path(__file__).resolve().parents[3] / "demo-output" / "fleet-web-view.png"
WAIT_MS = 30_000
"""Milliseconds the page may take to show something (only a hang takes that long)."""
GOALS = [(5.0, 10.0), (22.0, 13.5), (30.0, 6.5), (6.0, 11.0)]
"""Each robot's goal (x, y), m: the lobby, rooms N4 and S6, the lobby."""
SPEEDS = [0.5, 0.4, 0.4, 0.2]
"""Each robot's speed along the corridor, m/s (the first and the last face west, the others east)."""

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)


@pytest.fixture
def web() -> Iterator[WebModule]:
    prefix = bus_config().robot
    robots = [f"{prefix}-{i}" for i in (1, 2, 3, 4)]
    with FleetLockstep() as stack:
        stack.start(without(load_profile("sim"), "dmu", "gps", "localization"), 4, world="office", rate=2.0)
        # the view first: a goal is a command, never handed to a reader that comes later
        module = WebModule(stack.bus(robots[0]), WebParams(port=0))  # asks the simulator for the world and robots
        module.start()
        wait_until(lambda: len(module.others) == 3, timeout=30.0, message="the view finds the other robots")
        for robot, goal, speed in zip(robots, GOALS, SPEEDS, strict=True):
            stack.add(Errand(stack.bus(robot), goal, speed))
        stack.resume()
        try:
            yield module
        finally:
            module.stop()


class Errand(Script):
    """Shows a goal (no motion module here: nobody takes it) and drives straight along the corridor for 6 s, so
    that the robots spread out."""

    def __init__(self, bus: Bus, goal: tuple[float, float], speed: float) -> None:
        super().__init__(bus, rate_hz=10.0)
        self.goal = self.publisher("motion/command", msgs.ActuatorState)
        self.drive = self.publisher("Base/Drive/Command", msgs.ActuatorState)
        self.position = list(goal)
        self.speed = speed
        self.shown = False

    def act(self, now: float) -> None:
        if not self.shown:
            self.shown = True
            self.goal.write(msgs.ActuatorState(cmd_flags=42, position=self.position))
        self.drive.write(msgs.ActuatorState(velocity=[self.speed if now < 6.0 else 0.0, 0.0]))


def _pixels(page: Any, rgb: tuple[int, int, int]) -> int:
    """Pixels of about this colour on the canvas."""
    count: int = page.evaluate(
        """([r, g, b]) => {
            const c = document.getElementById("map");
            const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4) {
                if (Math.abs(d[i] - r) < 40 && Math.abs(d[i + 1] - g) < 40 && Math.abs(d[i + 2] - b) < 40) n++;
            }
            return n;
        }""",
        list(rgb),
    )
    return count


def test_the_page_draws_every_robot_with_its_name_scan_and_goal(web: WebModule) -> None:
    own = web.bus.robot
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 760})
            errors: list[Any] = []
            page.on("pageerror", lambda error: errors.append(error))
            page.goto(web.url)
            page.wait_for_function(
                "() => plutoView.drawn.robots.length === 4 && plutoView.drawn.otherScanPoints > 150"
                " && plutoView.drawn.otherGoals === 3 && plutoView.drawn.goal && plutoView.drawn.scanPoints > 50"
                " && plutoView.frame.time >= 6",  # the robots have spread out along the corridor
                timeout=WAIT_MS,
            )
            others = sorted(web.others)  # the simulator's other robots, found by the view meanwhile
            assert len(others) == 3 and own not in others
            drawn = page.evaluate("() => plutoView.drawn")
            assert sorted(drawn["robots"]) == sorted([own, *others])
            frame = page.evaluate("() => plutoView.frame")
            assert frame["robot"] == own and [r["name"] for r in frame["robots"]] == others
            assert all(r["goals"]["moveto"] for r in frame["robots"])
            assert _pixels(page, (0x7A, 0x3D, 0xB8)) > 100  # the second robot's colour: its body, scan and goal
            assert _pixels(page, (0xE0, 0x31, 0x2B)) > 100  # the view's own robot's scan, as before
            assert others[0] in page.inner_text("#robots")
            SCREENSHOT.parent.mkdir(exist_ok=True)
            page.screenshot(path=str(SCREENSHOT))
            assert SCREENSHOT.stat().st_size > 10_000
            assert errors == []
        finally:
            browser.close()
