"""DRAGON (Lin, Yeh and Chou, CLOSER 2019) and its two baselines.

docs/elastic.md, "DRAGON".  On every arrival, departure and periodic sync
(``sync_s``, 15 s in the authors' controller):

1. **Scale-down for urgent jobs.**  A waiting job is urgent once it has waited longer
   than ``tau_s`` (30 s).  The urgent job with the smallest total request (GPUs, then
   cores, then GiB at its minimum size; ties: arrival) is started with
   ``min_workers`` (**[decision]**, as the authors' controller does) if running jobs
   can make room: victims in order of most surplus workers ``w - min_workers``, one
   worker at a time, nodes without the victim's PS first, never below
   ``min_workers``, never a PS, re-testing after each removal.  If even all the
   surplus cannot make it fit, nothing changes.  If it fits already, step 1 does
   nothing and AFCFS starts jobs in arrival order (**[decision]**): the procedure
   "aims to launch urgent jobs ... by releasing resources", and with nothing to
   release an older, larger job that fits goes first, as in the authors'
   controller, whose urgent job is the oldest waiting one.  Starting the smallest
   urgent job first even then was tried: on Table 1 DRAGON's mean elapsed time
   went from 1,673 s to 1,924 s, behind the locality baseline (1,783 s), against
   the paper's Fig. 7 (docs/elastic.md).
2. **AFCFS.**  Repeatedly, the first waiting job in arrival order whose gang fits is
   started: its PSs and as many of its ``workers`` as fit, at least ``min_workers``
   (the authors' controller), packed on as few nodes as possible (:func:`~.base.pack`).
3. **Scale-up.**  When ``mu_s`` (60 s) have passed since the last scheduling action,
   free GPUs go to running jobs (start order) that already have a task on that node,
   up to ``max_workers``.

``LocalityPolicy`` is DRAGON without scaling (steps 2 only, exactly ``workers``
workers); ``KubeflowPolicy`` is the default scheduler: no gang, each pending pod on
its own, spread (LeastAllocated).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .. import _validation as v
from ..model import ClusterState
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
    pack,
    removal_order,
    scale_down_plans,
)
from .job import ElasticJob, total_request

__all__ = ["DragonPolicy", "KubeflowPolicy", "LocalityPolicy", "start_plan"]


def start_plan(job: ElasticJob, lo: int, hi: int, state: ClusterState) -> Plan | None:
    """Start ``job`` with its PSs and between ``lo`` and ``hi`` workers, packed."""
    pods = job.gang(hi)
    nodes = pack(pods, free_matrix(state))
    placed = [(p, n) for p, n in zip(pods, nodes, strict=True) if n is not None]
    if len(placed) < job.n_ps + lo or any(n is None for n in nodes[:job.n_ps]):
        return None
    return Plan(job.name, "start", tuple(placed))


class DragonPolicy:
    """Scale-down for urgent jobs, AFCFS with gang packing, scale-up on idle GPUs."""

    name = "dragon"
    elastic = True

    def start_workers(self, job: ElasticJob) -> int:
        """``min_workers`` when scaling (AFCFS starts a gang between ``min_workers``
        and what fits), else ``workers``."""
        return job.min_workers if self.scaling else job.workers

    def __init__(self, tau_s: float = 30.0, mu_s: float = 60.0, sync_s: float = 15.0,
                 scaling: bool = True) -> None:
        self.tau_s = v.positive_float("tau_s", tau_s)
        self.mu_s = v.positive_float("mu_s", mu_s)
        self.sync_s = v.positive_float("sync_s", sync_s)
        self.scaling = bool(scaling)

    def reset(self, jobs: Mapping[str, ElasticJob], now_s: float = 0.0) -> None:
        """The run's start counts as the last scheduling action (scale-up waits
        ``mu_s`` from it)."""
        self.last_action_s = v.real_number("now_s", now_s)
        self.track(jobs)

    def track(self, jobs: Mapping[str, ElasticJob]) -> None:
        self.jobs = jobs

    def decide(self, view: ElasticView) -> list[Plan]:
        work = view.state.copy()
        plans: list[Plan] = []
        waiting = list(view.waiting)
        running = list(view.running)
        if self.scaling:
            self._scale_down(view, work, waiting, running, plans)
        self._afcfs(view, work, waiting, running, plans)
        if self.scaling and view.now_s - self.last_action_s >= self.mu_s:
            self._scale_up(view, work, running, plans)
            self.last_action_s = view.now_s
        return plans

    # -- 1 --------------------------------------------------------------------
    def _scale_down(self, view: ElasticView, work: ClusterState, waiting: list[str],
                    running: list[str], plans: list[Plan]) -> None:
        urgent = [j for j in waiting if view.now_s - view.waiting_since_s[j] > self.tau_s]
        if not urgent:
            return
        self.last_action_s = view.now_s
        target = self.jobs[min(urgent, key=lambda j: (
            total_request(self.jobs[j], self.jobs[j].min_workers), waiting.index(j)))]
        lo = target.min_workers
        if start_plan(target, lo, lo, work) is not None:
            return  # it fits already: nothing to free; AFCFS starts jobs in arrival order
        surplus = {j: len(view.workers_of(j, work)) - self.jobs[j].min_workers
                   for j in running}
        victims = []
        for job in sorted((j for j in running if surplus[j] > 0),
                          key=lambda j: (-surplus[j], running.index(j))):
            victims.append((job, removal_order(view, work, job)[:surplus[job]]))
        result = free_until_fits(work, victims, lambda st: start_plan(target, lo, lo, st))
        if result is None:
            return
        removed, found = result
        for plan in scale_down_plans(removed, f"make room for urgent {target.name}"):
            commit(work, plan, plans)
        commit(work, Plan(target.name, "start", found.add, reason="urgent"), plans)
        waiting.remove(target.name)
        running.append(target.name)

    # -- 2 --------------------------------------------------------------------
    def _afcfs(self, view: ElasticView, work: ClusterState, waiting: list[str],
               running: list[str], plans: list[Plan]) -> None:
        # one start per pass (a start changes what fits), until a pass starts nothing
        while any(self._start(view, work, name, waiting, running, plans)
                  for name in list(waiting)):
            pass

    def _start(self, view: ElasticView, work: ClusterState, name: str, waiting: list[str],
               running: list[str], plans: list[Plan]) -> bool:
        """Start waiting job ``name`` as AFCFS does (its PSs and as many of its
        ``workers`` as fit, at least :meth:`start_workers`), if its gang fits."""
        job = self.jobs[name]
        plan = start_plan(job, self.start_workers(job), job.workers, work)
        if plan is None:
            return False
        commit(work, plan, plans)
        waiting.remove(name)
        running.append(name)
        self.last_action_s = view.now_s
        return True

    # -- 3 --------------------------------------------------------------------
    def _scale_up(self, view: ElasticView, work: ClusterState, running: list[str],
                  plans: list[Plan]) -> None:
        for name in running:
            job = self.jobs[name]
            have = len(view.workers_of(name, work))
            room = job.max_workers - have
            if room <= 0:
                continue
            nodes = sorted({p.node for p in work.job_pods(name)})
            add = []
            free = free_matrix(work)
            for pod in next_worker_pods(job, work, room):
                for n in nodes:
                    if fits_on(free[n], pod):
                        free[n] -= demand(pod)
                        add.append((pod, n))
                        break
                else:
                    break
            if add:
                commit(work, Plan(name, "scale_up", tuple(add), reason="idle GPUs"), plans)


class LocalityPolicy(DragonPolicy):
    """DRAGON without scaling: AFCFS with gang packing, fixed ``workers``."""

    name = "locality"
    elastic = False

    def __init__(self, sync_s: float = 15.0) -> None:
        super().__init__(sync_s=sync_s, scaling=False)


class KubeflowPolicy:
    """The default scheduler under Kubeflow: no gang, each pod on its own.

    The operator creates a job's pods one after another from its arrival, PSs first,
    ``pod_interval_s`` apart (**[decision]** 1 s); the scheduler takes the pending
    pods in creation order — so the pods of jobs submitted close together
    interleave — and puts each on the feasible node with the most free CPU and
    memory (LeastAllocated, the default scoring; ties: node index).  A pod that fits
    nowhere stays pending and later pods are still tried.  A job runs only once all
    its pods are placed, so partial gangs can hold every GPU: the deadlock DRAGON
    describes.  ``sync_s`` (1 s) stands for the scheduler's continuous loop.
    """

    name = "kubeflow"
    elastic = False

    def start_workers(self, job: ElasticJob) -> int:
        """``workers``: the operator creates every pod of the job."""
        return job.workers

    def __init__(self, sync_s: float = 1.0, pod_interval_s: float = 1.0) -> None:
        self.sync_s = v.positive_float("sync_s", sync_s)
        self.pod_interval_s = v.real_number("pod_interval_s", pod_interval_s)
        if self.pod_interval_s < 0:
            raise ValueError(f"pod_interval_s: must be >= 0, got {pod_interval_s}")

    def reset(self, jobs: Mapping[str, ElasticJob], now_s: float = 0.0) -> None:
        self.track(jobs)

    def track(self, jobs: Mapping[str, ElasticJob]) -> None:
        self.jobs = jobs
        self.gangs = {name: job.gang(job.workers) for name, job in jobs.items()}

    def decide(self, view: ElasticView) -> list[Plan]:
        plans: list[Plan] = []
        pending = []
        for rank, name in enumerate(view.waiting):
            for k, pod in enumerate(self.gangs[name]):
                created = view.waiting_since_s[name] + k * self.pod_interval_s
                if created > view.now_s + 1e-9:
                    break
                if pod.name not in view.state.placed:
                    pending.append((created, rank, k, pod))
        if not pending:
            return plans
        state = view.state
        free = free_matrix(state)
        cap = np.stack([state.cluster.cpu, state.cluster.mem_gib], axis=1)
        unfit: set[tuple[float, float, float]] = set()  # free only shrinks: skip repeats
        for _, _, _, pod in sorted(pending, key=lambda x: x[:3]):
            key = (pod.gpu, pod.cpu, pod.mem_gib)
            if key in unfit:
                continue
            feasible = np.flatnonzero(fits(free, demand(pod))).tolist()
            if not feasible:
                unfit.add(key)
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(cap > 0, free[:, 1:] / np.where(cap > 0, cap, 1), 0)
            score = share.mean(axis=1)
            node = max(feasible, key=lambda n: (score[n], -n))
            free[node] -= demand(pod)
            plans.append(Plan(pod.job, "place", ((pod, node),)))
        return plans


