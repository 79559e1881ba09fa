"""What each Dask worker process of a local sweep runs first (a Dask preload).

Ctrl-C reaches the whole process group.  The sweep's own process takes it, stops
the sweep and closes its local cluster; a worker that took it too would only print
its own tracebacks, so the workers ignore it.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = ["dask_setup"]


def dask_setup(worker: Any) -> None:
    """Dask's preload hook: ignore SIGINT in this worker process."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
