"""Stand-ins for running modules, a collector of commands, and a way to drive ``KeyApp`` with Textual's pilot.

A stand-in declares a module's liveliness token, publishes what the module provides and answers its services on a
bus of its own, so a page's proxy finds it as it would find the real module, and the test reads the commands the
page writes with a subscription on that bus.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, Static

from pluto import msgs
from pluto.bus import Bus
from pluto.cli.key.app import KeyApp


class FakeClock:
    """A monotonic clock the test moves by hand (the dead-man rule reads it)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class StandIn:
    """A module that is alive on the bus: its token, its published values and its services.

    Args:
        bus: the stand-in's own bus.
        name: the module's bus name.
        values: interface name -> the value to publish on it.
        services: service method -> handler (``start_activity`` and ``stop_activity`` answer True and False by
            default and are counted in ``calls``).
    """

    def __init__(
        self,
        bus: Bus,
        name: str,
        values: Mapping[str, msgs.Message],
        services: dict[str, Callable[[Any], Any]] | None = None,
    ) -> None:
        self.bus = bus
        self.calls: list[str] = []
        self.writers = {n: bus.create_publisher(n, type(v)) for n, v in values.items()}
        for n, v in values.items():
            self.writers[n].write(v)
        handlers: dict[str, Callable[[Any], Any]] = {
            "start_activity": lambda _r: True,
            "stop_activity": lambda _r: False,
        }
        handlers.update(services or {})
        self.services = [bus.create_service(f"{name}/{m}", self._counted(m, h)) for m, h in handlers.items()]
        self.token = bus.declare_module(name)

    def _counted(self, method: str, handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def serve(request: Any) -> Any:
            self.calls.append(method)
            return handler(request)

        return serve

    def write(self, name: str, value: msgs.Message) -> None:
        self.writers[name].write(value)


class Commands:
    """Every value written on an interface (a subscription opened before the app writes anything)."""

    def __init__(self, bus: Bus, name: str, cls: type[msgs.Message]) -> None:
        self.values: list[Any] = []
        self._lock = threading.Lock()
        self._sub = bus.create_subscription(name, self._add, cls, depth=4096, current=False)

    def _add(self, value: Any) -> None:
        with self._lock:
            self.values.append(value)

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self.values)


async def until(pilot: Pilot[None], predicate: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    """Let the app run until ``predicate()`` is true; return its value (AssertionError after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what or predicate}")
        await pilot.pause(0.02)


async def next_command(
    pilot: Pilot[None], commands: Commands, predicate: Callable[[Any], bool] = lambda _c: True, after: int = 0
) -> Any:
    """The first command at index >= ``after`` for which ``predicate`` holds (waiting for it)."""

    def found() -> Any:
        return next((c for c in commands.snapshot()[after:] if predicate(c)), None)

    return await until(pilot, found, what="a matching command")


def screen_text(app: KeyApp, widget: str = "#status") -> str:
    """What a widget of the app shows now."""
    return str(app.query_one(widget, Static).render())


async def connected(pilot: Pilot[None], app: KeyApp) -> None:
    """Wait until the page's link is connected and its status shows."""
    await until(pilot, lambda: app.link.connected, timeout=15.0, what=f"{app.page.name} connected")


async def type_values(pilot: Pilot[None], key: str, text: str) -> None:
    """Press ``key`` (an action that asks for numbers), enter ``text`` in the input line and press Enter.

    The text goes in the way the input inserts what is typed, at once (a key press each costs the pilot about
    0.1 s); the tmux test types it key by key.
    """
    await pilot.press(key)
    answer = pilot.app.query_one("#answer", Input)
    assert answer.has_focus, "the page did not ask for numbers"
    answer.insert_text_at_cursor(text)
    await pilot.press("enter")


def run_app(app: KeyApp, script: Callable[[Pilot[None]], Awaitable[None]]) -> None:
    """Run ``app`` headless, ``script`` driving it, and close it."""

    async def main() -> None:
        async with app.run_test(size=(140, 40)) as pilot:
            await script(pilot)
            await pilot.press("q")

    asyncio.run(main())
