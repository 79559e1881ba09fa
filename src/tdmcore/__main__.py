"""``python -m tdmcore``: the same as the ``tdmcore`` command."""

from tdmcore.app.lifecycle import main

main()
