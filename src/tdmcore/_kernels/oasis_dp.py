"""OASiS's best-schedule subroutine (Alg. 2) as compiled loops.

docs/oasis.md.  The DP runs over *worker counts*: a slot's cost depends on its
worker count y only (COST_t greedily fills the cheapest servers, then adds the
fewest parameter servers), and a worker trains ``c`` chunks per slot, so covering
``V`` chunks is covering ``Y = ceil(V / c)`` worker-slots.  One table
``D[t, w]`` = cheapest way to place ``w`` worker-slots in slots ``start..t``
serves every end slot.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit

#: Above this exponent the sigmoid is taken as 0 (``exp`` overflows near 709).
SIGMOID_CUTOFF = 700.0


@jit
def sigmoid(delay: float, g1: float, g2: float, g3: float) -> float:
    """The utility ``g1 / (1 + exp(g2 (delay - g3)))`` (docs/oasis.md), 0 once the
    exponent passes :data:`SIGMOID_CUTOFF`: the one rule of the job utility."""
    x = g2 * (delay - g3)
    if x > SIGMOID_CUTOFF:
        return 0.0
    return g1 / (1.0 + np.exp(x))


@jit
def sigmoid_many(delay: np.ndarray, g1: np.ndarray, g2: np.ndarray, g3: np.ndarray,
                 out: np.ndarray) -> None:
    """:func:`sigmoid` element by element (arrays of one shape, flattened)."""
    for i in range(out.shape[0]):
        out[i] = sigmoid(delay[i], g1[i], g2[i], g3[i])


@jit
def cheapest_costs(price: np.ndarray, cap: np.ndarray, n_max: int, out: np.ndarray) -> int:
    """``out[n]`` = cheapest cost of n tasks, filling servers cheapest first (ties:
    index), for n = 0..n_max; ``inf`` past the total capacity.  Returns that capacity
    (capped at ``n_max``).  Greedy is optimal: per-task prices are constant per server.
    """
    out[0] = 0.0
    n = 0
    acc = 0.0
    order = np.argsort(price, kind="mergesort")
    for j in range(order.shape[0]):
        s = order[j]
        for _ in range(cap[s]):
            if n >= n_max:
                return n
            n += 1
            acc += price[s]
            out[n] = acc
    for rest in range(n + 1, n_max + 1):
        out[rest] = np.inf
    return n


@jit
def slot_cost_curve(
    price: np.ndarray, cap: np.ndarray, ps_price: np.ndarray, ps_cap: np.ndarray,
    y_max: int, worker_bw: float, ps_bw: float, out: np.ndarray,
) -> None:
    """``out[y]`` = COST_t(y) for y = 0..y_max (inf where infeasible).

    Workers on the cheapest servers, then ``z = ceil(b y / B)`` parameter servers
    (constraint (6)), at most y (7), on the cheapest PS servers.
    """
    ps_cost = np.empty(y_max + 1)
    cheapest_costs(ps_price, ps_cap, y_max, ps_cost)
    cheapest_costs(price, cap, y_max, out)
    for y in range(1, y_max + 1):
        need = ps_needed(y, worker_bw, ps_bw)
        if need > y:
            out[y] = np.inf
        elif out[y] < np.inf:
            out[y] += ps_cost[need]


@jit
def ps_needed(y: int, worker_bw: float, ps_bw: float) -> int:
    """The fewest PSs with ``B z >= b y`` (constraint (6)): ``ceil(b y / B)``, less a
    relative 1e-12 so that a quotient that is a whole number up to float round-off
    (0.1 x 3 / 0.3) is not rounded up; any quotient above 0 needs at least one PS."""
    z = int(np.ceil(worker_bw * y / ps_bw * (1.0 - 1e-12)))
    return max(z, 0)


@jit
def best_schedule_kernel(
    price: np.ndarray, cap: np.ndarray, ps_price: np.ndarray, ps_cap: np.ndarray,
    start: int, arrival: int, need: int, max_workers: int, worker_bw: float, ps_bw: float,
    g1: float, g2: float, g3: float, workers_out: np.ndarray,
) -> tuple[int, float, float]:
    """Fill ``workers_out[t]`` (worker count per slot); return ``(end, payoff, cost)``.

    ``end = -1`` when no end slot is feasible.  ``price``/``cap``: (T, H) per-worker
    price and capacity in workers; ``ps_*``: (T, K).  Utility:
    ``g1 / (1 + exp(g2 (delay - g3)))`` with ``delay = end - arrival``.
    """
    n_slots = price.shape[0]
    inf = np.inf
    prev = np.full(need + 1, inf)
    prev[0] = 0.0
    cur = np.empty(need + 1)
    choice = np.zeros((n_slots, need + 1), dtype=np.int32)
    curve = np.empty(need + 1)
    best_end = -1
    best_payoff = -inf
    best_cost = inf
    for t in range(start, n_slots):
        total_cap = 0
        for h in range(cap.shape[1]):
            total_cap += cap[t, h]
        y_max = min(max_workers, need, total_cap)
        slot_cost_curve(price[t], cap[t], ps_price[t], ps_cap[t], y_max, worker_bw, ps_bw,
                        curve)
        for w in range(need + 1):
            best = prev[w]
            arg = 0
            top = min(w, y_max)
            for y in range(1, top + 1):
                c = curve[y]
                if c == inf:
                    break  # COST_t is infeasible beyond here (capacity runs out)
                v = c + prev[w - y]
                if v < best:
                    best = v
                    arg = y
            cur[w] = best
            choice[t, w] = arg
        if cur[need] < inf:
            utility = sigmoid(t - arrival, g1, g2, g3)
            payoff = utility - cur[need]
            if payoff > best_payoff:
                best_payoff = payoff
                best_end = t
                best_cost = cur[need]
        for w in range(need + 1):
            prev[w] = cur[w]
    for t in range(n_slots):
        workers_out[t] = 0
    if best_end < 0:
        return -1, -inf, inf
    w = need
    for t in range(best_end, start - 1, -1):
        y = choice[t, w]
        workers_out[t] = y
        w -= y
    return best_end, best_payoff, best_cost
