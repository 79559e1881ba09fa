"""The ``tdmcore-bridge`` console script: says which extra to install when it is missing.

The bridge needs the official Kubernetes client and a web stack that the core
library does not (the ``k8s`` extra), so a library user's ``pip install tdmcore``
stays light.  Without them, the command prints one ``Error:`` line naming the
extra instead of an ``ImportError`` traceback.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

#: Exit status after Ctrl-C (128 + SIGINT), as :func:`k8s_bridge.cli.main` has it.
EXIT_INTERRUPTED = 130

#: The modules of the ``k8s`` extra (``pyproject.toml``), by import name.
K8S_EXTRA_MODULES = ("kubernetes", "prometheus_client", "werkzeug", "waitress")


def missing_k8s_modules() -> list[str]:
    """The modules of the ``k8s`` extra that cannot be imported here."""
    from importlib.util import find_spec

    return [name for name in K8S_EXTRA_MODULES if find_spec(name) is None]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``tdmcore-bridge``, or explain which extra it needs (exit status 1)."""
    # Ctrl-C during the imports (about 2 s) is noted, not raised: raised inside an
    # import it can surface as another exception (a RuntimeError from a class body)
    # with a traceback; the command then ends as cli.main ends after Ctrl-C.
    # An ignored SIGINT (nohup, `cmd &` in a script) stays ignored.
    interrupted: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
    try:
        missing = missing_k8s_modules()
        if not missing:
            from .cli import main as bridge_main
    finally:
        if previous is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, previous)
    if interrupted:
        print("Error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if missing:
        print(f"Error: tdmcore-bridge needs the Kubernetes extra ({', '.join(missing)} "
              "not installed): pip install 'tdmcore[k8s]'", file=sys.stderr)
        return 1
    return bridge_main(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
