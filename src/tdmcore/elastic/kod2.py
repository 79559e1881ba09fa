"""KOD2: weight-based preemptive scheduling with scale-in and scale-out.

docs/elastic.md, "KOD2" (paper the KOD2 paper, Algorithms 1-3).

- Weight: ``w' = min_workers / (norm_cpu + norm_mem)`` of the job's minimum request
  (PSs plus ``min_workers`` workers, normalised by the cluster's capacity);
  ``weight = 1 / (1 + exp(-w'))`` (**[decision]**: the paper's Eq. (1) was lost in
  extraction; this is its prose).
- Admission and preemption (Alg. 1 and the paper's state list; **revised
  2026-11-28**): a waiting job whose minimum (its PSs and ``min_workers`` workers)
  fits the free resources starts at once with ``min_workers``, whatever its weight
  ("if there are enough resources available, it is immediately enqueued in the
  running queue").  Weight decides only preemption: the waiting jobs are taken by
  descending weight (ties: arrival), and the heaviest one that does not fit may
  **scale-in** (Alg. 2) running jobs of no greater weight, in ascending weight —
  skipping jobs of equal weight that arrived earlier, searching the PS's node last,
  never a PS, never below ``min_workers`` — one worker at a time until it fits.  If
  it cannot, nothing is scaled in for it or for any lighter job this round; lighter
  jobs that fit still start.  (Until 2026-11-28 a job started only if its weight
  was at least every running job's, so a job that fit waited behind a heavier
  running one.)
- **Starvation**: a job that has waited longer than ``starve_limit_s``
  (**[decision]** 300 s) has its weight raised above every running job's (to the
  largest running weight plus 1: sigmoids stay below 1, so also above every job
  that never starved), so that it goes first and may scale in any running job; it
  keeps it once running.
- **Scale-out** (Alg. 3): running jobs below ``max_workers``, in descending weight,
  get one more worker on each node that can host it (their own nodes first).
- Placement: PSs and workers on the fewest nodes, PSs with their workers
  (:func:`~.base.pack`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .. import _validation as v
from ..model import ClusterState, Pod
from .base import (
    ElasticView,
    Plan,
    commit,
    demand,
    fits_on,
    free_matrix,
    free_until_fits,
    next_worker_pods,
    removal_order,
    scale_down_plans,
)
from .dragon import start_plan
from .job import ElasticJob

__all__ = ["Kod2Policy", "kod2_weight"]


def kod2_weight(job: ElasticJob, total_cpu: float, total_mem_gib: float) -> float:
    """``1 / (1 + exp(-w'))``, ``w' = min_workers / (norm_cpu + norm_mem)``
    (``total_cpu``, ``total_mem_gib``: the cluster's capacity, >= 0; 0 leaves that
    term out)."""
    for name, total in (("total_cpu", total_cpu), ("total_mem_gib", total_mem_gib)):
        if v.real_number(name, total) < 0:
            raise ValueError(f"{name}: must be >= 0, got {total}")
    cpu = job.n_ps * job.ps.cpu + job.min_workers * job.worker.cpu
    mem = job.n_ps * job.ps.mem_gib + job.min_workers * job.worker.mem_gib
    norm = (cpu / total_cpu if total_cpu > 0 else 0.0) + (
        mem / total_mem_gib if total_mem_gib > 0 else 0.0)
    raw = job.min_workers / norm if norm > 0 else math.inf
    return 1.0 / (1.0 + math.exp(-min(raw, 700.0)))


class Kod2Policy:
    """Preemptive weight-priority scheduling with elastic workers."""

    name = "kod2"
    elastic = True

    def start_workers(self, job: ElasticJob) -> int:
        """``min_workers``: a job starts with its minimum request."""
        return job.min_workers

    def __init__(self, starve_limit_s: float = 300.0, sync_s: float = 15.0) -> None:
        self.starve_limit_s = v.positive_float("starve_limit_s", starve_limit_s)
        self.sync_s = v.positive_float("sync_s", sync_s)

    def reset(self, jobs: Mapping[str, ElasticJob], now_s: float = 0.0) -> None:
        self.jobs: Mapping[str, ElasticJob] = {}
        self.base: dict[str, float] = {}
        self.raised: dict[str, float] = {}
        self.track(jobs)

    def track(self, jobs: Mapping[str, ElasticJob]) -> None:
        """A job that stays keeps its raised weight (a starved job keeps it once
        running); a job whose spec changed gets its weight recomputed."""
        old = self.jobs
        self.jobs = jobs
        self.base = {n: w for n, w in self.base.items() if n in jobs and old.get(n) == jobs[n]}
        self.raised = {n: w for n, w in self.raised.items() if n in jobs}

    def weight(self, name: str) -> float:
        return self.raised.get(name, self.base[name])

    def decide(self, view: ElasticView) -> list[Plan]:
        work = view.state.copy()
        total_cpu = float(work.cluster.cpu.sum())
        total_mem = float(work.cluster.mem_gib.sum())
        for name in (*view.waiting, *view.running):
            if name not in self.base:
                self.base[name] = kod2_weight(self.jobs[name], total_cpu, total_mem)
        # a starved job's weight is above every running job's at every decision, not
        # only when it first starves: a job that started since with an equal or
        # higher weight (one starved with it, or later) would otherwise block it
        top = max((self.weight(j) for j in view.running), default=0.0)
        for name in view.waiting:
            if view.now_s - view.waiting_since_s[name] > self.starve_limit_s \
                    and self.raised.get(name, -math.inf) <= top:
                self.raised[name] = max(top, self.base[name]) + 1.0
        plans: list[Plan] = []
        waiting = list(view.waiting)
        running = list(view.running)
        # By descending weight, ties in arrival order.  Free resources only shrink
        # along the pass once a scale-in has failed (none follows), so a job passed
        # over could not start later in it: one pass decides.
        by_weight = sorted(waiting, key=lambda j: (-self.weight(j), waiting.index(j)))
        may_scale_in = True  # this job is the heaviest waiting one that does not fit
        for new in by_weight:
            job = self.jobs[new]
            plan = start_plan(job, job.min_workers, job.min_workers, work)
            if plan is None and may_scale_in:
                plan = self._scale_in(view, work, new, waiting, running, plans)
                may_scale_in = plan is not None
            if plan is None:
                continue
            commit(work, plan, plans)
            waiting.remove(new)
            running.append(new)
        self._scale_out(view, work, running, plans)
        return plans

    def _scale_in(self, view: ElasticView, work: ClusterState, new: str,
                  waiting: list[str], running: list[str], plans: list[Plan]) -> Plan | None:
        """Alg. 2: free workers of lower-weight jobs until ``new``'s minimum fits."""
        job = self.jobs[new]
        victims = []
        for victim in sorted(running, key=lambda j: (self.weight(j), running.index(j))):
            if self.weight(victim) > self.weight(new):
                break
            if self.weight(victim) == self.weight(new) and \
                    self.jobs[victim].arrival_s <= job.arrival_s:
                continue  # equal weight, arrived earlier: excluded
            spare = len(view.workers_of(victim, work)) - self.jobs[victim].min_workers
            if spare <= 0:
                continue
            victims.append((victim, removal_order(view, work, victim)[:spare]))
        result = free_until_fits(
            work, victims, lambda st: start_plan(job, job.min_workers, job.min_workers, st))
        if result is None:
            return None
        removed, found = result
        for plan in scale_down_plans(removed, f"scale-in for {new}"):
            commit(work, plan, plans)
        return Plan(new, "start", found.add, reason="after scale-in")

    def _scale_out(self, view: ElasticView, work: ClusterState, running: list[str],
                   plans: list[Plan]) -> None:
        """Alg. 3: one more worker per node that can host it, descending weight."""
        order = sorted(running, key=lambda j: (-self.weight(j), running.index(j)))
        for name in order:
            job = self.jobs[name]
            room = job.max_workers - len(view.workers_of(name, work))
            if room <= 0:
                continue
            free = free_matrix(work)
            own = {p.node for p in work.job_pods(name)}
            candidates = sorted(range(free.shape[0]), key=lambda n: (n not in own, n))
            add: list[tuple[Pod, int]] = []
            for pod in next_worker_pods(job, work, room):
                nodes = [n for n in candidates if fits_on(free[n], pod)
                         and n not in {m for _, m in add}]
                if not nodes:
                    break
                free[nodes[0]] -= demand(pod)
                add.append((pod, nodes[0]))
            if add:
                commit(work, Plan(name, "scale_up", tuple(add), reason="scale-out"), plans)
