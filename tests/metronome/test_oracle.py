"""Kernels against the brute-force oracle on thousands of seeded random instances.

6 families x k = 1..5 x 2 modes x 100 seeds = 6,000 instances of the rotation search,
3,000 heavily contended links at k = 4-6 (most without a perfect rotation: the
phase-B search), plus score / utilization / discretization on random inputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tdmcore
from tests import instances
from tests.oracles import naive

SEEDS = range(100)


def _same_psi(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or math.isclose(a, b, rel_tol=0.0, abs_tol=1e-9)


@pytest.mark.parametrize("mode", ["first", "optimal"])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("family", instances.FAMILIES)
def test_search_matches_brute_force(family: str, k: int, mode: str) -> None:
    for seed in SEEDS:
        inst = instances.make_instance(family, seed, k)
        got = tdmcore.search_rotations(inst.demand, inst.capacity, inst.limits, mode=mode,
                                       mids=inst.mids)
        want = naive.search(inst.demand, inst.capacity, inst.limits, mode=mode, mids=inst.mids)
        where = f"{mode} {inst.describe()}"
        assert tuple(got.rotations.tolist()) == want.rotations, where
        assert got.perfect == want.perfect, where
        assert math.isclose(got.score, want.score, rel_tol=0, abs_tol=1e-9), where
        assert _same_psi(got.psi, want.psi), where
        total = int(np.prod(inst.limits[1:]))
        assert 1 <= got.evaluated <= 2 * total, where


HEAVY_SEEDS = range(500)


def _check_against_oracle(inst: instances.Instance, mode: str) -> bool:
    """Assert tdmcore's answer is the brute force's; return whether it is perfect."""
    got = tdmcore.search_rotations(inst.demand, inst.capacity, inst.limits, mode=mode,
                                   mids=inst.mids)
    want = naive.search(inst.demand, inst.capacity, inst.limits, mode=mode, mids=inst.mids)
    where = f"{mode} {inst.describe()}"
    assert tuple(got.rotations.tolist()) == want.rotations, where
    assert got.perfect == want.perfect, where
    assert math.isclose(got.score, want.score, rel_tol=0, abs_tol=1e-9), where
    assert _same_psi(got.psi, want.psi), where
    return want.perfect


@pytest.mark.parametrize("mode", ["first", "optimal"])
@pytest.mark.parametrize("k", [4, 5, 6])
def test_heavily_contended_links_match_brute_force(k: int, mode: str) -> None:
    """Every job at 55-100 % of the link: the highest score, ties first in
    enumeration order, exactly as the brute force's sequential scan keeps it."""
    perfect = [_check_against_oracle(instances.make_heavy_instance(seed, k), mode)
               for seed in HEAVY_SEEDS]
    # the family is about links without a perfect rotation: most must be such
    assert perfect.count(False) >= 0.6 * len(perfect)


@pytest.mark.parametrize("mode", ["first", "optimal"])
def test_heavy_links_with_a_periodic_reference_match_brute_force(mode: str) -> None:
    """Reference rows of multiple 2 or 3 repeat every N/2 or N/3 bins, so the search
    skips turned copies of subtrees (lowest_excess's symmetry): whole links, limits
    uncut, on 12-24 bins."""
    from benchmarks.asv_bench.instances import heavy_link
    from tdmcore._kernels.lowest_excess import _symmetry_shift

    turned = 0
    for seed in range(300):
        bins = (12, 16, 18, 24)[seed % 4]
        link = heavy_link(4, bins, seed)
        limits = link.limits.copy()
        limits[0] = 1
        margin = 1e-12 * (link.demand.sum() + link.capacity_gbps * bins)
        shift = _symmetry_shift(link.demand, limits, 0.25 * margin)
        turned += shift > 0 and any(shift % limits[r] for r in range(1, 4))
        inst = instances.Instance("heavy", seed, link.demand, link.capacity_gbps, limits,
                                  list(link.mids))
        _check_against_oracle(inst, mode)
    assert turned >= 100


