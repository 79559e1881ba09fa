"""One rotation vector for several links that carry the same jobs (spec §6, revised
2026-11-28; docs/scheduler.md).

A cycle of the affinity graph whose links all carry the same set of contending jobs
is no loop when one rotation vector is perfect on every link of it: the same job
offsets then satisfy all of them.  This kernel is the joint ``first`` search: the
rotation search of docs/traffic-circle.md with "perfect" read as "perfect on every
link".  Rows are in one order on every link (the lead link's: reference job first),
rotations are enumerated lexicographically, row 0 fixed at 0, the last row fastest,
and the answer is the middle of the first jointly perfect interval of the last row
(the run, taken circularly, that holds the smallest jointly perfect rotation of the
first prefix that has one).

Exact: a prefix is dropped only when its own rows already exceed some link's
perfect tolerance (adding a row never lowers a bin's excess, in floating point too:
the sums and ``max`` are monotone), and each link's excess is summed as the oracle
sums it (rows added in order, bins in order).
"""

from __future__ import annotations

import numpy as np

from ._jit import jit
from .rotation_search import _first_interval_middle


@jit
def _excess(total: np.ndarray, row: np.ndarray, shift: int, capacity: float) -> float:
    """``sum_b max(0, total[b] + row[(b - shift) mod N] - B)``, bins in order."""
    n_bins = total.shape[0]
    e = 0.0
    for b in range(n_bins):
        src = b - shift
        if src < 0:
            src += n_bins
        v = total[b] + row[src] - capacity
        if v > 0.0:
            e += v
    return e


@jit
def joint_first_kernel(demand: np.ndarray, capacity: np.ndarray, limits: np.ndarray,
                       tol_rel: float, out_rot: np.ndarray) -> tuple[bool, int]:
    """The joint ``first`` search over ``demand`` ``(links, k, N)``.

    ``capacity[l]`` is link l's ``B``; a vector is perfect on link l when its excess
    there is at most ``tol_rel x B``.  ``limits[i]`` bounds row i's rotations
    (``limits[0]`` is ignored: row 0 stays at 0).  Writes the rotations into
    ``out_rot`` and returns ``(found, vectors evaluated)``; ``out_rot`` is all 0
    when none is jointly perfect.
    """
    n_links = demand.shape[0]
    k = demand.shape[1]
    n_bins = demand.shape[2]
    for i in range(k):
        out_rot[i] = 0
    # sums[i, l] = rows 0..i-1 of link l at their rotations, added in row order
    sums = np.zeros((k, n_links, n_bins))
    zero = np.zeros(n_bins)
    for lk in range(n_links):
        for b in range(n_bins):
            sums[1 if k > 1 else 0, lk, b] = 0.0 + demand[lk, 0, b]
    if k == 1:
        for lk in range(n_links):
            if _excess(zero, demand[lk, 0], 0, capacity[lk]) > tol_rel * capacity[lk]:
                return False, 1
        return True, 1
    last = k - 1
    n_last = max(1, limits[last])
    perfect = np.zeros(n_last, dtype=np.bool_)
    middles = np.empty(n_last, dtype=np.int64)
    run_starts = np.empty(n_last, dtype=np.int64)
    run_lengths = np.empty(n_last, dtype=np.int64)
    rot = np.zeros(k, dtype=np.int64)
    evaluated = 0
    # depth-first over the prefix rows 1..k-2 (lexicographic, the last fastest)
    level = 1  # the row whose rotation is chosen next
    if last > 1:
        rot[1] = -1
    while True:
        if level < last:
            rot[level] += 1
            if rot[level] >= limits[level]:
                if level == 1:
                    break
                level -= 1
                continue
            ok = True
            for lk in range(n_links):
                for b in range(n_bins):
                    src = b - rot[level]
                    if src < 0:
                        src += n_bins
                    sums[level + 1, lk, b] = sums[level, lk, b] + demand[lk, level, src]
                if _excess(sums[level + 1, lk], zero, 0, capacity[lk]) \
                        > tol_rel * capacity[lk]:
                    ok = False  # no completion is perfect on that link
            if not ok:
                continue
            level += 1
            if level < last:
                rot[level] = -1
            continue
        # the last row, every rotation of it on this prefix
        found = False
        for s in range(n_last):
            evaluated += 1
            good = True
            for lk in range(n_links):
                if _excess(sums[last, lk], demand[lk, last], s, capacity[lk]) \
                        > tol_rel * capacity[lk]:
                    good = False
                    break
            perfect[s] = good
            found = found or good
        if found:
            _first_interval_middle(perfect, n_last, middles, run_starts, run_lengths, rot)
            for i in range(k):
                out_rot[i] = rot[i]
            return True, evaluated
        if last == 1:
            break
        level = last - 1
    return False, evaluated
