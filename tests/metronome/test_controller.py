"""The stop-and-wait controller: global offsets, phase 3, regulation, pattern updates."""

from __future__ import annotations

import numpy as np
import pytest

from tdmcore.framework import Scheduler
from tdmcore.metronome.controller import Controller, ControllerConfig, PatternUpdate, Readjustment
from tdmcore.metronome.link import LinkPod, plan_link
from tdmcore.metronome.policies import MetronomeConfig, MetronomePolicy
from tdmcore.model import Cluster, ClusterState, Node, Pod, TrafficPattern

VGG19 = TrafficPattern(422.26, 0.2, 25.0)


def s1_on_one_link(phase_three: bool = True):
    """S1's three VGG19 jobs, one pod each, on a single 25 Gbps node."""
    state = ClusterState(Cluster([Node("n0", 64, 64, 8, 25.0)]))
    config = MetronomeConfig(phase_three=phase_three)
    sched = Scheduler(MetronomePolicy(config))
    ctl = Controller(state, ControllerConfig.for_policy(config))
    shifts = {}
    for job, prio in (("a", 1), ("b", 0), ("c", 0)):
        decision = sched.schedule(state, Pod(f"{job}-0", job, pattern=VGG19, priority=prio))
        shifts = ctl.on_reserve(decision.reserve)
    return state, ctl, shifts


def test_phase_three_runs_the_optimal_search() -> None:
    # The third pod leaves SkipPhaseThree = 0: the controller maximizes Psi.
    # Three 14.4-bin arcs on 72 bins: midpoints 24 bins apart -> rotations 0, 24, 48
    # -> shifts 0, 24/72 x 422.26 = 140.75, 281.51 ms.
    state, ctl, shifts = s1_on_one_link()
    assert ctl.recalculations == 1
    assert shifts == pytest.approx({"a-0": 0.0, "b-0": 140.7533, "c-0": 281.5067}, abs=1e-3)
    assert state.placed["b-0"].shift_ms == pytest.approx(140.7533, abs=1e-3)


def test_without_phase_three_the_rotations_are_compact() -> None:
    # The paper's ablation (§IV-C): each low-priority comm phase starts where the
    # previous one ends.  Three 14.4-bin arcs: b at ceil(14.4) = 15, c at
    # ceil(15 + 14.4) = 30 -> shifts 15/72 x 422.26 = 87.97 and 30/72 x 422.26 =
    # 175.94 ms (the 'first' search alone gave c the middle of 30..57, 43: 252.18 ms,
    # which left cushions).
    _, ctl, shifts = s1_on_one_link(phase_three=False)
    assert ctl.recalculations == 0
    assert shifts == pytest.approx({"a-0": 0.0, "b-0": 87.9708, "c-0": 175.9417}, abs=1e-3)


def test_global_offsets_follow_the_affinity_graph() -> None:
    # a (high) and b share link n0; b and c share link n1.  BFS from a:
    # off(b) = rel0(b) - rel0(a); off(c) = off(b) + rel1(c) - rel1(b)  (mod period)
    state = ClusterState(Cluster([Node(f"n{i}", 64, 64, 8, 25.0) for i in range(2)]))
    pa = TrafficPattern(400.0, 0.2, 25.0)
    pb = TrafficPattern(400.0, 0.25, 25.0)
    pc = TrafficPattern(200.0, 0.2, 25.0)
    for name, job, pattern, prio, node in (("a-0", "a", pa, 1, 0), ("b-0", "b", pb, 0, 0),
                                           ("b-1", "b", pb, 0, 1), ("c-0", "c", pc, 0, 1)):
        state.place(Pod(name, job, pattern=pattern, priority=prio), node)
    ctl = Controller(state)
    shifts = ctl.update_offsets()
    link0 = plan_link([LinkPod("a-0", 400.0, 0.2, 25.0, 1, "a"),
                       LinkPod("b-0", 400.0, 0.25, 25.0, 0, "b")], 25.0, mode="optimal")
    link1 = plan_link([LinkPod("b-1", 400.0, 0.25, 25.0, 0, "b"),
                       LinkPod("c-0", 200.0, 0.2, 25.0, 0, "c")], 25.0, mode="optimal")
    rel0 = {j: r / 72 * link0.base.period_ms for j, r in link0.job_rotations.items()}
    rel1 = {j: r / 72 * link1.base.period_ms for j, r in link1.job_rotations.items()}
    off_b = rel0["b"] - rel0["a"]
    off_c = (off_b + rel1["c"] - rel1["b"]) % 200.0
    assert shifts["a-0"] == 0.0
    assert shifts["b-0"] == shifts["b-1"] == pytest.approx(off_b % 400.0)
    assert shifts["c-0"] == pytest.approx(off_c)
    # link n1's reference is b (same priority as c, deployed earlier): rel1(b) = 0
    assert link1.jobs[0] == "b"


