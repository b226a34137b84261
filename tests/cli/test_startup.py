"""`pluto --help` starts fast: building the parser imports no numerical library and no bus.

Every command module is imported to build the parser, so each keeps its heavy imports (numpy, numba, Zenoh, the
msgspec message types, the runtime) inside the functions that run the command. A few values the help texts show
are repeated in the command modules for that reason; the tests here check that they agree with their sources.
"""

from __future__ import annotations

import subprocess
import sys

from pluto.cli import certs_cmd, run_cmd
from pluto.hardware.base.p2os import command as p2os_command

HEAVY = ("numpy", "numba", "scipy", "zenoh", "msgspec", "pluto.bus", "pluto.msgs", "pluto.runtime")

# One interpreter for all the help pages: the top level and a few commands whose modules import the most when run.
_SCRIPT = f"""
import contextlib, io, sys
from pluto.cli.main import main
for argv in (["--help"], ["run", "--help"], ["demo", "--help"], ["pub", "--help"], ["certs", "add", "--help"]):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
        except SystemExit:
            pass
print(" ".join(sorted({{m.split(".")[0] if not m.startswith("pluto.") else ".".join(m.split(".")[:2])
                       for m in sys.modules if m.startswith({HEAVY!r})}})))
"""


def test_help_imports_no_numerical_library_and_no_bus() -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], f"`pluto --help` imported {done.stdout.strip()}"


def test_the_values_in_help_texts_agree_with_their_sources() -> None:
    from pluto.bus import certs
    from pluto.hardware.base.p2os.models import ROBOT_PARAMS
    from pluto.runtime import launcher

    assert run_cmd.STARTING_LIMIT == launcher.STARTING_LIMIT
    assert (certs_cmd.ROLES, certs_cmd.CA_DAYS, certs_cmd.MACHINE_DAYS) == (
        certs.ROLES,
        certs.CA_DAYS,
        certs.MACHINE_DAYS,
    )
    assert tuple(ROBOT_PARAMS) == p2os_command.MODELS
