"""Which key does what on each page of ``pluto key``, and the values a typed command asks for.

Strategy: a page is a table of :class:`KeyBinding` (terminal key names as Textual spells them: ``up``, ``w``,
``space``, ``escape``, ``plus``, ``left_square_bracket``) to action names; the program looks the key up here and
hands the action to the page's link (:mod:`pluto.cli.key.links`). Actions that need numbers (goto x y, set pose
x y θ) name a :class:`Prompt`; :func:`parse_values` turns what the user typed into floats or says clearly what is
wrong. Nothing here knows about Textual or the bus, so the whole table is tested as data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "COMMON",
    "MOVE_ACTIONS",
    "PAGES",
    "KeyBinding",
    "Page",
    "Prompt",
    "action_for",
    "footer_text",
    "key_label",
    "parse_values",
]


@dataclass(frozen=True)
class Prompt:
    """Numbers a command asks for before it is sent.

    Attributes:
        title: what the numbers are for ("goto").
        fields: one name per number, with its unit ("x m").
        positive: indices of the numbers that must be > 0.
    """

    title: str
    fields: tuple[str, ...]
    positive: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """The line shown above the input: ``goto: x m, y m``."""
        return f"{self.title}: {', '.join(self.fields)}"


@dataclass(frozen=True)
class KeyBinding:
    """Keys that trigger one action.

    Attributes:
        keys: Textual key names (the first one is shown in the footer).
        action: the action's name, handled by the page's link.
        description: what it does, in a few words.
        prompt: the numbers to ask for first, if any.
    """

    keys: tuple[str, ...]
    action: str
    description: str
    prompt: Prompt | None = None


@dataclass(frozen=True)
class Page:
    """One page of the program: a module, its title and its keys.

    Attributes:
        name: the page's name on the command line (``pluto key drive``).
        module: the module it talks to.
        title: a line shown at the top.
        bindings: the page's own keys (the :data:`COMMON` keys come after them).
    """

    name: str
    module: str
    title: str
    bindings: tuple[KeyBinding, ...]

    def all_bindings(self) -> tuple[KeyBinding, ...]:
        """The page's keys, then the keys every page has."""
        return self.bindings + COMMON


MOVE_ACTIONS = frozenset({"forward", "back", "left", "right"})
"""Actions under the dead-man rule: they move only while their key is held (see :mod:`pluto.cli.key.teleop`)."""

_STOP = KeyBinding(("space", "escape"), "stop", "stop now")

_MOVE = (
    KeyBinding(("up", "w"), "forward", "forward (hold)"),
    KeyBinding(("down", "s"), "back", "back (hold)"),
    KeyBinding(("left", "a"), "left", "turn left (hold)"),
    KeyBinding(("right", "d"), "right", "turn right (hold)"),
    KeyBinding(("plus", "equals_sign"), "faster", "speed +"),
    KeyBinding(("minus",), "slower", "speed -"),
    KeyBinding(("right_square_bracket",), "turn_faster", "turn rate +"),
    KeyBinding(("left_square_bracket",), "turn_slower", "turn rate -"),
)

_POSE = Prompt("set pose", ("x m", "y m", "θ rad"))

COMMON: tuple[KeyBinding, ...] = (
    KeyBinding(("f1",), "page:drive", "drive"),
    KeyBinding(("f2",), "page:avoid", "avoid"),
    KeyBinding(("f3",), "page:motion", "motion"),
    KeyBinding(("f4",), "page:wrist", "wrist"),
    KeyBinding(("f5",), "page:pose", "pose"),
    KeyBinding(("f6",), "page:slam", "slam"),
    KeyBinding(("f7",), "page:loc", "loc"),
    KeyBinding(("f8",), "page:arm", "arm"),
    KeyBinding(("q", "ctrl+c"), "quit", "quit"),
)
"""Keys every page has: F1..F8 switch pages, q (or Ctrl-C) quits, stopping the robot on the drive and avoid pages."""

