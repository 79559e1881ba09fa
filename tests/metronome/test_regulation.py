"""The regulation rule (tdmcore._kernels.regulation) against its oracle, report by report.

The controller and the simulator's event engine both regulate by this one rule; the
oracle (``oracles/regulation.py``) is written from docs/scheduler.md with deques and
lists.  On thousands of random pods (window, o_t, horizon, limit, thresholds with
and without injected idle, high or low priority) and report streams (normal, slow
bursts, drifted and fast stretches, values exactly on the thresholds) every report
must give the oracle's outcome, re-measured pattern and slow count to the bit, and
leave the same windows, histories, report count and marks.
"""

from __future__ import annotations

import numpy as np
import pytest

from tdmcore._kernels import regulation as R
from tdmcore.metronome.controller import ControllerConfig, Thresholds, Watch
from tests.oracles import regulation as oracle

NAMES = {R.QUIET: oracle.QUIET, R.PAUSE: oracle.PAUSE, R.QUIET_KEEP: oracle.QUIET_KEEP,
         R.PAUSE_KEEP: oracle.PAUSE_KEEP, R.DRIFT_UPDATE: oracle.DRIFT_UPDATE,
         R.PAUSE_UPDATE: oracle.PAUSE_UPDATE}


def pod(rng: np.random.Generator) -> tuple[ControllerConfig, oracle.Limits, bool]:
    window = int(rng.integers(3, 13))
    cfg = ControllerConfig(window=window, o_t=int(rng.integers(1, window)),
                           readjust_limit=int(rng.integers(1, 5)),
                           readjust_horizon=int(rng.choice([5, 20, 50])))
    period = float(rng.uniform(50, 500))
    comm = period * float(rng.uniform(0.05, 0.4))
    idle = float(rng.choice([0.0, rng.uniform(0, 0.1 * period)]))
    a_t = float(rng.choice([1.0, 1.05, 1.1, 1.25]))
    tol = float(rng.choice([0.03, 0.1, 0.2]))
    base, own = period + idle, period - comm + idle
    limits = oracle.Limits(a_t * base, own - tol * base, own + tol * base, idle, comm, period,
                           tol * period)
    return cfg, limits, bool(rng.random() < 0.3)