def test_slow_low_priority_pod_is_paused_back_onto_its_phase() -> None:
    _, ctl, shifts = s1_on_one_link()
    out: list = []
    start = 10_000.0
    for _ in range(6):  # 6 > O_T = 5 iterations above 1.10 x 422.26 = 464.5 ms
        out = ctl.report_iteration("b-0", start, 500.0)
        start += 500.0
    assert len(out) == 1 and isinstance(out[0], Readjustment)
    # next start = 10,000 + 6 x 500 = 13,000 = 30 x 422.26 + 332.2 ->
    # pause = (140.753 - 332.2) mod 422.26 = 230.81 ms
    expected = (shifts["b-0"] - 13_000.0) % 422.26
    assert out[0].pause_ms == pytest.approx(expected)
    assert out[0].pause_ms == pytest.approx(230.8133, abs=1e-3)


def test_high_priority_pods_are_never_paused() -> None:
    _, ctl, _ = s1_on_one_link()
    outs = [ctl.report_iteration("a-0", 500.0 * i, 500.0) for i in range(20)]
    assert not any(isinstance(x, Readjustment) for out in outs for x in out)


def test_monitoring_off_regulates_nothing() -> None:
    state, _, _ = s1_on_one_link()
    ctl = Controller(state, ControllerConfig(monitor=False))
    ctl.update_offsets()
    assert all(ctl.report_iteration("b-0", 500.0 * i, 500.0) == [] for i in range(20))


def test_drifted_period_updates_the_pattern_and_recomputes() -> None:
    state, ctl, _ = s1_on_one_link()
    # The high-priority a-0 is never paused: 470 ms is 11.3 % above its period
    # (> drift_tol 10 %): after a full window of 10 the pattern is updated; the comm
    # time (0.2 x 422.26 = 84.45 ms) is kept -> duty = 84.452 / 470 = 0.1797.
    out: list = []
    for i in range(10):
        out = ctl.report_iteration("a-0", 470.0 * i, 470.0)
    assert len(out) == 1 and isinstance(out[0], PatternUpdate)
    update = out[0]
    assert update.reason == "pattern drift" and update.pods == ("a-0",)
    assert update.new.period_ms == 470.0
    assert update.new.duty_cycle == pytest.approx(0.2 * 422.26 / 470.0)
    assert state.placed["a-0"].pod.pattern == update.new


def test_a_drift_below_the_tolerance_is_no_new_pattern() -> None:
    _, ctl, _ = s1_on_one_link()
    # 460 ms: 8.9 % above the period, inside drift_tol = a_t - 1 = 10 %: nothing.
    assert all(ctl.report_iteration("a-0", 460.0 * i, 460.0) == [] for i in range(30))


def test_repeated_readjustments_update_the_pattern() -> None:
    _, ctl, _ = s1_on_one_link()
    events = []
    t = 0.0
    for _ in range(3 * 6):  # three readjustments (6 slow iterations each)
        events += ctl.report_iteration("b-0", t, 520.0, comm_ms=84.0)
        t += 520.0
    kinds = [type(e).__name__ for e in events]
    assert kinds.count("Readjustment") == 3 and kinds[-1] == "PatternUpdate"
    assert events[-1].reason == "repeated readjustments"
    # pauses did not cure it: every one of the 18 iterations is above 1.1 x 422.26 =
    # 464.5 ms, none uncontended, so the pod is measured by its own part (spec §7,
    # revised 2026-11-28): median own part 520 - 84 = 436 ms plus the pattern's comm
    # time 0.2 x 422.26 = 84.452 ms -> 520.452 ms (its compute grew; the comm
    # phase it reports is no evidence of a new comm time while contended)
    assert events[-1].new.period_ms == pytest.approx(436.0 + 84.452)
    assert events[-1].new.duty_cycle == pytest.approx(84.452 / 520.452)


def _s2_low_reports(ctl: Controller, calm_ms: float, calm_comm_ms: float,
                    rounds: int = 3) -> list:
    """S2's low job l (91.94 ms, duty 0.2, with 6.74 ms of idle: 98.68 ms per
    iteration) reporting ``rounds`` times 4 iterations of ``calm_ms`` (comm
    ``calm_comm_ms``) then 6 contended ones of 112 ms (its comm phase stretched by
    the high job's: 112 - 80.29 = 31.71 ms): each sixth slow iteration pauses it."""
    events: list = []
    t = 0.0
    for _ in range(rounds):
        for d, comm in [(calm_ms, calm_comm_ms)] * 4 + [(112.0, 112.0 - 80.288)] * 6:
            events += ctl.report_iteration("l-0", t, d, comm_ms=comm)
            t += d
    return events


