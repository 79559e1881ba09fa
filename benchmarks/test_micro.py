"""pytest-benchmark micro-benchmarks (excluded from the default test run).

Run: ``python -m pytest benchmarks/ -m benchmark`` (add ``--benchmark-json out.json``).
Each benchmark first checks tdmcore against the naive peer on the same instance.
"""

from __future__ import annotations

import pytest

import tdmcore
from benchmarks.asv_bench.bench_rotation import HEAVY_TAIL_SEEDS
from benchmarks.asv_bench.instances import contended_link, heavy_link
from tests.oracles import naive

pytestmark = pytest.mark.benchmark

CASES = [("first", 4, 72), ("optimal", 5, 72), ("first", 5, 72), ("optimal", 4, 144)]


@pytest.mark.parametrize(("mode", "k", "bins"), CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_search_rotations(benchmark, mode, k, bins, seed):
    inst = contended_link(k, bins, seed=seed)
    want = naive.search_rotations(inst.demand, inst.capacity_gbps, inst.limits, mode=mode,
                                  mids=inst.mids)
    got = benchmark(tdmcore.search_rotations, inst.demand, inst.capacity_gbps, inst.limits,
                    mode=mode, mids=inst.mids)
    assert tuple(got.rotations.tolist()) == tuple(want[0])
    assert got.perfect == want[1]


@pytest.mark.parametrize(("mode", "k", "bins"), [("first", 4, 72), ("optimal", 4, 72)])
def test_search_rotations_naive_peer(benchmark, mode, k, bins):
    inst = contended_link(k, bins, seed=0)
    benchmark.pedantic(naive.search_rotations,
                       args=(inst.demand, inst.capacity_gbps, inst.limits),
                       kwargs={"mode": mode, "mids": inst.mids}, rounds=3, iterations=1)


@pytest.mark.parametrize("mode", ["first", "optimal"])
@pytest.mark.parametrize("seed", HEAVY_TAIL_SEEDS)
def test_search_rotations_heavy_tail(benchmark, mode, seed):
    """The search's tail: the slowest and the smallest speed-ups of the first 500
    heavily contended links without a perfect rotation (k = 4, 72 bins)."""
    inst = heavy_link(4, 72, seed)
    want = naive.search_rotations(inst.demand, inst.capacity_gbps, inst.limits, mode=mode,
                                  mids=inst.mids)
    assert not want[1]  # no perfect rotation: the phase-B search
    got = benchmark(tdmcore.search_rotations, inst.demand, inst.capacity_gbps, inst.limits,
                    mode=mode, mids=inst.mids)
    assert tuple(got.rotations.tolist()) == tuple(want[0])
    assert not got.perfect


@pytest.mark.parametrize("seed", [67, 537])
def test_search_rotations_heavy_tail_naive_peer(benchmark, seed):
    inst = heavy_link(4, 72, seed)
    benchmark.pedantic(naive.search_rotations,
                       args=(inst.demand, inst.capacity_gbps, inst.limits),
                       kwargs={"mode": "first", "mids": inst.mids}, rounds=3, iterations=1)


@pytest.mark.parametrize("bins", [72, 144, 360])
def test_score(benchmark, bins):
    inst = contended_link(4, bins, seed=0)
    rot = [0, 3, 7, 11]
    assert abs(tdmcore.score(inst.demand, rot, inst.capacity_gbps)
               - naive.score(inst.demand, rot, inst.capacity_gbps)) < 1e-9
    benchmark(tdmcore.score, inst.demand, rot, inst.capacity_gbps)


@pytest.mark.parametrize("bins", [72, 360])
def test_discretize(benchmark, bins):
    periods, duty, rate = [400.0, 200.0, 100.0], [0.2, 0.3, 0.1], [25.0, 20.0, 10.0]
    benchmark(tdmcore.discretize, periods, duty, rate, 400.0, bins)
