"""One shared link end to end: pods -> base period -> circle -> rotations -> shifts.

This is the Score-phase computation of Algorithm 1 (lines 14-16) for one link, and
phase three of §III-C when run in ``optimal`` mode.  It knows nothing
about clusters or front ends; the scheduler pipeline and the CLI both call it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NoReturn

import numpy as np
from numpy.typing import NDArray

from .. import _validation as v
from .._equality import ValueEquality
from .._kernels.circle import reference_first, strict_ranks
from .._kernels.node_score import INCOMPATIBLE_MAX_SCORE
from .base_period import BasePeriod, check_priorities, check_settings, unify
from .rotation import RotationResult, search_rotations
from .scoring import PERFECT_RTOL, _score_from_excess, excess, link_utilization, score
from .traffic import draw, rotations_to_shifts

__all__ = ["PLAN_CACHE", "LinkPlan", "LinkPod", "SharedShifts", "clear_plan_cache",
           "compact_rotations", "plan_link"]

#: Link plans kept by the unchecked path (the least recently used dropped first).
PLAN_CACHE = 1024


class SharedShifts(dict[str, float]):
    """A shared plan's ``shifts_ms``: a dict that refuses every change, as the plan's
    arrays do (equal arguments share one plan, :data:`PLAN_CACHE`).  It reads,
    compares, pickles and serialises to JSON as a dict; ``dict(plan.shifts_ms)`` is
    a copy to change."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("shifts_ms: a shared link plan's shifts are read-only; change a "
                        "copy (dict(plan.shifts_ms))")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __reduce__(self) -> tuple[type[SharedShifts], tuple[dict[str, float]]]:
        return SharedShifts, (dict(self),)


@dataclass(frozen=True)
class LinkPod:
    """A pod's periodic traffic on one link (docs/traffic-circle.md).

    ``job`` names the pod's job; it defaults to the pod's own name.  A link has
    at most one :class:`LinkPod` per job: **[decision, docs/traffic-circle.md,
   ]** a job's row on a link is one pod's demand (one ring
    segment per node, however many of its pods the node holds), which
    :meth:`tdmcore.model.ClusterState.job_links` picks.  ``priority``: larger is
    higher; ``"high"``/``"low"`` are read as :func:`tdmcore.unify_periods` reads
    them (the plan's pods carry the integer).
    """

    name: str
    period_ms: float
    duty_cycle: float
    bandwidth_gbps: float
    priority: int | str = 0
    job: str | None = None

    @property
    def job_name(self) -> str:
        return self.job if self.job is not None else self.name