def stream(rng: np.random.Generator, lim: oracle.Limits, n: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """Iteration times and own parts: near the baseline, slow bursts (longer comm),
    drifted or fast stretches (own parts move), values exactly on the thresholds."""
    base = lim.period + lim.idle
    d, o = [], []
    while len(d) < n:
        kind = rng.choice(["ok", "slow", "drift", "fast", "edge"])
        m = int(rng.integers(1, 15))
        dur = base * (1 + 0.02 * rng.standard_normal(m))
        talk = np.full(m, lim.comm)
        if kind == "slow":
            extra = base * rng.uniform(0.0, 0.6, m)
            dur, talk = dur + extra, talk + extra
        elif kind == "drift":
            dur = dur * rng.uniform(1.15, 1.3)
        elif kind == "fast":
            dur = dur * rng.uniform(0.7, 0.85)
        elif kind == "edge":
            pick = rng.choice([lim.slow, lim.own_lo + lim.comm, lim.own_hi + lim.comm, base])
            dur = np.full(m, float(pick))
        dur = np.maximum(dur, 1e-3)
        d += dur.tolist()
        o += (dur - np.minimum(talk, dur)).tolist()
    return np.asarray(d[:n]), np.asarray(o[:n])


def as_limits(lim: oracle.Limits) -> np.ndarray:
    return Thresholds(lim.slow, lim.own_lo, lim.own_hi, lim.idle, lim.comm, lim.period,
                      lim.tol_ms).as_limits()


def rules(cfg: ControllerConfig) -> np.ndarray:
    out = np.empty(R.N_RULES, dtype=np.int64)
    out[R.WINDOW], out[R.O_T] = cfg.window, cfg.o_t
    out[R.HORIZON], out[R.LIMIT] = cfg.readjust_horizon, cfg.readjust_limit
    return out


def same_state(watch: Watch, mon: oracle.Monitor) -> bool:
    return (watch.durations() == list(mon.durations) and watch.own_parts() == list(mon.own)
            and watch.history() == list(mon.history)
            and watch.history_own() == list(mon.history_own)
            and watch.reports == mon.reports and watch.readjusted_at() == mon.marks)


@pytest.mark.parametrize("chunk", range(5))
def test_the_rule_is_the_oracle(chunk: int) -> None:
    seen = dict.fromkeys(NAMES.values(), 0)
    # re-measured after repeated readjustments: from uncontended iterations, or
    # (none in the history) from the own parts (spec §7, revised 2026-11-28)
    sources = {True: 0, False: 0}
    for seed in range(chunk * 600, chunk * 600 + 600):
        rng = np.random.default_rng(seed)
        cfg, lim, high = pod(rng)
        watch, mon = Watch.empty(cfg), oracle.Monitor(cfg.window, cfg.o_t,
                                                      cfg.readjust_horizon,
                                                      cfg.readjust_limit)
        d, o = stream(rng, lim, int(rng.integers(5, 120)))
        for k in range(d.size):
            got = R.report(*watch, as_limits(lim), rules(cfg), d[k], o[k], high)
            want = mon.report(float(d[k]), float(o[k]), lim, high)
            where = f"seed {seed}, report {k}"
            assert NAMES[got[0]] == want[0], where
            assert got[3] == want[3], where
            if want[1] is not None:
                assert (got[1], got[2]) == (want[1], want[2]), where
            assert same_state(watch, mon), where
            seen[want[0]] += 1
            if want[0] in (oracle.PAUSE_KEEP, oracle.PAUSE_UPDATE):
                sources[any(x <= lim.slow for x in mon.history)] += 1
    assert min(seen.values()) >= 20, seen
    assert min(sources.values()) >= 5, sources


def test_quiet_reports_are_taken_in_one_call() -> None:
    """take_quiet takes exactly the leading reports that lead to nothing."""
    for seed in range(300):
        rng = np.random.default_rng(seed)
        cfg, lim, high = pod(rng)
        d, o = stream(rng, lim, 60)
        batch, single = Watch.empty(cfg), Watch.empty(cfg)
        k = 0
        while k < d.size:
            m = R.take_quiet(*batch, as_limits(lim), rules(cfg), d[k:], o[k:], high)
            for i in range(k, k + m):
                outcome = R.report(*single, as_limits(lim), rules(cfg), d[i], o[i], high)[0]
                assert outcome in (R.QUIET, R.QUIET_KEEP), f"seed {seed}, report {i}"
            k += m
            if k < d.size:
                assert R.report(*batch, as_limits(lim), rules(cfg), d[k], o[k], high)[0] \
                    == R.report(*single, as_limits(lim), rules(cfg), d[k], o[k], high)[0] \
                    not in (R.QUIET, R.QUIET_KEEP)
                k += 1
            assert all(np.array_equal(a, b) for a, b in zip(batch, single, strict=True))


def test_reports_within_the_quiet_bounds_stay_quiet() -> None:
    """bounds(): any reports inside them, in any order, lead to nothing (oracle)."""
    checked = 0
    for seed in range(400):
        rng = np.random.default_rng(seed)
        cfg, lim, high = pod(rng)
        watch = Watch.empty(cfg)
        mon = oracle.Monitor(cfg.window, cfg.o_t, cfg.readjust_horizon, cfg.readjust_limit)
        d, o = stream(rng, lim, int(rng.integers(0, 40)))
        for k in range(d.size):
            R.report(*watch, as_limits(lim), rules(cfg), d[k], o[k], high)
            mon.report(float(d[k]), float(o[k]), lim, high)
        found = R.bounds(*watch, as_limits(lim), rules(cfg), high)
        if found is None:
            continue
        lo, hi, longest = found
        top = min(longest, 4 * lim.period)  # an iteration is at least its own part
        if lo > top:
            continue
        checked += 1
        for _ in range(3 * cfg.readjust_horizon):
            own = float(rng.uniform(lo, min(hi, top)))
            dur = float(rng.uniform(own, top))
            assert mon.report(dur, own, lim, high)[0] == oracle.QUIET, f"seed {seed}"
    assert checked >= 100


def test_a_pause_is_the_target_less_now_modulo_the_period() -> None:
    # (target - now) mod period, Python's sign rule: 1,000 - 1,250 mod 400 = 150
    assert R.pause_ms(1000.0, 1250.0, 400.0) == 150.0
    assert R.pause_ms(1250.0, 1000.0, 400.0) == 250.0
    assert R.pause_ms(5.0, 5.0, 400.0) == 0.0
