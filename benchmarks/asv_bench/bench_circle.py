"""Score, link utilization, discretization and base-period unification."""

from __future__ import annotations

import numpy as np

import tdmcore
from tests.oracles import naive

from .instances import contended_link


class TimeScore:
    params = ([2, 3, 4, 5], [72, 144, 360])
    param_names = ["k", "bins"]

    def setup(self, k, bins):
        self.inst = contended_link(k, bins, seed=0)
        self.rot = np.random.default_rng(0).integers(0, bins, size=k)
        got = tdmcore.score(self.inst.demand, self.rot, self.inst.capacity_gbps)
        want = naive.score(self.inst.demand, self.rot, self.inst.capacity_gbps)
        if abs(got - want) > 1e-9:
            raise AssertionError("score disagrees with the naive peer")

    def time_score(self, k, bins):
        tdmcore.score(self.inst.demand, self.rot, self.inst.capacity_gbps)

    def time_score_naive(self, k, bins):
        naive.score(self.inst.demand, self.rot, self.inst.capacity_gbps)

    def time_link_utilization(self, k, bins):
        tdmcore.link_utilization(self.inst.demand, self.rot, self.inst.capacity_gbps)

    def time_link_utilization_naive(self, k, bins):
        naive.link_utilization(self.inst.demand, self.rot, self.inst.capacity_gbps)


class TimeDiscretize:
    params = ([2, 3, 4, 5], [72, 144, 360])
    param_names = ["k", "bins"]

    def setup(self, k, bins):
        rng = np.random.default_rng(k * 1000 + bins)
        self.muls = rng.integers(1, 5, size=k)
        self.periods = 400.0 / self.muls
        self.duty = rng.uniform(0.05, 0.5, size=k)
        self.rate = rng.uniform(5, 25, size=k)
        got = tdmcore.discretize(self.periods, self.duty, self.rate, 400.0, bins)
        want = naive.discretize(self.periods, self.duty, self.rate, 400.0, bins)
        if not np.allclose(got, want, atol=1e-9):
            raise AssertionError("discretize disagrees with the naive peer")

    def time_discretize(self, k, bins):
        tdmcore.discretize(self.periods, self.duty, self.rate, 400.0, bins)

    def time_discretize_naive(self, k, bins):
        naive.discretize(self.periods, self.duty, self.rate, 400.0, bins)


class TimeUnify:
    params = [2, 3, 4, 5]
    param_names = ["k"]

    def setup(self, k):
        rng = np.random.default_rng(k)
        base = 420.0
        # jitter of +-1.5 ms keeps every product within G_T: step 1 applies
        self.periods = base / rng.integers(1, 4, size=k) + rng.uniform(-1.5, 1.5, size=k)
        self.priorities = [1] + [0] * (k - 1)  # high, then low
        got = tdmcore.unify_periods(self.periods, self.priorities)
        want = naive.unify_periods(self.periods, self.priorities)
        if not np.isclose(got.period_ms, want[0]):
            raise AssertionError("unify_periods disagrees with the naive peer")

    def time_unify_periods(self, k):
        tdmcore.unify_periods(self.periods, self.priorities)

    def time_unify_periods_naive(self, k):
        naive.unify_periods(self.periods, self.priorities)
