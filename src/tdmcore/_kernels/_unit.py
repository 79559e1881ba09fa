"""Compile units: a kernel compiled once, as a C function, and called by its symbol.

Numba compiles a call between two kernels by linking the callee's machine code
into the caller and optimising all of it again, and then once more in the caller's
caller (:func:`~._jit.jit_inline`).  Phase B of the rotation search sat three
levels under the Score kernel, so a cold start compiled it four times over: some
10 s of the README command's 26.6 s of lowering went to code linked in again
(docs/benchmarks.md, "The first run, a fourth pass").

A :class:`CUnit` stops that at its boundary.  Its body is compiled once, as a C
function (Numba's ``cfunc``, cached on disk like every kernel and stamped with the
same :data:`~._jit.KERNELS_FINGERPRINT`), and the process registers the address
under the unit's symbol with LLVM.  A kernel calls the unit through
:meth:`CUnit.call`, which compiles to a call of that symbol: the caller holds a
declaration, not the unit's code.  When Numba loads a caller from its cache it
first runs the caller's ``reload_init`` hooks (what Numba's parallel loops use for
their own runtime), where :meth:`CUnit.call` put the unit's registration; a kernel
compiled on a cached caller inherits the hooks too
(:meth:`._jit._KernelCacheImpl.rebuild`).  Until a unit is registered its symbol
leads to a stand-in (a ctypes callback) that registers it, forwards the call and
warns: were a registration ever missed, a kernel would be slow, not wrong.

What crosses the boundary is plain C: an array as its data pointer and its shape
(C-contiguous arrays only, checked when the caller is typed), an ``int64`` or a
``float64`` as itself; the unit returns a ``float64``.  :func:`c_arguments` is the
one owner of that layout; the body receives it (:func:`numba.carray` rebuilds an
array) and both sides are derived from the unit's ``params``.

A unit compiles on its own, so it can compile beside its callers:
:func:`prefetch` starts a child process that compiles the units the cache lacks,
while this process compiles the rest; :meth:`CUnit.ready` waits for that child
when it gets there first, and then loads the unit from the cache.  The command line
prefetches when it loads the kernels (:func:`tdmcore.app.common.compiling_kernels`):
on 2 cores the first run's compile of phase B and of everything else overlap.

Under ``NUMBA_DISABLE_JIT=1`` there is nothing to compile: a unit's Python callers
call the kernel itself (see :mod:`.lowest_excess`).
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import logging
import multiprocessing
import threading
from collections.abc import Callable, Iterable
from multiprocessing.process import BaseProcess
from typing import Any

import llvmlite.binding as ll
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.core.ccallback import CFunc
from numba.core.errors import TypingError
from numba.extending import intrinsic

from ._jit import ANNOUNCER, JIT_OPTIONS, _KernelCache

log = logging.getLogger("tdmcore.kernels")
#: how a C argument crosses through ctypes (the stand-in of an unregistered unit)
_C_TYPES = {types.voidptr: ctypes.c_void_p, types.int64: ctypes.c_int64,
            types.float64: ctypes.c_double}
#: every unit of this process, by symbol (what a cached caller's hook looks up)
_UNITS: dict[str, CUnit] = {}
#: the child process compiling a unit into the cache (prefetch), by symbol
_PREFETCH: dict[str, BaseProcess] = {}


class _UnitCFunc(CFunc):  # type: ignore[misc]
    """Numba's C callback, which can also be taken from the cache alone."""

    def load(self) -> bool:
        """Load the compiled function from the cache, as :meth:`compile` does when it
        is there; ``False`` (nothing changed) when it is not."""
        cres = self._cache.load_overload(self._sig, self._targetdescr.target_context)
        if cres is None:
            return False
        self._library = cres.library
        self._wrapper_name = cres.fndesc.llvm_cfunc_wrapper_name
        self._wrapper_address = self._library.get_pointer_to_function(self._wrapper_name)
        return True


def c_arguments(params: tuple[types.Type, ...]) -> list[types.Type]:
    """The C function's arguments for a unit's ``params``: each array as a
    ``void*`` to its data followed by its shape (``int64`` each), each scalar as
    itself (``int64`` or ``float64``)."""
    out: list[types.Type] = []
    for p in params:
        if isinstance(p, types.Array):
            out.append(types.voidptr)
            out.extend([types.int64] * p.ndim)
        elif p in (types.int64, types.float64):
            out.append(p)
        else:
            raise TypeError(f"a compile unit takes C-contiguous arrays, int64 and float64, "
                            f"not {p}")
    return out


def _ready(module: str, symbol: str) -> None:
    """A cached caller's ``reload_init`` hook: the unit ``symbol`` of ``module``
    registered in this process (importing the module declares the unit)."""
    importlib.import_module(module)
    _UNITS[symbol].ready()


def _compile_all(units: list[tuple[str, str]]) -> None:
    """What the prefetch child runs: each ``(module, symbol)`` compiled, into the
    cache, silently (the parent says that the kernels compile)."""
    ANNOUNCER.said = True
    for module, symbol in units:
        _ready(module, symbol)


def prefetch(units: Iterable[CUnit]) -> list[CUnit]:
    """Start compiling, in a child process, those of ``units`` the cache lacks; load
    the others.  Returns the units being compiled there.

    The child is a daemon: it ends with this process when no caller ever needed
    it.  Numba writes each cache file under a temporary name and renames it, so a
    child ended halfway leaves no entry half written.
    """
    if config.DISABLE_JIT:
        return []
    todo = [unit for unit in units if not unit.load()]
    if todo:
        child = multiprocessing.get_context("spawn").Process(
            target=_compile_all, args=([(u.body.__module__, u.symbol) for u in todo],),
            name="tdmcore-compile", daemon=True)
        child.start()
        for unit in todo:
            _PREFETCH[unit.symbol] = child
    return todo


