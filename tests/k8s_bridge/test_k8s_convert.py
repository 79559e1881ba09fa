"""Kubernetes JSON -> tdmcore domain objects (k8s_bridge.convert) and the ClusterModel
that caches them, with real API JSON and no server: the model is fed ``on_event``
directly, as the informers would."""

from __future__ import annotations

import copy
import math
import random
from typing import Any

import numpy as np
import pytest

from k8s_bridge import api as A
from k8s_bridge import convert as C
from k8s_bridge.cache import ClusterModel
from tdmcore.model import Node, TrafficPattern, Workload
from tests.k8s_bridge import k8s_objects as K

GIB = 2.0**30
KF = "training.kubeflow.org/job-name"
PRIO = "tdmcore.io/priority"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


# ------------------------------------------------------------------ builders
def container(name: str = "c", *, requests: dict[str, Any] | None = None,
              limits: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "ghcr.io/tdmcore/examples:resnet50", "resources": resources}


def pod_with(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None,
             overhead: dict[str, Any] | None = None) -> dict[str, Any]:
    pod = K.pod("p")
    pod["spec"]["containers"] = containers
    if init is not None:
        pod["spec"]["initContainers"] = init
    if overhead is not None:
        pod["spec"]["overhead"] = overhead
    return pod


def labelled(labels: dict[str, str], *, name: str = "w-0",
             namespace: str | None = "default") -> dict[str, Any]:
    pod = K.pod(name, labels=labels)
    if namespace is None:
        del pod["metadata"]["namespace"]
    else:
        pod["metadata"]["namespace"] = namespace
    return pod


def pbw(name: str, *, created: str = "2026-11-20T00:00:00Z", namespace: str = "default",
        pod_name: str | None = None, selector: dict[str, Any] | None = None,
        period: Any = 100, duty: Any = 0.5, gbps: Any = 10,
        status: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"period": period, "duty_cycle": duty, "bandwidth": gbps}
    if pod_name is not None:
        spec["podName"] = pod_name
    if selector is not None:
        spec["selector"] = selector
    obj: dict[str, Any] = {
        "apiVersion": "tdmcore.io/v1alpha1", "kind": "PodBandwidth",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1",
                     "creationTimestamp": created},
        "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


# ------------------------------------------------------------------ quantity
@pytest.mark.parametrize(("value", "expected"), [
    ("500m", 0.5),
    ("1500m", 1.5),
    ("16Gi", 16 * 2**30),          # 17_179_869_184 bytes
    ("512Mi", 512 * 2**20),
    ("1Ki", 1024.0),
    ("250M", 250e6),
    ("25G", 25e9),
    ("1e3", 1000.0),               # decimal exponent
    ("1e-3", 0.001),
    ("1.5", 1.5),
    ("0", 0.0),
    (4, 4.0),
    (2.5, 2.5),
    (0, 0.0),
])
def test_quantity_parses_kubernetes_quantities(value, expected):
    assert C.quantity(value, "f") == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("value", ["abc", "", "1Q", "Gi", "1..5", "1Gi2", [1], {"a": 1}])
def test_quantity_rejects_garbage_naming_the_field(value):
    with pytest.raises(ValueError, match=r"^Pod\.spec\.x: .*not a Kubernetes quantity"):
        C.quantity(value, "Pod.spec.x")


@pytest.mark.parametrize("value", ["-1", "-500m", -2, -0.5, float("nan"), float("inf"),
                                   "1e400"])
def test_quantity_rejects_negative_and_non_finite(value):
    with pytest.raises(ValueError, match=r"^Pod\.spec\.x: "):
        C.quantity(value, "Pod.spec.x")


@pytest.mark.parametrize("value", [True, False, None])
def test_quantity_rejects_bool_and_none(value):
    with pytest.raises(ValueError, match=r"^the\.field: expected a quantity"):
        C.quantity(value, "the.field")


