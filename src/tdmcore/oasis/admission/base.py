"""What a slotted admission policy sees and returns (OASiS's model, docs/oasis.md).

Time is slotted (``t = 0..T-1``).  Worker servers and parameter-server (PS) servers
are two pools with capacities per resource type.  In every slot a policy says, for
each job it runs, how many workers and PSs sit on each server; the simulator
(:mod:`tdmcore.sim.slotted`) checks constraints (3)-(7) and advances the jobs.

The policies (:mod:`.fifo`, :mod:`.drf`, :mod:`.rrh`, :mod:`.dorm`, :mod:`.oasis`)
only see a :class:`SlotView`; they never import the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from ... import _validation as v
from ..._equality import ValueEquality
from ..._kernels.oasis_dp import ps_needed
from ..online import Job, chunks_per_worker_slot, unrunnable_reason

__all__ = [
    "RESOURCES",
    "AdmissionPolicy",
    "Allocation",
    "RoundRobin",
    "SlotDecision",
    "SlotView",
    "SlottedCluster",
    "dominant_share",
    "fixed_worker_counts",
    "ps_count",
    "runnable",
    "worker_range",
]

#: Resource types of the OASiS setting (§V-A): GPUs, vCPUs, memory, storage, bandwidth.
RESOURCES = ("gpu", "cpu", "mem_gb", "storage_gb", "bw_gbps")

#: Slack when comparing float usages with capacities.
_EPS = 1e-9


@dataclass(frozen=True, eq=False)
class SlottedCluster(ValueEquality):
    """Worker servers ``(H, R)`` and PS servers ``(K, R)`` over ``n_slots`` slots."""

    worker_capacity: NDArray[np.float64]
    ps_capacity: NDArray[np.float64]
    n_slots: int
    resources: tuple[str, ...] = RESOURCES

    def __post_init__(self) -> None:
        for name in ("worker_capacity", "ps_capacity"):
            cap = v.as_float_array(name, getattr(self, name), ndim=2)
            if cap.shape[0] == 0 or np.any(cap < 0):
                raise ValueError(f"{name}: expected (servers, resources) amounts >= 0")
            cap = cap.copy()
            cap.setflags(write=False)
            object.__setattr__(self, name, cap)
        if self.worker_capacity.shape[1] != self.ps_capacity.shape[1]:
            raise ValueError("ps_capacity: must list the same resource types as "
                             "worker_capacity")
        object.__setattr__(self, "n_slots", v.whole("n_slots", self.n_slots))
        if len(self.resources) != self.worker_capacity.shape[1]:
            raise ValueError(f"resources: expected {self.worker_capacity.shape[1]} names, "
                             f"got {len(self.resources)}")

    @property
    def n_workers_servers(self) -> int:
        return int(self.worker_capacity.shape[0])

    @property
    def n_ps_servers(self) -> int:
        return int(self.ps_capacity.shape[0])

    @property
    def total_capacity(self) -> NDArray[np.float64]:
        """Capacity per resource over both pools (the DRF denominator)."""
        return np.asarray(self.worker_capacity.sum(axis=0) + self.ps_capacity.sum(axis=0))

    def check_job(self, job: Job, name: str = "job") -> None:
        if not isinstance(job, Job):
            raise ValueError(f"{name}: expected a tdmcore.oasis.online.Job, got "
                             f"{type(job).__name__}")
        if len(job.worker_res) != self.worker_capacity.shape[1]:
            raise ValueError(f"{name}: lists {len(job.worker_res)} resource types, the "
                             f"cluster {self.worker_capacity.shape[1]}")


@dataclass(frozen=True, eq=False)
class Allocation(ValueEquality):
    """One job's tasks in one slot: workers per worker server, PSs per PS server."""

    workers: NDArray[np.int64]
    ps: NDArray[np.int64]

    @property
    def n_workers(self) -> int:
        return int(self.workers.sum())

    @property
    def n_ps(self) -> int:
        return int(self.ps.sum())


