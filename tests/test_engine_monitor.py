"""The event engine's in-loop monitor is the controller's regulation, report by report.

The engine takes quiet reports and pauses itself and stops before any other report
(``REPORT_CONTROLLER``) so that the controller takes it (spec/metronome.md §7).
Here both see the same random report streams, on random thresholds, for a high-
and a low-priority job sharing a link: after every report the engine's outcome must
be the controller's (quiet = no action; pause = the same pause, to the bit; the
controller's own pattern logic consulted = a stop), and the engine's window,
history, report count and readjustment marks must equal the controller's.
"""

from __future__ import annotations

import numpy as np
import pytest

from tdmcore._kernels import flow as K
from tdmcore.controller import Controller, ControllerConfig, PatternUpdate, Readjustment
from tdmcore.framework import Scheduler
from tdmcore.model import Cluster, ClusterState, Node, Pod, TrafficPattern
from tdmcore.policies import MetronomeConfig, MetronomePolicy
from tdmcore.sim.cluster import load_monitor_params
from tdmcore.sim.network import FlowEngine, MonitorConfig


def setting(rng: np.random.Generator) -> tuple[Controller, dict[str, int], FlowEngine]:
    """Two jobs on one link (``a`` high, ``b`` low) under random thresholds."""
    window = int(rng.integers(3, 13))
    cfg = ControllerConfig(window=window, o_t=int(rng.integers(1, window)),
                           a_t=float(rng.choice([1.0, 1.05, 1.1, 1.25])),
                           drift_tol=float(rng.choice([0.03, 0.1, 0.2])),
                           readjust_limit=int(rng.integers(1, 5)),
                           readjust_horizon=int(rng.choice([5, 20, 50])))
    state = ClusterState(Cluster([Node("n0", 64, 64, 8, 25.0)]))
    sched = Scheduler(MetronomePolicy(MetronomeConfig()))
    ctrl = Controller(state, cfg)
    for job, prio in (("a", 1), ("b", 0)):
        period = float(rng.choice([100.0, 200.0, 400.0]))
        pod = Pod(f"{job}-0", job, pattern=TrafficPattern(period, float(rng.uniform(.1, .4)),
                                                            25.0), priority=prio)
        ctrl.on_reserve(sched.schedule(state, pod).reserve)
    engine = FlowEngine(np.array([25.0]), np.zeros(1),
                        monitor=MonitorConfig(cfg.window, cfg.o_t, cfg.readjust_horizon,
                                              cfg.readjust_limit), jobs_hint=2)
    slots = {}
    for job in ("a", "b"):
        slots[job] = engine.add(key=0, compute_ms=1.0, iterations=10**6, start_ms=0.0,
                                links=[-1], cap_gbps=25.0, volume_gbit=0.0,
                                job_period_ms=ctrl._period(job))
    if rng.random() < 0.7:  # the reference job has a phase (else: the offset is the target)
        root = next(iter(set(ctrl.roots.values())), "a")
        ctrl.anchors_ms[root] = float(rng.uniform(0, 1000))
        engine.jf[K.F_ANCHOR, slots[root]] = ctrl.anchors_ms[root]
    load(ctrl, slots, engine)
    return ctrl, slots, engine


def load(ctrl: Controller, slots: dict[str, int], engine: FlowEngine) -> None:
    """What the simulator does after the controller took a report."""
    high = ctrl.high_jobs()
    for job, j in slots.items():
        load_monitor_params(engine, j, ctrl, job, high, slots, monitor=True)
        state = ctrl.watch_state(f"{job}-0") or ([], [], 0, [])
        engine.set_monitor_state(j, *state)


def stream(rng: np.random.Generator, period: float, n: int) -> np.ndarray:
    """Iterations near the period, slow bursts, and drifted stretches."""
    out = []
    while len(out) < n:
        kind = rng.choice(["ok", "slow", "drift", "fast", "edge"])
        m = int(rng.integers(1, 15))
        if kind == "ok":
            out += list(period * (1 + 0.02 * rng.standard_normal(m)))
        elif kind == "slow":
            out += list(period * rng.uniform(1.0, 1.6, m))
        elif kind == "drift":
            out += list(period * rng.uniform(1.15, 1.3) * (1 + 0.01 * rng.standard_normal(m)))
        elif kind == "fast":
            out += list(period * rng.uniform(0.7, 0.85) * (1 + 0.01 * rng.standard_normal(m)))
        else:  # exactly on the thresholds' arithmetic
            out += [period * float(rng.choice([1.0, 1.05, 1.1, 1.2, 0.9]))] * m
    return np.maximum(np.asarray(out[:n]), 1e-3)


def state_of(engine: FlowEngine, j: int) -> tuple:
    window, history, reports, marks = engine.monitor_state(j)
    return window, history, reports, marks


@pytest.mark.parametrize("chunk", range(10))
def test_engine_monitor_equals_the_controller(chunk: int) -> None:
    outcomes = {K.REPORT_QUIET: 0, K.REPORT_PAUSE: 0, K.REPORT_CONTROLLER: 0}
    for seed in range(chunk * 200, chunk * 200 + 200):
        rng = np.random.default_rng(seed)
        ctrl, slots, engine = setting(rng)
        job = str(rng.choice(["a", "b"]))
        pod, j = f"{job}-0", slots[job]
        consulted: list[str] = []
        original = ctrl._apply_update

        def spy(*args, _orig=original, _log=consulted):  # type: ignore[no-untyped-def]
            _log.append(args[3])
            return _orig(*args)

        ctrl._apply_update = spy  # type: ignore[method-assign]
        t = float(rng.uniform(0, 500))
        for k, d in enumerate(stream(rng, ctrl._period(job), int(rng.integers(5, 80)))):
            start, t = t, t + float(d)
            engine.jf[K.F_LAST_DUR, j] = d
            engine.jf[K.F_LAST_START, j] = start
            engine.jf[K.F_ANCHOR, j] = max(engine.jf[K.F_ANCHOR, j], start)
            outcome = K.monitor_outcome(j, 0.0, *engine._state())
            pause_before = float(engine.jf[K.F_PAUSE_MS, j])
            consulted.clear()
            actions = ctrl.report_iteration(pod, start, float(d))
            pauses = [a for a in actions if isinstance(a, Readjustment)]
            updates = [a for a in actions if isinstance(a, PatternUpdate)]
            where = f"seed {seed}, report {k}"
            outcomes[outcome] += 1
            if outcome == K.REPORT_CONTROLLER:
                # the controller's own logic ran: a pattern check, or a target it owns
                assert consulted or updates or engine.ji[K.I_ROOT, j] == -2, where
                load(ctrl, slots, engine)
                continue
            assert not consulted and not updates, where
            K.monitor_apply(j, t, outcome, 0.0, *engine._state())
            if outcome == K.REPORT_PAUSE:
                assert len(pauses) == 1, where
                assert engine.jf[K.F_PAUSE_MS, j] - pause_before == pytest.approx(
                    pauses[0].pause_ms, rel=1e-12, abs=1e-9), where
                period = ctrl._period(job)
                assert engine.jf[K.F_HOLD_PHASE, j] == pytest.approx(
                    (t + pauses[0].pause_ms) % engine.jf[K.F_JOB_PERIOD, j], abs=1e-9)
                assert period > 0
            else:
                assert not pauses, where
            got = state_of(engine, j)
            want = ctrl.watch_state(pod)
            assert want is not None
            assert got[0] == want[0] and got[1] == want[1], where
            assert got[2] == want[2] and got[3] == want[3], where
    # the streams reach every outcome, many times
    assert min(outcomes.values()) >= 50, outcomes