PAGES: dict[str, Page] = {
    page.name: page
    for page in (
        Page(
            "drive",
            "drive",
            "drive: velocity and heading commands on drive/command (the drive's 4 s timeout stays)",
            (
                _STOP,
                *_MOVE,
                KeyBinding(("h",), "heading_mode", "heading mode on/off"),
                KeyBinding(("t",), "heading", "type a heading", Prompt("heading", ("θ rad",))),
                KeyBinding(("p",), "protect", "sonar protection on/off"),
            ),
        ),
        Page(
            "avoid",
            "avoid",
            "avoid: goto and velocity commands on avoidance/command",
            (
                _STOP,
                *_MOVE,
                KeyBinding(("g",), "goto", "goto x y", Prompt("goto", ("x m", "y m"))),
                KeyBinding(("v",), "avoidance", "avoidance 0..3"),
                KeyBinding(("r",), "release", "release (-1)"),
            ),
        ),
        Page(
            "motion",
            "motion",
            "motion: moveto, explore, investigate on motion/command",
            (
                _STOP,
                KeyBinding(("m",), "moveto", "moveto x y (42)", Prompt("moveto", ("x m", "y m"))),
                KeyBinding(("e",), "explore", "explore b h (44)", Prompt("explore", ("b m", "h m"), (0, 1))),
                KeyBinding(("i",), "investigate", "investigate (43)"),
                KeyBinding(("r",), "resume", "resume (45)"),
                KeyBinding(
                    ("b",),
                    "rectangle",
                    "set rectangle (46)",
                    Prompt("rectangle", ("b m", "h m", "x m", "y m", "θ rad")),
                ),
                KeyBinding(("x",), "release", "release (-1)"),
            ),
        ),
        Page(
            "wrist",
            "wrist",
            "wrist: pan and tilt targets on Wrist/Command",
            (
                _STOP,
                KeyBinding(("left", "a"), "pan_left", "pan left"),
                KeyBinding(("right", "d"), "pan_right", "pan right"),
                KeyBinding(("up", "w"), "tilt_up", "tilt up"),
                KeyBinding(("down", "s"), "tilt_down", "tilt down"),
                KeyBinding(("plus", "equals_sign"), "bigger", "step +"),
                KeyBinding(("minus",), "smaller", "step -"),
                KeyBinding(("c",), "centre", "centre"),
            ),
        ),
        Page(
            "pose",
            "pose",
            "pose: the wall-matching thread, find wall, set pose",
            (
                KeyBinding(("s",), "start", "start thread"),
                KeyBinding(("x",), "stop_thread", "stop thread"),
                KeyBinding(("f",), "find_wall", "find wall"),
                KeyBinding(("p",), "set_pose", "set pose x y θ", _POSE),
            ),
        ),
        Page(
            "slam",
            "slam",
            "slam: the mapping thread and its map",
            (
                KeyBinding(("s",), "start", "start thread"),
                KeyBinding(("x",), "stop_thread", "stop thread (saves)"),
                KeyBinding(("m",), "save", "save map"),
            ),
        ),
        Page(
            "loc",
            "localization",
            "localization: the five pose interfaces",
            (
                KeyBinding(("p",), "set_pose", "set pose x y θ", _POSE),
                KeyBinding(("r",), "reset", "reset to 0 0 0"),
                KeyBinding(("z",), "release", "setter back to 0"),
            ),
        ),
        Page(
            "arm",
            "arm",
            "arm: joint targets on Arm/Command",
            (
                _STOP,
                KeyBinding(("left", "a"), "previous_joint", "previous joint"),
                KeyBinding(("right", "d"), "next_joint", "next joint"),
                KeyBinding(("up", "w"), "joint_up", "joint +"),
                KeyBinding(("down", "s"), "joint_down", "joint -"),
                KeyBinding(("plus", "equals_sign"), "bigger", "step +"),
                KeyBinding(("minus",), "smaller", "step -"),
                KeyBinding(("h",), "home", "home"),
            ),
        ),
    )
}
"""Every page, by its command-line name."""


def action_for(page: Page, key: str) -> KeyBinding | None:
    """The binding of ``key`` (a Textual key name) on ``page``, or None if the key does nothing there."""
    for binding in page.all_bindings():
        if key in binding.keys:
            return binding
    return None


_LABELS = {
    "up": "↑",
    "down": "↓",
    "left": "←",
    "right": "→",
    "space": "Space",
    "escape": "Esc",
    "plus": "+",
    "minus": "-",
    "equals_sign": "=",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
}


def key_label(key: str) -> str:
    """How a key is written on screen: ``↑`` for ``up``, ``F1`` for ``f1``, ``[`` for ``left_square_bracket``."""
    if key in _LABELS:
        return _LABELS[key]
    if key.startswith("f") and key[1:].isdigit():
        return key.upper()
    return key


def footer_text(page: Page) -> str:
    """The keys of a page, for the footer: ``Space/Esc stop now · ↑/w forward (hold) · ...``."""
    parts = []
    for binding in page.all_bindings():
        keys = [k for k in binding.keys if k != "ctrl+c" and k != "equals_sign"]
        parts.append(f"{'/'.join(key_label(k) for k in keys)} {binding.description}")
    return " · ".join(parts)


def parse_values(prompt: Prompt, text: str) -> tuple[float, ...]:
    """The numbers typed for ``prompt`` (separated by spaces or commas).

    Raises:
        ValueError: not as many numbers as the prompt has fields, a word that is not a number, a value that is not
            finite, or one that must be positive and is not; the message says which.
    """
    words = text.replace(",", " ").split()
    if len(words) != len(prompt.fields):
        raise ValueError(
            f"{prompt.title} needs {len(prompt.fields)} numbers ({', '.join(prompt.fields)}), got {len(words)}"
        )
    values = []
    for word, field in zip(words, prompt.fields, strict=True):
        try:
            value = float(word)
        except ValueError:
            raise ValueError(f"{field.split()[0]}: {word!r} is not a number") from None
        if not math.isfinite(value):
            raise ValueError(f"{field.split()[0]}: {word!r} is not a finite number")
        values.append(value)
    for i in prompt.positive:
        if values[i] <= 0:
            raise ValueError(f"{prompt.fields[i].split()[0]} must be > 0, got {values[i]:g}")
    return tuple(values)
