"""Node changes applied in place (``ClusterModel._update_nodes``) against the rebuild.

The oracle is the plain path: a fresh :class:`~k8s_bridge.cache.ClusterModel` fed the
same API objects builds its cluster and state from scratch.  On seeded random
sequences of Node changes (allocatable, zone and region labels with and without a
NetworkTopology, cordons, Ready conditions, heartbeats, NodeBandwidth links valid and
invalid) interleaved with pods coming and going, the updated model must agree with
the rebuilt one: the cluster's arrays bit for bit, the schedulable flags, the placed
pods, their rows and orders, and Metronome's decisions for new pods.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import k8s_objects as K
import numpy as np
import pytest
from test_k8s_convert import topology

from k8s_bridge.cache import ClusterModel
from tdmcore.framework import Scheduler
from tdmcore.model import Pod, TrafficPattern
from tdmcore.policies import make_policy

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
COSTS = {ZONE: {("z1", "z2"): 5, ("z2", "z1"): 6, ("z2", "z3"): 2, ("z3", "z1"): 1},
         REGION: {("r1", "r2"): 10, ("r2", "r1"): 20}}
PATTERNS = [(100.0, 0.3, 10.0), (150.0, 0.25, 5.0), (200.0, 0.4, 20.0)]
SCHEDULER = Scheduler(make_policy("metronome"))


class World:
    """The API's objects, one resourceVersion counter, and the model under test."""

    def __init__(self, rng: random.Random, n_nodes: int, with_topology: bool) -> None:
        self.rng = rng
        self.rv = 1
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.model = ClusterModel(default_link_gbps=25.0)
        for k, (period, duty, gbps) in enumerate(PATTERNS):
            self.put(K.podbandwidth(f"p{k}", period=period, duty=duty, gbps=gbps,
                                    match={"tdmcore.io/pattern": f"p{k}"}))
        if with_topology:
            self.put(topology({"UserDefined": COSTS}))
        for i in range(n_nodes):
            node = K.node(f"n{i:02d}", gpu=rng.choice([4, 8]), zone=rng.choice(["z1", "z2"]))
            node["metadata"]["labels"][REGION] = rng.choice(["r1", "r2"])
            self.put(node)
        self.pods = 0

    def put(self, obj: dict[str, Any], event: str | None = None) -> None:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        key = (obj["kind"], obj["metadata"]["name"])
        event = event or ("MODIFIED" if key in self.objects else "ADDED")
        if event == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        self.model.on_event(obj["kind"], event, obj)

    def nodes(self) -> list[dict[str, Any]]:
        return [o for (kind, _), o in sorted(self.objects.items()) if kind == "Node"]

    def rebuilt(self) -> ClusterModel:
        fresh = ClusterModel(default_link_gbps=25.0, incremental_nodes=False)
        for obj in self.objects.values():
            fresh.on_event(obj["kind"], "ADDED", copy.deepcopy(obj))
        return fresh

    # ------------------------------------------------------------- changes
    def change(self) -> str:
        rng = self.rng
        node = copy.deepcopy(rng.choice(self.nodes()))
        name = node["metadata"]["name"]
        labels = node["metadata"]["labels"]
        what = rng.choice(["gpu", "zone", "region", "cordon", "ready", "heartbeat", "link",
                           "link", "pod", "pod", "unbind"])
        if what == "gpu":
            node["status"]["allocatable"]["nvidia.com/gpu"] = str(rng.choice([2, 4, 8]))
        elif what == "zone":
            labels[ZONE] = rng.choice(["z1", "z2", "z3"])
        elif what == "region":
            labels[REGION] = rng.choice(["r1", "r2"])
        elif what == "cordon":
            node["spec"]["unschedulable"] = not node["spec"].get("unschedulable", False)
        elif what == "ready":
            for cond in node["status"]["conditions"]:
                if cond["type"] == "Ready":
                    cond["status"] = "False" if cond["status"] == "True" else "True"
        elif what == "heartbeat":
            node["metadata"].setdefault("annotations", {})["beat"] = str(self.rv)
        elif what == "link":
            self.put(K.nodebandwidth(name, rng.choice([10, 25, 40, "100G", "fast", None])))
            return what
        elif what == "pod":
            self.pods += 1
            labels = {"training.kubeflow.org/job-name": f"j{rng.randrange(4)}",
                      "tdmcore.io/pattern": f"p{rng.randrange(len(PATTERNS))}"}
            self.put(K.pod(f"q{self.pods}", labels=labels, gpu=rng.choice([1, 2]), node=name,
                           phase="Running", created=f"2026-11-20T00:00:{self.pods % 60:02d}Z"))
            return what
        else:  # a placed pod goes away
            pods = [o for (kind, _), o in sorted(self.objects.items()) if kind == "Pod"]
            if pods:
                self.put(rng.choice(pods), "DELETED")
            return what
        self.put(node)
        return what


