"""Table-driven cases with the hand arithmetic in comments (docs/traffic-circle.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tdmcore


def test_discretize_one_unit_exact_overlap() -> None:
    # period 100 ms on a 100 ms circle, 8 bins, d = 0.3 -> arc [0, 2.4) bins
    # bins 0, 1 full (10 Gbps), bin 2 covered 0.4 -> 4 Gbps; total = 10 x 0.3 x 8 = 24
    row = tdmcore.discretize(100.0, 0.3, 10.0, 100.0, bins=8)
    np.testing.assert_allclose(row, [10, 10, 4, 0, 0, 0, 0, 0])


def test_discretize_two_units_per_circle() -> None:
    # period 50 on a 100 circle -> mul = 2, units start at bins 0 and 4 of 8;
    # d = 0.5 -> each arc 2 bins: [0, 2) and [4, 6)
    row = tdmcore.discretize(50.0, 0.5, 5.0, 100.0, bins=8)
    np.testing.assert_allclose(row, [5, 5, 0, 0, 5, 5, 0, 0])


def test_discretize_vector_shape_and_full_duty() -> None:
    demand = tdmcore.discretize([100.0, 25.0], [1.0, 0.0], [2.0, 7.0], 100.0, bins=72)
    assert demand.shape == (2, 72)
    np.testing.assert_allclose(demand[0], 2.0)  # d = 1: the whole circle
    np.testing.assert_allclose(demand[1], 0.0)  # d = 0: no traffic


def test_score_hand_arithmetic() -> None:
    # two rows of 15 Gbps over 6 bins each, B = 10, both at rotation 0 on 72 bins:
    # S = 30 on 6 bins -> excess = (30 - 10) x 6 = 120
    # score = 100 (1 - 120 / (10 x 72)) = 83.33
    demand = np.zeros((2, 72))
    demand[:, :6] = 15.0
    assert math.isclose(tdmcore.score(demand, [0, 0], 10.0), 100 * (1 - 120 / 720))
    # rotate row 1 by 6 bins: each bin holds 15 -> excess = 5 x 12 = 60 -> 91.67
    assert math.isclose(tdmcore.score(demand, [0, 6], 10.0), 100 * (1 - 60 / 720))
    # utilization: 12 bins carry 10 each -> 120 / 720 = 0.1667
    assert math.isclose(tdmcore.link_utilization(demand, [0, 6], 10.0), 120 / 720)


def test_rotation_is_numpy_roll() -> None:
    demand = np.zeros((1, 8))
    demand[0, 7] = 4.0
    # D'[b] = D[(b - 1) mod 8] -> the demand at bin 7 moves to bin 0; B = 3 -> excess 1
    assert tdmcore.excess(demand, [1], 3.0) == 1.0
    two = np.vstack([demand, demand])
    assert tdmcore.excess(two, [1, 0], 3.0) == 2.0  # 4 - 3 at bin 0 and at bin 7


def test_first_mode_takes_middle_of_first_interval() -> None:
    # 8 bins, B = 1, row 0 on bins [0, 2), row 1 (2 bins) must avoid them:
    # perfect rotations of row 1: 2..6 -> middle = 2 + (5 - 1) // 2 = 4
    demand = np.zeros((2, 8))
    demand[:, :2] = 1.0
    result = tdmcore.search_rotations(demand, 1.0, [1, 8])
    assert result.rotations.tolist() == [0, 4]
    assert result.perfect and result.score == 100.0


def test_wrapping_interval_is_one_run() -> None:
    # row 0 on bins [3, 5); row 1 one bin wide: perfect rotations 0,1,2,5,6,7 -> one
    # circular run from 5 of length 6 -> middle = (5 + (6 - 1) // 2) mod 8 = 7
    demand = np.zeros((2, 8))
    demand[0, 3:5] = 1.0
    demand[1, 0] = 1.0
    assert tdmcore.search_rotations(demand, 1.0, [1, 8]).rotations.tolist() == [0, 7]


def test_whole_range_perfect_is_one_run() -> None:
    # B never exceeded: one run of length 8 -> middle (8 - 1) // 2 = 3
    demand = np.ones((2, 8))
    assert tdmcore.search_rotations(demand, 5.0, [1, 8]).rotations.tolist() == [0, 3]


def test_no_perfect_returns_best_first_in_order() -> None:
    # both rows 3 bins of 2 Gbps, B = 2.5: any overlap costs 1.5 per bin; with
    # limits 2, rotations 0 and 1 overlap 3 and 2 bins -> best is 1 (excess 3)
    demand = np.zeros((2, 8))
    demand[:, :3] = 2.0
    result = tdmcore.search_rotations(demand, 2.5, [1, 2])
    assert result.rotations.tolist() == [0, 1]
    assert not result.perfect and result.psi is None
    assert math.isclose(result.score, 100 * (1 - 3.0 / 20.0))


def test_optimal_maximizes_psi() -> None:
    # three 1-bin rows on 12 bins, B = 1 (all contend): the best spread puts the
    # midpoints 4 bins apart -> psi = 4 with row 1 at 4 and row 2 at 8
    demand = np.zeros((3, 12))
    demand[:, 0] = 1.0
    mids = [np.array([0.5])] * 3
    result = tdmcore.search_rotations(demand, 1.0, [1, 12, 12], mode="optimal", mids=mids)
    assert result.rotations.tolist() == [0, 4, 8]
    assert result.psi == 4.0 and result.perfect


def test_psi_is_inf_without_contending_pairs() -> None:
    demand = np.zeros((2, 8))
    demand[:, 0] = 1.0
    result = tdmcore.search_rotations(demand, 3.0, [1, 8], mode="optimal",
                                      mids=[[0.5], [0.5]])
    assert result.psi == math.inf


def test_shifts_and_average_utilization() -> None:
    # rotation 18 of 72 bins on a 422 ms circle -> 18 / 72 x 422 = 105.5 ms
    np.testing.assert_allclose(tdmcore.rotations_to_shifts([0, 18, 36], 422.0), [0, 105.5, 211])
    # Gamma = mean(B_l xi_l / B_max) = (25 x 0.8 / 25 + 10 x 0.5 / 25) / 2 = 0.5
    assert math.isclose(tdmcore.average_bandwidth_utilization([25, 10], [0.8, 0.5]), 0.5)


@pytest.mark.parametrize(
    ("periods", "priorities", "expect_period", "expect_mult", "expect_idle", "compatible"),
    [
        # step 1: |100 - 97| <= 5 -> T = (100 + 97) / 2 = 98.5
        ([100.0, 97.0], ["high", "low"], 98.5, [1, 1], [0, 0], True),
        # step 1 with multiples: 2 x 100 = 200, 1 x 203 -> T = 201.5
        ([100.0, 203.0], ["high", "low"], 201.5, [2, 1], [0, 0], True),
        # step 1 picks the smallest T: 60 x 2 = 120 ~ 121 x 1 -> 120.5 (not 240 ...)
        ([60.0, 121.0], [1, 1], 120.5, [2, 1], [0, 0], True),
        # G_T bounds every pair (spec §4, revised 2026-11-28: pairwise): 100 vs 95
        # are 5 ms apart -> T = 97.5; 100 vs 92 (8 ms) are not, although both lie
        # within 4 ms of their mean, and equal priorities allow no idle -> step 3
        ([100.0, 95.0], [1, 1], 97.5, [1, 1], [0, 0], True),
        ([100.0, 92.0], [1, 1], 100.0, [1, 1], [0, 0], False),
        # step 2 : 200 vs 185 are 15 ms apart (> G_T) and no multiples <= 8 come
        # closer; the low pod is 15 ms shorter, within E_T = 18.5 (10 % of 185):
        # idle closes the gap, 15 ms -> 200, T = (200 + 200) / 2
        ([200.0, 185.0], ["high", "low"], 200.0, [1, 1], [0, 15.0], True),
        # S2 (98.68 high, 91.94 low): 6.74 ms apart, within E_T = 9.194 -> idle 6.74,
        # the low job runs at 98.68 ms
        ([98.68, 91.94], ["high", "low"], 98.68, [1, 1], [0, 98.68 - 91.94], True),
        # S3 (102.76 high, 186.84 low): 2 x 102.76 = 205.52 is 18.68 ms above
        # 186.84, within E_T = 18.684 -> idle 18.68, T = 205.52 (2:1 exactly)
        ([102.76, 186.84], ["high", "low"], 205.52, [2, 1], [0, 205.52 - 186.84], True),
        # two low pods fit the high one each on its own: 96 and 104 lie 4 ms from
        # 100 (no idle) but 8 ms from each other, so step 1 fails; T = 100
        ([100.0, 96.0, 104.0], [2, 1, 0], 100.0, [1, 1, 1], [0, 0, 0], True),
        # step 2 never stretches the high pod, and a low pod longer than every high
        # multiple it could match is never shrunk: 185 high, 200 low -> 185 a - 200 b
        # is 170, 155, ..., 80 for a <= 8: never within (G_T, E_T] -> step 3
        ([185.0, 200.0], ["high", "low"], 200.0, [1, 1], [0, 0], False),
        # step 3: equal priorities -> no idle allowed -> incompatible, T = longest
        ([200.0, 185.0], [1, 1], 200.0, [1, 1], [0, 0], False),
        # a single pod is its own base period
        ([422.0], ["high"], 422.0, [1], [0], True),
    ],
)
def test_unify_periods_table(periods, priorities, expect_period, expect_mult, expect_idle,
                             compatible) -> None:
    base = tdmcore.unify_periods(periods, priorities)
    assert base.compatible == compatible
    if compatible:
        assert math.isclose(base.period_ms, expect_period)
        assert base.multiples.tolist() == expect_mult
        np.testing.assert_allclose(base.idle_ms, expect_idle)
    else:
        assert base.period_ms == max(periods)
        assert base.multiples.tolist() == [1] * len(periods)


def test_idle_is_bounded_by_et() -> None:
    # 200 high, 178 low: idle 22 > 17.8 = 10 % of 178, and no multiple fits -> step 3
    base = tdmcore.unify_periods([200.0, 178.0], ["high", "low"], max_multiple=4)
    assert not base.compatible and base.idle_ms.tolist() == [0.0, 0.0]
    # a larger E_T admits it: gap 22 <= 26.7, idle 22 ms closes it, T = (200 + 200) / 2
    base = tdmcore.unify_periods([200.0, 178.0], ["high", "low"], et_frac=0.15, max_multiple=4)
    assert base.compatible and base.idle_ms.tolist() == [0.0, 22.0]
    assert base.period_ms == 200.0


def test_discretize_unified_idle_and_truncation() -> None:
    # idle 15 ms on a 185 ms pod with d = 0.2: comm 37 ms of a 200 ms iteration
    base = tdmcore.unify_periods([200.0, 185.0], ["high", "low"])
    rows = tdmcore.discretize_unified(base, [200.0, 185.0], [0.25, 0.2], [10.0, 10.0])
    np.testing.assert_allclose(rows.circle_duty, [0.25, 37 / 200])
    assert math.isclose(rows.demand[1].sum(), 10 * 37 / 200 * 72)
    # incompatible: each pattern one unit on T = 200: 185 ms x 0.5 = 92.5 ms -> 0.4625
    base = tdmcore.unify_periods([200.0, 185.0], [1, 1])
    rows = tdmcore.discretize_unified(base, [200.0, 185.0], [0.5, 0.5], [10.0, 10.0])
    np.testing.assert_allclose(rows.circle_duty, [0.5, 0.4625])
    assert rows.limits.tolist() == [72, 72]
