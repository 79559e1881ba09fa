"""Filter decides (the extender's default): the same placements as the library.

The extender's default mode answers Filter with the policy's pick alone, claims that
node for the pod, and lets kube-scheduler's own binder bind it (the shipped
configuration has no prioritize or bind verb).  It is the faster path; these tests are
the proof that it is equivalent:

* pod after pod, it places exactly where :meth:`tdmcore.framework.Scheduler.schedule`
  (the library, the simulator's scheduler) places the same pods on the same cluster;
* every pick is a node of the top score of the other mode's Prioritize (so the other
  mode, kube-scheduler adding its in-tree scores to the extender's, could place it
  there too, and does whenever those scores tie).
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from k8s_bridge.pipeline import Pipeline
from tdmcore.framework import Scheduler
from tdmcore.metronome.policies import make_policy
from tests.k8s_bridge import k8s_objects as K
from tests.k8s_bridge.k8s_env import cluster, synced_to

JOB = "training.kubeflow.org/job-name"


def workload(seed: int) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Nodes (some with 10 Gbps links), PodBandwidths and pending pods of 5 jobs (high
    and low priority, 1-4 GPUs), in an interleaved order; and the node names."""
    rng = random.Random(seed)
    nodes = [f"n{i}" for i in range(8)]
    objs: list[dict[str, Any]] = [K.node(n) for n in nodes]
    objs += [K.nodebandwidth(n, "10G") for n in rng.sample(nodes, 3)]
    pods = []
    for j in range(5):
        job = f"j{j}"
        objs.append(K.podbandwidth(job, period=rng.choice([50, 100, 150, 200]),
                                   duty=rng.choice([0.2, 0.3, 0.5]), gbps=rng.choice([5, 8, 15]),
                                   match={JOB: job}))
        gpu = rng.randint(1, 4)
        priority = "high" if j == 0 else "low"
        for i in range(rng.randint(2, 5)):
            objs.append(K.pod(f"{job}-{i}", gpu=gpu, labels=K.job_labels(job, priority)))
            pods.append(f"{job}-{i}")
    rng.shuffle(pods)
    return objs, nodes, pods


@pytest.mark.parametrize("seed", range(6))
def test_filter_decides_places_as_the_library_does_on_a_top_scored_node(seed: int) -> None:
    objs, nodes, order = workload(seed)
    with cluster(objs) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=30.0)
        pipeline.filter_decides = True
        library = Scheduler(make_policy("metronome"))
        state = model.state().copy()
        placed = 0
        for name in order:
            pod_json = fake.get("v1", "Pod", name, "default")
            expected = library.schedule(state, model.domain_pod(pod_json)).node_name
            scores = dict(pipeline.prioritize(pod_json, nodes))  # the other mode's scores
            kept = pipeline.filter(pod_json, nodes)
            if expected is None:
                assert kept.nodes == [], (name, kept)
                continue
            assert kept.nodes == [expected], (seed, name, kept.nodes, expected)
            feasible = [n for n in nodes if n not in kept.failed and n not in kept.unresolvable]
            assert scores[expected] == max(scores[n] for n in feasible), (name, scores)
            # kube-scheduler's own binder binds it (no bind verb); the watch confirms
            kube.bind("default", name, pod_json["metadata"]["uid"], expected)
            synced_to(fake, informers)
            pipeline.expire_claims()
            assert pipeline.gangs.claims == {}
            placed += 1
        assert placed >= len(order) // 2
        # the claims were confirmed and recorded as a bind would record them
        recorded = {e["name"] for n in nodes
                    for e in ((fake.get("tdmcore.io/v1alpha1", "NodeBandwidth", n) or {})
                              .get("status") or {}).get("pods") or []}
        bound = {p["metadata"]["name"] for p in fake.list("v1", "Pod")
                 if p["spec"].get("nodeName")}
        assert recorded == bound


def test_a_pod_filtered_before_the_watch_delivers_it_is_claimed_and_recorded() -> None:
    """kube-scheduler's informer can deliver a new pod, and its Filter reach the
    extender, before the extender's own Pod watch delivers it (seen on the e2e under
    load: the Filter 2 ms ahead of the ADDED event).  Filter reads such a pod from the
    API, as bind does, and claims its node; the watch then confirms the claim and the
    node's NodeBandwidth records the pod.  Without the read the pod went unclaimed
    (nothing assumed it, so another pod's Filter could take its GPUs) and, bound by
    kube-scheduler's own binder, was recorded by nothing."""
    objs: list[dict[str, Any]] = [K.node("n0"), K.node("n1"),
                                  K.podbandwidth("j", period=100, duty=0.4, gbps=10,
                                                 match={JOB: "j"})]
    with cluster(objs) as (fake, kube, model, informers):
        pipeline = Pipeline(model, "metronome", kube, gang_wait_s=30.0)
        pipeline.filter_decides = True
        pods = next(i for i in informers if i.kind == "Pod")
        deliver = pods.handler
        assert deliver is not None
        held: list[tuple[str, str, dict[str, Any]]] = []
        lagging = threading.Event()
        lagging.set()

        def lag(kind: str, event: str, obj: dict[str, Any]) -> None:
            if lagging.is_set():
                held.append((kind, event, obj))
            else:
                deliver(kind, event, obj)

        pods.handler = lag
        created = fake.create(K.pod("j-0", gpu=2, labels=K.job_labels("j", "high")))
        synced_to(fake, informers)
        assert held and "default/j-0" not in model.objects["Pod"]  # the watch lags
        kept = pipeline.filter(created, ["n0", "n1"])
        assert len(kept.nodes) == 1
        node = kept.nodes[0]
        assert pipeline.gangs.claims["default/j-0"].node == node  # claimed...
        assert model.assumed_on("default/j-0") == node  # ...and its GPUs taken
        lagging.clear()  # the watch catches up, then kube-scheduler's binder binds
        for kind, event, obj in held:
            deliver(kind, event, obj)
        kube.bind("default", "j-0", created["metadata"]["uid"], node)
        synced_to(fake, informers)
        pipeline.expire_claims()
        assert pipeline.gangs.claims == {}
        assert pipeline.flush_statuses()
        status = (fake.get("tdmcore.io/v1alpha1", "NodeBandwidth", node) or {}).get("status")
        assert [e["name"] for e in (status or {}).get("pods") or []] == ["j-0"]