# -------------------------------------------------------------- pod_requests
@pytest.mark.parametrize(("pod", "expected"), [
    # K.pod: requests cpu 4, memory 16Gi; GPU only as a limit (1) -> request 1
    (K.pod("p", gpu=1), (4.0, 16.0, 1.0)),
    (K.pod("p", gpu=0, cpu="250m", memory="1G"), (0.25, 1e9 / GIB, 0.0)),
    # sum over containers: cpu 0.5 + 1.5 = 2; memory 1 + 0.5 = 1.5 GiB; GPUs 0 + 2 = 2
    (pod_with([container("a", requests={"cpu": "500m", "memory": "1Gi"}),
               container("b", requests={"cpu": "1500m", "memory": "512Mi"},
                         limits={"nvidia.com/gpu": "2"})]),
     (2.0, 1.5, 2.0)),
    # an init container is the max per resource: cpu max(2, 3) = 3; memory max(1.5, 0.25)
    (pod_with([container("a", requests={"cpu": "500m", "memory": "1Gi"}),
               container("b", requests={"cpu": "1500m", "memory": "512Mi"})],
              init=[container("i", requests={"cpu": "3", "memory": "256Mi"})]),
     (3.0, 1.5, 0.0)),
    # init containers run one at a time: max over them, not their sum
    # cpu max(2, 3, 2.5) = 3; memory max(1.5, 0.25, 4) = 4 GiB; GPU max(0, 0, 1) = 1
    (pod_with([container("a", requests={"cpu": "500m", "memory": "1Gi"}),
               container("b", requests={"cpu": "1500m", "memory": "512Mi"})],
              init=[container("i", requests={"cpu": "3", "memory": "256Mi"}),
                    container("j", requests={"cpu": "2.5", "memory": "4Gi"},
                              limits={"nvidia.com/gpu": 1})]),
     (3.0, 4.0, 1.0)),
    # overhead (RuntimeClass) on top: cpu 2 + 0.25; memory 1.5 + 128Mi = 1.625 GiB
    (pod_with([container("a", requests={"cpu": "500m", "memory": "1Gi"}),
               container("b", requests={"cpu": "1500m", "memory": "512Mi"})],
              overhead={"cpu": "250m", "memory": "128Mi"}),
     (2.25, 1.625, 0.0)),
    # overhead is added after the init max: max(1, 4) + 0.5 = 4.5 cpu
    (pod_with([container("a", requests={"cpu": "1"})],
              init=[container("i", requests={"cpu": "4"})], overhead={"cpu": "500m"}),
     (4.5, 0.0, 0.0)),
    # limits only: the request defaults to the limit (API defaulting), for every resource
    (pod_with([container("a", limits={"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "4"})]),
     (2.0, 8.0, 4.0)),
    # a request below its limit is the request
    (pod_with([container("a", requests={"cpu": "1", "nvidia.com/gpu": "2"},
                         limits={"cpu": "2", "nvidia.com/gpu": "2"})]),
     (1.0, 0.0, 2.0)),
    # nothing requested at all
    (pod_with([container("a")]), (0.0, 0.0, 0.0)),
    (pod_with([]), (0.0, 0.0, 0.0)),
])
def test_pod_requests(pod, expected):
    assert C.pod_requests(pod) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("pod", "field"), [
    (pod_with([container("a", requests={"cpu": "1"}),
               container("b", requests={"cpu": "lots"})]),
     r"Pod\.spec\.containers\[1\]\.resources\.cpu"),
    (pod_with([container("a")], init=[container("i", limits={"memory": "-1Gi"})]),
     r"Pod\.spec\.initContainers\[0\]\.resources\.memory"),
    (pod_with([container("a", limits={"nvidia.com/gpu": True})]),
     r"Pod\.spec\.containers\[0\]\.resources\.nvidia\.com/gpu"),
    (pod_with([container("a")], overhead={"cpu": "x"}), r"Pod\.spec\.overhead\.cpu"),
    (pod_with([container("a")], overhead=["cpu"]), r"Pod\.spec\.overhead"),  # type: ignore[arg-type]
    (pod_with({"name": "a"}), r"Pod\.spec\.containers"),  # type: ignore[arg-type]
    (pod_with(["a"]), r"Pod\.spec\.containers\[0\]"),  # type: ignore[list-item]
])
def test_pod_requests_errors_name_the_field(pod, field):
    with pytest.raises(ValueError, match=field):
        C.pod_requests(pod)


# --------------------------------------------------------------------- job_of
ALL = {A.LABEL_APPGROUP: "ag", A.LABEL_WORKLOAD: "ps", KF: "kf", A.LABEL_JOB: "tj",
       A.LABEL_POD_GROUP: "pg"}


def without(*keys: str) -> dict[str, str]:
    return {k: v for k, v in ALL.items() if k not in keys}


@pytest.mark.parametrize(("labels", "expected"), [
    (ALL, "ml/ag.ps"),                                            # AppGroup + selector first
    (without(A.LABEL_WORKLOAD), "ml/kf"),                         # AppGroup alone: not enough
    (without(A.LABEL_APPGROUP), "ml/kf"),                         # selector alone: not enough
    (without(A.LABEL_APPGROUP, A.LABEL_WORKLOAD), "ml/kf"),       # then Kubeflow
    (without(A.LABEL_APPGROUP, A.LABEL_WORKLOAD, KF), "ml/tj"),    # then tdmcore.io/job
    ({A.LABEL_POD_GROUP: "pg"}, "ml/pg"),                         # then the PodGroup
    ({}, "ml/w-0"),                                               # else the pod itself
    ({KF: "", A.LABEL_JOB: "tj"}, "ml/tj"),                       # empty values are absent
    ({A.LABEL_APPGROUP: "ag", A.LABEL_WORKLOAD: "", A.LABEL_POD_GROUP: "pg"}, "ml/pg"),
    ({"app": "resnet"}, "ml/w-0"),
])
def test_job_of_precedence(labels, expected):
    assert C.job_of(labelled(labels, namespace="ml")) == expected


def test_job_of_is_namespaced():
    a = C.job_of(labelled({KF: "train"}, namespace="team-a"))
    b = C.job_of(labelled({KF: "train"}, namespace="team-b"))
    assert (a, b) == ("team-a/train", "team-b/train")
    # no namespace in the JSON (a pod template): the default namespace
    assert C.job_of(labelled({KF: "train"}, namespace=None)) == "default/train"
    assert C.job_of(labelled({}, name="solo", namespace=None)) == "default/solo"
    assert C.pod_key(labelled({}, name="solo", namespace=None)) == "default/solo"


def test_job_of_rejects_malformed_metadata():
    with pytest.raises(ValueError, match=r"Pod\.metadata\.name"):
        C.job_of({"metadata": {"namespace": "ml"}})
    with pytest.raises(ValueError, match="metadata.labels"):
        C.job_of({"metadata": {"name": "p", "labels": {KF: 3}}})


# ------------------------------------------------------------------- priority
@pytest.mark.parametrize(("labels", "expected"), [
    ({PRIO: "high"}, 1),
    ({PRIO: "low"}, 0),
    ({PRIO: "High"}, 1),
    ({PRIO: "7"}, 7),
    ({PRIO: "0"}, 0),
    ({PRIO: "-3"}, -3),
    ({PRIO: "1000"}, 1000),
    ({}, 0),                       # absent = low
])
def test_priority_label(labels, expected):
    assert C.pod_from_json(labelled(labels)).priority == expected


@pytest.mark.parametrize("value", ["urgent", "1.5", "1e3", "five", "hi gh"])
def test_priority_label_garbage_names_the_label(value):
    with pytest.raises(ValueError, match=r"tdmcore\.io/priority"):
        C.pod_from_json(labelled({PRIO: value}))


def test_pod_from_json_assembles_everything():
    pod = labelled({KF: "a", PRIO: "high"}, name="a-0", namespace="ml")
    got = C.pod_from_json(pod, [pbw("a", namespace="ml", selector={"matchLabels": {KF: "a"}},
                                    period=120, duty=0.25, gbps=20)])
    assert (got.name, got.job, got.priority) == ("ml/a-0", "ml/a", 1)
    assert (got.cpu, got.mem_gib, got.gpu) == (4.0, 16.0, 1.0)
    assert got.pattern == TrafficPattern(120.0, 0.25, 20.0)
    assert got.workload is None and not got.low_comm


# ------------------------------------------------------ podbandwidth_for / pattern_for
def test_pod_name_beats_an_older_selector_match():
    pod = labelled({KF: "a"}, name="a-0")
    sel = pbw("by-selector", created="2026-01-01T00:00:00Z", selector={"matchLabels": {KF: "a"}})
    named = pbw("by-name", created="2026-12-01T00:00:00Z", pod_name="a-0")
    assert C.podbandwidth_for(pod, [sel, named]) is named
    assert C.podbandwidth_for(pod, [named, sel]) is named
    # podName of another pod does not describe this one
    other = pbw("other", pod_name="a-1")
    assert C.podbandwidth_for(pod, [other, sel]) is sel


def test_oldest_selector_match_wins_then_name():
    pod = labelled({KF: "a", "team": "x"})
    newer = pbw("aaa-newer", created="2026-11-21T00:00:00Z", selector={"matchLabels": {KF: "a"}})
    older = pbw("zzz-older", created="2026-11-19T00:00:00Z",
                selector={"matchLabels": {"team": "x"}})
    assert C.podbandwidth_for(pod, [newer, older]) is older
    assert C.podbandwidth_for(pod, [older, newer]) is older
    # same creation time: the name decides
    b = pbw("b", selector={"matchLabels": {KF: "a"}})
    a = pbw("a", selector={"matchLabels": {"team": "x"}})
    assert C.podbandwidth_for(pod, [b, a]) is a
    # one that does not match is never chosen, however old
    ancient = pbw("ancient", created="2020-01-01T00:00:00Z",
                  selector={"matchLabels": {KF: "b"}})
    assert C.podbandwidth_for(pod, [ancient, b]) is b


def test_podbandwidths_of_other_namespaces_are_ignored():
    pod = labelled({KF: "a"}, name="a-0", namespace="team-a")
    elsewhere = [pbw("n", namespace="team-b", pod_name="a-0"),
                 pbw("s", namespace="team-b", selector={"matchLabels": {KF: "a"}})]
    assert C.podbandwidth_for(pod, elsewhere) is None
    assert C.pattern_for(pod, elsewhere) is None
    mine = pbw("s", namespace="team-a", selector={"matchLabels": {KF: "a"}}, period=50)
    assert C.podbandwidth_for(pod, [*elsewhere, mine]) is mine
    # a PodBandwidth without namespace is in "default"
    nameless = pbw("d", selector={"matchLabels": {KF: "a"}})
    del nameless["metadata"]["namespace"]
    assert C.podbandwidth_for(labelled({KF: "a"}), [nameless]) is nameless
    assert C.podbandwidth_for(pod, [nameless]) is None


@pytest.mark.parametrize(("expressions", "labels", "expected"), [
    ([{"key": "job", "operator": "In", "values": ["a", "b"]}], {"job": "a"}, True),
    ([{"key": "job", "operator": "In", "values": ["a", "b"]}], {"job": "c"}, False),
    ([{"key": "job", "operator": "In", "values": ["a"]}], {}, False),
    ([{"key": "job", "operator": "NotIn", "values": ["a"]}], {"job": "b"}, True),
    ([{"key": "job", "operator": "NotIn", "values": ["a"]}], {"job": "a"}, False),
    ([{"key": "job", "operator": "NotIn", "values": ["a"]}], {}, True),  # absent: not in
    ([{"key": "job", "operator": "Exists"}], {"job": ""}, True),
    ([{"key": "job", "operator": "Exists"}], {"other": "x"}, False),
    ([{"key": "job", "operator": "DoesNotExist"}], {}, True),
    ([{"key": "job", "operator": "DoesNotExist"}], {"job": "a"}, False),
    # every requirement must hold (AND)
    ([{"key": "job", "operator": "Exists"}, {"key": "tier", "operator": "In",
                                            "values": ["gpu"]}], {"job": "a"}, False),
    ([{"key": "job", "operator": "Exists"}, {"key": "tier", "operator": "In",
                                            "values": ["gpu"]}],
     {"job": "a", "tier": "gpu"}, True),
    ([], {"job": "a"}, True),
])
def test_match_expressions(expressions, labels, expected):
    selector = {"matchExpressions": expressions}
    assert C.matches_selector(selector, labels) is expected
    pod = labelled(labels)
    assert (C.podbandwidth_for(pod, [pbw("x", selector=selector)]) is not None) is expected


def test_match_labels_and_expressions_together():
    selector = {"matchLabels": {KF: "a"},
                "matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["ps"]}]}
    assert C.matches_selector(selector, {KF: "a", "role": "worker"})
    assert not C.matches_selector(selector, {KF: "a", "role": "ps"})
    assert not C.matches_selector(selector, {KF: "b", "role": "worker"})
    # an empty LabelSelector selects everything (metav1 semantics)
    assert C.matches_selector({}, {"anything": "x"})


def test_unknown_operator_is_a_value_error():
    with pytest.raises(ValueError, match=r"matchExpressions\[0\]\.operator"):
        C.matches_selector({"matchExpressions": [{"key": "k", "operator": "Gt",
                                                  "values": ["1"]}]}, {"k": "2"})


def test_low_comm_label_and_missing_podbandwidth_mean_no_pattern():
    bws = [pbw("a", selector={"matchLabels": {KF: "a"}})]
    assert C.pattern_for(labelled({KF: "a", "low_comm": "true"}), bws) is None
    assert C.pattern_for(labelled({KF: "a", "low_comm": "false"}), bws) == \
        TrafficPattern(100.0, 0.5, 10.0)
    assert C.pattern_for(labelled({KF: "b"}), bws) is None       # nothing describes it
    assert C.pod_from_json(labelled({KF: "a", "low_comm": "true"}), bws).low_comm


@pytest.mark.parametrize(("status", "expected"), [
    (None, TrafficPattern(100.0, 0.5, 10.0)),
    ({}, TrafficPattern(100.0, 0.5, 10.0)),
    ({"matchedPods": 3}, TrafficPattern(100.0, 0.5, 10.0)),
    ({"observedPeriodMs": 80.0, "observedDutyCycle": 0.25}, TrafficPattern(80.0, 0.25, 10.0)),
    ({"observedPeriodMs": 120}, TrafficPattern(120.0, 0.5, 10.0)),
    ({"observedDutyCycle": 0.75}, TrafficPattern(100.0, 0.75, 10.0)),
])
def test_controller_status_overrides_the_spec(status, expected):
    bws = [pbw("a", selector={"matchLabels": {KF: "a"}}, status=status)]
    assert C.pattern_for(labelled({KF: "a"}), bws) == expected


@pytest.mark.parametrize("kw", [
    {"period": 0}, {"period": -10}, {"period": "100"}, {"period": None},
    {"duty": 1.5}, {"duty": -0.1}, {"duty": True},
    {"gbps": None}, {"gbps": "20G"}, {"gbps": float("nan")},
    {"status": {"observedPeriodMs": -1}},
    {"status": {"observedDutyCycle": "half"}},
])
def test_invalid_podbandwidth_is_a_value_error(kw):
    bws = [pbw("a", selector={"matchLabels": {KF: "a"}}, **kw)]
    with pytest.raises(ValueError, match="PodBandwidth"):
        C.pattern_for(labelled({KF: "a"}), bws)


# ------------------------------------------------------------------ link_gbps
@pytest.mark.parametrize(("bandwidth", "expected"), [
    (25, 25.0),                    # a number is Gbps
    (10.5, 10.5),
    (400, 400.0),
    ("25G", 25.0),                 # a string is bit/s: 25e9 / 1e9
    ("25Gi", 26.8435456),          # 25 * 2**30 = 26_843_545_600 bit/s
    ("100M", 0.1),                 # 1e8 / 1e9
    ("1T", 1000.0),
    ("0.5G", 0.5),
])
def test_link_gbps(bandwidth, expected):
    assert C.link_gbps(K.nodebandwidth("n0", bandwidth), 7.0) == pytest.approx(expected)


def test_link_gbps_default():
    assert C.link_gbps(None, 7.0) == 7.0
    assert C.link_gbps(K.nodebandwidth("n0"), 7.0) == 7.0               # spec without it
    assert C.link_gbps({"metadata": {"name": "n0"}}, 7.0) == 7.0        # no spec at all
    assert C.link_gbps({"spec": {"bandwidth": None}}, 7.0) == 7.0


@pytest.mark.parametrize("bandwidth", [0, 0.0, -5, "0", "0G", "-25G", "fast", "", True,
                                       float("nan"), float("inf"), [25]])
def test_link_gbps_rejects_bad_bandwidth(bandwidth):
    with pytest.raises(ValueError, match=r"NodeBandwidth\.spec\.bandwidth"):
        C.link_gbps(K.nodebandwidth("n0", bandwidth), 25.0)


# ------------------------------------------------------------ nodes
def test_node_from_json_uses_allocatable():
    n = C.node_from_json(K.node("n0", cpu="63500m", memory="250Gi", gpu=4), 40.0)
    assert n == Node("n0", cpu=63.5, mem_gib=250.0, gpu=4.0, link_gbps=40.0)
    node = K.node("n1")
    node["status"]["capacity"] = {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": "16"}
    assert C.node_from_json(node, 25.0) == Node("n1", 64.0, 256.0, 8.0, 25.0)
    # memory in GiB: 1000000Ki = 1_024_000_000 bytes = 0.95367431640625 GiB
    node["status"]["allocatable"]["memory"] = "1000000Ki"
    assert C.node_from_json(node, 25.0).mem_gib == pytest.approx(0.95367431640625)
    # a node without allocatable (yet) has nothing to give
    bare = {"metadata": {"name": "b"}, "status": {}}
    assert C.node_from_json(bare, 25.0) == Node("b", 0.0, 0.0, 0.0, 25.0)


@pytest.mark.parametrize(("node", "field"), [
    ({"metadata": {}, "status": {}}, r"Node\.metadata\.name"),
    ({"metadata": {"name": "x"}, "status": {"allocatable": {"cpu": "many"}}},
     r"Node\.status\.allocatable\.cpu"),
    ({"metadata": {"name": "x"}, "status": {"allocatable": {"memory": "-1Gi"}}},
     r"Node\.status\.allocatable\.memory"),
    ({"metadata": {"name": "x"}, "status": {"allocatable": []}}, r"Node\.status\.allocatable"),
])
def test_node_from_json_errors(node, field):
    with pytest.raises(ValueError, match=field):
        C.node_from_json(node, 25.0)


def _conditions(node: dict[str, Any], conditions: list[dict[str, str]] | None) -> dict[str, Any]:
    if conditions is None:
        node["status"].pop("conditions")
    else:
        node["status"]["conditions"] = conditions
    return node


@pytest.mark.parametrize(("node", "expected"), [
    (K.node("n"), True),
    (K.node("n", ready=False), False),
    (K.node("n", unschedulable=True), False),                       # cordoned
    (K.node("n", ready=False, unschedulable=True), False),
    (_conditions(K.node("n"), [{"type": "Ready", "status": "Unknown"}]), False),
    (_conditions(K.node("n"), [{"type": "MemoryPressure", "status": "False"},
                               {"type": "Ready", "status": "True"}]), True),
    (_conditions(K.node("n"), [{"type": "DiskPressure", "status": "True"}]), True),
    (_conditions(K.node("n"), None), True),                         # no report yet
])
def test_node_schedulable(node, expected):
    assert C.node_schedulable(node) is expected


# --------------------------------------------------------------- latency_matrix
def topo_node(name: str, zone: str | None, region: str | None) -> dict[str, Any]:
    node = K.node(name, zone=zone)
    if region:
        node["metadata"]["labels"][REGION] = region
    return node


def topology(weights: dict[str, dict[str, dict[tuple[str, str], float]]],
             name: str = "net") -> dict[str, Any]:
    """A networkaware NetworkTopology: {weights name: {topologyKey: {(origin, dest): cost}}}."""
    spec_weights = []
    for wname, keys in weights.items():
        topology_list = []
        for key, table in keys.items():
            origins: dict[str, list[dict[str, Any]]] = {}
            for (src, dst), cost in table.items():
                origins.setdefault(src, []).append(
                    {"destination": dst, "networkCost": cost, "bandwidthCapacity": "10Gi"})
            topology_list.append({"topologyKey": key, "originList": [
                {"origin": src, "costList": costs} for src, costs in origins.items()]})
        spec_weights.append({"name": wname, "topologyList": topology_list})
    return {"apiVersion": "networktopology.diktyo.x-k8s.io/v1alpha1", "kind": "NetworkTopology",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"configmapName": "netperf-metrics", "weights": spec_weights}}


HAND_NODES = [topo_node("n0", "z1", "r1"), topo_node("n1", "z2", "r1"),
              topo_node("n2", "z1", "r2"), topo_node("n3", None, "r2"),
              topo_node("n4", "z3", "r2")]
HAND_COSTS = {ZONE: {("z1", "z2"): 5, ("z2", "z1"): 6, ("z1", "z1"): 99, ("z2", "z3"): 2},
              REGION: {("r1", "r2"): 10, ("r2", "r1"): 20}}


def test_latency_matrix_by_hand():
    tau = C.latency_matrix(HAND_NODES, [topology({"UserDefined": HAND_COSTS})])
    expected = np.array([
        # n0 (z1,r1): ->n1 zones z1->z2 = 5; ->n2 same zone, r1->r2 = 10;
        #             ->n3 no zone, r1->r2 = 10; ->n4 z1->z3 unlisted = 0 (zone decides)
        [1, 1 + 5, 1 + 10, 1 + 10, 1],
        # n1 (z2,r1): ->n0 z2->z1 = 6; ->n2 z2->z1 = 6; ->n3 r1->r2 = 10; ->n4 z2->z3 = 2
        [1 + 6, 1, 1 + 6, 1 + 10, 1 + 2],
        # n2 (z1,r2): ->n0 same zone, r2->r1 = 20; ->n1 z1->z2 = 5; ->n3/n4 same region/z1->z3
        [1 + 20, 1 + 5, 1, 1, 1],
        # n3 (-,r2): ->n0/n1 r2->r1 = 20; ->n2/n4 same region r2
        [1 + 20, 1 + 20, 1, 1, 1],
        # n4 (z3,r2): z3->* unlisted = 0; ->n3 same region
        [1, 1, 1, 1, 1],
    ], dtype=float)
    np.testing.assert_array_equal(tau, expected)


def test_latency_matrix_weights_selection_and_absence():
    other = {ZONE: {("z1", "z2"): 1000}}
    topo = topology({"UserDefined": HAND_COSTS, "NetperfCosts": other})
    assert C.latency_matrix(HAND_NODES, [topo])[0, 1] == 1 + 5
    tau = C.latency_matrix(HAND_NODES, [topo], weights="NetperfCosts")
    assert tau[0, 1] == 1 + 1000 and tau[0, 2] == 1  # no region costs in these weights
    assert C.latency_matrix(HAND_NODES, [topo], weights="Missing") is None
    assert C.latency_matrix(HAND_NODES, []) is None                 # no topology: flat
    # only the first NetworkTopology counts
    second = topology({"UserDefined": other}, name="second")
    assert C.latency_matrix(HAND_NODES, [topo, second])[0, 1] == 1 + 5
    # nodes without topology labels: all ones
    flat = C.latency_matrix([K.node("a"), K.node("b")], [topo])
    np.testing.assert_array_equal(flat, np.ones((2, 2)))


def test_latency_matrix_errors():
    bad = topology({"UserDefined": {ZONE: {("z1", "z2"): 5}}})
    bad["spec"]["weights"][0]["topologyList"][0]["originList"][0]["costList"][0][
        "networkCost"] = "5"
    with pytest.raises(ValueError, match="networkCost"):
        C.latency_matrix(HAND_NODES, [bad])
    bad = topology({"UserDefined": {ZONE: {("z1", "z2"): 5}}})
    del bad["spec"]["weights"][0]["topologyList"][0]["topologyKey"]
    with pytest.raises(ValueError, match="topologyKey"):
        C.latency_matrix(HAND_NODES, [bad])


def brute_force_tau(nodes: list[dict[str, Any]], topo: dict[str, Any] | None,
                    weights: str = "UserDefined") -> list[list[float]] | None:
    """The docstring's rule, one pair at a time."""
    if topo is None:
        return None
    chosen = None
    for w in topo["spec"]["weights"]:
        if w["name"] == weights:
            chosen = w
    if chosen is None:
        return None
    tables: dict[str, dict[tuple[str, str], float]] = {}
    for t in chosen["topologyList"]:
        for o in t["originList"]:
            for c in o["costList"]:
                tables.setdefault(t["topologyKey"], {})[(o["origin"], c["destination"])] = \
                    c["networkCost"]
    labels = [n["metadata"]["labels"] for n in nodes]
    tau = [[1.0] * len(nodes) for _ in nodes]
    for x in range(len(nodes)):
        for y in range(len(nodes)):
            if x == y:
                continue
            zx, zy = labels[x].get(ZONE), labels[y].get(ZONE)
            rx, ry = labels[x].get(REGION), labels[y].get(REGION)
            if zx and zy and zx != zy:
                cost = tables.get(ZONE, {}).get((zx, zy), 0.0)
            elif rx and ry and rx != ry:
                cost = tables.get(REGION, {}).get((rx, ry), 0.0)
            else:
                cost = 0.0
            tau[x][y] = 1.0 + cost
    return tau


@pytest.mark.parametrize("seed", range(6))
def test_latency_matrix_matches_brute_force(seed):
    rng = random.Random(seed)
    zones = ["eu-1a", "eu-1b", "eu-1c", "us-2a", "us-2b"]
    regions = ["eu-1", "us-2", "ap-3"]
    nodes = [topo_node(f"n{i:02d}", rng.choice([*zones, None]), rng.choice([*regions, None]))
             for i in range(30)]
    rng.shuffle(nodes)
    # ~70% of the ordered pairs listed (some asymmetric, the diagonal included, which
    # must not matter), plus zones/regions no node has
    zone_costs = {(a, b): rng.choice([0, 1, 2.5, 7, 30]) for a in [*zones, "zz-9"]
                  for b in [*zones, "zz-9"] if rng.random() < 0.7}
    region_costs = {(a, b): float(rng.randint(0, 50)) for a in [*regions, "xx"]
                    for b in [*regions, "xx"] if rng.random() < 0.7}
    noise = {ZONE: {("eu-1a", "eu-1b"): 123456}}
    topo = topology({"Other": noise, "UserDefined": {ZONE: zone_costs, REGION: region_costs}})
    tau = C.latency_matrix(nodes, [topo])
    np.testing.assert_array_equal(tau, np.array(brute_force_tau(nodes, topo)))
    np.testing.assert_array_equal(C.latency_matrix(nodes, [topo], "Other"),
                                  np.array(brute_force_tau(nodes, topo, "Other")))
    assert C.latency_matrix(nodes, [topo], "None") is None


# ----------------------------------------------------- workloads_from_appgroups
def appgroup(name: str, workloads: list[tuple[str, list[str]]],
             namespace: str | None = "ml") -> dict[str, Any]:
    """A Diktyo AppGroup: (selector, [dependency selectors]) per workload."""
    def ref(sel: str) -> dict[str, Any]:
        return {"kind": "Deployment", "name": f"{sel}-deploy", "selector": sel,
                "apiVersion": "apps/v1", "namespace": namespace or "default"}

    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1", "kind": "AppGroup",
            "metadata": meta,
            "spec": {"numMembers": len(workloads), "topologySortingAlgorithm": "KahnSort",
                     "workloads": [
                         {"workload": ref(sel),
                          "dependencies": [{"workload": ref(d), "minBandwidth": "100Mi",
                                            "maxNetworkCost": 30} for d in deps]}
                         for sel, deps in workloads]}}


def test_workloads_from_appgroups():
    ags = [appgroup("a1", [("p1", ["p2"]), ("p2", ["p3"]), ("p3", [])]),
           appgroup("a2", [("ps", ["worker", "eval"]), ("worker", [])], namespace=None),
           appgroup("empty", [])]
    got = C.workloads_from_appgroups(ags)
    assert got == [
        Workload("ml/a1", ("ml/a1.p1", "ml/a1.p2", "ml/a1.p3"),
                 (("ml/a1.p1", "ml/a1.p2"), ("ml/a1.p2", "ml/a1.p3"))),
        # a dependency on a selector that is not a workload entry still names a job
        Workload("default/a2", ("default/a2.ps", "default/a2.worker", "default/a2.eval"),
                 (("default/a2.ps", "default/a2.worker"), ("default/a2.ps", "default/a2.eval"))),
    ]
    # the pods of such a workload map onto its jobs
    pod = labelled({A.LABEL_APPGROUP: "a1", A.LABEL_WORKLOAD: "p2"}, namespace="ml")
    assert C.job_of(pod) == "ml/a1.p2"
    by_name = {w.name: w for w in got}
    assert C.pod_from_json(pod, workloads=by_name).workload == "ml/a1"
    assert C.pod_from_json(pod, workloads={}).workload is None      # AppGroup not known
    assert C.pod_from_json(pod).workload == "ml/a1"                 # nothing to check against


def test_workloads_from_appgroups_errors():
    ag = appgroup("a1", [("p1", [])])
    del ag["spec"]["workloads"][0]["workload"]["selector"]
    with pytest.raises(ValueError, match=r"workloads\[\]\.workload\.selector"):
        C.workloads_from_appgroups([ag])
    ag = appgroup("a1", [("p1", ["p2"])])
    ag["spec"]["workloads"][0]["dependencies"][0]["workload"] = "p2"
    with pytest.raises(ValueError, match=r"dependencies\[\]\.workload"):
        C.workloads_from_appgroups([ag])
    with pytest.raises(ValueError, match=r"AppGroup\.metadata\.name"):
        C.workloads_from_appgroups([{"metadata": {}, "spec": {}}])


# ------------------------------------------------------------------ ClusterModel
def bump(obj: dict[str, Any], rv: int, **changes: Any) -> dict[str, Any]:
    """A new version of ``obj``: deep copy, resourceVersion ``rv``, ``changes`` merged
    one level deep into its top-level sections (``spec=``, ``status=``, ``metadata=``)."""
    new = copy.deepcopy(obj)
    new["metadata"]["resourceVersion"] = str(rv)
    for section, value in changes.items():
        new[section] = {**(new.get(section) or {}), **value}
    return new


def base_model(**kw: Any) -> ClusterModel:
    m = ClusterModel(**kw)
    for n in ("n0", "n1"):
        m.on_event("Node", "ADDED", K.node(n))
    m.on_event("PodBandwidth", "ADDED", pbw("a", selector={"matchLabels": {KF: "a"}}))
    return m


def test_pod_lifecycle_rebuilds_only_when_placement_changes():
    m = base_model()
    assert m.state().placed == {} and m.rebuilds == 1
    pending = K.pod("a-0", labels=K.job_labels("a"), rv="10")
    m.on_event("Pod", "ADDED", pending)
    assert "default/a-0" not in m.state().placed
    assert m.rebuilds == 1                               # a pending pod changes nothing
    bound = bump(pending, 11, spec={"nodeName": "n1"})
    m.on_event("Pod", "MODIFIED", bound)
    state = m.state()
    assert m.rebuilds == 2 and state.node_of("default/a-0") == 1
    assert state.used_gpu.tolist() == [0.0, 1.0]
    # the kubelet's status churn: phase, conditions, container states
    running = bump(bound, 12, status={
        "phase": "Running", "podIP": "10.0.1.7",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "trainer", "ready": True, "restartCount": 0}]})
    m.on_event("Pod", "MODIFIED", running)
    assert m.state() is state and m.rebuilds == 2
    # a re-delivered older version (a relist racing a watch) is ignored
    m.on_event("Pod", "MODIFIED", pending)
    assert m.objects["Pod"]["default/a-0"]["metadata"]["resourceVersion"] == "12"
    assert m.state() is state and m.rebuilds == 2
    # a label change of a placed pod matters (its job, priority, pattern)
    relabelled = bump(running, 13, metadata={"labels": K.job_labels("a", "high")})
    m.on_event("Pod", "MODIFIED", relabelled)
    assert m.state().placed["default/a-0"].pod.priority == 1 and m.rebuilds == 3
    m.on_event("Pod", "DELETED", bump(relabelled, 14))
    assert m.state().placed == {} and m.rebuilds == 4
    assert "default/a-0" not in m.objects["Pod"]
    assert m.state().used_gpu.tolist() == [0.0, 0.0]


def test_finished_pod_releases_its_node():
    m = base_model()
    pod = K.pod("a-0", labels=K.job_labels("a"), node="n0", phase="Running", rv="5")
    m.on_event("Pod", "ADDED", pod)
    assert "default/a-0" in m.state().placed and m.rebuilds == 1
    m.on_event("Pod", "MODIFIED", bump(pod, 6, status={"phase": "Succeeded"}))
    assert m.state().placed == {} and m.rebuilds == 2
    # deleting a pod that holds nothing any more changes nothing
    m.on_event("Pod", "DELETED", bump(pod, 7, status={"phase": "Succeeded"}))
    m.state()
    assert m.rebuilds == 2


def test_podbandwidth_changes():
    m = base_model()
    m.on_event("Pod", "ADDED", K.pod("a-0", labels=K.job_labels("a"), node="n0",
                                     phase="Running"))
    assert m.state().placed["default/a-0"].pod.pattern == TrafficPattern(100, 0.5, 10)
    assert m.rebuilds == 1
    current = m.objects["PodBandwidth"]["default/a"]
    # the controller's bookkeeping (matchedPods) changes no pattern
    counted = bump(current, 2, status={"matchedPods": 1})
    m.on_event("PodBandwidth", "MODIFIED", counted)
    m.state()
    assert m.rebuilds == 1
    # a pattern update in the status does
    observed = bump(counted, 3, status={"observedPeriodMs": 80.0, "observedDutyCycle": 0.25})
    m.on_event("PodBandwidth", "MODIFIED", observed)
    assert m.state().placed["default/a-0"].pod.pattern == TrafficPattern(80, 0.25, 10)
    assert m.rebuilds == 2
    # and so does the spec (status still overrides period and duty)
    m.on_event("PodBandwidth", "MODIFIED", bump(observed, 4, spec={"bandwidth": 20}))
    assert m.state().placed["default/a-0"].pod.pattern == TrafficPattern(80, 0.25, 20)
    assert m.rebuilds == 3
    m.on_event("PodBandwidth", "DELETED", bump(observed, 5))
    assert m.state().placed["default/a-0"].pod.low_comm and m.rebuilds == 4


def test_nodebandwidth_spec_bandwidth_updates_the_cluster():
    m = base_model(default_link_gbps=10.0)
    cluster = m.cluster()
    assert cluster.link_gbps.tolist() == [10.0, 10.0]       # the default
    state = m.state()
    nbw = K.nodebandwidth("n1", 100)
    m.on_event("NodeBandwidth", "ADDED", nbw)
    assert m.cluster() is not cluster
    # a new cluster under the same state (updated in place, not rebuilt)
    assert m.state() is state and state.cluster is m.cluster()
    assert state.cluster.link_gbps.tolist() == [10.0, 100.0] and m.rebuilds == 1
    nbw = bump(nbw, 2, spec={"bandwidth": "40G"})            # 40e9 bit/s = 40 Gbps
    m.on_event("NodeBandwidth", "MODIFIED", nbw)
    assert m.state().cluster.link_gbps.tolist() == [10.0, 40.0] and m.rebuilds == 1
    assert m.node_updates == 2
    # the same capacity written differently: the cluster is kept
    cluster = m.cluster()
    nbw = bump(nbw, 3, spec={"bandwidth": 40})
    m.on_event("NodeBandwidth", "MODIFIED", nbw)
    assert m.cluster() is cluster
    m.state()
    assert m.rebuilds == 1 and m.node_updates == 2
    # an invalid capacity falls back to the default, and says why
    nbw = bump(nbw, 4, spec={"bandwidth": "fast"})
    m.on_event("NodeBandwidth", "MODIFIED", nbw)
    assert m.state().cluster.link_gbps.tolist() == [10.0, 10.0]
    assert "NodeBandwidth/n1" in m.skipped
    nbw = bump(nbw, 5, spec={"bandwidth": 25})
    m.on_event("NodeBandwidth", "MODIFIED", nbw)
    assert m.state().cluster.link_gbps.tolist() == [10.0, 25.0]
    m.on_event("NodeBandwidth", "DELETED", bump(nbw, 6))
    assert m.state().cluster.link_gbps.tolist() == [10.0, 10.0]


def test_nodebandwidth_status_rebuilds_the_state_not_the_cluster():
    m = base_model()
    pod = K.pod("a-0", labels=K.job_labels("a"), node="n0", phase="Running")
    m.on_event("Pod", "ADDED", pod)
    nbw = K.nodebandwidth("n0")
    m.on_event("NodeBandwidth", "ADDED", nbw)
    cluster = m.cluster()
    assert m.state().placed["default/a-0"].shift_ms == 0.0
    rebuilds = m.rebuilds
    nbw = bump(nbw, 2, status={"pods": [{"namespace": "default", "name": "a-0", "order": 0,
                                         "shiftMs": 12.5}]})
    m.on_event("NodeBandwidth", "MODIFIED", nbw)
    assert m.state().placed["default/a-0"].shift_ms == 12.5
    assert m.rebuilds == rebuilds + 1 and m.cluster() is cluster
    # a status this process writes itself: expect() before the write; the watch echo
    # may overtake the writer's answer (reflected=True) -- neither forces a rebuild
    status = {"pods": [{"namespace": "default", "name": "a-0", "order": 0, "shiftMs": 20.0}]}
    m.expect("NodeBandwidth", "n0", status)
    m.on_event("NodeBandwidth", "MODIFIED", bump(nbw, 3, status=status))  # the echo first
    m.on_event("NodeBandwidth", "MODIFIED", bump(nbw, 3, status=status), reflected=True)
    m.state()
    assert m.rebuilds == rebuilds + 1
    # someone else's status write does
    other = {"pods": [{"namespace": "default", "name": "a-0", "order": 0, "shiftMs": 30.0}]}
    m.on_event("NodeBandwidth", "MODIFIED", bump(nbw, 4, status=other))
    assert m.state().placed["default/a-0"].shift_ms == 30.0
    assert m.rebuilds == rebuilds + 2


def test_deleting_a_nodebandwidth_drops_its_recorded_shifts():
    """The shifts come from NodeBandwidth status: once the object is gone, a rebuilt
    state (and a restarted process) has none."""
    m = base_model()
    m.on_event("Pod", "ADDED", K.pod("a-0", labels=K.job_labels("a"), node="n0",
                                     phase="Running"))
    nbw = K.nodebandwidth("n0")
    nbw["status"] = {"pods": [{"namespace": "default", "name": "a-0", "order": 3,
                               "shiftMs": 12.5}]}
    m.on_event("NodeBandwidth", "ADDED", nbw)
    assert m.state().placed["default/a-0"].shift_ms == 12.5
    m.on_event("NodeBandwidth", "DELETED", bump(nbw, 2))
    assert m.recorded() == {}
    fresh = base_model()  # what a restarted process builds from the same objects
    fresh.on_event("Pod", "ADDED", copy.deepcopy(m.objects["Pod"]["default/a-0"]))
    assert fresh.state().placed["default/a-0"].shift_ms == 0.0
    assert m.state().placed["default/a-0"].shift_ms == 0.0


def test_over_committed_node_still_records_every_pod():
    m = base_model()
    # 3 pods x 4 GPUs = 12 on an 8-GPU node (bound by someone else)
    for i in range(3):
        m.on_event("Pod", "ADDED", K.pod(f"a-{i}", gpu=4, labels=K.job_labels("a"),
                                         node="n0", phase="Running",
                                         created=f"2026-11-20T00:00:0{i}Z"))
    state = m.state()
    assert state.node_pods[0] == ["default/a-0", "default/a-1", "default/a-2"]
    assert state.used_gpu[0] == 12.0 and state.free_gpu[0] == -4.0
    assert state.used_cpu[0] == 3 * 4.0 and state.used_mem[0] == 3 * 16.0
    assert m.skipped == {}


def test_unusable_pods_are_skipped_not_fatal():
    m = base_model()
    m.on_event("Pod", "ADDED", K.pod("ok", labels=K.job_labels("a"), node="n0"))
    m.on_event("Pod", "ADDED", K.pod("bad", labels={PRIO: "urgent"}, node="n0"))
    m.on_event("Pod", "ADDED", K.pod("lost", labels=K.job_labels("a"), node="gone"))
    state = m.state()
    assert list(state.placed) == ["default/ok"]
    assert "tdmcore.io/priority" in m.skipped["Pod/default/bad"]


def test_objects_left_out_are_logged_once_and_a_nodebandwidth_without_node_too(caplog):
    """An operator's review (2026-11-24): a NodeBandwidth named after no Node
    ('gpu-nod-3') and a pod the cache could not use were left out without a word."""
    m = base_model()
    m.on_event("NodeBandwidth", "ADDED", K.nodebandwidth("gpu-nod-3", "10G"))
    m.on_event("Pod", "ADDED", K.pod("bad", labels={PRIO: "urgent"}, node="n0"))
    with caplog.at_level("WARNING", logger="k8s_bridge.cache"):
        m.state()
        m.on_event("Pod", "ADDED", K.pod("ok", labels=K.job_labels("a"), node="n0"))
        m.state()  # rebuilt: the same two objects left out, not logged again
    said = sorted(r.getMessage() for r in caplog.records)
    assert len(said) == 2, said
    assert said[0].startswith("NodeBandwidth/gpu-nod-3 left out: names no Node")
    assert said[1].startswith("Pod/default/bad left out: ") and "tdmcore.io/priority" in said[1]
    assert "NodeBandwidth/gpu-nod-3" in m.skipped


def test_placement_order_follows_recorded_order_then_creation():
    m = base_model()
    created = {"p1": "2026-11-20T00:00:03Z", "p2": "2026-11-20T00:00:01Z",
               "p3": "2026-11-20T00:00:02Z", "p4": "2026-11-20T00:00:00Z"}
    for name, stamp in created.items():
        m.on_event("Pod", "ADDED", K.pod(name, labels={A.LABEL_JOB: name}, node="n0",
                                         phase="Running", created=stamp))
    nbw = K.nodebandwidth("n0")
    nbw["status"] = {"pods": [
        {"namespace": "default", "name": "p1", "order": 2, "shiftMs": 12.5},
        {"name": "p3", "order": 1, "shiftMs": 40},        # no namespace: "default"
        {"namespace": "default", "name": "p2", "order": True, "shiftMs": True},  # not numbers
    ]}
    m.on_event("NodeBandwidth", "ADDED", nbw)
    state = m.state()
    # recorded orders first (p3: 1, p1: 2), then by creation (p4 00:00:00, p2 00:00:01)
    assert state.node_pods[0] == ["default/p3", "default/p1", "default/p4", "default/p2"]
    assert [state.placed[k].order for k in state.node_pods[0]] == [0, 1, 2, 3]
    assert {k: p.shift_ms for k, p in state.placed.items()} == {
        "default/p1": 12.5, "default/p2": 0.0, "default/p3": 40.0, "default/p4": 0.0}


def test_nodes_are_in_name_order_and_schedulable_is_tracked():
    m = ClusterModel()
    for node in (K.node("n2", unschedulable=True), K.node("n0"), K.node("n1", ready=False)):
        m.on_event("Node", "ADDED", node)
    assert m.node_names() == ["n0", "n1", "n2"]
    assert m.schedulable == [True, False, False]
    with pytest.raises(LookupError):
        ClusterModel().state()


@pytest.mark.parametrize("link", [0.0, -1.0, math.nan, math.inf])
def test_cluster_model_rejects_a_bad_default_link(link):
    with pytest.raises(ValueError, match="default_link_gbps"):
        ClusterModel(default_link_gbps=link)
