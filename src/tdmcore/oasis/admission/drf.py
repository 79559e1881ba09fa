"""Dominant Resource Fairness, the default of YARN and Mesos (OASiS §V-A, scheme (ii)).

Every job is admitted.  On each arrival and completion the worker and PS counts of
all active jobs are recomputed by progressive filling (Ghodsi et al., NSDI'11): the
job with the smallest dominant share (ties: arrival order) gets one more worker,
plus a PS when constraint (6) needs one, placed round-robin; a job stops growing at
``N_i`` workers (constraint (3)) or when its next worker or PS no longer fits.
Dominant share: ``max_r (y alpha^r + z beta^r) / C^r`` with ``C^r`` summed over both
pools.  Between events the allocation stays as it is.
"""

from __future__ import annotations

import heapq

import numpy as np

from ..online import Job
from .base import (
    Allocation,
    RoundRobin,
    SlotDecision,
    SlottedCluster,
    SlotView,
    dominant_share,
    ps_count,
)

__all__ = ["DrfPolicy"]


class DrfPolicy:
    """Max-min fairness on dominant shares, recomputed at arrivals and completions."""

    name = "drf"

    def reset(self, cluster: SlottedCluster, jobs: tuple[Job, ...]) -> None:
        self.cluster = cluster
        self.jobs = jobs
        self.total = cluster.total_capacity
        self.current: dict[int, Allocation] = {}

    def step(self, view: SlotView) -> SlotDecision:
        if view.arrived or view.completed:
            self.current = self.allocate(view.active)
        return SlotDecision(run=dict(self.current))

    def allocate(self, active: tuple[int, ...]) -> dict[int, Allocation]:
        """Progressive filling over ``active`` on the empty cluster."""
        free_w = np.array(self.cluster.worker_capacity, dtype=np.float64)
        free_p = np.array(self.cluster.ps_capacity, dtype=np.float64)
        rr_w = RoundRobin(self.cluster.n_workers_servers)
        rr_p = RoundRobin(self.cluster.n_ps_servers)
        workers = {i: np.zeros(self.cluster.n_workers_servers, dtype=np.int64) for i in active}
        ps = {i: np.zeros(self.cluster.n_ps_servers, dtype=np.int64) for i in active}
        count = dict.fromkeys(active, 0)
        n_ps = dict.fromkeys(active, 0)
        heap = [(0.0, rank, i) for rank, i in enumerate(active)]
        heapq.heapify(heap)
        while heap:
            _, rank, i = heapq.heappop(heap)
            job = self.jobs[i]
            y = count[i] + 1
            if y > job.chunks:
                continue
            extra_ps = ps_count(job, y) - n_ps[i]
            w = rr_w.place(1, np.asarray(job.worker_res), free_w)
            if w is None:
                continue
            if extra_ps > 0:
                p = rr_p.place(extra_ps, np.asarray(job.ps_res), free_p)
                if p is None:  # undo the worker: the increment fails as a whole
                    free_w[np.flatnonzero(w)[0]] += np.asarray(job.worker_res)
                    continue
                ps[i] += p
                n_ps[i] += extra_ps
            workers[i] += w
            count[i] = y
            heapq.heappush(heap, (dominant_share(job, y, n_ps[i], self.total), rank, i))
        return {i: Allocation(workers[i], ps[i]) for i in active if count[i] > 0}
