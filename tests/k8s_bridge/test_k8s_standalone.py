"""Standalone mode: our pods bound by the same pipeline, PodGroups as gangs."""

from __future__ import annotations

from typing import Any

import pytest

from k8s_bridge.pipeline import Pipeline
from k8s_bridge.standalone import StandaloneScheduler
from tdmcore.framework import Status
from tests.k8s_bridge import k8s_objects as K
from tests.k8s_bridge.k8s_env import cluster, synced_to

NBW = "tdmcore.io/v1alpha1"


def base() -> list[dict[str, Any]]:
    return [K.node("n0"), K.node("n1"),
            K.podbandwidth("t", period=100, duty=0.5, gbps=20,
                           match={"scheduling.x-k8s.io/pod-group": "train"})]


def member(i: int, gpu: int = 4, group: str = "train") -> dict[str, Any]:
    return K.pod(f"{group}-{i}", gpu=gpu, labels={"scheduling.x-k8s.io/pod-group": group},
                 created=f"2026-11-20T00:00:0{i}Z")


def node_of(fake, name: str) -> str | None:
    return fake.get("v1", "Pod", name, "default")["spec"].get("nodeName")


def test_gang_waits_for_min_member_then_binds_all():
    objs = base() + [K.podgroup("train", 3), member(0), member(1)]
    with cluster(objs) as (fake, kube, model, informers):
        sched = StandaloneScheduler(Pipeline(model, "metronome", kube), K.SCHEDULER)
        assert sched.run_once() == []  # 2 of minMember 3: wait
        assert node_of(fake, "train-0") is None
        fake.create(member(2))
        synced_to(fake, informers)
        [(gang, decision)] = sched.run_once()
        assert decision.status is Status.SUCCESS
        assert {node_of(fake, f"train-{i}") for i in range(3)} <= {"n0", "n1"}
        assert all(node_of(fake, f"train-{i}") for i in range(3))
        # the placement is recorded for the controller
        recorded = [e["name"] for nbw in fake.list(NBW, "NodeBandwidth")
                    for e in nbw["status"]["pods"]]
        assert sorted(recorded) == ["train-0", "train-1", "train-2"]
        synced_to(fake, informers)
        assert sched.run_once() == []  # nothing pending any more


def test_gang_that_does_not_fit_binds_nothing():
    objs = base() + [K.podgroup("train", 5)] + [member(i) for i in range(5)]
    with cluster(objs) as (fake, kube, model, informers):
        sched = StandaloneScheduler(Pipeline(model, "metronome", kube), K.SCHEDULER)
        before = model.state().copy()
        [(_, decision)] = sched.run_once()  # 5 x 4 GPUs > 2 x 8 GPUs
        assert decision.status is Status.UNSCHEDULABLE
        assert all(node_of(fake, f"train-{i}") is None for i in range(5))
        assert model.state().same_as(before)
        assert fake.list(NBW, "NodeBandwidth") == []
        assert sched.run_once() == []  # backed off until the cluster changes


def test_group_without_podgroup_waits_and_others_are_ignored():
    objs = base() + [member(0, group="nogroup"),
                     K.pod("default-sched", scheduler="default-scheduler"),
                     K.pod("solo", gpu=2)]
    with cluster(objs) as (fake, kube, model, informers):
        sched = StandaloneScheduler(Pipeline(model, "metronome", kube), K.SCHEDULER)
        [(gang, decision)] = sched.run_once()
        assert gang.key == "pod:default/solo" and decision.status is Status.SUCCESS
        assert node_of(fake, "solo") == "n0"
        assert node_of(fake, "nogroup-0") is None
        assert node_of(fake, "default-sched") is None


def test_binding_failure_midway_is_reported_and_reread():
    objs = base() + [K.podgroup("train", 2), member(0), member(1)]
    with cluster(objs) as (fake, kube, model, informers):
        sched = StandaloneScheduler(Pipeline(model, "metronome", kube), K.SCHEDULER)
        fake.fail_next("POST", r"pods/train-1/binding", status=500)
        [(_, decision)] = sched.run_once()
        assert decision.status is Status.ERROR and "500" in decision.message
        assert node_of(fake, "train-0") is not None  # bindings are not transactional
        synced_to(fake, informers)
        assert "default/train-0" in model.state().placed
        assert "default/train-1" not in model.state().placed


