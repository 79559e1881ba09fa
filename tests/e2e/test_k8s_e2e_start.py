"""Seconds to start (issue 40): a new extender pod compiled its kernels for ~70 s
before it answered.  The image compiles them at build time (``tdmcore-bridge warm-cache``,
the Dockerfile's step) and ``tdmcore-bridge`` copies them into the pod's empty cache."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from k8s_bridge.envtest import wait_until
from tests.e2e.e2e_env import SCHEDULER, Env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

GPU = "nvidia.com/gpu"


def test_a_cold_start_with_the_warm_cache_answers_within_10_s(
        env: Env, space: tuple[str, list[str]], tmp_path: Path,
        warm_kernel_cache: tuple[Path, float]) -> None:
    """The warm cache is built as the Dockerfile builds it (a fresh folder,
    ``NUMBA_CPU_NAME=generic``: the session's ``warm_kernel_cache``, tests/conftest.py);
    an extender process then starts with an empty ``NUMBA_CACHE_DIR`` (the pod's
    emptyDir) and ``TDMCORE_WARM_CACHE`` pointing at it: from its start to its first
    Filter answer on a real control plane < 10 s."""
    ns, nodes = space
    nodes += env.nodes("start", 2)
    warm, built = warm_kernel_cache
    generic = {**os.environ, "NUMBA_CPU_NAME": "generic"}
    assert any(warm.rglob("*.nbc")), "no compiled kernel in the warm cache"
    ext = env.component("extender-cold", ["extender", "--scheduler-name", SCHEDULER,
                                          "--no-requeue"], SCHEDULER, env={
        **generic, "NUMBA_CACHE_DIR": str(tmp_path / "pod-emptydir"),
        "TDMCORE_WARM_CACHE": str(warm)})
    probe = {"Pod": {"metadata": {"name": "probe", "namespace": ns, "uid": "probe"},
                     "spec": {"containers": [{"name": "c", "resources": {
                         "limits": {GPU: "1"}}}]}}, "NodeNames": nodes}
    try:
        t0 = time.monotonic()
        ext.start(wait_ready=False)

        def answered() -> bool:
            try:
                status, answer = ext.post("/filter", probe, timeout_s=2)
            except OSError:
                return False
            return status == 200 and set(answer.get("NodeNames") or []) == set(nodes)

        wait_until(answered, 120, "the extender's first Filter answer", interval_s=0.05)
        took = time.monotonic() - t0
    finally:
        ext.stop()
    copied = sum(1 for _ in (tmp_path / "pod-emptydir").rglob("*.nbc"))
    print(f"\ne2e: extender from process start to first answer {took:.1f} s with the warm "
          f"cache ({copied} kernels copied; building it took {built:.0f} s)")
    assert copied > 0
    assert took < 10.0, f"{took:.1f} s from start to the first answer"
