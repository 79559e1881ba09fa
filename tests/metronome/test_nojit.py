"""The kernels' Python bodies (NUMBA_DISABLE_JIT=1) agree with the oracle too.

Runs in a subprocess so this process keeps its compiled kernels; it guards against
behaviour that differs between Numba and Python (integer modulo, float rounding).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the child imports tests.*

SCRIPT = """
import tdmcore
from tests import instances
from tests.oracles import naive
checked = 0
for family in instances.FAMILIES:
    for k in (1, 2, 3, 4):
        for mode in ("first", "optimal"):
            for seed in range(4):
                inst = instances.make_instance(family, seed, k)
                got = tdmcore.search_rotations(inst.demand, inst.capacity, inst.limits,
                                               mode=mode, mids=inst.mids)
                want = naive.search(inst.demand, inst.capacity, inst.limits, mode=mode,
                                    mids=inst.mids)
                assert tuple(got.rotations.tolist()) == want.rotations, inst.describe()
                assert got.perfect == want.perfect, inst.describe()
                checked += 1
for k in (4, 5):  # the phase-B search on heavily contended links
    for seed in range(6):
        inst = instances.make_heavy_instance(seed, k)
        got = tdmcore.search_rotations(inst.demand, inst.capacity, inst.limits)
        want = naive.search(inst.demand, inst.capacity, inst.limits)
        assert tuple(got.rotations.tolist()) == want.rotations, inst.describe()
        checked += 1
print(checked)
"""


def test_pure_python_kernels_match_oracle() -> None:
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    # families x k x modes x seeds, then heavy links x k x seeds
    assert int(out.stdout.strip()) == 6 * 4 * 2 * 4 + 2 * 6


SCHEDULE = """
import json
from tests.clusters import random_cluster
from tdmcore.framework import Scheduler
from tdmcore.metronome.policies import make_policy
from tdmcore import unify_periods
out = []
for seed in range(6):
    state, pod = random_cluster(25, seed, max_pods=3)
    decision, cycle = Scheduler(make_policy("metronome")).decide(state, pod)
    out.append([decision.node, [round(float(x), 9) for x in cycle.raw_scores]])
base = unify_periods([200.0, 185.0, 97.0], ["high", "low", "low"])
out.append([base.period_ms, base.multiples.tolist(), base.idle_ms.tolist()])
print(json.dumps(out))
"""


def test_pure_python_scheduler_kernels_match_compiled() -> None:
    """Node scoring, unification and the loop filter: same answers without Numba."""
    import json

    results = []
    for disable in ("1", "0"):
        env = dict(os.environ, NUMBA_DISABLE_JIT=disable)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT),
                                                          env.get("PYTHONPATH", "")]))
        out = subprocess.run([sys.executable, "-c", SCHEDULE], env=env, capture_output=True,
                             text=True, timeout=600, check=False)
        assert out.returncode == 0, out.stderr[-2000:]
        results.append(json.loads(out.stdout))
    assert results[0] == results[1]
