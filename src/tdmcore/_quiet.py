"""Silence a C library's writes to stdout.

HiGHS (through scipy.optimize.milp) can print a debug line straight to file
descriptor 1 even with ``disp=False`` (ERGO-Code/HiGHS#2783); a command that prints
a table must not be interleaved with it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Redirect file descriptor 1 to /dev/null for the block (no-op if impossible)."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
            try:
                yield
            finally:
                os.dup2(saved, 1)
    finally:
        os.close(saved)