@pytest.mark.parametrize("seed", range(20))
def test_score_and_utilization_match_oracle(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(25):
        k, bins = int(rng.integers(1, 6)), int(rng.integers(8, 100))
        demand = rng.uniform(0, 10, size=(k, bins)) * (rng.random((k, bins)) < 0.4)
        rotations = rng.integers(0, 3 * bins, size=k)
        capacity = float(rng.uniform(0.5, 30))
        assert math.isclose(tdmcore.score(demand, rotations, capacity),
                            naive.score(demand, rotations % bins, capacity), abs_tol=1e-9)
        assert math.isclose(tdmcore.link_utilization(demand, rotations, capacity),
                            naive.link_utilization(demand, rotations % bins, capacity),
                            abs_tol=1e-12)
        assert math.isclose(tdmcore.excess(demand, rotations, capacity),
                            naive.excess(demand, rotations % bins, capacity),
                            rel_tol=1e-12, abs_tol=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_discretize_matches_interval_arithmetic(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(10):
        bins = int(rng.integers(8, 400))
        base = float(rng.uniform(10, 1000))
        muls = rng.integers(1, 9, size=4)
        duty = rng.uniform(0, 1, size=4)
        rate = rng.uniform(0, 100, size=4)
        got = tdmcore.discretize(base / muls, duty, rate, base, bins)
        for i in range(4):
            want = naive.discretize(base / muls[i], duty[i], rate[i], base, bins)[0]
            np.testing.assert_allclose(got[i], want, rtol=1e-12, atol=1e-9)
            # Exact overlap preserves the demand over the circle: r d N.
            assert math.isclose(got[i].sum(), rate[i] * duty[i] * bins, rel_tol=1e-9,
                                abs_tol=1e-9)


def assert_unify_is_the_oracles(periods: list[float], priorities: list[int], gt: float,
                                et: float, m_max: int) -> tdmcore.BasePeriod:
    """``unify_periods`` equals the M^k enumeration: T, compatibility, multiples, idle."""
    got = tdmcore.unify_periods(periods, priorities, gt_ms=gt, et_frac=et, max_multiple=m_max)
    want_t, want_ok, want_m, want_idle = naive.unify_with_multiples(
        periods, priorities, gt, et, m_max)
    where = f"periods={periods} prio={priorities} gt={gt} et={et} M={m_max}"
    assert got.compatible == want_ok, where
    assert math.isclose(got.period_ms, want_t, rel_tol=1e-12), where
    assert got.multiples.tolist() == want_m, where
    np.testing.assert_allclose(got.idle_ms, want_idle, atol=1e-9, err_msg=where)
    return got


@pytest.mark.parametrize("seed", range(10))
def test_unify_periods_matches_enumeration_with_many_candidates(seed: int) -> None:
    """300 links whose periods are short against G_T, so many multiple vectors
    qualify and the search's pruning (a bound on T, the products' 2 G_T spread, the
    range of T the low-priority pods can fit) decides most of them, half of them
    with integer periods (exact ties): it still equals the M^k enumeration,
    multiples included."""
    rng = np.random.default_rng(1000 + seed)
    for n in range(30):
        k = int(rng.integers(2, 6))
        # every other link has integer periods: exact ties between multiple vectors,
        # which the tie rule ("first generated") decides
        periods = (rng.integers(1, 16, size=k).astype(float) if n % 2
                   else rng.uniform(0.5, 15.0, size=k))
        priorities = [int(p) for p in rng.integers(0, 2, size=k)]
        gt, et, m_max = float(rng.uniform(0, 8)), float(rng.uniform(0, 0.5)), 6
        assert_unify_is_the_oracles(periods.tolist(), priorities, gt, et, m_max)


@pytest.mark.parametrize("seed", range(20))
def test_unify_periods_matches_enumeration(seed: int) -> None:
    """500 random links: the anchored search equals the M^k enumeration of the rule
    (docs/traffic-circle.md)."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        k = int(rng.integers(1, 5))
        base = float(rng.uniform(50, 600))
        periods = base / rng.integers(1, 5, size=k) + rng.normal(0, 4, size=k)
        periods = np.maximum(periods, 5.0)
        priorities = [int(p) for p in rng.integers(0, 3, size=k)]
        gt, et, m_max = float(rng.uniform(0, 8)), float(rng.uniform(0, 0.2)), 6
        got = tdmcore.unify_periods(periods, priorities, gt_ms=gt, et_frac=et,
                                    max_multiple=m_max)
        want_t, want_ok, want_idle = naive.unify_periods(periods, priorities, gt, et, m_max)
        where = f"seed={seed} periods={periods.tolist()} prio={priorities} gt={gt} et={et}"
        assert got.compatible == want_ok, where
        assert math.isclose(got.period_ms, want_t, rel_tol=1e-12), where
        np.testing.assert_allclose(got.idle_ms, want_idle, atol=1e-9, err_msg=where)
        if got.compatible:
            # The multiples realise T: T is the mean of the (stretched) products, and
            # idle closes the gap: a pod with idle runs at the high-priority pods'
            # common multiple T_high (spec §4, revised 2026-11-28).
            stretched = (periods + got.idle_ms) * got.multiples
            assert math.isclose(stretched.mean(), got.period_ms, rel_tol=1e-12), where
            high = np.asarray(priorities) == max(priorities)
            t_high = (got.multiples[high] * periods[high]).mean()
            np.testing.assert_allclose(stretched[got.idle_ms > 0], t_high, rtol=1e-12,
                                       err_msg=where)
            # a pod without idle lies within G_T of every high-priority product
            # (step 1 holds every pair so; step 2 each low pod to the high ones)
            products = periods * got.multiples
            near = products[got.idle_ms == 0]
            assert (np.abs(near[:, None] - products[high][None, :]) <= gt + 1e-9).all(), where


@pytest.mark.parametrize("seed", range(20))
def test_unify_periods_matches_enumeration_near_the_thresholds(seed: int) -> None:
    """2,000 links whose low-priority pods sit a little short of a multiple of a
    high-priority period (gaps drawn across G_T and E_T, the snapshots' S2 / S3
    situation): step 1's pairwise test, step 2's idle that closes the gap and the
    incompatible case all occur, and every answer equals the M^k enumeration,
    multiples included."""
    rng = np.random.default_rng(5000 + seed)
    steps = {"common": 0, "idle": 0, "incompatible": 0}
    for _ in range(100):
        k = int(rng.integers(2, 5))
        high = float(rng.uniform(40, 600))
        n_high = int(rng.integers(1, k))
        periods = [high * float(rng.integers(1, 3)) * float(rng.uniform(0.995, 1.005))
                   for _ in range(n_high)]
        for _ in range(k - n_high):
            m = int(rng.integers(1, 4))
            periods.append(high / m * (1.0 - float(rng.uniform(-0.02, 0.12))))
        priorities = [1] * n_high + [0] * (k - n_high)
        order = rng.permutation(k)
        periods = [periods[i] for i in order]
        priorities = [priorities[i] for i in order]
        gt = float(rng.choice([0.0, 2.0, 5.0, 8.0]))
        got = assert_unify_is_the_oracles(periods, priorities, gt, 0.10, 8)
        steps["idle" if got.idle_ms.any() else
              "common" if got.compatible else "incompatible"] += 1
    assert min(steps.values()) >= 1, steps


MUTANT = """
import json, sys, types
import tdmcore
from tdmcore._kernels import lowest_excess, rotation_search
from tests import instances
from tests.oracles import naive

path = lowest_excess.__file__
source = open(path).read()
cases = [(k, seed) for k in (4, 5) for seed in range(120)]
wants = {}
for k, seed in cases:
    inst = instances.make_heavy_instance(seed, k)
    wants[k, seed] = naive.search(inst.demand, inst.capacity, inst.limits).rotations
for old, new in json.loads(sys.argv[2]):  # applied to the shipped kernel and every mutant
    assert source.count(old) == 1, old
    source = source.replace(old, new)
counts = []
for old, new in [("", "")] + json.loads(sys.argv[1]):
    assert old == "" or source.count(old) == 1, old
    mutant = types.ModuleType("tdmcore._kernels.mutant")
    mutant.__package__ = "tdmcore._kernels"
    exec(compile(source.replace(old, new) if old else source, path, "exec"), mutant.__dict__)
    rotation_search.lowest_excess = mutant.lowest_excess
    rotation_search.perfect_or_lowest = mutant.perfect_or_lowest
    scans = mutant._window_min
    windowed = set()

    def counted(*args, key=None):
        windowed.add(key)
        return scans(*args)

    wrong = 0
    for k, seed in cases:
        inst = instances.make_heavy_instance(seed, k)
        mutant._window_min = lambda *args, key=(k, seed): counted(*args, key=key)
        got = tdmcore.search_rotations(inst.demand, inst.capacity, inst.limits)
        wrong += tuple(got.rotations.tolist()) != wants[k, seed]
    counts.append([wrong, len(windowed)])
print(json.dumps(counts))
"""

#: (what, original text, mutated text): phase-B bounds made each a little too tight
MUTANTS = [
    ("joint bound 2 % high", "    return u if u > v else v\n",
     "    return 1.02 * (u if u > v else v)\n"),
    ("sorted scan stops 2 % early, its bound not lowered",
     "        if v >= cut:\n            if any_below and v < best:\n",
     "        if v >= 0.98 * cut:\n            v = cut\n            if any_below and v < best:\n"),
    ("prefix bound 2 % high", "pruned = e_level + tail - prune >= threshold",
     "pruned = 1.02 * (e_level + tail) - prune >= threshold"),
    ("a sibling's bound carried with half the turn's drop unpaid",
     "carried = eb_val[s] - drop[top - 1, d]\n", "carried = eb_val[s] - 0.5 * drop[top - 1, d]\n"),
    ("the previous child's bound carried without the drop",  # half the drop: unnoticed
     "eb_val[s - 1] - drop[top, 1])", "eb_val[s - 1])"),
    ("a subtree's bound from the joint increments 2 % high",
     "        if j < best:\n            best = j\n",
     "        if j < best:\n            best = 1.02 * j\n"),
    ("the overlap's correction left out",
     "            slope += h if h > 0.0 else 0.0\n",
     "            slope += 0.0 * h\n"),  # at half the peak's h: unnoticed
]
#: the same, on the prefix sums of the last row's scan
WINDOW_MUTANTS = [
    ("prefix-sum increments 2 % high", "max(cheap, sums[t] - allowance))\n",
     "max(cheap, 1.02 * sums[t] - allowance))\n"),
    ("the cheaper bounds beside the prefix sums 2 % high",
     "        lowest = min(lowest, max(cheap, sums[t] - allowance))\n",
     "        lowest = min(lowest, max(1.02 * cheap, sums[t] - allowance))\n"),
    ("a subtree's bound from the prefix sums 5 % high",
     "    return lowest - twin_slack\n\n\n@jit\ndef _drops",
     "    return 1.05 * lowest - twin_slack\n\n\n@jit\ndef _drops"),
    # (the least key of the candidates left unsorted, made twice too high, goes
    # unnoticed: those keys lie at or above what the child needs, so only the bound
    # it carries to its neighbours changes)
]


def _run_mutants(mutants: list[tuple[str, str, str]], base: list[list[str]]
                 ) -> list[list[int]]:
    """[wrong answers, instances whose last row went through prefix sums] of the
    shipped kernel with ``base``'s replacements, then of each mutant (pure Python,
    in a subprocess)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]  # the child imports tests.*
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH", "")]))
    mutations = json.dumps([[old, new] for _, old, new in mutants])
    out = subprocess.run([sys.executable, "-c", MUTANT, mutations, json.dumps(base)],
                         env=env, capture_output=True, text=True, timeout=900, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    counts: list[list[int]] = json.loads(out.stdout)
    return counts


def test_oracle_catches_planted_over_tight_bounds() -> None:
    """The heavily contended family discriminates: each phase-B bound made slightly
    too tight (pure Python, in a subprocess) gives answers the brute force refutes,
    while the shipped kernel, run the same way, agrees everywhere.  (The bounds a
    child carries to its neighbours are only refuted made much too tight: with phase
    B's good first incumbent few pruning decisions lie near them.)  The prefix sums
    of the last row's scan take over only on crowded links; here they take over
    after a prefix's first child, on every row (WINDOW_COST 0, ADAPT_AFTER 1,
    MIN_RUN_BINS 1), and the brute force agrees with them too."""
    always = [["WINDOW_COST = 2.0\n", "WINDOW_COST = 0.0\n"],
              ["ADAPT_AFTER = 4.0\n", "ADAPT_AFTER = 1.0\n"],
              ["MIN_RUN_BINS = 4\n", "MIN_RUN_BINS = 1\n"]]
    for base, mutants in (([], MUTANTS), (always, WINDOW_MUTANTS)):
        (shipped, windowed), *wrongs = _run_mutants(mutants, base)
        assert shipped == 0
        if base:
            assert windowed >= 100, windowed  # of 240: the prefix sums were used
        for (what, _, _), (wrong, _) in zip(mutants, wrongs, strict=True):
            assert wrong > 0, f"mutant '{what}' went unnoticed"


@pytest.mark.parametrize("seed", range(6))
def test_unify_periods_step_two_ties_go_to_the_first_generated(seed: int) -> None:
    """Links built for exact ties in step 2 (several high-priority pods of whole
    multiples of one period, integer low-priority periods): equal ``T_high`` from
    different multiple vectors, decided by "first generated".  The oracle once
    collected them in a set and lost that order (a reviewer's find, 2026-11-25)."""
    import random

    ties = 0
    for link in range(250 * seed, 250 * (seed + 1)):  # link 1065 tied
        r = random.Random(link)
        nh, nl = r.randint(2, 4), r.randint(1, 2)
        unit = r.choice([2, 3, 4, 5, 6, 10])
        periods = [float(unit * r.randint(1, 3)) for _ in range(nh)] + \
            [float(r.randint(1, 30)) for _ in range(nl)]
        priorities = [1] * nh + [0] * nl
        order = list(range(nh + nl))
        r.shuffle(order)
        periods = [periods[i] for i in order]
        priorities = [priorities[i] for i in order]
        gt, et = float(r.randint(0, 10)), r.choice([0.0, 0.1, 0.3, 0.5])
        m_max = r.randint(2, 6)
        got = assert_unify_is_the_oracles(periods, priorities, gt, et, m_max)
        ties += got.compatible and bool(np.any(got.idle_ms > 0))
    assert ties > 0  # step 2 ran


def test_unify_periods_step_two_ties_decided_by_the_low_pods_fit() -> None:
    """Exact ties of ``T_high`` in step 2, worked by hand (pairwise rule, spec §4
    revised 2026-11-28): the first multiple vector generated to which the
    low-priority pod fits wins, not merely the first generated."""
    # high 6, 4, 4 and low 13, G_T 8: (1, 1, 3) -> 6, 4, 12 (pairwise 8 <= 8) and
    # (1, 2, 2) -> 6, 8, 8 both give T_high = 22 / 3; 13 is 9 ms from the 4 of the
    # first, so only the second takes it (7 and 5 ms from 6 and 8): no idle,
    # T = (6 + 8 + 8 + 13) / 4 = 8.75.  (1, 3, 1) comes later.
    got = assert_unify_is_the_oracles([6.0, 4.0, 4.0, 13.0], [1, 1, 1, 0], 8.0, 0.3, 3)
    assert got.period_ms == pytest.approx(8.75)
    assert got.multiples.tolist() == [1, 2, 2, 1]
    # high 2, 2, 2 and low 12, G_T 4: (3, 4, 5) -> 6, 8, 10 is generated before
    # (4, 4, 4) -> 8, 8, 8 with the same T_high = 8, but 12 is 6 ms from 6;
    # T = (8 + 8 + 8 + 12) / 4 = 9
    got = assert_unify_is_the_oracles([2.0, 2.0, 2.0, 12.0], [1, 1, 1, 0], 4.0, 0.0, 6)
    assert got.period_ms == pytest.approx(9.0)
    assert got.multiples.tolist() == [4, 4, 4, 1]
