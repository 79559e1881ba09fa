"""The kernels' Python bodies (NUMBA_DISABLE_JIT=1) agree with the oracle too.

Runs in a subprocess so this process keeps its compiled kernels; it guards against
behaviour that differs between Numba and Python (integer modulo, float rounding).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import instances, naive, tdmcore
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
print(checked)
"""


def test_pure_python_kernels_match_oracle() -> None:
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                      env.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.strip()) == 5 * 4 * 2 * 4
