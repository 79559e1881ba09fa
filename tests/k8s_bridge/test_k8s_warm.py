"""The warm kernel cache's copy into a pod's empty cache (k8s_bridge/warm.py); the
cold start it buys is measured on a real control plane in
tests/e2e/test_k8s_e2e_start.py."""

from __future__ import annotations

from pathlib import Path

from k8s_bridge.warm import WARM_CACHE_ENV, seed


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
