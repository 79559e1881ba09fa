"""The compiled kernels' first run: each kernel compiled once per process.

Numba compiles a kernel once per argument-type signature.  A constant passed from
one kernel to another used to be typed as a literal (``Literal[int](0)``), so the
rotation search was compiled three times over in a cold start of the README's
command (docs/benchmarks.md, "The first run").  The check runs in a child process
with an empty cache (a kernel loaded from the cache brings its callees' code along,
so only a compile shows which signatures the calls between kernels ask for): the
README's command's policies on the snapshots, and the public search in both modes
with and without a perfect rotation.  Compiling takes 20-30 s: ``slow``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SIGNATURES = """
import importlib, json, pkgutil
import tdmcore
import tdmcore._kernels as kernels
from benchmarks.asv_bench.instances import heavy_link
from tdmcore.sim.cluster import warm_up
from tdmcore.sim.scenarios import metronome_snapshots

for scenario in metronome_snapshots().values():
    for policy in ("metronome", "diktyo", "ideal"):
        warm_up(scenario.sim, scenario.jobs, policy)
for seed in (0, 18):  # 18 has a perfect rotation, 0 has none (phase B)
    inst = heavy_link(4, 72, seed)
    for mode in ("first", "optimal"):
        tdmcore.search_rotations(inst.demand, inst.capacity_gbps, inst.limits, mode=mode,
                                 mids=inst.mids)
counts = {}
for info in pkgutil.iter_modules(kernels.__path__):
    module = importlib.import_module(f"tdmcore._kernels.{info.name}")
    for name, obj in vars(module).items():
        if getattr(getattr(obj, "py_func", None), "__module__", None) == module.__name__:
            counts[f"{info.name}.{name}"] = [str(s) for s in obj.signatures]
print(json.dumps(counts))
"""


def _child(script: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, **env)
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", script, *args], env=full,
                          capture_output=True, text=True, timeout=900, check=False)


NO_JIT = pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1",
                            reason="nothing is compiled")


@pytest.mark.slow
@NO_JIT
def test_every_kernel_is_compiled_for_one_signature(tmp_path: Path) -> None:
    out = _child(SIGNATURES, NUMBA_CACHE_DIR=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["rotation_search.search_rotations_kernel"], "the workload ran no search"
    assert counts["lowest_excess._walk"], "the workload ran no phase B"
    twice = {name: sigs for name, sigs in counts.items() if len(sigs) > 1}
    assert not twice, f"compiled more than once: {twice}"


FIRST_CALLS = """
import logging, sys
if sys.argv[1] != "none":
    logging.basicConfig(level=sys.argv[1])
import tdmcore
tdmcore.discretize([400.0, 200.0], [0.2, 0.3], [25.0, 20.0], 400.0, 72)
tdmcore.discretize([400.0], [0.2], [25.0], 400.0, 72)
tdmcore.score([[1.0] * 72, [2.0] * 72], [0, 5], 25.0)
"""


@NO_JIT
def test_the_first_compile_of_a_process_says_so_once(tmp_path: Path) -> None:
    from tdmcore._kernels._jit import COMPILING

    def run(level: str) -> list[str]:
        out = _child(FIRST_CALLS, level, NUMBA_CACHE_DIR=str(tmp_path / level))
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stderr.splitlines()

    # no logging configured (a library user): one line on stderr, however many
    # kernels compile; the second process loads them from the cache and says nothing
    assert run("none") == [f"tdmcore: {COMPILING}"]
    assert run("none") == []
    # an application that logs: an INFO record of tdmcore.kernels, nothing printed
    assert run("INFO") == [f"INFO:tdmcore.kernels:{COMPILING}"]
    assert run("WARNING") == []


CALLEE_CHANGED = """
import json
import numpy as np
from tdmcore._kernels import lowest_excess as le
demand = np.array([[3.0, 0.0, 1.0, 2.0, 0.0, 0.0, 1.0, 2.0],
                   [1.0, 2.0, 0.0, 0.0, 3.0, 1.0, 0.0, 0.0]])
ptr = np.array([0, 5, 9])
idx = np.concatenate([np.flatnonzero(row) for row in demand]).astype(np.int64)
val = np.concatenate([row[row > 0] for row in demand])
le._descent(demand, 2.5, np.array([1, 8]), ptr, idx, val, 4)
print(json.dumps([sum(le._descent.stats.cache_hits.values()),
                  sum(le._descent.stats.cache_misses.values())]))
