"""Clear transfers are the event loop's, bit for bit (docs/simulator.md, "The event
loop").

A job whose transfers start with no other transfer on any of their links runs them
*clear*: its iteration is one event.  The engine with ``clear=False`` steps every
transfer through the loop (a link event each, then the tail), the slow path.  The
two must give identical numbers, not close ones: the same iteration ends, the same
volumes sent per pod and per link whenever they are read, on random instances with
arrivals, departures, background traffic, contention efficiencies below 1, mixed
rates, exact ties (no noise, round numbers) and flushes in the middle of clear
transfers; and, in the cluster simulator, the same per-job results on seeded
contended traces for every policy.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from benchmarks.asv_bench.instances import contended_trace
from tdmcore.sim.cluster import CLUSTER_POLICIES, run_cluster
from tdmcore.sim.engine import _flow as K
from tdmcore.sim.engine.network import FlowEngine
from tdmcore.sim.run import loop


def _drive(seed: int, clear: bool):
    """A random engine run: jobs arrive while it runs and leave when done; every
    ``every`` ms the links are flushed and read as the cluster's sampler reads them.
    Returns everything observable and the engine's counts."""
    rng = np.random.default_rng(seed)
    ties = seed % 2 == 0  # no noise, round numbers: simultaneous ends
    n_links = int(rng.integers(1, 6))
    capacity = rng.choice([10.0, 25.0], size=n_links)
    background = np.where(rng.random(n_links) < 0.3, 2.0, 0.0)
    engine = FlowEngine(capacity, background, seed=seed, sigma=0.0 if ties else 0.01,
                        samples_per_job=64, jobs_hint=1, clear=clear,
                        contention_efficiency=float(rng.choice([1.0, 0.9])))
    arrivals = []
    for key in range(int(rng.integers(1, 9))):
        links = sorted(int(x) for x in rng.choice(n_links, size=int(rng.integers(1, n_links + 1)),
                                                  replace=False))
        if rng.random() < 0.2:
            links.append(-1)  # a pod on a node with another of the job's
        period = float(rng.choice([100.0, 150.0, 200.0]) if ties else rng.uniform(50, 300))
        duty = float(rng.choice([0.0, 0.2, 0.25, 0.5]))
        rate = float(rng.choice([5.0, 10.0, 25.0]))
        arrive = float(rng.choice([0.0, 50.0, 100.0, 1000.0]) if ties else rng.uniform(0, 3000))
        arrivals.append((arrive, key, dict(
            key=key, compute_ms=period * (1 - duty), iterations=int(rng.integers(1, 150)),
            start_ms=arrive, links=links, cap_gbps=rate, volume_gbit=rate * period * duty * 1e-3,
            tail_ms=float(rng.choice([0.0, 0.3])), idle_ms=float(rng.choice([0.0, 10.0])))))
    arrivals.sort(key=lambda a: (a[0], a[1]))
    every = float(rng.choice([37.0, 250.0, 1e9]))
    seen: list[object] = []
    slots: dict[int, int] = {}
    t, sample, a = 0.0, every, 0
    while True:
        while a < len(arrivals) and arrivals[a][0] <= t:
            _, key, job = arrivals[a]
            slots[engine.add(**job)] = key
            a += 1
        until = min(sample, arrivals[a][0] if a < len(arrivals) else np.inf)
        t, reason, slot = engine.run(t, until)
        if reason == K.STOP_SAMPLES:
            seen.append(("samples", slots[slot], engine.take_samples(slot).tolist()))
        elif reason == K.STOP_FINISHED:
            seen.append(("end", slots[slot], t, engine.take_samples(slot).tolist(),
                         engine.pod_sent(slot).tolist()))
            engine.remove(slot)
            del slots[slot]
        elif reason == K.STOP_IDLE:
            if a >= len(arrivals):
                break
            t = until  # nothing runs until the next arrival or sample
        if reason in (K.STOP_TIME, K.STOP_IDLE) and t >= sample:
            engine.flush(t)
            seen.append(("sample", t, engine.link_sent_at(t).tolist(),
                         [engine.pod_sent_at(j, t).tolist() for j in sorted(slots)]))
            sample = t + every
    seen.append(("links", engine.link_sent().tolist()))
    return seen, engine.counts()


