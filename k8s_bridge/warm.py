"""Warm Numba caches: compiled at image build time, copied into place at start.

A bridge process compiles its Numba kernels on first use (``cache=True``,
``tdmcore._kernels._jit``); with the cache in a pod's scratch space every new pod paid
about 70 s for it before it answered (issue 40), and with one extender replica and
``ignorable: false`` nothing was scheduled meanwhile.

* :func:`build` (``tdmcore-bridge warm-cache --dir DIR``, run by the Dockerfile) runs
  what the servers run -- every Metronome policy's decision and Reserve, the
  controller's plans, offsets and regulation -- on a small cluster of its own, with
  ``NUMBA_CACHE_DIR=DIR``, so that every kernel and signature the servers use is in
  ``DIR``.
* :func:`seed` (called by ``tdmcore-bridge`` before anything imports Numba) copies
  ``$TDMCORE_WARM_CACHE`` into an empty ``$NUMBA_CACHE_DIR``: Numba needs a writable
  cache directory, and the image's is read-only.

**[decision]** The image builds and runs with ``NUMBA_CPU_NAME=generic`` (the
Dockerfile sets it for both), so the cached machine code does not depend on the
build machine's CPU: Numba keys each cache entry by the target CPU's name and
features, and a generic entry matches on every x86-64 node.  The fallback is Numba's
own: an entry that does not match (another ``NUMBA_CPU_NAME``, another Numba, a
change to any kernel's source, ``tdmcore._kernels._jit.KERNELS_FINGERPRINT``) is
compiled again and written to the writable cache, as without
a warm cache.  Nothing is ever loaded for a target it was not compiled for.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["WARM_CACHE_ENV", "build", "seed", "warm_up_all"]

#: where ``tdmcore-bridge`` finds the image's warm cache (the Dockerfile sets it)
WARM_CACHE_ENV = "TDMCORE_WARM_CACHE"


def seed(environ: dict[str, str] | None = None) -> int:
    """Copy ``$TDMCORE_WARM_CACHE`` into ``$NUMBA_CACHE_DIR`` when that holds nothing
    yet; the number of files copied (0: nothing to do).  Never raises: a copy that
    fails leaves Numba to compile, as without a warm cache."""
    env = os.environ if environ is None else environ
    src, dst = env.get(WARM_CACHE_ENV), env.get("NUMBA_CACHE_DIR")
    if not src or not dst or not Path(src).is_dir():
        return 0
    target = Path(dst)
    try:
        # no index file yet (Numba makes the folders when the kernels are imported,
        # before any is compiled); a restarted container keeps its emptyDir: seeded
        if target.is_dir() and next(target.rglob("*.nbi"), None) is not None:
            return 0
        shutil.copytree(src, target, dirs_exist_ok=True)
        return sum(1 for p in target.rglob("*") if p.is_file())
    except OSError as exc:
        print(f"tdmcore-bridge: warm cache not copied ({exc}); kernels compile on first "
              "use", file=sys.stderr)
        return 0


def warm_up_all() -> None:
    """Run every kernel the servers run, on a small cluster of our own: each Metronome
    policy's decisions and Reserve (:meth:`Pipeline.warm_up
    <k8s_bridge.pipeline.Pipeline.warm_up>`), the controller's link plans (first and
    optimal), offsets and regulation."""
    import numpy as np

    from tdmcore._kernels.joint_search import joint_first_kernel
    from tdmcore.framework import Scheduler
    from tdmcore.metronome.controller import Controller
    from tdmcore.metronome.policies import POLICIES, make_policy
    from tdmcore.metronome.policies.metronome import link_pods
    from tdmcore.model import Cluster, ClusterState, Node, Pod, TrafficPattern

    from .cache import ClusterModel
    from .pipeline import Pipeline

    for name in POLICIES:
        Pipeline(ClusterModel(), name).warm_up()
        policy = make_policy(name)
        state = ClusterState(Cluster([Node("a", 8, 32, 8, 25.0), Node("b", 8, 32, 8, 25.0)]))
        scheduler = Scheduler(policy)
        for k in range(4):
            scheduler.schedule(state, Pod(
                f"w{k}", f"j{k % 3}", cpu=1, gpu=1, priority=1 if k == 0 else 0,
                pattern=TrafficPattern(100.0 * (1 + k % 2), 0.3, 10.0)))
        # two jobs whose bursts contend on a link (20 + 20 > 25 Gbps) and fit side by
        # side: Reserve's first-mode plan is perfect and its Psi is measured
        # (rotation.psi_of -> rotation_search.pair_distance)
        for k in range(2):
            scheduler.schedule(state, Pod(f"c{k}", f"contend{k}", cpu=1, gpu=1,
                                          pattern=TrafficPattern(100.0, 0.3, 20.0)))
        ctrl = Controller.for_policy(state, policy)
        for node in range(len(state.cluster)):
            if len(link_pods(state, node)) < 2:  # as the controller plans: shared links
                continue
            for optimal in (False, True):
                ctrl.plan_link(node, optimal=optimal)
        ctrl.update_offsets()
        # the joint first search of links planned as one (a cycle whose links carry
        # the same jobs, tdmcore.metronome.joint), as common_rotations calls it
        joint_first_kernel(np.zeros((2, 2, 8)), np.full(2, 25.0),
                           np.full(2, 8, dtype=np.int64), 1e-9, np.zeros(2, dtype=np.int64))
        for key in list(state.placed):
            starts = [1_000_000.0 + 150.0 * i for i in range(12)]
            ctrl.report_iterations(key, starts, [150.0] * 12, [30.0] * 12, batch=True)


def build(folder: Path) -> tuple[int, float]:
    """Compile every kernel into ``folder`` (in a child process, whose Numba reads
    ``NUMBA_CACHE_DIR`` at import); (cache files, seconds)."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(folder.resolve())}
    env.pop(WARM_CACHE_ENV, None)
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", "from k8s_bridge.warm import warm_up_all; "
                           "warm_up_all()"], env=env, check=False)
    if done.returncode != 0:
        raise OSError(f"compiling the kernels into {folder} failed (exit {done.returncode})")
    return sum(1 for p in folder.rglob("*.nbc")), time.monotonic() - t0
