"""OASiS: a job's best worker/PS schedule under resource prices (docs/oasis.md).

Bao et al., INFOCOM 2018 (the OASiS paper), Algorithm 2 and problem (27).  Our
copy of the paper lost its math; docs/oasis.md restates it and is what this
module implements.  Slots are ``0..T-1``; prices and free capacities are given per
slot, server and resource.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .. import _validation as v
from .._equality import ValueEquality
from .._kernels.oasis_dp import best_schedule_kernel, ps_needed, sigmoid
from ._milp import solve_integer_program

__all__ = [
    "L_FLOOR",
    "Admission",
    "Job",
    "OfflineResult",
    "OnlineScheduler",
    "PriceBounds",
    "Schedule",
    "best_schedule",
    "chunks_per_worker_slot",
    "min_completion_slots",
    "offline_optimum",
    "sigmoid_utility",
    "unrunnable_reason",
]

#: Free capacity is floored to whole tasks with this slack (float prices/capacities).
_FLOOR_EPS = 1e-9
#: The most tasks counted per server and slot (free capacity beyond is no constraint).
_MAX_TASKS = 1 << 31


def sigmoid_utility(delay: float, g1: float, g2: float, g3: float) -> float:
    """``f(t) = g1 / (1 + exp(g2 (t - g3)))`` (docs/oasis.md): g1 priority, g2 decay
    (0: time-insensitive), g3 target completion delay; 0 once ``g2 (t - g3)`` passes
    700 (:func:`tdmcore._kernels.oasis_dp.sigmoid`, which the DP uses too)."""
    t = v.real_number("delay", delay)
    g = [v.real_number(name, x) for name, x in (("g1", g1), ("g2", g2), ("g3", g3))]
    if min(g) < 0:
        raise ValueError("g1, g2, g3: priority, decay and target must be >= 0 (Job.utility's "
                         f"rule), got {tuple(g)}")
    return float(sigmoid(t, *g))


@dataclass(frozen=True)
class Job:
    """A training job as OASiS sees it (docs/oasis.md).

    Units: slots for ``tau`` (compute time per mini-batch) and for
    ``grad_size / worker_bw`` (one gradient push or pull); ``worker_res`` /
    ``ps_res`` per resource type, in the same units as the servers' capacities.
    """

    arrival: int
    epochs: int
    chunks: int
    minibatches: int
    tau: float
    grad_size: float
    worker_bw: float
    ps_bw: float
    worker_res: tuple[float, ...]
    ps_res: tuple[float, ...]
    utility: tuple[float, float, float] = (1.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        # arrival is a slot (>= 0); the counts are >= 1
        for name, low in (("arrival", 0), ("epochs", 1), ("chunks", 1), ("minibatches", 1)):
            object.__setattr__(self, name, v.whole(name, getattr(self, name), low))
        if v.real_number("tau", self.tau) <= 0:
            raise ValueError(f"tau: must be > 0, got {self.tau}")
        if v.real_number("grad_size", self.grad_size) < 0:
            raise ValueError(f"grad_size: must be >= 0, got {self.grad_size}")
        for name in ("worker_bw", "ps_bw"):
            if v.real_number(name, getattr(self, name)) <= 0:
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)}")
        for name in ("worker_res", "ps_res"):
            arr = v.as_float_array(name, getattr(self, name), ndim=1)
            if arr.size == 0 or np.any(arr < 0) or not np.any(arr > 0):
                raise ValueError(f"{name}: expected >= 0 amounts, at least one > 0")
            object.__setattr__(self, name, tuple(float(x) for x in arr))
        if len(self.worker_res) != len(self.ps_res):
            raise ValueError("ps_res: must list the same resource types as worker_res")
        if not isinstance(self.utility, tuple | list) or len(self.utility) != 3:
            raise ValueError("utility: expected (g1, g2, g3)")
        g1, g2, g3 = (v.real_number(f"utility[{i}]", x) for i, x in enumerate(self.utility))
        if g1 < 0 or g2 < 0 or g3 < 0:
            raise ValueError("utility: g1 (priority), g2 (decay) and g3 (target) must be >= 0")
        object.__setattr__(self, "utility", (g1, g2, g3))

    @property
    def iteration_slots(self) -> float:
        """Slots one worker needs for one mini-batch: compute, push and pull (Eq. 2)."""
        return self.tau + 2.0 * self.grad_size / self.worker_bw

    @property
    def workload_chunks(self) -> int:
        """``V_i = E_i N_i``: chunks to train over all epochs."""
        return self.epochs * self.chunks


def chunks_per_worker_slot(job: Job) -> int:
    """``c_i = floor(1 / (M_i (tau_i + 2 e_i / b_i)))`` **[decision, docs/oasis.md]**."""
    return int(math.floor(1.0 / (job.minibatches * job.iteration_slots) + 1e-12))


def unrunnable_reason(job: Job, n_slots: int) -> str | None:
    """Why ``job`` can never run on a horizon of ``n_slots`` slots, or None: one chunk
    takes more than a slot (``c_i = 0``), ``b_i > B_i`` ((6) then asks for more PSs
    than workers, which (7) forbids), or it arrives after the horizon.  The one rule
    of the online scheduler, the slotted simulator and the admission policies."""
    if chunks_per_worker_slot(job) < 1:
        return "one chunk takes more than a slot (c = 0)"
    if job.worker_bw > job.ps_bw:
        return "worker_bw > ps_bw: (6) needs more PSs than workers, which (7) forbids"
    if job.arrival >= n_slots:
        return "arrives after the horizon"
    return None


@dataclass(frozen=True, eq=False)
class Schedule(ValueEquality):
    """A job's schedule: workers ``(T, H)`` and PSs ``(T, K)`` per slot and server."""

    end_slot: int
    payoff: float
    cost: float
    workers: NDArray[np.int64]
    ps: NDArray[np.int64]


