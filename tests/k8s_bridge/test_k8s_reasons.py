"""Filter's per-node reasons reach kube-scheduler as the framework gave them
(issue 39): each rejected node names its own rule, in the words the simulator's
message uses, and the bridge derives none of them."""

from __future__ import annotations

from k8s_bridge.pipeline import Pipeline
from tests.k8s_bridge import k8s_objects as K
from tests.k8s_bridge.k8s_env import cluster

NODES = ["n0", "n1", "n2", "n3"]
HINT = ("(its job default/j has 1 pod(s) placed, on n0: a job is placed whole only as "
        "a PodGroup)")


def test_each_rejected_node_names_its_own_rule() -> None:
    # j's pods keep apart (required anti-affinity on the job's label); j-0 is on n0.
    # n0: anti-affinity; n1: j-1 there closes the paper's triangle j-n0-k-n2-m-n1-j
    # (three links, three different pairs: refused, spec §6); n2: no GPU left; n3
    # fits.  Before, n0 and n1 both read "Dependency loop in the affinity graph or A
    # pod of the job is on the node (anti-affinity)": the reasons' union, re-derived.
    t = {j: K.job_labels(j) for j in "jkm"}
    spread = K.anti_affinity({"training.kubeflow.org/job-name": "j"})
    objs = ([K.node(n) for n in NODES]
            + [K.podbandwidth(j, period=100, duty=0.3, gbps=15,
                              match={"training.kubeflow.org/job-name": j}) for j in "jkm"]
            + [K.pod("k-0", gpu=3, labels=t["k"], node="n0", phase="Running"),
               K.pod("j-0", gpu=3, labels=t["j"], node="n0", phase="Running",
                     affinity=spread),
               K.pod("k-1", gpu=3, labels=t["k"], node="n2", phase="Running"),
               K.pod("m-0", gpu=3, labels=t["m"], node="n2", phase="Running"),
               K.pod("y", gpu=2, node="n2", phase="Running"),
               K.pod("m-1", gpu=3, labels=t["m"], node="n1", phase="Running"),
               K.pod("j-1", gpu=1, labels=t["j"], affinity=spread)])
    with cluster(objs) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube)
        outcome = pipeline.filter(fake.get("v1", "Pod", "j-1", "default"), NODES)
        assert outcome.nodes == ["n3"] and outcome.unresolvable == {}
        assert outcome.failed == {
            "n0": f"tdmcore/metronome: a pod of its job is on the node (anti-affinity) {HINT}",
            "n1": f"tdmcore/metronome: Dependency loop in the affinity graph {HINT}",
            "n2": "tdmcore/metronome: Insufficient nvidia.com/gpu"}


def test_exclusive_names_the_link_bandwidth_per_node() -> None:
    # exclusive's own rule (the link's free bandwidth) on the nodes with room, the
    # resources on the full one.  Before, the nodes with room read the whole
    # decision's message ("0/3 nodes are available: ...") as their reason.
    t = {j: K.job_labels(j) for j in "ab"}
    objs = ([K.node(n) for n in NODES[:3]]
            + [K.podbandwidth(j, period=100, duty=0.3, gbps=15,
                              match={"training.kubeflow.org/job-name": j}) for j in "ab"]
            + [K.pod("a-0", gpu=1, labels=t["a"], node="n0", phase="Running"),
               K.pod("a-1", gpu=1, labels=t["a"], node="n1", phase="Running"),
               K.pod("x", gpu=8, node="n2", phase="Running"),
               K.pod("b-0", gpu=1, labels=t["b"])])
    with cluster(objs) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "exclusive", kube)
        outcome = pipeline.filter(fake.get("v1", "Pod", "b-0", "default"), NODES[:3])
        assert outcome.nodes == []
        assert outcome.failed == {"n0": "tdmcore/exclusive: Insufficient link bandwidth",
                                  "n1": "tdmcore/exclusive: Insufficient link bandwidth",
                                  "n2": "tdmcore/exclusive: Insufficient nvidia.com/gpu"}


def test_a_gang_held_back_is_told_in_the_frameworks_gang_reason() -> None:
    # before: the bare "PodGroup default/g has 1 of minMember 2 pods", naming no rule
    labels = {**K.job_labels("g"), "scheduling.x-k8s.io/pod-group": "g"}
    objs = ([K.node(n) for n in NODES[:2]] + [K.podgroup("g", 2),
            K.podbandwidth("g", period=100, duty=0.3, gbps=15,
                           match={"training.kubeflow.org/job-name": "g"}),
            K.pod("g-0", gpu=1, labels=labels)])
    with cluster(objs) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=20.0)
        outcome = pipeline.filter(fake.get("v1", "Pod", "g-0", "default"), NODES[:2])
        assert outcome.nodes == [] and outcome.failed == dict.fromkeys(
            NODES[:2], "tdmcore/metronome: gang not placeable whole (Eqs. 11-12): PodGroup "
                       "default/g has 1 of minMember 2 pods")