def assert_same(a: ClusterModel, b: ClusterModel) -> None:
    ca, cb = a.cluster(), b.cluster()
    assert ca.nodes == cb.nodes and ca.node_index == cb.node_index
    for name in ("cpu", "mem_gib", "gpu", "link_gbps", "latency", "mean_latency"):
        np.testing.assert_array_equal(getattr(ca, name), getattr(cb, name), err_msg=name)
    assert ca.workloads == cb.workloads
    assert a.schedulable == b.schedulable
    sa, sb = a.state(), b.state()
    assert sa.cluster is ca
    for name in ("used_cpu", "used_mem", "used_gpu"):
        np.testing.assert_array_equal(getattr(sa, name), getattr(sb, name), err_msg=name)
    assert sa.node_pods == sb.node_pods and sa.link_rows == sb.link_rows
    assert {k: (p.node, p.order, p.shift_ms, p.pod.pattern) for k, p in sa.placed.items()} \
        == {k: (p.node, p.order, p.shift_ms, p.pod.pattern) for k, p in sb.placed.items()}
    assert sa.next_order == sb.next_order and sa.complete_jobs == sb.complete_jobs


def assert_same_decisions(a: ClusterModel, b: ClusterModel, rng: random.Random) -> None:
    for k in range(2):
        period, duty, gbps = rng.choice(PATTERNS)
        pod = Pod(f"new-{k}", f"j{rng.randrange(5)}", cpu=1, mem_gib=1, gpu=rng.choice([1, 4]),
                  pattern=TrafficPattern(period, duty, gbps))
        da, ca = SCHEDULER.decide(a.state(), pod)
        db, cb = SCHEDULER.decide(b.state(), pod)
        assert (da.status, da.node, da.message) == (db.status, db.node, db.message)
        for name in ("feasible", "raw_scores", "scores", "finalists"):
            x, y = getattr(ca, name), getattr(cb, name)
            assert (x is None) == (y is None), name
            if x is not None:
                np.testing.assert_array_equal(x, y, err_msg=name)


@pytest.mark.parametrize("seed", range(300))
def test_node_changes_in_place_equal_the_rebuild(seed):
    rng = random.Random(seed)
    world = World(rng, n_nodes=rng.randint(2, 9), with_topology=seed % 2 == 0)
    model = world.model
    for _ in range(3):
        world.change()
    model.state()
    rebuilds = model.rebuilds
    kinds = set()
    for _ in range(12):
        kinds.add(world.change())
        fresh = world.rebuilt()
        assert_same(model, fresh)
        if rng.random() < 0.3:
            assert_same_decisions(model, fresh, rng)
    if kinds <= {"gpu", "zone", "region", "cordon", "ready", "heartbeat", "link"}:
        assert model.rebuilds == rebuilds  # nothing but node changes: never a rebuild


def test_node_change_updates_in_place_and_node_set_changes_rebuild():
    rng = random.Random(0)
    world = World(rng, n_nodes=3, with_topology=True)
    model = world.model
    state = model.state()
    assert model.rebuilds == 1
    node = copy.deepcopy(world.nodes()[1])
    node["metadata"]["labels"][ZONE] = "z3"
    world.put(node)
    assert model.state() is state and model.rebuilds == 1 and model.node_updates == 1
    assert state.cluster.latency[1].tolist() == world.rebuilt().cluster().latency[1].tolist()
    version = state.version
    node = copy.deepcopy(node)
    node["metadata"]["annotations"] = {"heartbeat": "1"}  # nothing the cluster uses
    world.put(node)
    assert model.state() is state and state.version == version and model.node_updates == 1
    world.put(K.node("n99"))                              # a new node: every index moves
    assert model.state() is not state and model.rebuilds == 2
    assert_same(model, world.rebuilt())
    world.put(world.nodes()[0], "DELETED")
    assert model.rebuilds == 2 and model.state() is not None and model.rebuilds == 3
    assert_same(model, world.rebuilt())


def test_a_node_that_no_longer_converts_falls_back_to_the_rebuild():
    rng = random.Random(1)
    world = World(rng, n_nodes=3, with_topology=False)
    model = world.model
    model.state()
    node = copy.deepcopy(world.nodes()[2])
    node["status"]["allocatable"]["cpu"] = "lots"
    world.put(node)
    model.state()
    assert model.rebuilds == 2 and "Node/n02" in model.skipped
    assert_same(model, world.rebuilt())


def test_an_over_committed_node_records_every_pod_the_api_bound_there():
    """A rebuild used to drop the second pod on a node already over its capacity
    (a cordoned node counts zero): the API, not our Filter, says what runs where."""
    model = ClusterModel()
    model.on_event("Node", "ADDED", K.node("n0", unschedulable=True))
    model.on_event("Node", "ADDED", K.node("n1"))
    for k in range(3):
        model.on_event("Pod", "ADDED", K.pod(f"a-{k}", labels=K.job_labels("a"), gpu=4,
                                             node="n0", phase="Running", rv=str(10 + k)))
    state = model.state()
    assert sorted(state.placed) == ["default/a-0", "default/a-1", "default/a-2"]
    assert state.used_gpu.tolist() == [12.0, 0.0] and state.free_gpu.tolist() == [-12.0, 8.0]