def _prices(name_p: str, name_f: str, price: Any, free: Any, res: tuple[float, ...],
            n_slots: int | None) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    p = v.as_float_array(name_p, price, ndim=3)
    f = v.as_float_array(name_f, free, ndim=3)
    if p.shape != f.shape:
        raise ValueError(f"{name_f}: shape {f.shape} differs from {name_p}'s {p.shape}")
    if n_slots is not None and p.shape[0] != n_slots:
        raise ValueError(f"{name_p}: expected {n_slots} slots, got {p.shape[0]}")
    if p.shape[2] != len(res):
        raise ValueError(f"{name_p}: expected {len(res)} resource types, got {p.shape[2]}")
    if p.shape[1] == 0:
        raise ValueError(f"{name_p}: at least one server is required")
    if np.any(p < 0):
        raise ValueError(f"{name_p}: prices must be >= 0")
    if np.any(f < 0):
        raise ValueError(f"{name_f}: free capacities must be >= 0")
    demand = np.asarray(res)
    per_task = np.ascontiguousarray((p * demand).sum(axis=2))  # sum_r alpha^r p^r(t)
    used = demand > 0
    fits = np.floor(f[:, :, used] / demand[used] + _FLOOR_EPS).min(axis=2)
    # more tasks than any job could use on one server in one slot are as good as
    # _MAX_TASKS (and a float above 2**63 would wrap negative as int64)
    return per_task, np.ascontiguousarray(np.minimum(fits, _MAX_TASKS).astype(np.int64))


