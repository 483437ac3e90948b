"""``python -m sweep.cli``: the ``mjp`` command (as the nodes of a cluster run it)."""

import sys

from sweep.cli.run import main

sys.exit(main())