def test_a_pattern_update_never_adopts_the_contended_median() -> None:
    """A contended window (spec §7, revised 2026-11-28).  Three readjustments in 30
    iterations re-measure l: 18 of them contended (112 ms), 12 uncontended (98.68
    ms, at or below 1.1 x 98.68 = 108.55).  Before the revision the median of all
    30 (112) less the idle, 105.26 ms, became l's period: 6.58 ms longer than h's
    98.68, so unification called the link incompatible and l lost its 6.74 ms of
    idle (in S2 the same rule took l from 91.94 to 101.19 ms).  Now the uncontended
    median, 98.68 - 6.74 = 91.94 ms, is l's own period: the pattern stands and the
    idle stays."""
    ctl = _pair(TrafficPattern(98.68, 0.2, 25.0), TrafficPattern(91.94, 0.2, 25.0))
    idle = ctl.idle_ms("l")
    assert idle == pytest.approx(98.68 - 91.94)
    events = _s2_low_reports(ctl, 98.68, 0.2 * 91.94)
    assert [type(e).__name__ for e in events] == ["Readjustment"] * 3
    assert ctl.state.placed["l-0"].pod.pattern == TrafficPattern(91.94, 0.2, 25.0)
    assert ctl.idle_ms("l") == pytest.approx(idle)
    assert ctl.links[0].base.compatible and ctl.links[0].result.perfect


def test_a_pattern_update_measures_the_uncontended_iterations() -> None:
    """The same contended window, but l's uncontended iterations now take 80 ms
    with 15 ms of comm (a smaller batch): re-measured from them alone, 80 - 6.74 =
    73.26 ms with a duty cycle of 15 / 73.26, never from the 112 ms ones; the link is
    unified again for the new period (and l's idle with it)."""
    ctl = _pair(TrafficPattern(98.68, 0.2, 25.0), TrafficPattern(91.94, 0.2, 25.0))
    events = _s2_low_reports(ctl, 80.0, 15.0)
    updates = [e for e in events if isinstance(e, PatternUpdate)]
    assert len(updates) == 1 and updates[0].reason == "repeated readjustments"
    assert updates[0].new.period_ms == pytest.approx(80.0 - (98.68 - 91.94))
    assert updates[0].new.duty_cycle == pytest.approx(15.0 / (80.0 - (98.68 - 91.94)))
    assert ctl.links[0].base.periods_ms.tolist() == pytest.approx([98.68, 73.26])


def test_a_drift_of_the_own_part_keeps_the_declared_comm_time() -> None:
    # The high-priority a-0 (422.26 ms, duty 0.2: comm 84.452) now computes 100 ms
    # longer, its comm phases as before: own part 437.81 instead of 337.81 (> the
    # band's 42.2 ms).  Re-measured: 437.81 + the declared 84.452 = 522.26 ms.
    _, ctl, _ = s1_on_one_link()
    out: list = []
    for i in range(10):
        out = ctl.report_iteration("a-0", 522.26 * i, 522.26, comm_ms=84.452)
    assert len(out) == 1 and out[0].reason == "pattern drift"
    assert out[0].new.period_ms == pytest.approx(522.26)
    assert out[0].new.duty_cycle == pytest.approx(84.452 / 522.26)


def test_contention_is_no_drift() -> None:
    # The high-priority a-0 is never paused: 30 % slower, all of it in its comm
    # phase (contention), for 40 iterations: its own part is unchanged, no update.
    _, ctl, _ = s1_on_one_link()
    comm = 0.2 * 422.26 + 0.3 * 422.26
    assert all(ctl.report_iteration("a-0", 550.0 * i, 1.3 * 422.26, comm_ms=comm) == []
               for i in range(40))


def test_injected_idle_is_part_of_the_baseline() -> None:
    # h: 200 ms (high), l: 187 ms (low) on one link: l is 13 ms shorter, within
    # E_T = 18.7 ms, so it gets 13 ms of idle, closing the gap (docs/traffic-circle.md
    # step 2, revised 2026-11-28).  l iterating in 200 ms is on its baseline: never
    # slow, no drift.
    state = ClusterState(Cluster([Node("n0", 64, 64, 8, 25.0)]))
    sched = Scheduler(MetronomePolicy())
    ctl = Controller(state)
    for job, period, prio in (("h", 200.0, 1), ("l", 187.0, 0)):
        pod = Pod(f"{job}-0", job, pattern=TrafficPattern(period, 0.04, 25.0), priority=prio)
        ctl.on_reserve(sched.schedule(state, pod).reserve)
    assert ctl.idle_ms("l") == pytest.approx(13.0)
    limits = ctl.thresholds("l")
    assert limits is not None and limits.slow == pytest.approx(1.1 * 200.0)
    assert all(ctl.report_iteration("l-0", 200.0 * i, 200.0 * 1.08, comm_ms=7.48) == []
               for i in range(40))