def best_schedule(
    job: Job,
    worker_price: Any,
    worker_free: Any,
    ps_price: Any,
    ps_free: Any,
    *,
    now: int | None = None,
) -> Schedule | None:
    """The payoff-maximizing schedule of ``job`` under the given prices (Alg. 2).

    Parameters
    ----------
    job : Job
    worker_price, worker_free : array_like (T, H, R)
        ``p_h^r(t)`` and the free capacity of worker server h in slot t.
    ps_price, ps_free : array_like (T, K, R)
        ``q_k^r(t)`` and the free capacity of PS server k.
    now : int, optional
        First slot that may be used (default: the job's arrival).

    Returns
    -------
    Schedule or None
        None when no end slot admits a feasible schedule.  The payoff is
        ``f(end - arrival) - cost`` and is exactly the optimum of problem (27).

    Notes
    -----
    COST_t(y): y workers on the cheapest servers (per-worker price
    ``sum_r alpha^r p_h^r(t)``, ties by index), then ``z = ceil(b y / B)`` PSs
    (at most y) on the cheapest PS servers.  DP over worker counts, one table for
    every end slot; ties between end slots go to the earliest.
    """
    if not isinstance(job, Job):
        raise ValueError(f"job: expected a tdmcore.oasis.online.Job, got {type(job).__name__}")
    price, cap = _prices("worker_price", "worker_free", worker_price, worker_free,
                         job.worker_res, None)
    n_slots = price.shape[0]
    ps_p, ps_cap = _prices("ps_price", "ps_free", ps_price, ps_free, job.ps_res, n_slots)
    start = job.arrival if now is None else now
    start = max(v.whole("now", start, 0), job.arrival)  # a slot
    if job.arrival >= n_slots:
        raise ValueError(f"job: arrives at slot {job.arrival}, past the {n_slots} slots given")
    c = chunks_per_worker_slot(job)
    if c < 1:
        raise ValueError(
            f"job: one chunk of {job.minibatches} mini-batches takes "
            f"{job.minibatches * job.iteration_slots:.3g} slots, more than one slot; "
            "OASiS needs at least one chunk per worker-slot (docs/oasis.md)"
        )
    need = -(-job.workload_chunks // c)  # ceil(V / c) worker-slots
    workers = np.zeros(n_slots, dtype=np.int64)
    g1, g2, g3 = job.utility
    end, payoff, cost = best_schedule_kernel(price, cap, ps_p, ps_cap, start, job.arrival,
                                             need, job.chunks, job.worker_bw, job.ps_bw,
                                             g1, g2, g3, workers)
    if end < 0:
        return None
    per_server = np.zeros(price.shape, dtype=np.int64)
    per_ps = np.zeros(ps_p.shape, dtype=np.int64)
    for t in np.flatnonzero(workers):
        _fill(per_server[t], price[t], cap[t], int(workers[t]))
        _fill(per_ps[t], ps_p[t], ps_cap[t], int(ps_needed(int(workers[t]), job.worker_bw,
                                                           job.ps_bw)))
    return Schedule(int(end), float(payoff), float(cost), per_server, per_ps)


def _fill(out: NDArray[np.int64], price: NDArray[np.float64], cap: NDArray[np.int64],
          count: int) -> None:
    """Greedy cheapest-first placement of ``count`` tasks (as COST_t does)."""
    for h in np.argsort(price, kind="stable"):
        take = min(count, int(cap[h]))
        out[h] = take
        count -= take
        if count == 0:
            return


# ----------------------------------------------------------------- online loop
def min_completion_slots(job: Job) -> int:
    """``t_min = ceil(E M (tau + 2 e / b))``: the slots a job runs with N workers all
    along (at the spec's rate; the DP's whole chunks per slot can need more).  Its
    completion delay, ``end - arrival``, is one less: a job that runs only in its
    arrival slot has delay 0."""
    return int(math.ceil(job.epochs * job.minibatches * job.iteration_slots - 1e-12))


#: The least ``L`` :meth:`PriceBounds.from_jobs` gives: the smallest normal double.  A
#: job whose ``f(T - a)`` underflows to 0 (a steep sigmoid, or past the model's cutoff
#: ``g2 (t - g3) > 700``) has a true value below every double; leaving it out of the
#: minimum (as until 2026-11-24) put ``L`` above it, and a population of such jobs
#: alone had no ``L`` at all (OASiS then rejected every job).
L_FLOOR = sys.float_info.min


@dataclass(frozen=True)
class PriceBounds:
    """``U_1^r, L_1`` (workers) and ``U_2^r, L_2`` (PSs) of the price functions (22)-(26)."""

    u1: tuple[float, ...]
    l1: float
    u2: tuple[float, ...]
    l2: float

    def __post_init__(self) -> None:
        for name in ("l1", "l2"):
            if v.real_number(name, getattr(self, name)) <= 0:
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)}")
        for name, lower in (("u1", self.l1), ("u2", self.l2)):
            arr = v.as_float_array(name, getattr(self, name), ndim=1)
            if np.any(arr < lower):
                raise ValueError(f"{name}: every U must be >= L ({lower})")
            object.__setattr__(self, name, tuple(float(x) for x in arr))

    @property
    def alpha(self) -> float:
        """``max_r(1, ln(U_1^r / L_1), ln(U_2^r / L_2))``."""
        # differences of logs: U / L overflows when L is subnormal (steep utilities)
        logs = [math.log(u) - math.log(self.l1) for u in self.u1] \
            + [math.log(u) - math.log(self.l2) for u in self.u2]
        return max([1.0, *logs])

    @property
    def competitive_ratio(self) -> float:
        """OASiS is ``2 alpha``-competitive (Theorem 4) when U and L bound every job's
        values, as :meth:`from_jobs` with ``quantile=0`` estimates them."""
        return 2.0 * self.alpha

    @classmethod
    def from_jobs(cls, jobs: list[Job], n_slots: int, *, eta1: float = 1.0,
                  eta2: float = 1.0, quantile: float = 0.0) -> PriceBounds:
        """Estimate U and L from a job population (docs/oasis.md).

        ``U_1^r = max_i f_i(t_min_i) / alpha_i^r``;
        ``L_1 = min_i f_i(T - a_i) / (4 eta_1 sum_r alpha_i^r ceil(E N M (tau + 2e/b)))``;
        likewise ``U_2``, ``L_2`` with ``beta``.  **[decision]** ``eta = 1``.

        Both utilities are taken at completion delays ``end - arrival`` as the DP
        counts them (slots ``0 .. n_slots - 1``): ``f_i(T - a_i)`` is the utility of
        ending in the last slot, delay ``n_slots - 1 - a_i`` (a job arriving after
        the horizon has none and is left out of ``L``; a value below
        :data:`L_FLOOR`, the smallest normal double, counts as that, for a steep
        utility's ``f_i(T - a_i)`` underflows to 0 where the true minimum is merely
        tiny), and ``t_min_i`` is the
        delay of a job that runs :func:`min_completion_slots` slots from its
        arrival, one less than that count (the spec's slots ``1..T`` and its
        ``t_min`` counted in slots put both one slot late, so that ``L`` and ``U``
        came out below every job's real worst and best values).

        ``quantile`` (default 0, the spec's minimum): **[decision]** take the
        q-quantile of the per-job values inside ``L``'s ``min`` instead.  With steep
        (time-critical) sigmoids ``f_i(T - a_i)`` underflows towards 0, the minimum
        drives ``L`` to ~1e-200 and the prices stay flat until a server is nearly
        full.  A quantile only moves ``L`` up, never ``U``; with ``quantile > 0``
        ``L`` is no longer below every job's value, so :attr:`competitive_ratio` is
        no longer a guarantee (Theorem 4 assumes the true minimum).
        """
        if not jobs:
            raise ValueError("jobs: at least one job is needed to estimate the bounds")
        for name, eta in (("eta1", eta1), ("eta2", eta2)):
            if v.real_number(name, eta) <= 0:
                raise ValueError(f"{name}: must be > 0")
        q = v.real_number("quantile", quantile)
        if not 0.0 <= q < 1.0:
            raise ValueError(f"quantile: expected 0 <= quantile < 1, got {quantile}")
        n_slots = v.whole("n_slots", n_slots)
        for job in jobs:
            if not isinstance(job, Job):
                raise ValueError(f"jobs: expected tdmcore.oasis.online.Job, got "
                                 f"{type(job).__name__}")
        n_res = len(jobs[0].worker_res)
        u1, u2 = np.zeros(n_res), np.zeros(n_res)
        low1: list[float] = []
        low2: list[float] = []
        for job in jobs:
            if len(job.worker_res) != n_res:
                raise ValueError("jobs: every job must list the same resource types")
            best = sigmoid_utility(max(0, min_completion_slots(job) - 1), *job.utility)
            last = n_slots - 1 - job.arrival
            worst = sigmoid_utility(last, *job.utility) if last >= 0 else 0.0
            alpha, beta = np.array(job.worker_res), np.array(job.ps_res)
            u1 = np.maximum(u1, np.where(alpha > 0, best / np.where(alpha > 0, alpha, 1), 0))
            u2 = np.maximum(u2, np.where(beta > 0, best / np.where(beta > 0, beta, 1), 0))
            work = math.ceil(job.workload_chunks * job.minibatches * job.iteration_slots
                             - 1e-12)
            if last >= 0:  # a job arriving after the horizon has no completion delay
                low1.append(max(worst / (4 * eta1 * alpha.sum() * work), L_FLOOR))
                low2.append(max(worst / (4 * eta2 * beta.sum() * work), L_FLOOR))
        if not low1:
            raise ValueError(f"jobs: every job arrives after the horizon (slot "
                             f"{n_slots - 1}); L is undefined")
        if q == 0.0:
            l1, l2 = min(low1), min(low2)
        else:
            l1 = float(np.quantile(low1, q, method="lower"))
            l2 = float(np.quantile(low2, q, method="lower"))
        return cls(tuple(np.maximum(u1, l1)), l1, tuple(np.maximum(u2, l2)), l2)


