"""Peers of OASiS's best schedule (spec/performance.md).

``straightforward_dp``: Alg. 2 as written, DP_COST(t, v) over *chunks* v with
COST_t(v) computed by the greedy for every (t, v) pair, in Python and numpy.
Returns the best payoff, to be compared with :func:`tdmcore.oasis.best_schedule`.
"""

from __future__ import annotations

import math

import numpy as np

from tdmcore.oasis import Job, chunks_per_worker_slot, sigmoid_utility


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
    z = max(0, math.ceil(job.worker_bw * y / job.ps_bw * (1 - 1e-12) - 1e-9))
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