def test_equal_priorities_rank_by_deploy_order() -> None:
    # Two jobs of priority 0 on one link: the earlier deployed is the high one.
    state = ClusterState(Cluster([Node("n0", 64, 64, 8, 25.0)]))
    sched = Scheduler(MetronomePolicy())
    ctl = Controller(state)
    for job in ("first", "second"):
        pod = Pod(f"{job}-0", job, pattern=TrafficPattern(100.0, 0.3, 25.0))
        ctl.on_reserve(sched.schedule(state, pod).reserve)
    assert ctl.is_high("first") and not ctl.is_high("second")
    assert ctl.high_jobs() == {"first"}


def test_bad_reports_raise_and_change_nothing() -> None:
    state, ctl, _ = s1_on_one_link()
    before = state.copy()
    with pytest.raises(ValueError, match="^pod:"):
        ctl.report_iteration("nope", 0.0, 1.0)
    with pytest.raises(ValueError, match="^duration_ms:"):
        ctl.report_iteration("b-0", 0.0, -1.0)
    with pytest.raises(ValueError, match="^comm_ms:"):
        ctl.report_iteration("b-0", 0.0, 10.0, comm_ms=20.0)
    assert state.same_as(before)
    with pytest.raises(ValueError, match="^o_t:"):
        ControllerConfig(window=5, o_t=7)


# ------------------------------------------- regressions from the spec review
def test_contention_pauses_before_it_counts_as_drift() -> None:
    # normal iterations, then contention: 6 slow ones trigger a pause, not an update
    _, ctl, _ = s1_on_one_link()
    events = []
    t = 0.0
    for duration in [422.0] * 12 + [500.0] * 6:
        events += ctl.report_iteration("b-0", t, duration)
        t += duration
    assert [type(e).__name__ for e in events] == ["Readjustment"]


def test_offsets_use_the_period_of_a_traffic_pod_of_the_job() -> None:
    # job X's first pod is LowComm; its offset must use the traffic pod's 100 ms period
    state = ClusterState(Cluster([Node("n0", 64, 64, 8, 10.0), Node("n1", 64, 64, 8, 10.0)]))
    state.place(Pod("a-0", "A", pattern=TrafficPattern(100, 0.3, 10.0), priority=1), 0)
    state.place(Pod("x-0", "X", pattern=None), 1)
    state.place(Pod("x-1", "X", pattern=TrafficPattern(100, 0.3, 10.0)), 0)
    shifts = Controller(state).update_offsets()
    plan = plan_link([LinkPod("a-0", 100, 0.3, 10.0, 1, "A"),
                      LinkPod("x-1", 100, 0.3, 10.0, 0, "X")], 10.0, mode="optimal")
    expected = plan.job_rotations["X"] / 72 * 100.0
    assert expected > 1.0
    assert shifts["x-0"] == shifts["x-1"] == pytest.approx(expected)


def test_lowcomm_reserve_triggers_no_recalculation() -> None:
    state, ctl, _ = s1_on_one_link()
    runs = ctl.recalculations
    decision = Scheduler(MetronomePolicy()).schedule(state, Pod("l-0", "l", pattern=None))
    ctl.on_reserve(decision.reserve)
    assert ctl.recalculations == runs


def test_ablation_policies_configure_their_controller() -> None:
    from tdmcore.metronome.policies import make_policy

    state = ClusterState(Cluster([Node("n0", 64, 64, 8, 25.0)]))
    assert not Controller.for_policy(state, make_policy("metronome-no-phase3")) \
        .config.phase_three
    assert not Controller.for_policy(state, make_policy("metronome-no-monitor")).config.monitor
    assert Controller.for_policy(state, make_policy("default")).config.monitor
    with pytest.raises(ValueError, match="^scheduler:"):
        ControllerConfig(scheduler=None)
    with pytest.raises(ValueError, match="^o_t:"):
        ControllerConfig(o_t=10)


def test_a_link_replanned_unchanged_comes_from_the_plan_cache() -> None:
    # A plan is a pure function of the link's pods, capacity and mode: the same
    # pods give the same plan object; another set of pods is planned afresh, and
    # what comes out always equals planning from scratch.
    from tdmcore.metronome.link import clear_plan_cache
    from tdmcore.metronome.policies.metronome import link_plan

    state, ctl, _ = s1_on_one_link()
    first = ctl.links[0]
    ctl.plan_link(0, optimal=True)
    assert ctl.links[0] is first and ctl.recalculations == 2
    assert link_plan(state, 0, ctl.config.scheduler, mode="optimal") is first
    clear_plan_cache()
    fresh = link_plan(state, 0, ctl.config.scheduler, mode="optimal")
    assert fresh is not first
    assert fresh.result.rotations.tolist() == first.result.rotations.tolist()
    assert fresh.shifts_ms == first.shifts_ms
    state.remove("c-0")
    ctl.on_removed(0)
    assert [p.name for p in ctl.links[0].pods] == ["a-0", "b-0"]
    assert ctl.links[0].shifts_ms == link_plan(state, 0, ctl.config.scheduler,
                                               mode="optimal").shifts_ms


