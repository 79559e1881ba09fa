"""The papers' qualitative results, where the simulator reproduces them.

Each test states the figures it relies on (seed 0, README "Simulator"); where a
paper's claim is *not* reproduced by the data-derived patterns the README says so
and no test pretends otherwise.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pytest

from tdmcore.metronome.controller import ControllerConfig
from tdmcore.metronome.policies import make_policy
from tdmcore.oasis.admission import OasisPolicy
from tdmcore.sim.cluster import RunResult, run_cluster
from tdmcore.sim.oasis_setting import oasis_setting
from tdmcore.sim.oasis_study import compare_admission
from tdmcore.sim.scenarios import metronome_snapshots

SNAPSHOTS = metronome_snapshots(600.0)


@cache
def run(snapshot: str, policy: str) -> RunResult:
    sc = SNAPSHOTS[snapshot]
    return run_cluster(sc.sim, sc.jobs, policy, seed=0)


def per_1000(r: RunResult, high: bool) -> float:
    """Mean time per 1,000 iterations of the high- (or low-) priority jobs (s)."""
    values = [j.per_1000_s for j in r.jobs.values() if (j.priority > 0) == high]
    return sum(values) / len(values)


def ratio(snapshot: str, policy: str, other: str, high: bool = True) -> float:
    return per_1000(run(snapshot, policy), high) / per_1000(run(snapshot, other), high)


# Seed 0, 600 s, contention efficiency 0.99 (docs/fidelity.md, "What holds").
# Metronome's high-priority job against default / diktyo / ideal, time per 1,000
# iterations: S1 424.4 vs 478.9 / 478.9 / 422.0 s; S2 102.98 vs 102.96 / 102.96 /
# 98.67; S3 106.99 vs 107.24 / 107.24 / 102.75; S4 544.9 vs 618.3 / 584.4 / 533.1;
# S5 435.9 vs 494.3 / 468.7 / 429.6.
@pytest.mark.parametrize("snapshot", ["S1", "S3", "S4", "S5"])
def test_metronome_high_priority_job_no_slower_than_default_or_diktyo(snapshot: str) -> None:
    # Paper Fig. 8: Metronome's high-priority job is the fastest of the three.
    assert ratio(snapshot, "metronome", "default") <= 1.0
    assert ratio(snapshot, "metronome", "diktyo") <= 1.0


def test_s2_metronome_is_the_baselines_in_the_model() -> None:
    # NOT the paper's S2 (Metronome 19.35 % faster than default): the two jobs'
    # periods (98.68 / 91.94 ms) differ by 6.74 ms, so the low job's comm phase
    # sweeps through the high one's every ~14 iterations in episodes of ~5, too
    # short for the monitor (more than 5 of 10 iterations slow by 10 %) to act: no
    # readjustment, the same contention as under default (docs/fidelity.md).
    met = run("S2", "metronome")
    assert met.readjustments == 0
    for other in ("default", "diktyo"):
        for high in (True, False):
            assert abs(ratio("S2", "metronome", other, high) - 1.0) <= 0.001


def test_s2_at_the_paper_s_own_contention_the_monitor_acts_and_still_ties_default() -> None:
    # Grant S2 the contention its paper baseline shows: eta = 0.30, the S2-only fit
    # (docs/fidelity.md, "The calibration").  Default's high job then takes the
    # paper's implied 122.36 s per 1,000 iterations (98.68 / (1 - 0.1935)) to 0.24 %,
    # and contended low iterations now exceed the trigger, so the monitor pauses
    # (80 times, seed 0) -- yet the high job stays where default has it (+0.2 %):
    # a pause comes after 6 slow iterations of 10, about one collision episode, and
    # the 6.74 ms drift brings the low job back within about 4 iterations.
    sc = SNAPSHOTS["S2"]
    by = {p: run_cluster(sc.sim, sc.jobs, p, seed=0, contention_efficiency=0.30)
          for p in ("default", "metronome")}
    assert abs(per_1000(by["default"], True) / (98.68 / (1 - 0.1935)) - 1.0) <= 0.01
    assert by["metronome"].readjustments >= 20
    assert abs(per_1000(by["metronome"], True) / per_1000(by["default"], True) - 1.0) <= 0.01


@pytest.mark.parametrize(("window", "o_t", "a_t"), [
    (10, 3, 1.05), (10, 3, 1.10), (10, 3, 1.15), (10, 5, 1.05), (10, 5, 1.15),
    (3, 1, 1.02)])
def test_no_monitor_threshold_brings_back_the_papers_s2_benefit(
        window: int, o_t: int, a_t: float) -> None:
    # The paper's Fig. 14 range (O_T 3 or 5, A_T 105-115 %) and a hair trigger far
    # outside it: S2's high job is never more than 1 % faster than under default
    # (seed 0: +0.02 to +0.56 % in the range, -0.57 % with the hair trigger, which
    # pauses 1,240 times), against the paper's 19.35 % (docs/fidelity.md, "Limits").
    sc = SNAPSHOTS["S2"]
    policy = make_policy("metronome")
    r = run_cluster(sc.sim, sc.jobs, policy, seed=0, controller=dataclasses.replace(
        ControllerConfig.for_policy(policy.config), window=window, o_t=o_t, a_t=a_t))
    assert per_1000(r, True) / per_1000(run("S2", "default"), True) >= 0.99


@pytest.mark.parametrize("snapshot", ["S2", "S3"])
def test_a_longer_monitor_window_does_not_hold_drifting_jobs_apart(snapshot: str) -> None:
    # The paper's "fixed time window of 10" has lost its unit; read as seconds
    # (50-100 iterations here) the monitor does act in S2 and S3 (304 and 86
    # pauses), but each pause puts the low job back half a period from the high
    # one, from where the drift brings it back into the high one's comm phase
    # within about 4 iterations: the high job gets slower, not faster (S2 104.20
    # against 102.98 s, S3 107.44 against 106.95 s; docs/fidelity.md, "Limits").
    sc = SNAPSHOTS[snapshot]
    policy = make_policy("metronome")
    wide = run_cluster(sc.sim, sc.jobs, policy, seed=0, controller=dataclasses.replace(
        ControllerConfig.for_policy(policy.config), window=100))
    assert wide.readjustments > 10 * max(run(snapshot, "metronome").readjustments, 1)
    assert per_1000(wide, True) > per_1000(run(snapshot, "metronome"), True)


@pytest.mark.parametrize("snapshot", ["S2", "S3", "S5"])
def test_the_high_jobs_own_window_never_triggers_where_the_monitor_is_idle(
        snapshot: str) -> None:
    # The paper (§III-C): "if a pod's iteration time exceeds the baseline ... by a
    # factor of A_T for more than O_T occurrences ... pause ... low priority pods".
    # The controller watches each pod's own window and pauses it if it is of low
    # priority.  Read instead as "the high-priority pod's window pauses the low ones
    # beside it", nothing would change in S2, S3 and S5: under Metronome and its
    # compact ablation the high job never has more than O_T of any W consecutive
    # iterations above A_T x its period (at most 4, 5 and 0; docs/fidelity.md,
    # "Limits").  In S1 it would (the compact ablation has 57 such windows).
    cfg = ControllerConfig()

    def most_slow_in_a_window(snap: str, policy: str) -> int:
        (high,) = [j for j in run(snap, policy).jobs.values() if j.priority > 0]
        job = next(j for j in SNAPSHOTS[snap].jobs if j.name == high.name)
        assert high.durations_ms.size == high.done > 1000  # every iteration kept
        slow = (high.durations_ms > cfg.a_t * job.period_ms).astype(int)
        return int(np.convolve(slow, np.ones(cfg.window, dtype=int), "valid").max())

    assert run(snapshot, "metronome").readjustments <= 6  # S2 0, S3 6, S5 3: hardly acts
    for policy in ("metronome", "metronome-no-phase3"):
        assert most_slow_in_a_window(snapshot, policy) <= cfg.o_t
    assert most_slow_in_a_window("S1", "metronome-no-phase3") > cfg.o_t


@pytest.mark.parametrize("snapshot, bound", [
    ("S1", 1.02), ("S5", 1.02),
    # not within the paper's 2 % (docs/fidelity.md): S4 +2.2 % (its low job's second
    # worker on the congested link runs slower, so the two drift), S3 +4.1 % (the
    # 5 ms gap G_T leaves drifts the low job into the high one's comm phase and
    # its iterations stay under the 110 % trigger), S2 +4.4 % (above)
    ("S4", 1.03), ("S3", 1.05), ("S2", 1.05),
])
def test_metronome_high_priority_job_against_ideal(snapshot: str, bound: float) -> None:
    assert 1.0 <= ratio(snapshot, "metronome", "ideal") <= bound


def test_ablations_cost_time_where_the_paper_says() -> None:
    # Table VII / Fig. 13 (S1): compact rotations (no 3rd stage) readjust far more
    # often and both priorities slow down; without monitoring nothing is readjusted
    # and both slow down more.  S1: readjustments 10 vs 1; high 428.1 / 439.0 vs
    # 424.4 s.
    full = run("S1", "metronome")
    compact = run("S1", "metronome-no-phase3")
    blind = run("S1", "metronome-no-monitor")
    assert compact.readjustments > 3 * full.readjustments
    assert blind.readjustments == 0
    for high in (True, False):
        assert per_1000(compact, high) > per_1000(full, high)
        assert per_1000(blind, high) > per_1000(full, high)


@pytest.mark.parametrize("snapshot", ["S2", "S3", "S4", "S5"])
def test_ablations_change_little_outside_s1(snapshot: str) -> None:
    # The paper: S4 almost unchanged by either ablation (as here).  It sees both
    # ablations cost time in S2, S3 and S5 too; here the monitor hardly acts there
    # (S2 never, S3 4, S5 3 readjustments), so neither ablation changes the
    # high-priority job by more than 0.5 % (docs/fidelity.md).
    for ablation in ("metronome-no-phase3", "metronome-no-monitor"):
        assert abs(ratio(snapshot, ablation, "metronome") - 1.0) <= 0.005


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
    # TCT (h), seed 0-3: 5.237 / 5.474, 5.196 / 5.279, 5.028 / 5.028, 4.712 / 5.710.
    from tdmcore.sim.scenarios import metronome_trace

    sc = metronome_trace(seed)
    ours = run_cluster(sc.sim, sc.jobs, "metronome", seed=seed).tct_ms
    assert ours <= run_cluster(sc.sim, sc.jobs, "default", seed=seed).tct_ms