"""


@NO_JIT
def test_a_kernel_is_compiled_again_when_a_kernel_it_calls_changes(tmp_path: Path) -> None:
    """Numba checks a cached kernel against its own file only (numba/numba#1833), yet
    the kernel carries the code of what it calls: ``_descent`` (lowest_excess.py)
    inlines partial_sums.py's helpers.  Every kernel's cache entry is stamped with all
    the kernels' sources (``_jit.KERNELS_FINGERPRINT``): after partial_sums.py changes
    it is compiled again, not loaded stale."""
    import shutil

    import tdmcore

    package = Path(tdmcore.__file__).resolve().parent
    copy = tmp_path / "src" / "tdmcore"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))

    def run() -> list[int]:
        env = dict(os.environ, PYTHONPATH=str(tmp_path / "src"),
                   NUMBA_CACHE_DIR=str(tmp_path / "cache"))
        out = subprocess.run([sys.executable, "-c", CALLEE_CHANGED], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=600, check=False)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    assert run() == [0, 1]  # compiled
    assert run() == [1, 0]  # loaded from the cache
    callee = copy / "_kernels" / "partial_sums.py"
    callee.write_text(callee.read_text() + "\n# a change elsewhere\n")
    assert run() == [0, 1]  # compiled again: lowest_excess.py itself did not change
    assert run() == [1, 0]


UNIT_LOADED = """
import json
import tdmcore
from benchmarks.asv_bench.instances import heavy_link
from tdmcore._kernels.rotation_search import search_rotations_kernel
inst = heavy_link(4, 72, 0)  # no perfect rotation: phase B runs
found = tdmcore.search_rotations(inst.demand, inst.capacity_gbps, inst.limits)
hits = sum(search_rotations_kernel.stats.cache_hits.values())
print(json.dumps([list(map(int, found.rotations)), hits]))
"""


@NO_JIT
def test_phase_b_is_one_compile_unit_called_by_its_symbol() -> None:
    """Phase B is compiled once, as the C function of ``PHASE_B_UNIT``: a kernel that
    calls it holds a declaration of its symbol, not its code (``_unit``), and a kernel
    loaded from the cache in a fresh process finds the symbol registered (its
    ``reload_init`` hook) and gives the same answer."""
    import numpy as np
    from numba import njit

    import tdmcore
    from benchmarks.asv_bench.instances import heavy_link
    from tdmcore._kernels import lowest_excess as le

    @njit
    def caller(demand, capacity, limits, supp_ptr, supp_idx, supp_val, rem, best_rot,  # type: ignore[no-untyped-def]
               perfect):
        return le.lowest_excess(demand, capacity, limits, supp_ptr, supp_idx, supp_val, rem,
                                1e-9, 1e-9, best_rot, False, perfect)

    demand = np.array([[3.0, 0.0, 1.0, 2.0], [1.0, 2.0, 0.0, 0.0], [0.0, 1.0, 2.0, 1.0]])
    ptr = np.array([0, 3, 5, 8])
    idx = np.concatenate([np.flatnonzero(row) for row in demand]).astype(np.int64)
    val = np.concatenate([row[row > 0] for row in demand])
    rem = np.concatenate([np.cumsum(demand.sum(axis=1)[::-1])[::-1], [0.0]])
    best = np.zeros(3, dtype=np.int64)
    found, evaluated = caller(demand, 2.5, np.array([1, 4, 4]), ptr, idx, val, rem, best,
                              np.zeros(4, dtype=np.bool_))
    assert not found and evaluated > 0
    llvm = next(iter(caller.inspect_llvm().values()))
    assert f"declare double @{le.PHASE_B_UNIT.symbol}(" in llvm
    assert "_walk" not in llvm and "_descent" not in llvm  # the unit's code is not linked in

    # a fresh process loads the search from the cache this one filled
    inst = heavy_link(4, 72, 0)
    here = tdmcore.search_rotations(inst.demand, inst.capacity_gbps, inst.limits)
    out = _child(UNIT_LOADED)
    assert out.returncode == 0, out.stderr[-2000:]
    rotations, hits = json.loads(out.stdout.strip().splitlines()[-1])
    assert rotations == list(map(int, here.rotations))
    assert hits >= 1


@NO_JIT
def test_a_compile_unit_refuses_an_array_it_cannot_pass() -> None:
    """A unit passes an array as its data pointer and shape: a strided array would
    be read wrong, so typing the call refuses it (no kernel is compiled)."""
    import numpy as np
    from numba import njit
    from numba.core.errors import TypingError

    from tdmcore._kernels import lowest_excess as le

    @njit
    def strided(demand, ints, floats, perfect, out):  # type: ignore[no-untyped-def]
        return le._phase_b_c(demand[:, ::2], 1.0, ints, ints, ints, floats, floats, 0.0, 0.0,
                             ints, 0, 0, perfect, 0.0, out)

    ints, floats = np.zeros(3, dtype=np.int64), np.zeros(3)
    refused = r"tdmcore_phase_b: argument 0 is array\(float64, 2d, A\)"
    with pytest.raises(TypingError, match=refused):
        strided(np.zeros((2, 8)), ints, floats, np.zeros(3, dtype=np.bool_),
                np.zeros(2, dtype=np.int64))
