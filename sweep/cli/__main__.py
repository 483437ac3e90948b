"""``python -m sweep.cli``: the ``mjp`` command (as the nodes of a cluster run it)."""

import sys

from sweep.cli.run import main

if __name__ == "__main__":
    sys.exit(main())
