"""Extender mode: PodGroup gangs placed whole at Filter (claims, back-off, status) and
the requeuer (fake API).

The e2e suite (tests/e2e/test_k8s_e2e_gangs.py) proves the same against kube-scheduler;
these run everywhere."""

from __future__ import annotations

import time
from typing import Any

import pytest

from k8s_bridge.gangs import GangBook
from k8s_bridge.pipeline import BindError, Pipeline
from k8s_bridge.requeue import ANNOTATION, Requeuer, stranded
from tests.k8s_bridge import k8s_objects as K
from tests.k8s_bridge.k8s_env import cluster, synced_to

GROUP = "scheduling.x-k8s.io/pod-group"
NODES = ["n0", "n1", "n2"]


def objects(members: int = 3, min_member: int = 3) -> list[dict[str, Any]]:
    return ([K.node(n) for n in NODES] + [K.podgroup("g", min_member)]
            + [K.pod(f"g-{i}", gpu=8, labels={GROUP: "g"}) for i in range(members)])


def node_of(fake: Any, name: str) -> str | None:
    return fake.get("v1", "Pod", name, "default")["spec"].get("nodeName")


def claimed(pipeline: Pipeline) -> dict[str, str]:
    """Pod key -> the node claimed for it."""
    return {k: c.node for k, c in pipeline.gangs.claims.items()}


def test_a_gang_that_fits_is_claimed_whole_at_its_first_members_filter():
    with cluster(objects()) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        settled: list[tuple[str, float]] = []
        pipeline.on_gang_settled = lambda outcome, s: settled.append((outcome, s))
        first = pipeline.filter(fake.get("v1", "Pod", "g-1", "default"), NODES)
        assert len(first.nodes) == 1
        claims = claimed(pipeline)
        assert sorted(claims) == ["default/g-0", "default/g-1", "default/g-2"]
        assert sorted(claims.values()) == NODES and claims["default/g-1"] == first.nodes[0]
        assert pipeline.gangs.status("default/g")["phase"] == "Scheduling"
        # each member's Filter keeps its claimed node, its bind binds it there at once
        for i in (0, 2, 1):
            pod = fake.get("v1", "Pod", f"g-{i}", "default")
            assert pipeline.filter(pod, NODES).nodes == [claims[f"default/g-{i}"]]
            pipeline.bind("default", f"g-{i}", None, claims[f"default/g-{i}"])
        assert {f"default/g-{i}": node_of(fake, f"g-{i}") for i in range(3)} == claims
        assert pipeline.gangs.claims == {}
        status = pipeline.gangs.status("default/g")
        assert (status["phase"], status["scheduled"]) == ("Scheduled", 3)
        # the gang wait metric: once, from the admission to the last member's bind
        assert [o for o, _ in settled] == ["bound"] and 0.0 < settled[0][1] < 20.0


def test_a_gang_that_does_not_fit_claims_nothing_and_backs_off():
    with cluster([K.node(n) for n in NODES[:2]] + objects()[3:]) as (fake, kube, model, _):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        pod = fake.get("v1", "Pod", "g-0", "default")
        outcome = pipeline.filter(pod, NODES[:2])
        assert outcome.nodes == [] and set(outcome.failed) == set(NODES[:2])
        reason = outcome.failed["n0"]
        assert "gang default/g does not fit: 2 of the 3 members" in reason
        assert pipeline.gangs.claims == {} and not model.state().placed
        status = pipeline.gangs.status("default/g")
        assert (status["phase"], status["reason"]) == ("Pending", reason)
        # backing off: refused again at once, with the same reason, deciding nothing
        decisions = pipeline.decisions
        for name in ("g-1", "g-0"):
            again = pipeline.filter(fake.get("v1", "Pod", name, "default"), NODES[:2])
            assert again.failed == {"n0": reason, "n1": reason}
        assert pipeline.decisions <= decisions + 2  # (the pods' own decisions, cached)
        assert pipeline.gangs.backoffs["default/g"].failures == 1


