"""FIFO, the default of Hadoop and Spark (OASiS §V-A, scheme (i)).

Jobs are admitted and start in arrival order, each with a fixed number of workers
(:func:`~.base.fixed_worker_counts`) and the fewest PSs that constraint (6) allows,
placed round-robin.  A job keeps its placement until it finishes.  The queue is
strict: while its head does not fit, no later job starts (head-of-line blocking).
A job that would not fit even on the empty cluster is rejected at arrival, so it
cannot block the queue forever.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from numpy.typing import NDArray

from ..online import Job
from .base import (
    Allocation,
    RoundRobin,
    SlotDecision,
    SlottedCluster,
    SlotView,
    as_seed,
    fits_empty,
    fixed_worker_counts,
    place_job,
    ps_count,
    worker_range,
)

__all__ = ["FifoPolicy"]


class FifoPolicy:
    """Strict first-in first-out with fixed worker/PS counts."""

    name = "fifo"

    def __init__(self, workers: tuple[int, int] = (1, 30), seed: int = 0) -> None:
        self.workers_range = worker_range(workers)
        self.seed = as_seed("seed", seed)

    def reset(self, cluster: SlottedCluster, jobs: tuple[Job, ...]) -> None:
        self.cluster = cluster
        self.jobs = jobs
        self.workers: NDArray[np.int64] = fixed_worker_counts(jobs, *self.workers_range,
                                                              seed=self.seed)
        self.queue: deque[int] = deque()
        self.running: dict[int, Allocation] = {}
        self.rr_w = RoundRobin(cluster.n_workers_servers)
        self.rr_p = RoundRobin(cluster.n_ps_servers)

    def step(self, view: SlotView) -> SlotDecision:
        decision = SlotDecision()
        for i in view.completed:
            self.running.pop(i, None)
        for i in view.arrived:
            job = self.jobs[i]
            y = int(self.workers[i])
            if fits_empty(job, y, ps_count(job, y), self.cluster):
                self.queue.append(i)
            else:
                decision.reject[i] = f"{y} workers do not fit on the empty cluster"
        free_w = np.array(self.cluster.worker_capacity, dtype=np.float64)
        free_p = np.array(self.cluster.ps_capacity, dtype=np.float64)
        for i, alloc in self.running.items():
            free_w -= alloc.workers[:, None] * np.asarray(self.jobs[i].worker_res)
            free_p -= alloc.ps[:, None] * np.asarray(self.jobs[i].ps_res)
        while self.queue:
            i = self.queue[0]
            job = self.jobs[i]
            y = int(self.workers[i])
            placed = place_job(job, y, ps_count(job, y), free_w, free_p, self.rr_w, self.rr_p)
            if placed is None:
                break
            self.running[i] = placed
            self.queue.popleft()
        decision.run.update(self.running)
        return decision
