"""The README's commands work: every block marked ``<!-- runnable -->`` runs, every shell block of a newcomer's first
steps (the Quick start and the first examples) is so marked, and every variable is documented.

A runnable block is a fenced ``sh`` block right after a line ``<!-- runnable -->``; each of its lines that is not
empty or a comment is one command, run by bash from a scratch folder that has the repository's ``tests`` and
``examples`` folders in it (so paths in the README work and what a command writes stays out of the repository),
with the test's robot and the installed ``pluto`` first on the PATH. Mark only commands that are cheap, end by
themselves and touch nothing outside that folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARKER = "<!-- runnable -->"


def runnable_blocks(text: str) -> list[list[str]]:
    """The commands of each block marked runnable, in order.

    Raises:
        ValueError: a marker not followed by a fenced sh block, or a block that is not closed.
    """
    lines = text.splitlines()
    blocks: list[list[str]] = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() not in ("```sh", "```bash"):
            raise ValueError(f"README line {i + 1}: {MARKER} must be followed by a ```sh block")
        commands: list[str] = []
        for body in lines[i + 2 :]:
            if body.strip() == "```":
                break
            if body.strip() and not body.lstrip().startswith("#"):
                commands.append(body.strip())
        else:
            raise ValueError(f"README line {i + 2}: the runnable block is not closed")
        blocks.append(commands)
    return blocks


BLOCKS = runnable_blocks(README.read_text())


def test_the_readme_has_runnable_blocks() -> None:
    assert len(BLOCKS) >= 2
    assert all(BLOCKS)
    assert "pluto --help" in [c.split("#")[0].strip() for block in BLOCKS for c in block]


def test_a_marker_without_a_block_is_refused() -> None:
    with pytest.raises(ValueError, match="line 2"):
        runnable_blocks(f"text\n{MARKER}\n\nmore\n")
    with pytest.raises(ValueError, match="not closed"):
        runnable_blocks(f"{MARKER}\n```sh\npluto --help\n")
    assert runnable_blocks(f"{MARKER}\n```sh\n# a comment\npluto a  # why\n\npluto b\n```\n") == [
        ["pluto a  # why", "pluto b"]
    ]


@pytest.mark.parametrize("block", BLOCKS, ids=[block[0].split("#")[0].strip() for block in BLOCKS])
def test_a_runnable_block_of_the_readme(block: list[str], tmp_path: Path) -> None:
    # A block's commands run in order in one folder: a later one may read what an earlier one wrote.
    for name in ("tests", "examples"):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for command in block:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode == 0, f"{command!r} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        assert done.stdout.strip(), f"{command!r} printed nothing"


FIRST_STEPS = ("\n## Using it\n", "\n### Modules, interfaces, profiles\n")
"""Where a newcomer's first commands are, after the Quick start: the first examples of Using it."""


def test_the_quick_start_is_make_demo_then_make_test() -> None:
    # The two commands the suite itself stands for: `make test` is this run, `make demo` the demo's scenario tests.
    text = README.read_text()
    quick = text[text.index("\n## Quick start\n") : text.index(FIRST_STEPS[0])]
    blocks = [b.split("```", 1)[0] for b in quick.split("```sh\n")[1:]]
    assert blocks == ["make demo\nmake test\n"], blocks


def test_every_shell_block_of_the_first_steps_is_runnable() -> None:
    # A newcomer runs these blocks as they come: each must be marked, so that the test above runs it in that order.
    text = README.read_text()
    start = text.index(FIRST_STEPS[0])
    lines = text[start : text.index(FIRST_STEPS[1], start)].splitlines()
    unmarked = [
        f"README line {text[:start].count(chr(10)) + i + 2}: {lines[i + 1].strip()}"
        for i, line in enumerate(lines)
        if line.strip() in ("```sh", "```bash") and (i == 0 or lines[i - 1].strip() != MARKER) and i + 1 < len(lines)
    ]
    assert not unmarked, f"shell blocks of the first steps not marked {MARKER}: {unmarked}"


def test_every_pluto_variable_is_in_the_readme_table() -> None:
    used: set[str] = set()
    for path in (ROOT / "src" / "pluto").rglob("*.py"):
        used |= set(re.findall(r"\bPLUTO_[A-Z][A-Z_]*[A-Z]\b", path.read_text()))
    text = README.read_text()
    table = text[text.index("### Environment variables") :]
    table = table[: table.index("\n#")]
    documented = set(re.findall(r"^\| `(PLUTO_[A-Z_]+)` \|", table, flags=re.MULTILINE))
    assert "PLUTO_MODE" in used
    assert used <= documented, f"not in the README's table: {sorted(used - documented)}"
