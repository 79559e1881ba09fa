"""The processes a test started in a session of their own: which are still alive,
and stopping them all whatever the test's outcome (Linux ``/proc``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["alive_in_group", "reaped"]


def alive_in_group(pgid: int) -> list[int]:
    """The live processes (not zombies) of process group ``pgid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # the fields after the command's name, which may hold spaces: state, ppid, pgrp
            state, _, pgrp = stat.read_text().rpartition(")")[2].split()[:3]
            if int(pgrp) == pgid and state != "Z":
                out.append(int(stat.parent.name))
    return out


@contextlib.contextmanager
def reaped(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc``, started with ``start_new_session=True``: at the block's end every
    process of its group still alive is killed and ``proc`` is waited for, so that a
    failed assertion or a timeout leaves nothing running."""
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        deadline = time.monotonic() + 10
        while alive_in_group(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # an orphan killed above, not yet reaped by init
