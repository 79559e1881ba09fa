"""The signals that end a command, Ctrl-C (SIGINT) and SIGTERM, kept where Python
would lose them.

A signal's handler raises in whatever Python code runs at that moment.  Inside a
callback that C code calls (llvmlite's object-cache callbacks whenever Numba loads
or compiles a kernel, a ``__del__``), the exception cannot propagate: Python prints
"Exception ignored ..." and goes on, and the command ran to its end as if no one had
asked it to stop.  :func:`redelivered` raises such a signal again, outside.  Inside
:class:`~concurrent.futures.ProcessPoolExecutor`'s start the exception would leave
workers no one stops: :func:`held` delays it to the end of a block.

Standard library only: :mod:`tdmcore.app.lifecycle` imports this before the commands.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Terminated", "held", "raise_terminated", "redelivered"]


class Terminated(BaseException):
    """SIGTERM arrived: the command unwinds as after Ctrl-C (a ``BaseException``, so
    no ``except Exception`` on the way takes it for an error of its own)."""


def raise_terminated(signum: int, frame: object) -> None:
    """The command line's SIGTERM handler."""
    raise Terminated


#: Each signal that ends a command, the exception its handler raises, and that
#: handler (only these are kept: a handler of an embedding program is its own).
_UNWINDING: dict[int, tuple[type[BaseException], Callable[[int, Any], Any]]] = {
    signal.SIGINT: (KeyboardInterrupt, signal.default_int_handler),
    signal.SIGTERM: (Terminated, raise_terminated),
}


#: Seconds after a swallowed signal before it is sent again.
_AGAIN_S = 0.05


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def redelivered() -> Iterator[None]:
    """While the block runs, a Ctrl-C or SIGTERM whose exception a callback swallowed
    is raised again (the signal is sent once more, :data:`_AGAIN_S` later, so that
    its handler runs in the Python code after the callback), without the "Exception
    ignored" traceback.

    Python reports every swallowed exception to :func:`sys.unraisablehook`; any
    other goes on to the hook in place before.
    """
    previous = sys.unraisablehook
    lock = threading.Lock()
    pending: list[threading.Timer] = []
    ended = False

    def again(signum: int) -> None:
        with lock:  # never after the block: its handler may be gone by then
            if not ended:
                os.kill(os.getpid(), signum)

    def hook(unraisable: Any) -> None:
        for signum, (exc_type, handler) in _UNWINDING.items():
            if isinstance(unraisable.exc_value, exc_type) and _in_main_thread() \
                    and signal.getsignal(signum) is handler:
                # sent from a thread a moment later: sent from here, the handler
                # would raise inside this hook, swallowed in turn
                timer = threading.Timer(_AGAIN_S, again, (signum,))
                timer.daemon = True
                pending.append(timer)
                timer.start()
                return
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        # A signal sent again after the block ends would find the interpreter
        # exiting with the default disposition back and kill it (exit -2, not 130)
        # once the command had already answered the first.
        with lock:
            ended = True
        for timer in pending:
            timer.cancel()
        sys.unraisablehook = previous


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while the block runs and deliver them at its end.

    Only the command line's handlers in the main thread are held (any other
    disposition is left alone); a held signal is sent again when the block ends, so
    its handler raises there.
    """
    if not _in_main_thread():
        yield
        return
    arrived: list[int] = []
    kept = [s for s, (_, handler) in _UNWINDING.items() if signal.getsignal(s) is handler]
    for signum in kept:
        signal.signal(signum, lambda signum, frame: arrived.append(signum))
    try:
        yield
    finally:
        for signum in kept:
            signal.signal(signum, _UNWINDING[signum][1])
        for signum in dict.fromkeys(arrived):
            signal.raise_signal(signum)
