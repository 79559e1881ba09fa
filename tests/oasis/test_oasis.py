"""OASiS's best schedule against an independent MILP of problem (27) (HiGHS).

For every end slot the MILP (``milp_payoff``, shared with the benchmarks in
tests/oracles/naive_oasis.py) minimizes the cost of covering the job's work
within [start, end] under constraints (2)-(7) written straight from docs/oasis.md;
the best payoff over end slots must equal tdmcore's.  The schedule tdmcore returns is
also checked against (2)-(10) on its own.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from tdmcore.oasis.online import Job, best_schedule, sigmoid_utility
from tests.oracles.naive_oasis import chunks_per_worker_slot, milp_payoff
from tests.oracles.naive_oasis import sigmoid_utility as spec_utility


def random_instance(seed: int):
    rng = np.random.default_rng(seed)
    n_slots, n_workers, n_ps, n_res = (int(rng.integers(3, 8)), int(rng.integers(1, 4)),
                                       int(rng.integers(1, 3)), 2)
    ps_res = rng.integers(0, 3, size=n_res).astype(float)
    ps_res[int(rng.integers(0, n_res))] += 1.0  # at least one resource type is used
    job = Job(
        arrival=int(rng.integers(0, n_slots - 1)),
        epochs=int(rng.integers(1, 4)),
        chunks=int(rng.integers(1, 5)),
        minibatches=int(rng.integers(1, 3)),
        tau=float(rng.choice([0.15, 0.2, 0.3, 0.45])),
        grad_size=float(rng.choice([0.0, 0.025, 0.05])),
        worker_bw=float(rng.choice([1.0, 2.0])),
        ps_bw=float(rng.choice([1.0, 2.0, 3.0, 4.0])),
        worker_res=tuple(float(x) for x in rng.integers(1, 3, size=n_res)),
        ps_res=tuple(float(x) for x in ps_res),
        utility=(float(rng.uniform(5, 40)), float(rng.choice([0.0, 0.5, 3.0])),
                 float(rng.integers(0, 4))),
    )
    if chunks_per_worker_slot(job) < 1:  # keep at least one chunk per worker-slot
        job = Job(**{**job.__dict__, "minibatches": 1})
    wp = rng.uniform(0.1, 2.0, size=(n_slots, n_workers, n_res))
    wf = rng.integers(0, 5, size=(n_slots, n_workers, n_res)).astype(float)
    pp = rng.uniform(0.1, 2.0, size=(n_slots, n_ps, n_res))
    pf = rng.integers(0, 4, size=(n_slots, n_ps, n_res)).astype(float)
    return job, wp, wf, pp, pf


def check_feasible(job: Job, sched, wp, wf, pp, pf) -> None:
    """Constraints (2)-(10) on the returned schedule, independently."""
    alpha, beta = np.array(job.worker_res), np.array(job.ps_res)
    y, z = sched.workers, sched.ps
    assert y[: job.arrival].sum() == 0 and z[: job.arrival].sum() == 0  # (9)-(10)
    assert y[sched.end_slot + 1:].sum() == 0  # (8): nothing after the end slot
    assert y[sched.end_slot].sum() > 0
    c = chunks_per_worker_slot(job)
    assert c * y.sum() >= job.epochs * job.chunks  # (2)
    per_slot_y, per_slot_z = y.sum(axis=1), z.sum(axis=1)
    assert np.all(per_slot_y <= job.chunks)  # (3)
    assert np.all(y[:, :, None] * alpha <= wf + 1e-9)  # (4)
    assert np.all(z[:, :, None] * beta <= pf + 1e-9)  # (5)
    assert np.all(job.worker_bw * per_slot_y <= job.ps_bw * per_slot_z + 1e-9)  # (6)
    assert np.all(per_slot_z <= per_slot_y)  # (7)
    cost = float((y * (wp * alpha).sum(axis=2)).sum() + (z * (pp * beta).sum(axis=2)).sum())
    assert cost == pytest.approx(sched.cost, abs=1e-9)
    utility = spec_utility(sched.end_slot - job.arrival, *job.utility)
    assert sched.payoff == pytest.approx(utility - cost, abs=1e-9)


@pytest.mark.parametrize("chunk", range(40))
def test_best_schedule_equals_milp(chunk: int) -> None:
    """1,600 random instances (40 per chunk): the same optimal payoff as the MILP
    (with the 400 of the boundary test below, 2,000)."""
    feasible = 0
    for seed in range(chunk * 40, (chunk + 1) * 40):
        job, wp, wf, pp, pf = random_instance(seed)
        got = best_schedule(job, wp, wf, pp, pf)
        want = milp_payoff(job, wp, wf, pp, pf)
        if want is None:
            assert got is None, seed
            continue
        feasible += 1
        assert got is not None, seed
        assert got.payoff == pytest.approx(want, abs=1e-6), seed
        check_feasible(job, got, wp, wf, pp, pf)
    assert feasible >= 5  # about a third of the generator's instances are feasible


def test_hand_example() -> None:
    # 2 slots, one worker server (price 1 per worker, room for 2), one PS server
    # (price 0.5, room for 1); job: V = 1 epoch x 2 chunks, c = floor(1/(1 x 0.5)) = 2
    # chunks per worker-slot -> 1 worker-slot; b = B -> 1 PS.  Utility with g2 = 0
    # (time-insensitive): 10 / (1 + e^0) = 5.  Best: slot 0, cost 1 + 0.5 ->
    # payoff 5 - 1.5 = 3.5, end slot 0.
    job = Job(0, 1, 2, 1, 0.5, 0.0, 1.0, 1.0, (1.0,), (1.0,), (10.0, 0.0, 0.0))
    sched = best_schedule(job, np.ones((2, 1, 1)), np.full((2, 1, 1), 2.0),
                          np.full((2, 1, 1), 0.5), np.ones((2, 1, 1)))
    assert sched is not None
    assert (sched.end_slot, sched.cost, sched.payoff) == (0, 1.5, 3.5)
    assert sched.workers[:, 0].tolist() == [1, 0] and sched.ps[:, 0].tolist() == [1, 0]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epochs": 0}, "epochs"),
        ({"tau": -1.0}, "tau"),
        ({"worker_bw": 0.0}, "worker_bw"),
        ({"grad_size": -1.0}, "grad_size"),
        ({"utility": (1.0, -1.0, 0.0)}, "utility"),
        ({"worker_res": (-1.0,)}, "worker_res"),
        ({"ps_res": (1.0, 1.0)}, "ps_res"),
        ({"arrival": -1}, "arrival"),
    ],
)
def test_bad_jobs_name_the_argument(kwargs, name) -> None:
    base = {"arrival": 0, "epochs": 1, "chunks": 2, "minibatches": 1, "tau": 0.5,
            "grad_size": 0.0, "worker_bw": 1.0, "ps_bw": 1.0, "worker_res": (1.0,),
            "ps_res": (1.0,), "utility": (10.0, 0.0, 0.0)}
    with pytest.raises(ValueError, match=f"^{name}"):
        Job(**{**base, **kwargs})


def test_bad_price_arrays_name_the_argument() -> None:
    job = Job(0, 1, 2, 1, 0.5, 0.0, 1.0, 1.0, (1.0,), (1.0,), (10.0, 0.0, 0.0))
    ok = np.ones((2, 1, 1))
    for args, name in (((np.ones((2, 1)), ok, ok, ok), "worker_price"),
                       ((ok, np.ones((3, 1, 1)), ok, ok), "worker_free"),
                       ((ok, ok, np.ones((3, 1, 1)), np.ones((3, 1, 1))), "ps_price"),
                       ((ok, ok, ok, -ok), "ps_free"),
                       ((np.full((2, 1, 1), np.nan), ok, ok, ok), "worker_price"),
                       ((np.ones((2, 1, 2)), np.ones((2, 1, 2)), ok, ok), "worker_price")):
        with pytest.raises(ValueError, match=f"^{name}"):
            best_schedule(job, *args)
    slow = Job(0, 1, 2, 4, 0.5, 0.0, 1.0, 1.0, (1.0,), (1.0,))  # 4 x 0.5 slots per chunk
    with pytest.raises(ValueError, match="^job: .*more than one slot"):
        best_schedule(slow, ok, ok, ok, ok)
    assert math.isfinite(sigmoid_utility(1e9, 1.0, 1.0, 0.0))


# ------------------------------------------------------------- online (Alg. 1)
from tdmcore.oasis.online import OnlineScheduler, PriceBounds, min_completion_slots  # noqa: E402


def small_job(arrival=0, chunks=4, utility=(40.0, 0.5, 4.0), epochs=2):
    return Job(arrival, epochs, chunks, 1, 0.3, 0.05, 1.0, 2.0, (1.0, 2.0), (1.0, 1.0), utility)


def test_prices_follow_eqs_22_26() -> None:
    # U = 16, L = 1, half the capacity used -> price = 1 x 16^(1/2) = 4; empty -> L = 1
    bounds = PriceBounds((16.0, 16.0), 1.0, (4.0, 4.0), 1.0)
    online = OnlineScheduler(np.full((1, 2), 4.0), np.full((1, 2), 2.0), 3, bounds)
    online.worker_used[0, 0] = [2.0, 0.0]
    online.ps_used[1, 0] = [2.0, 1.0]
    p, q = online.prices()
    assert p[0, 0].tolist() == [4.0, 1.0] and p[1, 0].tolist() == [1.0, 1.0]
    assert q[1, 0].tolist() == [4.0, 2.0]  # 4^(2/2) and 4^(1/2)
    # alpha = max(1, ln 16, ln 4) = 2.77 -> ratio 2 alpha = 5.55
    assert bounds.competitive_ratio == pytest.approx(2 * math.log(16))


def test_bounds_from_jobs() -> None:
    job = small_job()
    # t_min = ceil(E M (tau + 2e/b)) = ceil(2 x 1 x 0.4) = 1 slot: it can end in its
    # arrival slot, delay 0, so U takes f(0) = 40 / (1 + e^(0.5 (0-4)))
    assert min_completion_slots(job) == 1
    best = sigmoid_utility(0, 40.0, 0.5, 4.0)
    bounds = PriceBounds.from_jobs([job], 10)
    assert bounds.u1 == pytest.approx((best / 1.0, best / 2.0))
    # L1 = f(T - a) / (4 sum(alpha) ceil(E N M (tau + 2e/b))): the last of slots 0..9
    # is a delay of 9 for a job arriving in slot 0; / (4 x 3 x ceil(3.2))
    assert bounds.l1 == pytest.approx(sigmoid_utility(9, 40.0, 0.5, 4.0) / (4 * 3 * 4))
    with pytest.raises(ValueError, match="^jobs:"):
        PriceBounds.from_jobs([], 10)
    with pytest.raises(ValueError, match="^l1:"):
        PriceBounds((1.0,), 0.0, (1.0,), 1.0)


def test_bounds_take_the_delays_a_schedule_can_have() -> None:
    # A steep utility worth 5 up to a delay of 4 and nothing from 5 on: on 5 slots a
    # job arriving in slot 0 can end as late as slot 4 (delay 4), still worth 5, so L
    # is defined and set by that value (the spec's f(T - a) read with slots 1..T);
    # it runs 1 slot at the fastest, delay 0, so U is f(0) per unit, not f(1).
    job = small_job(utility=(5.0, 701.0, 4.5))
    assert min_completion_slots(job) == 1
    bounds = PriceBounds.from_jobs([job], 5)
    assert bounds.l1 == pytest.approx(sigmoid_utility(4, 5.0, 701.0, 4.5) / (4 * 3 * 4))
    assert bounds.u1[0] == pytest.approx(sigmoid_utility(0, 5.0, 701.0, 4.5))
    assert bounds.u1[0] == pytest.approx(5.0)
    # the DP agrees: with every price at L the job ends in its arrival slot, delay 0
    online = OnlineScheduler(np.full((2, 2), 4.0), np.full((2, 2), 4.0), 5, bounds)
    decision = online.submit(job)
    assert decision.admitted and decision.schedule is not None
    assert decision.schedule.end_slot == 0
    # a job arriving after the horizon has no completion and does not set L
    late = small_job(arrival=7)
    assert PriceBounds.from_jobs([job, late], 5).l1 == pytest.approx(bounds.l1)


def test_ps_needed_is_constraint_6() -> None:
    from tdmcore._kernels.oasis_dp import ps_needed

    # z = ceil(b y / B): any traffic needs a PS, a quotient just above a whole
    # number needs one more, and float round-off on a whole number does not
    assert ps_needed(3, 1e-10, 1.0) == 1
    assert ps_needed(5, 1.0000000001, 1.0) == 6
    assert ps_needed(10, 1000000.0001, 1000000.0) == 11
    assert ps_needed(3, 0.1, 0.3) == 1
    assert ps_needed(5, 1.0, 1.0) == 5
    assert ps_needed(4, 0.0, 1.0) == 0
    for y in range(1, 40):
        for b, big_b in ((1.0, 3.0), (2.5, 1.0), (0.7, 0.7), (1e-9, 5.0)):
            z = ps_needed(y, b, big_b)
            assert b * y <= big_b * z * (1 + 1e-12)  # (6)
            assert z == 0 or b * y > big_b * (z - 1)  # the fewest


def test_a_quotient_just_above_a_whole_number_needs_one_more_ps_in_the_oracle_too() -> None:
    # b y / B = 5.0000000005: 6 PSs, more than the 5 workers (7), so no schedule. The
    # straightforward DP had an extra 1e-9 of slack and found one (a review, 2026-11-24);
    # the MILP oracle still does, within HiGHS's feasibility tolerance (1e-7).
    from tests.oracles.naive_oasis import straightforward_dp

    job = Job(0, 1, 5, 1, 1.0, 0.0, 1.0000000001, 1.0, (1.0,), (1.0,), (5.0, 0.0, 0.0))
    room = (np.full((1, 1, 1), 0.1), np.full((1, 1, 1), 5.0), np.full((1, 1, 1), 0.1),
            np.full((1, 1, 1), 5.0))
    assert best_schedule(job, *room) is None
    assert straightforward_dp(job, *room) is None


def test_online_admits_commits_and_never_overcommits() -> None:
    rng = np.random.default_rng(5)
    n_slots = 12
    jobs = [small_job(arrival=int(a), chunks=int(rng.integers(2, 6)),
                      utility=(float(rng.uniform(5, 60)), float(rng.choice([0.0, 0.5, 2.0])),
                               float(rng.integers(1, 6))))
            for a in sorted(rng.integers(0, 10, size=25))]
    bounds = PriceBounds.from_jobs(jobs, n_slots)
    online = OnlineScheduler(np.full((2, 2), 4.0), np.full((1, 2), 2.0), n_slots, bounds)
    outcomes = []
    for job in jobs:
        before = (online.worker_used.copy(), online.ps_used.copy())
        result = online.submit(job)
        outcomes.append(result.admitted)
        if result.admitted:
            assert result.schedule.payoff > 0
            used = result.schedule.workers[:, :, None] * np.array(job.worker_res)
            np.testing.assert_allclose(online.worker_used - before[0], used)
        else:
            np.testing.assert_array_equal(online.worker_used, before[0])
            np.testing.assert_array_equal(online.ps_used, before[1])
        assert np.all(online.worker_used <= online.worker_capacity + 1e-9)
        assert np.all(online.ps_used <= online.ps_capacity + 1e-9)
    assert any(outcomes) and not all(outcomes)  # capacity runs out for some
    assert online.total_utility == pytest.approx(sum(
        sigmoid_utility(s.end_slot - j.arrival, *j.utility) for j, s in online.admitted))


def test_online_rejects_a_job_whose_payoff_is_not_positive() -> None:
    # L = 1: one worker-slot costs at least 1 x (1 + 2) + PS 1 x (1 + 1) = 5 > f <= 0.5
    bounds = PriceBounds((10.0, 10.0), 1.0, (10.0, 10.0), 1.0)
    online = OnlineScheduler(np.full((2, 2), 4.0), np.full((1, 2), 2.0), 6, bounds)
    result = online.submit(small_job(utility=(1.0, 0.0, 0.0)))
    assert not result.admitted and result.reason.startswith("payoff")
    assert result.schedule is not None and result.schedule.payoff <= 0
    assert not online.worker_used.any()


# ------------------------------------------------------------ offline optimum
from tdmcore.oasis.online import offline_optimum  # noqa: E402


@pytest.mark.parametrize("seed", range(12))
def test_offline_optimum_bounds_the_online_algorithm(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n_slots = int(rng.integers(4, 7))
    jobs = [small_job(arrival=int(a), chunks=int(rng.integers(1, 4)), epochs=1,
                      utility=(float(rng.uniform(5, 40)), float(rng.choice([0.0, 1.0])),
                               float(rng.integers(0, 3))))
            for a in sorted(rng.integers(0, n_slots - 1, size=int(rng.integers(2, 5))))]
    cap_w, cap_p = np.full((2, 2), 4.0), np.full((1, 2), 2.0)
    offline = offline_optimum(jobs, cap_w, cap_p, n_slots)
    online = OnlineScheduler(cap_w, cap_p, n_slots, PriceBounds.from_jobs(jobs, n_slots))
    for job in jobs:
        online.submit(job)
    assert offline.total_utility >= online.total_utility - 1e-6
    # the offline schedules are feasible: (2)-(7) per job, (4)-(5) summed over jobs
    used_w = np.zeros((n_slots, 2, 2))
    used_p = np.zeros((n_slots, 1, 2))
    total = 0.0
    for job, ok, sched in zip(jobs, offline.admitted, offline.schedules, strict=True):
        if not ok:
            continue
        y, z = sched.workers.sum(axis=1), sched.ps.sum(axis=1)
        assert chunks_per_worker_slot(job) * y.sum() >= job.workload_chunks
        assert np.all(y <= job.chunks) and np.all(z <= y)
        assert np.all(job.worker_bw * y <= job.ps_bw * z + 1e-9)
        assert y[: job.arrival].sum() == 0 and y[sched.end_slot + 1:].sum() == 0
        used_w += sched.workers[:, :, None] * np.array(job.worker_res)
        used_p += sched.ps[:, :, None] * np.array(job.ps_res)
        total += sched.payoff
    assert np.all(used_w <= cap_w + 1e-9) and np.all(used_p <= cap_p + 1e-9)
    assert total == pytest.approx(offline.total_utility, abs=1e-6)


def test_offline_optimum_of_one_job_is_its_best_utility() -> None:
    # one job alone, free resources: the offline optimum is f at the earliest end
    job = small_job(utility=(30.0, 1.0, 2.0))
    offline = offline_optimum([job], np.full((2, 2), 8.0), np.full((1, 2), 4.0), 5)
    assert offline.admitted == (True,)
    assert offline.total_utility == pytest.approx(sigmoid_utility(offline.schedules[0].end_slot,
                                                                  30.0, 1.0, 2.0))
    assert offline.schedules[0].end_slot == 0  # 8 chunks, c = 2 -> 4 workers, all fit


def test_bounds_quantile_only_raises_l() -> None:
    jobs = [small_job(utility=(float(g1), 2.0, 3.0)) for g1 in (1, 10, 100)]
    jobs.append(small_job(utility=(50.0, 0.0, 0.0)))
    spec = PriceBounds.from_jobs(jobs, 40)
    robust = PriceBounds.from_jobs(jobs, 40, quantile=0.75)
    # per-job values f(T - a) / (4 sum(alpha) work): the three critical ones ~e^-74,
    # the insensitive one 50 / (4 x 3 x 4): the minimum is a critical job, the 0.75
    # quantile ("lower") the largest critical value
    assert spec.l1 < 1e-30 and spec.l1 < robust.l1 < 50 / 48
    assert robust.u1 == pytest.approx(spec.u1)


_GOOD_CAP = np.full((2, 2), 4.0)


@pytest.mark.parametrize("call, name", [
    (lambda b: OnlineScheduler(np.full((2,), 4.0), _GOOD_CAP, 5, b), "worker_capacity"),
    (lambda b: OnlineScheduler(_GOOD_CAP, -_GOOD_CAP, 5, b), "ps_capacity"),
    (lambda b: OnlineScheduler(_GOOD_CAP, _GOOD_CAP, 0, b), "n_slots"),
    (lambda b: OnlineScheduler(_GOOD_CAP, _GOOD_CAP, 5, "bounds"), "bounds"),
    (lambda b: OnlineScheduler(np.full((2, 3), 4.0), np.full((2, 3), 4.0), 5, b), "bounds"),
    (lambda b: OnlineScheduler(_GOOD_CAP, _GOOD_CAP, 5, b).submit("job"), "job"),
    (lambda b: OnlineScheduler(_GOOD_CAP, _GOOD_CAP, 5, b).submit(
        Job(0, 1, 1, 1, 0.1, 0.0, 1.0, 1.0, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0))), "job"),
    (lambda b: PriceBounds((1.0, 2.0), 4.0, (8.0, 8.0), 1.0), "u1"),
    (lambda b: PriceBounds((8.0, 8.0), 1.0, (8.0, float("nan")), 1.0), "u2"),
    (lambda b: PriceBounds.from_jobs([small_job()], 0), "n_slots"),
    (lambda b: PriceBounds.from_jobs([small_job()], 10, eta1=0.0), "eta1"),
    (lambda b: PriceBounds.from_jobs([small_job()], 10, quantile=1.0), "quantile"),
    (lambda b: PriceBounds.from_jobs(["job"], 10), "jobs"),
    (lambda b: offline_optimum([], _GOOD_CAP, _GOOD_CAP, 5), "jobs"),
    (lambda b: offline_optimum([small_job()], -_GOOD_CAP, _GOOD_CAP, 5), "worker_capacity"),
    (lambda b: offline_optimum([small_job()], _GOOD_CAP, _GOOD_CAP, 0), "n_slots"),
    (lambda b: best_schedule(small_job(), np.ones((5, 2, 2)), np.ones((5, 2, 2)),
                             np.ones((5, 2, 2)), np.ones((5, 2, 2)), now=-1), "now"),
    (lambda b: best_schedule(small_job(arrival=6), np.ones((5, 2, 2)), np.ones((5, 2, 2)),
                             np.ones((5, 2, 2)), np.ones((5, 2, 2))), "job"),
])
def test_online_api_bad_input_names_the_argument(call, name) -> None:
    bounds = PriceBounds((8.0, 8.0), 1.0, (8.0, 8.0), 1.0)
    with pytest.raises(ValueError, match=f"^{name}"):
        call(bounds)


def test_rejected_submit_changes_nothing() -> None:
    bounds = PriceBounds((8.0, 8.0), 1.0, (8.0, 8.0), 1.0)
    online = OnlineScheduler(_GOOD_CAP, _GOOD_CAP, 5, bounds)
    # 40 chunks need 40 worker-slots at c = 1 with at most 2 workers: infeasible in 5 slots
    huge = small_job(chunks=2, epochs=20)
    result = online.submit(huge)
    assert not result.admitted and result.reason
    assert not online.worker_used.any() and not online.ps_used.any()
    assert online.total_utility == 0.0 and online.admitted == []


def test_offline_optimum_says_whether_it_proved_optimality() -> None:
    jobs = [small_job(arrival=a, chunks=3) for a in (0, 1, 2)]
    proved = offline_optimum(jobs, np.full((2, 2), 4.0), np.full((1, 2), 2.0), 6)
    assert proved.optimal
    # 30 jobs x 30 slots cannot be proved in 1 ms: flagged, not passed off as optimal
    many = [small_job(arrival=a % 20, chunks=4, epochs=3) for a in range(30)]
    try:
        rushed = offline_optimum(many, np.full((3, 2), 4.0), np.full((2, 2), 2.0), 30,
                                 time_limit_s=1e-3)
    except ValueError as exc:  # no solution at all within the limit: a named error
        assert str(exc).startswith("time_limit_s")
    else:
        assert not rushed.optimal


def test_quiet_stdout_silences_file_descriptor_1(capfd) -> None:
    import os

    from tdmcore._quiet import quiet_stdout

    with quiet_stdout():
        os.write(1, b"noise from a C library\n")
    os.write(1, b"kept\n")
    assert capfd.readouterr().out == "kept\n"


def test_prices_stay_finite_when_u_over_l_overflows():
    # a time-critical job's f(T - a) ~ 2e-304 drives L subnormal: U / L is inf in
    # floating point, but every price lies in [L, U] (computed in logs)
    horizon = 400

    def job(arrival: int, utility: tuple[float, float, float]) -> Job:
        return Job(arrival=arrival, epochs=50, chunks=10, minibatches=5, tau=0.01,
                   grad_size=0.0, worker_bw=1.0, ps_bw=2.0, worker_res=(1.0, 1.0),
                   ps_res=(1.0, 1.0), utility=utility)

    critical, other = job(0, (0.01, 3.0, horizon - 233.0)), job(0, (100.0, 0.0, 0.0))
    bounds = PriceBounds.from_jobs([critical, other], horizon)
    assert bounds.l1 < 1e-300 and math.isfinite(bounds.alpha) and bounds.alpha > 700
    scheduler = OnlineScheduler(np.full((2, 2), 10.0), np.full((2, 2), 10.0), horizon, bounds)
    assert scheduler.submit(other).admitted
    assert scheduler.submit(job(1, (100.0, 0.0, 0.0))).admitted  # raised before
    p, q = scheduler.prices()
    assert np.all(np.isfinite(p)) and np.all(p >= 0.999 * bounds.l1) and np.all(p <= 50.0 + 1e-9)


def test_one_utility_rule_for_the_dp_and_the_python_sigmoid():
    # past the cutoff (g2 (t - g3) > 700) the utility is 0 in both: the DP's payoff
    # is f(end - arrival) - cost, and the online scheduler admits nothing worth 0
    job = Job(arrival=0, epochs=1, chunks=1, minibatches=1, tau=0.5, grad_size=0.0,
              worker_bw=1.0, ps_bw=1.0, worker_res=(1.0,), ps_res=(1.0,),
              utility=(1e6, 701 / 7, 0.0))
    horizon = 8
    free = np.zeros((horizon, 1, 1))
    free[7] = 1.0  # room only at delay 7, where the exponent is 701
    s = best_schedule(job, np.zeros((horizon, 1, 1)), free, np.zeros((horizon, 1, 1)),
                      np.ones((horizon, 1, 1)))
    assert s is not None
    assert s.payoff == sigmoid_utility(s.end_slot - job.arrival, *job.utility) - s.cost == 0.0
    online = OnlineScheduler([[1.0]], [[1.0]], horizon,
                             PriceBounds((1.0,), 1e-306, (1.0,), 1e-306))
    online.worker_used[:7] = 1.0
    assert not online.submit(job).admitted


def test_a_huge_free_capacity_is_no_constraint_not_an_overflow():
    job = Job(arrival=0, epochs=1, chunks=2, minibatches=1, tau=0.5, grad_size=0.0,
              worker_bw=1.0, ps_bw=1.0, worker_res=(1e-9,), ps_res=(1.0,),
              utility=(10.0, 0.0, 0.0))
    ones = np.ones((3, 1, 1))
    small = best_schedule(job, ones, np.full((3, 1, 1), 1e9), ones, np.full((3, 1, 1), 4.0))
    huge = best_schedule(job, ones, np.full((3, 1, 1), 1e12), ones, np.full((3, 1, 1), 4.0))
    assert small is not None and huge is not None
    assert (huge.end_slot, huge.payoff) == (small.end_slot, small.payoff)


def _one_resource_job(arrival: int, epochs: int, chunks: int, g1: float,
                      res: tuple[float, ...] = (1.0,)) -> Job:
    return Job(arrival=arrival, epochs=epochs, chunks=chunks, minibatches=1, tau=0.5,
               grad_size=0.0, worker_bw=1.0, ps_bw=1.0, worker_res=res, ps_res=res,
               utility=(g1, 0.0, 0.0))


@pytest.mark.parametrize(("call", "needle"), [
    (lambda: offline_optimum([_one_resource_job(0, 1, 1, 5.0, (1.0, 100.0))], [[4.0]], [[4.0]],
                             3), "jobs: job 0 lists 2 worker"),
    (lambda: offline_optimum([_one_resource_job(0, 1, 1, 5.0)], [[4.0]], [[4.0, 1.0]], 3),
     "ps_capacity: 2 resource types"),
    (lambda: offline_optimum([_one_resource_job(0, 1, 1, 5.0)], [[4.0]], [[-1.0]], 3),
     "ps_capacity: capacities must be >= 0"),
    (lambda: offline_optimum([_one_resource_job(0, 1, 1, 5.0)], [[4.0]], [[4.0]], 3,
                             time_limit_s=-5), "time_limit_s: must be > 0"),
    (lambda: offline_optimum([_one_resource_job(0, 1, 1, 5.0)], [[4.0]], [[4.0]], 3,
                             time_limit_s=float("nan")), "time_limit_s: must be finite"),
])
def test_offline_optimum_names_the_bad_argument(call, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        call()


def test_an_offline_schedule_ends_in_its_last_slot_with_workers():
    # flat utilities (g2 = 0): the MILP may pick any end slot after the work is done
    for seed in range(10):
        rng = np.random.default_rng(seed)
        jobs = [_one_resource_job(int(rng.integers(0, 3)), int(rng.integers(1, 3)),
                                  int(rng.integers(1, 4)), float(rng.uniform(1, 10)))
                for _ in range(3)]
        result = offline_optimum(jobs, [[2.0]], [[2.0]], 8)
        for s in result.schedules:
            if s is not None:
                assert s.end_slot == int(np.flatnonzero(s.workers.sum(axis=1))[-1])


def _boundary_instance(seed: int):
    """Prices and capacities on a grid (ties between servers, zero prices, servers
    filled exactly), zero and cut-off utilities (g1 = 0, g2 = 800), one or two
    resource types: what the uniform draws of :func:`random_instance` never reach."""
    rng = np.random.default_rng(seed)
    n_slots, n_w, n_p, n_res = (int(rng.integers(2, 9)), int(rng.integers(1, 4)),
                                int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    job = Job(arrival=int(rng.integers(0, n_slots)), epochs=int(rng.integers(1, 5)),
              chunks=int(rng.integers(1, 6)), minibatches=1,
              tau=float(rng.choice([0.1, 0.2, 0.25, 0.5, 1.0])),
              grad_size=float(rng.choice([0.0, 0.0, 0.025])),
              worker_bw=float(rng.choice([0.5, 1.0])), ps_bw=float(rng.choice([1.0, 1.5, 3.0])),
              worker_res=tuple(float(x) for x in rng.choice([0.5, 1.0, 2.0], size=n_res)),
              ps_res=tuple(float(x) for x in rng.choice([0.5, 1.0], size=n_res)),
              utility=(float(rng.choice([0.0, 3.0, 10.0, 50.0])),
                       float(rng.choice([0.0, 0.5, 3.0, 800.0])), float(rng.integers(0, 5))))
    wp = rng.integers(0, 3, size=(n_slots, n_w, n_res)).astype(float) * rng.choice([0.5, 1.0])
    pp = rng.integers(0, 3, size=(n_slots, n_p, n_res)).astype(float) * 0.5
    wf = rng.integers(0, 9, size=(n_slots, n_w, n_res)).astype(float) * 0.5
    pf = rng.integers(0, 7, size=(n_slots, n_p, n_res)).astype(float) * 0.5
    return job, wp, wf, pp, pf


@pytest.mark.parametrize("chunk", range(4))
def test_best_schedule_equals_milp_at_the_boundaries(chunk: int) -> None:
    """400 more instances (a review, 2026-11), and each feasible one again from a later
    ``now``, which must equal the MILP with no free capacity before ``now``."""
    for seed in range(chunk * 100, (chunk + 1) * 100):
        job, wp, wf, pp, pf = _boundary_instance(seed)
        if chunks_per_worker_slot(job) < 1:
            continue
        got = best_schedule(job, wp, wf, pp, pf)
        want = milp_payoff(job, wp, wf, pp, pf)
        assert (got is None) == (want is None), seed
        if got is None:
            continue
        assert got.payoff == pytest.approx(want, abs=1e-6), seed
        check_feasible(job, got, wp, wf, pp, pf)
        now = job.arrival + 1
        if now < wp.shape[0]:
            later = best_schedule(job, wp, wf, pp, pf, now=now)
            closed = wf.copy()
            closed[:now] = 0.0
            want = milp_payoff(job, wp, closed, pp, pf)
            assert (later is None) == (want is None), seed
            if later is not None:
                assert later.payoff == pytest.approx(want, abs=1e-6), seed


@pytest.mark.parametrize("seed", range(20))
def test_the_kernels_utility_and_chunks_equal_the_specs(seed: int) -> None:
    """The oracle writes f and c from docs/oasis.md; the kernel's agree with them."""
    from tdmcore.oasis import online
    rng = np.random.default_rng([seed, 9])
    for _ in range(50):
        g = (float(rng.uniform(0, 50)), float(rng.choice([0.0, rng.uniform(0, 5), 800.0])),
             float(rng.uniform(0, 20)))
        delay = float(rng.integers(0, 40))
        assert sigmoid_utility(delay, *g) == pytest.approx(spec_utility(delay, *g),
                                                           abs=1e-9)
        job = Job(0, 1, 2, int(rng.integers(1, 6)), float(rng.choice([0.05, 0.1, 1 / 3])),
                  float(rng.choice([0.0, 0.01, 0.05])), 1.0, 1.0, (1.0,), (1.0,))
        assert online.chunks_per_worker_slot(job) == chunks_per_worker_slot(job)


def test_sizes_beyond_memory_are_refused_by_name() -> None:
    # A review found MemoryError (an internal error in the CLI) for these sizes.
    from tdmcore.sim.elastic_workloads import dragon_poisson
    from tdmcore.sim.oasis_setting import oasis_cluster, oasis_jobs

    bounds = PriceBounds((1.0,) * 5, 1.0, (1.0,) * 5, 1.0)
    with pytest.raises(ValueError, match=r"^n_slots: .* more than 25,000,000"):
        OnlineScheduler(np.ones((2, 5)), np.ones((2, 5)), 10**9, bounds)
    with pytest.raises(ValueError, match=r"^n_jobs: "):
        dragon_poisson(10**20)
    with pytest.raises(ValueError, match=r"^n_jobs: "):
        oasis_jobs(10**12)
    with pytest.raises(ValueError, match=r"^n_worker_servers: "):
        oasis_cluster(10**12)
