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


SEEDS = [0, 1, 2, 3]


@cache
def run(snapshot: str, policy: str, seed: int = 0) -> RunResult:
    sc = SNAPSHOTS[snapshot]
    return run_cluster(sc.sim, sc.jobs, policy, seed=seed)


def per_1000(r: RunResult, high: bool) -> float:
    """Mean time per 1,000 iterations of the high- (or low-) priority jobs (s)."""
    values = [j.per_1000_s for j in r.jobs.values() if (j.priority > 0) == high]
    return sum(values) / len(values)


def ratio(snapshot: str, policy: str, other: str, high: bool = True, seed: int = 0) -> float:
    return per_1000(run(snapshot, policy, seed), high) / per_1000(run(snapshot, other, seed), high)


# Contention efficiency 0.99, 600 s windows (docs/fidelity.md, "What holds").  The
# rules are the spec's revised 2026-11-28 ones: G_T pairwise and idle that closes
# the gap (§4), the loop filter refusing only cycles whose offsets cannot agree
# (§6), pattern updates measured without contention (§7).  Metronome's high job,
# time per 1,000 iterations against ideal / default, seeds 0-3: S1 +1.46 / +1.50 /
# +1.27 / +1.98 % and -10.6 / -10.3 / -9.6 / -8.8 %; S2 +0.43 / +0.20 / +0.86 /
# +0.36 % and -3.76 / -3.99 / -3.35 / -3.81 %; S3 +3.05 / +2.22 / +3.16 / +1.79 %
# and -1.3 / -2.1 / -1.1 / -2.5 %; S4 +1.34 / +0.02 / +0.99 / +0.02 % and -12.6 /
# -11.0 / -12.2 / -8.8 %; S5 +1.82 / +1.78 / +1.33 / +1.78 % and -11.5 / -11.6 /
# -12.0 / -11.6 %.
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("snapshot", ["S1", "S2", "S3", "S4", "S5"])
def test_metronome_high_priority_job_faster_than_default_and_diktyo(
        snapshot: str, seed: int) -> None:
    # Paper Fig. 8: Metronome's high-priority job is the fastest of the three.
    assert ratio(snapshot, "metronome", "default", seed=seed) < 1.0
    assert ratio(snapshot, "metronome", "diktyo", seed=seed) < 1.0


@pytest.mark.parametrize("seed", SEEDS)
def test_s2_high_job_is_3_pct_faster_than_default_and_within_2_pct_of_ideal(
        seed: int) -> None:
    # Paper §IV-B1: 19.35 % faster than default, within 2 % of ideal.  The low job
    # (91.94 ms) gets the 6.74 ms of idle that closes its gap to the high one's
    # 98.68 ms (spec §4, revised), so the two no longer drift: the high job is
    # 3.35-3.99 % faster than default and 0.20-0.86 % from ideal.  The magnitude
    # is the contention model's (test_s2_at_the_paper_s_own_contention_...).
    assert ratio("S2", "metronome", "default", seed=seed) <= 0.97
    assert ratio("S2", "metronome", "ideal", seed=seed) <= 1.02
    # the low job pays its idle: 2.6-3.2 % slower than under default
    assert 1.0 < ratio("S2", "metronome", "default", high=False, seed=seed) <= 1.04


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("snapshot, bound", [
    ("S1", 1.02), ("S2", 1.02), ("S4", 1.02), ("S5", 1.02),
    # not within the paper's 2 % (docs/fidelity.md, "What holds"): S3 +1.8 to +3.2 %,
    # the latency term's 0.1 ms per iteration drifts the 2:1 pair apart
    # (test_s3_what_is_left_is_a_drift_below_the_monitor_s_trigger)
    ("S3", 1.035),
])
def test_metronome_high_priority_job_against_ideal(snapshot: str, bound: float,
                                                   seed: int) -> None:
    assert 1.0 <= ratio(snapshot, "metronome", "ideal", seed=seed) <= bound


@pytest.mark.parametrize("seed", SEEDS)
def test_s1_every_job_starts_as_it_arrives(seed: int) -> None:
    # Paper §IV-B1: S1 is fully accepted.  Its third job's gang closes a cycle of
    # two A30 links that carry the same jobs, with one perfect plan for both
    # (spec §6, revised): kept, so no job waits (it waited 601 s when every cycle
    # was refused).
    r = run("S1", "metronome", seed)
    assert len(r.jobs) == 3
    assert all(j.wait_ms == 0.0 for j in r.jobs.values())


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("snapshot", ["S4", "S5"])
def test_the_low_priority_job_stays_off_the_congested_node(snapshot: str, seed: int) -> None:
    # Paper §IV-B1: Metronome avoids the congested node (a30-1).  With every cycle
    # refused the low job's second worker was sent there.
    sc = SNAPSHOTS[snapshot]
    for job in run(snapshot, "metronome", seed).jobs.values():
        assert "a30-1" not in job.nodes, (job.name, job.nodes)
    assert sc.sim.background_gbps[0] > 0.0  # a30-1 is the congested one


