"""Peers of OASiS's best schedule (docs/benchmarks.md).

``straightforward_dp``: Alg. 2 as written, DP_COST(t, v) over *chunks* v with
COST_t(v) computed by the greedy for every (t, v) pair, in Python and numpy.
``milp_payoff`` / ``milp_solve``: problem (27) as an independent MILP per end
slot (scipy.optimize.milp, HiGHS), constraints (2)-(7) written straight from
docs/oasis.md; also the oracle of tests/oasis/test_oasis.py.
All return the best payoff, to be compared with :func:`tdmcore.oasis.online.best_schedule`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_array

from tdmcore.oasis.online import Job


def sigmoid_utility(delay: float, g1: float, g2: float, g3: float) -> float:
    """docs/oasis.md's ``f(t) = g1 / (1 + exp(g2 (t - g3)))``, written here (not the
    kernel's): an exponent too large for a double makes the utility 0."""
    try:
        return g1 / (1.0 + math.exp(g2 * (delay - g3)))
    except OverflowError:
        return 0.0


def chunks_per_worker_slot(job: Job) -> int:
    """docs/oasis.md's ``c = floor(1 / (M (tau + 2 e / b)))``: the chunks one worker
    trains in a slot, each of ``M`` mini-batches computing ``tau`` and pushing and
    pulling a gradient of ``e`` at ``b`` (written here, not the kernel's)."""
    per_chunk = job.minibatches * (job.tau + 2.0 * job.grad_size / job.worker_bw)
    c = math.floor(1.0 / per_chunk)
    # a quotient a hair under an integer (1 / (1/3) = 2.9999999999999996) is that integer
    if math.isclose(1.0 / per_chunk, c + 1, rel_tol=1e-12):
        c += 1
    return int(c)


