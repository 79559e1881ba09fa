"""Elastic policies over the API: PyTorchJob / TFJob replica counts patched."""

from __future__ import annotations

import time
from typing import Any

import pytest

from k8s_bridge.elastic import ElasticController, tracked_job
from k8s_bridge.informer import Informer
from tests.k8s_bridge import k8s_objects as K
from tests.k8s_bridge.k8s_env import cluster, synced_to

KF = "kubeflow.org/v1"


def template(gpu: int) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "pytorch", "image": "x",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpu)},
                                                   "requests": {"cpu": "2",
                                                                "memory": "8Gi"}}}]}}


def pytorchjob(name: str, workers: int, lo: int, hi: int, **notes: str) -> dict[str, Any]:
    annotations = {"tdmcore.io/elastic-model": "ResNet50", "tdmcore.io/steps": "1000"}
    annotations.update(notes)
    return {"apiVersion": KF, "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations,
                         "creationTimestamp": "2026-11-20T00:00:00Z"},
            "spec": {"elasticPolicy": {"minReplicas": lo, "maxReplicas": hi},
                     "pytorchReplicaSpecs": {
                         "Master": {"replicas": 1, "template": template(1)},
                         "Worker": {"replicas": workers, "template": template(1)}}}}


def job_pod(job: str, role: str, k: int, node: str) -> dict[str, Any]:
    labels = {"training.kubeflow.org/job-name": job,
              "training.kubeflow.org/replica-type": role}
    return K.pod(f"{job}-{role}-{k}", labels=labels, gpu=1, cpu="2", memory="8Gi",
                 node=node, phase="Running")


def start(fake, kube, model, policy="dragon") -> tuple[ElasticController, list[Informer]]:
    ctrl = ElasticController(model, kube, policy)
    infs = [Informer(kube, kind, ctrl.on_event, watch_timeout_s=5).start()
            for kind in ("PyTorchJob", "TFJob")]
    for inf in infs:
        assert inf.synced.wait(5)
    return ctrl, infs


T0 = 1_800_000_000.0  # wall-clock seconds of the controller's first decision


def test_dragon_scales_a_running_job_up_to_max_workers():
    objs = [K.node("n0"), K.node("n1"), pytorchjob("resnet", 2, 1, 4),
            job_pod("resnet", "master", 0, "n0"), job_pod("resnet", "worker", 0, "n0"),
            job_pod("resnet", "worker", 1, "n0")]
    with cluster(objs) as (fake, kube, model, _):
        ctrl, infs = start(fake, kube, model)
        try:
            # the controller's start counts as the last scheduling action: scale-up
            # waits mu (60 s) from it, as it does from the simulator's t = 0
            assert ctrl.step(T0) == []
            assert ctrl.step(T0 + 59.0) == []
            plans = ctrl.step(T0 + 60.0)
            assert [p.action for p in plans] == ["scale_up"]
            job = fake.get(KF, "PyTorchJob", "resnet", "default")
            assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
            assert ctrl.patches == 1
            synced_to(fake, infs)
            ctrl.step(T0 + 200.0)  # nothing new: the same count is not written again
            assert ctrl.patches == 1
        finally:
            for inf in infs:
                inf.stop()


@pytest.mark.parametrize("policy", ["dragon", "kod2", "weighted"])
def test_a_job_that_comes_or_goes_keeps_the_policys_state(policy):
    # A review found every change of the tracked jobs reset the policy: DRAGON's
    # last action went back to 0 (scale-up at once on any arrival), KOD2 forgot
    # raised weights, the weighted scheduler its queue.
    objs = [K.node("n0"), pytorchjob("resnet", 2, 1, 4),
            job_pod("resnet", "master", 0, "n0"), job_pod("resnet", "worker", 0, "n0"),
            job_pod("resnet", "worker", 1, "n0")]
    with cluster(objs) as (fake, kube, model, _):
        ctrl, infs = start(fake, kube, model, policy)
        t0 = time.time()  # the fake API server stamps a job's creation with its clock
        try:
            ctrl.step(t0)
            pol: Any = ctrl.policy
            if policy == "dragon":
                assert pol.last_action_s == t0
            elif policy == "kod2":
                pol.raised["resnet"] = 7.0  # as if it had starved before it started
            else:
                pol.seen.add("resnet")  # queued once, before it started
            fake.create(pytorchjob("huge", 9, 9, 9))  # fits nowhere: nothing starts
            synced_to(fake, infs)
            ctrl.step(t0 + 20.0)  # before it is urgent (30 s) and before mu (60 s)
            assert "huge" in pol.jobs
            if policy == "dragon":
                assert pol.last_action_s == t0  # not 0: no scale-up 20 s after start
            elif policy == "kod2":
                assert pol.raised["resnet"] == 7.0
            else:
                assert pol.queue == ["huge"] and pol.seen == {"resnet", "huge"}
            fake.delete(KF, "PyTorchJob", "huge", "default")
            synced_to(fake, infs)
            ctrl.step(t0 + 25.0)
            assert "huge" not in pol.jobs
            if policy == "kod2":
                assert pol.raised == {"resnet": 7.0} and "huge" not in pol.base
            elif policy == "weighted":
                assert "huge" not in pol.queue and "huge" not in pol.seen
        finally:
            for inf in infs:
                inf.stop()


def test_waiting_job_is_started_with_a_size():
    objs = [K.node("n0"), pytorchjob("fresh", 3, 2, 6)]
    with cluster(objs) as (fake, kube, model, _):
        ctrl, infs = start(fake, kube, model)
        try:
            plans = ctrl.step()
            assert [p.action for p in plans] == ["start"]
            job = fake.get(KF, "PyTorchJob", "fresh", "default")
            # AFCFS starts it with its requested 3 workers (they fit on 8 GPUs)
            assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
        finally:
            for inf in infs:
                inf.stop()


def test_jobs_without_annotations_are_left_alone():
    plain = pytorchjob("plain", 2, 1, 4)
    del plain["metadata"]["annotations"]
    assert tracked_job(plain, "plain") is None
    objs = [K.node("n0"), plain]
    with cluster(objs) as (fake, kube, model, _):
        ctrl, infs = start(fake, kube, model)
        try:
            assert ctrl.step() == []
            assert fake.get(KF, "PyTorchJob", "plain", "default")["spec"][
                "pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
        finally:
            for inf in infs:
                inf.stop()


@pytest.mark.parametrize(("notes", "needle"), [
    ({"tdmcore.io/elastic-model": "GPT5"}, "elastic-model"),
    ({"tdmcore.io/steps": "-3"}, "steps"),
    ({"tdmcore.io/steps": "many"}, "steps"),
    ({"tdmcore.io/utility": "1,2"}, "utility"),
])
def test_malformed_annotations_name_the_field(notes, needle):
    with pytest.raises(ValueError, match=needle):
        tracked_job(pytorchjob("bad", 2, 1, 4, **notes), "bad")


def test_tfjob_bounds_from_annotations():
    tf = pytorchjob("tf", 2, 1, 4, **{"tdmcore.io/min-workers": "2",
                                      "tdmcore.io/max-workers": "5"})
    tf["kind"] = "TFJob"
    tf["spec"] = {"tfReplicaSpecs": {"PS": {"replicas": 2, "template": template(0)},
                                      "Worker": {"replicas": 3, "template": template(1)}}}
    job = tracked_job(tf, "tf")
    assert job is not None
    assert (job.spec.min_workers, job.spec.max_workers, job.spec.n_ps) == (2, 5, 2)
    assert job.spec.worker.gpu == 1 and job.spec.ps.gpu == 0
