"""OASiS's best schedule: tdmcore against the straightforward DP of Alg. 2 and the MILP.

Instance of docs/benchmarks.md: T = 100 slots, 100 worker + 100 PS servers;
``time_*`` sweep T, servers and workload; ``track_speedup`` records the ratio to
the straightforward DP measured in the same run (same payoff checked first).
``TimeMilpBestSchedule`` times the MILP of problem (27) (HiGHS, one MILP per end
slot) on small instances only: at T = 100, 100 + 100 servers it takes minutes
(``python -m benchmarks.report --milp`` measures it there, with a time limit).
"""

from __future__ import annotations

import timeit

import numpy as np

from tdmcore.oasis.online import Job, best_schedule
from tests.oracles import naive_oasis


def instance(n_slots: int = 100, servers: int = 100, chunks: int = 16, epochs: int = 10,
             seed: int = 0):
    rng = np.random.default_rng([seed, n_slots, servers, chunks, epochs])
    job = Job(0, epochs, chunks, 2, 0.1, 0.05, 1.0, 2.0, (1.0, 2.0), (1.0, 1.0),
              (200.0, 0.1, float(n_slots) / 2))
    wp = rng.uniform(0.01, 0.1, size=(n_slots, servers, 2))
    wf = rng.integers(0, 8, size=(n_slots, servers, 2)).astype(float)
    pp = rng.uniform(0.01, 0.1, size=(n_slots, servers, 2))
    pf = rng.integers(0, 8, size=(n_slots, servers, 2)).astype(float)
    return job, wp, wf, pp, pf


class TimeBestSchedule:
    params = ([25, 50, 100], [10, 100], [(16, 10), (32, 50)])
    param_names = ["slots", "servers", "chunks_epochs"]

    def setup(self, slots, servers, chunks_epochs):
        self.args = instance(slots, servers, *chunks_epochs)
        best_schedule(*self.args)

    def time_best_schedule(self, slots, servers, chunks_epochs):
        best_schedule(*self.args)


def speedup(seed: int = 0) -> tuple[float, float, float]:
    """(tdmcore s, straightforward s, ratio) on the spec's instance (T=100, 100+100)."""
    args = instance(seed=seed)
    got = best_schedule(*args)
    want = naive_oasis.straightforward_dp(*args)
    if got is None or want is None or abs(got.payoff - want) > 1e-6:
        raise AssertionError(f"best_schedule and the straightforward DP disagree: "
                             f"{got and got.payoff} vs {want}")
    fast = float(np.median(timeit.repeat(lambda: best_schedule(*args), number=1, repeat=20)))
    slow = min(timeit.repeat(lambda: naive_oasis.straightforward_dp(*args), number=1,
                             repeat=1))
    return fast, slow, slow / fast


def agree(got: float | None, want: float | None, rel: float = 1e-6) -> bool:
    """Same payoff (both None, or within ``rel`` relative, 1 absolute floor)."""
    if got is None or want is None:
        return got is None and want is None
    return abs(got - want) <= rel * max(1.0, abs(want))


def milp_comparison(slots: int = 100, servers: int = 100, seed: int = 0,
                    time_limit_s: float = 600.0):
    """(tdmcore s, tdmcore payoff, MilpResult) on ``instance(slots, servers, seed=seed)``.

    tdmcore: median of 20 runs; the MILP: one run, proved down to a zero relative
    gap (HiGHS's absolute gap 1e-6), stopped after ``time_limit_s`` in total.
    """
    args = instance(slots, servers, seed=seed)
    got = best_schedule(*args)
    fast = float(np.median(timeit.repeat(lambda: best_schedule(*args), number=1, repeat=20)))
    res = naive_oasis.milp_solve(*args, time_limit_s=time_limit_s, mip_rel_gap=0.0)
    return fast, got and got.payoff, res


class TimeMilpBestSchedule:
    """The MILP peer, T = servers = 10 and 20 (about 0.05 s and 0.5 s per call)."""

    params = [10, 20]
    param_names = ["slots_and_servers"]
    number = 1
    repeat = (1, 5, 10.0)
    rounds = 1
    warmup_time = 0.0
    timeout = 120  # setup (one checked solve) + up to 10 s of samples, with margin

    def setup(self, size):
        self.args = instance(size, size)
        got = best_schedule(*self.args)
        res = naive_oasis.milp_solve(*self.args, time_limit_s=60.0, mip_rel_gap=0.0)
        if not res.optimal or not agree(got and got.payoff, res.payoff):
            raise AssertionError(f"best_schedule and the MILP disagree: "
                                 f"{got and got.payoff} vs {res}")

    def time_milp(self, size):
        naive_oasis.milp_solve(*self.args, mip_rel_gap=0.0)


class TrackOasisSpeedup:
    timeout = 1800
    unit = "x"

    def track_speedup_vs_straightforward_dp(self):
        return speedup(0)[2]
