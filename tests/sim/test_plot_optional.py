"""Pictures are an optional extra: without matplotlib a plot says what to install, and nothing else needs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pluto.errors import PlutoError
from pluto.sim.plot import require_matplotlib


def test_without_matplotlib_a_plot_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    with pytest.raises(PlutoError, match=r"pip install 'pluto-robot\[plot\]'"):
        require_matplotlib()


def test_the_stack_imports_without_matplotlib() -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "import pluto.cli.main, pluto.cli.demo, pluto.cli.record_cmd, pluto.sim.module, pluto.record.plot\n"
        "print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "ok", result.stderr
