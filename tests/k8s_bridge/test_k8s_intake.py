"""The bridge reads a job's pods through the Core intake the simulator uses
(:func:`tdmcore.model.gang_pods`): ``gang_size`` from the PodGroup's ``minMember``,
``spread`` from a required pod anti-affinity on the job's label."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from k8s_bridge.cache import ClusterModel
from k8s_bridge.convert import spread_of
from k8s_bridge.pipeline import Pipeline
from tdmcore.framework import Status
from tdmcore.model import TrafficPattern
from tdmcore.sim.cluster import SimJob

from . import k8s_objects as K

JOB = "training.kubeflow.org/job-name"
GROUP = "scheduling.x-k8s.io/pod-group"


def model_of(objs: list[dict[str, Any]]) -> ClusterModel:
    model = ClusterModel()
    for o in objs:
        model.on_event(o["kind"], "ADDED", o)
    return model


def member(name: str, job: str = "j", *, node: str | None = None, spread: bool = False,
           priority: str = "low", rv: str = "1") -> dict[str, Any]:
    labels = {**K.job_labels(job, priority), GROUP: job}
    return K.pod(name, labels=labels, node=node, phase="Running" if node else "Pending",
                 rv=rv, affinity=K.anti_affinity({JOB: job}) if spread else None)


# ------------------------------------------------------------------ spread
@pytest.mark.parametrize("affinity, spread", [
    (K.anti_affinity({JOB: "j"}), True),
    (K.anti_affinity({JOB: "j"}, namespaces=["default"]), True),
    (K.anti_affinity({JOB: "j"}, namespaceSelector={}), True),  # every namespace
    (K.anti_affinity({JOB: "j", "tdmcore.io/priority": "low"}), False),  # not only the job
    (K.anti_affinity({JOB: "other"}), False),  # other pods
    (K.anti_affinity({JOB: "j"}, topology="topology.kubernetes.io/zone"), False),
    (K.anti_affinity({JOB: "j"}, namespaces=["team-b"]), False),
    (K.anti_affinity({JOB: "j"}, namespaceSelector={"matchLabels": {"a": "b"}}), False),
    ({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchExpressions": [{"key": JOB, "operator": "In",
                                                "values": ["j"]}]},
        "topologyKey": "kubernetes.io/hostname"}]}}, True),
    ({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {JOB: "j"}},
                                           "topologyKey": "kubernetes.io/hostname"}}]}},
     False),  # preferred, not required
    ({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {JOB: "j"}},
        "topologyKey": "kubernetes.io/hostname"}]}}, False),  # affinity, not anti
    (None, False),
])
def test_spread_is_a_required_anti_affinity_on_the_jobs_label(affinity, spread) -> None:
    pod = K.pod("j-0", labels=K.job_labels("j"), affinity=affinity)
    assert spread_of(pod) is spread


def test_a_pod_that_is_a_job_of_its_own_has_no_job_label_to_spread_on() -> None:
    pod = K.pod("solo", labels={"app": "x"}, affinity=K.anti_affinity({"app": "x"}))
    assert spread_of(pod) is False


# ------------------------------------------------------------------ gang size
def test_gang_size_is_the_podgroups_min_member_and_follows_it() -> None:
    pods = [member("j-0", node="n0"), member("j-1")]
    model = model_of([K.node("n0"), K.node("n1"), *pods])
    assert model.state().placed["default/j-0"].pod.gang_size is None  # no PodGroup yet
    model.on_event("PodGroup", "ADDED", K.podgroup("j", 2))
    assert model.state().placed["default/j-0"].pod.gang_size == 2
    assert model.domain_pod(pods[1]).gang_size == 2
    # an elastic job grown past minMember: the group's live pods
    model.on_event("Pod", "ADDED", member("j-2"))
    assert model.state().placed["default/j-0"].pod.gang_size == 3
    finished = member("j-2", rv="2")
    finished["status"]["phase"] = "Succeeded"
    model.on_event("Pod", "MODIFIED", finished)
    assert model.state().placed["default/j-0"].pod.gang_size == 2
    model.on_event("PodGroup", "DELETED", K.podgroup("j", 2))
    assert model.state().placed["default/j-0"].pod.gang_size is None


def test_a_complete_gang_on_one_node_puts_nothing_on_its_link() -> None:
    """spec §2: a job wholly on one node is LowComm there -- on a cluster too, now
    that the bridge knows the gang's size."""
    objs = [K.node("n0"), K.podgroup("j", 2),
            K.podbandwidth("bw", period=100, duty=0.5, gbps=20, match={JOB: "j"}),
            member("j-0", node="n0")]
    model = model_of(objs)
    assert model.state().link_rows[0] == ["default/j-0"]  # incomplete: may still spread
    model.on_event("Pod", "ADDED", member("j-1", node="n0"))
    assert model.state().link_rows[0] == []
    assert model.state().job_links("default/j") == {}


def test_both_doors_build_the_same_pods_of_a_job() -> None:
    pattern = TrafficPattern(186.84, 0.3, 20.0)
    sim = SimJob("s3-wrn", "WideResNet101", pattern, workers=2, iterations=10, priority=0,
                 gpu=1, cpu=4, mem_gib=16, spread=True)
    objs = [K.node("n0"), K.node("n1"), K.podgroup("s3-wrn", 2),
            K.podbandwidth("s3-wrn", period=186.84, duty=0.3, gbps=20,
                           match={JOB: "s3-wrn"})]
    pods = [member(f"s3-wrn-w{k}", "s3-wrn", spread=True) for k in range(2)]
    model = model_of(objs + pods)
    bridge = [model.domain_pod(p) for p in pods]
    assert [replace(p, name=p.name.removeprefix("default/"), job="s3-wrn") for p in bridge] \
        == sim.pods()


def test_the_standalone_pipeline_keeps_a_spread_gang_on_distinct_nodes() -> None:
    # n0 is ten times n1: the default policy (least allocated) puts both pods there
    nodes = [K.node("n0", cpu="640", memory="2560Gi"), K.node("n1")]
    plain = [member(f"p-{k}", "p") for k in range(2)]
    decision = Pipeline(model_of([*nodes, K.podgroup("p", 2), *plain]),
                        "default").schedule_gang(plain)
    assert list(decision.placements.values()) == ["n0", "n0"]
    pods = [member(f"j-{k}", spread=True) for k in range(2)]
    decision = Pipeline(model_of([*copy.deepcopy(nodes), K.podgroup("j", 2), *pods]),
                        "default").schedule_gang(pods)
    assert decision.status is Status.SUCCESS
    assert list(decision.placements.values()) == ["n0", "n1"]
