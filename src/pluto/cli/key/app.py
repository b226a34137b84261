"""The Textual program of ``pluto key``: a page per module, its keys in a footer, its status in words, live.

Strategy: the screen only routes. A key is looked up in the page's table (:func:`pluto.cli.key.keymap.action_for`);
an action that needs numbers opens a one-line input first; then the page's link (:mod:`pluto.cli.key.links`)
carries it out: at once for a command write, on a worker thread for anything that waits for a reply. A timer every
``tick_every`` s keeps the dead-man rule (:meth:`Link.tick`) and redraws the status. The link connects on a worker
thread and retries every second while its module is not running, so the page comes up at once and says what it
waits for. Plain terminal keys only (no mouse), so it works over ssh.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import ClassVar

from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Input, Static
from textual.worker import get_current_worker

from pluto.bus import Bus
from pluto.cli.key.keymap import MOVE_ACTIONS, PAGES, KeyBinding, Page, action_for, footer_text, parse_values
from pluto.cli.key.links import Link, make_link
from pluto.cli.key.teleop import TeleopParams
from pluto.errors import PlutoError

__all__ = ["KeyApp"]


class KeyApp(App[None]):
    """The keyboard interface.

    Args:
        bus: the robot's bus (the caller opens and closes it).
        page: the page to open first (a key of :data:`~pluto.cli.key.keymap.PAGES`).
        params: speeds and timing of the movement keys.
        connect_timeout: s to wait for a running module to publish when connecting.
        tick_every: s between two ticks of the dead-man rule and redraws of the status.
        clock: monotonic seconds, for the dead-man rule.
    """

    CSS = """
    #title { background: $primary; color: $text; padding: 0 1; }
    #status { padding: 1 1 0 1; height: auto; }
    #message { padding: 1 1 0 1; height: auto; color: $warning; }
    #ask { height: auto; display: none; padding: 1 1 0 1; }
    #ask.open { display: block; }
    #keys { dock: bottom; height: auto; background: $panel; padding: 0 1; }
    """

    AUTO_FOCUS = None  # keys go to the page, not to the (hidden) input line

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "stop_and_quit", "quit", show=False, priority=True),
        Binding("ctrl+q", "stop_and_quit", "quit", show=False, priority=True),
    ]

    def __init__(
        self,
        bus: Bus,
        page: str,
        params: TeleopParams | None = None,
        *,
        connect_timeout: float = 2.0,
        tick_every: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        if page not in PAGES:
            raise ValueError(f"no page {page!r} (pages: {', '.join(PAGES)})")
        self.bus = bus
        self.params = params
        self.connect_timeout = connect_timeout
        self.tick_every = tick_every
        self.clock = clock
        self.link: Link = make_link(page, bus, params)
        self.asking: KeyBinding | None = None
        self._leaving = threading.Event()
        self._waiting = ""  # why the link is not connected yet

    @property
    def page(self) -> Page:
        """The page shown."""
        return self.link.page

    # -- layout -------------------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # markup off: statuses and error messages carry brackets ("out of range [-3, 3] m/s")
        yield Static(id="title", markup=False)
        yield Static(id="status", markup=False)
        yield Static(id="message", markup=False)
        with Vertical(id="ask"):
            yield Static(id="question", markup=False)
            yield Input(id="answer", disabled=True)
        yield Static(id="keys", markup=False)

    def on_mount(self) -> None:
        self._show_page()
        self.set_interval(self.tick_every, self._tick)
        self._connect()

    def _show_page(self) -> None:
        self.title = f"pluto key {self.page.name}"
        self.query_one("#title", Static).update(
            f"pluto key {self.page.name} · robot {self.bus.robot} · {self.page.title}"
        )
        self.query_one("#keys", Static).update(footer_text(self.page))
        self._redraw()

    def _redraw(self) -> None:
        link = self.link
        if link.connected:
            lines = link.status_lines()
        else:
            lines = [f"waiting for the {link.page.module} module (start it: pluto start {link.page.module})"]
            if self._waiting:
                lines.append(self._waiting)
        self.query_one("#status", Static).update("\n".join(lines))
        self.query_one("#message", Static).update(link.message)

    # -- the link to the module ---------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="connect")
    def _connect(self) -> None:
        link = self.link
        worker = get_current_worker()
        while not link.connected and not worker.is_cancelled and not self._leaving.is_set():
            try:
                link.connect(self.connect_timeout)
            except PlutoError as err:
                self._waiting = str(err)
                self._leaving.wait(1.0)
        self._waiting = ""

    def _tick(self) -> None:
        if self.link.connected:
            try:
                self.link.tick(self.clock())
            except (PlutoError, ValueError) as err:
                self.link.message = f"error: {err}"
        self._redraw()

    # -- keys ---------------------------------------------------------------------------------------------------

    def on_key(self, event: events.Key) -> None:
        if self.asking is not None:
            if event.key == "escape":
                event.stop()
                self._close_question()
                self._do("stop", ())
            return
        binding = action_for(self.page, event.key)
        if binding is None:
            return
        event.stop()
        event.prevent_default()
        if binding.prompt is not None:
            self._ask(binding)
        else:
            self._do(binding.action, ())

    def _ask(self, binding: KeyBinding) -> None:
        assert binding.prompt is not None
        self.asking = binding
        self.query_one("#question", Static).update(f"{binding.prompt.label} (Enter sends, Esc cancels)")
        self.query_one("#ask").add_class("open")
        answer = self.query_one("#answer", Input)
        answer.value = ""
        answer.disabled = False
        answer.focus()

    def _close_question(self) -> None:
        self.asking = None
        self.query_one("#ask").remove_class("open")
        answer = self.query_one("#answer", Input)
        answer.blur()
        answer.disabled = True

    def on_input_submitted(self, event: Input.Submitted) -> None:
        binding = self.asking
        if binding is None or binding.prompt is None:
            return
        try:
            values = parse_values(binding.prompt, event.value)
        except ValueError as err:
            self.link.message = f"error: {err}"
            self._redraw()
            return
        self._close_question()
        self._do(binding.action, values)

    def _do(self, action: str, values: tuple[float, ...]) -> None:
        if action == "quit":
            self.action_stop_and_quit()
            return
        if action.startswith("page:"):
            self._switch(action.removeprefix("page:"))
            return
        link = self.link
        if not link.connected:
            link.message = f"not connected to {link.page.module} yet"
        elif action in link.blocking:
            link.message = f"{action.replace('_', ' ')}..."
            self._act_waiting(link, action, values)
        else:
            self._act(link, action, values)
        self._redraw()

    def _act(self, link: Link, action: str, values: tuple[float, ...]) -> None:
        try:
            link.act(action, values, self.clock())
        except (PlutoError, ValueError) as err:
            link.message = f"error: {err}"
        except Exception as err:  # a module's odd reply must not take the program (and its stop keys) down
            link.message = f"error: {type(err).__name__}: {err}"

    @work(thread=True, group="actions")
    def _act_waiting(self, link: Link, action: str, values: tuple[float, ...]) -> None:
        self._act(link, action, values)

    def _switch(self, page: str) -> None:
        if page == self.page.name:
            return
        if self.link.teleop.held is not None:  # a movement key held: stop it; a goto or a moveto goes on
            self._stop_link()
        self.link.close()
        self.link = make_link(page, self.bus, self.params)
        self._show_page()
        self._connect()

    def _stop_link(self) -> None:
        if self.link.connected:
            try:
                self.link.stop()
            except (PlutoError, ValueError) as err:
                self.link.message = f"error: {err}"

    def action_stop_and_quit(self) -> None:
        """Stop the robot if this page drives it (drive, avoid), then leave; a motion, the wrist and the arm go on
        with what they were told."""
        if any(b.action in MOVE_ACTIONS for b in self.page.bindings):
            self._stop_link()
        self.exit()

    def on_unmount(self) -> None:
        self._leaving.set()
        self.link.close()
