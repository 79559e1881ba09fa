"""The domain: nodes, pods, jobs, workloads, the latency matrix, and cluster state.

docs/traffic-circle.md and the Metronome paper's Table I.  Objects are validated on
construction (``ValueError`` naming the field); :class:`ClusterState` changes only
through :meth:`ClusterState.place` / :meth:`ClusterState.remove`, and a failed call
changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from . import _validation
from ._equality import ValueEquality

__all__ = [
    "Cluster",
    "ClusterState",
    "Node",
    "Pod",
    "TrafficPattern",
    "Workload",
    "gang_pods",
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
    if not _validation.is_integer(priority):
        raise ValueError(f"{name}: expected 'high', 'low' or an integer, got {priority!r}")
    if not -(1 << 31) <= int(priority) < (1 << 31):
        raise ValueError(f"{name}: expected an integer in [-2^31, 2^31), got {priority!r}")
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
        period, duty, bandwidth, scalar = _validation.pattern(
            self.period_ms, self.duty_cycle, self.bandwidth_gbps)
        if not scalar:
            raise ValueError("period_ms: a pattern is three numbers, not arrays")
        object.__setattr__(self, "period_ms", float(period[0]))
        object.__setattr__(self, "duty_cycle", float(duty[0]))
        object.__setattr__(self, "bandwidth_gbps", float(bandwidth[0]))

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
        object.__setattr__(self, "link_gbps", _validation.capacity("link_gbps", self.link_gbps))


@dataclass(frozen=True)
class Pod:
    """A task of a job (docs/traffic-circle.md).  ``pattern=None`` makes it a LowComm pod.

    ``priority``: larger is higher (``"high"``/``"low"`` accepted).  A job's pods
    must share its priority, workload and ``gang_size``.  ``gang_size`` is the
    number of pods of the job (the PodGroup's ``minMember``), or None when unknown;
    only a job of known size can be recognised as lying wholly on one node
    (:meth:`ClusterState.job_links`).  ``spread``: at most one pod of the job per
    node (Kubernetes' required pod anti-affinity on the job label, a common way
    to run data-parallel workers on distinct hosts); every policy's Filter
    honours it.
    """

    name: str
    job: str
    cpu: float = 0.0
    mem_gib: float = 0.0
    gpu: float = 0.0
    pattern: TrafficPattern | None = None
    priority: int = 0
    workload: str | None = None
    gang_size: int | None = None
    spread: bool = False

    if TYPE_CHECKING:  # the generated __init__, with the priority it reads as an int
        def __init__(self, name: str, job: str, cpu: float = 0.0, mem_gib: float = 0.0,
                     gpu: float = 0.0, pattern: TrafficPattern | None = None,
                     priority: int | str = 0, workload: str | None = None,
                     gang_size: int | None = None, spread: bool = False) -> None: ...

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
        _validation.boolean("spread", self.spread)
        if self.gang_size is not None:  # a NumPy integer is kept as an int
            object.__setattr__(self, "gang_size",
                               _validation.whole("gang_size", self.gang_size))

    @property
    def low_comm(self) -> bool:
        return self.pattern is None

    @property
    def bandwidth_gbps(self) -> float:
        """``r_p``; 0 for a LowComm pod (its traffic is not guaranteed)."""
        return 0.0 if self.pattern is None else self.pattern.bandwidth_gbps


def gang_pods(job: str, names: Sequence[str], *, gang_size: int | None,
              cpu: float = 0.0, mem_gib: float = 0.0, gpu: float = 0.0,
              pattern: TrafficPattern | None = None, priority: int | str = 0,
              workload: str | None = None, spread: bool = False) -> list[Pod]:
    """The pods of one job, as both front doors hand them to the scheduler.

    The one intake of a job's pods: the simulator builds a job's workers with it
    (``SimJob.pods``) and the Kubernetes bridge every pod it reads
    (``k8s_bridge.convert.pod_from_json``), so that what a job is -- its priority,
    workload, traffic pattern, ``gang_size`` and ``spread`` -- reaches the
    policies the same way through either door (``ClusterState.check_pod`` refuses
    a pod that disagrees with its job's).

    Parameters
    ----------
    job : str
        The job the pods belong to.
    names : sequence of str
        The pods to build (distinct names): every pod of the job (the simulator),
        or some of them (the bridge reads one pod at a time).
    gang_size : int or None
        How many pods the job has: the simulator's worker count, a PodGroup's
        ``minMember`` on Kubernetes; ``None`` when unknown (a pod of no PodGroup).
        Only a job of known size is recognised as lying wholly on one node, where
        it puts nothing on any link (:meth:`ClusterState.job_links`).  At least
        ``len(names)``.
    cpu, mem_gib, gpu : float
        Each pod's requests (cores, GiB, GPUs).
    pattern : TrafficPattern or None
        Each pod's traffic pattern; None makes the job LowComm.
    priority : int or {"high", "low"}
        The job's priority (larger is higher).
    workload : str or None
        The workload (AppGroup) the job belongs to.
    spread : bool
        At most one pod of the job per node (Kubernetes' required pod
        anti-affinity on the job's label); every policy's Filter honours it.

    Returns
    -------
    list of Pod
        One per name, in the order of ``names``.

    Raises
    ------
    ValueError
        Naming the argument: no names, a name twice, a ``gang_size`` below the
        number of names, or what :class:`Pod` refuses.
    """
    if isinstance(names, str) or not isinstance(names, Sequence) or not names:
        raise ValueError(f"names: expected a non-empty sequence of pod names, got {names!r:.80}")
    if len(set(names)) != len(names):
        raise ValueError("names: the pod names of a job must be distinct")
    if gang_size is not None:
        gang_size = _validation.whole("gang_size", gang_size)
        if gang_size < len(names):
            raise ValueError(f"gang_size: {gang_size} is less than the {len(names)} pods given")
    return [Pod(name, job, cpu=cpu, mem_gib=mem_gib, gpu=gpu, pattern=pattern,
                priority=priority, workload=workload, gang_size=gang_size, spread=spread)
            for name in names]


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
        if isinstance(self.dependencies, str) or not isinstance(self.dependencies, Iterable):
            raise ValueError(
                f"dependencies: expected (job, job) pairs, got {self.dependencies!r:.80}")
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
        if isinstance(nodes, str | Node) or not isinstance(nodes, Iterable):
            raise ValueError(f"nodes: expected a sequence of Nodes, got {nodes!r:.80}")
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
        if isinstance(workloads, str | Workload) or not isinstance(workloads, Iterable):
            raise ValueError(f"workloads: expected a sequence of Workloads, got {workloads!r:.80}")
        self.workloads: dict[str, Workload] = {}
        for i, w in enumerate(workloads):
            if not isinstance(w, Workload):
                raise ValueError(f"workloads[{i}]: expected a Workload, got {w!r:.80}")
            if w.name in self.workloads:
                raise ValueError(f"workloads: duplicate workload {w.name!r}")
            self.workloads[w.name] = w
        self.cpu: NDArray[np.float64] = np.array([n.cpu for n in nodes], dtype=np.float64)
        self.mem_gib: NDArray[np.float64] = np.array([n.mem_gib for n in nodes],
                                                     dtype=np.float64)
        self.gpu: NDArray[np.float64] = np.array([n.gpu for n in nodes], dtype=np.float64)
        self.link_gbps: NDArray[np.float64] = np.array([n.link_gbps for n in nodes],
                                                       dtype=np.float64)

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


@dataclass(eq=False)
class ClusterState(ValueEquality):
    """What is placed where, and the resources left (Eqs. 13-14 bookkeeping).

    Pods of a node are kept in deploy order.  :meth:`copy` is cheap enough for
    tentative gang placement: a rejected gang is simply a discarded copy.

    ``link_rows[n]`` lists, in deploy order, one pod per job whose traffic crosses
    node n's host link (:meth:`job_links` decides which, and this class alone keeps
    the list, so every consumer — the snapshot the kernels read, the link plans of
    the scheduler and the controller — sees the same rows).
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
    link_rows: list[list[str]] = field(default_factory=list)
    #: jobs of known gang size that have had all their pods placed
    complete_jobs: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not isinstance(self.cluster, Cluster):
            raise ValueError(f"cluster: expected a Cluster, got {self.cluster!r:.80}")
        k = len(self.cluster)
        if not self.link_rows:
            self.link_rows = [[] for _ in range(k)]
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
        """The pods on ``node`` (an index into the cluster's nodes), in deploy order."""
        node = _validation.whole("node", node, 0, len(self.cluster) - 1)
        return [self.placed[name].pod for name in self.node_pods[node]]

    def node_of(self, pod_name: str) -> int | None:
        entry = self.placed.get(pod_name)
        return None if entry is None else entry.node

    def job_pods(self, job: str) -> list[PlacedPod]:
        """The placed pods of ``job``, in deploy order."""
        return [self.placed[name] for name in self.job_members.get(job, ())]

    def job_links(self, job: str) -> dict[int, str]:
        """Where ``job``'s traffic crosses host links: node -> the pod that stands
        for the job on that node's link (its first deployed pod there).

        **[decision, docs/traffic-circle.md]** A job's pods on
        one node exchange data over NVLink/PCIe; with the ring all-reduce of data
        parallel training one ring segment enters and one leaves a node however
        many of the job's pods it holds, so a job's row on a link is *one pod's*
        demand ``r_p`` (its pods on a node share a pattern), never the sum over
        them.  A job whose pods all sit on one node sends nothing over host links
        (it is LowComm there) — recognised only once all ``gang_size`` pods have
        been placed (before that, or with ``gang_size`` unknown, the job may still
        spread, so it keeps its rows: the link stays reserved for it).  Jobs
        without a traffic pattern have no rows.
        """
        members = self.job_members.get(job, ())
        rows: dict[int, str] = {}
        for name in members:
            entry = self.placed[name]
            if entry.pod.pattern is not None:
                rows.setdefault(entry.node, name)
        if len(rows) == 1 and job in self.complete_jobs \
                and len({self.placed[m].node for m in members}) == 1:
            return {}
        return rows

    def waiting_link_gbps(self, pod: Pod) -> NDArray[np.float64]:
        """Per node n, the bandwidth ``pod`` would add to n's link if placed on n.

        ``r_p`` where the pod would give its job a new row on the link, 0 where its
        job already has a row on that link (one pod's demand per job, see
        :meth:`job_links`), where the pod would complete its job wholly on that
        node (the job becomes LowComm), and everywhere for a LowComm pod.
        """
        k = len(self.cluster)
        if pod.pattern is None:
            return np.zeros(k)
        out = np.full(k, pod.pattern.bandwidth_gbps)
        for node in self.job_links(pod.job):
            out[node] = 0.0
        if pod.gang_size is not None:
            members = self.job_members.get(pod.job, ())
            if len(members) + 1 == pod.gang_size:
                nodes = {self.placed[m].node for m in members}
                if not nodes:  # a one-pod job: local wherever it goes
                    out[:] = 0.0
                elif len(nodes) == 1:
                    out[nodes.pop()] = 0.0
        return out

    def _relink(self, job: str, before: dict[int, str]) -> None:
        """Bring :attr:`link_rows` in line with :meth:`job_links` after ``job``
        changed (``before``: its links before the change)."""
        after = self.job_links(job)
        for node, name in before.items():
            if after.get(node) != name:
                self.link_rows[node].remove(name)
        for node, name in after.items():
            if before.get(node) != name:
                rows = self.link_rows[node]
                rows.append(name)
                rows.sort(key=lambda x: self.placed[x].order)

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
            link_rows=[list(x) for x in self.link_rows],
            complete_jobs=set(self.complete_jobs),
        )

    def restore_from(self, other: ClusterState) -> None:
        """Make this state ``other``, in place: the one way a tentative copy commits
        (a gang placed on a :meth:`copy`, an elastic plan applied to one) and a saved
        copy rolls a failed change back.

        This object stays the one its holders know (a scheduler's model, a
        simulator's cluster); it takes over ``other``'s bookkeeping, so ``other``, a
        state of the same cluster made by :meth:`copy`, must not be used afterwards.
        """
        if not isinstance(other, ClusterState):
            raise ValueError(f"other: expected a tdmcore.model.ClusterState, got "
                             f"{type(other).__name__}")
        if other.cluster is not self.cluster:
            raise ValueError("other: a state of another cluster (restore_from takes a "
                             "copy of this state)")
        for f in fields(self):
            setattr(self, f.name, getattr(other, f.name))

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
            if other.spread != pod.spread:
                raise ValueError(f"spread: pod {pod.name!r} has {pod.spread}, its job "
                                 f"{pod.job!r} has {other.spread}")
            if other.gang_size != pod.gang_size:
                raise ValueError(f"gang_size: pod {pod.name!r} has {pod.gang_size}, its "
                                 f"job {pod.job!r} has {other.gang_size}")
            if pod.gang_size is not None and len(members) >= pod.gang_size:
                raise ValueError(f"gang_size: job {pod.job!r} already has its "
                                 f"{pod.gang_size} pods")

    def check_fits(self, pod: Pod, node: int) -> None:
        """Raise ValueError unless ``pod`` can be placed on ``node`` (Eq. 13).

        Eq. (14) (bandwidth) is Metronome's Filter, not a physical limit: a
        network-unaware baseline may put a 25 Gbps pod behind a 10 Gbps link.
        """
        self.check_pod(pod)
        node = _validation.whole("node", node, 0, len(self.cluster) - 1)  # a node index
        eps = 1e-9
        if (pod.cpu > self.cluster.cpu[node] - self.used_cpu[node] + eps
                or pod.mem_gib > self.cluster.mem_gib[node] - self.used_mem[node] + eps
                or pod.gpu > self.cluster.gpu[node] - self.used_gpu[node] + eps):
            raise ValueError(f"pod: {pod.name!r} does not fit on node "
                             f"{self.cluster.nodes[node].name!r} (Eq. 13)")

    def place(self, pod: Pod, node: int, shift_ms: float = 0.0) -> None:
        """Record ``pod`` on ``node``; all checks happen before anything changes."""
        shift = _validation.real_number("shift_ms", shift_ms)
        self.check_fits(pod, node)
        before = self.job_links(pod.job)
        self.placed[pod.name] = PlacedPod(pod, node, self.next_order, shift)
        self.node_pods[node].append(pod.name)
        members = self.job_members.setdefault(pod.job, [])
        members.append(pod.name)
        if pod.gang_size is not None and len(members) == pod.gang_size:
            self.complete_jobs.add(pod.job)
        self._relink(pod.job, before)
        self.used_cpu[node] += pod.cpu
        self.used_mem[node] += pod.mem_gib
        self.used_gpu[node] += pod.gpu
        self.next_order += 1
        self.version += 1
        self.node_versions[node] += 1

    def remove(self, pod_name: str) -> Pod:
        """Remove a placed pod (it finished or was evicted)."""
        entry = self.placed.get(pod_name) if isinstance(pod_name, str) else None
        if entry is None:
            raise ValueError(f"pod_name: {pod_name!r} is not placed")
        job = entry.pod.job
        before = self.job_links(job)
        del self.placed[pod_name]
        self.node_pods[entry.node].remove(pod_name)
        members = self.job_members[job]
        members.remove(pod_name)
        if not members:
            del self.job_members[job]
            self.complete_jobs.discard(job)
        # the removed pod may have stood for its job on its link: re-derive the rows
        self.link_rows[entry.node] = [x for x in self.link_rows[entry.node] if x != pod_name]
        before = {n: x for n, x in before.items() if x != pod_name}
        self._relink(job, before)
        self.used_cpu[entry.node] -= entry.pod.cpu
        self.used_mem[entry.node] -= entry.pod.mem_gib
        self.used_gpu[entry.node] -= entry.pod.gpu
        self.version += 1
        self.node_versions[entry.node] += 1
        return entry.pod

    def update_pattern(self, pod_name: str, pattern: TrafficPattern) -> None:
        """Replace a placed pod's traffic pattern (the controller's pattern update)."""
        entry = self.placed.get(pod_name) if isinstance(pod_name, str) else None
        if entry is None:
            raise ValueError(f"pod_name: {pod_name!r} is not placed")
        if not isinstance(pattern, TrafficPattern):
            raise ValueError(f"pattern: expected a TrafficPattern, got {pattern!r}")
        if pattern.bandwidth_gbps != entry.pod.bandwidth_gbps:
            raise ValueError("pattern: a pattern update keeps the pod's bandwidth")
        entry.pod = replace(entry.pod, pattern=pattern)
        self.version += 1
        self.node_versions[entry.node] += 1

    def set_job_shifts(self, shifts_ms: Mapping[str, float]) -> dict[str, float]:
        """Give every placed pod its job's shift (ms); returns pod -> shift (the
        pods grouped by job).

        The controller's global offsets are per job (§III-C); this writes them in
        one pass over the pods instead of a pod-by-pod :meth:`set_shifts`.  Every
        job with a placed pod needs a finite entry; nothing is written otherwise.
        """
        if not isinstance(shifts_ms, Mapping):
            raise ValueError(f"shifts_ms: expected a mapping of job name to shift (ms), "
                             f"got {shifts_ms!r:.80}")
        values: dict[str, float] = {}
        for job in self.job_members:
            shift = shifts_ms.get(job)
            if shift is None:
                raise ValueError(f"shifts_ms: no shift for job {job!r}")
            values[job] = _validation.real_number(f"shifts_ms: the shift of job {job!r}", shift)
        out: dict[str, float] = {}
        placed = self.placed
        for job, members in self.job_members.items():
            value = values[job]
            for name in members:
                out[name] = value
                placed[name].shift_ms = value
        return out

    def set_shifts(self, shifts_ms: Mapping[str, float]) -> None:
        """Give each named placed pod its shift (ms); every entry is checked before
        any is written."""
        if not isinstance(shifts_ms, Mapping):
            raise ValueError(f"shifts_ms: expected a mapping of pod name to shift (ms), "
                             f"got {shifts_ms!r:.80}")
        values: dict[str, float] = {}
        for name, shift in shifts_ms.items():
            if name not in self.placed:
                raise ValueError(f"shifts_ms: {name!r} is not placed")
            values[name] = _validation.real_number(f"shifts_ms: the shift of {name!r}", shift)
        for name, value in values.items():
            self.placed[name].shift_ms = value

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
