"""Closed-form stretches of iterations (spec/simulator.md, "skip ahead ... where exact").

A job alone on all its links (or on one node) is affected by nobody: iteration ``i``
lasts ``compute x noise_i + const`` (``const`` = idle + its comm time alone + its
latency tail), exactly what the event engine would compute for it.  These kernels
walk such a stretch of iterations ``i0 .. i0 + n - 1`` starting at ``s0`` without
events, with the engine's counter-based noise
(:func:`tdmcore._kernels.flow.noise_factor`).
"""

from __future__ import annotations

import numpy as np

from .._config import jit
from .flow import noise_factor


@jit
def _duration(seed: int, key: int, sigma: float, i: int, compute: float,
              const: float) -> float:
    return compute * noise_factor(seed, key, i, sigma) + const


@jit
def stretch_summary(seed: int, key: int, sigma: float, i0: int, n: int, compute: float,
                    const: float) -> tuple[float, float, float]:
    """(total time, shortest iteration, longest iteration) of the stretch."""
    if n <= 0:
        return 0.0, np.inf, -np.inf
    if sigma == 0.0:
        d = compute + const
        return d * n, d, d
    total = 0.0
    lo = np.inf
    hi = -np.inf
    for i in range(i0, i0 + n):
        d = _duration(seed, key, sigma, i, compute, const)
        total += d
        if d < lo:
            lo = d
        if d > hi:
            hi = d
    return total, lo, hi


@jit
def stretch_locate(seed: int, key: int, sigma: float, i0: int, n: int, compute: float,
                   const: float, s0: float, t: float) -> tuple[int, float, float]:
    """``(k, s_k, s_prev)``: ``k`` iterations of the stretch end by ``t`` (at most
    ``n``); iteration ``i0 + k`` starts at ``s_k``; the last one that ended
    started at ``s_prev`` (NaN when none did)."""
    if sigma == 0.0:
        d = compute + const
        if d <= 0.0:
            return n, s0, np.nan
        k = int(min(float(n), max(0.0, np.floor((t - s0) / d))))
        # the same end as the loop below would reach, up to round-off: adjust
        while k < n and s0 + (k + 1) * d <= t:
            k += 1
        while k > 0 and s0 + k * d > t:
            k -= 1
        return k, s0 + k * d, (s0 + (k - 1) * d) if k > 0 else np.nan
    s = s0
    prev = np.nan
    for k in range(n):
        d = _duration(seed, key, sigma, i0 + k, compute, const)
        if s + d > t:
            return k, s, prev
        prev = s
        s += d
    return n, s, prev


@jit
def stretch_commit(seed: int, key: int, sigma: float, i0: int, n: int, compute: float,
                   const: float, s0: float, step: int, samples: np.ndarray,
                   last_d: np.ndarray, last_s: np.ndarray) -> tuple[float, int, int]:
    """Walk ``n`` iterations: returns ``(total, samples written, tail kept)``.

    Iteration ``i`` is written to ``samples`` when ``i % step == 0``; the last
    ``len(last_d)`` iterations' times and starts fill ``last_d``/``last_s`` (a
    ring, read back oldest first by the caller from the returned count).
    """
    m = last_d.shape[0]
    total = 0.0
    s = s0
    w = 0
    kept = 0
    for k in range(n):
        i = i0 + k
        d = _duration(seed, key, sigma, i, compute, const)
        if i % step == 0:
            samples[w] = d
            w += 1
        if m > 0:
            last_d[kept % m] = d
            last_s[kept % m] = s
            kept += 1
        total += d
        s += d
    return total, w, kept
