"""``python -m tdmcore``: the same as the ``tdmcore`` command."""

from tdmcore.app.cli import main

main()
