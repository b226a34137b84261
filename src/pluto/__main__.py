"""``python -m pluto``: the same as the ``pluto`` command."""

from pluto.cli.main import run
from pluto.runtime.launcher import end_with_parent

end_with_parent()
run()
