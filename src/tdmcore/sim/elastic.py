"""Event-driven simulator of the elastic policies (DRAGON, KOD2, weighted, baselines).

A job trains ``steps x BATCH_IMAGES`` images at :meth:`ElasticJob.rate` for its
current workers and placement; rates change only at events — arrivals,
completions, the policy's periodic sync, plans, the end of a rescale — so progress
between events is exact.  A job runs once its PSs and at least ``min_workers``
workers are placed (``workers`` for the non-elastic policies); until then the pods
it holds do nothing.  A job whose smallest starting gang under the policy
(:meth:`~tdmcore.elastic.base.ElasticPolicy.start_workers`: ``min_workers`` for
DRAGON and KOD2, ``workers`` for the others) would not fit even the empty cluster is
rejected at arrival (it could only block queues forever); the same job may thus be
rejected under one policy and run under another.  Changing a running job's worker
count costs ``rescale_s`` of checkpoint-and-restart during which it makes no progress
(**[decision]** 45 s: DRAGON §4.2 measured 40 s to 1 min).

Every plan goes through :func:`tdmcore.elastic.base.apply_plan` (all or nothing); a
plan that cannot be applied is a policy bug and stops the run with
:class:`PolicyError`.  The run ends when every job has finished, or when nothing can
change any more — no job runs, none will arrive, and the policy has nothing to do —
in which case the jobs still holding pods are reported as **deadlocked** (the
partial gangs of Kubeflow) and the others as starved.  A rescale of a job already
restarting restarts the restart: its pause ends ``rescale_s`` after the last one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from .. import _validation as v
from .._equality import ValueEquality
from ..elastic.base import ElasticPolicy, ElasticView, Plan, apply_plan, free_matrix, pack
from ..elastic.job import ElasticJob, check_jobs
from ..framework import PolicyError
from ..model import Cluster, ClusterState

__all__ = ["HORIZON_AFTER_LAST_S", "ElasticOutcome", "ElasticRun", "PolicyError", "run_elastic"]

_DONE_EPS = 1e-6


@dataclass(frozen=True)
class ElasticOutcome:
    """One job: when it started and finished, and how much time scaling cost."""

    name: str
    arrival_s: float
    start_s: float | None
    finish_s: float | None
    scaling_s: float
    rescales: int
    peak_workers: int
    #: finished, deadlocked, starved, rejected (its smallest starting gang under the
    #: policy does not fit the empty cluster), unfinished (not finished when the run
    #: reached its horizon)
    status: str

    @property
    def wait_s(self) -> float | None:
        return None if self.start_s is None else self.start_s - self.arrival_s

    @property
    def elapsed_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.arrival_s

    @property
    def running_s(self) -> float | None:
        if self.finish_s is None or self.start_s is None:
            return None
        return self.finish_s - self.start_s - self.scaling_s


@dataclass(frozen=True, eq=False)
class ElasticRun(ValueEquality):
    policy: str
    outcomes: tuple[ElasticOutcome, ...]
    times_s: NDArray[np.float64]        # event times
    busy_gpus: NDArray[np.float64]      # GPUs of training workers from each event on
    total_gpus: float
    decision_s: NDArray[np.float64] = field(compare=False)  # wall clock: not in ==
    wall_s: float = field(compare=False)

    @property
    def finished(self) -> int:
        return sum(o.status == "finished" for o in self.outcomes)

    @property
    def deadlocked(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.outcomes if o.status == "deadlocked")

    @property
    def makespan_s(self) -> float:
        ends = [o.finish_s for o in self.outcomes if o.finish_s is not None]
        return max(ends) if ends else math.inf

    def mean(self, what: str) -> float:
        """Mean of ``elapsed_s``, ``wait_s``, ``running_s`` or ``scaling_s`` over the
        finished jobs (inf if a job never finished, for the time metrics)."""
        if what not in ("elapsed_s", "wait_s", "running_s", "scaling_s"):
            raise ValueError(f"what: expected elapsed_s, wait_s, running_s or scaling_s, "
                             f"got {what!r}")
        if what != "scaling_s" and self.finished < len(self.outcomes):
            return math.inf
        values = [getattr(o, what) for o in self.outcomes if o.status == "finished"]
        return float(np.mean(values)) if values else math.nan

    @property
    def gpu_utilization(self) -> float:
        """Time-averaged share of GPUs held by training workers, up to the makespan."""
        end = self.makespan_s if math.isfinite(self.makespan_s) else float(self.times_s[-1])
        if end <= 0 or len(self.times_s) < 2 or self.total_gpus <= 0:
            return 0.0  # nothing ran, or no GPU to hold (a CPU-only cluster)
        t = np.minimum(self.times_s, end)
        dt = np.diff(t)
        return float((self.busy_gpus[:-1] * dt).sum() / (end * self.total_gpus))


#: How long after the last arrival a run goes on at most, by default (30 days).
HORIZON_AFTER_LAST_S = 30 * 86400.0


def run_elastic(policy: ElasticPolicy, cluster: Cluster, jobs: Sequence[ElasticJob], *,
                rescale_s: float = 45.0, horizon_s: float | None = None,
                stall_s: float = 3600.0) -> ElasticRun:
    """Run ``policy`` on ``jobs`` over ``cluster`` until all finish or nothing can move.

    "Nothing can move" (**[decision]**): no job runs, none will arrive, and the
    policy has applied no plan for ``stall_s`` (an hour) of simulated time — longer
    than any timer of the shipped policies (KOD2's 300 s starvation limit).  The run
    also stops at ``horizon_s`` (default: :data:`HORIZON_AFTER_LAST_S`, 30 days,
    after the last arrival, so that sparse arrivals are never cut off); a job not
    finished by then is ``unfinished``.
    """
    if not isinstance(cluster, Cluster):
        raise ValueError("cluster: expected a tdmcore.model.Cluster")
    specs = check_jobs(jobs)
    rescale_s = v.real_number("rescale_s", rescale_s)
    if rescale_s < 0:
        raise ValueError(f"rescale_s: must be >= 0, got {rescale_s}")
    if horizon_s is None:
        horizon_s = max((spec.arrival_s for spec in specs.values()), default=0.0) \
            + HORIZON_AFTER_LAST_S
    horizon_s = v.positive_float("horizon_s", horizon_s)
    stall_s = v.positive_float("stall_s", stall_s)
    started = time.perf_counter()
    policy.reset(specs)
    state = ClusterState(cluster)
    names = sorted(specs, key=lambda j: (specs[j].arrival_s, j))
    arrivals = [(specs[j].arrival_s, j) for j in names]
    next_arrival = 0
    done = dict.fromkeys(names, 0.0)
    waiting: list[str] = []
    waiting_since: dict[str, float] = {}
    running: list[str] = []
    start_s: dict[str, float] = {}
    finish_s: dict[str, float] = {}
    paused_until = dict.fromkeys(names, -math.inf)
    scaling = dict.fromkeys(names, 0.0)
    rescales = dict.fromkeys(names, 0)
    peak = dict.fromkeys(names, 0)
    total_gpus = float(cluster.gpu.sum())
    times: list[float] = [0.0]
    busy: list[float] = [0.0]
    decisions: list[float] = []
    t = 0.0
    quiet_since = 0.0
    next_sync = 0.0
    rate: dict[str, float] = {}
    rejected: set[str] = set()

    def workers_and_rate(name: str) -> tuple[int, float]:
        job = specs[name]
        pods = state.job_pods(name)
        ps_nodes = {p.node for p in pods if not job.is_worker(p.pod.name)}
        worker_nodes = [p.node for p in pods if job.is_worker(p.pod.name)]
        remote = sum(n not in ps_nodes for n in worker_nodes)
        link = min((float(cluster.link_gbps[n]) for n in ps_nodes), default=math.inf)
        return len(worker_nodes), job.rate(len(worker_nodes), remote, link)

    def required(name: str) -> int:
        job = specs[name]
        return job.min_workers if policy.elastic else job.workers

    # the policy's smallest starting gang (ElasticPolicy.start_workers); a policy
    # without one starts at the size it runs with at least
    start_workers = getattr(policy, "start_workers", None)

    def fits_empty(name: str) -> bool:
        job = specs[name]
        pods = job.gang(start_workers(job) if start_workers is not None else required(name))
        return all(n is not None for n in pack(pods, free_matrix(ClusterState(cluster))))

    def can_run(name: str) -> bool:
        job = specs[name]
        pods = state.job_pods(name)
        n_ps = sum(not job.is_worker(p.pod.name) for p in pods)
        n_w = len(pods) - n_ps
        return n_ps == job.n_ps and n_w >= required(name)

    while True:
        # ---- the next event
        candidates = [horizon_s]
        if next_arrival < len(arrivals):
            candidates.append(arrivals[next_arrival][0])
        for name in running:
            if paused_until[name] > t:
                candidates.append(paused_until[name])
            elif rate[name] > 0:
                candidates.append(t + (specs[name].images - done[name]) / rate[name])
        if waiting or running:
            candidates.append(next_sync if next_sync > t else t + policy.sync_s)
        t_next = max(t, min(candidates))
        for name in running:  # progress over [t, t_next]: paused all of it or none
            if paused_until[name] <= t:
                done[name] += rate[name] * (t_next - t)
        t = t_next
        if t >= horizon_s:
            break
        changed = False
        for name in list(running):
            left = specs[name].images - done[name]
            # done, or its remaining time is below the clock's resolution at t (late
            # arrivals: at t ~ 1e8 s a step under ~1e-8 s does not move t at all)
            if (left <= specs[name].images * 1e-12 + _DONE_EPS
                    or (rate[name] > 0 and t + left / rate[name] <= t)) \
                    and paused_until[name] <= t:
                finish_s[name] = t
                running.remove(name)
                for p in list(state.job_pods(name)):
                    state.remove(p.pod.name)
                changed = True
        while next_arrival < len(arrivals) and arrivals[next_arrival][0] <= t:
            name = arrivals[next_arrival][1]
            next_arrival += 1
            if not fits_empty(name):
                rejected.add(name)
                continue
            waiting.append(name)
            waiting_since[name] = t
            changed = True
        sync = t >= next_sync
        if sync:
            next_sync = t + policy.sync_s
        plans: list[Plan] = []
        if changed or sync:
            view = ElasticView(t, state, specs, tuple(waiting), tuple(running),
                               dict(waiting_since))
            tick = time.perf_counter()
            plans = policy.decide(view)
            decisions.append(time.perf_counter() - tick)
            for plan in plans:
                try:
                    apply_plan(state, plan)
                except ValueError as exc:
                    raise PolicyError(f"{policy.name}: at {t:.1f} s: {exc}") from None
                if plan.job in running and plan.action in ("scale_up", "scale_down"):
                    # a rescale during a rescale restarts the restart: count the extension
                    scaling[plan.job] += t + rescale_s - max(paused_until[plan.job], t)
                    paused_until[plan.job] = t + rescale_s
                    rescales[plan.job] += 1
        if changed or plans or any(paused_until[n] == t for n in running):
            for name in list(waiting):
                if can_run(name):
                    waiting.remove(name)
                    running.append(name)
                    start_s[name] = t
            count: dict[str, int] = {}
            for name in running:
                count[name], rate[name] = workers_and_rate(name)
                peak[name] = max(peak[name], count[name])
            training = sum(count[n] * specs[n].worker.gpu for n in running
                           if paused_until[n] <= t)
            times.append(t)
            busy.append(training)
        if len(finish_s) + len(rejected) == len(names):
            break
        if running or next_arrival < len(arrivals) or plans:
            quiet_since = t
        elif t - quiet_since >= stall_s:
            break  # nothing has changed for stall_s: nothing will
    outcomes = []
    for name in names:
        if name in finish_s:
            status = "finished"
        elif name in rejected:
            status = "rejected"
        elif t >= horizon_s:  # running, waiting or not yet arrived when the run stopped
            status = "unfinished"
        elif state.job_pods(name):
            status = "deadlocked"
        else:
            status = "starved"
        outcomes.append(ElasticOutcome(name, specs[name].arrival_s, start_s.get(name),
                                       finish_s.get(name), scaling[name], rescales[name],
                                       peak[name], status))
    return ElasticRun(policy.name, tuple(outcomes), np.array(times), np.array(busy),
                      total_gpus, np.array(decisions), time.perf_counter() - started)
