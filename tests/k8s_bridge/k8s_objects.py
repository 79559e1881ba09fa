"""Real Kubernetes JSON objects for the bridge's tests (what the API server sends)."""

from __future__ import annotations

from typing import Any

SCHEDULER = "tdmcore-scheduler"


def node(name: str, *, cpu: str = "64", memory: str = "256Gi", gpu: int = 8,
         zone: str | None = None, ready: bool = True, unschedulable: bool = False,
         rv: str = "1") -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if zone:
        labels["topology.kubernetes.io/zone"] = zone
    alloc = {"cpu": cpu, "memory": memory, "pods": "110", "nvidia.com/gpu": str(gpu)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "resourceVersion": rv,
                     "uid": f"uid-{name}", "creationTimestamp": "2026-11-01T00:00:00Z"},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"capacity": dict(alloc), "allocatable": alloc,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod(name: str, *, namespace: str = "default", gpu: int = 1, cpu: str = "4",
        memory: str = "16Gi", labels: dict[str, str] | None = None, node: str | None = None,
        phase: str = "Pending", scheduler: str = SCHEDULER, created: str = "2026-11-20T00:00:00Z",
        rv: str = "1", affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "trainer", "image": "ghcr.io/tdmcore/examples:resnet50",
                        "resources": {"requests": {"cpu": cpu, "memory": memory},
                                      "limits": {"nvidia.com/gpu": str(gpu)}}}],
    }
    if node:
        spec["nodeName"] = node
    if affinity is not None:
        spec["affinity"] = affinity
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {}),
                     "uid": f"uid-{namespace}-{name}", "resourceVersion": rv,
                     "creationTimestamp": created},
        "spec": spec,
        "status": {"phase": phase},
    }


def podbandwidth(name: str, *, period: float, duty: float, gbps: float,
                 namespace: str = "default", pod_name: str | None = None,
                 match: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"period": period, "duty_cycle": duty, "bandwidth": gbps}
    if pod_name is not None:
        spec["podName"] = pod_name
    else:
        spec["selector"] = {"matchLabels": dict(match or {})}
    return {"apiVersion": "tdmcore.io/v1alpha1", "kind": "PodBandwidth",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1",
                         "creationTimestamp": "2026-11-20T00:00:00Z"},
            "spec": spec}


def nodebandwidth(name: str, bandwidth: Any = None) -> dict[str, Any]:
    spec = {} if bandwidth is None else {"bandwidth": bandwidth}
    return {"apiVersion": "tdmcore.io/v1alpha1", "kind": "NodeBandwidth",
            "metadata": {"name": name, "resourceVersion": "1"}, "spec": spec}


def podgroup(name: str, min_member: int, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
            "spec": {"minMember": min_member}}


def job_labels(job: str, priority: str = "low") -> dict[str, str]:
    return {"training.kubeflow.org/job-name": job, "tdmcore.io/priority": priority}


def anti_affinity(labels: dict[str, str], topology: str = "kubernetes.io/hostname",
                  **term: Any) -> dict[str, Any]:
    """A required pod anti-affinity against pods with ``labels`` (one term)."""
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": topology, **term}]}}
