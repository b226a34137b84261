"""``python -m pluto``: the same as the ``pluto`` command."""

import sys

from pluto.cli.main import main

sys.exit(main())
