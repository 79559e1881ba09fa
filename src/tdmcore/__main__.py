"""``python -m tdmcore``: the same as the ``tdmcore`` command."""

from tdmcore.cli import main

main()
