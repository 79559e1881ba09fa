"""The papers' qualitative results, where the simulator reproduces them.

Each test states the figures it relies on (seed 0, README "Simulator"); where a
paper's claim is *not* reproduced by the data-derived patterns the README says so
and no test pretends otherwise.
"""

from __future__ import annotations

import pytest

from tdmcore.oasis.admission import OasisPolicy
from tdmcore.sim.cluster import RunResult, run_cluster
from tdmcore.sim.oasis_setting import oasis_setting
from tdmcore.sim.oasis_study import compare_admission
from tdmcore.sim.scenarios import metronome_snapshots

SNAPSHOTS = metronome_snapshots(600.0)


def run(snapshot: str, policy: str) -> RunResult:
    sc = SNAPSHOTS[snapshot]
    return run_cluster(sc.sim, sc.jobs, policy, seed=0)


def per_1000(r: RunResult, high: bool) -> float:
    """Mean time per 1,000 iterations of the high- (or low-) priority jobs (s)."""
    values = [j.per_1000_s for j in r.jobs.values() if (j.priority > 0) == high]
    return sum(values) / len(values)


@pytest.mark.parametrize("snapshot", ["S1", "S2", "S3", "S4", "S5"])
def test_metronome_high_priority_job_no_slower_than_default_or_diktyo(snapshot: str) -> None:
    # Paper Fig. 8: Metronome's high-priority job is the fastest of the three
    # schedulers in every snapshot.  Seed 0, 600 s (docs/fidelity.md): S1 424.3 vs
    # 479.0 / 479.0 s, S4 544.1 vs 617.6 / 584.3, S5 515.4 vs 780.1 / 580.8; S2 and S3
    # tie (their Table VI periods do not unify, so Metronome places as the others).
    ours = per_1000(run(snapshot, "metronome"), high=True)
    assert ours <= per_1000(run(snapshot, "default"), high=True)
    assert ours <= per_1000(run(snapshot, "diktyo"), high=True)


def test_metronome_high_priority_job_within_2_percent_of_ideal_on_s1() -> None:
    # S1 +0.5 %.  S2 +4.3 %, S3 +10.3 %, S4 +2.1 %, S5 +19.9 % are not within the
    # paper's 2 % (docs/fidelity.md, "Limits").
    ratio = per_1000(run("S1", "metronome"), True) / per_1000(run("S1", "ideal"), True)
    assert 1.0 <= ratio <= 1.02


def test_ablations_cost_time_where_the_paper_says() -> None:
    # Table VII / Fig. 13 (S1): compact rotations (no 3rd stage) readjust far more
    # often and both priorities slow down; without monitoring nothing is readjusted
    # and both slow down more.  S1: readjustments 11 vs 1; high 429.0 / 438.7 vs
    # 424.3 s.
    full = run("S1", "metronome")
    compact = run("S1", "metronome-no-phase3")
    blind = run("S1", "metronome-no-monitor")
    assert compact.readjustments > 3 * full.readjustments
    assert blind.readjustments == 0
    for high in (True, False):
        assert per_1000(compact, high) > per_1000(full, high)
        assert per_1000(blind, high) > per_1000(full, high)


def test_oasis_with_a_quantile_lower_bound_beats_fifo_and_drf() -> None:
    # OASiS's utility >= the baselines' (paper §V-B) holds with L from the 0.9
    # quantile (README "OASiS against its baselines"), not with the spec's L.
    setting = oasis_setting(100, 20, 20, 200, 0)
    runs = compare_admission(setting, [OasisPolicy(l_quantile=0.9, name="oasis-q"),
                                       "fifo", "drf"])
    utility = {name: r.total_utility for name, r in runs.items()}
    assert utility["oasis-q"] >= max(utility["fifo"], utility["drf"])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_metronome_total_completion_time_no_longer_than_default_on_the_trace(
        seed: int) -> None:
    # Paper Fig. 10: Metronome completes the trace before the default scheduler.
    # TCT (h), seed 0-3: 5.237 / 5.474, 5.196 / 5.916, 5.028 / 5.028, 4.712 / 6.203.
    from tdmcore.sim.scenarios import metronome_trace

    sc = metronome_trace(seed)
    ours = run_cluster(sc.sim, sc.jobs, "metronome", seed=seed).tct_ms
    assert ours <= run_cluster(sc.sim, sc.jobs, "default", seed=seed).tct_ms
