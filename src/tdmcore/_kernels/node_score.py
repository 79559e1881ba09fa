"""Metronome's Score phase for every candidate node in one compiled call.

Algorithm 1, lines 14-16, per node n (docs/scheduler.md): EarlyReturn when the
node is empty, when the waiting pod adds no row to n's link, or when the summed
bandwidth fits; otherwise unify the base period of the link's job rows and the
waiting pod (§4), draw them on the circle, put the reference job first (Eq. 16)
and run the ``first`` rotation search (§5).  The same kernels as the single-link
API, so a node's score here equals :func:`tdmcore.metronome.link.plan_link` on that node.

The rows come from the snapshot, one per job crossing the link (the cluster
state's :meth:`~tdmcore.model.ClusterState.job_links` owns that rule: one pod's
demand per job, nothing for a job wholly on one node), and ``w_adds[n]`` says
whether the waiting pod would add a row to n's link
(:meth:`~tdmcore.model.ClusterState.waiting_link_gbps`); this kernel merges
nothing itself.

The decision stays exact while most nodes are never searched: among nodes
scoring 100, NormalizeScore picks the best normalized latency (then node order),
so nodes are visited in that order asking only "is a perfect rotation possible?"
(phase A of the search), and the first one that is wins.  Only when no node can
score 100 does pass 2 compute every node's exact best score.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._jit import jit, jit_inline
from .base_period import STEP_INCOMPATIBLE, unify_kernel
from .circle import draw_circle, excess_and_carried, reference_first, strict_ranks
from .rotation_search import MODE_FIRST, search_rotations_kernel


class PodTable(NamedTuple):
    """The traffic rows on every node's link (a snapshot's arrays): rows
    ``node_ptr[n]:node_ptr[n + 1]`` belong to node n, one per job crossing its link,
    with their ``period``, ``duty``, ``bandwidth``, ``priority`` and deploy
    ``order``; per node the pods it holds (``n_pods``), the rows' summed rate
    (``sum_bw``) and the link's ``capacity``."""

    node_ptr: np.ndarray
    period: np.ndarray
    duty: np.ndarray
    bandwidth: np.ndarray
    priority: np.ndarray
    order: np.ndarray
    n_pods: np.ndarray
    sum_bw: np.ndarray
    capacity: np.ndarray


class WaitingPod(NamedTuple):
    """The pod being scheduled: its pattern, priority and deploy order."""

    period: float
    duty: float
    bandwidth: float
    priority: int
    order: int


class ScoreSettings(NamedTuple):
    """Metronome's settings of the Score phase (``MetronomeConfig``); ``exact``:
    compute every candidate's exact score."""

    bins: int
    gt_ms: float
    et_frac: float
    max_multiple: int
    perfect_rtol: float
    exact: bool


SCORE_UNKNOWN = -1.0  # "below the maximum": not computed (pass 1 found a perfect node)
#: Score ceiling of a link whose periods cannot be unified (docs/traffic-circle.md step 3: "no
#: perfect score"): just below 100, beyond the score tie tolerance, so such a node
#: never ties with a perfect one but still ranks above nodes with real excess.
INCOMPATIBLE_MAX_SCORE = 100.0 - 1e-6


