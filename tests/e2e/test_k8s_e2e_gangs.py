"""PodGroup gangs on a real control plane: all or nothing in extender mode (kube-scheduler
+ the extender's bind-time permit) and in standalone mode, and how fast a gang binds once
it can."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from k8s_bridge.envtest import wait_until
from tests.e2e.e2e_env import NS, TEST, Component, Env, wait_known

pytestmark = pytest.mark.e2e

GROUP = "scheduling.x-k8s.io/pod-group"
STANDALONE = "tdmcore-standalone"


def _refused(extender: Component) -> float:
    return extender.metric("tdmcore_extender_decisions_total",
                           {"verb": "bind", "outcome": "refused"})


def _tried(env: Env, ns: str, names: list[str]) -> bool:
    """kube-scheduler has tried (and failed) each of ``names``."""
    for name in names:
        pod = env.kube.get("Pod", name, ns)
        if not any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                   for c in (pod.get("status") or {}).get("conditions") or []):
            return False
    return True


def test_extender_gang_that_cannot_fit_binds_no_member(env: Env, extender: Component,
                                                       space: tuple[str, list[str]]) -> None:
    """8 x 8-GPU members, minMember 8, 7 free nodes: no member is bound, ever (the
    members that got a node wait at bind and are released); a new node lets the whole
    gang bind."""
    ns, nodes = space
    nodes += env.nodes("gang7", 7)
    wait_known(extender, nodes)
    env.podgroup(ns, "g", 8)
    refused = _refused(extender)
    names = [f"g-{i}" for i in range(8)]
    for name in names:
        env.pod(ns, name, gpu=8, labels={GROUP: "g"}, node_selector={TEST: "gang7"})

    def released() -> bool:
        assert env.bound(ns) == {}, "a gang that cannot fit was partly bound"
        return _refused(extender) - refused >= 7 and _tried(env, ns, names)

    wait_until(released, 60, "7 members reserved at bind, then released")
    assert env.bound(ns) == {}
    more = env.nodes("gang7", 1, start=7)  # one more node: the gang fits
    nodes += more
    t0 = time.monotonic()
    bound = env.wait_bound(ns, 8, 60)
    took = time.monotonic() - t0
    assert sorted(set(bound.values())) == sorted(nodes)
    print(f"\ne2e: gang of 8 bound {took:.1f} s after its 8th node appeared")


def test_extender_gang_larger_than_waitresss_default_pool_binds(
        env: Env, extender: Component, space: tuple[str, list[str]]) -> None:
    """16 x 1-GPU members on 2 nodes: more members waiting at bind than waitress's
    default 8 threads (each waiting bind holds one; the gang cycled from deadline to
    deadline, never bound).  The extender serves 32 threads and lets 28 binds wait."""
    ns, nodes = space
    nodes += env.nodes("gang16", 2)
    wait_known(extender, nodes)
    env.podgroup(ns, "g", 16)
    t0 = time.monotonic()
    for i in range(16):
        env.pod(ns, f"g-{i}", gpu=1, labels={GROUP: "g"}, node_selector={TEST: "gang16"})
    bound = env.wait_bound(ns, 16, 60)
    assert len(bound) == 16
    print(f"\ne2e: gang of 16 bound in {time.monotonic() - t0:.1f} s")


def test_extender_held_back_member_binds_soon_after_its_gang_completes(
        env: Env, extender: Component, space: tuple[str, list[str]]) -> None:
    """Members created before minMember exist are held back by Filter; once the last
    one is created the extender requeues them, and the gang binds within seconds (not at
    kube-scheduler's 60 s unschedulable-queue flush)."""
    ns, nodes = space
    nodes += env.nodes("held", 4)
    wait_known(extender, nodes)
    env.podgroup(ns, "g", 4)
    first = [f"g-{i}" for i in range(3)]
    for name in first:
        env.pod(ns, name, gpu=4, labels={GROUP: "g"}, node_selector={TEST: "held"})
    wait_until(lambda: _tried(env, ns, first), 30, "the first members held back")
    assert env.bound(ns) == {}
    t0 = time.monotonic()
    env.pod(ns, "g-3", gpu=4, labels={GROUP: "g"}, node_selector={TEST: "held"})
    env.wait_bound(ns, 4, 30)
    took = time.monotonic() - t0
    print(f"\ne2e: held-back gang members bound {took:.1f} s after the gang completed")
    assert took < 15.0, f"{took:.1f} s: the held-back members waited for a queue flush"


@pytest.fixture(scope="module")
def standalone(env: Env) -> Iterator[Component]:
    """The standalone scheduler with --leader-elect, as its shipped ServiceAccount."""
    comp = env.component("standalone", ["scheduler", "--scheduler-name", STANDALONE,
                                        "--leader-elect"], "tdmcore-standalone-scheduler")
    comp.start()
    try:
        yield comp
    finally:
        comp.stop()


def test_standalone_scheduler_leads_with_the_shipped_rbac(env: Env,
                                                         standalone: Component) -> None:
    def holder() -> str:
        lease = env.kube.get("Lease", "tdmcore-standalone-scheduler", NS)
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    assert wait_until(holder, 30, "the standalone scheduler's Lease held")
    kube_scheduler = env.kube.get("Lease", "tdmcore-scheduler", NS)["spec"]["holderIdentity"] \
        if env.scheduler is not None else None
    assert holder() != kube_scheduler


def test_standalone_gang_all_or_nothing(env: Env, standalone: Component,
                                        space: tuple[str, list[str]]) -> None:
    ns, nodes = space
    nodes += env.nodes("solo", 3)
    env.podgroup(ns, "g", 4)
    before = standalone.metric("tdmcore_scheduler_gangs_total", {"outcome": "Unschedulable"})
    for i in range(4):
        env.pod(ns, f"g-{i}", gpu=8, labels={GROUP: "g"}, scheduler=STANDALONE)

    def refused() -> bool:
        assert env.bound(ns) == {}, "a gang that cannot fit was partly bound"
        return standalone.metric("tdmcore_scheduler_gangs_total",
                                 {"outcome": "Unschedulable"}) > before

    wait_until(refused, 60, "the standalone scheduler to refuse the gang")
    nodes += env.nodes("solo", 1, start=3)
    bound = env.wait_bound(ns, 4, 30)
    assert sorted(set(bound.values())) == sorted(nodes)


def test_standalone_records_events_with_the_shipped_rbac(env: Env, standalone: Component,
                                                         space: tuple[str, list[str]]) -> None:
    """As kube-scheduler does: Scheduled for a pod it binds, FailedScheduling with the
    reason for one it cannot place (here a bad priority label), once; the shipped
    ClusterRole lets it create them."""
    ns, nodes = space
    nodes += env.nodes("solo-ev", 1)
    env.pod(ns, "odd", labels={"tdmcore.io/priority": "urgent"}, scheduler=STANDALONE)
    env.pod(ns, "fine", scheduler=STANDALONE)
    env.wait_bound(ns, 1, 30)
    scheduled = wait_until(lambda: env.event_messages(ns, "fine", "Scheduled"), 30,
                           "a Scheduled event")
    assert scheduled == [f"Successfully assigned {ns}/fine to {nodes[-1]}"]
    wait_until(lambda: env.event_messages(ns, "odd", "FailedScheduling"), 30,
               "a FailedScheduling event")
    time.sleep(1.5)  # three more passes of the scheduler: still one event
    failed = env.event_messages(ns, "odd", "FailedScheduling")
    assert len(failed) == 1 and "tdmcore.io/priority" in failed[0], failed
