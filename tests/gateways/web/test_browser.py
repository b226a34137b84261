"""The web view in a real browser: Debian's Chromium, headless, driven by Playwright, on the simulated robot.

The page must draw the map, the robot and its laser scan (checked in the page's state and in the canvas's pixels),
and a click on the map must reach ``motion/command`` as a moveto to that point. A screenshot is written to
``demo-output/web-view.png``. Skipped, saying why, where Chromium or Playwright is missing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.gateways.web.module import WebModule, WebParams
from pluto.runtime.profiles import load_profile, with_params
from tests.helpers import wait_until
from tests.scenarios.stack import Collector, DriveCommand, Lockstep

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = Path(__file__).resolve().parents[3] / "demo-output" / "web-view.png"
WAIT_MS = 30_000
"""Milliseconds the page may take to show something (only a hang takes that long)."""
START = (10.0, 9.7, 0.0)
"""The office's start pose: the west end of the corridor, facing east (x m, y m, θ rad)."""
GOAL = (15.0, 9.7)
"""A free point of the office's corridor, 5 m ahead of the robot's start."""

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)


@pytest.fixture
def stack(bus: Bus) -> Iterator[tuple[WebModule, Collector]]:
    with Lockstep(bus) as sim:
        # the simulated robot; its localization starts at the world's start pose, so the estimate is on the map
        sim.start(with_params(load_profile("sim"), "localization", start_pose=list(START)), world="office", seed=1)
        commands = sim.collect(names.MOTION_COMMAND, msgs.ActuatorState)
        sim.add(DriveCommand(bus, 0.4, 0.0, until=12.0))  # along the corridor, so the path grows
        sim.resume()
        web = WebModule(bus, WebParams(port=0))  # no map given: it asks the simulator for its world
        web.start()
        try:
            yield web, commands
        finally:
            web.stop()


@pytest.fixture
def page(stack: tuple[WebModule, Collector]) -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 700})
            errors: list[Any] = []
            page.errors = errors  # the page's uncaught JavaScript errors
            page.on("pageerror", lambda error: errors.append(error))
            page.goto(stack[0].url)
            yield page
        finally:
            browser.close()


def _red_pixels(page: Any) -> int:
    """Pixels of the scan's colour on the canvas."""
    count: int = page.evaluate(
        """() => {
            const c = document.getElementById("map");
            const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i] > 200 && d[i + 1] < 80 && d[i + 2] < 80) n++;
            return n;
        }"""
    )
    return count


def test_the_page_draws_the_map_robot_and_scan_and_a_click_sends_a_moveto(
    stack: tuple[WebModule, Collector], page: Any
) -> None:
    commands = stack[1]
    page.wait_for_function(
        "() => plutoView.drawn.walls > 4 && plutoView.drawn.robot && plutoView.drawn.scanPoints > 50",
        timeout=WAIT_MS,
    )
    # the MOM table lists the simulator's modules (asked every 2 s)
    page.wait_for_function("() => plutoView.mom && plutoView.mom.modules.some(m => m.name === 'sim')", timeout=WAIT_MS)
    assert "Sim/Truth" in page.inner_text("#mom")
    drawn = page.evaluate("() => plutoView.drawn")
    assert drawn["estimate"]  # the localization's pose and its ellipse
    assert _red_pixels(page) > 100  # the scan's points are on the canvas, not only in the page's state

    x, y = page.evaluate(f"() => plutoView.toScreen({GOAL[0]}, {GOAL[1]})")
    page.mouse.click(x, y)
    wait_until(
        lambda: any(c.cmd_flags == 42 for c in commands.snapshot()), timeout=WAIT_MS / 1000, message="the moveto"
    )
    moveto = next(c for c in commands.snapshot() if c.cmd_flags == 42)
    assert math.dist(moveto.position, GOAL) < 0.1  # a pixel is a few centimetres

    # the robot drives on (no motion module here: the moveto stays on the bus), the path grows, the goal is shown
    page.wait_for_function("() => plutoView.drawn.pathPoints > 10 && plutoView.drawn.goal", timeout=WAIT_MS)
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size > 10_000
    # a held button drives (repeated every 0.1 s), its release stops
    page.hover("#forward")
    page.mouse.down()
    wait_until(lambda: _teleops(commands).count(DRIVE) >= 2, timeout=WAIT_MS / 1000, message="repeated teleop")
    page.mouse.up()
    wait_until(lambda: _teleops(commands)[-1:] == [STOP], timeout=WAIT_MS / 1000, message="the stop on release")
    assert page.errors == []


DRIVE = [0.25, 0.0]
"""The forward button at the slider's default: half the top speed of 0.5 m/s."""
STOP = [0.0, 0.0]


def _teleops(commands: Collector) -> list[list[float]]:
    return [c.velocity for c in commands.snapshot() if c.cmd_flags == 20]