@dataclass(frozen=True)
class Admission:
    """The online decision on one job: admitted with a schedule, or rejected and why."""

    admitted: bool
    schedule: Schedule | None
    reason: str


#: The most (slot, server, resource) cells of use an :class:`OnlineScheduler` keeps
#: (two float arrays: 400 MB at this bound).
MAX_CELLS = 25_000_000


class OnlineScheduler:
    """Alg. 1: on each arrival, price the resources, compute the best schedule, and
    admit (committing its resources) only if its payoff is positive.

    Prices (22)-(26): ``p_h^r(t) = L_1 (U_1^r / L_1)^(g_h^r(t) / C_h^r)`` and likewise
    ``q_k^r(t)`` with ``U_2``, ``L_2`` and the PS usage.
    """

    def __init__(self, worker_capacity: Any, ps_capacity: Any, n_slots: int,
                 bounds: PriceBounds) -> None:
        self.worker_capacity = v.as_float_array("worker_capacity", worker_capacity, ndim=2)
        self.ps_capacity = v.as_float_array("ps_capacity", ps_capacity, ndim=2)
        for name, cap in (("worker_capacity", self.worker_capacity),
                          ("ps_capacity", self.ps_capacity)):
            if np.any(cap < 0) or cap.shape[0] == 0:
                raise ValueError(f"{name}: expected (servers, resources) amounts >= 0")
        n_slots = v.whole("n_slots", n_slots)
        cells = n_slots * (self.worker_capacity.size + self.ps_capacity.size)
        if cells > MAX_CELLS:
            raise ValueError(f"n_slots: {n_slots:,} slots x {self.worker_capacity.shape[0]:,}"
                             f" + {self.ps_capacity.shape[0]:,} servers' resources are "
                             f"{cells:,} cells of use to keep, more than {MAX_CELLS:,}")
        if not isinstance(bounds, PriceBounds):
            raise ValueError("bounds: expected a PriceBounds")
        n_res = self.worker_capacity.shape[1]
        if self.ps_capacity.shape[1] != n_res or len(bounds.u1) != n_res \
                or len(bounds.u2) != n_res:
            raise ValueError("bounds: resource types differ between capacities and bounds")
        self.n_slots = n_slots
        self.bounds = bounds
        self.worker_used = np.zeros((n_slots, *self.worker_capacity.shape))
        self.ps_used = np.zeros((n_slots, *self.ps_capacity.shape))
        self.total_utility = 0.0
        self.admitted: list[tuple[Job, Schedule]] = []

    @staticmethod
    def _price(low: float, high: NDArray[np.float64], used: NDArray[np.float64],
               cap: NDArray[np.float64]) -> NDArray[np.float64]:
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(cap > 0, used / np.where(cap > 0, cap, 1.0), 0.0)
        # L (U / L)^share in logs: U / L overflows when L is subnormal (a steep
        # utility's f(T - a) ~ 1e-304), while every price lies in [L, U]
        log_low = math.log(low)
        return np.asarray(np.exp(log_low + share * (np.log(high) - log_low)),
                          dtype=np.float64)

    def prices(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Current ``p (T, H, R)`` and ``q (T, K, R)``."""
        b = self.bounds
        return (self._price(b.l1, np.asarray(b.u1), self.worker_used, self.worker_capacity),
                self._price(b.l2, np.asarray(b.u2), self.ps_used, self.ps_capacity))

    def submit(self, job: Job) -> Admission:
        """Decide on ``job`` at its arrival (Alg. 1); commit it if admitted."""
        if not isinstance(job, Job):
            raise ValueError(f"job: expected a tdmcore.oasis.online.Job, got {type(job).__name__}")
        if len(job.worker_res) != self.worker_capacity.shape[1]:
            raise ValueError("job: its resource types differ from the servers'")
        reason = unrunnable_reason(job, self.n_slots)
        if reason is not None:
            return Admission(False, None, reason)
        p, q = self.prices()
        free_w = np.maximum(self.worker_capacity - self.worker_used, 0.0)
        free_p = np.maximum(self.ps_capacity - self.ps_used, 0.0)
        schedule = best_schedule(job, p, free_w, q, free_p)
        if schedule is None:
            return Admission(False, None, "no feasible schedule before the horizon")
        if schedule.payoff <= 0:
            return Admission(False, schedule, f"payoff {schedule.payoff:.4g} <= 0")
        self.worker_used += schedule.workers[:, :, None] * np.asarray(job.worker_res)
        self.ps_used += schedule.ps[:, :, None] * np.asarray(job.ps_res)
        self.total_utility += sigmoid_utility(schedule.end_slot - job.arrival, *job.utility)
        self.admitted.append((job, schedule))
        return Admission(True, schedule, "admitted")


# ------------------------------------------------------------- offline optimum
@dataclass(frozen=True)
class OfflineResult:
    """The offline optimum of problem (1) on a (small) job set, by MILP."""

    total_utility: float
    admitted: tuple[bool, ...]
    schedules: tuple[Schedule | None, ...]
    #: True when HiGHS proved optimality (to its default 1e-4 relative gap); False
    #: when it stopped at ``time_limit_s`` with the best solution found so far.
    optimal: bool = True


def offline_optimum(jobs: list[Job], worker_capacity: Any, ps_capacity: Any, n_slots: int,
                    *, time_limit_s: float = 60.0) -> OfflineResult:
    """Maximize total utility over all jobs at once (problem (1)) with scipy's HiGHS.

    Exact, and exponential in the worst case: for small instances and as the
    yardstick of the online algorithm's competitive ratio.  Variables per job: its
    workers and PSs per slot and server, and one binary per possible end slot
    (utility ``f(end - arrival)``); constraints (2)-(10).
    """
    cap_w = v.as_float_array("worker_capacity", worker_capacity, ndim=2)
    cap_p = v.as_float_array("ps_capacity", ps_capacity, ndim=2)
    for name, cap in (("worker_capacity", cap_w), ("ps_capacity", cap_p)):
        if np.any(cap < 0):
            raise ValueError(f"{name}: capacities must be >= 0")
    if cap_p.shape[1] != cap_w.shape[1]:
        raise ValueError(f"ps_capacity: {cap_p.shape[1]} resource types, worker_capacity "
                         f"has {cap_w.shape[1]}")
    n_slots = v.whole("n_slots", n_slots)
    if not jobs or not all(isinstance(j, Job) for j in jobs):
        raise ValueError("jobs: expected a non-empty list of tdmcore.oasis.online.Job")
    for i, job in enumerate(jobs):
        if len(job.worker_res) != cap_w.shape[1] or len(job.ps_res) != cap_w.shape[1]:
            raise ValueError(f"jobs: job {i} lists {len(job.worker_res)} worker and "
                             f"{len(job.ps_res)} PS resource types; the servers have "
                             f"{cap_w.shape[1]}")
    max_seconds = v.positive_float("time_limit_s", time_limit_s)
    n_h, n_res = cap_w.shape
    n_k = cap_p.shape[0]
    # variable layout per job: y[t, h], z[t, k], u[end]  (t, end in arrival..T-1)
    layout = []
    offset = 0
    for job in jobs:
        slots = max(0, n_slots - job.arrival)
        ny, nz = slots * n_h, slots * n_k
        layout.append((offset, ny, nz, slots))
        offset += ny + nz + slots
    n_var = offset
    cost = np.zeros(n_var)
    rows: list[tuple[dict[int, float], float, float]] = []
    usage_w: dict[tuple[int, int, int], dict[int, float]] = {}
    usage_p: dict[tuple[int, int, int], dict[int, float]] = {}
    upper = np.full(n_var, np.inf)
    for i, job in enumerate(jobs):
        base, ny, nz, slots = layout[i]
        if slots == 0:
            continue
        c = chunks_per_worker_slot(job)
        y0, z0, u0 = base, base + ny, base + ny + nz
        for e in range(slots):
            cost[u0 + e] = -sigmoid_utility(e, *job.utility)
            upper[u0 + e] = 1.0
        rows.append(({u0 + e: 1.0 for e in range(slots)}, -np.inf, 1.0))
        if c < 1:  # cannot run at this slot length
            rows.append(({u0 + e: 1.0 for e in range(slots)}, -np.inf, 0.0))
            continue
        work = {y0 + s * n_h + h: float(c) for s in range(slots) for h in range(n_h)}
        for e in range(slots):
            work[u0 + e] = -float(job.workload_chunks)
        rows.append((work, 0.0, np.inf))  # (2)
        for s in range(slots):
            ys = {y0 + s * n_h + h: 1.0 for h in range(n_h)}
            zs = {z0 + s * n_k + k: 1.0 for k in range(n_k)}
            limit = dict(ys)
            for e in range(s, slots):  # (3), and nothing after the end slot (8)
                limit[u0 + e] = -float(job.chunks)
            rows.append((limit, -np.inf, 0.0))
            six = {key: job.worker_bw for key in ys}
            six.update({key: -job.ps_bw for key in zs})
            rows.append((six, -np.inf, 0.0))  # (6)
            seven = {key: 1.0 for key in zs}
            seven.update({key: -1.0 for key in ys})
            rows.append((seven, -np.inf, 0.0))  # (7)
            t = job.arrival + s
            for h in range(n_h):
                for r in range(n_res):
                    if job.worker_res[r] > 0:
                        usage_w.setdefault((t, h, r), {})[y0 + s * n_h + h] = job.worker_res[r]
            for k in range(n_k):
                for r in range(n_res):
                    if job.ps_res[r] > 0:
                        usage_p.setdefault((t, k, r), {})[z0 + s * n_k + k] = job.ps_res[r]
    for (_, h, r), coeffs in usage_w.items():
        rows.append((coeffs, -np.inf, float(cap_w[h, r])))  # (4)
    for (_, k, r), coeffs in usage_p.items():
        rows.append((coeffs, -np.inf, float(cap_p[k, r])))  # (5)
    res = solve_integer_program(cost, rows, 0, upper, max_seconds)
    if res.x is None:
        raise ValueError(f"time_limit_s: the MILP found no solution ({res.message})")
    x = np.round(res.x).astype(np.int64)
    admitted: list[bool] = []
    schedules: list[Schedule | None] = []
    for i, job in enumerate(jobs):
        base, ny, nz, slots = layout[i]
        ends = x[base + ny + nz: base + ny + nz + slots]
        if slots == 0 or ends.sum() == 0:
            admitted.append(False)
            schedules.append(None)
            continue
        workers = np.zeros((n_slots, n_h), dtype=np.int64)
        ps = np.zeros((n_slots, n_k), dtype=np.int64)
        workers[job.arrival:] = x[base: base + ny].reshape(slots, n_h)
        ps[job.arrival:] = x[base + ny: base + ny + nz].reshape(slots, n_k)
        # (8): the job completes in the last slot with workers; the MILP only forbids
        # workers after its chosen end, which may lie later when the utility is flat
        end = int(np.flatnonzero(workers.sum(axis=1))[-1])
        admitted.append(True)
        schedules.append(Schedule(end, sigmoid_utility(end - job.arrival, *job.utility), 0.0,
                                  workers, ps))
    # the utility of the schedules as they complete (the MILP's objective, or more
    # when a flat utility let it pick a later end than the last slot with workers)
    total = sum(s.payoff for s in schedules if s is not None)
    return OfflineResult(total, tuple(admitted), tuple(schedules),
                         optimal=bool(res.status == 0))