def test_s3_what_is_left_is_a_drift_below_the_monitor_s_trigger() -> None:
    # Without compute noise the gap to ideal stays (+4.5 %): unification makes the
    # pair exactly 2:1 (102.76 x 2 = 186.84 + 18.68 ms of idle), but each job pays
    # the ring's latency term, 0.1 ms per iteration, once per iteration: the high
    # job twice per 205.52 ms, the low job once, so the low job's comm phase drifts
    # 0.1 ms per iteration into the high one's.  Its contended iterations grow by
    # about that much each and pass the 110 % trigger only after ~200 of them, so
    # most of them are slow but few trip the monitor (docs/fidelity.md).
    sc = SNAPSHOTS["S3"]
    r = run_cluster(sc.sim, sc.jobs, "metronome", seed=0, noise_sigma=0.0)
    (high,) = [j for j in r.jobs.values() if j.priority > 0]
    (low,) = [j for j in r.jobs.values() if j.priority == 0]
    assert np.median(high.durations_ms[:400]) == pytest.approx(102.86, abs=0.005)
    assert np.median(low.durations_ms[:200]) == pytest.approx(205.62, abs=0.005)
    base = 205.52  # the low job's period with its idle, the monitor's baseline
    assert np.mean(low.durations_ms > 1.02 * base) > 0.5
    assert np.mean(low.durations_ms > 1.10 * base) < 0.05
    ideal = run_cluster(sc.sim, sc.jobs, "ideal", seed=0, noise_sigma=0.0)
    assert per_1000(r, True) / per_1000(ideal, True) > 1.03


def test_s2_at_the_paper_s_own_contention_metronome_reaches_the_paper_s_gain() -> None:
    # Grant S2 the contention its paper baseline shows: eta = 0.30, the S2-only fit
    # (docs/fidelity.md, "The calibration").  Default's high job then takes the
    # paper's implied 122.36 s per 1,000 iterations (98.68 / (1 - 0.1935)) to 0.24 %,
    # and Metronome's is 18.71 % faster (the paper: 19.35 %), 0.57 % from ideal.
    sc = SNAPSHOTS["S2"]
    by = {p: run_cluster(sc.sim, sc.jobs, p, seed=0, contention_efficiency=0.30)
          for p in ("default", "metronome")}
    assert abs(per_1000(by["default"], True) / (98.68 / (1 - 0.1935)) - 1.0) <= 0.01
    gain = 1.0 - per_1000(by["metronome"], True) / per_1000(by["default"], True)
    assert 0.17 <= gain <= 0.21


@pytest.mark.parametrize(("window", "o_t", "a_t"), [
    (10, 3, 1.05), (10, 3, 1.10), (10, 3, 1.15), (10, 5, 1.05), (10, 5, 1.15),
    (3, 1, 1.02)])
def test_s2_s_gain_does_not_hang_on_the_monitor_s_thresholds(
        window: int, o_t: int, a_t: float) -> None:
    # The paper's Fig. 14 range (O_T 3 or 5, A_T 105-115 %) and a hair trigger far
    # outside it: S2's high job is 3.19-3.99 % faster than default in the range
    # (4.06 % with the hair trigger), seed 0: the idle, not the pauses, holds the
    # pair apart (3-7 readjustments).
    sc = SNAPSHOTS["S2"]
    policy = make_policy("metronome")
    r = run_cluster(sc.sim, sc.jobs, policy, seed=0, controller=dataclasses.replace(
        ControllerConfig.for_policy(policy.config), window=window, o_t=o_t, a_t=a_t))
    assert per_1000(r, True) / per_1000(run("S2", "default"), True) <= 0.97
    assert r.readjustments <= 10


@pytest.mark.parametrize("snapshot", ["S2", "S3"])
def test_a_longer_monitor_window_changes_little(snapshot: str) -> None:
    # The paper's "fixed time window of 10" has lost its unit; read as seconds
    # (100 iterations here) the monitor acts about as often (S2 4 against 3, S3 11
    # against 10 readjustments) and the high job moves by less than 0.5 % (S2 99.00
    # against 99.10 s, S3 105.63 against 105.88 s; docs/fidelity.md, "Limits").
    # Before the revised idle, drift made the wide window pause 304 and 86 times.
    sc = SNAPSHOTS[snapshot]
    policy = make_policy("metronome")
    wide = run_cluster(sc.sim, sc.jobs, policy, seed=0, controller=dataclasses.replace(
        ControllerConfig.for_policy(policy.config), window=100))
    assert wide.readjustments <= 2 * run(snapshot, "metronome").readjustments
    assert abs(per_1000(wide, True) / per_1000(run(snapshot, "metronome"), True) - 1) <= 0.005