@dataclass(frozen=True, eq=False)
class LinkPlan(ValueEquality):
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
        Each job's demand at rotation 0 (one row per job and pod).
    result : RotationResult
    shifts_ms : dict
        Pod name -> time shift in ms (its job's rotation / N x T); a
        :class:`SharedShifts`, read-only, in a plan :func:`plan_link` shares.
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
    #: what the plan was made with: (bins, G_T ms, E_T fraction, largest multiple)
    settings: tuple[int, float, float, int] = (72, 5.0, 0.10, 8)

    @property
    def job_rotations(self) -> dict[str, int]:
        return {job: int(r) for job, r in zip(self.jobs, self.result.rotations, strict=True)}


def compact_rotations(arcs_bins: Any, bins: int) -> NDArray[np.int64]:
    """Compact rotations: each row's comm starts where the previous row's ends.

    The paper's ablation "without third-stage optimisation" (§IV-C, Table VII):
    "we adjust the start point of the low priority pods' communication phase to
    align with the end point of the previous pods' communication phase" — no
    cushion slots.  Row 0 (the reference) stays at 0 (Eq. 16); row i starts at
    the first whole bin at or after the end of row i-1's first comm unit
    (``arcs_bins``: each row's comm arc per unit, in bins), modulo ``bins``.
    **[decision]** Whole bins, rounded up, so that no two arcs overlap on the
    circle; a row with several units is packed by its first unit.

    Parameters
    ----------
    arcs_bins : array_like (k,)
        Each row's comm arc per unit, in bins: finite, >= 0 and at most ``bins``.
    bins : int
        Di-Pre ``N``, 8 to 3,600 (docs/traffic-circle.md).
    """
    n_bins = v.bins_count(bins)
    arcs = v.as_float_vector("arcs_bins", arcs_bins)
    bad = np.flatnonzero((arcs < 0.0) | (arcs > n_bins))
    if bad.size:
        raise ValueError(f"arcs_bins[{int(bad[0])}]: expected an arc in [0, {n_bins}] bins, "
                         f"got {float(arcs[bad[0]]):g}")
    return _compact_rotations(arcs, n_bins)


def _compact_rotations(arcs_bins: NDArray[np.float64], bins: int) -> NDArray[np.int64]:
    """:func:`compact_rotations` on arguments already checked."""
    rot = np.zeros(arcs_bins.shape[0], dtype=np.int64)
    end = float(arcs_bins[0]) if arcs_bins.shape[0] else 0.0
    for i in range(1, arcs_bins.shape[0]):
        start = int(np.ceil(end - 1e-9))
        rot[i] = start % bins
        end = start + float(arcs_bins[i])
    return rot


def plan_link(
    pods: Sequence[LinkPod],
    capacity_gbps: float,
    *,
    bins: int = 72,
    mode: Literal["first", "optimal", "compact"] = "first",
    gt_ms: float = 5.0,
    et_frac: float = 0.10,
    max_multiple: int = 8,
) -> LinkPlan:
    """Interleave the comm phases of ``pods`` sharing a link of ``capacity_gbps``.

    Unifies the periods (docs/traffic-circle.md), draws every pod on the circle as its job's
    row, puts the reference job in row 0 (Eq. 16), searches the rotations
    (docs/traffic-circle.md; ``mode="compact"``: :func:`compact_rotations`, the paper's
    ablation without phase three) and converts them into shifts in ms.

    Raises
    ------
    ValueError
        ``pods``: empty, names not unique, two pods of one job (a job's row on a
        link is one pod's demand: pass one pod per job), or a pod faster than
        the link (Eq. 14).

    Notes
    -----
    Equal arguments give the same plan object (the last :data:`PLAN_CACHE` plans
    are kept), so a plan's arrays and its ``shifts_ms`` (:class:`SharedShifts`)
    are read-only.
    """
    if isinstance(pods, str | bytes) or not isinstance(pods, Sequence):
        raise ValueError(f"pods: expected a sequence of LinkPod, got {type(pods).__name__}")
    if not pods:
        raise ValueError("pods: at least one pod is required")
    for i, p in enumerate(pods):
        if not isinstance(p, LinkPod):
            raise ValueError(f"pods[{i}]: expected a LinkPod, got {type(p).__name__}")
        if not isinstance(p.name, str) or not p.name:
            raise ValueError(f"pods[{i}]: name must be a non-empty string, got {p.name!r:.80}")
        if p.job is not None and (not isinstance(p.job, str) or not p.job):
            raise ValueError(f"pods[{i}]: job must be a non-empty string or None, got "
                             f"{p.job!r:.80}")
    names = [p.name for p in pods]
    if len(set(names)) != len(names):
        raise ValueError("pods: pod names must be unique")
    jobs_seen: set[str] = set()
    for p in pods:
        if p.job_name in jobs_seen:
            raise ValueError(f"pods: job {p.job_name!r} has two pods on the link; its row is "
                             "one pod's demand (docs/traffic-circle.md), so give one pod per job")
        jobs_seen.add(p.job_name)
    cap = v.capacity("capacity_gbps", capacity_gbps)
    n_bins = v.bins_count(bins)
    v.pattern([p.period_ms for p in pods], [p.duty_cycle for p in pods],
              [p.bandwidth_gbps for p in pods])
    for p in pods:
        if p.bandwidth_gbps > cap:
            raise ValueError(
                f"pods: {p.name} needs {p.bandwidth_gbps} Gbps, above the link's {cap} Gbps "
                "(Eq. 14)"
            )
    ranks = check_priorities([p.priority for p in pods], len(pods))
    gt, et, m_max = check_settings(gt_ms, et_frac, max_multiple)
    if mode not in ("first", "optimal", "compact"):
        raise ValueError(f"mode: expected 'first', 'optimal' or 'compact', got {mode!r}")
    # the unchecked path takes integer priorities: "high"/"low" (and NumPy integers)
    # as tdmcore.model.priority_value reads them
    pods = [p if type(p.priority) is int and p.priority == r else replace(p, priority=int(r))
            for p, r in zip(pods, ranks.tolist(), strict=True)]
    return _plan_link(pods, cap, n_bins, mode, gt, et, m_max)


def _plan_link(pods: Sequence[LinkPod], cap: float, n_bins: int,
               mode: Literal["first", "optimal", "compact"], gt_ms: float, et_frac: float,
               max_multiple: int) -> LinkPlan:
    """:func:`plan_link` of pods whose patterns, names and settings are valid (the
    unchecked path of the scheduler and the controller, whose pods come from
    validated :class:`~tdmcore.model.TrafficPattern` objects).

    A plan is a pure function of these arguments, so equal arguments share one
    plan: the last :data:`PLAN_CACHE` are kept.  A gang retried while a link keeps
    its pods, the loop filter's plan of a link it leaves as it is, and the
    controller's plan of a Reserve's link are each planned once.  A plan is
    shared, so its arrays and its shifts are read-only.
    """
    return _shared_plan(tuple(pods), cap, n_bins, mode, gt_ms, et_frac, max_multiple)


def clear_plan_cache() -> None:
    """Forget the shared link plans (:data:`PLAN_CACHE`): what a benchmark that times
    one run from scratch calls first; answers never depend on it."""
    _shared_plan.cache_clear()


@functools.lru_cache(maxsize=PLAN_CACHE)
def _shared_plan(pods: tuple[LinkPod, ...], cap: float, n_bins: int,
                 mode: Literal["first", "optimal", "compact"], gt_ms: float, et_frac: float,
                 max_multiple: int) -> LinkPlan:
    """:func:`_plan_link`, planned (once per distinct arguments)."""
    periods = np.array([p.period_ms for p in pods], dtype=np.float64)
    # Rows (one per job) in order: highest priority first, ties by deploy order.
    rank = np.empty(len(pods), dtype=np.int64)
    reference_first(np.array([p.priority for p in pods], dtype=np.int64),
                    np.arange(len(pods), dtype=np.int64), rank)
    order = rank.tolist()
    # unification ranks the jobs as the controller does (strict_ranks)
    strict = np.empty(len(pods), dtype=np.int64)
    strict_ranks(np.array([p.priority for p in pods], dtype=np.int64),
                 np.arange(len(pods), dtype=np.int64), strict)
    base = unify(periods, strict, gt_ms, et_frac, max_multiple)
    rows = draw(base, periods, np.array([p.duty_cycle for p in pods], dtype=np.float64),
                np.array([p.bandwidth_gbps for p in pods], dtype=np.float64), n_bins)

    jobs = [pods[i].job_name for i in order]
    demand = rows.demand[order]
    mids = tuple(rows.midpoints[i] for i in order)
    limits = rows.limits[order]

    if mode == "compact":
        multiples = base.multiples if base.compatible else np.ones(len(pods), dtype=np.int64)
        arcs = rows.circle_duty[order] * n_bins / multiples[order]
        rot = _compact_rotations(arcs, n_bins)
        exc = float(excess(demand, rot, cap))
        result = RotationResult(rot, _score_from_excess(exc, cap, n_bins),
                                exc <= PERFECT_RTOL * cap, None, 1)
    else:
        result = search_rotations(demand, cap, limits, mode=mode, mids=mids)
    if not base.compatible:
        # docs/traffic-circle.md step 3: incompatible periods get no perfect score; the circle of
        # truncated patterns only ranks such links (ceiling just below 100).
        result = RotationResult(result.rotations, min(result.score, INCOMPATIBLE_MAX_SCORE),
                                False, None, result.evaluated)
    job_shift = dict(zip(jobs, rotations_to_shifts(result.rotations, base.period_ms, n_bins),
                         strict=True))
    zero = np.zeros(len(jobs), dtype=np.int64)
    for shared in (demand, *mids, result.rotations, base.multiples, base.idle_ms):
        shared.flags.writeable = False
    return LinkPlan(
        pods=tuple(pods),
        jobs=tuple(jobs),
        capacity_gbps=cap,
        bins=n_bins,
        base=base,
        demand=demand,
        midpoints=mids,
        result=result,
        shifts_ms=SharedShifts({p.name: float(job_shift[p.job_name]) for p in pods}),
        utilization=link_utilization(demand, result.rotations, cap),
        unshifted_score=score(demand, zero, cap),
        unshifted_utilization=link_utilization(demand, zero, cap),
        result_mode=mode,
        settings=(n_bins, gt_ms, et_frac, max_multiple),
    )