def test_clear_transfers_are_the_loops_bit_for_bit() -> None:
    cleared = back = 0
    for seed in range(400):
        fast, (_, n_clear, n_back) = _drive(seed, clear=True)
        slow, (_, none, _) = _drive(seed, clear=False)
        assert fast == slow, f"seed {seed}"
        assert none == 0
        cleared, back = cleared + n_clear, back + n_back
    # the comparison means something only if iterations ran clear and clear
    # transfers went back to the loop (another transfer came, or a flush)
    assert cleared > 5_000 and back > 500, (cleared, back)


def test_a_clear_iteration_is_two_events() -> None:
    # job a sends 0.5 Gbit over links 0 and 1 (10 Gbps) after 50 ms of compute, then
    # waits its 1 ms tail, 100 times; job b, on the same links, computes all along.
    # In the loop each iteration of a is four events (its compute's end, a link
    # event per transfer, its tail's end); clear, two (its compute's end, its end).
    def run(clear: bool) -> tuple[tuple[int, int, int], float]:
        engine = FlowEngine(np.array([10.0, 10.0]), np.zeros(2), clear=clear, jobs_hint=2)
        a = engine.add(key=0, compute_ms=50.0, iterations=100, start_ms=0.0, links=[0, 1],
                       cap_gbps=10.0, volume_gbit=0.5, tail_ms=1.0)
        engine.add(key=1, compute_ms=1e6, iterations=1, start_ms=0.0, links=[0, 1],
                   cap_gbps=10.0, volume_gbit=0.5)
        t, reason, slot = engine.run(0.0, np.inf)
        assert (reason, slot) == (K.STOP_FINISHED, a)
        return engine.counts(), t

    (fast, _, _), end = run(True)
    (slow, none, _), same = run(False)
    assert end == same == pytest.approx(100 * 101.0)
    assert (none, fast) == (0, 2 + 2 * 100)  # b's start and a's; then two per iteration
    assert slow == 2 + 4 * 100
    assert run(True)[0][1:] == (100, 0)  # all clear, none went back


def _results(run):
    return ({name: (j.start_ms, j.end_ms, j.done, j.busy_ms, j.durations_ms.tolist(),
                    j.readjustments, j.pause_ms, j.nodes) for name, j in run.jobs.items()},
            run.link_sent_gbit.tolist(), run.gamma, run.pattern_updates, run.tct_ms)


@pytest.mark.parametrize("policy", CLUSTER_POLICIES)
def test_contended_traces_give_the_loops_results(policy, monkeypatch) -> None:
    # seeded contended traces (jobs of 2-16 GPUs sharing host links; short jobs here)
    made: list[FlowEngine] = []

    def engine(*args, forced: bool, **kwargs) -> FlowEngine:
        made.append(FlowEngine(*args, **{**kwargs, "clear": forced}))
        return made[-1]

    cleared = 0
    for seed in (0, 1, 2):
        sc = contended_trace(24, 4, seed, hours=(0.02, 0.1))
        monkeypatch.setattr(loop, "FlowEngine", functools.partial(engine, forced=True))
        fast = run_cluster(sc.sim, sc.jobs, policy, seed=seed)
        cleared += made[-1].counts()[1]
        monkeypatch.setattr(loop, "FlowEngine", functools.partial(engine, forced=False))
        slow = run_cluster(sc.sim, sc.jobs, policy, seed=seed)
        assert made[-1].counts()[1] == 0
        assert _results(fast) == _results(slow), f"seed {seed}"
    if policy not in ("exclusive", "ideal"):  # those never share a link
        assert cleared > 100
