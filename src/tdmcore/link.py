"""One shared link end to end: pods -> base period -> circle -> rotations -> shifts.

This is the Score-phase computation of Algorithm 1 (lines 14-16) for one link, and
the offline recalculation of §III-C when run in ``optimal`` mode.  It knows nothing
about clusters or front ends; the scheduler pipeline and the CLI both call it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from . import _validation as v
from ._kernels.node_score import INCOMPATIBLE_MAX_SCORE
from .base_period import BasePeriod, unify_periods
from .rotation import RotationResult, search_rotations
from .scoring import link_utilization, score
from .traffic import discretize_unified, rotations_to_shifts

__all__ = ["LinkPlan", "LinkPod", "plan_link"]


@dataclass(frozen=True)
class LinkPod:
    """A pod's periodic traffic on one link (spec/metronome.md §1).

    ``job`` groups pods that synchronise and so share a rotation (Eq. 17); it
    defaults to the pod's own name.  ``priority``: larger is higher.
    """

    name: str
    period_ms: float
    duty_cycle: float
    bandwidth_gbps: float
    priority: int = 0
    job: str | None = None

    @property
    def job_name(self) -> str:
        return self.job if self.job is not None else self.name


@dataclass(frozen=True)
class LinkPlan:
    """The rotations and time shifts chosen for the pods on one link.

    Attributes
    ----------
    pods : tuple of LinkPod
        In the caller's order (= deploy order).
    jobs : tuple of str
        One name per search row: row 0 is the reference job (highest priority,
        earliest deployed), then the others by priority, then deploy order.
    base : BasePeriod
    demand : ndarray (jobs, bins)
        Each job's demand at rotation 0 (its pods summed, Eq. 17).
    result : RotationResult
    shifts_ms : dict
        Pod name -> time shift in ms (its job's rotation / N x T).
    unshifted_score, unshifted_utilization : float
        The same link with every rotation 0 (what a TDM-unaware scheduler gets).
    utilization : float
        ``xi`` of the link at the chosen rotations (Eq. 6).
    """

    pods: tuple[LinkPod, ...]
    jobs: tuple[str, ...]
    capacity_gbps: float
    bins: int
    base: BasePeriod
    demand: NDArray[np.float64]
    midpoints: tuple[NDArray[np.float64], ...]
    result: RotationResult
    shifts_ms: dict[str, float] = field(default_factory=dict)
    utilization: float = 0.0
    unshifted_score: float = 0.0
    unshifted_utilization: float = 0.0
    result_mode: str = "first"

    @property
    def job_rotations(self) -> dict[str, int]:
        return {job: int(r) for job, r in zip(self.jobs, self.result.rotations, strict=True)}


def plan_link(
    pods: Sequence[LinkPod],
    capacity_gbps: float,
    *,
    bins: int = 72,
    mode: Literal["first", "optimal"] = "first",
    gt_ms: float = 5.0,
    et_frac: float = 0.10,
    max_multiple: int = 8,
) -> LinkPlan:
    """Interleave the comm phases of ``pods`` sharing a link of ``capacity_gbps``.

    Unifies the periods (spec §4), draws every pod on the circle, sums the pods
    of each job into one row (Eq. 17), puts the reference job in row 0 (Eq. 16),
    searches the rotations (spec §5) and converts them into shifts in ms.
    """
    if not pods:
        raise ValueError("pods: at least one pod is required")
    names = [p.name for p in pods]
    if len(set(names)) != len(names):
        raise ValueError("pods: pod names must be unique")
    cap = v.positive_float("capacity_gbps", capacity_gbps)
    n_bins = v.bins_count(bins)
    for p in pods:
        if p.bandwidth_gbps > cap:
            raise ValueError(
                f"pods: {p.name} needs {p.bandwidth_gbps} Gbps, above the link's {cap} Gbps "
                "(Eq. 14)"
            )
    periods = [p.period_ms for p in pods]
    base = unify_periods(periods, [p.priority for p in pods], gt_ms=gt_ms, et_frac=et_frac,
                         max_multiple=max_multiple)
    rows = discretize_unified(base, periods, [p.duty_cycle for p in pods],
                              [p.bandwidth_gbps for p in pods], n_bins)

    # Jobs in row order: highest priority first, ties by first deployed pod.
    first_index: dict[str, int] = {}
    job_priority: dict[str, int] = {}
    for i, p in enumerate(pods):
        first_index.setdefault(p.job_name, i)
        job_priority[p.job_name] = max(job_priority.get(p.job_name, p.priority), p.priority)
    jobs = sorted(first_index, key=lambda j: (-job_priority[j], first_index[j]))
    members = {j: [i for i, p in enumerate(pods) if p.job_name == j] for j in jobs}
    demand = np.stack([rows.demand[members[j]].sum(axis=0) for j in jobs])
    mids = tuple(np.concatenate([rows.midpoints[i] for i in members[j]]) for j in jobs)
    limits = np.array([int(min(rows.limits[i] for i in members[j])) for j in jobs])

    result = search_rotations(demand, cap, limits, mode=mode, mids=mids)
    if not base.compatible:
        # spec §4 step 3: incompatible periods get no perfect score; the circle of
        # truncated patterns only ranks such links (ceiling just below 100).
        result = RotationResult(result.rotations, min(result.score, INCOMPATIBLE_MAX_SCORE),
                                False, None, result.evaluated)
    job_shift = dict(zip(jobs, rotations_to_shifts(result.rotations, base.period_ms, n_bins),
                         strict=True))
    zero = np.zeros(len(jobs), dtype=np.int64)
    return LinkPlan(
        pods=tuple(pods),
        jobs=tuple(jobs),
        capacity_gbps=cap,
        bins=n_bins,
        base=base,
        demand=demand,
        midpoints=mids,
        result=result,
        shifts_ms={p.name: float(job_shift[p.job_name]) for p in pods},
        utilization=link_utilization(demand, result.rotations, cap),
        unshifted_score=score(demand, zero, cap),
        unshifted_utilization=link_utilization(demand, zero, cap),
        result_mode=mode,
    )
