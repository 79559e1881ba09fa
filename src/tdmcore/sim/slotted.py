"""The slotted simulator of the OASiS setting (docs/oasis.md).

One loop over slots.  At slot ``t`` the policy sees the jobs that arrive, the jobs
that finished in the previous slot and every active job, and returns which jobs run
with how many workers and PSs on which servers.  The loop checks the allocation
against constraints (3)-(7) — a violation is a policy bug and stops the run with
:class:`PolicyError` — then each running job trains ``c_i`` chunks per worker
(docs/oasis.md) and finishes in the first slot its chunks reach ``E_i N_i``.

A job's completion delay is ``finish - arrival`` (the last slot with workers minus
the arrival, as in Alg. 2); its utility is ``f_i(delay)`` if it finishes within the
horizon and 0 otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from .._equality import ValueEquality
from ..framework import PolicyError
from ..oasis.admission.base import (
    AdmissionPolicy,
    Allocation,
    SlotDecision,
    SlottedCluster,
    SlotView,
    ps_count,
)
from ..oasis.online import Job, chunks_per_worker_slot, sigmoid_utility, unrunnable_reason

__all__ = ["JobOutcome", "PolicyError", "SlottedRun", "job_class", "run_slotted"]

_EPS = 1e-9

#: **[decision]** Job classes by the sigmoid's decay ``g2`` (docs/oasis.md):
#: 0 → time-insensitive, below this → time-sensitive, from it on → time-critical.
#: It separates the ranges :func:`tdmcore.sim.oasis_setting.oasis_jobs` draws from.
CRITICAL_DECAY = 0.5


def job_class(job: Job) -> str:
    """``"insensitive"``, ``"sensitive"`` or ``"critical"`` by the decay ``g2``."""
    g2 = job.utility[1]
    if g2 == 0:
        return "insensitive"
    return "sensitive" if g2 < CRITICAL_DECAY else "critical"


@dataclass(frozen=True)
class JobOutcome:
    """What happened to one job."""

    arrival: int
    job_class: str
    admitted: bool
    finish: int | None
    utility: float
    reason: str

    @property
    def delay(self) -> int | None:
        return None if self.finish is None else self.finish - self.arrival


@dataclass(frozen=True, eq=False)
class SlottedRun(ValueEquality):
    """One policy's run: per-job outcomes and per-run metrics."""

    policy: str
    jobs: tuple[Job, ...]
    outcomes: tuple[JobOutcome, ...]
    worker_utilization: NDArray[np.float64]  # (T, R) used / capacity of the worker pool
    ps_utilization: NDArray[np.float64]      # (T, R) of the PS pool
    decision_s: NDArray[np.float64] = field(compare=False)  # wall time of each step
    wall_s: float = field(compare=False)                     # (neither is in ==)

    @property
    def total_utility(self) -> float:
        return float(sum(o.utility for o in self.outcomes))

    @property
    def acceptance_rate(self) -> float:
        return sum(o.admitted for o in self.outcomes) / max(1, len(self.outcomes))

    @property
    def finished(self) -> int:
        return sum(o.finish is not None for o in self.outcomes)

    def utility_by_class(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for o in self.outcomes:
            out[o.job_class] = out.get(o.job_class, 0.0) + o.utility
        return out

    def lateness(self, job_class: str) -> NDArray[np.float64]:
        """Completion delay minus target ``g3`` of the finished jobs of a class (Fig. 5)."""
        return np.array([o.delay - j.utility[2] for j, o in zip(self.jobs, self.outcomes,
                                                                 strict=True)
                         if o.finish is not None and o.delay is not None
                         and o.job_class == job_class], dtype=np.float64)


def _check(policy: str, t: int, i: int, job: Job, alloc: Allocation,
           cluster: SlottedCluster) -> None:
    if not isinstance(alloc, Allocation):
        raise PolicyError(f"{policy}: slot {t}, job {i}: expected an Allocation")
    for counts in (alloc.workers, alloc.ps):
        if not isinstance(counts, np.ndarray) or counts.dtype.kind not in "iuf":
            raise PolicyError(f"{policy}: slot {t}, job {i}: an allocation's workers and ps "
                              "must be arrays of task counts")
    if alloc.workers.shape != (cluster.n_workers_servers,) or \
            alloc.ps.shape != (cluster.n_ps_servers,):
        raise PolicyError(f"{policy}: slot {t}, job {i}: allocation has the wrong shape")
    if not (np.all(np.isfinite(alloc.workers)) and np.all(np.isfinite(alloc.ps))
            and np.all(alloc.workers == np.round(alloc.workers))
            and np.all(alloc.ps == np.round(alloc.ps))):
        raise PolicyError(f"{policy}: slot {t}, job {i}: task counts must be whole numbers")
    if np.any(alloc.workers < 0) or np.any(alloc.ps < 0):
        raise PolicyError(f"{policy}: slot {t}, job {i}: negative task counts")
    y, z = alloc.n_workers, alloc.n_ps
    if y > job.chunks:
        raise PolicyError(f"{policy}: slot {t}, job {i}: {y} workers > {job.chunks} chunks "
                          "(constraint (3))")
    if y > 0 and z < ps_count(job, y):
        raise PolicyError(f"{policy}: slot {t}, job {i}: {z} PSs cannot serve {y} workers "
                          "(constraint (6))")
    if z > y:
        raise PolicyError(f"{policy}: slot {t}, job {i}: {z} PSs > {y} workers "
                          "(constraint (7))")


def run_slotted(policy: AdmissionPolicy, cluster: SlottedCluster,
                jobs: Sequence[Job]) -> SlottedRun:
    """Run ``policy`` on ``jobs`` over ``cluster.n_slots`` slots.

    Jobs that can never run are rejected before any policy sees them, the same for
    every policy: a chunk that does not fit in one slot (``c_i = 0``, docs/oasis.md
    §2), or ``b_i > B_i`` (then (6) needs ``ceil(b y / B) > y`` PSs, which (7) forbids).
    """
    if not isinstance(cluster, SlottedCluster):
        raise ValueError("cluster: expected a SlottedCluster")
    jobs = tuple(jobs)
    if not jobs:
        raise ValueError("jobs: expected at least one job")
    for i, job in enumerate(jobs):
        cluster.check_job(job, f"jobs[{i}]")
    n, n_slots = len(jobs), cluster.n_slots
    started = time.perf_counter()
    policy.reset(cluster, jobs)
    done = np.zeros(n, dtype=np.int64)
    finish: list[int | None] = [None] * n
    rejected: dict[int, str] = {}
    admitted = [False] * n
    per_slot = np.array([chunks_per_worker_slot(j) for j in jobs], dtype=np.int64)
    by_arrival: dict[int, list[int]] = {}
    for i, job in enumerate(jobs):
        reason = unrunnable_reason(job, n_slots)
        if reason is not None:
            rejected[i] = reason
        else:
            by_arrival.setdefault(job.arrival, []).append(i)
    worker_res = np.array([j.worker_res for j in jobs])
    ps_res = np.array([j.ps_res for j in jobs])
    util_w = np.zeros((n_slots, cluster.worker_capacity.shape[1]))
    util_p = np.zeros_like(util_w)
    cap_w = cluster.worker_capacity.sum(axis=0)
    cap_p = cluster.ps_capacity.sum(axis=0)
    decision_s = np.zeros(n_slots)
    active: list[int] = []
    completed: tuple[int, ...] = ()
    for t in range(n_slots):
        arrived = tuple(by_arrival.get(t, ()))
        for i in arrived:
            admitted[i] = True
        active.extend(arrived)
        view = SlotView(t, cluster, jobs, done.copy(), arrived, completed, tuple(active))
        tick = time.perf_counter()
        decision = policy.step(view)
        decision_s[t] = time.perf_counter() - tick
        if not isinstance(decision, SlotDecision):
            raise PolicyError(f"{policy.name}: slot {t}: step must return a SlotDecision, "
                              f"got {type(decision).__name__}")
        for i, reason in decision.reject.items():
            if i not in active:
                raise PolicyError(f"{policy.name}: slot {t}: rejects job {i}, not active")
            rejected[i] = reason
            if i in arrived:
                admitted[i] = False
        used_w = np.zeros_like(cluster.worker_capacity)
        used_p = np.zeros_like(cluster.ps_capacity)
        for i, alloc in decision.run.items():
            if i not in active or i in decision.reject:
                raise PolicyError(f"{policy.name}: slot {t}: runs job {i}, not active")
            _check(policy.name, t, i, jobs[i], alloc, cluster)
            used_w += alloc.workers[:, None] * worker_res[i]
            used_p += alloc.ps[:, None] * ps_res[i]
        if np.any(used_w > cluster.worker_capacity + _EPS) or \
                np.any(used_p > cluster.ps_capacity + _EPS):
            raise PolicyError(f"{policy.name}: slot {t}: server capacity exceeded "
                              "(constraints (4)-(5))")
        with np.errstate(divide="ignore", invalid="ignore"):
            util_w[t] = np.where(cap_w > 0, used_w.sum(axis=0) / np.where(cap_w > 0, cap_w, 1),
                                 0)
            util_p[t] = np.where(cap_p > 0, used_p.sum(axis=0) / np.where(cap_p > 0, cap_p, 1),
                                 0)
        finished_now = []
        for i, alloc in decision.run.items():
            done[i] += per_slot[i] * alloc.n_workers
            if done[i] >= jobs[i].workload_chunks:
                finish[i] = t
                finished_now.append(i)
        completed = tuple(sorted(finished_now))
        gone = set(finished_now) | set(decision.reject)
        active = [i for i in active if i not in gone]
    outcomes = []
    for i, job in enumerate(jobs):
        end = finish[i]
        utility = 0.0 if end is None else sigmoid_utility(end - job.arrival, *job.utility)
        if end is not None:
            reason = "finished"
        elif i in rejected:
            reason = rejected[i]
        else:
            reason = "not finished by the horizon"
        outcomes.append(JobOutcome(job.arrival, job_class(job), admitted[i], end, utility,
                                   reason))
    return SlottedRun(policy.name, jobs, tuple(outcomes), util_w, util_p, decision_s,
                      time.perf_counter() - started)
