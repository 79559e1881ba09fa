"""``Controller.report_iterations`` is exactly a loop of ``report_iteration``."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from tdmcore.framework import Scheduler
from tdmcore.metronome.controller import Controller, ControllerConfig, PatternUpdate, Readjustment
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
    before = copy.deepcopy(ctl._watch)
    for args in ((["x"], [1.0]), ([0.0, 1.0], [1.0]), ([0.0], [0.0]), ([0.0], [1.0], [2.0])):
        with pytest.raises(ValueError, match="_ms"):
            ctl.report_iterations("b-0", *args)
    with pytest.raises(ValueError, match="pod"):
        ctl.report_iterations("nope", [0.0], [1.0])
    assert ctl._watch.keys() == before.keys()
