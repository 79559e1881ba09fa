"""The weighted scheduler of the Kubeflow blog post (the weighted-scheduler article).

docs/elastic.md, "Weighted scheduler".  Its pseudo-code, line by line:

- **Weighting** (queue insertion): job J goes before the first queued q with
  ``U_J > U_q`` or (``U_J == U_q`` and ``R_J > R_q``), ``R = cpu + mem`` of its
  request; else at the end.  **[decision]** ``U`` is the job's sigmoid utility
  ``g1 / (1 + exp(g2 (d - g3)))`` at ``d`` = its expected completion delay if it
  started on arrival with ``workers`` workers, all on one node; computed once, at
  arrival.
- **Gang placement**: all pods on one node if one node fits them all; else first
  fit, node by node in index order (the pseudo-code's "first available node").
- **Scheduling loop**: if the best waiting utility beats the best running one, the
  head ``h`` of the queue starts if it can; if it cannot, **ScaleDown** frees
  workers of lower-utility running jobs (ascending utility, one worker at a time,
  never below ``min_workers``) until ``h`` fits, and starts it (nothing changes if it
  cannot; **[decision]**: line 11 reads as running ScaleDown only when ``h`` could not
  be scheduled).  Then, if there was no such ``h`` or the scale-down succeeded, the
  first queued job that can be scheduled starts and the round ends (line 22's
  ``return``).  Otherwise, last, **ScaleUp**: node by node, running jobs (start
  order) get workers up to ``max_workers`` while the node has room.  A queue head
  that never fits blocks the jobs behind it, as the pseudo-code does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .. import _validation as v
from ..model import ClusterState, Pod
from ..oasis.online import sigmoid_utility
from .base import (
    ElasticView,
    Plan,
    commit,
    demand,
    fits,
    fits_on,
    free_matrix,
    free_until_fits,
    next_worker_pods,
    scale_down_plans,
)
from .job import ElasticJob

__all__ = ["WeightedPolicy", "expected_utility", "gang_place"]


def expected_utility(job: ElasticJob) -> float:
    """``U``: the sigmoid at the completion delay of ``workers`` workers on one node."""
    if not isinstance(job, ElasticJob):
        raise ValueError(f"job: expected an ElasticJob, got {type(job).__name__}")
    delay = job.images / job.rate(job.workers)
    return sigmoid_utility(delay, *job.utility)


def gang_place(pods: list[Pod], state: ClusterState) -> list[tuple[Pod, int]] | None:
    """All pods on one node if one fits them all, else first fit by node index."""
    free = free_matrix(state)
    total = sum((demand(p) for p in pods), start=demand(pods[0]) * 0)
    for n in range(free.shape[0]):
        if fits(free[n], total):
            return [(p, n) for p in pods]
    out = []
    for p in pods:
        for n in range(free.shape[0]):
            if fits_on(free[n], p):
                free[n] -= demand(p)
                out.append((p, n))
                break
        else:
            return None
    return out


class WeightedPolicy:
    """Utility-ordered queue, gang placement, ScaleDown / ScaleUp."""

    name = "weighted"
    elastic = True

    def start_workers(self, job: ElasticJob) -> int:
        """``workers``: a job starts with its whole requested gang (others are
        scaled down to their minimum to make room, never it)."""
        return job.workers

    def __init__(self, sync_s: float = 15.0) -> None:
        self.sync_s = v.positive_float("sync_s", sync_s)

    def reset(self, jobs: Mapping[str, ElasticJob], now_s: float = 0.0) -> None:
        self.jobs: Mapping[str, ElasticJob] = {}
        self.queue: list[str] = []
        self.seen: set[str] = set()
        self.track(jobs)

    def track(self, jobs: Mapping[str, ElasticJob]) -> None:
        """Queued jobs that stay keep their places; a queued job whose spec changed is
        queued again by its new utility (a running job's spec changes with its
        worker count, the policy's own doing)."""
        requeue = {q for q in self.queue if q in jobs and jobs[q] != self.jobs.get(q)}
        self.jobs = jobs
        self.utility = {name: expected_utility(job) for name, job in jobs.items()}
        self.queue = [q for q in self.queue if q in jobs and q not in requeue]
        self.seen = {s for s in self.seen if s in jobs and s not in requeue}

    def _request(self, name: str) -> float:
        job = self.jobs[name]
        return (job.n_ps * (job.ps.cpu + job.ps.mem_gib)
                + job.workers * (job.worker.cpu + job.worker.mem_gib))

    def insert(self, name: str) -> None:
        """The Weighting Algorithm (lines 1-20)."""
        u, r = self.utility[name], self._request(name)
        for pos, q in enumerate(self.queue):
            if u > self.utility[q] or (u == self.utility[q] and r > self._request(q)):
                self.queue.insert(pos, name)
                return
        self.queue.append(name)

    def decide(self, view: ElasticView) -> list[Plan]:
        for name in view.waiting:
            if name not in self.seen:
                self.seen.add(name)
                self.insert(name)
        self.queue = [q for q in self.queue if q in view.waiting]
        work = view.state.copy()
        plans: list[Plan] = []
        running = list(view.running)
        head: str | None = None
        scaled_down = False
        if self.queue:
            best_wait = max(self.utility[q] for q in self.queue)
            best_run = max((self.utility[j] for j in running), default=-math.inf)
            if best_wait > best_run:
                head = self.queue[0]
                if not self._try_start(head, work, plans, running):
                    scaled_down = self._scale_down(view, head, work, running, plans)
        if scaled_down:
            # the ScaleDown freed room for h, the first in W: lines 18-22 start it
            # (done by _scale_down) and return; no second job starts this round
            return plans
        if head is None:
            for name in list(self.queue):
                if self._try_start(name, work, plans, running):
                    return plans  # line 22: return (no ScaleUp in this round)
        self._scale_up(view, work, running, plans)
        return plans

    def _try_start(self, name: str, work: ClusterState, plans: list[Plan],
                   running: list[str]) -> bool:
        job = self.jobs[name]
        placed = gang_place(job.gang(job.workers), work)
        if placed is None:
            return False
        commit(work, Plan(name, "start", tuple(placed)), plans)
        self.queue.remove(name)
        running.append(name)
        return True

    def _scale_down(self, view: ElasticView, head: str, work: ClusterState,
                    running: list[str], plans: list[Plan]) -> bool:
        job = self.jobs[head]
        victims = []
        for victim in sorted(running, key=lambda j: (self.utility[j], running.index(j))):
            if self.utility[victim] >= self.utility[head]:
                break
            spare = len(view.workers_of(victim, work)) - self.jobs[victim].min_workers
            workers = view.workers_of(victim, work)[::-1]
            victims.append((victim, [name for name, _ in workers[:max(spare, 0)]]))
        result = free_until_fits(work, victims,
                                 lambda st: gang_place(job.gang(job.workers), st))
        if result is None:
            return False
        removed, found = result
        for plan in scale_down_plans(removed, f"ScaleDown for {head}"):
            commit(work, plan, plans)
        commit(work, Plan(head, "start", tuple(found), reason="after ScaleDown"), plans)
        self.queue.remove(head)
        running.append(head)
        return True

    def _scale_up(self, view: ElasticView, work: ClusterState, running: list[str],
                  plans: list[Plan]) -> None:
        free = free_matrix(work)
        adds: dict[str, list[tuple[Pod, int]]] = {}
        for n in range(free.shape[0]):
            for name in running:
                job = self.jobs[name]
                have = len(view.workers_of(name, work)) + len(adds.get(name, []))
                room = job.max_workers - have
                if room <= 0:
                    continue
                fresh = next_worker_pods(job, work, have - len(view.workers_of(name, work))
                                         + room)[-room:]
                for pod in fresh:
                    if not fits_on(free[n], pod):
                        break
                    free[n] -= demand(pod)
                    adds.setdefault(name, []).append((pod, n))
        for name, add in adds.items():
            commit(work, Plan(name, "scale_up", tuple(add), reason="ScaleUp"), plans)


