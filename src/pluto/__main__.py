"""``python -m pluto``: the same as the ``pluto`` command."""

import sys

from pluto.cli.main import main
from pluto.runtime.launcher import end_with_parent

end_with_parent()
sys.exit(main())