def _gang_worlds(seed: int) -> list[list[object]]:
    """A random sequence of gangs reserved pod by pod (world 0) and at once (1):
    after each gang, the shifts, offsets, link plans and recalculations."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n_nodes = int(rng.integers(2, 5))
    jobs = []
    for k in range(int(rng.integers(2, 6))):
        pattern = TrafficPattern(float(rng.choice([100.0, 200.0, 400.0])),
                                 float(rng.uniform(0.1, 0.4)), float(rng.choice([10.0, 25.0])))
        jobs.append([Pod(f"j{k}-{w}", f"j{k}", pattern=pattern, priority=int(rng.integers(0, 2)))
                     for w in range(int(rng.integers(1, 4)))])
    worlds = []
    for gang in (False, True):
        state = ClusterState(Cluster([Node(f"n{i}", 64, 64, 8, 25.0) for i in range(n_nodes)]))
        config = MetronomeConfig()
        sched = Scheduler(MetronomePolicy(config))
        ctl = Controller(state, ControllerConfig.for_policy(config))
        seen: list[object] = []
        for pods in jobs:
            decision = sched.schedule_gang(state, pods)
            reserves = [d.reserve for d in decision.decisions if d.reserve is not None]
            if decision.status.name != "SUCCESS" or not reserves:
                seen.append(None)
                continue
            if gang:
                shifts = ctl.on_reserve_gang(reserves)
            else:
                for r in reserves:
                    shifts = ctl.on_reserve(r)
            seen.append((shifts, dict(ctl.offsets_ms),
                         {n: (tuple(p.name for p in plan.pods),
                              plan.result.rotations.tolist()) for n, plan in ctl.links.items()},
                         ctl.recalculations))
        worlds.append(seen)
    return worlds


@pytest.mark.parametrize("seed", range(40))
def test_a_gang_reserved_at_once_ends_as_pod_by_pod(seed: int) -> None:
    # Same shifts, offsets and plans.  Pod by pod, an intermediate offset update
    # can recalculate a link that a later Reserve of the gang plans again: the
    # gang path never counts more recalculations, and never a different plan.
    by_pod, at_once = _gang_worlds(seed)
    assert [s if s is None else s[:3] for s in at_once] == \
        [s if s is None else s[:3] for s in by_pod]
    for a, b in zip(at_once, by_pod, strict=True):
        assert a is None or a[3] <= b[3]  # type: ignore[index]


def test_the_gang_comparison_plans_links() -> None:
    # the comparison above is meaningful: many sequences share and plan links (18
    # of 40 since a job's pods on one node make one row and gangs pack onto one
    # node: fewer links are shared than when every pod was a row, 20+ of 40)
    planned = sum(any(s is not None and s[2] for s in _gang_worlds(seed)[0])  # type: ignore[index]
                  for seed in range(40))
    assert planned >= 15


def test_on_reserve_gang_rejects_what_is_not_a_reserve() -> None:
    _, ctl, _ = s1_on_one_link()
    before = dict(ctl.offsets_ms)
    with pytest.raises(ValueError, match="^results"):
        ctl.on_reserve_gang([object()])  # type: ignore[list-item]
    assert ctl.offsets_ms == before


def test_the_controller_takes_the_plan_the_reserve_made() -> None:
    # Two VGG19 pods on one link: the second Reserve skips phase three (two traffic
    # pods), so its first-mode plan is the link's plan: taken as it is, not re-planned.
    state = ClusterState(Cluster([Node("n0", 64, 64, 8, 25.0)]))
    config = MetronomeConfig()
    sched = Scheduler(MetronomePolicy(config))
    ctl = Controller(state, ControllerConfig.for_policy(config))
    for job, prio in (("a", 1), ("b", 0)):
        reserve = sched.schedule(state, Pod(f"{job}-0", job, pattern=VGG19,
                                            priority=prio)).reserve
        assert reserve is not None
        ctl.on_reserve(reserve)
    assert reserve.skip_phase_three and reserve.plan is not None
    assert ctl.links[0] is reserve.plan
    # a controller with other settings plans the link itself (same pods, other circle)
    other = Controller(state, ControllerConfig.for_policy(MetronomeConfig(bins=144)))
    other.on_reserve(reserve)
    assert other.links[0] is not reserve.plan and other.links[0].bins == 144


def _pair(high: TrafficPattern, low: TrafficPattern,
          priorities: tuple[int, int] = (1, 0)) -> Controller:
    """Jobs ``h`` then ``l`` (by default high and low priority), one pod each, sharing
    node n0's link."""
    state = ClusterState(Cluster([Node("n0", 64, 64, 8, 25.0)]))
    sched = Scheduler(MetronomePolicy(MetronomeConfig()))
    ctl = Controller(state)
    for job, pattern, prio in (("h", high, priorities[0]), ("l", low, priorities[1])):
        ctl.on_reserve(sched.schedule(state, Pod(f"{job}-0", job, pattern=pattern,
                                                 priority=prio)).reserve)
    return ctl


