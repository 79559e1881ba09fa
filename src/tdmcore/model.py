"""The domain: nodes, pods, jobs, workloads, the latency matrix, and cluster state.

spec/metronome.md §1 and the Metronome paper's Table I.  Objects are validated on
construction (``ValueError`` naming the field); :class:`ClusterState` changes only
through :meth:`ClusterState.place` / :meth:`ClusterState.remove`, and a failed call
changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Cluster",
    "ClusterState",
    "Node",
    "Pod",
    "TrafficPattern",
    "Workload",
    "priority_value",
]

_PRIORITY_NAMES = {"high": 1, "low": 0}


def priority_value(priority: Any, name: str = "priority") -> int:
    """``"high"`` -> 1, ``"low"`` -> 0, integers as they are (larger = higher)."""
    if isinstance(priority, str):
        key = priority.strip().lower()
        if key in _PRIORITY_NAMES:
            return _PRIORITY_NAMES[key]
        raise ValueError(f"{name}: expected 'high', 'low' or an integer, got {priority!r}")
    if isinstance(priority, bool) or not isinstance(priority, int | np.integer):
        raise ValueError(f"{name}: expected 'high', 'low' or an integer, got {priority!r}")
    return int(priority)


def _finite(name: str, value: Any, *, minimum: float = 0.0, strict: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < minimum or (strict and x == minimum):
        op = ">" if strict else ">="
        raise ValueError(f"{name}: expected a finite number {op} {minimum}, got {value!r}")
    return x


def _name(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name}: expected a non-empty string, got {value!r}")
    return value


@dataclass(frozen=True)
class TrafficPattern:
    """Periodic traffic of a pod: period ``t_p`` (ms), duty cycle ``d_p``, rate ``r_p``."""

    period_ms: float
    duty_cycle: float
    bandwidth_gbps: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "period_ms",
                           _finite("period_ms", self.period_ms, strict=True))
        duty = _finite("duty_cycle", self.duty_cycle)
        if duty > 1.0:
            raise ValueError(f"duty_cycle: must lie in [0, 1], got {duty}")
        object.__setattr__(self, "duty_cycle", duty)
        object.__setattr__(self, "bandwidth_gbps", _finite("bandwidth_gbps",
                                                           self.bandwidth_gbps))

    @property
    def comm_ms(self) -> float:
        """Communication time per iteration, ``t_p d_p``."""
        return self.period_ms * self.duty_cycle


@dataclass(frozen=True)
class Node:
    """A node with allocatable CPU (cores), memory (GiB), GPUs and one host link."""

    name: str
    cpu: float
    mem_gib: float
    gpu: float
    link_gbps: float

    def __post_init__(self) -> None:
        _name("name", self.name)
        for key in ("cpu", "mem_gib", "gpu"):
            object.__setattr__(self, key, _finite(key, getattr(self, key)))
        object.__setattr__(self, "link_gbps", _finite("link_gbps", self.link_gbps, strict=True))


@dataclass(frozen=True)
class Pod:
    """A task of a job (spec §1).  ``pattern=None`` makes it a LowComm pod.

    ``priority``: larger is higher (``"high"``/``"low"`` accepted).  A job's pods
    must share its priority and workload.
    """

    name: str
    job: str
    cpu: float = 0.0
    mem_gib: float = 0.0
    gpu: float = 0.0
    pattern: TrafficPattern | None = None
    priority: int = 0
    workload: str | None = None

    def __post_init__(self) -> None:
        _name("name", self.name)
        _name("job", self.job)
        for key in ("cpu", "mem_gib", "gpu"):
            object.__setattr__(self, key, _finite(key, getattr(self, key)))
        if self.pattern is not None and not isinstance(self.pattern, TrafficPattern):
            raise ValueError(f"pattern: expected a TrafficPattern or None, got {self.pattern!r}")
        object.__setattr__(self, "priority", priority_value(self.priority))
        if self.workload is not None:
            _name("workload", self.workload)

    @property
    def low_comm(self) -> bool:
        return self.pattern is None

    @property
    def bandwidth_gbps(self) -> float:
        """``r_p``; 0 for a LowComm pod (its traffic is not guaranteed)."""
        return 0.0 if self.pattern is None else self.pattern.bandwidth_gbps


@dataclass(frozen=True)
class Workload:
    """Jobs deployed together, with job-to-job dependencies ``nu_w`` (symmetric)."""

    name: str
    jobs: tuple[str, ...]
    dependencies: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _name("name", self.name)
        if isinstance(self.jobs, str) or not isinstance(self.jobs, Sequence):
            raise ValueError("jobs: expected a list of job names")
        jobs = tuple(self.jobs)
        if not jobs or len(set(jobs)) != len(jobs) or not all(
                isinstance(j, str) and j for j in jobs):
            raise ValueError("jobs: expected a non-empty list of distinct job names")
        for pair in self.dependencies:
            if isinstance(pair, str) or not isinstance(pair, Sequence) or len(pair) != 2:
                raise ValueError(f"dependencies: expected (job, job) pairs, got {pair!r}")
            a, b = pair
            if a not in jobs or b not in jobs:
                raise ValueError(f"dependencies: ({a!r}, {b!r}) names a job outside the workload")
        object.__setattr__(self, "jobs", jobs)
        object.__setattr__(self, "dependencies", tuple((a, b) for a, b in self.dependencies))


class Cluster:
    """Nodes (in the cluster's order, which breaks ties), latencies and workloads.

    ``latency[x, y]`` is ``tau_{x,y}`` with ``tau[x, x] = 1`` (Table I).  Without a
    matrix every pair is 1 (a flat network).
    """

    def __init__(
        self,
        nodes: Sequence[Node],
        latency: Any = None,
        workloads: Iterable[Workload] = (),
    ) -> None:
        nodes = tuple(nodes)
        if not nodes:
            raise ValueError("nodes: a cluster needs at least one node")
        for i, n in enumerate(nodes):
            if not isinstance(n, Node):
                raise ValueError(f"nodes[{i}]: expected a Node, got {n!r}")
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise ValueError("nodes: node names must be unique")
        k = len(nodes)
        if latency is None:
            tau = np.ones((k, k))
        else:
            try:
                tau = np.array(latency, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError("latency: expected a square matrix of numbers") from exc
            if tau.shape != (k, k):
                raise ValueError(f"latency: expected shape ({k}, {k}), got {tau.shape}")
            if not np.all(np.isfinite(tau)) or np.any(tau < 0):
                raise ValueError("latency: entries must be finite and >= 0")
            if not np.all(np.diag(tau) == 1.0):
                raise ValueError("latency: tau[x, x] must be 1 (Table I)")
        tau.setflags(write=False)
        self.nodes = nodes
        self.latency: NDArray[np.float64] = tau
        self.mean_latency: NDArray[np.float64] = tau.mean(axis=1)
        self.mean_latency.setflags(write=False)
        self.node_index = {n.name: i for i, n in enumerate(nodes)}
        self.workloads: dict[str, Workload] = {}
        for w in workloads:
            if w.name in self.workloads:
                raise ValueError(f"workloads: duplicate workload {w.name!r}")
            self.workloads[w.name] = w
        self.cpu = np.array([n.cpu for n in nodes])
        self.mem_gib = np.array([n.mem_gib for n in nodes])
        self.gpu = np.array([n.gpu for n in nodes])
        self.link_gbps = np.array([n.link_gbps for n in nodes])

    def __len__(self) -> int:
        return len(self.nodes)

    def dependent_jobs(self, workload: str | None, job: str) -> set[str]:
        """Jobs declared dependent on ``job`` in its workload (AppGroup), either way."""
        if workload is None or workload not in self.workloads:
            return set()
        out = set()
        for a, b in self.workloads[workload].dependencies:
            if a == job:
                out.add(b)
            elif b == job:
                out.add(a)
        return out


@dataclass
class PlacedPod:
    pod: Pod
    node: int
    order: int  # deploy order: smaller = deployed earlier
    shift_ms: float = 0.0


@dataclass
class ClusterState:
    """What is placed where, and the resources left (Eqs. 13-14 bookkeeping).

    Pods of a node are kept in deploy order.  :meth:`copy` is cheap enough for
    tentative gang placement: a rejected gang is simply a discarded copy.
    """

    cluster: Cluster
    placed: dict[str, PlacedPod] = field(default_factory=dict)
    node_pods: list[list[str]] = field(default_factory=list)
    used_cpu: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    used_mem: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    used_gpu: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    job_members: dict[str, list[str]] = field(default_factory=dict)
    next_order: int = 0
    version: int = 0
    node_versions: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))

    def __post_init__(self) -> None:
        k = len(self.cluster)
        if not self.node_pods:
            self.node_pods = [[] for _ in range(k)]
            self.used_cpu = np.zeros(k)
            self.used_mem = np.zeros(k)
            self.used_gpu = np.zeros(k)
            self.node_versions = np.zeros(k, dtype=np.int64)

    # ------------------------------------------------------------------ queries
    @property
    def free_cpu(self) -> NDArray[np.float64]:
        return self.cluster.cpu - self.used_cpu

    @property
    def free_mem(self) -> NDArray[np.float64]:
        return self.cluster.mem_gib - self.used_mem

    @property
    def free_gpu(self) -> NDArray[np.float64]:
        return self.cluster.gpu - self.used_gpu

    def pods_on(self, node: int) -> list[Pod]:
        return [self.placed[name].pod for name in self.node_pods[node]]

    def node_of(self, pod_name: str) -> int | None:
        entry = self.placed.get(pod_name)
        return None if entry is None else entry.node

    def job_pods(self, job: str) -> list[PlacedPod]:
        """The placed pods of ``job``, in deploy order."""
        return [self.placed[name] for name in self.job_members.get(job, ())]

    def copy(self) -> ClusterState:
        return ClusterState(
            cluster=self.cluster,
            placed={k: PlacedPod(v.pod, v.node, v.order, v.shift_ms)
                    for k, v in self.placed.items()},
            node_pods=[list(x) for x in self.node_pods],
            used_cpu=self.used_cpu.copy(),
            used_mem=self.used_mem.copy(),
            used_gpu=self.used_gpu.copy(),
            job_members={k: list(v) for k, v in self.job_members.items()},
            next_order=self.next_order,
            version=self.version,
            node_versions=self.node_versions.copy(),
        )

    # ---------------------------------------------------------------- mutations
    def check_pod(self, pod: Pod) -> None:
        """Raise ValueError if ``pod`` is placed already or disagrees with its job."""
        if not isinstance(pod, Pod):
            raise ValueError(f"pod: expected a Pod, got {type(pod).__name__}")
        if pod.name in self.placed:
            raise ValueError(f"pod: {pod.name!r} is already placed")
        members = self.job_members.get(pod.job)
        if members:
            other = self.placed[members[0]].pod
            if other.priority != pod.priority:
                raise ValueError(f"priority: pod {pod.name!r} has {pod.priority}, its job "
                                 f"{pod.job!r} has {other.priority}")
            if other.workload != pod.workload:
                raise ValueError(f"workload: pod {pod.name!r} is in {pod.workload!r}, its "
                                 f"job {pod.job!r} in {other.workload!r}")

    def check_fits(self, pod: Pod, node: int) -> None:
        """Raise ValueError unless ``pod`` can be placed on ``node`` (Eq. 13).

        Eq. (14) (bandwidth) is Metronome's Filter, not a physical limit: a
        network-unaware baseline may put a 25 Gbps pod behind a 10 Gbps link.
        """
        self.check_pod(pod)
        if isinstance(node, bool) or not isinstance(node, int | np.integer) \
                or not 0 <= node < len(self.cluster):
            raise ValueError(f"node: expected a node index in [0, {len(self.cluster)}), "
                             f"got {node!r}")
        eps = 1e-9
        if (pod.cpu > self.cluster.cpu[node] - self.used_cpu[node] + eps
                or pod.mem_gib > self.cluster.mem_gib[node] - self.used_mem[node] + eps
                or pod.gpu > self.cluster.gpu[node] - self.used_gpu[node] + eps):
            raise ValueError(f"pod: {pod.name!r} does not fit on node "
                             f"{self.cluster.nodes[node].name!r} (Eq. 13)")

    def place(self, pod: Pod, node: int, shift_ms: float = 0.0) -> None:
        """Record ``pod`` on ``node``; all checks happen before anything changes."""
        self.check_fits(pod, node)
        self.placed[pod.name] = PlacedPod(pod, node, self.next_order, shift_ms)
        self.node_pods[node].append(pod.name)
        self.job_members.setdefault(pod.job, []).append(pod.name)
        self.used_cpu[node] += pod.cpu
        self.used_mem[node] += pod.mem_gib
        self.used_gpu[node] += pod.gpu
        self.next_order += 1
        self.version += 1
        self.node_versions[node] += 1

    def remove(self, pod_name: str) -> Pod:
        """Remove a placed pod (it finished or was evicted)."""
        entry = self.placed.get(pod_name)
        if entry is None:
            raise ValueError(f"pod_name: {pod_name!r} is not placed")
        del self.placed[pod_name]
        self.node_pods[entry.node].remove(pod_name)
        members = self.job_members[entry.pod.job]
        members.remove(pod_name)
        if not members:
            del self.job_members[entry.pod.job]
        self.used_cpu[entry.node] -= entry.pod.cpu
        self.used_mem[entry.node] -= entry.pod.mem_gib
        self.used_gpu[entry.node] -= entry.pod.gpu
        self.version += 1
        self.node_versions[entry.node] += 1
        return entry.pod

    def update_pattern(self, pod_name: str, pattern: TrafficPattern) -> None:
        """Replace a placed pod's traffic pattern (the controller's pattern update)."""
        entry = self.placed.get(pod_name)
        if entry is None:
            raise ValueError(f"pod_name: {pod_name!r} is not placed")
        if not isinstance(pattern, TrafficPattern):
            raise ValueError(f"pattern: expected a TrafficPattern, got {pattern!r}")
        if pattern.bandwidth_gbps != entry.pod.bandwidth_gbps:
            raise ValueError("pattern: a pattern update keeps the pod's bandwidth")
        entry.pod = replace(entry.pod, pattern=pattern)
        self.version += 1
        self.node_versions[entry.node] += 1

    def set_shifts(self, shifts_ms: Mapping[str, float]) -> None:
        for name, shift in shifts_ms.items():
            if name not in self.placed:
                raise ValueError(f"shifts_ms: {name!r} is not placed")
            if not math.isfinite(float(shift)):
                raise ValueError(f"shifts_ms: the shift of {name!r} must be finite")
        for name, shift in shifts_ms.items():
            self.placed[name].shift_ms = float(shift)

    def same_as(self, other: ClusterState) -> bool:
        """Equal placements and bookkeeping (used by tests of rejected gangs)."""
        return (
            {k: (v.pod, v.node, v.order, v.shift_ms) for k, v in self.placed.items()}
            == {k: (v.pod, v.node, v.order, v.shift_ms) for k, v in other.placed.items()}
            and self.node_pods == other.node_pods
            and np.array_equal(self.used_cpu, other.used_cpu)
            and np.array_equal(self.used_mem, other.used_mem)
            and np.array_equal(self.used_gpu, other.used_gpu)
            and self.next_order == other.next_order
        )