def test_scheduler_name_required():
    with cluster(base()) as (_, kube, model, _):
        with pytest.raises(ValueError, match="scheduler_name"):
            StandaloneScheduler(Pipeline(model, "metronome", kube), "")
        with pytest.raises(ValueError, match="^queue: expected one of backoff, fifo"):
            StandaloneScheduler(Pipeline(model, "metronome", kube), K.SCHEDULER, queue="lifo")


def _big_and_small() -> list[dict]:
    big = [K.pod(f"big-{i}", gpu=8, labels={"scheduling.x-k8s.io/pod-group": "big"},
                 created="2026-11-20T00:00:00Z") for i in range(3)]  # 24 GPUs > 16
    return base() + [K.podgroup("big", 3), *big,
                     K.pod("small", gpu=1, created="2026-11-20T00:00:09Z")]


def test_a_gang_that_does_not_fit_backs_off_and_younger_ones_are_placed():
    # the default, as kube-scheduler with coscheduling and the simulator's default queue
    # (a review, 2026-11-24: one pod that could never fit stalled every later pod)
    with cluster(_big_and_small()) as (fake, kube, model, informers):
        sched = StandaloneScheduler(Pipeline(model, "metronome", kube), K.SCHEDULER)
        decided = sched.run_once()
        assert [(g.key, d.status) for g, d in decided] == [
            ("default/big", Status.UNSCHEDULABLE), ("pod:default/small", Status.SUCCESS)]
        synced_to(fake, informers)
        assert node_of(fake, "small") is not None
        # small's binding changed the cluster: big is retried once, then backs off
        assert [(g.key, d.status) for g, d in sched.run_once()] == [
            ("default/big", Status.UNSCHEDULABLE)]
        assert sched.run_once() == []


def test_with_queue_fifo_the_oldest_gang_that_does_not_fit_blocks_younger_ones():
    # strict head-of-line order, as the simulator's queue="fifo"
    with cluster(_big_and_small()) as (fake, kube, model, informers):
        sched = StandaloneScheduler(Pipeline(model, "metronome", kube), K.SCHEDULER,
                                    queue="fifo")
        decided = sched.run_once()
        assert [g.key for g, _ in decided] == ["default/big"]
        assert node_of(fake, "small") is None
        # the head goes away: the small pod is next
        for i in range(3):
            fake.delete("v1", "Pod", f"big-{i}", "default")
        synced_to(fake, informers)
        [(gang, decision)] = sched.run_once()
        assert gang.key == "pod:default/small" and decision.status is Status.SUCCESS


def _events(fake) -> list[tuple[str, str, str]]:
    return sorted((e["involvedObject"]["name"], e["reason"], e["message"])
                  for e in fake.list("v1", "Event", "default"))


