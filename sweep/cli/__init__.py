"""The ``mjp`` command line: train, sweep, analyze, evaluate, attack, data, config, cluster, demo.

One module per command group adds its parsers (``train.py``, ``sweeps.py``, ``cluster.py`` ...);
``parser.py`` assembles them and ``main`` runs the chosen handler. Importing this package and
building the parser costs only argparse: every handler is named as ``module:function`` and
imported when its command runs, so ``mjp --help`` answers at once and a command pays only for
what it needs (``mjp sweep status`` reads MLflow, never torch or Ray). Bad input ends with one
``error:`` line and exit status 2 before anything is launched. Exit status, the same for every
command (``EXIT_STATUS``, also in ``mjp --help``): 0 done, 1 failed, 2 bad input, 130
interrupted (143 by SIGTERM).
"""

from __future__ import annotations

from sweep.cli.parser import EXIT_STATUS, build_parser, package_version
from sweep.cli.run import main

__all__ = ["EXIT_STATUS", "build_parser", "main", "package_version"]
