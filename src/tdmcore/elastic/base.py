"""Plans, the view a policy decides on, and the placement helpers they share.

Every decision of an elastic policy is a :class:`Plan`: which pods to add where and
which to remove, for one job.  :func:`apply_plan` applies a plan atomically: on a
copy of the :class:`~tdmcore.model.ClusterState`, and only if every step succeeds
is the copy committed (docs/elastic.md; issue 5 item 5).  Policies decide on their
own copy, so the plans of one decision are consistent with each other; the
simulator and the Kubernetes bridge apply them with :func:`apply_plan`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from ..model import ClusterState, Pod
from .job import ElasticJob

__all__ = [
    "ACTIONS",
    "ElasticPolicy",
    "ElasticView",
    "Plan",
    "apply_plan",
    "fits",
    "fits_on",
    "free_matrix",
    "free_until_fits",
    "next_worker_pods",
    "pack",
]

#: What a plan does to its job.
ACTIONS = ("start", "scale_up", "scale_down", "place")

_EPS = 1e-9

T = TypeVar("T")


@dataclass(frozen=True)
class Plan:
    """Pods to add (with their node index) and pod names to remove, for one job."""

    job: str
    action: str
    add: tuple[tuple[Pod, int], ...] = ()
    remove: tuple[str, ...] = ()
    reason: str = ""

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"action: expected one of {', '.join(ACTIONS)}, got "
                             f"{self.action!r}")
        # a string would be taken letter by letter; a list is kept as a tuple
        if isinstance(self.remove, str | bytes) or not isinstance(self.remove, tuple | list) \
                or not all(isinstance(name, str) for name in self.remove):
            raise ValueError(f"remove: expected a tuple of pod names, got {self.remove!r:.80}")
        if isinstance(self.add, str | bytes) or not isinstance(self.add, tuple | list) \
                or not all(isinstance(a, tuple | list) and len(a) == 2
                           and isinstance(a[0], Pod) for a in self.add):
            raise ValueError(f"add: expected a tuple of (Pod, node index) pairs, got "
                             f"{self.add!r:.80}")
        object.__setattr__(self, "remove", tuple(self.remove))
        object.__setattr__(self, "add", tuple((pod, node) for pod, node in self.add))
        for pod, _ in self.add:
            if pod.job != self.job:
                raise ValueError(f"add: pod {pod.name!r} belongs to {pod.job!r}, not "
                                 f"{self.job!r}")


def apply_plan(state: ClusterState, plan: Plan) -> None:
    """Apply ``plan`` to ``state`` as a whole, or raise ValueError and change nothing."""
    if not isinstance(plan, Plan):
        raise ValueError(f"plan: expected a Plan, got {type(plan).__name__}")
    trial = state.copy()
    try:
        for name in plan.remove:
            entry = trial.placed.get(name)
            if entry is None or entry.pod.job != plan.job:
                raise ValueError(f"{name!r} is not a placed pod of job {plan.job!r}")
            trial.remove(name)
        for pod, node in plan.add:
            trial.place(pod, node)
    except ValueError as exc:
        raise ValueError(f"plan: {plan.action} of {plan.job!r} cannot be applied: {exc}") \
            from None
    state.restore_from(trial)


@dataclass(frozen=True)
class ElasticView:
    """The state a policy decides on at ``now_s``.

    ``waiting``: submitted jobs that do not run yet (arrival order), ``running``: the
    running ones (start order), ``waiting_since_s``: when each waiting job was
    submitted.  ``state`` is the simulator's (or the cluster's): never mutate it.
    """

    now_s: float
    state: ClusterState
    jobs: Mapping[str, ElasticJob]
    waiting: tuple[str, ...]
    running: tuple[str, ...]
    waiting_since_s: Mapping[str, float]

    def workers_of(self, job: str, state: ClusterState | None = None) -> list[tuple[str, int]]:
        """(pod name, node) of the job's placed workers, in deploy order."""
        st = self.state if state is None else state
        spec = self.jobs[job]
        return [(p.pod.name, p.node) for p in st.job_pods(job) if spec.is_worker(p.pod.name)]

    def ps_nodes(self, job: str, state: ClusterState | None = None) -> set[int]:
        st = self.state if state is None else state
        spec = self.jobs[job]
        return {p.node for p in st.job_pods(job) if not spec.is_worker(p.pod.name)}


class ElasticPolicy(Protocol):
    """A job-level controller: on each event, the plans to apply (in order).

    ``elastic``: whether a job runs with any count in ``[min_workers, max_workers]``
    (else exactly ``workers``).  ``sync_s``: the period of its periodic invocation.
    :meth:`start_workers`: the fewest workers it ever starts a job with (a job whose
    gang of that size cannot fit the empty cluster can never start, and the
    simulator rejects it at arrival instead of letting it block a queue); a policy
    without it is taken to start at ``min_workers`` if ``elastic``, else ``workers``.
    """

    name: str
    elastic: bool
    sync_s: float

    def start_workers(self, job: ElasticJob) -> int:
        """The fewest workers this policy starts ``job`` with."""

    def reset(self, jobs: Mapping[str, ElasticJob], now_s: float = 0.0) -> None:
        """Forget any previous run; the new one starts at ``now_s`` with ``jobs`` (the
        simulator: every job of the run, from 0; the Kubernetes bridge: the jobs it
        tracks, from its first decision's wall-clock time)."""

    def track(self, jobs: Mapping[str, ElasticJob]) -> None:
        """The jobs are now ``jobs`` (the Kubernetes bridge: some were submitted,
        some deleted, an annotation changed): what the policy has learned of the jobs
        that stay (DRAGON's last scheduling action, KOD2's raised weights, the
        weighted scheduler's queue) is kept, the departed ones are forgotten."""

    def decide(self, view: ElasticView) -> list[Plan]:
        """The plans for this invocation, consistent with each other."""


