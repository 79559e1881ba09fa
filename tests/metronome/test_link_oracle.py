"""One link end to end against an oracle built from the spec's pieces, and the spec
cases the seeded instances of ``test_oracle.py`` do not reach (an independent
review, 2026-11-24): duty cycles 0 and 1, multiples up to 8, a capacity equal to the
sum of the rates, Eq. 3's midpoints, the G_T boundary, and the EarlyReturn of a pod
that adds no row ([decision], docs/traffic-circle.md)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import tdmcore
from tdmcore.framework import CycleState
from tdmcore.metronome.link import LinkPod, plan_link
from tdmcore.metronome.policies import MetronomeConfig, MetronomePolicy
from tdmcore.model import Cluster, ClusterState, Node, Pod, TrafficPattern
from tdmcore.snapshot import Snapshot
from tests.oracles import naive


def _same_psi(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or math.isclose(a, b, rel_tol=0.0, abs_tol=1e-9)


def test_unify_keeps_a_pair_its_own_tolerance_accepts() -> None:
    """Two products G_T + 0.75e-9 ms apart are within the rule's float allowance
    (1e-9 ms): 100 and 105.00000000075 unify, 100 and 105.0000000015 do not.  The
    anchor's window of multiples is rounded, so it is widened where the pairwise
    test itself may still pass (an earlier anchor bound dropped such a pair before
    the test, and the link was called incompatible)."""
    got = tdmcore.unify_periods([100.0, 105.00000000075], [1, 1])
    want_t, want_ok, _ = naive.unify_periods([100.0, 105.00000000075], [1, 1])
    assert got.compatible and want_ok
    assert math.isclose(got.period_ms, want_t, rel_tol=1e-12)
    got = tdmcore.unify_periods([100.0, 105.0000000015], [1, 1])
    want_t, want_ok, _ = naive.unify_periods([100.0, 105.0000000015], [1, 1])
    assert not got.compatible and not want_ok


def naive_midpoints(mul: int, duty: float, bins: int) -> np.ndarray:
    """Eq. 3 by hand: communication unit u spans [u N / mul, (u + d) N / mul)."""
    return np.array([(u + duty / 2) * bins / mul for u in range(mul)])


def test_comm_midpoints_match_eq3() -> None:
    for mul, duty, bins in itertools.product([1, 2, 3, 5, 8], [0.0, 0.3, 1.0], [8, 72, 100]):
        np.testing.assert_allclose(tdmcore.comm_midpoints(mul, duty, bins),
                                   naive_midpoints(mul, duty, bins), rtol=0, atol=1e-12)


def _edge_instance(seed: int):
    """Duty cycles 0 and 1, multiples up to 8, capacities equal to one rate or to the
    sum of the rates: none of tests/instances.py's families draws these."""
    rng = np.random.default_rng([seed, 777])
    bins = int(rng.choice([8, 9, 10, 12, 16, 24]))
    k = int(rng.integers(2, 5))
    muls = rng.choice([1, 2, 3, 4, 5, 7, 8], size=k)
    duty = rng.choice([0.0, 1.0, 0.25, 0.5, 1 / 3, 0.125], size=k)
    rate = rng.choice([5.0, 10.0, 12.5, 25.0], size=k)
    demand = np.atleast_2d(tdmcore.discretize(120.0 / muls, duty, rate, 120.0, bins))
    mids = [naive_midpoints(int(m), float(d), bins) for m, d in zip(muls, duty, strict=True)]
    limits = np.ceil(bins / muls).astype(np.int64)
    while np.prod(limits[1:].astype(float)) > 3000:
        i = int(rng.integers(1, k))
        limits[i] = max(1, limits[i] // 2)
    limits[0] = 1
    cap = float(rng.choice([10.0, 12.5, 25.0, float(rate.sum())]))
    return demand, cap, limits, mids


@pytest.mark.parametrize("mode", ["first", "optimal"])
def test_zero_and_full_duty_rows_match_brute_force(mode: str) -> None:
    for seed in range(400):
        demand, cap, limits, mids = _edge_instance(seed)
        got = tdmcore.search_rotations(demand, cap, limits, mode=mode, mids=mids)
        want = naive.search(demand, cap, limits, mode=mode, mids=mids)
        where = f"seed={seed} cap={cap} limits={limits.tolist()}"
        assert tuple(got.rotations.tolist()) == want.rotations, where
        assert got.perfect == want.perfect, where
        assert math.isclose(got.score, want.score, rel_tol=0, abs_tol=1e-9), where
        assert _same_psi(got.psi, want.psi), where


def test_plan_link_scores_equal_an_oracle_built_from_the_spec() -> None:
    """plan_link's composition (unify, stretch, truncate when incompatible, reference
    row first, search, cap) against the oracles' pieces, on realistic periods; the
    pipeline oracle (tests/oracles/naive_pipeline.py) calls plan_link, so this is
    the independent check of that path.  Priorities enter as strict ranks (higher
    priority first, then deploy order), the [decision] of docs/traffic-circle.md."""
    rng = np.random.default_rng(1)
    base_ms = (88.0, 112.0, 124.0, 150.0, 162.0, 212.0, 422.26)
    bins, cap, checked, kinds = 24, 25.0, 0, set()
    while checked < 300:
        k = int(rng.integers(2, 4))
        pods = [LinkPod(f"p{i}", float(rng.choice(base_ms)) * float(rng.uniform(0.97, 1.03)),
                        float(rng.uniform(0.05, 0.45)), float(rng.uniform(10, 25)),
                        int(rng.integers(0, 2)), f"j{i}") for i in range(k)]
        if sum(p.bandwidth_gbps for p in pods) <= cap:
            continue
        checked += 1
        order = sorted(range(k), key=lambda i: (-pods[i].priority, i))
        ranks = [k - order.index(i) for i in range(k)]
        periods = [p.period_ms for p in pods]
        t, ok, mult, idle = naive.unify_with_multiples(periods, ranks)
        kinds.add("idle" if any(idle) else ("common" if ok else "incompatible"))
        rows = []
        for p, m, extra in zip(pods, mult, idle, strict=True):
            duty = (p.duty_cycle * p.period_ms / (p.period_ms + extra) if ok
                    else min(1.0, p.duty_cycle * p.period_ms / t))
            rows.append(naive.discretize(t / m, duty, p.bandwidth_gbps, t, bins)[0])
        demand = np.array([rows[i] for i in order])
        limits = [1] + [math.ceil(bins / mult[i]) for i in order[1:]]
        want = naive.search(demand, cap, limits, mode="first").score
        if not ok:
            want = min(want, 100.0 - 1e-6)
        got = plan_link(pods, cap, bins=bins).result.score
        assert math.isclose(got, want, rel_tol=0, abs_tol=1e-9), [
            (p.period_ms, p.priority) for p in pods]
    assert kinds == {"idle", "common", "incompatible"}


def test_a_pod_that_adds_no_row_scores_100_even_on_a_contended_link() -> None:
    """[decision] a's pods sit on n0 and n1; b shares n0's link (20 + 20 > 25 Gbps,
    duties 0.5 + 0.6 never interleave: 94.17 searched).  a's third pod adds no row
    on n0 or n1, so both are EarlyReturn (100): a crosses both links wherever the
    pod goes.  On n2 it adds a row beside b and is searched."""
    a = TrafficPattern(100.0, 0.5, 20.0)
    b = TrafficPattern(100.0, 0.6, 20.0)

    def pod(name: str, job: str, pattern: TrafficPattern, prio: int, gang: int) -> Pod:
        return Pod(name, job, cpu=1, mem_gib=1, gpu=1, pattern=pattern, priority=prio,
                   gang_size=gang)

    state = ClusterState(Cluster([Node(f"n{i}", 64, 64, 8, 25.0) for i in range(3)]))
    state.place(pod("a-0", "a", a, 1, 3), 0)
    state.place(pod("a-1", "a", a, 1, 3), 1)
    state.place(pod("b-0", "b", b, 0, 2), 0)
    state.place(pod("b-1", "b", b, 0, 2), 2)
    policy = MetronomePolicy(MetronomeConfig(exact_scores=True))
    cycle = CycleState(pod("a-2", "a", a, 1, 3), Snapshot.of(state))
    policy.pre_filter(state, cycle)
    cycle.feasible = np.ones(3, dtype=bool)
    scores = policy.score(state, cycle)
    assert scores[0] == scores[1] == 100.0
    link = plan_link([LinkPod("b-1", 100.0, 0.6, 20.0, 0, "b"),
                      LinkPod("a-2", 100.0, 0.5, 20.0, 1, "a")], 25.0)
    assert scores[2] == pytest.approx(link.result.score) and scores[2] < 100.0
