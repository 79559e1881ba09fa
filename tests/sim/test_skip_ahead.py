"""Skipping ahead over jobs alone on their links is exact: the same run as sending
every iteration through the event engine (``skip_ahead=False``), to round-off.

Under a *monitoring* controller (``metronome``, ``metronome-no-phase3``) a stretch
is computed in closed form only when none of its reports could make the controller
act (every iteration, and every one already in the window, within the quiet
bounds), so the controller sees the same reports at the same times either way.
On the shipped trace, three jobs contend on shared links for hours, and round-off
of 1e-12 in event times grows (as between any two event orders): there the runs
agree on every job's mean time per iteration to 1 %.
"""

from __future__ import annotations

import numpy as np
import pytest

from tdmcore.model import Cluster, Node, TrafficPattern
from tdmcore.sim.cluster import SimCluster, SimJob, run_cluster
from tdmcore.sim.scenarios import metronome_snapshots, metronome_trace

POLICIES = ["default", "diktyo", "exclusive", "metronome-no-monitor", "ideal", "metronome",
            "metronome-no-phase3"]


def random_case(seed: int) -> tuple[SimCluster, list[SimJob]]:
    """A few small nodes: jobs arrive, queue, share links, leave, run alone again."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 5))
    nodes = [Node(f"n{i}", 32, 256, int(rng.integers(1, 3)), 25.0) for i in range(k)]
    bg = np.where(rng.random(k) < 0.3, 5.0, 0.0)
    lat = np.full((k, k), 0.05)
    np.fill_diagonal(lat, 0.0)
    sim = SimCluster(Cluster(nodes), bg, lat)
    jobs = []
    for j in range(int(rng.integers(2, 7))):
        period = float(rng.choice([100.0, 200.0, 150.0]))
        pattern = TrafficPattern(period, float(rng.uniform(0.1, 0.4)), 25.0)
        jobs.append(SimJob(f"j{j}", "m", pattern, int(rng.integers(1, 3)),
                           int(rng.integers(20, 400)), arrival_s=float(rng.uniform(0, 20)),
                           priority=int(rng.random() < 0.3)))
    return sim, jobs


def assert_same(a, b) -> None:
    assert a.jobs.keys() == b.jobs.keys()
    for name, ja in a.jobs.items():
        jb = b.jobs[name]
        assert (ja.end_ms is None) == (jb.end_ms is None), name
        if ja.end_ms is not None:
            assert ja.end_ms == pytest.approx(jb.end_ms, rel=1e-9, abs=1e-6), name
        assert (ja.start_ms is None) == (jb.start_ms is None), name
        if ja.start_ms is not None:
            assert ja.start_ms == pytest.approx(jb.start_ms, rel=1e-9, abs=1e-6), name
        assert ja.done == jb.done, name
        assert ja.busy_ms == pytest.approx(jb.busy_ms, rel=1e-9, abs=1e-6), name
        np.testing.assert_allclose(ja.durations_ms, jb.durations_ms, rtol=1e-9, atol=1e-6)
        assert ja.readjustments == jb.readjustments, name
        assert ja.nodes == jb.nodes, name
    np.testing.assert_allclose(a.link_sent_gbit, b.link_sent_gbit, rtol=1e-9, atol=1e-9)
    assert a.tct_ms == pytest.approx(b.tct_ms, rel=1e-9)
    assert a.pattern_updates == b.pattern_updates


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("sigma", [0.0, 0.01])
def test_random_cases_match_the_kernel(seed: int, sigma: float) -> None:
    sim, jobs = random_case(seed)
    policy = POLICIES[seed % len(POLICIES)]
    fast = run_cluster(sim, jobs, policy, seed=seed, noise_sigma=sigma)
    slow = run_cluster(sim, jobs, policy, seed=seed, noise_sigma=sigma, skip_ahead=False)
    assert_same(fast, slow)


@pytest.mark.parametrize("policy", POLICIES)
def test_shipped_scenarios_match_the_kernel(policy: str) -> None:
    s1 = metronome_snapshots(30.0)["S1"]
    assert_same(run_cluster(s1.sim, s1.jobs, policy, seed=1),
                run_cluster(s1.sim, s1.jobs, policy, seed=1, skip_ahead=False))
    trace = metronome_trace(8, hours=1.0)
    fast = run_cluster(trace.sim, trace.jobs, policy, seed=1)
    slow = run_cluster(trace.sim, trace.jobs, policy, seed=1, skip_ahead=False)
    for name, ja in fast.jobs.items():
        jb = slow.jobs[name]
        assert ja.done == jb.done and ja.nodes == jb.nodes, name
        if ja.done:
            assert ja.per_1000_s == pytest.approx(jb.per_1000_s, rel=0.01), name


def test_the_random_cases_do_go_through_the_skip_ahead_and_back() -> None:
    # The comparison above means something only if stretches start, end early and
    # restart: count the conversions over the random cases.
    from tdmcore.sim.run.skip_ahead import SkipAhead

    calls = {"to_engine": 0, "from_engine": 0}
    to_engine, from_engine = SkipAhead.to_engine, SkipAhead.from_engine

    def k(self, *a):  # type: ignore[no-untyped-def]
        calls["to_engine"] += 1
        return to_engine(self, *a)

    def s(self, *a):  # type: ignore[no-untyped-def]
        calls["from_engine"] += 1
        return from_engine(self, *a)

    SkipAhead.to_engine, SkipAhead.from_engine = k, s  # type: ignore[method-assign]
    try:
        for seed in range(60):
            sim, jobs = random_case(seed)
            run_cluster(sim, jobs, POLICIES[seed % len(POLICIES)], seed=seed)
    finally:
        SkipAhead.to_engine, SkipAhead.from_engine = to_engine, from_engine  # type: ignore[method-assign]
    assert calls["to_engine"] >= 5 and calls["from_engine"] >= 5, calls


def test_under_the_monitor_stretches_are_taken_too() -> None:
    # The monitored policies are in the comparison above: they must really skip.
    from tdmcore.sim.run.skip_ahead import SkipAhead

    calls = {"metronome": 0, "metronome-no-phase3": 0}
    begin = SkipAhead.begin
    policy = ""

    def b(self, *a):  # type: ignore[no-untyped-def]
        ok = begin(self, *a)
        if ok and self.controller is not None:
            calls[policy] += 1
        return ok

    SkipAhead.begin = b  # type: ignore[method-assign]
    try:
        for seed in range(60):
            policy = POLICIES[seed % len(POLICIES)]
            if policy in calls:
                sim, jobs = random_case(seed)
                run_cluster(sim, jobs, policy, seed=seed)
    finally:
        SkipAhead.begin = begin  # type: ignore[method-assign]
    assert min(calls.values()) >= 5, calls


@pytest.mark.parametrize("seed", [6, 15])
def test_a_reserve_that_replans_a_skipped_ahead_jobs_link(seed: int) -> None:
    """A job arrives on the link of a job that is skipping ahead and the controller
    re-plans that link (other injected idle, so other thresholds): the skipped
    iterations reach the controller under the plan they ran under, before the
    re-plan.  These day-long traces raised "these reports are not quiet" when the
    stretch was handed over after the re-plan."""
    scenario = metronome_trace(seed, 24.0, 0.85)
    fast = run_cluster(scenario.sim, scenario.jobs, "metronome", seed=seed)
    slow = run_cluster(scenario.sim, scenario.jobs, "metronome", seed=seed,
                       skip_ahead=False)
    assert fast.jobs.keys() == slow.jobs.keys()
    for name, job in fast.jobs.items():
        assert job.jct_ms is not None and slow.jobs[name].jct_ms is not None, name
        assert job.jct_ms == pytest.approx(slow.jobs[name].jct_ms, rel=1e-9), name


def _three_nodes() -> SimCluster:
    nodes = [Node(f"n{i}", 32, 256, 2, 25.0) for i in range(3)]
    lat = np.full((3, 3), 1.0)
    np.fill_diagonal(lat, 0.0)
    return SimCluster(Cluster(nodes), np.zeros(3), lat)


@pytest.mark.parametrize("sigma", [0.0, 0.01])
def test_a_job_moved_before_its_first_iteration_starts_as_in_the_engine(sigma) -> None:
    # Both arrive at 0 and share n0; the low one is placed first (alone: skipped
    # ahead) and must be shifted when the high one arrives at the same instant.
    # It had not begun: the engine moves its start; the closed form used to rejoin
    # it mid-compute, so its first comm phase hit the high job's (112.3 ms).
    pattern = TrafficPattern(100.0, 0.2, 20.0)
    jobs = [SimJob("low", "m", pattern, 2, 20, priority=0, spread=True),
            SimJob("high", "m", pattern, 2, 20, priority=1, spread=True)]
    sim = _three_nodes()
    fast = run_cluster(sim, jobs, "metronome", seed=0, noise_sigma=sigma)
    slow = run_cluster(sim, jobs, "metronome", seed=0, noise_sigma=sigma, skip_ahead=False)
    assert_same(fast, slow)
    assert fast.jobs["low"].pause_ms == pytest.approx(slow.jobs["low"].pause_ms)


@pytest.mark.parametrize("pattern", [TrafficPattern(100.0, 0.0, 10.0),
                                     TrafficPattern(100.0, 0.5, 0.0)])
def test_a_spanning_job_with_nothing_to_send_pays_its_latency_tail_either_way(pattern) -> None:
    # 2 workers on two nodes 1 ms apart: 2 (n - 1) x 1 ms of tail per iteration,
    # in the engine as in the closed form (the engine used to drop it)
    nodes = [Node(f"n{i}", 32, 256, 1, 10.0) for i in range(2)]
    sim = SimCluster(Cluster(nodes), np.zeros(2), np.array([[0.0, 1.0], [1.0, 0.0]]))
    jobs = [SimJob("a", "m", pattern, 2, 10)]
    fast = run_cluster(sim, jobs, "default", noise_sigma=0.0)
    slow = run_cluster(sim, jobs, "default", noise_sigma=0.0, skip_ahead=False)
    assert_same(fast, slow)
    compute = pattern.period_ms * (1 - pattern.duty_cycle)
    assert slow.jobs["a"].end_ms == pytest.approx(10 * (compute + 2.0))


def test_a_finish_and_an_arrival_at_one_instant_are_ordered_the_same_either_way() -> None:
    # A ends at exactly 1 s, when C arrives; B (older) waits for A's GPUs.  The
    # engine runs its events at an instant after the placements made at it; a
    # closed-form end used to come first, so C or B got the GPUs by skip_ahead.
    nodes = [Node(f"n{i}", 32, 256, 1, 10.0) for i in range(3)]
    sim = SimCluster(Cluster(nodes), np.zeros(3), np.zeros((3, 3)))
    jobs = [SimJob("A", "m", TrafficPattern(100.0, 0.5, 10.0), 2, 10),
            SimJob("B", "m", None, 3, 5, arrival_s=0.5),
            SimJob("C", "m", None, 1, 5, arrival_s=1.0)]
    fast = run_cluster(sim, jobs, "default", noise_sigma=0.0)
    slow = run_cluster(sim, jobs, "default", noise_sigma=0.0, skip_ahead=False)
    assert_same(fast, slow)
    assert fast.acceptance == slow.acceptance
