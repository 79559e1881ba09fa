"""Risk-Reward Heuristic (Irwin, Grit and Chase, HPDC'04; OASiS §V-A, scheme (iii)).

The paper's description: a job is admitted if its utility minus the delay cost its
admission causes exceeds a threshold; on each arrival and completion, unfinished
jobs either continue (always with the same worker/PS numbers once running) or pause,
decided by the job's future utility gain minus cost.  Our copy lost the details, so
the rules are **[decision]** and exactly these:

- Each job runs with a fixed worker count (:func:`~.base.fixed_worker_counts`, the
  same draw as FIFO) and the fewest PSs constraint (6) allows; ``d_i`` is the slots
  it needs from now at that size, ``s_i`` its dominant share.
- *Reward* ``R_i(t) = f_i(t + d_i - 1 - a_i)``: its utility if it runs from now on
  (0 if it cannot finish by the horizon).
- *Admission*: the delay cost is what the others lose if each waits ``ceil(s_i d_i)``
  more slots — ``sum_j R_j(t) - f_j(t + d_j - 1 + ceil(s_i d_i) - a_j)`` over the
  admitted unfinished jobs; admit when ``R_i - cost > threshold``.
- *Run or pause*: at each event, every admitted unfinished job ``i`` has the gain
  ``R_i(t)`` and the cost ``sum_j R_j(t) - f_j(t + d_j - 1 + ceil(s_i d_i) - a_j)``
  over the other unfinished jobs (their utility lost to the delay that running ``i``
  causes: FirstReward's opportunity cost).  Jobs are ranked by net reward per
  resource use ``(R_i - cost_i) / (s_i d_i)`` (ties: arrival); in that order a job
  runs if its net reward is above ``threshold`` and it fits — a running job in its
  current place, a waiting one placed round-robin — otherwise it pauses, keeping its
  progress.  A job whose reward has dropped to 0 is dropped.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from ... import _validation as v
from ..._kernels.oasis_dp import sigmoid_many
from ..online import Job
from .base import (
    Allocation,
    RoundRobin,
    SlotDecision,
    SlottedCluster,
    SlotView,
    as_seed,
    dominant_share,
    fixed_worker_counts,
    place_job,
    ps_count,
    take,
    worker_range,
)

__all__ = ["RrhPolicy"]


class RrhPolicy:
    """Admission by reward minus delay cost; run or pause by reward rate."""

    name = "rrh"

    def __init__(self, workers: tuple[int, int] = (1, 30), seed: int = 0,
                 threshold: float = 0.0) -> None:
        self.workers_range = worker_range(workers)
        self.seed = as_seed("seed", seed)
        self.threshold = v.real_number("threshold", threshold)

    def reset(self, cluster: SlottedCluster, jobs: tuple[Job, ...]) -> None:
        self.cluster = cluster
        self.jobs = jobs
        self.total = cluster.total_capacity
        self.workers = fixed_worker_counts(jobs, *self.workers_range, seed=self.seed)
        self.share = np.array([dominant_share(j, int(y), ps_count(j, int(y)), self.total)
                               for j, y in zip(jobs, self.workers, strict=True)])
        self.arrival = np.array([j.arrival for j in jobs], dtype=np.float64)
        self.g = np.array([j.utility for j in jobs], dtype=np.float64).reshape(-1, 3)
        self.running: dict[int, Allocation] = {}
        self.rr_w = RoundRobin(cluster.n_workers_servers)
        self.rr_p = RoundRobin(cluster.n_ps_servers)

    def _rewards(self, idx: NDArray[np.int64], end: NDArray[np.float64]) -> NDArray[np.float64]:
        """``f_j(end_j - a_j)``, 0 past the horizon; ``end`` broadcasts against ``idx``."""
        g1, g2, g3 = self.g[idx, 0], self.g[idx, 1], self.g[idx, 2]
        delay = end - self.arrival[idx]
        shape = np.broadcast_shapes(g1.shape, delay.shape)
        flat = [np.ascontiguousarray(np.broadcast_to(a, shape), dtype=np.float64).ravel()
                for a in (delay, g1, g2, g3)]
        out = np.empty(flat[0].shape[0])
        sigmoid_many(*flat, out)  # the one utility rule (sigmoid_utility's)
        return np.where(end < self.cluster.n_slots, out.reshape(shape), 0.0)

    def _delay_costs(self, idx: NDArray[np.int64], end: NDArray[np.float64],
                     reward: NDArray[np.float64], causes: NDArray[np.int64],
                     waits: NDArray[np.float64]) -> NDArray[np.float64]:
        """For each job in ``causes``: utility the jobs ``idx`` lose if they wait its
        ``waits`` slots (itself excluded)."""
        delayed = self._rewards(idx[None, :], end[None, :] + waits[:, None])
        loss = reward[None, :] - delayed
        loss[causes[:, None] == idx[None, :]] = 0.0
        return np.asarray(loss.sum(axis=1))

    def step(self, view: SlotView) -> SlotDecision:
        decision = SlotDecision()
        for i in view.completed:
            self.running.pop(i, None)
        if not (view.arrived or view.completed):
            decision.run.update(self.running)
            return decision
        active = np.array(view.active, dtype=np.int64)
        need = np.array([view.slots_needed(i, int(self.workers[i])) for i in active])
        end = view.t + need - 1
        reward = self._rewards(active, end)
        waits = np.ceil(self.share[active] * need)
        arrived = set(view.arrived)
        old = np.array([i not in arrived for i in active])
        for a, i in enumerate(active):
            if i in arrived:  # admission: the delay it would cause the admitted jobs
                admit_cost = float(np.sum((reward - self._rewards(active, end + waits[a]))[old]))
                if reward[a] - admit_cost <= self.threshold:
                    decision.reject[int(i)] = (f"reward {reward[a]:.4g} - delay cost "
                                               f"{admit_cost:.4g} <= threshold "
                                               f"{self.threshold:.4g}")
            elif reward[a] <= 0:
                decision.reject[int(i)] = "no utility left (cannot finish in time)"
        keep = np.array([int(i) not in decision.reject for i in active], dtype=bool)
        active, need, end = active[keep], need[keep], end[keep]
        reward, waits = reward[keep], waits[keep]
        cost = self._delay_costs(active, end, reward, active, waits)
        net = reward - cost
        use = self.share[active] * need
        order = sorted(range(len(active)),
                       key=lambda a: (-(net[a] / use[a]) if use[a] > 0 else -math.inf,
                                      int(active[a])))
        free_w = np.array(self.cluster.worker_capacity, dtype=np.float64)
        free_p = np.array(self.cluster.ps_capacity, dtype=np.float64)
        running: dict[int, Allocation] = {}
        for a in order:
            i = int(active[a])
            if net[a] <= self.threshold:
                continue
            job = self.jobs[i]
            if i in self.running:
                if take(self.running[i], job, free_w, free_p):
                    running[i] = self.running[i]
                continue
            y = int(self.workers[i])
            alloc = place_job(job, y, ps_count(job, y), free_w, free_p, self.rr_w, self.rr_p)
            if alloc is not None:
                running[i] = alloc
        self.running = running
        decision.run.update(running)
        return decision
