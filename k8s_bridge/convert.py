"""Kubernetes JSON -> tdmcore's domain objects (spec/kubernetes.md "Resources").

Everything here is a pure function of plain JSON dicts as the API server sends
them, so the extender, the standalone scheduler and the controller read the
cluster the same way.  Malformed objects raise :class:`ValueError` naming the
field; the caller decides whether that is a client's bad request (HTTP 400) or an
object to skip (a watch event it cannot use).

Conventions (documented in the README's Kubernetes section):

* pod identity: ``<namespace>/<name>``; job identity: ``<namespace>/<job>`` where
  ``<job>`` is the Kubeflow label ``training.kubeflow.org/job-name``, else
  ``tdmcore.io/job``, else the coscheduling PodGroup label, else the pod's name.
  A pod in an AppGroup (``appgroup.diktyo.x-k8s.io``) with a workload selector
  (``appgroup.diktyo.x-k8s.io.workload``) belongs to the job
  ``<namespace>/<appgroup>.<selector>``: the AppGroup's dependencies name workload
  selectors, and a dependency is between jobs (spec/metronome.md §1).
* priority: label ``tdmcore.io/priority`` = ``high`` / ``low`` / an integer
  (larger is higher); absent = ``low``.
* LowComm (the paper's Table II): label ``low_comm: "true"``.  A pod that is not
  LowComm but has no PodBandwidth is treated as LowComm too: with no traffic
  pattern there is nothing to multiplex.
* traffic pattern: the PodBandwidth in the pod's namespace whose ``spec.podName``
  is the pod, else the oldest one whose ``spec.selector`` matches its labels; the
  controller's pattern update (``status.observedPeriodMs``/``observedDutyCycle``)
  overrides the spec.
* link bandwidth: ``NodeBandwidth.spec.bandwidth``: a number is Gbps, a string is a
  Kubernetes quantity in bit/s (``"25G"`` = 25 Gbps, ``"25Gi"`` = 26.84 Gbps).
* gang size: the ``spec.minMember`` of the pod's coscheduling PodGroup (label
  ``scheduling.x-k8s.io/pod-group``), or the group's live pods when it has more
  (:func:`gang_size`); unknown without a PodGroup.
* spread: a required pod anti-affinity on the job's label (:func:`spread_of`).

A pod becomes a :class:`~tdmcore.model.Pod` through the Core intake
:func:`tdmcore.model.gang_pods`, the simulator's too.
"""

from __future__ import annotations

import calendar
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from decimal import InvalidOperation
from typing import Any

import numpy as np
from kubernetes.utils import parse_quantity
from numpy.typing import NDArray

from tdmcore.model import Node, Pod, TrafficPattern, Workload, gang_pods, priority_value

from .api import (
    GPU_RESOURCE,
    LABEL_APPGROUP,
    LABEL_JOB,
    LABEL_KUBEFLOW_JOB,
    LABEL_LOW_COMM,
    LABEL_POD_GROUP,
    LABEL_PRIORITY,
    LABEL_WORKLOAD,
)

__all__ = [
    "PodConfigError",
    "gang_key",
    "gang_size",
    "job_label_keys",
    "job_of",
    "latency_matrix",
    "latency_update",
    "link_gbps",
    "matches_selector",
    "min_member",
    "node_from_json",
    "pattern_for",
    "podbandwidth_for",
    "pod_from_json",
    "pod_identity",
    "pod_key",
    "pod_requests",
    "quantity",
    "spread_of",
    "topology_keys",
    "workloads_from_appgroups",
]


class PodConfigError(ValueError):
    """A pod the API server accepted that tdmcore cannot read: its tdmcore priority
    label, or the PodBandwidth that describes it.  The request carrying the pod was
    well formed; the pod stays unschedulable by tdmcore until it (or its
    PodBandwidth) changes."""

GIB = 2.0**30


def _dict(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{name}: expected an object, got {type(value).__name__}")
    return value


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name}: expected a non-empty string, got {value!r:.60}")
    return value