class CUnit:
    """A kernel compiled once as a C function and called from other kernels by
    its symbol (module docstring).

    Parameters
    ----------
    symbol
        The process-wide name the C function is registered under.
    body
        A module-level function taking the C arguments (:func:`c_arguments`) and
        returning a float.
    params
        The logical arguments: C-contiguous array types, ``int64``, ``float64``.
    """

    def __init__(self, symbol: str, body: Callable[..., float],
                 params: tuple[types.Type, ...]) -> None:
        self.symbol = symbol
        self.body = body
        self.params = params
        self.c_signature = types.float64(*c_arguments(params))
        self._cfunc: CFunc | None = None
        self._lock = threading.Lock()
        self.reload_hook = functools.partial(_ready, body.__module__, symbol)
        self.call = self._caller()
        _UNITS[symbol] = self  # a module executed again declares its units again
        # until the unit is registered, its symbol leads to a stand-in that registers
        # it and forwards the call: a kernel loaded without the unit's hook (a bug)
        # runs slowly and says so, where it would otherwise jump to nowhere
        self._stand_in = ctypes.CFUNCTYPE(
            ctypes.c_double, *(_C_TYPES[t] for t in self.c_signature.args))(self._forward)
        self._warned = False
        if not config.DISABLE_JIT:
            ll.add_symbol(symbol, ctypes.cast(self._stand_in, ctypes.c_void_p).value)

    def _forward(self, *args: Any) -> float:
        """The stand-in's body: the unit called through its symbol before it was
        registered; register it and call it (through ctypes: slow)."""
        self.ready()
        assert self._cfunc is not None
        if not self._warned:
            self._warned = True
            log.warning("a kernel called the compile unit %s through a stand-in: it was "
                        "loaded from the cache without the unit's registration (a bug; "
                        "answers are right, calls slow)", self.symbol)
        return float(self._cfunc.ctypes(*args))

    def _new_cfunc(self) -> _UnitCFunc:
        options = {k: v for k, v in JIT_OPTIONS.items() if k not in ("cache", "nogil")}
        cfunc = _UnitCFunc(self.body, (tuple(self.c_signature.args), types.float64),
                           locals={}, options=options)
        cfunc._cache = _KernelCache(self.body)
        return cfunc

    def _register(self, cfunc: _UnitCFunc) -> None:
        ll.add_symbol(self.symbol, cfunc.address)
        self._cfunc = cfunc

    def load(self) -> bool:
        """Whether the unit is registered in this process, loading it from the cache
        when it is there (nothing is compiled)."""
        with self._lock:
            if self._cfunc is None:
                cfunc = self._new_cfunc()
                if cfunc.load():
                    self._register(cfunc)
            return self._cfunc is not None

    def ready(self) -> int:
        """Compile the body (or load it from the cache) once per process and
        register its address under :attr:`symbol`; returns the address.  When a
        :func:`prefetch` child is compiling it, wait for the child first."""
        with self._lock:
            if self._cfunc is None:
                child = _PREFETCH.pop(self.symbol, None)
                if child is not None:
                    child.join()  # then the cache has it; else it is compiled here
                cfunc = self._new_cfunc()
                cfunc.compile()
                self._register(cfunc)
            assert self._cfunc is not None
            return int(self._cfunc.address)

    def _caller(self) -> Any:
        unit = self

        @intrinsic  # type: ignore[misc]
        def call(typingctx: Any, *args: types.Type) -> Any:
            if len(args) != len(unit.params):
                raise TypingError(f"{unit.symbol} takes {len(unit.params)} arguments, "
                                  f"not {len(args)}")
            for i, (got, want) in enumerate(zip(args, unit.params, strict=True)):
                if isinstance(want, types.Array):
                    ok = (isinstance(got, types.Array) and got.dtype == want.dtype
                          and got.ndim == want.ndim and got.layout == "C")
                else:
                    ok = types.unliteral(got) == want
                if not ok:
                    raise TypingError(f"{unit.symbol}: argument {i} is {got}, not {want}")
            sig = types.float64(types.StarArgTuple.from_types(args))

            def codegen(context: Any, builder: Any, signature: Any, values: Any) -> Any:
                unit.ready()  # registered before the caller is linked
                context.active_code_library._reload_init.add(unit.reload_hook)
                c_values = []
                arg_types = signature.args[0].types
                arg_values = cgutils.unpack_tuple(builder, values[0], len(arg_types))
                for ty, value in zip(arg_types, arg_values, strict=True):
                    if isinstance(ty, types.Array):
                        ary = context.make_array(ty)(context, builder, value)
                        c_values.append(builder.bitcast(ary.data, ir.IntType(8).as_pointer()))
                        c_values.extend(cgutils.unpack_tuple(builder, ary.shape, ty.ndim))
                    else:
                        c_values.append(value)
                c_types = [context.get_value_type(t) for t in unit.c_signature.args]
                assert [v.type for v in c_values] == c_types, unit.symbol  # c_arguments
                fnty = ir.FunctionType(ir.DoubleType(), c_types)
                fn = cgutils.get_or_insert_function(builder.module, fnty, unit.symbol)
                return builder.call(fn, c_values)

            return sig, codegen

        return call
