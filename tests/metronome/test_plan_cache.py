"""The shared link plans of the unchecked path (:data:`tdmcore.metronome.link.PLAN_CACHE`):
equal arguments share one plan, which equals planning from scratch, and the
simulator's per-job results are the same with or without sharing."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.asv_bench.instances import contended_trace
from tdmcore.metronome import link as L
from tdmcore.metronome.link import (
    PLAN_CACHE,
    LinkPod,
    _plan_link,
    _shared_plan,
    clear_plan_cache,
)
from tdmcore.sim.cluster import run_cluster

SETTINGS = (72, 5.0, 0.10, 8)


def _pods(rng: np.random.Generator) -> tuple[list[LinkPod], float]:
    k = int(rng.integers(2, 6))
    cap = float(rng.choice([25.0, 40.0, 100.0]))
    pods = [LinkPod(name=f"p{i}", job=f"j{i}", period_ms=float(rng.uniform(50.0, 400.0)),
                    duty_cycle=float(rng.uniform(0.05, 0.6)),
                    bandwidth_gbps=float(rng.uniform(0.3, 1.0)) * cap,
                    priority=int(rng.integers(0, 2)))
            for i in range(k)]
    return pods, cap


def _same(a: L.LinkPlan, b: L.LinkPlan) -> bool:
    return (a.jobs == b.jobs and a.shifts_ms == b.shifts_ms
            and a.result.rotations.tolist() == b.result.rotations.tolist()
            and a.result.score == b.result.score and a.result.perfect == b.result.perfect
            and a.base.period_ms == b.base.period_ms and a.utilization == b.utilization
            and np.array_equal(a.demand, b.demand))


def test_equal_arguments_share_a_plan_equal_to_planning_from_scratch() -> None:
    rng = np.random.default_rng(20261129)
    instances = [_pods(rng) for _ in range(300)]
    modes = ("first", "optimal", "compact")
    first = {}
    for i, (pods, cap) in enumerate(instances):
        for mode in modes:
            plan = _plan_link(pods, cap, SETTINGS[0], mode, *SETTINGS[1:])
            # a copy of the pods (equal, not the same objects) gets the same plan
            again = _plan_link([LinkPod(**vars(p)) for p in pods], cap, SETTINGS[0], mode,
                               *SETTINGS[1:])
            assert again is plan
            first[i, mode] = plan
            scratch = _shared_plan.__wrapped__(tuple(pods), cap, SETTINGS[0], mode,
                                               *SETTINGS[1:])
            assert scratch is not plan and _same(plan, scratch), (i, mode)
    # another capacity, mode or setting is another plan
    pods, cap = instances[0]
    a = _plan_link(pods, cap, 72, "first", 5.0, 0.10, 8)
    assert _plan_link(pods, cap * 2, 72, "first", 5.0, 0.10, 8) is not a
    assert _plan_link(pods, cap, 72, "optimal", 5.0, 0.10, 8) is not a
    assert _plan_link(pods, cap, 36, "first", 5.0, 0.10, 8) is not a
    assert _plan_link(pods, cap, 72, "first", 5.0, 0.20, 8) is not a
    # 900 plans were made: only the last PLAN_CACHE are kept
    info = _shared_plan.cache_info()
    assert info.maxsize == PLAN_CACHE and info.currsize <= PLAN_CACHE


def test_a_shared_plan_cannot_be_changed_in_place() -> None:
    pods = [LinkPod("a", 100.0, 0.3, 20.0, 1), LinkPod("b", 100.0, 0.3, 20.0, 0)]
    plan = _plan_link(pods, 25.0, 72, "first", 5.0, 0.10, 8)
    for array in (plan.demand, *plan.midpoints, plan.result.rotations, plan.base.multiples,
                  plan.base.idle_ms):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1
    assert _plan_link(pods, 25.0, 72, "first", 5.0, 0.10, 8) is plan


def _results(run):
    return ({name: (j.start_ms, j.end_ms, j.done, j.durations_ms.tolist(), j.readjustments,
                    j.pause_ms, j.nodes) for name, j in run.jobs.items()},
            run.link_sent_gbit.tolist(), run.pattern_updates, run.recalculations, run.tct_ms)


@pytest.mark.parametrize("policy", ["metronome", "metronome-no-monitor", "metronome-no-phase3"])
def test_the_simulator_gives_the_same_runs_with_and_without_shared_plans(
        policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # seeded contended traces (jobs retried while the links keep their pods)
    for seed in (0, 1):
        sc = contended_trace(40, 4, seed, hours=(0.02, 0.1))
        clear_plan_cache()
        assert _shared_plan.cache_info().currsize == 0
        shared = run_cluster(sc.sim, sc.jobs, policy, seed=seed)
        assert _shared_plan.cache_info().hits > 0
        with monkeypatch.context() as m:
            m.setattr(L, "_shared_plan", _shared_plan.__wrapped__)
            alone = run_cluster(sc.sim, sc.jobs, policy, seed=seed)
        assert _results(shared) == _results(alone), f"seed {seed}"


def test_a_shared_plans_shifts_are_read_only_and_travel_as_a_dict() -> None:
    """The shifts of a shared plan refuse every change (a caller's change would reach
    every later caller of the same link), and still pickle, copy, compare and
    serialise as the dict they hold (run results carry plans to plot workers and
    Dask)."""
    import copy
    import json
    import pickle

    clear_plan_cache()
    pods, cap = _pods(np.random.default_rng(3))
    plan = _plan_link(pods, cap, SETTINGS[0], "first", *SETTINGS[1:])
    shifts = plan.shifts_ms
    assert isinstance(shifts, L.SharedShifts) and set(shifts) == {p.name for p in pods}
    before = dict(shifts)
    name = pods[0].name
    for change in (lambda: shifts.__setitem__(name, 1.0), lambda: shifts.__delitem__(name),
                   shifts.clear, lambda: shifts.pop(name), shifts.popitem,
                   lambda: shifts.setdefault("new", 1.0), lambda: shifts.update({name: 1.0}),
                   lambda: shifts.__ior__({name: 1.0})):
        with pytest.raises(TypeError, match="^shifts_ms: a shared link plan's shifts are "):
            change()
    assert dict(shifts) == before
    assert _plan_link(pods, cap, SETTINGS[0], "first", *SETTINGS[1:]).shifts_ms == before
    for other in (pickle.loads(pickle.dumps(plan)).shifts_ms, copy.deepcopy(shifts),
                  copy.copy(shifts)):
        assert type(other) is L.SharedShifts and other == before
    assert pickle.loads(pickle.dumps(plan)) == plan
    assert json.loads(json.dumps(shifts)) == before
    mine = dict(shifts)
    mine[name] = 1.0  # a copy is the caller's own
    assert shifts[name] == before[name]