@pytest.mark.parametrize("high, low, lattice", [
    # S2: 1:1 beside a reference of 98.68 ms: only its period keeps the arrangement
    (TrafficPattern(98.68, 0.2, 25.0), TrafficPattern(91.94, 0.21, 25.0), 98.68),
    # S3: the low job (186.84 + 13.68 ms of idle) holds one unit per two of the
    # reference's: P m_parent / lcm(2, 1) = 102.76 x 2 / 2
    (TrafficPattern(102.76, 0.2, 25.0), TrafficPattern(186.84, 0.209, 25.0), 102.76),
    # S5: four low units per reference unit: 429.88 x 1 / lcm(1, 4) = 107.47
    (TrafficPattern(429.88, 0.086, 25.0), TrafficPattern(107.47, 0.209, 25.0), 107.47),
])
def test_pauses_land_on_the_target_plus_a_multiple_of_the_phase_lattice(
        high: TrafficPattern, low: TrafficPattern, lattice: float) -> None:
    ctl = _pair(high, low)
    assert ctl.phase_period_ms("l") == pytest.approx(lattice)
    assert ctl.phase_period_ms("h") == high.period_ms  # the reference: its own period
    ctl.anchors_ms["h"] = 5_000.0
    target = ctl.target_phase("l")
    assert target is not None
    limits = ctl.thresholds("l")
    assert limits is not None
    start, out = 7_000.0, []
    for _ in range(ctl.config.window):  # every iteration 30 % slow: contention
        duration = 1.3 * (low.period_ms + limits.idle)
        out += ctl.report_iteration("l-0", start, duration)
        if out:
            break
        start += duration
    (pause,) = [a for a in out if isinstance(a, Readjustment)]
    resume = start + duration + pause.pause_ms
    steps = (resume - target) / lattice
    assert steps == pytest.approx(round(steps), abs=1e-9)  # on the target's lattice
    assert 0.0 <= pause.pause_ms < lattice


def test_a_pattern_update_skips_a_job_s_pods_without_traffic() -> None:
    # Job a: a-0 with a pattern on n0, a-1 without one on n1.  A drift of a-0 updates
    # a-0 only; a-1 keeps sending nothing (it used to raise halfway, leaving a-0
    # updated: a half-applied state).
    state = ClusterState(Cluster([Node(f"n{i}", 64, 64, 8, 25.0) for i in range(2)]))
    state.place(Pod("a-0", "a", pattern=VGG19, priority=1), 0)
    state.place(Pod("a-1", "a", priority=1), 1)
    ctl = Controller(state)
    ctl.update_offsets()
    out: list = []
    for i in range(10):
        out = ctl.report_iteration("a-0", 470.0 * i, 470.0)
    assert len(out) == 1 and isinstance(out[0], PatternUpdate)
    assert out[0].pods == ("a-0",)
    assert state.placed["a-0"].pod.pattern == out[0].new
    assert state.placed["a-1"].pod.pattern is None


def test_a_pattern_update_keeps_each_pod_s_bandwidth() -> None:
    # a-0 sends 25 Gbps, a-1 10 Gbps: both take the re-measured period and duty
    # cycle with their own bandwidth.
    state = ClusterState(Cluster([Node(f"n{i}", 64, 64, 8, 25.0) for i in range(2)]))
    state.place(Pod("a-0", "a", pattern=VGG19, priority=1), 0)
    state.place(Pod("a-1", "a", pattern=TrafficPattern(422.26, 0.2, 10.0), priority=1), 1)
    ctl = Controller(state)
    ctl.update_offsets()
    out: list = []
    for i in range(10):
        out = ctl.report_iteration("a-0", 470.0 * i, 470.0)
    assert len(out) == 1 and out[0].pods == ("a-0", "a-1")
    p0, p1 = (state.placed[n].pod.pattern for n in ("a-0", "a-1"))
    assert p0 == out[0].new
    assert (p1.period_ms, p1.duty_cycle, p1.bandwidth_gbps) == (470.0, p0.duty_cycle, 10.0)


def test_a_gang_that_leaves_its_planned_link_without_rows_plans_nothing() -> None:
    # Two 2-pod jobs on one node: after x-0 the link holds one row of each (y and x
    # partly placed), so that Reserve rotated them; after y-1 and x-1 both jobs are
    # whole on the node (LowComm) and the link has no rows.  on_reserve_gang used to
    # re-plan it and raise 'demand: needs at least one row'.
    state = ClusterState(Cluster([Node("n0", 64, 256, 8, 25.0)]))
    pat = TrafficPattern(400.0, 0.25, 15.0)
    pods = [Pod("y-0", "y", gpu=1, pattern=pat, gang_size=2),
            Pod("x-0", "x", gpu=1, pattern=pat, gang_size=2),
            Pod("y-1", "y", gpu=1, pattern=pat, gang_size=2),
            Pod("x-1", "x", gpu=1, pattern=pat, gang_size=2)]
    decision = Scheduler(MetronomePolicy()).schedule_gang(state, pods)
    reserves = [d.reserve for d in decision.decisions]
    assert any(r.shifts_ms for r in reserves) and not any(state.link_rows)
    ctl = Controller(state)
    shifts = ctl.on_reserve_gang(reserves)
    assert shifts == {p.name: 0.0 for p in pods} and ctl.links == {}


