"""The guides in docs/ work as written: their blocks marked ``runnable`` are run in order.

A fenced block whose info string has the word ``runnable`` (```` ```python runnable ````, ```` ```toml runnable
file=profiles/x.toml ````) is taken; the blocks of one page run in order in one empty folder: with ``file=NAME`` the
block is written to that file; otherwise a ``python`` block is run as a script and each command of an ``sh`` block
is run by bash, with the installed ``pluto`` first on the PATH and the test's robot. Anything that fails fails the
test with the block's place in the page.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))


@dataclass(frozen=True)
class Block:
    """A runnable block: its language, the file it is written to (if any), its text and its first line."""

    lang: str
    file: str | None
    text: str
    line: int


def runnable_blocks(text: str) -> list[Block]:
    """The blocks marked runnable, in order.

    Raises:
        ValueError: a runnable block that is not closed, or of a language that cannot run and has no file.
    """
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        info = lines[i].strip()
        if not info.startswith("```") or info == "```":
            i += 1
            continue
        words = info[3:].split()
        start = i + 1
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if "runnable" in words:
            if end >= len(lines):
                raise ValueError(f"line {i + 1}: the runnable block is not closed")
            file = next((w.removeprefix("file=") for w in words if w.startswith("file=")), None)
            lang = words[0]
            if file is None and lang not in ("python", "sh", "bash"):
                raise ValueError(f"line {i + 1}: a runnable {lang} block needs file=NAME")
            blocks.append(Block(lang, file, "\n".join(lines[start:end]) + "\n", i + 1))
        i = end + 1
    return blocks


def test_blocks_are_found_with_their_files() -> None:
    text = "x\n```python runnable file=a.py\nA = 1\n```\n```python\nnot run\n```\n```sh runnable\npluto --help\n```\n"
    assert runnable_blocks(text) == [Block("python", "a.py", "A = 1\n", 2), Block("sh", None, "pluto --help\n", 8)]
    with pytest.raises(ValueError, match="not closed"):
        runnable_blocks("```python runnable\nA = 1\n")
    with pytest.raises(ValueError, match="needs file"):
        runnable_blocks("```toml runnable\na = 1\n```\n")


def test_the_module_guide_has_runnable_blocks() -> None:
    blocks = runnable_blocks((ROOT / "docs" / "writing-a-module.md").read_text())
    assert {b.file for b in blocks} >= {"mover.py", "profiles/mover-sim.toml"}
    assert sum(1 for b in blocks if b.lang == "python" and b.file is None) >= 2


def _run(cmd: list[str], cwd: Path, where: str) -> None:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    done = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL, check=False
    )
    assert done.returncode == 0, f"{where} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, f"{where}:\n{done.stderr}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_the_runnable_blocks_of_a_page(page: Path, tmp_path: Path) -> None:
    for n, block in enumerate(runnable_blocks(page.read_text())):
        where = f"{page.name} line {block.line}"
        if block.file is not None:
            target = tmp_path / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text)
        elif block.lang == "python":
            script = tmp_path / f"_block_{n}.py"
            script.write_text(block.text)
            _run([sys.executable, script.name], tmp_path, where)
        else:
            for command in block.text.splitlines():
                if command.strip() and not command.lstrip().startswith("#"):
                    _run(["bash", "-c", command], tmp_path, f"{where}: {command}")
