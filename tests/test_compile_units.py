"""Compile units (``tdmcore._kernels._unit``): compiled once, called by symbol, loaded
from the cache with their callers, compiled beside them by a prefetch child.

A small unit of its own, in a module written for the test, keeps each check to a
second of compiling; ``test_jit`` checks phase B's unit itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1",
                                reason="nothing is compiled")

UNIT_MODULE = '''
import numpy as np
from numba import carray, njit, types

from tdmcore._kernels._unit import CUnit


def _weighted(values_p, n, weight):
    values = carray(values_p, n, np.float64)
    total = 0.0
    for i in range(n):
        total += weight * values[i]
    return total


WEIGHTED = CUnit("tdmcore_test_weighted", _weighted,
                 (types.Array(types.float64, 1, "C"), types.float64))
_weighted_c = WEIGHTED.call


@njit(cache=True)
def caller(values):
    return _weighted_c(values, 2.0) + 1.0
'''

RUN = '''
import json, sys
import numpy as np
import test_unit_module as m
from tdmcore._kernels._unit import prefetch
started = []
if sys.argv[1] == "prefetch":
    started = [u.symbol for u in prefetch([m.WEIGHTED])]
    m.WEIGHTED.ready()
value = m.caller(np.array([1.0, 2.0, 3.5]))
print(json.dumps({"value": value, "started": started,
                  "caller_hits": sum(m.caller.stats.cache_hits.values()),
                  "unit_hits": m.WEIGHTED._cfunc.cache_hits}))
'''


def _run(tmp_path: Path, mode: str) -> dict[str, object]:
    (tmp_path / "test_unit_module.py").write_text(UNIT_MODULE)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT / "src")]))
    out = subprocess.run([sys.executable, "-c", RUN, mode], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_cached_caller_registers_its_unit_when_it_is_loaded(tmp_path: Path) -> None:
    """The caller's machine code holds only the unit's symbol: a process that loads
    the caller from the cache registers the unit first (the caller's reload hook),
    and calls it."""
    first = _run(tmp_path, "plain")
    assert first["value"] == 14.0 and first["caller_hits"] == 0
    again = _run(tmp_path, "plain")
    assert again["value"] == 14.0
    assert again["caller_hits"] == 1 and again["unit_hits"] == 1  # both from the cache


def test_prefetch_compiles_a_missing_unit_in_a_child(tmp_path: Path) -> None:
    """With a cold cache, :func:`prefetch` starts a child that compiles the unit; this
    process then loads what the child wrote instead of compiling it too.  With a warm
    cache it starts nothing."""
    cold = _run(tmp_path, "prefetch")
    assert cold["started"] == ["tdmcore_test_weighted"]
    assert cold["unit_hits"] == 1  # the child's compile, loaded from the cache
    assert cold["value"] == 14.0
    warm = _run(tmp_path, "prefetch")
    assert warm["started"] == [] and warm["value"] == 14.0


def test_a_unit_takes_only_what_crosses_as_plain_c() -> None:
    from numba import types

    from tdmcore._kernels._unit import c_arguments

    assert c_arguments((types.Array(types.float64, 2, "C"), types.int64, types.float64)) == [
        types.voidptr, types.int64, types.int64, types.int64, types.float64]
    with pytest.raises(TypeError, match="not bool"):
        c_arguments((types.boolean,))


def test_the_prefetch_child_compiles_silently(tmp_path: Path) -> None:
    """The parent says that the kernels compile; a prefetch child, which compiles
    kernels of its own on the way to its units, says nothing more."""
    script = ("import tdmcore\nfrom tdmcore._kernels._unit import _compile_all\n"
              "_compile_all([])\ntdmcore.score([[1.0] * 72, [2.0] * 72], [0, 5], 25.0)\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr == ""


CHAIN_MODULE = UNIT_MODULE.replace('''@njit(cache=True)
def caller(values):
    return _weighted_c(values, 2.0) + 1.0
''', '''from tdmcore._kernels._jit import jit


@jit
def caller(values):
    return _weighted_c(values, 2.0) + 1.0


@jit
def outer(values):
    return caller(values) * 10.0
''')

CHAIN = '''
import json, sys
import numpy as np
import test_unit_module as m
kernel = getattr(m, sys.argv[1])
print(json.dumps(kernel(np.array([1.0, 2.0, 3.5]))))
'''


def test_a_kernel_compiled_on_a_cached_caller_of_a_unit_registers_the_unit(
        tmp_path: Path) -> None:
    """``outer`` calls ``caller``, which calls the unit.  Compiled in a process that
    loaded ``caller`` from the cache, ``outer`` must still carry the unit's
    registration into its own cache entry: a third process that loads only ``outer``
    calls the unit's symbol (it crashed: Numba leaves a loaded library without its
    hooks, ``_jit._KernelCacheImpl.rebuild``; now the stand-in would answer, slowly,
    and warn)."""
    (tmp_path / "test_unit_module.py").write_text(CHAIN_MODULE)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT / "src")]))

    def run(kernel: str) -> float:
        out = subprocess.run([sys.executable, "-c", CHAIN, kernel], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=600, check=False)
        assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
        assert "through a stand-in" not in out.stderr  # registered by the hook
        value: float = json.loads(out.stdout.strip().splitlines()[-1])
        return value

    assert run("caller") == 14.0  # compiles caller and the unit
    assert run("outer") == 140.0  # compiles outer on caller from the cache
    assert run("outer") == 140.0  # loads outer alone from the cache


STAND_IN = '''
import ctypes, json
import numpy as np
import test_unit_module as m
values = np.array([1.0, 2.0, 3.5])
# the symbol's stand-in, as a kernel loaded without the unit's hook would reach it
got = m.WEIGHTED._stand_in(values.ctypes.data, 3, 2.0)
print(json.dumps([got, m.WEIGHTED._cfunc is not None]))
'''


def test_an_unregistered_unit_is_reached_through_a_stand_in(tmp_path: Path) -> None:
    """Until a unit is registered its symbol leads to a stand-in, which registers the
    unit, forwards the call and warns: a missing registration (a bug) gives right
    answers slowly, not a jump to nowhere."""
    (tmp_path / "test_unit_module.py").write_text(UNIT_MODULE)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT / "src")]))
    out = subprocess.run([sys.executable, "-c", STAND_IN], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [13.0, True]
    assert "through a stand-in" in out.stderr
