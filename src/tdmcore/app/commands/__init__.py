"""The commands of ``tdmcore``, one module each; :mod:`tdmcore.app.cli` gathers them."""