def _most_slow_in_a_window(snapshot: str, policy: str) -> int:
    cfg = ControllerConfig()
    (high,) = [j for j in run(snapshot, policy).jobs.values() if j.priority > 0]
    job = next(j for j in SNAPSHOTS[snapshot].jobs if j.name == high.name)
    assert job.pattern is not None
    assert high.durations_ms.size == high.done > 1000  # every iteration kept
    slow = (high.durations_ms > cfg.a_t * job.pattern.period_ms).astype(int)
    return int(np.convolve(slow, np.ones(cfg.window, dtype=int), "valid").max())


@pytest.mark.parametrize("snapshot", ["S3", "S4", "S5"])
def test_the_high_jobs_own_window_never_triggers_where_the_monitor_is_idle(
        snapshot: str) -> None:
    # The paper (§III-C): "if a pod's iteration time exceeds the baseline ... by a
    # factor of A_T for more than O_T occurrences ... pause ... low priority pods".
    # The controller watches each pod's own window and pauses it if it is of low
    # priority.  Read instead as "the high-priority pod's window pauses the low ones
    # beside it", nothing would change in S3, S4 and S5: under Metronome and its
    # compact ablation the high job never has more than O_T of any W consecutive
    # iterations above A_T x its period (at most 5, 2 and 0; docs/fidelity.md,
    # "Limits").  In S1 and S2 it would (16 and 11 such windows under Metronome).
    cfg = ControllerConfig()
    for policy in ("metronome", "metronome-no-phase3"):
        assert _most_slow_in_a_window(snapshot, policy) <= cfg.o_t
    for busy in ("S1", "S2"):
        assert _most_slow_in_a_window(busy, "metronome") > cfg.o_t


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("snapshot", ["S1", "S2"])
def test_without_monitoring_both_priorities_slow_down(snapshot: str, seed: int) -> None:
    # Table VIII / Fig. 13b: without monitoring nothing is readjusted and both
    # priorities slow down: S1 +4.4 to +6.8 %, S2 +4.1 to +6.2 % (seeds 0-3; the
    # paper's S2 +19.45 / +17.74 % is the contention model's magnitude again).
    blind = run(snapshot, "metronome-no-monitor", seed)
    assert blind.readjustments == 0 < run(snapshot, "metronome", seed).readjustments
    for high in (True, False):
        assert ratio(snapshot, "metronome-no-monitor", "metronome", high, seed) >= 1.03


@pytest.mark.parametrize("seed", SEEDS)
def test_compact_rotations_readjust_more_often(seed: int) -> None:
    # Table VII / Fig. 13a: compact rotations (no cushion between comm phases) make
    # drift trip the monitor more often.  S2: 27 / 18 / 35 / 15 readjustments
    # against 3 / 2 / 7 / 3 (seeds 0-3).  In S1 it holds on seeds 0, 2 and 3 (14,
    # 25, 28 against 4, 9, 14), not on seed 1 (8 against 15).
    assert run("S2", "metronome-no-phase3", seed).readjustments > \
        2 * run("S2", "metronome", seed).readjustments


def test_compact_rotations_cost_both_priorities_time_on_seed_0() -> None:
    # Table VII (S1 +0.58 % high, +1.17 % low; S2 +3.78 / +1.77 %): seed 0, S1
    # +0.79 / +1.13 %, S2 +0.67 / +0.76 %.  Over seeds 0-3 it is noisier: S1 seed 1
    # and S2 seeds 2-3 have one priority faster under compact (docs/fidelity.md).
    for snapshot in ("S1", "S2"):
        for high in (True, False):
            assert ratio(snapshot, "metronome-no-phase3", "metronome", high) > 1.0


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("snapshot", ["S4", "S5"])
def test_without_monitoring_nothing_changes_where_nothing_drifts(snapshot: str,
                                                                 seed: int) -> None:
    # The paper: S4 almost unchanged by either ablation (Table VIII: Gamma -0.17 %).
    # Here S4's and S5's pairs are held apart by their plan alone: 0 readjustments,
    # so the run without monitoring is the same run.  (S5's paper figure, -5.07 %,
    # is not reproduced: docs/fidelity.md.)
    assert run(snapshot, "metronome", seed).readjustments == 0
    assert ratio(snapshot, "metronome-no-monitor", "metronome", True, seed) == 1.0
    assert ratio(snapshot, "metronome-no-monitor", "metronome", False, seed) == 1.0


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
    # TCT (h), seed 0-3: 5.237 / 5.474, 5.196 / 5.279, 5.028 / 5.028, 4.737 / 5.710.
    from tdmcore.sim.scenarios import metronome_trace

    sc = metronome_trace(seed)
    ours = run_cluster(sc.sim, sc.jobs, "metronome", seed=seed).tct_ms
    assert ours <= run_cluster(sc.sim, sc.jobs, "default", seed=seed).tct_ms
