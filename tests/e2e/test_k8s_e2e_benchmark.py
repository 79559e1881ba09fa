"""The tools of ``benchmarks/k8s_bind.py`` on the real control plane: the watch that
times the last binding, and kube-apiserver's own CPU profile read without Go."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from benchmarks.apiserver_profile import by_request, read
from benchmarks.k8s_bind import ApiserverProfile, BoundWatch
from k8s_bridge.envtest import ControlPlane
from tests.e2e.e2e_env import Env

pytestmark = pytest.mark.e2e


def _bind(env: Env, ns: str, pod: str, node: str) -> None:
    env.kube.request("POST", f"/api/v1/namespaces/{ns}/pods/{pod}/binding", body={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})


def test_bound_watch_times_the_last_binding_and_counts_pods_bound_before(env: Env) -> None:
    ns = env.namespace("bench-watch")
    node = env.nodes("bench-watch-node", 1)[0]
    try:
        for i in range(3):  # a scheduler nobody runs: only this test binds them
            env.pod(ns, f"p{i}", scheduler="nobody")
        watch = BoundWatch(env.kube, ns, 3, 30)
        _bind(env, ns, "p0", node)
        _bind(env, ns, "p1", node)
        time.sleep(0.3)
        assert watch.at is None and set(watch.bound) == {"p0", "p1"}
        before = time.monotonic()
        _bind(env, ns, "p2", node)
        at = watch.wait(30)
        assert before <= at <= time.monotonic()
        assert watch.bound == {"p0": node, "p1": node, "p2": node}

        env.pod(ns, "p3", scheduler="nobody")  # never bound
        pending = BoundWatch(env.kube, ns, 4, 30)
        assert set(pending.bound) == {"p0", "p1", "p2"}  # from the list, before the watch
        with pytest.raises(TimeoutError, match="3 of 4 pods bound"):
            pending.wait(1)
    finally:
        env.clean(ns, [node])


def test_apiserver_profile_is_read_by_kind_of_request(plane: ControlPlane,
                                                      tmp_path: Path) -> None:
    out = tmp_path / "apiserver.pb.gz"
    profile = ApiserverProfile(plane, 1, out)
    kube = plane.kube()
    deadline = time.monotonic() + 1.5
    lists = 0
    while time.monotonic() < deadline:  # work the profile must show
        kube.list("Node")
        kube.list("Pod")
        lists += 2
    profile.join()
    shares = by_request([read(out)], 1)
    assert lists > 20
    assert shares["total"] > 0
    assert shares.get("LIST", 0.0) > 0, shares