def test_events_as_kube_scheduler_records_them_and_one_warning_per_refused_pod(caplog):
    """An operator's review (2026-11-24): the standalone scheduler recorded no Event,
    so `kubectl describe pod` said nothing of a pod it placed or could not place, and
    a pod with a bad priority label logged two WARNINGs every 0.5 s pass (994 lines
    in 4 minutes).  Now: Scheduled for each member bound, FailedScheduling with the
    reason once per pod and reason, one WARNING per gang and reason, and the pods
    behind a refused one are still placed."""
    objs = base() + [K.pod("odd", labels={"tdmcore.io/priority": "urgent"},
                           created="2026-11-20T00:00:00Z"),
                     K.pod("huge", gpu=16, created="2026-11-20T00:00:01Z"),
                     K.pod("fine", gpu=2, created="2026-11-20T00:00:02Z")]
    with cluster(objs) as (fake, kube, model, informers):
        sched = StandaloneScheduler(Pipeline(model, "metronome", kube), K.SCHEDULER,
                                    retry_s=0.0)
        with caplog.at_level("WARNING", logger="k8s_bridge"):
            for _ in range(4):
                sched.run_once()
                synced_to(fake, informers)
        assert node_of(fake, "fine") and not node_of(fake, "odd") and not node_of(fake, "huge")
        events = _events(fake)
        assert [e[:2] for e in events] == [("fine", "Scheduled"), ("huge", "FailedScheduling"),
                                           ("odd", "FailedScheduling")]
        assert events[0][2] == f"Successfully assigned default/fine to {node_of(fake, 'fine')}"
        assert "tdmcore.io/priority" in events[2][2] and "urgent" in events[2][2]
        warned = [r.getMessage() for r in caplog.records if "default/odd" in r.getMessage()]
        assert len(warned) == 1 and "tdmcore.io/priority" in warned[0]
        # the reason changes (another bad value): one more Event and one more WARNING
        fixed = fake.get("v1", "Pod", "odd", "default")
        fixed["metadata"]["labels"]["tdmcore.io/priority"] = "medium"
        fake.update(fixed)
        synced_to(fake, informers)
        with caplog.at_level("WARNING", logger="k8s_bridge"):
            sched.run_once()
        assert len([e for e in _events(fake) if e[0] == "odd"]) == 2
        assert len([r for r in caplog.records if "default/odd" in r.getMessage()]) == 2


def test_a_gang_that_does_not_fit_or_binds_in_part_gets_the_events_of_what_happened():
    """A review (2026-11-24): Events were taken from the decision's placements, which
    hold a trial plan when the gang does not fit and the whole plan when a binding
    failed midway, so members got no Event, or a Scheduled one for a pod not bound."""
    objs = base() + [K.podgroup("train", 3)] + [member(i, gpu=8) for i in range(3)]
    with cluster(objs) as (fake, kube, model, informers):
        sched = StandaloneScheduler(Pipeline(model, "metronome", kube), K.SCHEDULER)
        [(_, decision)] = sched.run_once()  # 3 x 8 GPUs on 2 x 8: the first two fit
        assert decision.status is Status.UNSCHEDULABLE and decision.placements
        assert [e[:2] for e in _events(fake)] == [
            (f"train-{i}", "FailedScheduling") for i in range(3)]
    objs = base() + [K.podgroup("train", 2), member(0), member(1)]
    with cluster(objs) as (fake, kube, model, informers):
        sched = StandaloneScheduler(Pipeline(model, "metronome", kube), K.SCHEDULER)
        fake.fail_next("POST", r"pods/train-1/binding", status=500)
        [(_, decision)] = sched.run_once()
        assert decision.status is Status.ERROR and len(decision.placements) == 2
        events = _events(fake)
        assert [e[:2] for e in events] == [("train-0", "Scheduled"),
                                           ("train-1", "FailedScheduling")]
        node = node_of(fake, "train-0")
        assert events[0][2] == f"Successfully assigned default/train-0 to {node}"
        assert "500" in events[1][2]


def test_a_refused_gang_is_not_tried_again_until_it_or_the_cluster_changes():
    objs = base() + [K.pod("odd", labels={"tdmcore.io/priority": "urgent"})]
    with cluster(objs) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube)
        sched = StandaloneScheduler(pipeline, K.SCHEDULER)
        calls = []
        real = pipeline.schedule_gang
        pipeline.schedule_gang = lambda pods: calls.append(1) or real(pods)  # type: ignore
        for _ in range(3):
            sched.run_once()
        assert len(calls) == 1  # refused once, then skipped: nothing changed
        fake.create(K.node("n2"))  # the cluster changes: tried again
        synced_to(fake, informers)
        sched.run_once()
        assert len(calls) == 2
        odd = fake.get("v1", "Pod", "odd", "default")
        odd["metadata"]["labels"]["tdmcore.io/priority"] = "high"  # fixed
        fake.update(odd)
        synced_to(fake, informers)
        sched.run_once()
        assert len(calls) == 3 and node_of(fake, "odd")