# ---------------------------------------------------------------- where a target lands
# (three defects an independent review of the controller against the paper found; each
# test failed before its fix)
def _chain(patterns: dict[str, TrafficPattern]) -> Controller:
    """Jobs ``h`` - (n0) - ``p`` - (n1) - ``l``, priorities 2, 1, 0."""
    state = ClusterState(Cluster([Node(f"n{i}", 64, 64, 8, 25.0) for i in range(2)]))
    for name, job, prio, node in (("h-0", "h", 2, 0), ("p-0", "p", 1, 0), ("p-1", "p", 1, 1),
                                  ("l-0", "l", 0, 1)):
        state.place(Pod(name, job, pattern=patterns[job], priority=prio), node)
    ctl = Controller(state)
    ctl.update_offsets()
    return ctl


def _link_shift(ctl: Controller, node: int, job: str) -> float:
    plan = ctl.links[node]
    return plan.job_rotations[job] / plan.bins * plan.base.period_ms


def test_an_offset_is_reduced_modulo_the_phase_lattice_not_the_own_period():
    # S2's VGG16 (91.94 ms) follows a second VGG19 (98.68 ms) on n1: its offset is p's
    # plus the link's shift; reduced modulo its own period it lands 6.74 ms off
    ctl = _chain({"h": TrafficPattern(98.68, 0.2, 25.0), "p": TrafficPattern(98.68, 0.2, 25.0),
                  "l": TrafficPattern(91.94, 0.21, 25.0)})
    lattice = ctl.phase_period_ms("l")
    assert lattice == pytest.approx(98.68)
    planned = ctl.offsets_ms["p"] + _link_shift(ctl, 1, "l") - _link_shift(ctl, 1, "p")
    off = (planned - ctl.offsets_ms["l"]) % lattice
    assert min(off, lattice - off) == pytest.approx(0.0, abs=1e-9)
    assert 0.0 <= ctl.offsets_ms["l"] < lattice


def test_a_grandchilds_target_follows_its_parent_not_the_reference():
    # 100, 200 and 400 ms chained: j's lattice beside p is 200 ms, h's period 100 ms
    ctl = _chain({"h": TrafficPattern(100.0, 0.1, 25.0), "p": TrafficPattern(200.0, 0.1, 25.0),
                  "l": TrafficPattern(400.0, 0.1, 25.0)})
    assert ctl.reference("l") == "p" and ctl.reference("p") == "h"
    assert ctl.reference("h") is None
    lattice = ctl.phase_period_ms("l")
    ctl.anchors_ms["p"] = 20_037.0
    targets = set()
    for anchor in (20_000.0, 20_100.0, 20_200.0):  # h's consecutive iterations
        ctl.anchors_ms["h"] = anchor
        targets.add(round(ctl.target_phase("l") % lattice, 9))
    assert len(targets) == 1
    # and the comm phase lands where n1's plan puts it beside p's
    p_comm = ctl.anchors_ms["p"] + 200.0 - 20.0
    l_comm = ctl.target_phase("l") + 400.0 - 40.0
    want = (_link_shift(ctl, 1, "l") - _link_shift(ctl, 1, "p")) % lattice
    assert (l_comm - p_comm) % lattice == pytest.approx(want)


def test_a_target_starts_the_iteration_its_injected_idle_before_its_comm_phase():
    from tdmcore.sim.engine.network import FlowJob, simulate_flows

    high = TrafficPattern(102.76, 0.2, 25.0)  # S3's VGG19 and WideResNet101
    low = TrafficPattern(186.84, 0.209, 25.0)
    ctl = _pair(high, low)
    idle = ctl.idle_ms("l")
    assert idle == pytest.approx(2 * 102.76 - 186.84)  # closes the gap to 2:1
    ctl.anchors_ms["h"] = 0.0
    lattice = ctl.phase_period_ms("l")
    start = ctl.target_phase("l") % lattice
    run = simulate_flows([FlowJob("h", high.period_ms, high.duty_cycle, 25.0, (0, None), 3),
                          FlowJob("l", low.period_ms, low.duty_cycle, 25.0, (0, None), 1,
                                  start_ms=start, idle_ms=idle)], [25.0, 25.0],
                         noise_sigma=0.0)
    l_comm = run.iteration_end_ms[1][0] - low.comm_ms
    h_comm = high.period_ms - high.comm_ms
    assert (l_comm - h_comm) % lattice == pytest.approx(ctl.offsets_ms["l"] % lattice)
    # the pause rule lands there too
    end = 5_000.0
    off = (end + ctl.pause_ms("l", end) - start) % lattice
    assert min(off, lattice - off) == pytest.approx(0.0, abs=1e-6)