def test_a_gangs_back_off_doubles_up_to_its_cap():
    book = GangBook()
    delays = [book.refuse("ns/g", "r", 0, 100.0).until - 100.0 for _ in range(9)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
    assert book.blocked("ns/g", 0, 159.0) == "r"
    assert book.blocked("ns/g", 1, 101.0) is None  # room was made meanwhile: try now
    assert book.blocked("ns/g", 0, 160.0) is None
    assert book.due(159.0) == [] and book.due(160.0) == ["ns/g"] and book.due(161.0) == []
    book.admit("ns/g", "ns/g-0", 100.0)
    assert book.blocked("ns/g", 0, 100.0) is None and book.backoffs == {}


def test_a_backed_off_gang_is_tried_at_once_when_room_is_made():
    with cluster([K.node(n) for n in NODES[:2]] + objects()[3:]) as (fake, kube, model,
                                                                       informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        pod = fake.get("v1", "Pod", "g-0", "default")
        assert pipeline.filter(pod, NODES[:2]).nodes == []
        fake.create(K.node("n2"))  # a third node: the gang fits
        synced_to(fake, informers)
        assert len(pipeline.filter(pod, NODES).nodes) == 1
        assert sorted(claimed(pipeline).values()) == NODES


def test_two_gangs_that_fit_alone_but_not_together_never_share_the_room():
    # 3 nodes, gangs g and h of 2 x 8 GPUs: the first admitted claims 2 nodes, the
    # other is refused whole (it held one node each time before, until both timed out)
    objs = ([K.node(n) for n in NODES] + [K.podgroup("g", 2), K.podgroup("h", 2)]
            + [K.pod(f"{g}-{i}", gpu=8, labels={GROUP: g}) for g in "gh" for i in range(2)])
    with cluster(objs) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        get = lambda name: fake.get("v1", "Pod", name, "default")  # noqa: E731
        assert len(pipeline.filter(get("g-0"), NODES).nodes) == 1
        refused = pipeline.filter(get("h-0"), NODES)
        assert refused.nodes == [] and "gang default/h does not fit" in refused.failed["n0"]
        assert sorted(claimed(pipeline)) == ["default/g-0", "default/g-1"]
        assert pipeline.filter(get("h-1"), NODES).nodes == []
        for name in ("g-0", "g-1"):
            pipeline.bind("default", name, None, pipeline.filter(get(name), NODES).nodes[0])
        assert pipeline.filter(get("h-0"), NODES).nodes == []  # still no room for h
        assert node_of(fake, "h-0") is None and node_of(fake, "h-1") is None


def test_claims_not_bound_in_time_are_released_together():
    with cluster(objects()) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=0.3)
        settled: list[tuple[str, float]] = []
        pipeline.on_gang_settled = lambda outcome, s: settled.append((outcome, s))
        node = pipeline.filter(fake.get("v1", "Pod", "g-0", "default"), NODES).nodes[0]
        pipeline.bind("default", "g-0", None, node)  # one member bound, two not in time
        time.sleep(0.4)
        pipeline.expire_claims()
        assert [o for o, _ in settled] == ["released"] and settled[0][1] >= 0.3
        assert pipeline.gangs.claims == {}
        assert set(model.state().placed) == {"default/g-0"}
        status = pipeline.gangs.status("default/g")
        assert status["phase"] == "Pending" and status["scheduled"] == 1
        assert "2 claimed member(s) not bound within 0.3 s; released" in status["reason"]
        # the rest is placed again as a gang of the two members it still needs
        pod = fake.get("v1", "Pod", "g-1", "default")
        pipeline.gangs.backoffs.clear()
        assert len(pipeline.filter(pod, NODES).nodes) == 1
        assert sorted(claimed(pipeline)) == ["default/g-1", "default/g-2"]


def test_a_bind_elsewhere_than_claimed_or_without_a_claim_is_refused():
    with cluster(objects()) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        with pytest.raises(BindError, match="gang default/g holds no node for default/g-0"):
            pipeline.bind("default", "g-0", None, "n0")  # no Filter ran for its gang
        node = pipeline.filter(fake.get("v1", "Pod", "g-0", "default"), NODES).nodes[0]
        other = next(n for n in NODES if n != node)
        with pytest.raises(BindError, match=f"not the node tdmcore's Filter placed "
                                            f"default/g-0 on \\({node}\\)"):
            pipeline.bind("default", "g-0", None, other)
        assert node_of(fake, "g-0") is None and "default/g-0" in pipeline.gangs.claims
        pipeline.bind("default", "g-0", None, node)
        assert node_of(fake, "g-0") == node


def test_a_gang_is_not_capped_by_threads():
    # 40 members on 5 nodes, bound one after the other: no bind waits for the others
    objs = ([K.node(f"n{i}") for i in range(5)] + [K.podgroup("g", 40)]
            + [K.pod(f"g-{i}", gpu=1, labels={GROUP: "g"}) for i in range(40)])
    with cluster(objs) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        names = [f"n{i}" for i in range(5)]
        for i in range(40):
            node = pipeline.filter(fake.get("v1", "Pod", f"g-{i}", "default"), names).nodes[0]
            pipeline.bind("default", f"g-{i}", None, node)
        assert sum(1 for p in fake.list("v1", "Pod") if p["spec"].get("nodeName")) == 40


def test_the_requeuer_activates_the_claimed_members_and_writes_the_podgroup_status():
    with cluster(objects()) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        requeuer = Requeuer(pipeline, kube, K.SCHEDULER)
        for i in (0, 1):  # kube-scheduler tried these before (e.g. held back)
            pod = fake.get("v1", "Pod", f"g-{i}", "default")
            pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
            fake.update(pod)
        synced_to(fake, informers)
        pipeline.filter(fake.get("v1", "Pod", "g-0", "default"), NODES)  # admits g
        requeuer.activate("default/g")  # (what Filter's on_gang_admitted calls)
        assert requeuer.activate_siblings() == 1  # g-1: claimed, failed before
        meta = {i: fake.get("v1", "Pod", f"g-{i}", "default")["metadata"] for i in range(3)}
        assert ANNOTATION in meta[1]["annotations"]
        # not g-0, being placed now (kube-scheduler would queue it a second time), nor
        # g-2, never tried (on its way)
        assert "annotations" not in meta[0] and "annotations" not in meta[2]
        assert requeuer.write_podgroup_statuses() == 1
        status = fake.get("scheduling.x-k8s.io/v1alpha1", "PodGroup", "g", "default")["status"]
        assert status["phase"] == "Scheduling" and status["scheduled"] == 0
        assert status["scheduleStartTime"].endswith("Z")
        assert requeuer.write_podgroup_statuses() == 0  # unchanged: not written again


def test_requeuer_touches_held_back_members_once_the_gang_is_complete():
    with cluster(objects(members=2)) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=1.0)
        requeuer = Requeuer(pipeline, kube, K.SCHEDULER)
        for i in range(2):
            outcome = pipeline.filter(fake.get("v1", "Pod", f"g-{i}", "default"), NODES)
            assert outcome.nodes == []  # 2 of minMember 3: held back
        assert pipeline.held_back == {"default/g": {"default/g-0", "default/g-1"}}
        assert requeuer.complete_gangs() == 0  # still incomplete
        fake.create(K.pod("g-2", gpu=8, labels={GROUP: "g"}))
        synced_to(fake, informers)
        assert requeuer.complete_gangs() == 2
        for i in range(2):
            annotations = fake.get("v1", "Pod", f"g-{i}", "default")["metadata"]["annotations"]
            assert ANNOTATION in annotations
        assert pipeline.held_back == {}


