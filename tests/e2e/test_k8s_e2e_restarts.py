"""Restarts on a real control plane: the extender, kube-apiserver and the controller's
leader go away and come back; nothing is lost and pods keep being bound."""

from __future__ import annotations

import time

import pytest

from k8s_bridge.envtest import wait_until
from tests.e2e.e2e_env import NS, TEST, Component, Env, wait_known

pytestmark = pytest.mark.e2e

JOB = "training.kubeflow.org/job-name"


def _tried(env: Env, ns: str, names: list[str]) -> bool:
    for name in names:
        pod = env.kube.get("Pod", name, ns)
        if not any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                   for c in (pod.get("status") or {}).get("conditions") or []):
            return False
    return True


def test_pods_bind_soon_after_an_extender_restart(env: Env, extender: Component,
                                                  space: tuple[str, list[str]]) -> None:
    """Pods kube-scheduler could not schedule while the extender was down bind within
    seconds of its return (it requeues them), not at the 60 s queue flush."""
    ns, nodes = space
    nodes += env.nodes("ext", 2)
    wait_known(extender, nodes)
    extender.stop()
    try:
        names = [f"p-{i}" for i in range(4)]
        for name in names:
            env.pod(ns, name, gpu=2, node_selector={TEST: "ext"})
        wait_until(lambda: _tried(env, ns, names), 30, "kube-scheduler failing the pods")
        assert env.bound(ns) == {}
    finally:
        started = time.monotonic()
        extender.start()
    t0 = time.monotonic()
    env.wait_bound(ns, 4, 40)
    took = time.monotonic() - t0
    print(f"\ne2e: 4 pods bound {took:.1f} s after the extender was ready again "
          f"({time.monotonic() - started:.1f} s after its process started)")
    assert took < 20.0, f"{took:.1f} s: the pods waited for a queue flush"


def test_apiserver_restart_loses_nothing(env: Env, extender: Component,
                                         space: tuple[str, list[str]]) -> None:
    """kube-apiserver stops and starts again over the same etcd: the NodeBandwidth
    records survive, the extender's informers resync, and new pods are bound (by a
    kube-scheduler that is restarted if it exited on losing its Lease)."""
    ns, nodes = space
    nodes += env.nodes("api", 2)
    wait_known(extender, nodes)
    env.podbandwidth(ns, "j", period=100, duty=0.4, gbps=10, match={JOB: "j"})
    for i in range(2):
        env.pod(ns, f"j-{i}", gpu=2, labels={JOB: "j"}, node_selector={TEST: "api"})
    before = env.wait_bound(ns, 2, 30)

    def recorded() -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for node in nodes:
            nbw = env.nodebandwidth(node) or {}
            out[node] = sorted(e["name"] for e in (nbw.get("status") or {}).get("pods") or [])
        return out

    want = {node: sorted(p for p, n in before.items() if n == node) for node in nodes}
    wait_until(lambda: recorded() == want, 20, "the pods recorded on NodeBandwidth")
    env.plane.stop_apiserver()
    env.plane.start_apiserver()
    t0 = time.monotonic()
    assert recorded() == want
    env.ensure_kube_scheduler()
    wait_known(extender, nodes)
    env.pod(ns, "j-2", gpu=2, labels={JOB: "j"}, node_selector={TEST: "api"})
    env.wait_bound(ns, 3, 60)
    print(f"\ne2e: a new pod bound {time.monotonic() - t0:.1f} s after kube-apiserver "
          "came back (created once kube-scheduler led and the extender had resynced)")
    wait_until(lambda: sum(len(v) for v in recorded().values()) == 3, 20,
               "the new pod recorded too")


def _lease() -> tuple[str, str]:
    return ("tdmcore-controller", NS)


def test_controller_failover(env: Env, space: tuple[str, list[str]]) -> None:
    """Two controller replicas: one leads; when it stops (SIGTERM) the other takes the
    Lease over at once (leaseTransitions + 1); when that one is killed (SIGKILL) the
    first, back as a standby, takes over once the Lease expires."""
    replicas = [env.component(f"controller-{r}", ["controller", "--leader-elect",
                                                  "--resync-seconds", "1"],
                              "tdmcore-controller", env={"POD_NAME": f"controller-{r}"})
                for r in ("a", "b")]
    try:
        for comp in replicas:
            comp.start()
        name, ns = _lease()

        def holder() -> str:
            spec = env.kube.get("Lease", name, ns).get("spec") or {}
            return str(spec.get("holderIdentity") or "")

        first = wait_until(holder, 30, "a controller to lead")
        leader = next(c for c in replicas if c.name == first)
        standby = next(c for c in replicas if c is not leader)
        wait_until(lambda: leader.metric("tdmcore_controller_leader") == 1.0, 10,
                   "the leader's gauge")
        assert standby.metric("tdmcore_controller_leader") == 0.0
        transitions = env.kube.get("Lease", name, ns)["spec"].get("leaseTransitions", 0)
        t0 = time.monotonic()
        leader.stop()  # SIGTERM: it releases the Lease
        wait_until(lambda: holder() == standby.name, 30, "the standby to take over")
        took = time.monotonic() - t0
        assert env.kube.get("Lease", name, ns)["spec"]["leaseTransitions"] == transitions + 1
        wait_until(lambda: standby.metric("tdmcore_controller_leader") == 1.0, 10,
                   "the new leader's gauge")
        print(f"\ne2e: controller failover in {took:.1f} s (SIGTERM: the Lease released)")
        assert "Traceback" not in (standby.proc.log(200_000) if standby.proc else "")
        # the old leader comes back as a standby; the new one is killed (no release):
        # the standby takes over once the Lease expires (15 s)
        leader.start()
        t0 = time.monotonic()
        standby.kill()
        wait_until(lambda: holder() == leader.name, 40, "the standby to take over")
        took = time.monotonic() - t0
        assert env.kube.get("Lease", name, ns)["spec"]["leaseTransitions"] == transitions + 2
        print(f"e2e: controller failover in {took:.1f} s (SIGKILL: the Lease expired)")
        assert took >= 10.0, "a killed leader's Lease was taken before it expired"
    finally:
        for comp in replicas:
            comp.stop()
