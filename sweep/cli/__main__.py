"""``python -m sweep.cli``: the ``mjp`` command (as the nodes of a cluster run it)."""

from sweep.cli.run import command

if __name__ == "__main__":
    command()
