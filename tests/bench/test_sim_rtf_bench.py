"""The lock-step benchmark (bench/sim_rtf.py): the run folders a killed run leaves behind are removed by the next."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.bench.loader import load_bench

bench: Any = load_bench("sim_rtf")


def test_the_folders_of_a_run_killed_from_outside_are_removed_and_those_of_live_runs_kept(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = tmp_path / f"{bench.RUN_PREFIX}{int(gone.stdout)}-k2j3"
    (dead / "runtime").mkdir(parents=True)
    (dead / "runtime" / "base.state").write_bytes(b"x")
    live = tmp_path / f"{bench.RUN_PREFIX}{os.getpid()}-a1b2"
    live.mkdir()
    other = tmp_path / f"{bench.RUN_PREFIX}notapid"  # not one of the bench's names: left alone
    other.mkdir()
    assert bench.sweep_run_folders(tmp_path) == [dead]
    assert not dead.exists() and live.is_dir() and other.is_dir()
    with bench.run_folder() as folder:  # a run's own folder carries this process's id
        assert Path(folder).name.startswith(f"{bench.RUN_PREFIX}{os.getpid()}-")
