"""The prefix-sum increments of phase B against exact rational arithmetic.

:func:`rotation_increments` sums in another order than a pass over the row, so its
values are lowered by :func:`increments_allowance`; each must be a lower bound of the
exact increment (rationals, ``fractions.Fraction``), and within twice the allowance
of it, on rows drawn as the circle draws them and on arbitrary rows.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import tdmcore
from tdmcore._kernels.partial_sums import increments_allowance, rotation_increments, row_runs


def _rows(kind: str, rng: np.random.Generator, bins: int) -> np.ndarray:
    if kind == "circle":  # comm units: runs at the full rate, partial end bins
        muls = rng.choice([1, 2, 3], size=4)
        return tdmcore.discretize(600.0 / muls, rng.uniform(0.05, 0.6, size=4),
                                  rng.uniform(5.0, 25.0, size=4), 600.0, bins)
    if kind == "integer":  # runs of small integers, ties everywhere
        return rng.integers(0, 4, size=(4, bins)).astype(float)
    return rng.uniform(0.0, 25.0, size=(4, bins)) * (rng.random((4, bins)) < 0.5)


def _exact_increment(prefix: np.ndarray, row: np.ndarray, shift: int, cap: float) -> Fraction:
    b_cap = Fraction(cap)
    total = Fraction(0)
    for b, y in enumerate(row):
        if y > 0.0:
            p = Fraction(prefix[(b + shift) % prefix.shape[0]])
            total += max(Fraction(0), p + Fraction(y) - b_cap) - max(Fraction(0), p - b_cap)
    return total


@pytest.mark.parametrize("kind", ["circle", "integer", "uniform"])
@pytest.mark.parametrize("seed", range(4))
def test_row_runs_rebuild_every_row(kind: str, seed: int) -> None:
    rng = np.random.default_rng([seed, 1])
    demand = _rows(kind, rng, int(rng.choice([8, 24, 72])))
    for min_run in (1, 4):
        value, win_ptr, win_start, win_len, one_ptr, one_idx, one_val = row_runs(demand,
                                                                                 min_run)
        for r in range(demand.shape[0]):
            rebuilt = np.zeros(demand.shape[1])
            for w in range(win_ptr[r], win_ptr[r + 1]):
                rebuilt[win_start[w]:win_start[w] + win_len[w]] += value[r]
            rebuilt[one_idx[one_ptr[r]:one_ptr[r + 1]]] += one_val[one_ptr[r]:one_ptr[r + 1]]
            np.testing.assert_array_equal(rebuilt, demand[r])


@pytest.mark.parametrize("kind", ["circle", "integer", "uniform"])
@pytest.mark.parametrize("seed", range(4))
def test_rotation_increments_bound_the_exact_increments(kind: str, seed: int) -> None:
    rng = np.random.default_rng([seed, 2])
    bins = int(rng.choice([8, 24, 72]))
    demand = _rows(kind, rng, bins)
    cap = float(rng.uniform(0.5, 1.5) * demand.max(axis=1).sum() / 2)
    prefix = demand[0] + np.roll(demand[1], int(rng.integers(0, bins)))
    allowance = increments_allowance(demand, float(demand.sum()), cap)
    assert 0.0 < allowance < 1e-6
    runs = row_runs(demand, 1 + seed % 4)
    cum = np.empty(2 * bins + 1)
    for r in (2, 3):
        out = np.empty(bins)
        low = rotation_increments(prefix, cap, r, bins, *runs, cum, allowance, out)
        assert low == out.min()
        for s in range(bins):
            exact = _exact_increment(prefix, demand[r], s, cap)
            assert Fraction(out[s]) <= exact <= Fraction(out[s]) + 2 * Fraction(allowance), \
                (kind, seed, r, s)


def test_the_overlap_correction_is_bounded_by_h_at_the_peak() -> None:
    """_overlap's slope (issue 42): on a bin where the prefix holds p and the joining
    row x, a later row's demand y <= y_peak adds, jointly, at least what it adds to
    each alone less h(min(p, x)), h(a) = f(a + y_peak) - f(a) - f(y_peak); checked in
    exact rationals on random and boundary values (equalities at B included)."""
    rng = np.random.default_rng(7)
    cap = Fraction(25)

    def f(a: Fraction) -> Fraction:
        return max(Fraction(0), a - cap)

    def g(y: Fraction, a: Fraction) -> Fraction:
        return f(a + y) - f(a)

    grid = [Fraction(v) for v in (0, 1, 5, 10, 12.5, 15, 20, 24, 25, 26, 30)]
    values = grid + [Fraction(float(v)) for v in rng.uniform(0, 30, 40)]
    tight = 0
    for _ in range(20_000):
        p, x, y_peak = (values[int(i)] for i in rng.integers(0, len(values), 3))
        y = y_peak * Fraction(float(rng.choice([0.0, 0.3, 0.7, 1.0])))
        correction = g(y, p + x) - g(y, p) - g(y, x) + g(y, Fraction(0))
        a = min(p, x)
        h = f(a + y_peak) - f(a) - f(y_peak)
        assert h >= 0
        assert correction >= -h, (p, x, y, y_peak)
        tight += correction == -h and h > 0
    assert tight > 100  # the bound is reached: no slack left to spend
