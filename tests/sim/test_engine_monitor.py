"""The event engine's in-loop monitor acts as the controller would, report by report.

Both run the one regulation rule (:mod:`tdmcore._kernels.regulation`, checked against
its oracle in tests/metronome/test_regulation.py); what this checks is the engine's wiring of
it: the thresholds and windows the simulator loads (``load_monitor_params``), the
stop before a report only the controller can take (``REPORT_CONTROLLER``: a new
pattern, or a target phase that depends on a job outside the engine), and the
pause's target phase computed in the loop from the reference job's anchor.  Both
see the same random report streams (iteration times and comm phases), on random
thresholds and injected idle, for a high- and a low-priority job sharing a link:
after every report the engine's outcome must be the controller's (quiet = no action;
pause = the same pause, to the bit; ``*_KEEP`` = the pattern stood; a stop = a
pattern update, or a target the controller owns), and the engine's windows must
equal the controller's.
"""

from __future__ import annotations

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
from tdmcore.sim.engine import _flow as K
from tdmcore.sim.engine.network import FlowEngine
from tdmcore.sim.run.mirror import load_monitor_params


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
    # b at 188 or 183 ms beside a's 100 (T_high = 200) gets idle injected when low:
    # 12 or 17 ms shorter, within E_T, so 7 or 12 ms per iteration (docs/traffic-circle.md step 2,
    # revised); equal priorities rank by deploy order
    b_prio = int(rng.integers(0, 2))
    for job, prio, period in (("a", 1, 100.0),
                              ("b", b_prio, float(rng.choice([100.0, 188.0, 183.0, 200.0])))):
        duty = float(rng.uniform(.02, .08)) if period in (188.0, 183.0) \
            else float(rng.uniform(.1, .4))
        pod = Pod(f"{job}-0", job, pattern=TrafficPattern(period, duty, 25.0), priority=prio)
        ctrl.on_reserve(sched.schedule(state, pod).reserve)
    engine = FlowEngine(np.array([25.0]), np.zeros(1), window=cfg.window, o_t=cfg.o_t,
                        horizon=cfg.readjust_horizon, limit=cfg.readjust_limit, jobs_hint=2)
    slots = {}
    for job in ("a", "b"):
        slots[job] = engine.add(key=0, compute_ms=1.0, iterations=10**6, start_ms=0.0,
                                links=[-1], cap_gbps=25.0, volume_gbit=0.0,
                                job_period_ms=ctrl._period(job))
    if rng.random() < 0.7:  # the reference job has a phase (else: the offset is the target)
        root = next(iter(set(ctrl.roots.values())), "a")
        ctrl.anchors_ms[root] = float(rng.uniform(0, 1000))
        engine.set_anchor(slots[root], ctrl.anchors_ms[root])
    load(ctrl, slots, engine)
    return ctrl, slots, engine


def load(ctrl: Controller, slots: dict[str, int], engine: FlowEngine) -> None:
    """What the simulator does after the controller took a report."""
    high = ctrl.high_jobs()
    for job, j in slots.items():
        load_monitor_params(engine, j, ctrl, job, high, slots, monitor=True)
        watch = ctrl.watch_state(f"{job}-0") or Watch.empty(ctrl.config)
        engine.set_watch(j, *watch)


def stream(rng: np.random.Generator, period: float, comm: float, n: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """Iteration times near the period, slow bursts (contention: longer comm
    phases), drifted stretches (longer own parts), exact threshold values."""
    d, c = [], []
    while len(d) < n:
        kind = rng.choice(["ok", "slow", "drift", "fast", "edge"])
        m = int(rng.integers(1, 15))
        base = period * (1 + 0.02 * rng.standard_normal(m))
        talk = np.full(m, comm)
        if kind == "slow":
            extra = period * rng.uniform(0.0, 0.6, m)
            base, talk = base + extra, talk + extra
        elif kind == "drift":
            base = base * rng.uniform(1.15, 1.3)
        elif kind == "fast":
            base = base * rng.uniform(0.7, 0.85)
        elif kind == "edge":  # exactly on the thresholds' arithmetic
            base = np.full(m, period * float(rng.choice([1.0, 1.05, 1.1, 1.2, 0.9])))
        d += list(np.maximum(base, 1e-3))
        c += list(np.minimum(talk, np.maximum(base, 1e-3)))
    return np.asarray(d[:n]), np.asarray(c[:n])


@pytest.mark.parametrize("chunk", range(10))
def test_engine_monitor_equals_the_controller(chunk: int) -> None:
    outcomes = dict.fromkeys([R.QUIET, R.PAUSE, K.REPORT_CONTROLLER, R.QUIET_KEEP,
                              R.PAUSE_KEEP], 0)
    with_idle = {True: 0, False: 0}
    for seed in range(chunk * 200, chunk * 200 + 200):
        rng = np.random.default_rng(seed)
        ctrl, slots, engine = setting(rng)
        with_idle[ctrl.idle_ms("b") > 0] += 1
        job = str(rng.choice(["a", "b"]))
        pod, j = f"{job}-0", slots[job]
        with_comm = bool(rng.random() < 0.8)
        pattern = ctrl._pattern(job)
        assert pattern is not None
        t = float(rng.uniform(0, 500))
        durations, comms = stream(rng, ctrl._period(job), pattern.comm_ms,
                                  int(rng.integers(5, 80)))
        for k, (d, c) in enumerate(zip(durations, comms, strict=True)):
            where = f"seed {seed}, report {k}"
            start, t = t, t + float(d)
            limits = ctrl.thresholds(job)
            assert limits is not None
            comm = float(c) if with_comm else None
            engine.set_last_report(j, start, float(d),
                                   float(d) - (comm if comm is not None else limits.comm))
            outcome = engine.report_outcome(j)
            pause_before = engine.pause_taken(j)[0]
            actions = ctrl.report_iteration(pod, start, float(d), comm)
            pauses = [a for a in actions if isinstance(a, Readjustment)]
            updates = [a for a in actions if isinstance(a, PatternUpdate)]
            outcomes[outcome] += 1
            if outcome == K.REPORT_CONTROLLER:
                # a pattern that changes, or a target only the controller can compute
                # (both jobs run in the engine: no target is the controller's own)
                assert updates, where
                load(ctrl, slots, engine)
                continue
            assert not updates, where
            engine.take_report(j, t, outcome)
            pause_after, hold_phase, hold_period = engine.pause_taken(j)
            if outcome in (R.PAUSE, R.PAUSE_KEEP):
                assert len(pauses) == 1, where
                assert pause_after - pause_before == pytest.approx(
                    pauses[0].pause_ms, rel=1e-12, abs=1e-9), where
                assert hold_phase == pytest.approx(
                    (t + pauses[0].pause_ms) % hold_period, abs=1e-9)
            else:
                assert not pauses, where
            want = ctrl.watch_state(pod)
            assert want is not None
            got = Watch(*engine.watch(j))
            assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True)), where
    # the streams reach every outcome, many times, with and without injected idle
    assert min(outcomes.values()) >= 20, outcomes
    assert min(with_idle.values()) >= 10, with_idle