def free_matrix(state: ClusterState) -> NDArray[np.float64]:
    """Free (GPUs, cores, GiB) per node, shape (nodes, 3)."""
    return np.stack([state.free_gpu, state.free_cpu, state.free_mem], axis=1)


def demand(pod: Pod) -> NDArray[np.float64]:
    return np.array([pod.gpu, pod.cpu, pod.mem_gib])


def fits(free: NDArray[np.float64], need: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Whether ``need`` (GPUs, cores, GiB) fits each row of ``free`` (or the one row),
    up to the fit tolerance: the one rule of "fits" of the elastic policies."""
    return np.asarray(np.all(free + _EPS >= need, axis=-1), dtype=np.bool_)


def fits_on(free_row: NDArray[np.float64], pod: Pod) -> bool:
    return bool(fits(free_row, demand(pod)))


def worker_index(pod_name: str) -> int:
    """``k`` of a worker pod named ``<job>-worker-<k>``."""
    return int(pod_name.rsplit("-", 1)[1])


def removal_order(view: ElasticView, work: ClusterState, job: str) -> list[str]:
    """``job``'s workers in the order a scale-down takes them (DRAGON and KOD2): those
    on nodes without one of its PSs first, then the highest index first."""
    ps_nodes = view.ps_nodes(job, work)
    workers = sorted(view.workers_of(job, work),
                     key=lambda w: (w[1] in ps_nodes, -worker_index(w[0])))
    return [name for name, _ in workers]


def next_worker_pods(job: ElasticJob, state: ClusterState, count: int) -> list[Pod]:
    """``count`` new worker pods with indices after the job's highest one."""
    used = [worker_index(p.pod.name) for p in state.job_pods(job.name)
            if job.is_worker(p.pod.name)]
    start = max(used) + 1 if used else 0
    return [job.worker_pod(start + k) for k in range(count)]


def pack(pods: Sequence[Pod], free: NDArray[np.float64], *,
         order: Sequence[int] | None = None) -> list[int | None]:
    """Locality-aware packing on as few nodes as possible (DRAGON §3.3, KOD2 §4.1).

    First a node that holds every pod (most free GPUs first, then cores, then
    index); else the node that holds the longest prefix of ``pods``, then the others
    by most free resources, each filled in turn.  Returns each pod's node, or None
    for the pods that did not fit (the caller decides whether a partial gang is
    acceptable).  ``free`` is not modified.
    """
    n_nodes = free.shape[0]
    if order is None:
        order = sorted(range(n_nodes), key=lambda n: (-free[n, 0], -free[n, 1],
                                                       -free[n, 2], n))
    total = np.sum([demand(p) for p in pods], axis=0) if pods else np.zeros(3)
    for n in order:
        if fits(free[n], total):
            return [n] * len(pods)
    best, best_count = None, 0
    for n in order:
        left = free[n].copy()
        count = 0
        for p in pods:
            d = demand(p)
            if not fits(left, d):
                break
            left -= d
            count += 1
        if count > best_count:
            best, best_count = n, count
    if best is None:
        return [None] * len(pods)
    node_order = [best] + [n for n in order if n != best]
    return fill(pods, free, node_order)


def fill(pods: Sequence[Pod], free: NDArray[np.float64],
         node_order: Sequence[int]) -> list[int | None]:
    """Place ``pods`` in order, filling each node of ``node_order`` before the next;
    a pod that fits nowhere further along stays None (as do the ones after it)."""
    left = free.copy()
    out: list[int | None] = [None] * len(pods)
    i = 0
    for n in node_order:
        while i < len(pods) and fits(left[n], demand(pods[i])):
            left[n] -= demand(pods[i])
            out[i] = n
            i += 1
        if i == len(pods):
            break
    return out


def commit(state: ClusterState, plan: Plan, plans: list[Plan]) -> None:
    """Apply ``plan`` to the policy's working copy and record it."""
    apply_plan(state, plan)
    plans.append(plan)


def free_until_fits(
    work: ClusterState, victims: Sequence[tuple[str, Sequence[str]]],
    place: Callable[[ClusterState], T | None],
) -> tuple[dict[str, list[str]], T] | None:
    """The scale-down loop shared by DRAGON, KOD2 and the weighted scheduler.

    ``victims``: (job, the worker pods it may lose, in removal order), in victim
    order.  Pods are removed one at a time from a copy of ``work``, re-testing
    ``place`` after each; returns the pods removed per job and the placement found,
    or None (nothing is changed) when even removing them all is not enough.
    """
    trial = work.copy()
    removed: dict[str, list[str]] = {}
    for job, pods in victims:
        for name in pods:
            trial.remove(name)
            removed.setdefault(job, []).append(name)
            found = place(trial)
            if found is not None:
                return removed, found
    return None


def scale_down_plans(removed: dict[str, list[str]], reason: str) -> list[Plan]:
    return [Plan(job, "scale_down", remove=tuple(names), reason=reason)
            for job, names in removed.items()]