def test_a_namespace_that_forbids_requeueing_is_said_once_and_left_alone(caplog,
                                                                         monkeypatch):
    """Issue 40: patching pods is granted per namespace (RoleBindings of tdmcore-requeue),
    no longer cluster-wide.  A namespace without the binding answers 403: one WARNING
    naming the fix, no further patch there for DENIED_RETRY_S, then a retry (a binding
    added meanwhile is used)."""
    import k8s_bridge.requeue as requeue

    clock = [1000.0]
    monkeypatch.setattr(requeue.time, "monotonic", lambda: clock[0])
    with cluster([K.node(n) for n in NODES] + [K.pod(f"p{i}") for i in range(3)]) \
            as (fake, kube, model, informers):
        requeuer = Requeuer(Pipeline(model, "metronome", kube), kube, K.SCHEDULER)
        fake.fail_next("PATCH", r"/namespaces/default/pods/p0", status=403)
        with caplog.at_level("WARNING", logger="k8s_bridge.requeue"):
            assert [requeuer.touch(f"default/p{i}") for i in range(3)] == [False] * 3
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and "tdmcore-requeue" in said[0] and "default" in said[0]
        patches = [p for m, p in fake.requests if m == "PATCH"]
        assert len(patches) == 1  # p1 and p2 were not tried
        clock[0] += requeue.DENIED_RETRY_S + 1
        assert requeuer.touch("default/p1") is True
        assert ANNOTATION in fake.get("v1", "Pod", "p1", "default")["metadata"]["annotations"]