@jit_inline
def _node_rows(
    lo: int, hi: int, period: np.ndarray, duty: np.ndarray, bandwidth: np.ndarray,
    priority: np.ndarray, order: np.ndarray,
    w_period: float, w_duty: float, w_bw: float, w_prio: int, w_order: int,
    bins: int, gt_ms: float, et_frac: float, max_multiple: int,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Job rows (reference first), their rotation limits, and whether the periods unify."""
    k = hi - lo + 1
    p_period = np.empty(k)
    p_duty = np.empty(k)
    p_bw = np.empty(k)
    p_prio = np.empty(k, dtype=np.int64)
    p_order = np.empty(k, dtype=np.int64)
    for i in range(k - 1):
        p_period[i] = period[lo + i]
        p_duty[i] = duty[lo + i]
        p_bw[i] = bandwidth[lo + i]
        p_prio[i] = priority[lo + i]
        p_order[i] = order[lo + i]
    p_period[k - 1] = w_period
    p_duty[k - 1] = w_duty
    p_bw[k - 1] = w_bw
    p_prio[k - 1] = w_prio
    p_order[k - 1] = w_order

    multiples = np.empty(k, dtype=np.int64)
    idle = np.empty(k)
    ranks = np.empty(k, dtype=np.int64)
    strict_ranks(p_prio, p_order, ranks)
    base, step = unify_kernel(p_period, ranks, gt_ms, et_frac, max_multiple, multiples, idle)
    pod_rows = np.zeros((k, bins))
    mid_off = np.zeros(k + 1, dtype=np.int64)
    for i in range(k):
        mid_off[i + 1] = mid_off[i] + multiples[i]
    mids = np.empty(mid_off[k])
    circle_duty = np.empty(k)
    pod_limits = np.empty(k, dtype=np.int64)
    draw_circle(p_period, p_duty, p_bw, multiples, idle, base, step != STEP_INCOMPATIBLE,
                pod_rows, mids, mid_off, circle_duty, pod_limits)

    # One row per job (the snapshot's rows and the waiting pod's own job, which
    # has no row here): reference first, by (-priority, deploy order).
    rank = np.empty(k, dtype=np.int64)
    reference_first(p_prio, p_order, rank)
    rows = np.empty((k, bins))
    limits = np.empty(k, dtype=np.int64)
    for pos in range(k):
        i = rank[pos]
        for b in range(bins):
            rows[pos, b] = pod_rows[i, b]
        limits[pos] = pod_limits[i]
    limits[0] = 1
    return rows, limits, step != STEP_INCOMPATIBLE


@jit_inline
def _score_node(
    n: int, node_ptr: np.ndarray, period: np.ndarray, duty: np.ndarray,
    bandwidth: np.ndarray, priority: np.ndarray, order: np.ndarray,
    capacity: np.ndarray, w_period: float, w_duty: float, w_bw: float, w_prio: int,
    w_order: int, bins: int, gt_ms: float, et_frac: float, max_multiple: int,
    perfect_rtol: float, exact: bool,
) -> tuple[bool, float]:
    """``(perfect, score)`` of one node; phase A only unless ``exact``."""
    rows, limits, compatible = _node_rows(node_ptr[n], node_ptr[n + 1], period, duty,
                                          bandwidth, priority, order, w_period, w_duty,
                                          w_bw, w_prio, w_order, bins, gt_ms, et_frac,
                                          max_multiple)
    if not compatible and not exact:
        return False, SCORE_UNKNOWN  # never perfect (docs/traffic-circle.md step 3)
    k = rows.shape[0]
    cap = capacity[n]
    rot = np.zeros(k, dtype=np.int64)
    mid_off = np.zeros(k + 1, dtype=np.int64)
    contend = np.zeros((k, k), dtype=np.bool_)
    total = 0.0
    for r in range(k):
        for b in range(bins):
            total += rows[r, b]
    margin = 1e-12 * (total + cap * bins)
    perfect, _, _ = search_rotations_kernel(rows, cap, limits, MODE_FIRST, np.zeros(0), mid_off,
                                            contend, perfect_rtol * cap, 1e-9, margin, rot,
                                            not exact)
    if perfect and compatible:
        return True, 100.0
    if not exact:
        return False, SCORE_UNKNOWN
    excess, _ = excess_and_carried(rows, rot, cap)
    score = 100.0
    if excess > perfect_rtol * cap:
        score = min(100.0, max(0.0, 100.0 * (1.0 - excess / (cap * bins))))
    if not compatible:
        return False, min(score, INCOMPATIBLE_MAX_SCORE)
    return score == 100.0, score


@jit
def score_nodes_kernel(
    candidates: np.ndarray, table: PodTable, w_adds: np.ndarray, pod: WaitingPod,
    settings: ScoreSettings, out_score: np.ndarray, out_perfect: np.ndarray,
    out_early: np.ndarray,
) -> None:
    """Score the nodes in ``candidates`` (Eq. 18) for the waiting ``pod``.

    ``w_adds[n]``: whether the pod would add a row to node n's link.  ``out_*`` are
    indexed by node.  With ``exact`` every candidate gets its best
    score.  Otherwise ``candidates`` must come in the order NormalizeScore would
    prefer them among perfect nodes (best normalized latency first, then node
    order): the scan stops at the first node that scores 100, because that node
    wins whatever the others score; the rest keep ``SCORE_UNKNOWN``.  If no node
    scores 100, every node's exact score is computed (pass 2).
    """
    node_ptr, period, duty, bandwidth = table.node_ptr, table.period, table.duty, table.bandwidth
    priority, order, n_pods = table.priority, table.order, table.n_pods
    sum_bw, capacity = table.sum_bw, table.capacity
    w_period, w_duty, w_bw = pod.period, pod.duty, pod.bandwidth
    w_prio, w_order = pod.priority, pod.order
    bins, gt_ms, et_frac = settings.bins, settings.gt_ms, settings.et_frac
    max_multiple, perfect_rtol, exact = settings.max_multiple, settings.perfect_rtol, settings.exact
    n_cand = candidates.shape[0]
    for c in range(n_cand):
        n = candidates[c]
        out_early[n] = False
        out_perfect[n] = False
        out_score[n] = SCORE_UNKNOWN
    pending = np.empty(n_cand, dtype=np.int64)
    n_pending = 0
    for c in range(n_cand):
        n = candidates[c]
        if n_pods[n] == 0 or not w_adds[n] or sum_bw[n] + w_bw <= capacity[n]:
            out_early[n] = True  # EarlyReturn: the placement adds no contention to n
            out_perfect[n] = True
            out_score[n] = 100.0
            if not exact:
                return
            continue
        perfect, score = _score_node(n, node_ptr, period, duty, bandwidth, priority,
                                     order, capacity, w_period, w_duty, w_bw, w_prio,
                                     w_order, bins, gt_ms, et_frac, max_multiple,
                                     perfect_rtol, exact)
        out_perfect[n] = perfect
        out_score[n] = score
        if perfect and not exact:
            return
        if not perfect:
            pending[n_pending] = n
            n_pending += 1
    if exact:
        return
    # Pass 2: no node scores 100, so the maximum needs every node's best score.
    for c in range(n_pending):
        n = pending[c]
        perfect, score = _score_node(n, node_ptr, period, duty, bandwidth, priority,
                                     order, capacity, w_period, w_duty, w_bw, w_prio,
                                     w_order, bins, gt_ms, et_frac, max_multiple,
                                     perfect_rtol, True)
        out_perfect[n] = perfect
        out_score[n] = score