def _cost(price, cap, ps_price, ps_cap, v, c, job):
    y = -(-v // c)
    if y > job.chunks:
        return math.inf
    cost, left = 0.0, y
    for h in np.argsort(price, kind="stable"):
        take = min(left, int(cap[h]))
        cost += take * price[h]
        left -= take
    if left:
        return math.inf
    # constraint (6), stated as the fewest z with B z >= b y, with the kernel's one
    # relative tolerance for float round-off (no extra slack: a quotient of
    # 5.0000000005 needs 6 PSs)
    z = 0
    while job.ps_bw * z < job.worker_bw * y * (1 - 1e-12):
        z += 1
    if z > y:
        return math.inf
    left = z
    for k in np.argsort(ps_price, kind="stable"):
        take = min(left, int(ps_cap[k]))
        cost += take * ps_price[k]
        left -= take
    return math.inf if left else cost


def straightforward_dp(job: Job, worker_price, worker_free, ps_price, ps_free) -> float | None:
    alpha, beta = np.array(job.worker_res), np.array(job.ps_res)
    price = (worker_price * alpha).sum(axis=2)
    cap = np.floor(worker_free[:, :, alpha > 0] / alpha[alpha > 0] + 1e-9).min(axis=2)
    ps_p = (ps_price * beta).sum(axis=2)
    ps_cap = np.floor(ps_free[:, :, beta > 0] / beta[beta > 0] + 1e-9).min(axis=2)
    c = chunks_per_worker_slot(job)
    work = job.epochs * job.chunks
    prev = [0.0] + [math.inf] * work
    best = None
    for t in range(job.arrival, price.shape[0]):
        costs = [_cost(price[t], cap[t], ps_p[t], ps_cap[t], v, c, job) for v in range(work + 1)]
        cur = [min(costs[vt] + prev[v - vt] for vt in range(v + 1)) for v in range(work + 1)]
        if cur[work] < math.inf:
            payoff = sigmoid_utility(t - job.arrival, *job.utility) - cur[work]
            if best is None or payoff > best:
                best = payoff
        prev = cur
    return best


def _end_slot_model(job: Job, wp, wf, pp, pf, end: int):
    """(cost, A, lo, hi) of the MILP: cheapest y, z covering the work in [a, end].

    Variables: y[slot, worker server] then z[slot, PS server], integers >= 0.
    """
    _, n_w, n_res = wp.shape
    n_p = pp.shape[1]
    alpha, beta = np.array(job.worker_res), np.array(job.ps_res)
    c = chunks_per_worker_slot(job)
    slots = list(range(job.arrival, end + 1))
    ny, nz = len(slots) * n_w, len(slots) * n_p
    cost = np.concatenate([(wp[slots] * alpha).sum(axis=2).ravel(),
                           (pp[slots] * beta).sum(axis=2).ravel()])
    data, cols, starts, lo, hi = [], [], [0], [], []

    def add(col, val, lower, upper):
        # one sparse row: coefficients ``val`` at columns ``col``
        cols.extend(col)
        data.extend(val)
        starts.append(len(cols))
        lo.append(lower)
        hi.append(upper)

    # (2): c chunks per worker-slot must cover E N chunks
    add(range(ny), [c] * ny, job.epochs * job.chunks, np.inf)
    for i in range(len(slots)):
        y = list(range(i * n_w, (i + 1) * n_w))
        z = list(range(ny + i * n_p, ny + (i + 1) * n_p))
        add(y, [1] * n_w, 0, job.chunks)  # (3)
        add(y + z, [job.worker_bw] * n_w + [-job.ps_bw] * n_p, -np.inf, 0)  # (6)
        add(z + y, [1] * n_p + [-1] * n_w, -np.inf, 0)  # (7)
        for h in range(n_w):
            for r in range(n_res):
                add([i * n_w + h], [alpha[r]], 0, wf[slots[i], h, r])  # (4)
        for k in range(n_p):
            for r in range(n_res):
                add([ny + i * n_p + k], [beta[r]], 0, pf[slots[i], k, r])  # (5)
    a = csr_array((np.array(data, dtype=float), np.array(cols, dtype=np.int64),
                   np.array(starts, dtype=np.int64)), shape=(len(lo), ny + nz))
    return cost, a, lo, hi


@dataclass(frozen=True)
class MilpResult:
    """Outcome of :func:`milp_solve`.

    ``payoff``: best f(end - a) - cost over the end slots solved (None: none feasible).
    ``optimal``: every end slot was solved to optimality (HiGHS status 0), so
    ``payoff`` is the optimum of (27); otherwise it is only the best incumbent.
    ``status``: "optimal", "time limit" or the HiGHS status of a failed solve.
    ``seconds``: wall time, model building included; ``solve_seconds``: inside
    HiGHS only. ``ends_solved``/``ends``:
    end slots finished / in [a, T).
    """

    payoff: float | None
    optimal: bool
    status: str
    seconds: float
    solve_seconds: float
    ends_solved: int
    ends: int


def milp_solve(job: Job, wp, wf, pp, pf, time_limit_s: float | None = None,
               mip_rel_gap: float | None = None) -> MilpResult:
    """max over end slots of f(end - a) - min cost, each by an independent MILP.

    ``time_limit_s`` bounds the whole call (all end slots together); each MILP gets
    what is left. ``mip_rel_gap`` is passed to HiGHS (None: its default, 1e-4;
    0: prove optimality down to HiGHS's absolute gap, 1e-6).
    """
    start_time = time.perf_counter()
    n_slots = wp.shape[0]
    best, optimal, solved, solve_seconds = None, True, 0, 0.0
    status = "optimal"
    for end in range(job.arrival, n_slots):
        options = {} if mip_rel_gap is None else {"mip_rel_gap": mip_rel_gap}
        if time_limit_s is not None:
            left = time_limit_s - (time.perf_counter() - start_time)
            if left <= 0:
                optimal, status = False, "time limit"
                break
            options["time_limit"] = left
        cost, a, lo, hi = _end_slot_model(job, wp, wf, pp, pf, end)
        t0 = time.perf_counter()
        res = milp(cost, constraints=LinearConstraint(a, lo, hi),
                   integrality=np.ones(len(cost)), bounds=Bounds(0, np.inf), options=options)
        solve_seconds += time.perf_counter() - t0
        if res.status in (0, 2):  # optimal, or this end slot is infeasible
            solved += 1
        else:  # 1: time limit (maybe with an incumbent); 3, 4: solver trouble
            optimal = False
            status = "time limit" if res.status == 1 else f"HiGHS status {res.status}"
        if res.x is None or res.status not in (0, 1):
            continue
        payoff = sigmoid_utility(end - job.arrival, *job.utility) - res.fun
        if best is None or payoff > best + 1e-9:
            best = payoff
    return MilpResult(best, optimal, status,
                      time.perf_counter() - start_time, solve_seconds, solved,
                      max(0, n_slots - job.arrival))


def milp_payoff(job: Job, wp, wf, pp, pf, time_limit_s: float | None = None) -> float | None:
    """max over end slots of f(end - a) - min cost, each by an independent MILP.

    With ``time_limit_s`` the answer may be an incumbent only; use :func:`milp_solve`
    to know whether optimality was proved.
    """
    return milp_solve(job, wp, wf, pp, pf, time_limit_s).payoff
