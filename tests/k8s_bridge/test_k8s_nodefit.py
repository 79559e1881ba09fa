"""A pod's own node constraints (k8s_bridge/nodefit.py), case by case as kube-scheduler's
NodeAffinity and TaintToleration filters decide them (component-helpers' nodeaffinity,
``Toleration.ToleratesTaint``)."""

from __future__ import annotations

from typing import Any

import pytest

from k8s_bridge.nodefit import matches_required_affinity, tolerates, untolerated_taint, why_not

NODE = {"metadata": {"name": "gpu-1", "labels": {"pool": "a100", "gpus": "8",
                                                  "zone": "z1"}},
        "spec": {}}


def _pod(selector: dict[str, str] | None = None, terms: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["nodeSelector"] = selector
    if terms is not None:
        spec["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    return {"spec": spec}


def _expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


AFFINITY = [
    ("no constraint", _pod(), True),
    ("selector matches", _pod({"pool": "a100"}), True),
    ("selector: one key of two differs", _pod({"pool": "a100", "zone": "z2"}), False),
    ("selector: key absent", _pod({"rack": "r1"}), False),
    ("In", _pod(terms=[{"matchExpressions": [_expr("pool", "In", "v100", "a100")]}]), True),
    ("In, not among the values", _pod(terms=[{"matchExpressions": [
        _expr("pool", "In", "v100")]}]), False),
    ("In, label absent", _pod(terms=[{"matchExpressions": [_expr("rack", "In", "r")]}]), False),
    ("NotIn, label absent matches", _pod(terms=[{"matchExpressions": [
        _expr("rack", "NotIn", "r")]}]), True),
    ("NotIn, value listed", _pod(terms=[{"matchExpressions": [
        _expr("pool", "NotIn", "a100")]}]), False),
    ("Exists", _pod(terms=[{"matchExpressions": [_expr("zone", "Exists")]}]), True),
    ("DoesNotExist", _pod(terms=[{"matchExpressions": [_expr("zone", "DoesNotExist")]}]),
     False),
    # 8 > 4 and 8 < 16; 8 > 8 is false; a value that is not an integer matches nothing
    ("Gt", _pod(terms=[{"matchExpressions": [_expr("gpus", "Gt", "4")]}]), True),
    ("Gt, equal", _pod(terms=[{"matchExpressions": [_expr("gpus", "Gt", "8")]}]), False),
    ("Lt", _pod(terms=[{"matchExpressions": [_expr("gpus", "Lt", "16")]}]), True),
    ("Gt, label not an integer", _pod(terms=[{"matchExpressions": [
        _expr("pool", "Gt", "1")]}]), False),
    ("Lt, a value Go does not parse (1_0)", _pod(terms=[{"matchExpressions": [
        _expr("gpus", "Lt", "1_0")]}]), False),
    ("Lt, beyond int64", _pod(terms=[{"matchExpressions": [
        _expr("gpus", "Lt", str(1 << 63))]}]), False),
    ("Gt, a signed value", _pod(terms=[{"matchExpressions": [_expr("gpus", "Gt", "+4")]}]),
     True),
    ("Gt, two values", _pod(terms=[{"matchExpressions": [_expr("gpus", "Gt", "1", "2")]}]),
     False),
    ("an unknown operator", _pod(terms=[{"matchExpressions": [_expr("pool", "Like", "a")]}]),
     False),
    ("expressions are ANDed", _pod(terms=[{"matchExpressions": [
        _expr("pool", "In", "a100"), _expr("zone", "In", "z2")]}]), False),
    ("terms are ORed", _pod(terms=[{"matchExpressions": [_expr("zone", "In", "z2")]},
                                   {"matchExpressions": [_expr("zone", "In", "z1")]}]), True),
    ("an empty term matches nothing", _pod(terms=[{}]), False),
    ("no terms match nothing", _pod(terms=[]), False),
    ("matchFields on the name", _pod(terms=[{"matchFields": [
        _expr("metadata.name", "In", "gpu-1")]}]), True),
    ("matchFields NotIn the name", _pod(terms=[{"matchFields": [
        _expr("metadata.name", "NotIn", "gpu-1")]}]), False),
    ("matchFields on another field", _pod(terms=[{"matchFields": [
        _expr("spec.unschedulable", "In", "gpu-1")]}]), False),
    ("matchFields and expressions ANDed", _pod(terms=[{
        "matchFields": [_expr("metadata.name", "In", "gpu-1")],
        "matchExpressions": [_expr("pool", "In", "v100")]}]), False),
    ("selector and affinity both needed", _pod({"pool": "v100"}, terms=[
        {"matchExpressions": [_expr("zone", "Exists")]}]), False),
]


@pytest.mark.parametrize(("pod", "expected"), [(p, e) for _, p, e in AFFINITY],
                         ids=[c for c, _, _ in AFFINITY])
def test_node_selector_and_required_affinity(pod: dict[str, Any], expected: bool) -> None:
    assert matches_required_affinity(pod, NODE) is expected
    assert (why_not(pod, NODE) is None) is expected


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATIONS = [
    ("Exists on the key", {"key": "nvidia.com/gpu", "operator": "Exists"}, True),
    ("Equal, same value", {"key": "nvidia.com/gpu", "value": "present"}, True),
    ("Equal, another value", {"key": "nvidia.com/gpu", "operator": "Equal", "value": "x"},
     False),
    ("another key", {"key": "dedicated", "operator": "Exists"}, False),
    ("another effect", {"key": "nvidia.com/gpu", "operator": "Exists",
                        "effect": "NoExecute"}, False),
    ("same effect", {"key": "nvidia.com/gpu", "operator": "Exists",
                     "effect": "NoSchedule"}, True),
    ("Exists without a key tolerates everything", {"operator": "Exists"}, True),
    ("an unknown operator", {"key": "nvidia.com/gpu", "operator": "Lt"}, False),
]


@pytest.mark.parametrize(("toleration", "expected"), [(t, e) for _, t, e in TOLERATIONS],
                         ids=[c for c, _, _ in TOLERATIONS])
def test_a_toleration_against_a_taint(toleration: dict[str, str], expected: bool) -> None:
    assert tolerates(toleration, GPU_TAINT) is expected


def test_only_no_schedule_and_no_execute_taints_keep_a_pod_off() -> None:
    soft = {"key": "spot", "effect": "PreferNoSchedule"}
    evict = {"key": "maintenance", "effect": "NoExecute"}
    assert untolerated_taint([], [soft]) is None
    assert untolerated_taint([], [soft, GPU_TAINT, evict]) == GPU_TAINT
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists"}
    assert untolerated_taint([gpu], [soft, GPU_TAINT, evict]) == evict
    assert untolerated_taint([gpu, {"key": "maintenance", "operator": "Exists"}],
                             [GPU_TAINT, evict]) is None
    node = {"metadata": {"name": "gpu-1"}, "spec": {"taints": [GPU_TAINT]}}
    assert why_not({"spec": {}}, node) == ("node 'gpu-1' has the taint nvidia.com/gpu=present:"
                                           "NoSchedule, which the pod does not tolerate")
    assert why_not({"spec": {"tolerations": [gpu]}}, node) is None
