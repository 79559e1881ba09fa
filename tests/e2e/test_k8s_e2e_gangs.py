"""PodGroup gangs on a real control plane: all or nothing in extender mode (kube-scheduler
+ the extender placing each gang whole at Filter, k8s_bridge/gangs.py) and in standalone
mode, gangs competing for the same room, and how fast a gang binds once it can."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from k8s_bridge.envtest import wait_until
from tests.e2e.e2e_env import GPU, NS, SCHEDULER, TEST, Component, Env, wait_known

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


def _podgroup_status(env: Env, ns: str, name: str) -> dict[str, Any]:
    return dict(env.kube.get("PodGroup", name, ns).get("status") or {})


def _condition(env: Env, ns: str, name: str) -> dict[str, Any]:
    """The pod's PodScheduled condition (empty if none)."""
    pod = env.kube.get("Pod", name, ns)
    return next((c for c in (pod.get("status") or {}).get("conditions") or []
                 if c.get("type") == "PodScheduled"), {})


def _filters(extender: Component) -> float:
    return extender.metric("tdmcore_extender_decisions_total", {"verb": "filter"})


def test_extender_gangs_that_fit_alone_but_not_together_settle(
        env: Env, extender: Component, space: tuple[str, list[str]]) -> None:
    """Three gangs of 4 x 8-GPU members on 6 nodes: each fits alone, no two together.
    Created interleaved, they livelocked for 38-44 s (each held part of the room at
    bind for 3 s, released it, and tried again); now the first gang admitted claims
    its 4 nodes and binds, the others wait whole (no member of theirs ever bound), with
    the reason in their PodGroup status; once the winner's pods are gone the next gang
    binds."""
    ns, nodes = space
    nodes += env.nodes("rival", 6)
    wait_known(extender, nodes)
    gangs = "abc"
    for g in gangs:
        env.podgroup(ns, g, 4)
    t0 = time.monotonic()
    for i in range(4):
        for g in gangs:
            env.pod(ns, f"{g}-{i}", gpu=8, labels={GROUP: g}, node_selector={TEST: "rival"})
    seen: list[dict[str, int]] = []

    def complete(skip: str = "") -> str | None:
        by_gang = Counter(name.split("-")[0] for name in env.bound(ns))
        by_gang.pop(skip, None)
        seen.append(dict(by_gang))
        done = [g for g, n in by_gang.items() if n == 4]
        return done[0] if done else None

    winner = wait_until(complete, 60, "one gang bound whole", interval_s=0.2)
    took = time.monotonic() - t0
    print(f"\ne2e: of 3 gangs that fit alone but not together, {winner} bound whole "
          f"{took:.1f} s after the first member's creation")
    assert all(len(bound) <= 1 for bound in seen), f"two gangs held nodes at once: {seen}"
    assert took < 10.0, f"{took:.1f} s to settle"
    losers = [g for g in gangs if g != winner]
    time.sleep(2.0)
    assert set(env.bound(ns)) == {f"{winner}-{i}" for i in range(4)}
    assert (_podgroup_status(env, ns, winner).get("phase"),
            _podgroup_status(env, ns, winner).get("scheduled")) == ("Scheduled", 4)
    for g in losers:
        reason = wait_until(lambda g=g: _podgroup_status(env, ns, g).get("reason"), 10,
                            f"PodGroup {g}'s reason")
        assert _podgroup_status(env, ns, g)["phase"] == "Pending"
        assert f"gang {ns}/{g} does not fit" in reason, reason
    # room made: the winner's pods go, the next gang binds whole
    for i in range(4):
        env.kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{winner}-{i}",
                         query={"gracePeriodSeconds": "0"})
    t1 = time.monotonic()
    seen.clear()
    second = wait_until(lambda: complete(winner), 60, "a second gang bound whole",
                        interval_s=0.2)
    took = time.monotonic() - t1
    print(f"e2e: gang {second} bound whole {took:.1f} s after the first one's pods went")
    assert second in losers and all(len(bound) <= 1 for bound in seen), seen
    assert took < 10.0, f"{took:.1f} s"


