"""``Controller.report_iterations`` is exactly a loop of ``report_iteration``."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from tdmcore._kernels import regulation as R
from tdmcore.framework import Scheduler
from tdmcore.metronome.controller import (
    Controller,
    ControllerConfig,
    PatternUpdate,
    Readjustment,
    Watch,
)
from tdmcore.metronome.policies import MetronomeConfig, MetronomePolicy
from tdmcore.model import Cluster, ClusterState, Node, Pod, TrafficPattern

PERIOD = 400.0


def two_jobs() -> tuple[ClusterState, Controller]:
    state = ClusterState(Cluster([Node("n0", 64, 64, 8, 25.0)]))
    config = MetronomeConfig()
    sched = Scheduler(MetronomePolicy(config))
    ctl = Controller(state, ControllerConfig.for_policy(config))
    for job, prio in (("a", 1), ("b", 0)):
        pod = Pod(f"{job}-0", job, pattern=TrafficPattern(PERIOD, 0.2, 25.0), priority=prio)
        ctl.on_reserve(sched.schedule(state, pod).reserve)
    return state, ctl


def reports(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Iterations around the period with slow bursts and a drift, as the model gives."""
    base = PERIOD * rng.choice([1.0, 1.0, 1.0, 1.08, 1.2])
    d = base * np.exp(0.03 * rng.standard_normal(n))
    burst = rng.random(n) < rng.choice([0.0, 0.3, 0.7])
    d[burst] *= 1.0 + rng.random(int(burst.sum())) * 0.5
    comm = d * rng.uniform(0.15, 0.3, n)
    starts = np.cumsum(np.concatenate([[0.0], d[:-1]]))
    return starts, d, comm


def normalise(action: Readjustment | PatternUpdate) -> tuple:
    if isinstance(action, Readjustment):
        return ("pause", action.pod, round(action.pause_ms, 9), action.slow_iterations)
    return ("update", action.job, action.pods, action.new, action.reason)


@pytest.mark.parametrize("seed", range(300))
def test_batch_equals_one_by_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    _, batch = two_jobs()
    _, single = two_jobs()
    pod = rng.choice(["a-0", "b-0"])
    with_comm = bool(rng.random() < 0.7)
    for _ in range(int(rng.integers(1, 5))):  # several batches, as the simulator drains
        starts, d, comm = reports(rng, int(rng.integers(1, 60)))
        got = batch.report_iterations(pod, starts, d, comm if with_comm else None)
        want = []
        for k in range(d.size):
            for a in single.report_iteration(pod, starts[k], d[k],
                                             comm[k] if with_comm else None):
                want.append((k, a))
        assert [(k, normalise(a)) for k, a in got] == [(k, normalise(a)) for k, a in want]
        assert batch.anchors_ms == single.anchors_ms
        assert batch.offsets_ms == pytest.approx(single.offsets_ms)
    wb, ws = batch.watch_state(pod), single.watch_state(pod)
    assert (wb is None) == (ws is None)
    if wb is not None and ws is not None:
        assert wb.durations() == ws.durations()
        assert wb.history() == ws.history()
        assert wb.own_parts() == ws.own_parts()
        assert wb.reports == ws.reports
        assert wb.readjusted_at() == ws.readjusted_at()


def test_the_batch_actually_triggers() -> None:
    # Low-priority b, every iteration 30 % slow: the 6th report pauses it.
    _, ctl = two_jobs()
    d = np.full(8, PERIOD * 1.3)
    starts = np.cumsum(np.concatenate([[0.0], d[:-1]]))
    got = ctl.report_iterations("b-0", starts, d)
    assert [k for k, a in got if isinstance(a, Readjustment)] == [5]


def test_bad_batches_change_nothing() -> None:
    _, ctl = two_jobs()
    before = copy.deepcopy(ctl.monitor.watches)
    for args in ((["x"], [1.0]), ([0.0, 1.0], [1.0]), ([0.0], [0.0]), ([0.0], [1.0], [2.0])):
        with pytest.raises(ValueError, match="_ms"):
            ctl.report_iterations("b-0", *args)
    with pytest.raises(ValueError, match="pod"):
        ctl.report_iterations("nope", [0.0], [1.0])
    assert ctl.monitor.watches.keys() == before.keys()


def test_set_watch_state_refuses_counters_outside_the_rings() -> None:
    """The compiled rule indexes the rings by the counters unchecked: a watch whose
    counters point outside them is refused (it crashed the process before)."""
    _, ctrl = two_jobs()
    pod = "b-0"
    ctrl.report_iteration(pod, 0.0, PERIOD)
    before = ctrl.watch_state(pod)
    assert before is not None
    for index, value in ((R.W_N, 10**9), (R.W_POS, -1), (R.O_POS, ctrl.config.window),
                         (R.H_N, ctrl.config.readjust_horizon + 1), (R.MARKS_N, -1),
                         (R.REPORTS, -5)):
        watch = Watch.empty(ctrl.config)
        watch.counters[index] = value
        with pytest.raises(ValueError, match="watch"):
            ctrl.set_watch_state(pod, watch)
        after = ctrl.watch_state(pod)
        assert after is not None and all(np.array_equal(a, b) for a, b in
                                         zip(after, before, strict=True))
    with pytest.raises(ValueError, match="dtypes"):
        bad = Watch.empty(ctrl.config)
        ctrl.set_watch_state(pod, bad._replace(counters=bad.counters.astype(np.int32)))
    ctrl.set_watch_state(pod, Watch.empty(ctrl.config))  # a consistent one is taken
    assert ctrl.report_iteration(pod, PERIOD, PERIOD) == []


def test_per_job_questions_name_an_unknown_job() -> None:
    _, ctrl = two_jobs()
    for ask in (ctrl.reference, ctrl.target_phase, ctrl.phase_period_ms, ctrl.is_high,
                ctrl.idle_ms, ctrl.thresholds):
        with pytest.raises(ValueError, match="^job: 'ghost' has no placed pod"):
            ask("ghost")
    with pytest.raises(ValueError, match="^job: 'ghost'"):
        ctrl.pause_ms("ghost", 0.0)
    assert ctrl.is_high("a") and not ctrl.is_high("b")
