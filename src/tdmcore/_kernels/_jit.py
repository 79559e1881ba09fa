"""The one place that sets Numba's compilation options for every kernel.

``cache=True`` keeps compiled kernels on disk between runs (CI and the test suite
rely on it to stay fast); ``fastmath`` is off because the rotation search must give
bit-for-bit reproducible sums, and its tie rules compare floats against tolerances
(docs/traffic-circle.md).

**One stamp for all the kernels' sources.**  Numba checks a cached kernel against
its own source file only, yet a kernel carries the machine code of every kernel it
calls, from other files too (numba/numba#1833): after ``lowest_excess.py`` changed,
the rotation search kept loading the walk it was first compiled with, silently.
Every kernel's cache entry is stamped here with a hash of all the sources of this
package (:data:`KERNELS_FINGERPRINT`) besides its own file's, so that a change to
any of them compiles every kernel again (an upgrade, a ``git pull`` in an editable
install, a warm cache built from other sources).

The first kernel this process compiles (a cold cache: the first run after an install
or an upgrade) is announced once, :data:`COMPILING`: as an INFO record of the
``tdmcore.kernels`` logger when the application has configured logging, else as one
line on stderr, so that a library user's first call does not wait half a minute in
silence (docs/getting-started.md).  Kernels loaded from the cache say nothing.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from pathlib import Path
from typing import Any

from numba import njit, types
from numba.core import event
from numba.core.caching import CompileResultCacheImpl, FunctionCache

log = logging.getLogger("tdmcore.kernels")

#: what the first compile of a process says (the command line's own status line,
#: "loading the compiled kernels (compiling them the first time only)", matches it)
COMPILING = ("compiling the kernels (the first time only: about 30 s on 2 cores; later "
             "runs load them from the cache)")


class _FirstCompile(event.Listener):  # type: ignore[misc]
    """Announces the first compile of one of tdmcore's kernels in this process."""

    def __init__(self) -> None:
        self.said = False

    def on_start(self, ev: event.Event) -> None:
        if self.said:
            return
        func = getattr(ev.data.get("dispatcher"), "py_func", None)
        if not str(getattr(func, "__module__", "")).startswith("tdmcore."):
            return
        self.said = True
        if log.hasHandlers():
            log.info(COMPILING)
        else:  # no logging configured: a library user would otherwise see nothing
            print(f"tdmcore: {COMPILING}", file=sys.stderr, flush=True)

    def on_end(self, ev: event.Event) -> None:
        pass


#: the process's announcer (a prefetch child's is told that its parent has spoken)
ANNOUNCER = _FirstCompile()
event.register("numba:compile", ANNOUNCER)

def sources_fingerprint(folder: Path) -> str:
    """A hash of every ``.py`` file in ``folder``, names and contents, in name order."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


#: the sources of every kernel (this package), part of each kernel's cache stamp
KERNELS_FINGERPRINT = sources_fingerprint(Path(__file__).resolve().parent)


class _StampedLocator:
    """Numba's cache locator for a kernel, its source stamp joined with
    :data:`KERNELS_FINGERPRINT`; everything else is the locator's own."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def get_source_stamp(self) -> Any:
        return (self._inner.get_source_stamp(), KERNELS_FINGERPRINT)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _KernelCacheImpl(CompileResultCacheImpl):  # type: ignore[misc]
    def __init__(self, py_func: Any) -> None:
        super().__init__(py_func)
        self._locator = _StampedLocator(self._locator)

    def rebuild(self, target_context: Any, payload: Any) -> Any:
        """The kernel loaded from the cache, its library carrying its ``reload_init``
        hooks again.

        Numba runs a cached kernel's hooks when it loads it, but leaves the loaded
        library without them; a kernel compiled later that calls this one links that
        library and inherits its hooks from it, so it was cached without them.  A
        compile unit's registration is such a hook (:mod:`._unit`): the Score kernel,
        compiled in a process that had loaded the rotation search from the cache,
        was cached without it and crashed the next process that loaded it first.
        """
        cres = super().rebuild(target_context, payload)
        cres.library._reload_init.update(cres.reload_init)
        return cres


class _KernelCache(FunctionCache):  # type: ignore[misc]
    """Numba's per-kernel cache, stamped with every kernel's sources."""

    _impl_class = _KernelCacheImpl


def _stamped(dispatcher: Any) -> Any:
    """``dispatcher`` (compiled with ``cache=True``) with :class:`_KernelCache`; as it
    is under ``NUMBA_DISABLE_JIT=1`` (a plain function)."""
    if getattr(dispatcher, "_cache", None) is not None and hasattr(dispatcher, "py_func"):
        dispatcher._cache = _KernelCache(dispatcher.py_func)
    return dispatcher


JIT_OPTIONS: dict[str, Any] = {
    "cache": True,
    "nogil": True,
    "fastmath": False,
    "boundscheck": False,
    "error_model": "numpy",
}


def _plain_calls(dispatcher: Any) -> Any:
    """Type every call to ``dispatcher`` from another kernel with plain argument types.

    Numba types a constant argument of a call between two kernels as a literal
    (``Literal[int](0)``, ``Literal[bool](True)``) and compiles a specialisation of
    the callee for it, beside the one for the same call with a variable, and beside
    the one a Python call compiles: the rotation search was compiled three times
    over (its ``mode`` a literal in the Score kernel, ``find_perfect`` literal True
    and False), some 15 s of a cold start.  No kernel here branches on a literal
    type, so the callee is compiled for the plain types (``int64``, ``bool``) and a
    constant is converted to them at the call, as a Python call's would be.
    """
    typed = getattr(dispatcher, "get_call_template", None)
    if typed is None:  # NUMBA_DISABLE_JIT=1: njit returned the Python function
        return dispatcher

    def get_call_template(args: tuple[Any, ...], kws: dict[str, Any]) -> Any:
        return typed(tuple(types.unliteral(a) for a in args),
                     {name: types.unliteral(a) for name, a in kws.items()})

    dispatcher.get_call_template = get_call_template
    return dispatcher


def jit(func: Any) -> Any:
    """Compile ``func`` with the project's Numba options, once per plain signature
    (:func:`_plain_calls`)."""
    return _plain_calls(_stamped(njit(**JIT_OPTIONS)(func)))


def jit_inline(func: Any) -> Any:
    """:func:`jit`, and inlined into every kernel that calls it.

    For small helpers called inside a search's innermost loops.  Numba compiles a
    call between two jitted functions as a real call through its own calling
    convention (every array argument passed as a struct, a status code checked on
    return), which costs more than the helper's body; ``inline="always"`` merges the
    helper into its caller's Numba IR before compilation instead.  Arithmetic and its
    order are unchanged, so results stay bit for bit the same.

    Also for a step called from one kernel only (the Score kernel's per-node
    step): a compiled kernel links in the machine code of every kernel it calls
    and optimises all of it again, so each level of calls between kernels
    compiles the code below it once more at a cold start.
    """
    return _stamped(njit(inline="always", **JIT_OPTIONS)(func))