def test_extender_gang_that_can_never_fit_backs_off_with_one_reason(
        env: Env, extender: Component, space: tuple[str, list[str]]) -> None:
    """3 x 8-GPU members, minMember 3, 2 free nodes: no member is ever bound and no
    node is ever held (it reserved 2 nodes at bind every ~5 s and released them); its
    members are tried less and less often (exponential back-off), each with one
    Unschedulable condition naming the reason, and the PodGroup status says it; a
    third node lets the whole gang bind."""
    ns, nodes = space
    nodes += env.nodes("never", 2)
    wait_known(extender, nodes)
    env.podgroup(ns, "g", 3)
    refused = _refused(extender)
    filters = _filters(extender)
    names = [f"g-{i}" for i in range(3)]
    for name in names:
        env.pod(ns, name, gpu=8, labels={GROUP: "g"}, node_selector={TEST: "never"})
    t0 = time.monotonic()
    window = 20.0
    counts: list[tuple[float, float]] = []
    while (now := time.monotonic() - t0) < window:
        assert env.bound(ns) == {}, "a gang that cannot fit was partly bound"
        counts.append((now, _filters(extender) - filters))
        time.sleep(0.5)
    half = next(c for t, c in counts if t >= window / 2)
    first, second = half, counts[-1][1] - half
    events = [e for e in env.kube.list("Event", ns).get("items") or []
              if e.get("reason") == "FailedScheduling"]
    occurrences = sum(max(int(e.get("count") or 1), int((e.get("series") or {}).get("count")
                                                         or 1)) for e in events)
    print(f"\ne2e: a gang that never fits, over {window:g} s: {first:g} + {second:g} "
          f"Filter calls (first / second half) for its 3 pods, {len(events)} "
          f"FailedScheduling events ({occurrences} occurrences), "
          f"{_refused(extender) - refused:g} binds refused")
    assert _refused(extender) - refused == 0, "members were reserved at bind and released"
    assert second <= first / 2, (first, second)
    assert first + second <= 3 * 6, (first, second)
    for name in names:
        condition = _condition(env, ns, name)
        assert (condition.get("status"), condition.get("reason")) == ("False",
                                                                      "Unschedulable")
        assert f"gang {ns}/g does not fit" in condition.get("message", ""), condition
    status = _podgroup_status(env, ns, "g")
    assert status.get("phase") == "Pending" and "does not fit" in status.get("reason", "")
    more = env.nodes("never", 1, start=2)  # a third node: the gang fits
    nodes += more
    t1 = time.monotonic()
    bound = env.wait_bound(ns, 3, 30)
    print(f"e2e: the gang bound {time.monotonic() - t1:.1f} s after its third node "
          f"appeared")
    assert sorted(set(bound.values())) == sorted(nodes)
    assert wait_until(lambda: _podgroup_status(env, ns, "g").get("phase") == "Scheduled",
                      10, "PodGroup g Scheduled")


def test_extender_gang_is_not_capped_by_the_servers_threads(
        env: Env, extender: Component, space: tuple[str, list[str]]) -> None:
    """40 x 1-GPU members on 5 nodes, through an extender serving 8 threads: no bind
    waits for the gang, so no thread pool caps it (a gang larger than --threads - 3
    never bound before)."""
    ns, nodes = space
    nodes += env.nodes("gang40", 5)
    wait_known(extender, nodes)
    env.podgroup(ns, "g", 40)
    t0 = time.monotonic()
    for i in range(40):
        env.pod(ns, f"g-{i}", gpu=1, labels={GROUP: "g"}, node_selector={TEST: "gang40"})
    bound = env.wait_bound(ns, 40, 60)
    assert len(bound) == 40
    print(f"\ne2e: gang of 40 bound in {time.monotonic() - t0:.1f} s")


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


def test_a_job_without_a_podgroup_left_half_placed_is_told_why(
        env: Env, extender: Component, space: tuple[str, list[str]]) -> None:
    """A job of two pods without a PodGroup, one pod placed, the other rejected
    everywhere: its event said "rejected by the policy's Filter" on the node with room;
    it names the rule Filter gave that node (a dependency loop: j-1 on the second node
    would close the paper's triangle j-k-m over three links carrying three different
    pairs, spec §6; the reason Filter gave that node, issue 39), where the job's pod
    is, and that a PodGroup places a job whole."""
    ns, nodes = space
    nodes += env.nodes("half", 3)
    wait_known(extender, nodes)
    job = "training.kubeflow.org/job-name"
    for j in "jkm":
        env.podbandwidth(ns, j, period=100.0, duty=0.3, gbps=15, match={job: j})
    placed = [("k-0", "k", 3, nodes[0]), ("j-0", "j", 3, nodes[0]), ("x", "x", 2, nodes[0]),
              ("k-1", "k", 3, nodes[2]), ("m-0", "m", 3, nodes[2]), ("y", "y", 2, nodes[2]),
              ("m-1", "m", 3, nodes[1])]
    for name, j, gpu, node in placed:  # bound at creation (spec.nodeName)
        env.kube.create("Pod", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {job: j}},
            "spec": {"schedulerName": SCHEDULER, "nodeName": node,
                     "containers": [{"name": "trainer", "image": "example.invalid/t:1",
                                     "resources": {"requests": {"cpu": "1"},
                                                   "limits": {GPU: str(gpu)}}}]}}, ns)
    time.sleep(1.0)  # the watches deliver them (milliseconds) before j-1 exists
    env.pod(ns, "j-1", gpu=3, labels={job: "j"}, node_selector={TEST: "half"})
    said = wait_until(lambda: [m for m in env.event_messages(ns, "j-1", "FailedScheduling")
                               if "Dependency loop" in m], 30,
                      "a FailedScheduling event naming the rule")
    assert "rejected by the policy's Filter" not in said[0], said
    assert (f"Dependency loop in the affinity graph (its job {ns}/j has 1 pod(s) placed, "
            f"on {nodes[0]}: a job is placed whole only as a PodGroup)") in said[0], said
    # the full nodes: kube-scheduler's own NodeResourcesFit, before the extender
    assert "2 Insufficient nvidia.com/gpu" in said[0], said
    assert env.node_of(ns, "j-1") is None
