"""The warm kernel cache's copy into a pod's empty cache (k8s_bridge/warm.py), and that
the cache holds every kernel the bridge's servers run; the cold start it buys is
measured on a real control plane in tests/e2e/test_k8s_e2e_start.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from k8s_bridge.warm import WARM_CACHE_ENV, seed

ROOT = Path(__file__).resolve().parents[2]
#: the bridge's work the warm cache must cover: the extender's Filter, Prioritize and
#: Bind (gangs included) and the standalone scheduler over the HTTP fake, and the
#: controller's plans, offsets, reports, pauses and pattern updates
BRIDGE_WORK = ("tests/k8s_bridge/test_k8s_extender.py", "tests/k8s_bridge/test_k8s_gang_bind.py",
               "tests/k8s_bridge/test_k8s_standalone.py",
               "tests/k8s_bridge/test_k8s_controller.py")


def _image_cache(root: Path) -> Path:
    kernels = root / "_kernels_0123"
    kernels.mkdir(parents=True)
    (kernels / "circle.draw-1.py311.nbi").write_bytes(b"index")
    (kernels / "circle.draw-1.py311.1.nbc").write_bytes(b"code")
    return root


def test_seed_copies_into_a_cache_with_no_index_yet(tmp_path: Path) -> None:
    """Numba makes the cache's folders when the kernels are imported, before anything is
    compiled: a cache of empty folders is still empty (the first version checked for
    any entry, found the folder, copied nothing and the pod compiled for 70 s)."""
    warm = _image_cache(tmp_path / "image")
    pod = tmp_path / "pod"
    (pod / "_kernels_0123").mkdir(parents=True)
    env = {WARM_CACHE_ENV: str(warm), "NUMBA_CACHE_DIR": str(pod)}
    assert seed(env) == 2
    assert (pod / "_kernels_0123" / "circle.draw-1.py311.1.nbc").read_bytes() == b"code"
    (pod / "_kernels_0123" / "circle.draw-1.py311.1.nbc").write_bytes(b"recompiled")
    assert seed(env) == 0  # seeded already (a restarted container): left as it is
    assert (pod / "_kernels_0123" / "circle.draw-1.py311.1.nbc").read_bytes() == b"recompiled"


def test_seed_without_a_warm_cache_or_a_cache_dir_does_nothing(tmp_path: Path) -> None:
    warm = _image_cache(tmp_path / "image")
    assert seed({}) == 0
    assert seed({WARM_CACHE_ENV: str(warm)}) == 0
    assert seed({WARM_CACHE_ENV: str(tmp_path / "absent"),
                 "NUMBA_CACHE_DIR": str(tmp_path / "pod")}) == 0
    assert not (tmp_path / "pod").exists()


def test_seed_that_cannot_copy_says_so_and_goes_on(tmp_path: Path, capsys) -> None:
    warm = _image_cache(tmp_path / "image")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert seed({WARM_CACHE_ENV: str(warm), "NUMBA_CACHE_DIR": str(blocker / "x")}) == 0
    assert "warm cache not copied" in capsys.readouterr().err


@pytest.mark.slow
def test_the_bridges_work_on_the_warm_cache_compiles_nothing(
        warm_kernel_cache: tuple[Path, float], tmp_path: Path) -> None:
    """A kernel the warm cache lacks is compiled on its first use in a running pod (a
    minute under load, with the verb that needed it waiting): the image's cache missed
    ``rotation_search.pair_distance``, which Reserve's first-mode plan reaches (through
    ``psi_of``) when the plan is perfect and pods contend.  The bridge's own tests of
    the extender, the standalone scheduler and the controller run on a seeded copy of
    the cache, with the image's ``NUMBA_CPU_NAME=generic``, and no cache file appears
    or changes."""
    warm, built_s = warm_kernel_cache
    pod = tmp_path / "pod-emptydir"
    env = {**os.environ, "NUMBA_CPU_NAME": "generic", "NUMBA_CACHE_DIR": str(pod),
           WARM_CACHE_ENV: str(warm)}
    assert seed(env) > 0
    before = {p: p.stat().st_mtime_ns for p in pod.rglob("*.nb[ic]")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *BRIDGE_WORK], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    after = {p: p.stat().st_mtime_ns for p in pod.rglob("*.nb[ic]")}
    compiled = sorted(p.name for p in set(after) - set(before))
    rewritten = sorted(p.name for p in before if after.get(p) != before[p])
    print(f"\nwarm cache: built in {built_s:.0f} s, {len(before)} files; "
          f"{done.stdout.strip().splitlines()[-1]}")
    assert not compiled and not rewritten, (compiled, rewritten)
