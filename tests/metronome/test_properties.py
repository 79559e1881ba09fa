"""Properties of the circle model (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import tdmcore
from tests.oracles import naive


@st.composite
def circles(draw, max_rows: int = 5):
    bins = draw(st.integers(8, 80))
    k = draw(st.integers(1, max_rows))
    demand = draw(arrays(np.float64, (k, bins),
                         elements=st.floats(0, 50, allow_nan=False, allow_infinity=False)))
    rotations = draw(arrays(np.int64, (k,), elements=st.integers(0, 10 * bins)))
    capacity = draw(st.floats(0.01, 200, allow_nan=False))
    return demand, rotations, capacity


@given(circles())
def test_score_is_between_0_and_100(case) -> None:
    demand, rotations, capacity = case
    assert 0.0 <= tdmcore.score(demand, rotations, capacity) <= 100.0
    assert 0.0 <= tdmcore.link_utilization(demand, rotations, capacity) <= 1.0


@given(circles(), st.integers(-500, 500))
def test_rotating_all_rows_together_keeps_excess(case, shift: int) -> None:
    demand, rotations, capacity = case
    before = tdmcore.excess(demand, rotations, capacity)
    after = tdmcore.excess(demand, (rotations + shift) % demand.shape[1], capacity)
    assert np.isclose(before, after, rtol=1e-9, atol=1e-9 * capacity)


@given(circles(max_rows=4), st.data())
def test_adding_a_row_never_lowers_excess(case, data) -> None:
    demand, rotations, capacity = case
    bins = demand.shape[1]
    extra = data.draw(arrays(np.float64, (1, bins),
                             elements=st.floats(0, 50, allow_nan=False, allow_infinity=False)))
    shift = data.draw(st.integers(0, bins - 1))
    before = tdmcore.excess(demand, rotations, capacity)
    after = tdmcore.excess(np.vstack([demand, extra]), np.append(rotations, shift), capacity)
    assert after >= before


@st.composite
def searches(draw):
    bins = draw(st.integers(8, 24))
    k = draw(st.integers(1, 4))
    muls = draw(st.lists(st.sampled_from([1, 2, 3, 4]), min_size=k, max_size=k))
    duty = draw(st.lists(st.floats(0, 0.9), min_size=k, max_size=k))
    rate = draw(st.lists(st.floats(0.1, 10), min_size=k, max_size=k))
    base = 100.0
    demand = tdmcore.discretize([base / m for m in muls], duty, rate, base, bins)
    demand = np.atleast_2d(demand)
    limits = [int(np.ceil(bins / m)) for m in muls]
    if k > 3:
        limits = [min(x, 12) for x in limits]
    capacity = draw(st.floats(0.1, 30))
    return demand, capacity, limits


@settings(max_examples=200, deadline=None)
@given(searches())
def test_first_mode_is_perfect_whenever_a_perfect_rotation_exists(case) -> None:
    demand, capacity, limits = case
    exists = naive.search(demand, capacity, limits, mode="first").perfect
    got = tdmcore.search_rotations(demand, capacity, limits, mode="first")
    assert got.perfect == exists
    assert (got.score == 100.0) == got.perfect
    assert got.rotations[0] == 0
    assert all(0 <= r < lim for r, lim in zip(got.rotations[1:], limits[1:], strict=True))