@pytest.mark.parametrize("scheduler", [K.SCHEDULER, "default-scheduler"])
def test_a_filter_request_that_lies_about_a_pods_gang_touches_no_pod(scheduler):
    # An operator's review: anyone reaching the extender's port could post a Filter
    # request for a real pending pod with a group label it does not have; the
    # requeuer then checked "complete" on the cached pod (no label: no gang) and
    # patched it.  The cache must agree that the pod is ours and of that gang.
    with cluster([K.node(n) for n in NODES] + [K.pod("p3x", scheduler=scheduler)]) \
            as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=1.0)
        requeuer = Requeuer(pipeline, kube, K.SCHEDULER)
        forged = fake.get("v1", "Pod", "p3x", "default")
        forged["metadata"]["labels"] = {GROUP: "nonexistent"}
        assert pipeline.filter(forged, NODES).nodes == []  # held back: no PodGroup
        assert requeuer.complete_gangs() == 0
        requeuer.activate("default/nonexistent")
        assert requeuer.activate_siblings() == 0
        annotations = fake.get("v1", "Pod", "p3x", "default")["metadata"].get("annotations")
        assert ANNOTATION not in (annotations or {})


@pytest.mark.parametrize(("pod", "expected"), [
    (K.pod("p"), False),  # never tried
    ({**K.pod("p"), "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulerError"}]}}, True),
    ({**K.pod("p", scheduler="default-scheduler"), "status": {"phase": "Pending",
                                                              "conditions": [
        {"type": "PodScheduled", "status": "False"}]}}, False),  # not ours
    ({**K.pod("p", node="n0"), "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False"}]}}, False),  # bound
])
def test_stranded(pod, expected):
    assert stranded(pod, K.SCHEDULER) is expected


def test_base_period_of_an_uncontended_link_with_several_jobs():
    """Two communicating jobs that fit on one link without contention (Reserve exits
    early, the controller plans nothing): basePeriodMs is their unified period, not 0."""
    objs = [K.node("n0"),
            K.podbandwidth("a", period=100, duty=0.1, gbps=5,
                           match={"training.kubeflow.org/job-name": "a"}),
            K.podbandwidth("b", period=200, duty=0.1, gbps=5,
                           match={"training.kubeflow.org/job-name": "b"}),
            K.pod("a-0", labels=K.job_labels("a"), gpu=1),
            K.pod("b-0", labels=K.job_labels("b"), gpu=1)]
    with cluster(objs) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube)
        for name in ("a-0", "b-0"):
            result = pipeline.bind("default", name, None, "n0")
            assert result.base_period_ms == 0.0  # no plan from Reserve
        status = fake.get("tdmcore.io/v1alpha1", "NodeBandwidth", "n0")["status"]
        assert {e["name"] for e in status["pods"]} == {"a-0", "b-0"}
        assert status["basePeriodMs"] == pytest.approx(200.0)


def test_a_job_without_a_podgroup_rejected_by_the_policys_rule_is_told_why():
    # An operator's find (issue 40): a job of two pods without a PodGroup, one pod
    # bound, the other rejected everywhere; the node with room said only "rejected by
    # the policy's Filter".  It is the dependency-loop rule: j-1 on n1 would close the
    # paper's triangle j-n0-k-n2-m-n1-j, whose links carry three different pairs
    # (spec §6, revised 2026-11-28: refused), about the job's placed pod.  The reason
    # is the one Filter gave per node (issue 39), not re-derived by the bridge.
    t = {j: K.job_labels(j) for j in "jkm"}
    objs = ([K.node(n) for n in NODES]
            + [K.podbandwidth(j, period=100, duty=0.3, gbps=15,
                              match={"training.kubeflow.org/job-name": j}) for j in "jkm"]
            + [K.pod("k-0", gpu=3, labels=t["k"], node="n0", phase="Running"),
               K.pod("j-0", gpu=3, labels=t["j"], node="n0", phase="Running"),
               K.pod("x", gpu=2, node="n0", phase="Running"),
               K.pod("k-1", gpu=3, labels=t["k"], node="n2", phase="Running"),
               K.pod("m-0", gpu=3, labels=t["m"], node="n2", phase="Running"),
               K.pod("y", gpu=2, node="n2", phase="Running"),
               K.pod("m-1", gpu=3, labels=t["m"], node="n1", phase="Running"),
               K.pod("j-1", gpu=3, labels=t["j"])])
    with cluster(objs) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        outcome = pipeline.filter(fake.get("v1", "Pod", "j-1", "default"), NODES)
        assert outcome.nodes == []
        reasons = {**outcome.failed, **outcome.unresolvable}
        assert reasons["n0"] == reasons["n2"] == "tdmcore/metronome: Insufficient nvidia.com/gpu"
        assert set(outcome.failed) == set(NODES)  # preemption may help
        assert reasons["n1"] == (
            "tdmcore/metronome: Dependency loop in the affinity graph (its job default/j "
            "has 1 pod(s) placed, on n0: a job is placed whole only as a PodGroup)")
