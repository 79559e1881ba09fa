"""The papers' qualitative results, where the simulator reproduces them.

Each test states the figures it relies on (seed 0, README "Simulator"); where a
paper's claim is *not* reproduced by the data-derived patterns the README says so
and no test pretends otherwise.
"""

from __future__ import annotations

import pytest

from tdmcore.admission import OasisPolicy
from tdmcore.sim.cluster import RunResult, run_cluster
from tdmcore.sim.oasis_setting import oasis_setting
from tdmcore.sim.oasis_study import compare_admission
from tdmcore.sim.scenarios import metronome_snapshots

SNAPSHOTS = metronome_snapshots(600.0)


def run(snapshot: str, policy: str) -> RunResult:
    sc = SNAPSHOTS[snapshot]
    return run_cluster(sc.sim, sc.jobs, policy, seed=0)


def high_per_1000(r: RunResult) -> float:
    (job,) = [j for j in r.jobs.values() if j.priority > 0]
    return job.per_1000_s


@pytest.mark.parametrize("snapshot", ["S0", "S1", "S4"])
def test_metronome_high_priority_job_within_a_few_percent_of_ideal(snapshot: str) -> None:
    # S0 +1.5 %, S1 +1.4 %, S4 +2.1 % (the paper: within 2 %).  Not in S2, S3, S5,
    # where the derived patterns cannot share a link without contention.
    ratio = high_per_1000(run(snapshot, "metronome")) / high_per_1000(run(snapshot, "ideal"))
    assert 1.0 <= ratio < 1.04


@pytest.mark.parametrize("snapshot", ["S1", "S4", "S5"])
def test_metronome_shortens_the_mean_jct_against_default(snapshot: str) -> None:
    # Mean JCT: S1 628 vs 671 s, S4 651 vs 669 s, S5 819 vs 1,143 s.
    assert run(snapshot, "metronome").mean_jct_s() < run(snapshot, "default").mean_jct_s()


def test_metronome_is_never_much_behind_default() -> None:
    # S0, S2, S3: within 0.3 % (ties: the same placements, nothing to interleave).
    for snapshot in SNAPSHOTS:
        ours = run(snapshot, "metronome").mean_jct_s()
        assert ours <= 1.01 * run(snapshot, "default").mean_jct_s(), snapshot


def test_metronome_ahead_of_diktyo_on_s1() -> None:
    # S1 (no congested node: Diktyo places like default): 628 vs 671 s.  On S4 and S5
    # Diktyo is ahead: the loop filter sends Metronome's second job to the congested
    # node (README).
    assert run("S1", "metronome").mean_jct_s() < run("S1", "diktyo").mean_jct_s()


def test_metronome_raises_link_utilisation_against_default_on_s5() -> None:
    # Gamma 0.280 vs 0.215.  On S1 it is lower (0.181 vs 0.267): Metronome puts one
    # HPO job on a single node, whose traffic then never reaches a host link.
    assert run("S5", "metronome").gamma > run("S5", "default").gamma


def test_oasis_with_a_quantile_lower_bound_beats_fifo_and_drf() -> None:
    # OASiS's utility >= the baselines' (paper §V-B) holds with L from the 0.9
    # quantile (README "OASiS against its baselines"), not with the spec's L.
    setting = oasis_setting(100, 20, 20, 200, 0)
    runs = compare_admission(setting, [OasisPolicy(l_quantile=0.9, name="oasis-q"),
                                       "fifo", "drf"])
    utility = {name: r.total_utility for name, r in runs.items()}
    assert utility["oasis-q"] >= max(utility["fifo"], utility["drf"])
