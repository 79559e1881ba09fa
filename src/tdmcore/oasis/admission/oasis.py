"""OASiS as a slotted policy: Alg. 1 on each arrival, then the committed schedule.

The decisions are :class:`tdmcore.oasis.online.OnlineScheduler`'s; this module only feeds it
the arrivals of each slot and replays each admitted job's schedule slot by slot.
``U`` and ``L`` (Eqs. 22-26) are given, or estimated from the run's job population
(the jobs that can run at all) with :meth:`tdmcore.oasis.online.PriceBounds.from_jobs`
(``l_quantile``: its robust ``L``), optionally scaled to study under- and
over-estimation (the paper's Fig. 6).
"""

from __future__ import annotations

from ... import _validation as v
from ..online import Job, OnlineScheduler, PriceBounds, Schedule
from .base import Allocation, SlotDecision, SlottedCluster, SlotView, runnable

__all__ = ["OasisPolicy", "scaled_bounds"]


def scaled_bounds(bounds: PriceBounds, u_scale: float = 1.0, l_scale: float = 1.0) -> PriceBounds:
    """``U`` and ``L`` multiplied by estimation factors (Fig. 6: 25 %-400 % of actual).

    ``U`` is kept ``>= L`` (the price functions need ``U / L >= 1``).
    """
    if not isinstance(bounds, PriceBounds):
        raise ValueError(f"bounds: expected a PriceBounds, got {type(bounds).__name__}")
    u_scale = v.positive_float("u_scale", u_scale)
    l_scale = v.positive_float("l_scale", l_scale)
    l1, l2 = bounds.l1 * l_scale, bounds.l2 * l_scale
    return PriceBounds(tuple(max(u * u_scale, l1) for u in bounds.u1), l1,
                       tuple(max(u * u_scale, l2) for u in bounds.u2), l2)


class OasisPolicy:
    """Online admission with dual prices (Alg. 1), as a slotted policy."""

    name = "oasis"

    def __init__(self, bounds: PriceBounds | None = None, *, u_scale: float = 1.0,
                 l_scale: float = 1.0, eta: float = 1.0, l_quantile: float = 0.0,
                 name: str = "oasis") -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("name: expected a non-empty string")
        self.name = name
        if bounds is not None and not isinstance(bounds, PriceBounds):
            raise ValueError("bounds: expected a PriceBounds or None")
        self.bounds = bounds
        self.u_scale = v.positive_float("u_scale", u_scale)
        self.l_scale = v.positive_float("l_scale", l_scale)
        self.eta = v.positive_float("eta", eta)
        self.l_quantile = v.real_number("l_quantile", l_quantile)
        if not 0.0 <= self.l_quantile < 1.0:
            raise ValueError(f"l_quantile: expected 0 <= l_quantile < 1, got {l_quantile}")

    def reset(self, cluster: SlottedCluster, jobs: tuple[Job, ...]) -> None:
        bounds = self.bounds
        self.no_bounds = ""
        if bounds is None:
            population = [j for j in jobs if runnable(j, cluster)]
            try:
                bounds = PriceBounds.from_jobs(population or list(jobs), cluster.n_slots,
                                               eta1=self.eta, eta2=self.eta,
                                               quantile=self.l_quantile)
            except ValueError as exc:  # every job arrives after the horizon
                self.no_bounds = f"no price bounds from these jobs ({exc})"
                bounds = PriceBounds((1.0,) * cluster.worker_capacity.shape[1], 1.0,
                                     (1.0,) * cluster.worker_capacity.shape[1], 1.0)
        self.used_bounds = scaled_bounds(bounds, self.u_scale, self.l_scale)
        self.scheduler = OnlineScheduler(cluster.worker_capacity, cluster.ps_capacity,
                                         cluster.n_slots, self.used_bounds)
        self.schedules: dict[int, Schedule] = {}

    def step(self, view: SlotView) -> SlotDecision:
        decision = SlotDecision()
        for i in view.arrived:
            if self.no_bounds:
                decision.reject[i] = self.no_bounds
                continue
            admission = self.scheduler.submit(view.jobs[i])
            if admission.admitted and admission.schedule is not None:
                self.schedules[i] = admission.schedule
            else:
                decision.reject[i] = admission.reason
        t = view.t
        for i in view.active:
            sched = self.schedules.get(i)
            if sched is not None and sched.workers[t].sum() > 0:
                decision.run[i] = Allocation(sched.workers[t].copy(), sched.ps[t].copy())
        return decision