def quantity(value: Any, name: str) -> float:
    """A Kubernetes quantity (``"500m"``, ``"16Gi"``, ``4``) as a float."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{name}: expected a quantity, got {value!r}")
    try:
        number = float(parse_quantity(value))
    except (ValueError, TypeError, InvalidOperation) as exc:
        raise ValueError(f"{name}: {value!r:.60} is not a Kubernetes quantity") from exc
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{name}: expected a finite quantity >= 0, got {value!r:.60}")
    return number


def bind_order(pod: Mapping[str, Any]) -> int:
    """A placed pod's place in the deploy order, when no NodeBandwidth entry recorded
    it: its bind time as the API has it (the ``PodScheduled`` condition the binding
    sets, to the second), else its creation time, in microseconds since the epoch
    (0 when neither parses).  Recorded entries carry the extender's bind time to the
    microsecond, so both are bind times (the one rule of the controller's new entries
    and of the cache's unrecorded pods)."""
    stamp = ""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled" \
                and cond.get("status") == "True":
            stamp = str(cond.get("lastTransitionTime") or "")
    if not stamp:
        stamp = str((pod.get("metadata") or {}).get("creationTimestamp", ""))
    try:
        return int(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))) * 1_000_000
    except ValueError:
        return 0


def pod_key(pod: Mapping[str, Any]) -> str:
    """``<namespace>/<name>`` of a pod JSON object."""
    meta = _dict(pod.get("metadata"), "Pod.metadata")
    namespace = meta.get("namespace") or "default"
    name = _str(meta.get("name"), "Pod.metadata.name")
    return f"{_str(namespace, 'Pod.metadata.namespace')}/{name}"


def pod_identity(pod: Mapping[str, Any]) -> str:
    """The pod's UID, else its ``<namespace>/<name>``: a pod deleted and created again
    under its name is another pod (what is said once about a pod is keyed by this)."""
    uid = _dict(pod.get("metadata"), "Pod.metadata").get("uid")
    return uid if isinstance(uid, str) and uid else pod_key(pod)


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = _dict(obj.get("metadata"), "metadata")
    labels = _dict(meta.get("labels"), "metadata.labels")
    for k, v in labels.items():
        if not isinstance(v, str):
            raise ValueError(f"metadata.labels: the value of {k!r} must be a string")
    return labels


def job_label_keys(labels: Mapping[str, str]) -> tuple[str, ...]:
    """The label keys that give a pod its job (see the module docstring): the
    AppGroup's two, else the first of the Kubeflow, tdmcore and PodGroup labels the
    pod carries; none when the pod is a job of its own."""
    if labels.get(LABEL_APPGROUP) and labels.get(LABEL_WORKLOAD):
        return (LABEL_APPGROUP, LABEL_WORKLOAD)
    for key in (LABEL_KUBEFLOW_JOB, LABEL_JOB, LABEL_POD_GROUP):
        if labels.get(key):
            return (key,)
    return ()


def job_of(pod: Mapping[str, Any]) -> str:
    """The job identity of a pod (see the module docstring)."""
    meta = _dict(pod.get("metadata"), "Pod.metadata")
    namespace = meta.get("namespace") or "default"
    labels = labels_of(pod)
    keys = job_label_keys(labels)
    if len(keys) == 2:
        return f"{namespace}/{labels[keys[0]]}.{labels[keys[1]]}"
    if keys:
        return f"{namespace}/{labels[keys[0]]}"
    return f"{namespace}/{_str(meta.get('name'), 'Pod.metadata.name')}"


def gang_key(pod: Mapping[str, Any]) -> str | None:
    """``<namespace>/<group>`` of a coscheduling PodGroup member, else None."""
    meta = pod.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    group = labels.get(LABEL_POD_GROUP) if isinstance(labels, Mapping) else None
    if not isinstance(group, str) or not group:
        return None
    assert isinstance(meta, Mapping)
    return f"{meta.get('namespace') or 'default'}/{group}"


def min_member(podgroup: Mapping[str, Any] | None) -> int:
    """A PodGroup's ``spec.minMember`` (1 when absent or not an integer >= 1: the
    CRD defaults and validates it), the one reading of it in the bridge."""
    need = ((podgroup or {}).get("spec") or {}).get("minMember", 1)
    if not isinstance(need, int) or isinstance(need, bool) or need < 1:
        return 1
    return need


def gang_size(podgroup: Mapping[str, Any] | None, members: int) -> int | None:
    """The ``gang_size`` of a PodGroup's pods: its ``minMember``, or ``members`` (the
    group's live pods) when there are more; None without a PodGroup (unknown).

    **[decision]** coscheduling's ``minMember`` is the number of pods placed
    together; a group may hold more (an elastic job grown past it), and the
    simulator's ``gang_size`` is the job's whole size, which a job must not
    exceed (``ClusterState.check_pod``), so the larger of the two is taken.
    """
    if podgroup is None:
        return None
    return max(min_member(podgroup), members)


