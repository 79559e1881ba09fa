"""Cycles planned as one (spec §6, revised 2026-11-28): the joint search against its
brute force, the blocks of the affinity graph against a cycle enumeration, and the
common plan of a block worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tdmcore._kernels.joint_search import joint_first_kernel
from tdmcore.metronome.affinity import cyclic_blocks
from tdmcore.metronome.joint import common_rotations, lead_first, with_rotations
from tdmcore.metronome.link import LinkPod, plan_link
from tests.oracles import naive
from tests.oracles.naive_pipeline import _blocks_of


def _rows(rng: np.random.Generator, k: int, bins: int) -> tuple[list[np.ndarray], np.ndarray]:
    """k rows of comm units (multiples 1-3, duties 0.05-0.5) and their limits."""
    muls = rng.integers(1, 4, size=k)
    rows = []
    for m in muls:
        row = np.zeros(bins)
        width = max(1, int(float(rng.uniform(0.05, 0.5)) * bins / m))
        for u in range(m):
            start = int(u * bins / m)
            row[start:start + width] = 1.0
        rows.append(row)
    return rows, np.array([math.ceil(bins / m) for m in muls], dtype=np.int64)


@pytest.mark.parametrize("seed", range(10))
def test_joint_search_is_the_brute_force(seed: int) -> None:
    """3,000 random classes of 1-3 links and 1-4 rows: the same vector as the
    enumeration (middle of the first jointly perfect interval), or none for both;
    rows whose bandwidth differs per link and rows absent from a link (0) included."""
    rng = np.random.default_rng(seed)
    found = {True: 0, False: 0}
    for _ in range(300):
        links, k = int(rng.integers(1, 4)), int(rng.integers(1, 5))
        bins = int(rng.choice([8, 12, 16, 24]))
        base, limits = _rows(rng, k, bins)
        demands, caps = [], []
        for _ in range(links):
            rate = rng.uniform(5, 20, size=k) if rng.random() < 0.5 else np.full(k, 10.0)
            rate[rng.random(k) < 0.15] = 0.0  # a job this link does not carry
            demands.append(np.array([base[i] * rate[i] for i in range(k)]))
            caps.append(float(rng.choice([15.0, 20.0, 25.0, 30.0])))
        got = np.zeros(k, dtype=np.int64)
        ok, evaluated = joint_first_kernel(np.ascontiguousarray(np.stack(demands)),
                                           np.array(caps), limits, 1e-9, got)
        want = naive.joint_search(demands, caps, limits)
        assert ok == (want is not None), (seed, demands, caps, limits)
        if ok:
            assert tuple(got.tolist()) == want
        assert 0 <= evaluated <= max(1, int(np.prod(limits[1:])))
        found[ok] += 1
    assert min(found.values()) >= 30, found


@pytest.mark.parametrize("seed", range(5))
def test_blocks_are_the_cycles_grouped(seed: int) -> None:
    """Tarjan's blocks with a cycle equal the naive pipeline's grouping of every
    simple cycle (cycles sharing an edge in one group), on 200 random bipartite
    graphs; ``through`` keeps the blocks of one link."""
    rng = np.random.default_rng(seed)
    for _ in range(200):
        jobs, links = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        edges = sorted({(int(rng.integers(jobs)), int(rng.integers(links)))
                        for _ in range(int(rng.integers(0, 10)))})
        adj: dict = {}
        for j, n in edges:
            adj.setdefault(("job", j), set()).add(("link", n))
            adj.setdefault(("link", n), set()).add(("job", j))
        want = sorted((tuple(sorted(j)), tuple(sorted(n))) for j, n in _blocks_of(adj))
        got = sorted((b.jobs, b.links) for b in cyclic_blocks(edges))
        assert got == want, edges
        for n in range(links):
            assert sorted((b.jobs, b.links) for b in cyclic_blocks(edges, through=n)) == \
                [b for b in want if n in b[1]]


def _plan(pods: list[tuple[str, float, float]], cap: float = 25.0):
    return plan_link([LinkPod(f"{job}@{cap}", 100.0, duty, rate, 0, job)
                      for job, duty, rate in pods], cap, bins=72)


def test_the_tightest_link_leads_and_its_plan_is_carried() -> None:
    # a (duty 0.2) and b (0.2) on a 25 and a 20 Gbps link, 15 Gbps each: both links
    # need them apart, the 20 Gbps one leads; its own plan (b at the middle of its
    # perfect interval) is perfect on the other, so it is the common one.
    loose, tight = _plan([("a", 0.2, 15.0), ("b", 0.2, 15.0)]), \
        _plan([("a", 0.2, 15.0), ("b", 0.2, 15.0)], 20.0)
    plans = {0: loose, 1: tight}
    order = lead_first(plans, [0, 1])
    assert order == [1, 0]
    rotations = common_rotations([plans[n] for n in order], ["a", "b"], ["a", "b"])
    assert rotations == tight.job_rotations
    assert with_rotations(tight, rotations) is tight
    joint = with_rotations(loose, rotations)
    assert joint.result.perfect and joint.job_rotations == tight.job_rotations


def test_a_job_hanging_off_one_link_rides_along() -> None:
    # The cycle runs through a and b; c hangs off the first link only.  Three arcs
    # of 14.4 bins fit apart there, and the same a and b rotations suit the second.
    three = _plan([("a", 0.2, 15.0), ("b", 0.2, 15.0), ("c", 0.2, 15.0)])
    two = _plan([("a", 0.2, 15.0), ("b", 0.2, 15.0)])
    rotations = common_rotations([three, two], ["a", "b", "c"], ["a", "b"])
    assert rotations is not None and rotations["a"] == 0
    assert with_rotations(two, rotations).result.perfect
    # a link lacking one of the cycle's jobs: the paper's loop
    assert common_rotations([three, two], ["a", "b", "c"], ["a", "b", "c"]) is None


def test_links_that_unify_differently_have_no_common_plan() -> None:
    # b has 100 ms beside a on one link, 93 ms on the other: the second link gives
    # b 7 ms of idle (a 100 ms base period), the first none; one offset cannot hold.
    first = _plan([("a", 0.2, 15.0), ("b", 0.2, 15.0)])
    second = plan_link([LinkPod("a2", 100.0, 0.2, 15.0, 1, "a"),
                        LinkPod("b2", 93.0, 0.2, 15.0, 0, "b")], 25.0)
    assert second.base.idle_ms.tolist() == pytest.approx([0.0, 7.0])
    assert common_rotations([first, second], ["a", "b"], ["a", "b"]) is None
