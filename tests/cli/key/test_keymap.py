"""The key tables of ``pluto key``: every page's keys, the footer, and the numbers a typed command takes."""

from __future__ import annotations

import pytest

from pluto.cli.key.keymap import COMMON, MOVE_ACTIONS, PAGES, Prompt, action_for, footer_text, key_label, parse_values
from pluto.cli.key.links import LINKS


def test_every_page_has_a_link_and_no_key_twice() -> None:
    assert set(PAGES) == set(LINKS) == {"drive", "avoid", "motion", "wrist", "pose", "slam", "loc", "arm"}
    for page in PAGES.values():
        keys = [k for b in page.all_bindings() for k in b.keys]
        assert len(keys) == len(set(keys)), f"{page.name} binds a key twice"
        assert any(b.action == f"page:{page.name}" for b in COMMON)


@pytest.mark.parametrize(
    ("page", "key", "action"),
    [
        ("drive", "up", "forward"),
        ("drive", "w", "forward"),
        ("drive", "s", "back"),
        ("drive", "left", "left"),
        ("drive", "d", "right"),
        ("drive", "space", "stop"),
        ("drive", "escape", "stop"),
        ("drive", "plus", "faster"),
        ("drive", "left_square_bracket", "turn_slower"),
        ("drive", "h", "heading_mode"),
        ("avoid", "g", "goto"),
        ("avoid", "space", "stop"),
        ("motion", "m", "moveto"),
        ("motion", "e", "explore"),
        ("motion", "i", "investigate"),
        ("motion", "r", "resume"),
        ("motion", "space", "stop"),
        ("wrist", "left", "pan_left"),
        ("wrist", "up", "tilt_up"),
        ("pose", "f", "find_wall"),
        ("pose", "p", "set_pose"),
        ("slam", "m", "save"),
        ("loc", "r", "reset"),
        ("arm", "up", "joint_up"),
        ("arm", "right", "next_joint"),
        ("arm", "f2", "page:avoid"),
        ("slam", "q", "quit"),
    ],
)
def test_keys_map_to_actions(page: str, key: str, action: str) -> None:
    binding = action_for(PAGES[page], key)
    assert binding is not None and binding.action == action


def test_unbound_keys_do_nothing_and_movement_only_where_the_robot_moves() -> None:
    assert action_for(PAGES["drive"], "z") is None
    assert action_for(PAGES["pose"], "space") is None  # pose does not move anything
    moving = {name for name, page in PAGES.items() if any(b.action in MOVE_ACTIONS for b in page.bindings)}
    assert moving == {"drive", "avoid"}
    stopping = {name for name, page in PAGES.items() if any(b.action == "stop" for b in page.bindings)}
    assert stopping == {"drive", "avoid", "motion", "wrist", "arm"}


def test_commands_that_need_numbers_say_which() -> None:
    prompts = {(p.name, b.action): b.prompt for p in PAGES.values() for b in p.bindings if b.prompt}
    assert set(prompts) == {
        ("drive", "heading"),
        ("avoid", "goto"),
        ("motion", "moveto"),
        ("motion", "explore"),
        ("motion", "rectangle"),
        ("pose", "set_pose"),
        ("loc", "set_pose"),
    }
    goto = prompts[("avoid", "goto")]
    assert goto is not None and goto.label == "goto: x m, y m"


def test_footer_names_each_key() -> None:
    text = footer_text(PAGES["drive"])
    assert text.startswith("Space/Esc stop now · ↑/w forward (hold)")
    assert "[ turn rate -" in text and "F3 motion" in text and "q quit" in text
    assert "ctrl" not in text
    assert key_label("right_square_bracket") == "]" and key_label("f8") == "F8" and key_label("g") == "g"


def test_parse_values() -> None:
    pose = Prompt("set pose", ("x m", "y m", "θ rad"))
    assert parse_values(pose, " 1  -2.5 0.5 ") == (1.0, -2.5, 0.5)
    assert parse_values(pose, "1,2,3") == (1.0, 2.0, 3.0)
    with pytest.raises(ValueError, match=r"needs 3 numbers \(x m, y m, θ rad\), got 2"):
        parse_values(pose, "1 2")
    with pytest.raises(ValueError, match="y: 'two' is not a number"):
        parse_values(pose, "1 two 3")
    with pytest.raises(ValueError, match="not a finite number"):
        parse_values(pose, "1 nan 3")
    explore = Prompt("explore", ("b m", "h m"), positive=(0, 1))
    with pytest.raises(ValueError, match="h must be > 0, got -1"):
        parse_values(explore, "2 -1")