def test_equal_priorities_unify_as_the_controller_ranks_them():
    # 200 and 187 ms unify only by injecting idle into the 187 ms job; with equal
    # priorities the controller ranks the later job low (deploy order), and so does
    # unification now: idle goes into it and the link interleaves (score 100)
    for priorities in ((1, 0), (0, 0)):
        ctl = _pair(TrafficPattern(200.0, 0.3, 25.0), TrafficPattern(187.0, 0.3, 25.0),
                    priorities)
        plan = ctl.links[0]
        assert plan.base.compatible and plan.base.idle_ms.tolist() == [0.0, 13.0]
        assert plan.result.score == 100.0
        assert not ctl.is_high("l") and ctl.is_high("h")


@pytest.mark.parametrize("case", ["not quiet", "bad comms_ms"])
def test_a_refused_absorb_quiet_changes_nothing(case: str) -> None:
    # A review found the pattern re-measured (not quiet) and the report counter
    # raised (a bad comms_ms) before the call raised ValueError.
    state = ClusterState(Cluster([Node("n0", 8, 64, 8, 25.0), Node("n1", 8, 64, 8, 25.0)]))
    state.place(Pod("p", "j", pattern=TrafficPattern(100.0, 0.3, 10.0)), 0)
    ctl = Controller(state)
    ctl.update_offsets()
    ctl.report_iteration("p", 0.0, 100.0)  # a watch exists
    before = (state.placed["p"].pod.pattern, ctl.watch_state("p"), dict(ctl.anchors_ms))
    if case == "not quiet":  # 300 ms iterations of a 100 ms pattern: a drift
        args: tuple = (50, np.arange(50) * 300.0 + 100.0, np.full(50, 300.0))
        match = "durations_ms: these reports are not quiet"
    else:
        args = (100, np.arange(50) * 100.0 + 100.0, np.full(50, 100.0), np.full(50, -1.0))
        match = "comms_ms"
    with pytest.raises(ValueError, match=match):
        ctl.absorb_quiet("p", *args)
    after = (state.placed["p"].pod.pattern, ctl.watch_state("p"), dict(ctl.anchors_ms))
    assert after[0] == before[0] and after[2] == before[2]
    assert all(np.array_equal(a, b) for a, b in zip(after[1], before[1], strict=True))


def test_controller_calls_with_bad_values_raise_value_error_by_name() -> None:
    # A review found IndexError, AttributeError and NaN answers here.
    from tdmcore.framework import ReserveResult

    state = ClusterState(Cluster([Node("n0", 8, 64, 8, 25.0), Node("n1", 8, 64, 8, 25.0)]))
    state.place(Pod("p", "j", pattern=TrafficPattern(100.0, 0.3, 10.0)), 0)
    ctl = Controller(state)
    ctl.update_offsets()
    cases = [
        (lambda: ctl.on_reserve(ReserveResult(99, {"p": 1.0}, False, ())), "^result.node: "),
        (lambda: ctl.on_reserve("x"), "^result: expected ReserveResult"),
        (lambda: ctl.on_reserve_gang([ReserveResult(99, {}, True, ())]), "^results.node: "),
        (lambda: ctl.pause_ms("j", float("nan")), "^end_ms: "),
        (lambda: ctl.thresholds("j", float("nan")), "^idle_ms: "),
        (lambda: ctl.thresholds("j", -5.0), "^idle_ms: must be >= 0"),
        (lambda: ctl.on_removed(99), "^node: "),
    ]
    offsets = dict(ctl.offsets_ms)
    for call, match in cases:
        with pytest.raises(ValueError, match=match):
            call()
    assert ctl.offsets_ms == offsets


@pytest.mark.parametrize("pods", [0, 1])
def test_plan_link_refuses_a_link_with_fewer_than_two_traffic_pods(pods: int) -> None:
    # Before the fix the unification kernel (bounds checking off) crashed the
    # process on an empty link and never returned on a link of one pod.
    state = ClusterState(Cluster([Node("n0", 64, 64, 8, 25.0), Node("n1", 64, 64, 8, 25.0)]))
    for k in range(pods):
        state.place(Pod(f"a{k}-0", f"a{k}", pattern=VGG19), 0)
    state.place(Pod("x-0", "x"), 0)  # no traffic: not a pod to plan
    ctl = Controller(state)
    with pytest.raises(ValueError, match=f"^node: link 0 carries {pods} traffic pod"):
        ctl.plan_link(0, optimal=True)
    assert ctl.links == {} and ctl.recalculations == 0
