"""Extender mode: the bind-time permit of PodGroup gangs and the requeuer (fake API).

The e2e suite (tests/e2e/test_k8s_e2e_gangs.py) proves the same against kube-scheduler;
these run everywhere."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from k8s_bridge.pipeline import BindError, Pipeline
from k8s_bridge.requeue import ANNOTATION, Requeuer, stranded
from tests.k8s_bridge import k8s_objects as K
from tests.k8s_bridge.k8s_env import cluster, synced_to, wait_for

GROUP = "scheduling.x-k8s.io/pod-group"
NODES = ["n0", "n1", "n2"]


def objects(members: int = 3, min_member: int = 3) -> list[dict[str, Any]]:
    return ([K.node(n) for n in NODES] + [K.podgroup("g", min_member)]
            + [K.pod(f"g-{i}", gpu=8, labels={GROUP: "g"}) for i in range(members)])


def bind_async(pipeline: Pipeline, name: str, node: str,
               out: dict[str, BaseException | None]) -> threading.Thread:
    def run() -> None:
        try:
            pipeline.bind("default", name, None, node)
            out[name] = None
        except BaseException as exc:  # noqa: BLE001 - recorded for the test
            out[name] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def node_of(fake: Any, name: str) -> str | None:
    return fake.get("v1", "Pod", name, "default")["spec"].get("nodeName")


def test_members_wait_at_bind_until_the_gang_is_complete():
    with cluster(objects()) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        settled: list[tuple[str, float]] = []
        pipeline.on_gang_settled = lambda outcome, s: settled.append((outcome, s))
        out: dict[str, BaseException | None] = {}
        first = [bind_async(pipeline, f"g-{i}", NODES[i], out) for i in range(2)]
        wait_for(lambda: len(pipeline._gangs.get("default/g", [])) == 2, 10,
                 "two members waiting")
        assert node_of(fake, "g-0") is None and node_of(fake, "g-1") is None
        # the waiting members' nodes are reserved: the third one fits only on n2
        assert pipeline.filter(fake.get("v1", "Pod", "g-2", "default"), NODES).nodes == ["n2"]
        last = bind_async(pipeline, "g-2", "n2", out)
        for thread in [*first, last]:
            thread.join(10)
        assert out == {"g-0": None, "g-1": None, "g-2": None}
        assert [node_of(fake, f"g-{i}") for i in range(3)] == NODES
        # the gang wait metric: once, from the first member's wait to the last's bind
        assert [o for o, _ in settled] == ["bound"] and 0.0 < settled[0][1] < 20.0


def test_an_incomplete_gang_is_released_whole_at_its_deadline():
    with cluster(objects()) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=1.0)
        settled: list[tuple[str, float]] = []
        pipeline.on_gang_settled = lambda outcome, s: settled.append((outcome, s))
        out: dict[str, BaseException | None] = {}
        threads = [bind_async(pipeline, f"g-{i}", NODES[i], out) for i in range(2)]
        for thread in threads:
            thread.join(10)
        assert set(out) == {"g-0", "g-1"}
        assert [o for o, _ in settled] == ["released"] and settled[0][1] >= 1.0
        for name in out:
            assert isinstance(out[name], BindError), out
            assert out[name].reason == "gang_timeout"  # type: ignore[union-attr]
            assert "of minMember 3" in str(out[name]) and "released" in str(out[name])
            assert node_of(fake, name) is None
        assert pipeline._gangs == {}
        # released: every node is free again for the gang
        pod = fake.get("v1", "Pod", "g-2", "default")
        assert pipeline.filter(pod, NODES).nodes == NODES


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


def test_a_gang_larger_than_the_binds_that_can_wait_is_refused_whole_and_at_once():
    # Each waiting bind holds a web-server thread: with room for 1 waiting bind, a
    # gang of 3 could never complete (it cycled until its deadline, forever).
    with cluster(objects()) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        pipeline.max_waiting_binds = 1
        with pytest.raises(BindError, match=r"minMember 3 is more than the extender can hold "
                                            r"waiting at once \(1 binds.*raise --threads"):
            pipeline.bind("default", "g-0", None, "n0")
        assert pipeline._gangs == {} and node_of(fake, "g-0") is None
        pipeline.max_waiting_binds = None  # (Filter would refuse the gang up front)
        pod = fake.get("v1", "Pod", "g-0", "default")
        assert pipeline.filter(pod, NODES).nodes == NODES  # its reservation is gone


def two_of_g_waiting(model: Any, kube: Any, room: int
                     ) -> tuple[Pipeline, dict[str, BaseException | None], list[threading.Thread]]:
    """A pipeline with ``room`` for waiting binds, and g-0, g-1 waiting at bind."""
    pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
    pipeline.max_waiting_binds = room
    out: dict[str, BaseException | None] = {}
    first = [bind_async(pipeline, f"g-{i}", NODES[i], out) for i in range(2)]
    wait_for(lambda: len(pipeline._gangs.get("default/g", [])) == 2, 10, "two members waiting")
    return pipeline, out, first


def test_a_gang_of_one_more_than_the_waiting_binds_completes():
    with cluster(objects()) as (fake, kube, model, informers):
        pipeline, out, first = two_of_g_waiting(model, kube, room=2)
        last = bind_async(pipeline, "g-2", "n2", out)
        for thread in [*first, last]:
            thread.join(10)
        assert out == {"g-0": None, "g-1": None, "g-2": None}


def two_gangs(g: int, h: int) -> list[dict[str, Any]]:
    """The nodes and two gangs of 1-GPU pods, g-* and h-*, of these sizes."""
    return ([K.node(n) for n in NODES] + [K.podgroup("g", g), K.podgroup("h", h)]
            + [K.pod(f"g-{i}", gpu=1, labels={GROUP: "g"}) for i in range(g)]
            + [K.pod(f"h-{i}", gpu=1, labels={GROUP: "h"}) for i in range(h)])


def test_a_member_that_would_wait_beyond_the_room_left_is_released():
    # two gangs of 3 with room for 2 waiting binds: the first gang holds both; the
    # second gang's first member is refused at once (kube-scheduler retries it)
    with cluster(two_gangs(3, 3)) as (fake, kube, model, informers):
        pipeline, out, first = two_of_g_waiting(model, kube, room=2)
        with pytest.raises(BindError, match=r"leave room for 0 of the 2 binds it would hold"):
            pipeline.bind("default", "h-0", None, "n0")
        assert node_of(fake, "h-0") is None
        last = bind_async(pipeline, "g-2", "n2", out)  # completing needs no room
        for thread in [*first, last]:
            thread.join(10)
        assert out == {"g-0": None, "g-1": None, "g-2": None}


def test_a_waiting_gang_keeps_its_room_against_a_gang_that_arrives_later():
    # A reviewer's find (2026-11-25): with the room counted in waiting binds, two
    # gangs arriving interleaved could each fill part of it and both time out, again
    # and again.  An admitted gang holds minMember - 1 binds' room until it binds.
    with cluster(two_gangs(3, 2)) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        pipeline.max_waiting_binds = 2
        out: dict[str, BaseException | None] = {}
        first = bind_async(pipeline, "g-0", "n0", out)  # g holds 2 binds' room
        wait_for(lambda: len(pipeline._gangs.get("default/g", [])) == 1, 10, "g-0 waiting")
        with pytest.raises(BindError, match=r"leave room for 0 of the 1 binds"):
            pipeline.bind("default", "h-0", None, "n1")  # would take g's second place
        rest = [bind_async(pipeline, f"g-{i}", NODES[i], out) for i in (1, 2)]
        for thread in [first, *rest]:
            thread.join(10)
        assert out == {"g-0": None, "g-1": None, "g-2": None}


def test_filter_says_a_gang_too_large_to_bind_is_unschedulable():
    with cluster(objects()) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        pipeline.max_waiting_binds = 1
        outcome = pipeline.filter(fake.get("v1", "Pod", "g-0", "default"), NODES)
        assert outcome.nodes == [] and outcome.failed == {}
        assert set(outcome.unresolvable) == set(NODES)
        assert all("minMember 3 is more than the extender can hold" in r
                   for r in outcome.unresolvable.values())
        pipeline.max_waiting_binds = 2  # room for it: Filter places it as before
        assert pipeline.filter(fake.get("v1", "Pod", "g-0", "default"), NODES).nodes == NODES