@dataclass
class SlotDecision:
    """A policy's answer for one slot.

    ``run`` maps job index → its allocation in this slot (jobs not listed do not run);
    ``reject`` maps job index → reason, for jobs the policy turns away (at arrival) or
    drops (later).  A rejected job never runs again.
    """

    run: dict[int, Allocation] = field(default_factory=dict)
    reject: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class SlotView(ValueEquality):
    """Read-only state of the run at the start of slot ``t``.

    ``done[i]`` is the chunks job i has trained so far; ``arrived`` are the jobs
    arriving now; ``completed`` those that finished in the previous slot; ``active``
    every job that has arrived, is not rejected and not finished (arrival order).
    """

    t: int
    cluster: SlottedCluster
    jobs: tuple[Job, ...]
    done: NDArray[np.int64]
    arrived: tuple[int, ...]
    completed: tuple[int, ...]
    active: tuple[int, ...]

    def remaining(self, i: int) -> int:
        """Chunks job ``i`` still has to train."""
        return max(0, self.jobs[i].workload_chunks - int(self.done[i]))

    def slots_needed(self, i: int, workers: int) -> float:
        """Slots job ``i`` needs from now with ``workers`` workers in every slot
        (``inf`` with no worker)."""
        per_slot = chunks_per_worker_slot(self.jobs[i]) * workers
        return math.inf if per_slot <= 0 else float(-(-self.remaining(i) // per_slot))


class AdmissionPolicy(Protocol):
    """A slotted policy: one decision per slot, given the :class:`SlotView`."""

    name: str

    def reset(self, cluster: SlottedCluster, jobs: tuple[Job, ...]) -> None:
        """Forget any previous run; ``jobs`` are all the jobs of this run, by index."""

    def step(self, view: SlotView) -> SlotDecision:
        """Decide slot ``view.t``."""


def runnable(job: Job, cluster: SlottedCluster) -> bool:
    """Whether the job can run at all (:func:`~tdmcore.oasis.online.unrunnable_reason`
    says why not).  The simulator rejects the others."""
    return unrunnable_reason(job, cluster.n_slots) is None


def ps_count(job: Job, workers: int) -> int:
    """The fewest PSs that keep (6) ``b y <= B z``; at most ``workers`` by (7)."""
    return int(ps_needed(int(workers), job.worker_bw, job.ps_bw))


def dominant_share(job: Job, workers: int, ps: int, total: NDArray[np.float64]) -> float:
    """``max_r (y alpha^r + z beta^r) / C^r`` over both pools (DRF's dominant share)."""
    use = workers * np.asarray(job.worker_res) + ps * np.asarray(job.ps_res)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(total > 0, use / np.where(total > 0, total, 1.0),
                         np.where(use > 0, np.inf, 0.0))
    return float(share.max())


def worker_range(value: Any) -> tuple[int, int]:
    """A ``(low, high)`` worker-count range with ``1 <= low <= high``."""
    return v.whole_pair("workers", value)


def fixed_worker_counts(jobs: tuple[Job, ...], low: int, high: int,
                        seed: int) -> NDArray[np.int64]:
    """Per-job worker counts for the fixed-size baselines (FIFO, RRH).

    **[decision]** The paper fixes them "to a number within" a range our copy lost;
    we draw each uniformly in ``[low, high]`` from ``seed`` (same draw for FIFO and
    RRH) and cap it at the job's chunk count ``N_i`` (constraint (3)).
    """
    low, high = v.whole_pair("workers", (low, high))
    rng = np.random.default_rng(seed)
    draw = rng.integers(low, high + 1, size=len(jobs))
    return np.array([min(int(d), j.chunks) for d, j in zip(draw, jobs, strict=True)],
                    dtype=np.int64)


class RoundRobin:
    """Round-robin placement over one pool: each task goes to the next server (in a
    cycle that continues across calls) with room for it (§V-A: "we place workers and
    parameter servers on available servers in a round-robin fashion")."""

    def __init__(self, n_servers: int) -> None:
        self.n_servers = n_servers
        self.next = 0

    def place(self, count: int, demand: NDArray[np.float64],
              free: NDArray[np.float64]) -> NDArray[np.int64] | None:
        """Place ``count`` tasks of ``demand`` on ``free`` (S, R), updating ``free``.

        Returns tasks per server, or None (and ``free`` unchanged) if they do not
        all fit.
        """
        out = np.zeros(self.n_servers, dtype=np.int64)
        if count == 0:
            return out
        trial = free.copy()
        s = self.next
        misses = 0
        placed = 0
        while placed < count:
            if np.all(trial[s] + _EPS >= demand):
                trial[s] -= demand
                out[s] += 1
                placed += 1
                misses = 0
            else:
                misses += 1
                if misses >= self.n_servers:
                    return None
            s = (s + 1) % self.n_servers
        self.next = s
        free[:] = trial
        return out


def place_job(job: Job, workers: int, ps: int, free_w: NDArray[np.float64],
              free_p: NDArray[np.float64], rr_w: RoundRobin,
              rr_p: RoundRobin) -> Allocation | None:
    """Place a job's workers and PSs round-robin; all or nothing."""
    keep_w, keep_p = free_w.copy(), free_p.copy()
    nw, np_ = rr_w.next, rr_p.next
    y = rr_w.place(workers, np.asarray(job.worker_res), free_w)
    z = rr_p.place(ps, np.asarray(job.ps_res), free_p) if y is not None else None
    if y is None or z is None:
        free_w[:], free_p[:] = keep_w, keep_p
        rr_w.next, rr_p.next = nw, np_
        return None
    return Allocation(y, z)


def take(alloc: Allocation, job: Job, free_w: NDArray[np.float64],
         free_p: NDArray[np.float64]) -> bool:
    """Reserve an existing allocation on ``free``; False (nothing changed) if it no
    longer fits."""
    use_w = alloc.workers[:, None] * np.asarray(job.worker_res)
    use_p = alloc.ps[:, None] * np.asarray(job.ps_res)
    if np.any(use_w > free_w + _EPS) or np.any(use_p > free_p + _EPS):
        return False
    free_w -= use_w
    free_p -= use_p
    return True


def fits_empty(job: Job, workers: int, ps: int, cluster: SlottedCluster) -> bool:
    """Whether the job's tasks fit on the cluster when it is empty (round-robin)."""
    free_w = np.array(cluster.worker_capacity, dtype=np.float64)
    free_p = np.array(cluster.ps_capacity, dtype=np.float64)
    return place_job(job, workers, ps, free_w, free_p, RoundRobin(len(free_w)),
                     RoundRobin(len(free_p))) is not None


def as_seed(name: str, value: Any) -> int:
    """A seed of the OASiS settings: any integer >= 0 (numpy's generators take them all)."""
    return v.whole(name, value, 0)