#: The topology key of an anti-affinity that keeps pods on distinct nodes.
HOSTNAME_KEY = "kubernetes.io/hostname"


def _selector_keys(selector: Mapping[str, Any]) -> set[str]:
    keys = set(_dict(selector.get("matchLabels"), "labelSelector.matchLabels"))
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        keys.add(str(_dict(expr, f"labelSelector.matchExpressions[{i}]").get("key")))
    return keys


def spread_of(pod: Mapping[str, Any]) -> bool:
    """Whether the pod may share no node with another pod of its job: a required
    pod anti-affinity term (``spec.affinity.podAntiAffinity
    .requiredDuringSchedulingIgnoredDuringExecution``) on ``kubernetes.io/hostname``
    whose label selector matches the pod itself and constrains only the labels that
    give it its job (:func:`job_label_keys`), in its own namespace.

    **[decision]** Those are the terms that match every pod of the job (they share
    the job's labels, not necessarily others), which is what ``spread`` means
    (:func:`tdmcore.model.gang_pods`).  A term on other labels as well (a replica
    type, say), on another topology key, or with a namespace selector that is not
    empty is not read as ``spread``; kube-scheduler still enforces it in extender
    mode.
    """
    spec = _dict(pod.get("spec"), "Pod.spec")
    anti = _dict(_dict(spec.get("affinity"), "Pod.spec.affinity").get("podAntiAffinity"),
                 "Pod.spec.affinity.podAntiAffinity")
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    if not isinstance(terms, list):
        raise ValueError("Pod.spec.affinity.podAntiAffinity."
                         "requiredDuringSchedulingIgnoredDuringExecution: expected a list")
    labels = labels_of(pod)
    keys = set(job_label_keys(labels))
    namespace = _dict(pod.get("metadata"), "Pod.metadata").get("namespace") or "default"
    for i, term in enumerate(terms):
        term = _dict(term, f"podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
        selector = term.get("labelSelector")
        if term.get("topologyKey") != HOSTNAME_KEY or not isinstance(selector, dict):
            continue
        namespaces = term.get("namespaces") or []
        if (namespaces and namespace not in namespaces) or term.get("namespaceSelector"):
            continue
        constrained = _selector_keys(selector)
        if keys and constrained and constrained <= keys and matches_selector(selector, labels):
            return True
    return False


def _container_requests(container: Mapping[str, Any], where: str) -> tuple[float, float, float]:
    resources = _dict(container.get("resources"), f"{where}.resources")
    requests = _dict(resources.get("requests"), f"{where}.resources.requests")
    limits = _dict(resources.get("limits"), f"{where}.resources.limits")
    out = []
    for key in ("cpu", "memory", GPU_RESOURCE):
        # A limit without a request defaults the request to the limit (API defaulting).
        value = requests.get(key, limits.get(key))
        out.append(0.0 if value is None else quantity(value, f"{where}.resources.{key}"))
    return out[0], out[1] / GIB, out[2]


def pod_requests(pod: Mapping[str, Any]) -> tuple[float, float, float]:
    """Effective (cpu cores, memory GiB, GPUs) as kube-scheduler computes them:
    max(sum over containers, max over init containers) + overhead."""
    spec = _dict(pod.get("spec"), "Pod.spec")
    containers = spec.get("containers") or []
    init = spec.get("initContainers") or []
    if not isinstance(containers, list) or not isinstance(init, list):
        raise ValueError("Pod.spec.containers: expected a list")
    total = np.zeros(3)
    for i, c in enumerate(containers):
        total += _container_requests(_dict(c, f"Pod.spec.containers[{i}]"),
                                     f"Pod.spec.containers[{i}]")
    for i, c in enumerate(init):
        total = np.maximum(total, _container_requests(
            _dict(c, f"Pod.spec.initContainers[{i}]"), f"Pod.spec.initContainers[{i}]"))
    overhead = _dict(spec.get("overhead"), "Pod.spec.overhead")
    for j, key in enumerate(("cpu", "memory", GPU_RESOURCE)):
        if key in overhead:
            value = quantity(overhead[key], f"Pod.spec.overhead.{key}")
            total[j] += value / GIB if key == "memory" else value
    return float(total[0]), float(total[1]), float(total[2])


def matches_selector(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels, matchExpressions) against labels."""
    for k, v in _dict(selector.get("matchLabels"), "selector.matchLabels").items():
        if labels.get(k) != v:
            return False
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        expr = _dict(expr, f"selector.matchExpressions[{i}]")
        key, op = str(expr.get("key")), expr.get("operator")
        values = expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"selector.matchExpressions[{i}].operator: unknown {op!r}")
    return True


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: expected a number, got {value!r:.60}")
    return float(value)


def pattern_of_podbandwidth(pbw: Mapping[str, Any]) -> TrafficPattern:
    """The traffic pattern a PodBandwidth describes (status overrides spec)."""
    spec = _dict(pbw.get("spec"), "PodBandwidth.spec")
    status = _dict(pbw.get("status"), "PodBandwidth.status")
    period = status.get("observedPeriodMs", spec.get("period"))
    duty = status.get("observedDutyCycle", spec.get("duty_cycle"))
    try:
        return TrafficPattern(_number(period, "PodBandwidth.spec.period"),
                              _number(duty, "PodBandwidth.spec.duty_cycle"),
                              _number(spec.get("bandwidth"), "PodBandwidth.spec.bandwidth"))
    except ValueError as exc:
        raise ValueError(f"PodBandwidth.spec: {exc}") from exc


def podbandwidth_for(pod: Mapping[str, Any], podbandwidths: Iterable[Mapping[str, Any]]
                     ) -> Mapping[str, Any] | None:
    """The PodBandwidth describing ``pod``: by ``spec.podName``, else the oldest
    (creation time, then name) whose ``spec.selector`` matches its labels."""
    labels = labels_of(pod)
    meta = _dict(pod.get("metadata"), "Pod.metadata")
    namespace = meta.get("namespace") or "default"
    name = meta.get("name")
    by_selector: list[tuple[str, str, Mapping[str, Any]]] = []
    for pbw in podbandwidths:
        pmeta = _dict(pbw.get("metadata"), "PodBandwidth.metadata")
        if (pmeta.get("namespace") or "default") != namespace:
            continue
        spec = _dict(pbw.get("spec"), "PodBandwidth.spec")
        if spec.get("podName") == name:
            return pbw
        selector = spec.get("selector")
        if isinstance(selector, dict) and matches_selector(selector, labels):
            by_selector.append((str(pmeta.get("creationTimestamp", "")),
                                str(pmeta.get("name", "")), pbw))
    if by_selector:
        return min(by_selector, key=lambda t: (t[0], t[1]))[2]
    return None


def pattern_for(pod: Mapping[str, Any], podbandwidths: Iterable[Mapping[str, Any]]
                ) -> TrafficPattern | None:
    """The pod's traffic pattern, or None (LowComm) -- see the module docstring."""
    if labels_of(pod).get(LABEL_LOW_COMM, "").lower() == "true":
        return None
    pbw = podbandwidth_for(pod, podbandwidths)
    return None if pbw is None else pattern_of_podbandwidth(pbw)


def pod_from_json(pod: Mapping[str, Any], podbandwidths: Iterable[Mapping[str, Any]] = (),
                  workloads: Mapping[str, Workload] | None = None,
                  gang_sizes: Mapping[str, int] | None = None) -> Pod:
    """A tdmcore :class:`~tdmcore.model.Pod` from a v1 Pod JSON object, through the
    Core intake :func:`tdmcore.model.gang_pods`.

    ``gang_sizes``: ``<namespace>/<group>`` -> the :func:`gang_size` of each PodGroup
    (the cache keeps it); a member of a group not listed has an unknown size.
    """
    if not isinstance(pod, Mapping):
        raise ValueError(f"Pod: expected an object, got {type(pod).__name__}")
    key = pod_key(pod)
    labels = labels_of(pod)
    cpu, mem, gpu = pod_requests(pod)
    spread = spread_of(pod)
    raw = labels.get(LABEL_PRIORITY, "low")
    try:
        priority = int(raw) if re.fullmatch(r"-?[0-9]{1,9}", raw) else priority_value(
            raw, f"Pod.metadata.labels[{LABEL_PRIORITY!r}]")
        pattern = pattern_for(pod, podbandwidths)
    except ValueError as exc:  # what the API server does not check: tdmcore's own
        raise PodConfigError(str(exc)) from exc
    namespace = key.split("/", 1)[0]
    workload = None
    if labels.get(LABEL_APPGROUP) and labels.get(LABEL_WORKLOAD):
        name = f"{namespace}/{labels[LABEL_APPGROUP]}"
        if workloads is None or name in workloads:
            workload = name
    group = gang_key(pod)
    size = None if group is None or gang_sizes is None else gang_sizes.get(group)
    return gang_pods(job_of(pod), [key], gang_size=size, cpu=cpu, mem_gib=mem, gpu=gpu,
                     pattern=pattern, priority=priority, workload=workload,
                     spread=spread)[0]


def link_gbps(nodebandwidth: Mapping[str, Any] | None, default: float) -> float:
    """The host link's capacity (Gbps) a NodeBandwidth declares, else ``default``."""
    if nodebandwidth is None:
        return default
    spec = _dict(nodebandwidth.get("spec"), "NodeBandwidth.spec")
    value = spec.get("bandwidth")
    if value is None:
        return default
    if isinstance(value, str):
        gbps = quantity(value, "NodeBandwidth.spec.bandwidth") / 1e9
    else:
        gbps = _number(value, "NodeBandwidth.spec.bandwidth")
    if not math.isfinite(gbps) or gbps <= 0:
        raise ValueError(f"NodeBandwidth.spec.bandwidth: must be > 0, got {value!r}")
    return gbps


def node_from_json(node: Mapping[str, Any], link: float) -> Node:
    """A tdmcore :class:`~tdmcore.model.Node` from a v1 Node (its allocatable)."""
    meta = _dict(node.get("metadata"), "Node.metadata")
    name = _str(meta.get("name"), "Node.metadata.name")
    status = _dict(node.get("status"), "Node.status")
    alloc = _dict(status.get("allocatable"), "Node.status.allocatable")
    cpu = quantity(alloc.get("cpu", 0), "Node.status.allocatable.cpu")
    mem = quantity(alloc.get("memory", 0), "Node.status.allocatable.memory") / GIB
    gpu = quantity(alloc.get(GPU_RESOURCE, 0), f"Node.status.allocatable.{GPU_RESOURCE}")
    return Node(name=name, cpu=cpu, mem_gib=mem, gpu=gpu, link_gbps=link)


def node_schedulable(node: Mapping[str, Any]) -> bool:
    """Ready and not cordoned (``spec.unschedulable``)."""
    if _dict(node.get("spec"), "Node.spec").get("unschedulable"):
        return False
    for cond in _dict(node.get("status"), "Node.status").get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return True


def latency_matrix(nodes: Sequence[Mapping[str, Any]],
                   topologies: Iterable[Mapping[str, Any]], weights: str = "UserDefined"
                   ) -> NDArray[np.float64] | None:
    """``tau`` (Table I) from a networkaware NetworkTopology, or None (flat network).

    **[decision]** ``tau[x, y] = 1 + cost``, with the cost of the two nodes' zones
    (label ``topology.kubernetes.io/zone``) when they differ, else of their regions
    (``topology.kubernetes.io/region``) when those differ, else 0, read from the
    first NetworkTopology's weights named ``weights`` (CRD field names:
    ``spec.weights[].topologyList[].originList[].costList[]``).  Pairs without a
    listed cost count 0.
    """
    costs = _topology_costs(topologies, weights)
    if costs is None:
        return None
    keys = [topology_keys(n) for n in nodes]
    tau = _latency_block(keys, keys, costs)
    np.fill_diagonal(tau, 1.0)
    return tau


def topology_keys(node: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """A node's zone and region labels (what :func:`latency_matrix` reads of it)."""
    labels = labels_of(node)
    return labels.get(_ZONE), labels.get(_REGION)


def latency_update(tau: NDArray[np.float64], keys: Sequence[tuple[str | None, str | None]],
                   changed: Sequence[int], topologies: Iterable[Mapping[str, Any]],
                   weights: str = "UserDefined") -> NDArray[np.float64] | None:
    """:func:`latency_matrix` after the zone or region of the nodes ``changed`` moved
    (``keys``: every node's :func:`topology_keys`, new): a copy of ``tau`` with those
    rows and columns recomputed -- the same entries, in O(N) per changed node
    instead of O(N^2); None without a topology."""
    costs = _topology_costs(topologies, weights)
    if costs is None:
        return None
    rows = np.asarray(changed, dtype=np.int64)
    moved = [keys[i] for i in changed]
    out = np.array(tau, dtype=np.float64)
    out[rows, :] = _latency_block(moved, keys, costs)
    out[:, rows] = _latency_block(keys, moved, costs)
    out[rows, rows] = 1.0
    return out


def _topology_costs(topologies: Iterable[Mapping[str, Any]], weights: str
                    ) -> dict[str, dict[tuple[str, str], float]] | None:
    """topologyKey -> (origin, destination) -> cost, from the first NetworkTopology's
    weights named ``weights`` (None: no such topology)."""
    topology = next(iter(topologies), None)
    if topology is None:
        return None
    spec = _dict(topology.get("spec"), "NetworkTopology.spec")
    chosen = None
    for w in spec.get("weights") or []:
        if isinstance(w, dict) and w.get("name") == weights:
            chosen = w
    if chosen is None:
        return None
    costs: dict[str, dict[tuple[str, str], float]] = {}
    for t in chosen.get("topologyList") or []:
        key = _str(_dict(t, "topologyList[]").get("topologyKey"), "topologyList[].topologyKey")
        table = costs.setdefault(key, {})
        for origin in t.get("originList") or []:
            src = _str(_dict(origin, "originList[]").get("origin"), "originList[].origin")
            for c in origin.get("costList") or []:
                c = _dict(c, "costList[]")
                dst = _str(c.get("destination"), "costList[].destination")
                table[(src, dst)] = _number(c.get("networkCost", 0), "costList[].networkCost")
    return costs


_ZONE = "topology.kubernetes.io/zone"
_REGION = "topology.kubernetes.io/region"


def _latency_block(sources: Sequence[tuple[str | None, str | None]],
                   targets: Sequence[tuple[str | None, str | None]],
                   costs: Mapping[str, Mapping[tuple[str, str], float]]
                   ) -> NDArray[np.float64]:
    """``1 + cost`` from each of ``sources`` to each of ``targets`` (their
    :func:`topology_keys`; the diagonal of a node to itself is the caller's)."""
    zone_cost, zone_known = _pair_costs([k[0] for k in sources], [k[0] for k in targets],
                                        costs.get(_ZONE, {}))
    region_cost, region_known = _pair_costs([k[1] for k in sources], [k[1] for k in targets],
                                            costs.get(_REGION, {}))
    # zones differ -> the zone cost; else regions differ -> the region cost; else 0
    cost = np.where(zone_known, zone_cost, np.where(region_known, region_cost, 0.0))
    return np.asarray(1.0 + np.maximum(cost, 0.0), dtype=np.float64)


def _pair_costs(sources: Sequence[str | None], targets: Sequence[str | None],
                table: Mapping[tuple[str, str], float]
                ) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Per (source, target) pair: the listed cost between their (different) keys, and
    whether both have a key and the keys differ."""
    names = sorted({k for k in (*sources, *targets) if k})
    index = {k: i for i, k in enumerate(names)}
    z = len(names)
    table_m = np.zeros((z + 1, z + 1))
    for (src, dst), c in table.items():
        if src in index and dst in index:
            table_m[index[src], index[dst]] = c
    si = np.array([index[k] if k else z for k in sources], dtype=np.int64)
    di = np.array([index[k] if k else z for k in targets], dtype=np.int64)
    differ = (si[:, None] != di[None, :]) & (si[:, None] < z) & (di[None, :] < z)
    return table_m[si[:, None], di[None, :]], differ


def workloads_from_appgroups(appgroups: Iterable[Mapping[str, Any]]) -> list[Workload]:
    """One :class:`~tdmcore.model.Workload` per AppGroup: its workload selectors are
    jobs (``<ns>/<appgroup>.<selector>``) and its dependencies pairs of them."""
    out = []
    for ag in appgroups:
        meta = _dict(ag.get("metadata"), "AppGroup.metadata")
        namespace = meta.get("namespace") or "default"
        name = _str(meta.get("name"), "AppGroup.metadata.name")
        spec = _dict(ag.get("spec"), "AppGroup.spec")
        jobs: list[str] = []
        deps: list[tuple[str, str]] = []
        for entry in spec.get("workloads") or []:
            entry = _dict(entry, "AppGroup.spec.workloads[]")
            sel = _str(_dict(entry.get("workload"), "workloads[].workload").get("selector"),
                       "AppGroup.spec.workloads[].workload.selector")
            job = f"{namespace}/{name}.{sel}"
            if job not in jobs:
                jobs.append(job)
            for dep in entry.get("dependencies") or []:
                other = _str(_dict(_dict(dep, "dependencies[]").get("workload"),
                                   "dependencies[].workload").get("selector"),
                             "AppGroup.spec.workloads[].dependencies[].workload.selector")
                deps.append((job, f"{namespace}/{name}.{other}"))
        for _, b in deps:
            if b not in jobs:
                jobs.append(b)
        if jobs:
            out.append(Workload(f"{namespace}/{name}", tuple(jobs), tuple(deps)))
    return out

