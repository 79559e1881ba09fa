"""Dorm (Sun et al., 2017; OASiS §V-A, scheme (iv)).

Every job is admitted.  On each arrival and completion the worker/PS numbers and
placement of all unfinished jobs are recomputed by an MILP that maximizes resource
utilization subject to fairness and adjustment-overhead constraints.  Our copy of
OASiS names the constraints but not their form; **[decision]** this module solves,
with scipy's HiGHS, over each job's worker count ``Y_i`` and PS count ``Z_i``:

    maximize    sum_i sum_r alpha_i^r Y_i / (R C_w^r)  -  1e-6 sum_i Z_i
    subject to  (3), (6), (7) per job; (4)-(5) on each pool's total capacity;
                fairness: every job's share of every resource, over both pools, is at
                most ``(1 + theta) / n`` (n = unfinished jobs);
                adjustment: at most ``max_adjust`` of the jobs that were running change
                their worker count (binary ``delta_i``, ``|Y_i - Y_i^prev| <= N_i delta_i``),
                and a running job keeps at least one worker.

Then placement, round-robin (running jobs whose counts did not change stay where
they are): a job whose tasks do not all fit on the servers gets one worker fewer
(and the PSs that (6) then needs) until they do.  Pooling the capacity keeps the
MILP small — per-server variables made HiGHS hit a 2 s limit on half the events of
a 100-job run — at the price of this repair step.  Utilization counts the worker
pool (the resources that train); the tiny PS term keeps PS counts at what (6)
needs.  If the adjustment limit makes the problem infeasible (new arrivals shrink
every fair share below one running job's single worker) it is lifted for that event,
together with the one-worker floor; if HiGHS finds no solution within
``time_limit_s``, the previous allocation stays.
"""

from __future__ import annotations

import numpy as np

from ... import _validation as v
from .._milp import solve_integer_program
from ..online import Job
from .base import (
    Allocation,
    RoundRobin,
    SlotDecision,
    SlottedCluster,
    SlotView,
    place_job,
    ps_count,
    take,
)

__all__ = ["DormPolicy"]


class DormPolicy:
    """Utilization-maximizing reallocation with fairness and adjustment limits."""

    name = "dorm"

    def __init__(self, theta: float = 0.5, max_adjust: int = 2,
                 time_limit_s: float = 2.0) -> None:
        self.theta = v.real_number("theta", theta)
        if self.theta < 0:
            raise ValueError(f"theta: must be >= 0, got {theta}")
        self.max_adjust = v.whole("max_adjust", max_adjust, 0)
        self.time_limit_s = v.positive_float("time_limit_s", time_limit_s)

    def reset(self, cluster: SlottedCluster, jobs: tuple[Job, ...]) -> None:
        self.cluster = cluster
        self.jobs = jobs
        self.current: dict[int, Allocation] = {}
        self.solves = 0
        self.relaxed = 0
        self.timeouts = 0
        self.rr_w = RoundRobin(cluster.n_workers_servers)
        self.rr_p = RoundRobin(cluster.n_ps_servers)

    def step(self, view: SlotView) -> SlotDecision:
        for i in view.completed:
            self.current.pop(i, None)
        if (view.arrived or view.completed) and view.active:
            result = self._solve(view.active, limit_adjust=True)
            if result is None:
                self.relaxed += 1
                result = self._solve(view.active, limit_adjust=False)
            if result is not None:
                self.current = result
        return SlotDecision(run=dict(self.current))

    def _solve(self, active: tuple[int, ...], *,
               limit_adjust: bool) -> dict[int, Allocation] | None:
        counts = self._counts(active, limit_adjust=limit_adjust)
        if counts is None:
            return None
        return self._place(active, counts)

    def _counts(self, active: tuple[int, ...], *,
                limit_adjust: bool) -> dict[int, int] | None:
        """The MILP: worker counts per job (PS counts follow from (6))."""
        pool_w = self.cluster.worker_capacity.sum(axis=0)
        pool_p = self.cluster.ps_capacity.sum(axis=0)
        total = self.cluster.total_capacity
        n_r = pool_w.shape[0]
        n = len(active)
        n_var = 3 * n  # Y_i, Z_i, delta_i
        cost = np.zeros(n_var)
        upper = np.full(n_var, np.inf)
        lower = np.zeros(n_var)
        rows: list[tuple[dict[int, float], float, float]] = []
        fair = (1.0 + self.theta) / n
        for a, i in enumerate(active):
            job = self.jobs[i]
            alpha, beta = np.asarray(job.worker_res), np.asarray(job.ps_res)
            y, z, d = 3 * a, 3 * a + 1, 3 * a + 2
            cost[y] = -float(sum(alpha[r] / (n_r * pool_w[r]) for r in range(n_r)
                                 if pool_w[r] > 0))
            cost[z] = 1e-6
            upper[y] = float(job.chunks)  # (3)
            upper[d] = 1.0
            rows.append(({y: job.worker_bw, z: -job.ps_bw}, -np.inf, 0.0))  # (6)
            rows.append(({z: 1.0, y: -1.0}, -np.inf, 0.0))  # (7)
            for r in range(n_r):  # fairness
                if total[r] > 0 and (alpha[r] > 0 or beta[r] > 0):
                    rows.append(({y: alpha[r] / total[r], z: beta[r] / total[r]}, -np.inf,
                                 fair))
            prev = self.current.get(i)
            if prev is not None and limit_adjust:
                lower[y] = 1.0
                rows.append(({y: 1.0, d: -float(job.chunks)}, -np.inf, float(prev.n_workers)))
                rows.append(({y: 1.0, d: float(job.chunks)}, float(prev.n_workers), np.inf))
        if limit_adjust:
            rows.append(({3 * a + 2: 1.0 for a in range(n)}, -np.inf, float(self.max_adjust)))
        for r in range(n_r):  # (4)-(5) on the pools
            rows.append(({3 * a: self.jobs[i].worker_res[r] for a, i in enumerate(active)},
                         -np.inf, float(pool_w[r])))
            rows.append(({3 * a + 1: self.jobs[i].ps_res[r] for a, i in enumerate(active)},
                         -np.inf, float(pool_p[r])))
        self.solves += 1
        res = solve_integer_program(cost, rows, lower, upper, self.time_limit_s)
        if res.status == 1:
            self.timeouts += 1
        if res.x is None:
            return None
        x = np.round(res.x).astype(np.int64)
        return {i: int(x[3 * a]) for a, i in enumerate(active)}

    def _place(self, active: tuple[int, ...], counts: dict[int, int]) -> dict[int, Allocation]:
        free_w = np.array(self.cluster.worker_capacity, dtype=np.float64)
        free_p = np.array(self.cluster.ps_capacity, dtype=np.float64)
        out: dict[int, Allocation] = {}
        order = sorted(active, key=lambda i: (i not in self.current, i))
        for i in order:
            job = self.jobs[i]
            prev = self.current.get(i)
            y = counts[i]
            if prev is not None and prev.n_workers == y and take(prev, job, free_w, free_p):
                out[i] = prev
                continue
            while y > 0:
                alloc = place_job(job, y, ps_count(job, y), free_w, free_p, self.rr_w,
                                  self.rr_p)
                if alloc is not None:
                    out[i] = alloc
                    break
                y -= 1
        return out
