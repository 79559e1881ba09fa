"""The slotted policies of the OASiS setting, each on tiny hand-made clusters.

Every case is small enough to follow by hand; the comments carry the arithmetic.
Jobs have no gradient traffic and ``tau = 1`` unless stated, so a worker trains
``c = 1`` chunk per slot, and ``ps_bw = 10 b`` so one PS serves up to 10 workers.
The rules under test are the module docstrings of ``tdmcore.oasis.admission``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tdmcore.oasis.admission import (
    ADMISSION_POLICIES,
    Allocation,
    DormPolicy,
    DrfPolicy,
    FifoPolicy,
    OasisPolicy,
    RrhPolicy,
    SlotDecision,
    SlottedCluster,
    make_admission_policy,
    scaled_bounds,
)
from tdmcore.oasis.admission.base import RoundRobin, dominant_share, fixed_worker_counts, ps_count
from tdmcore.oasis.online import Job, OnlineScheduler, PriceBounds, sigmoid_utility
from tdmcore.sim.oasis_setting import oasis_jobs, oasis_setting
from tdmcore.sim.slotted import PolicyError, run_slotted
from tests.slotted_helpers import Recorder


def make_job(arrival: int = 0, epochs: int = 1, chunks: int = 2, *, ps_bw: float = 10.0,
             res: tuple[float, ...] = (1.0,), ps_res: tuple[float, ...] | None = None,
             worker_bw: float = 1.0,
             utility: tuple[float, float, float] = (10.0, 0.0, 0.0)) -> Job:
    """tau = 1 slot, no gradients -> c = 1 chunk per worker-slot; z = ceil(b y / B)."""
    return Job(arrival, epochs, chunks, 1, 1.0, 0.0, worker_bw, ps_bw, res,
               res if ps_res is None else ps_res, utility)


def cluster(worker: list[list[float]], ps: list[list[float]], n_slots: int,
            resources: tuple[str, ...] = ("cpu",)) -> SlottedCluster:
    return SlottedCluster(np.array(worker, dtype=float), np.array(ps, dtype=float), n_slots,
                          resources)


def trace(policy, cl: SlottedCluster, jobs):
    rec = Recorder(policy)
    return run_slotted(rec, cl, jobs), rec


# ---------------------------------------------------------------- shared helpers
@pytest.mark.parametrize(
    ("worker_bw", "ps_bw", "workers", "ps"),
    [(1.0, 10.0, 7, 1),    # ceil(7 / 10) = 1
     (1.0, 10.0, 11, 2),   # ceil(11 / 10) = 2
     (1.0, 1.0, 3, 3),     # b = B: one PS per worker
     (2.0, 5.0, 5, 2),     # ceil(2 x 5 / 5) = 2
     (1.0, 3.0, 3, 1),     # ceil(3 / 3) = 1 exactly, no float slack pushing it to 2
     (1.0, 10.0, 0, 0)],
)
def test_ps_count_is_the_fewest_for_constraint_6(worker_bw, ps_bw, workers, ps) -> None:
    assert ps_count(make_job(worker_bw=worker_bw, ps_bw=ps_bw), workers) == ps


def test_dominant_share_by_hand() -> None:
    # total (GPU 8, CPU 36); 2 workers of (2 GPU, 3 CPU) + 1 PS of (0, 4):
    # GPU 4 / 8 = 0.5, CPU (6 + 4) / 36 = 0.28 -> 0.5
    job = make_job(res=(2.0, 3.0), ps_res=(0.0, 4.0))
    assert dominant_share(job, 2, 1, np.array([8.0, 36.0])) == pytest.approx(0.5)
    # a resource with no capacity the job uses -> inf; one it does not use -> ignored
    assert dominant_share(job, 1, 1, np.array([0.0, 36.0])) == math.inf
    no_gpu = make_job(res=(0.0, 3.0), ps_res=(0.0, 4.0))
    assert dominant_share(no_gpu, 1, 1, np.array([0.0, 35.0])) == pytest.approx(0.2)


def test_fixed_worker_counts_draw_and_cap() -> None:
    jobs = tuple(make_job(chunks=n) for n in (1, 3, 50, 50, 50, 50))
    counts = fixed_worker_counts(jobs, 2, 9, seed=4)
    np.testing.assert_array_equal(counts, fixed_worker_counts(jobs, 2, 9, seed=4))
    assert counts[0] == 1 and counts[1] <= 3  # capped at N_i (constraint (3))
    assert all(2 <= c <= 9 for c in counts[2:])
    assert fixed_worker_counts(jobs, 5, 5, seed=0).tolist() == [1, 3, 5, 5, 5, 5]
    big = tuple(make_job(chunks=50) for _ in range(40))
    assert not np.array_equal(fixed_worker_counts(big, 1, 30, seed=0),
                              fixed_worker_counts(big, 1, 30, seed=1))


@pytest.mark.parametrize(
    ("free", "start", "count", "placed", "next_"),
    [
        # 3 servers with room for 2, 2, 2 tasks; start at 0: 0, 1, 2, 0
        ([2, 2, 2], 0, 4, [2, 1, 1], 1),
        # the cycle continues where the last call stopped
        ([2, 2, 2], 2, 2, [1, 0, 1], 1),
        # a full server is skipped: 0, (1 full), 2, 0, 2
        ([2, 0, 2], 0, 4, [2, 0, 2], 0),
        # room for 3 in all, 4 asked -> None, nothing taken
        ([1, 1, 1], 1, 4, None, 1),
        ([1, 1, 1], 1, 0, [0, 0, 0], 1),
    ],
)
def test_round_robin_placement(free, start, count, placed, next_) -> None:
    rr = RoundRobin(3)
    rr.next = start
    room = np.array(free, dtype=float)[:, None]
    before = room.copy()
    out = rr.place(count, np.array([1.0]), room)
    if placed is None:
        assert out is None
        np.testing.assert_array_equal(room, before)
    else:
        assert out.tolist() == placed
        np.testing.assert_array_equal(room[:, 0], np.array(free) - np.array(placed))
    assert rr.next == next_


# -------------------------------------------------------------------------- FIFO
def test_fifo_head_of_line_blocking() -> None:
    # one worker server of 4 CPUs, workers fixed at 3 (capped at N_i), one PS each.
    # job 0: 3 workers, V = 6 -> slots 0-1.  job 1: 3 workers, waits for job 0 (1 CPU
    # free).  job 2: N = 1 -> 1 worker; it would fit in the free CPU at slot 0 but
    # waits behind job 1 (strict queue).  Slot 2: jobs 1 and 2 (3 + 1 = 4 CPUs).
    # job 3 arrives at 1 with 3 workers (V = 5): still blocked at slot 3 when job 2 has
    # left 1 CPU free; it starts when job 1 is done (slot 4) and needs 2 slots.
    jobs = [make_job(0, 2, 3), make_job(0, 2, 3), make_job(0, 1, 1), make_job(1, 1, 5)]
    run, rec = trace(FifoPolicy(workers=(3, 3)), cluster([[4]], [[4]], 7), jobs)
    assert [o.finish for o in run.outcomes] == [1, 3, 2, 5]
    assert rec.workers(0) == [3, 3, 0, 0, 0, 0, 0]
    assert rec.workers(1) == [0, 0, 3, 3, 0, 0, 0]
    assert rec.workers(2) == [0, 0, 1, 0, 0, 0, 0]
    assert rec.workers(3) == [0, 0, 0, 0, 3, 3, 0]
    assert all(o.admitted for o in run.outcomes)


def test_fifo_rejects_a_job_that_cannot_fit_on_the_empty_cluster() -> None:
    # 5 workers of 1 CPU on one 4-CPU server: rejected at arrival; the job behind it
    # (2 workers) is not blocked and starts at its arrival slot
    jobs = [make_job(0, 1, 5), make_job(0, 1, 2), make_job(1, 1, 9)]
    run, rec = trace(FifoPolicy(workers=(5, 5)), cluster([[4]], [[4]], 3), jobs)
    assert [o.admitted for o in run.outcomes] == [False, True, False]
    assert run.outcomes[0].reason == "5 workers do not fit on the empty cluster"
    assert run.outcomes[1].finish == 0 and rec.workers(1)[0] == 2
    assert rec.rejects[0] == {0: run.outcomes[0].reason} and 2 in rec.rejects[1]


def test_fifo_round_robin_placement_kept_until_completion() -> None:
    # 3 worker servers, 2 PS servers; 2 workers and 1 PS per job (V = 4 -> 2 slots).
    # workers: job 0 -> servers 0, 1; job 1 -> 2, 0; job 2 -> 1, 2; PSs: 0, 1, 0.
    # job 3 arrives at slot 1 and continues the cycle: workers 0, 1; PS 1.
    jobs = [make_job(0, 2, 2), make_job(0, 2, 2), make_job(0, 2, 2), make_job(1, 2, 2)]
    run, rec = trace(FifoPolicy(workers=(2, 2)), cluster([[4], [4], [4]], [[4], [4]], 4),
                     jobs)
    want = {0: ([1, 1, 0], [1, 0]), 1: ([1, 0, 1], [0, 1]), 2: ([0, 1, 1], [1, 0]),
            3: ([1, 1, 0], [0, 1])}
    for i, (w, p) in want.items():
        start = jobs[i].arrival
        for t in (start, start + 1):  # the same placement in both of its slots
            assert rec.runs[t][i][0].tolist() == w and rec.runs[t][i][1].tolist() == p
    assert [o.finish for o in run.outcomes] == [1, 1, 1, 2]


def test_fifo_fixed_counts_and_placement_on_a_random_setting() -> None:
    setting = oasis_setting(n_jobs=20, n_worker_servers=3, n_ps_servers=2, n_slots=40,
                            seed=7, epochs=(2, 8), chunks=(2, 12))
    jobs = setting.jobs
    counts = fixed_worker_counts(jobs, 2, 6, seed=9)
    run, rec = trace(FifoPolicy(workers=(2, 6), seed=9), setting.cluster, jobs)
    started = []
    for i, job in enumerate(jobs):
        slots = [t for t, r in enumerate(rec.runs) if i in r]
        if not slots:
            continue
        started.append((slots[0], job.arrival, i))
        # runs without a pause from its start to its finish, always in one placement
        finish = run.outcomes[i].finish
        last = setting.cluster.n_slots - 1 if finish is None else finish
        assert slots == list(range(slots[0], last + 1))
        first = rec.runs[slots[0]][i]
        for t in slots:
            y, z = rec.runs[t][i]
            assert int(y.sum()) == counts[i] and int(z.sum()) == ps_count(job, counts[i])
            np.testing.assert_array_equal(y, first[0])
            np.testing.assert_array_equal(z, first[1])
    # admitted jobs start in arrival order (index breaks ties)
    assert [i for _, _, i in sorted(started)] == sorted(i for _, _, i in started)
    assert len(started) >= 5


# --------------------------------------------------------------------------- DRF
# One worker server (4 GPU, 12 CPU), one PS server (0 GPU, 4 CPU): total (4, 16).
# A: worker (1 GPU, 1 CPU); B: worker (0, 2 CPU); PSs (0, 1 CPU), one per job.
# Shares: A(y) = max(y / 4, (y + 1) / 16), B(y) = (2y + 1) / 16.
DRF_CLUSTER = cluster([[4, 12]], [[0, 4]], 3, ("gpu", "cpu"))


@pytest.mark.parametrize(
    ("a_chunks", "want"),
    [
        # A1 .25 | B1 .19, B2 .31 | A2 .5 | B3 .44, B4 .56 | A3 .75 | B5 needs 2 CPUs,
        # 12 - 3 - 8 = 1 left -> B stops | A4 (1 GPU, 1 CPU left) -> 1.0 | A5 no GPU
        (10, (4, 4)),
        # A stops at N = 2 workers (constraint (3)): A1, B1, B2, A2, B3, B4, B5 (CPU
        # 2 + 10 = 12), B6 does not fit
        (2, (2, 5)),
    ],
)
def test_drf_progressive_filling_by_hand(a_chunks, want) -> None:
    jobs = [make_job(0, 50, a_chunks, res=(1.0, 1.0), ps_res=(0.0, 1.0)),
            make_job(0, 50, 10, res=(0.0, 2.0), ps_res=(0.0, 1.0))]
    run, rec = trace(DrfPolicy(), DRF_CLUSTER, jobs)
    assert (rec.workers(0)[0], rec.workers(1)[0]) == want
    assert [int(rec.runs[0][i][1].sum()) for i in (0, 1)] == [1, 1]


def test_drf_recomputes_at_arrival_and_completion() -> None:
    # 1 CPU per worker and per PS; worker server 7 CPUs, PS server 4: total 11.
    # A alone: 7 workers (the worker server is full).  B arrives at 1: equal shares
    # (y + 1) / 11, ties to the earlier arrival: A, B, A, B, A, B, A -> 4 and 3.
    # B (N = 6, V = 6) finishes in slot 2; at slot 3 A is alone again -> 7.
    jobs = [make_job(0, 10, 10), make_job(1, 1, 6)]
    run, rec = trace(DrfPolicy(), cluster([[7]], [[4]], 5), jobs)
    assert rec.workers(0) == [7, 4, 4, 7, 7]
    assert rec.workers(1) == [0, 3, 3, 0, 0]
    assert run.outcomes[1].finish == 2
    # A alone with N = 3 chunks stops at 3 workers, though 8 would fit
    run, rec = trace(DrfPolicy(), cluster([[8]], [[4]], 2), [make_job(0, 10, 3)])
    assert rec.workers(0) == [3, 3]


def test_drf_keeps_its_allocation_between_events() -> None:
    setting = oasis_setting(n_jobs=10, n_worker_servers=2, n_ps_servers=2, n_slots=30,
                            seed=2, epochs=(2, 8), chunks=(2, 10))
    run, rec = trace(DrfPolicy(), setting.cluster, setting.jobs)
    changes = 0
    for t in range(1, len(rec.runs)):
        view = rec.views[t]
        if view.arrived or view.completed:
            changes += 1
            continue
        assert rec.runs[t].keys() == rec.runs[t - 1].keys()
        for i, (y, z) in rec.runs[t].items():
            np.testing.assert_array_equal(y, rec.runs[t - 1][i][0])
            np.testing.assert_array_equal(z, rec.runs[t - 1][i][1])
    assert changes >= 5


# --------------------------------------------------------------------------- RRH
# One worker server and one PS server of 4 CPUs (total 8), 3 workers + 1 PS per job:
# dominant share s = (3 + 1) / 8 = 0.5, so two jobs never run together.
@pytest.mark.parametrize(
    ("g2_old", "admitted"),
    [
        # old job 0: 2 workers, V = 8, at slot 1 done 2, d = 3 -> ends at 3, reward
        # f(3) = 100 / (1 + e^0) = 50.  New job 1: d = 1, s = 3/8 -> waits ceil(3/8) = 1;
        # delay cost 50 - f(4) = 50 - 100 / (1 + e^5) = 49.3 > its reward 0.5 -> reject
        (5.0, False),
        # old job time-insensitive: waiting costs it nothing -> admit 0.5 - 0 > 0
        (0.0, True),
    ],
)
def test_rrh_admission_against_the_delay_cost(g2_old, admitted) -> None:
    jobs = [make_job(0, 4, 2, utility=(100.0, g2_old, 3.0)),
            make_job(1, 1, 2, utility=(1.0, 0.0, 0.0))]
    run, rec = trace(RrhPolicy(workers=(2, 2)), cluster([[4]], [[4]], 6), jobs)
    assert run.outcomes[1].admitted is admitted
    if not admitted:
        assert run.outcomes[1].reason.startswith("reward 0.5 - delay cost 49.")
    assert run.outcomes[0].finish == 3
    assert run.outcomes[0].utility == pytest.approx(sigmoid_utility(3, 100.0, g2_old, 3.0))


def test_rrh_delay_cost_is_over_the_share_times_the_duration() -> None:
    # old job 0: 2 workers, V = 8, at slot 1 d = 3 -> ends at 3: f(3) = 100 / (1 + e^-10)
    # = 100.0 (target 5, decay 5).  New job 1: 2 workers, V = 8 -> d = 4, s = 3/8:
    # job 0 waits ceil(3/8 x 4) = 2 slots (not d = 4): f(5) = 50 -> cost 50 < reward
    # 160 / 2 = 80 -> admitted; both fit (2 + 2 CPUs) and run.
    jobs = [make_job(0, 4, 2, utility=(100.0, 5.0, 5.0)),
            make_job(1, 4, 2, utility=(160.0, 0.0, 0.0))]
    run, rec = trace(RrhPolicy(workers=(2, 2)), cluster([[4]], [[4]], 10), jobs)
    assert run.outcomes[1].admitted
    assert [o.finish for o in run.outcomes] == [3, 4]
    assert rec.workers(1)[1] == 2


@pytest.mark.parametrize(
    "cpus",
    [
        # 4 CPUs per server (total 8): s = (3 + 1) / 8 = 0.5 for both jobs, they never
        # fit together.  At slot 1 (job 0 has 9 chunks left, d = 3):
        #   admit job 1: cost = job 0's loss if it waits ceil(0.5 x 1) = 1 slot = 0.
        #   job 0's net: 0.5 - job 1's loss if it waits ceil(0.5 x 3) = 2 slots
        #     = 0.5 - (99.3 - f(2) = 99.3 - 0.67) < 0 -> paused.
        4,
        # 8 CPUs (total 16): both fit, s = 4 / 16 = 0.25; job 0's net: 0.5 - job 1's
        # loss if it waits ceil(0.25 x 3) = 1 slot = 0.5 - (99.3 - f(1) = 50) < 0 ->
        # paused by its net reward alone
        8,
    ],
)
def test_rrh_pauses_for_a_better_job_and_resumes_with_the_same_size(cpus: int) -> None:
    # job 0: time-insensitive, f = 1 / 2 = 0.5, V = 12, 3 workers -> 4 slots.
    # job 1 arrives at 1: time-critical, 3 workers, V = 3 -> 1 slot,
    # reward f(0) = 100 / (1 + e^-5) = 99.3, net 99.3 - 0: runs, finishes in slot 1.
    # slot 2: job 0 resumes with 3 workers, done at slot 4 (delay 4, f still 0.5).
    jobs = [make_job(0, 4, 3, utility=(1.0, 0.0, 0.0)),
            make_job(1, 1, 3, utility=(100.0, 5.0, 1.0))]
    run, rec = trace(RrhPolicy(workers=(3, 3)), cluster([[cpus]], [[cpus]], 6), jobs)
    assert rec.workers(0) == [3, 0, 3, 3, 3, 0]
    assert rec.workers(1) == [0, 3, 0, 0, 0, 0]
    assert [o.finish for o in run.outcomes] == [4, 1]
    assert run.total_utility == pytest.approx(0.5 + sigmoid_utility(0, 100.0, 5.0, 1.0))


def test_rrh_drops_a_job_whose_reward_is_zero() -> None:
    # As above with a 5-slot horizon and V = 15: job 0 needs slots 0-4 (ends at 4 < 5).
    # Paused at slot 1 for job 1, at slot 2 it needs 4 more slots -> ends at 5 >= T:
    # reward 0 -> dropped (admitted, never finishes, never runs again).
    # job 2 has priority 0: reward 0 at its arrival -> rejected there.
    jobs = [make_job(0, 5, 3, utility=(1.0, 0.0, 0.0)),
            make_job(1, 1, 3, utility=(100.0, 5.0, 1.0)),
            make_job(2, 1, 1, utility=(0.0, 0.0, 0.0))]
    run, rec = trace(RrhPolicy(workers=(3, 3)), cluster([[4]], [[4]], 5), jobs)
    assert rec.workers(0) == [3, 0, 0, 0, 0]
    out = run.outcomes
    assert out[0].admitted and out[0].finish is None
    assert out[0].reason == "no utility left (cannot finish in time)"
    assert 0 in rec.rejects[2]
    assert not out[2].admitted and out[2].reason.startswith("reward 0 ")
    assert out[1].finish == 1


def test_rrh_run_or_pause_ignores_a_job_rejected_in_the_same_step() -> None:
    # Room for everything (100 CPUs per pool, total 200).  Slot 0: A (1 worker, V = 10,
    # f = 1, time-insensitive) and B (1 worker, V = 5, critical: 100 / (1 + e^(10 (d -
    # 5.5)))) arrive and run.  Slot 1: C arrives, 50 workers + 5 PSs, V = 200 -> d = 4,
    # share 55 / 200 -> B would wait ceil(0.275 x 4) = 2 slots: B's loss f(3) - f(5) =
    # 100 - 0.67 = 99.3 > C's reward 90 / (1 + e^(10 (3 - 3.5))) = 89.4 -> C rejected.
    # A's cost is what the *admitted* others lose if they wait ceil(2/200 x 9) = 1
    # slot: B f(3) - f(4) = 100 - 99.3 = 0.7 < 1 -> A keeps running.  Counting the
    # rejected C (loses 89.4 - f(4) = 88.8) pauses A until B is done.
    jobs = [make_job(0, 10, 1, utility=(2.0, 0.0, 0.0)),
            make_job(0, 5, 1, utility=(100.0, 10.0, 5.5)),
            make_job(1, 4, 50, utility=(90.0, 10.0, 3.5))]
    run, rec = trace(RrhPolicy(workers=(50, 50)), cluster([[100]], [[100]], 15), jobs)
    assert not run.outcomes[2].admitted
    assert rec.workers(0)[:2] == [1, 1]
    assert run.outcomes[0].finish == 9


def test_rrh_sizes_are_fixed_on_a_random_setting() -> None:
    setting = oasis_setting(n_jobs=15, n_worker_servers=2, n_ps_servers=2, n_slots=30,
                            seed=4, epochs=(2, 8), chunks=(2, 10))
    counts = fixed_worker_counts(setting.jobs, 1, 4, seed=2)  # FIFO's draw, same seed
    run, rec = trace(RrhPolicy(workers=(1, 4), seed=2), setting.cluster, setting.jobs)
    ran = 0
    for i, job in enumerate(setting.jobs):
        for r in rec.runs:
            if i in r:
                ran += 1
                assert int(r[i][0].sum()) == counts[i]
                assert int(r[i][1].sum()) == ps_count(job, counts[i])
    assert ran > 0 and run.finished > 0


# -------------------------------------------------------------------------- Dorm
def dorm_shares(job: Job, y: int, z: int, total: np.ndarray) -> np.ndarray:
    return (y * np.array(job.worker_res) + z * np.array(job.ps_res)) / total


# One worker server (8 GPU, 16 CPU), one PS server (0 GPU, 4 CPU): total (8, 20).
# A: worker (1 GPU, 1 CPU), B: worker (0, 2 CPU); PS (0, 1 CPU), one per job; N = 20.
# Objective per worker: A (1/8 + 1/16) / 2 = 0.094, B (0 + 2/16) / 2 = 0.0625.
@pytest.mark.parametrize(
    ("theta", "want"),
    [
        # cap 1/2: A's GPU y / 8 <= .5 -> 4; B's CPU (2y + 1) / 20 <= .5 -> 4 (pool: 12 CPUs)
        (0.0, (4, 4)),
        # cap 3/4: A <= 6 (GPU), B <= 7 (CPU); the worker CPUs bind: A + 2B <= 16,
        # best 0.094 A + 0.0625 B at A = 6, B = 5
        (0.5, (6, 5)),
    ],
)
def test_dorm_fairness_cap_by_hand(theta, want) -> None:
    cl = cluster([[8, 16]], [[0, 4]], 2, ("gpu", "cpu"))
    jobs = [make_job(0, 50, 20, res=(1.0, 1.0), ps_res=(0.0, 1.0)),
            make_job(0, 50, 20, res=(0.0, 2.0), ps_res=(0.0, 1.0))]
    run, rec = trace(DormPolicy(theta=theta), cl, jobs)
    assert (rec.workers(0)[0], rec.workers(1)[0]) == want
    for i, (y, z) in rec.runs[0].items():
        share = dorm_shares(jobs[i], int(y.sum()), int(z.sum()), cl.total_capacity)
        assert np.all(share <= (1 + theta) / 2 + 1e-9)


# Three resources, one job each (job i uses only resource i, worker and PS alike):
# worker server 10 of each, PS server 10 of each -> total 20; theta = 0.
# n = 3: (y + 1) / 20 <= 1/3 -> y <= 5; n = 2: y + 1 <= 10 -> y <= 9.
def three_jobs(short_arrival: int) -> list[Job]:
    unit = [tuple(1.0 if r == i else 0.0 for r in range(3)) for i in range(3)]
    return [make_job(0, 10, 20, res=unit[0]), make_job(0, 10, 20, res=unit[1]),
            make_job(short_arrival, 1, 5, res=unit[2])]  # V = 5: done in 1 slot at y = 5


THREE = cluster([[10, 10, 10]], [[10, 10, 10]], 3, ("a", "b", "c"))


@pytest.mark.parametrize(
    ("max_adjust", "grown"),
    [(0, [5, 5]),   # nobody may change: both stay at 5
     (1, [5, 9]),   # one of the two grows to its new fair share 9
     (2, [9, 9])],  # both grow
)
def test_dorm_adjusts_at_most_max_adjust_running_jobs(max_adjust, grown) -> None:
    # slot 0: jobs 0, 1, 2 -> 5 each; job 2 finishes in slot 0; slot 1: n = 2, the
    # fair share grows to 9 each, but only max_adjust running jobs may change
    dorm = DormPolicy(theta=0.0, max_adjust=max_adjust)
    run, rec = trace(dorm, THREE, three_jobs(0))
    assert [rec.workers(i)[0] for i in range(3)] == [5, 5, 5]
    assert run.outcomes[2].finish == 0
    assert sorted(rec.workers(i)[1] for i in (0, 1)) == grown
    assert dorm.relaxed == 0  # always feasible: staying put is allowed


def test_dorm_lifts_the_adjustment_limit_when_it_is_infeasible() -> None:
    # slot 0: jobs 0, 1 alone -> 9 each; slot 1: job 2 arrives, n = 3 -> both must
    # shrink to 5: two changes > max_adjust = 1 -> the limit is lifted for this event
    dorm = DormPolicy(theta=0.0, max_adjust=1)
    run, rec = trace(dorm, THREE, three_jobs(1))
    assert [rec.workers(i)[:2] for i in range(3)] == [[9, 5], [9, 5], [0, 5]]
    assert dorm.relaxed == 1


def test_dorm_running_jobs_keep_a_worker() -> None:
    # worker server 4 CPUs.  Job 0 (1 CPU per worker, N = 1) runs with 1 worker.
    # Job 1 arrives needing 4 CPUs per worker: utilization would be 4/4 instead of 1/4
    # if job 0 were stopped, but a running job keeps >= 1 worker -> job 1 waits.
    jobs = [make_job(0, 10, 1), make_job(1, 1, 1, res=(4.0,), ps_res=(1.0,))]
    run, rec = trace(DormPolicy(theta=1.0, max_adjust=2), cluster([[4]], [[4]], 3), jobs)
    assert rec.workers(0) == [1, 1, 1] and rec.workers(1) == [0, 0, 0]


def test_dorm_does_not_ignore_arrivals_when_a_running_job_exceeds_the_fair_share() -> None:
    # 8 worker CPUs, 8 PS CPUs (total 16), theta = 0.  Slot 0: job 0 alone (3 CPUs per
    # worker, N = 2, one PS of 1 CPU) -> 2 workers, 6 CPUs.  Slot 1: four jobs of
    # 1 + 1 CPUs arrive: n = 5, fair share 16 / 5 = 3.2 CPUs < job 0's least (3 + 1 = 4),
    # so no allocation keeps job 0 running.  The new jobs fit (2 worker CPUs are even
    # free), yet they get no worker at this event or any later slot.
    jobs = [make_job(0, 50, 2, res=(3.0,), ps_res=(1.0,))] + [make_job(1, 50, 4)
                                                                for _ in range(4)]
    run, rec = trace(DormPolicy(theta=0.0, max_adjust=2), cluster([[8]], [[8]], 4), jobs)
    assert rec.workers(0)[0] == 2
    assert sum(rec.workers(i)[1] for i in range(1, 5)) > 0


@pytest.mark.parametrize("seed", range(4))
def test_dorm_rules_on_random_single_server_pools(seed: int) -> None:
    # one server per pool: the pooled MILP is exact, placement never cuts a count
    rng = np.random.default_rng(seed)
    theta, max_adjust = float(rng.choice([0.0, 0.5, 1.0])), int(rng.integers(0, 3))
    n_slots = 12
    jobs = [make_job(int(a), int(rng.integers(1, 4)), int(rng.integers(2, 9)),
                     res=(float(rng.integers(0, 3)), float(rng.integers(1, 4))),
                     ps_res=(0.0, float(rng.integers(1, 3))), ps_bw=float(rng.choice([2, 10])))
            for a in sorted(rng.integers(0, 8, size=8))]
    cl = cluster([[6, 16]], [[0, 6]], n_slots, ("gpu", "cpu"))
    dorm = DormPolicy(theta=theta, max_adjust=max_adjust)

    class Relaxations(Recorder):
        def reset(self, cluster, jobs) -> None:
            super().reset(cluster, jobs)
            self.relaxed = []

        def step(self, view) -> SlotDecision:
            before = self.inner.relaxed
            decision = super().step(view)
            self.relaxed.append(self.inner.relaxed > before)
            return decision

    rec = Relaxations(dorm)
    run = run_slotted(rec, cl, jobs)
    checked = 0
    for t in range(1, n_slots):
        view, prev, now = rec.views[t], rec.runs[t - 1], rec.runs[t]
        still = [i for i in prev if i in view.active]
        if not (view.arrived or view.completed):
            assert now.keys() == prev.keys()
            continue
        if rec.relaxed[t]:  # the adjustment limit was lifted for this event
            continue
        checked += 1
        assert all(i in now and now[i][0].sum() >= 1 for i in still)  # keep >= 1 worker
        changed = [i for i in still if now[i][0].sum() != prev[i][0].sum()]
        assert len(changed) <= max_adjust
        for i, (y, z) in now.items():
            share = dorm_shares(jobs[i], int(y.sum()), int(z.sum()), cl.total_capacity)
            assert np.all(share <= (1 + theta) / len(view.active) + 1e-9)
    assert checked >= 2 and run.finished >= 1


# ------------------------------------------------------------------------- OASiS
@pytest.mark.parametrize("seed", range(4))
def test_oasis_policy_replays_the_online_scheduler(seed: int) -> None:
    setting = oasis_setting(n_jobs=15, n_worker_servers=3, n_ps_servers=3, n_slots=30,
                            seed=seed, epochs=(1, 5), chunks=(2, 8), slot_s=30.0)
    cl, jobs = setting.cluster, setting.jobs
    run, rec = trace(OasisPolicy(), cl, jobs)
    online = OnlineScheduler(cl.worker_capacity, cl.ps_capacity, cl.n_slots,
                             PriceBounds.from_jobs(list(jobs), cl.n_slots))
    admitted = 0
    for i, (job, out) in enumerate(zip(jobs, run.outcomes, strict=True)):
        result = online.submit(job)  # jobs are in arrival order, as the engine feeds them
        assert out.admitted == result.admitted
        if not result.admitted:
            assert out.reason == result.reason and out.finish is None
            continue
        admitted += 1
        sched = result.schedule
        assert out.finish == sched.end_slot
        assert out.utility == pytest.approx(sigmoid_utility(sched.end_slot - job.arrival,
                                                            *job.utility))
        for t in range(cl.n_slots):
            if sched.workers[t].sum() > 0:
                np.testing.assert_array_equal(rec.runs[t][i][0], sched.workers[t])
                np.testing.assert_array_equal(rec.runs[t][i][1], sched.ps[t])
            else:
                assert i not in rec.runs[t]
    assert run.total_utility == pytest.approx(online.total_utility)
    assert admitted >= 5


@pytest.mark.parametrize(
    ("u_scale", "l_scale", "u1", "l1"),
    [(1.0, 1.0, (8.0, 2.0), 1.0),
     (0.5, 2.0, (4.0, 2.0), 2.0),    # 2 x 0.5 = 1 < L = 2 -> kept at L
     (4.0, 0.25, (32.0, 8.0), 0.25)],
)
def test_scaled_bounds(u_scale, l_scale, u1, l1) -> None:
    bounds = PriceBounds((8.0, 2.0), 1.0, (6.0, 3.0), 3.0)
    got = scaled_bounds(bounds, u_scale, l_scale)
    assert got.u1 == pytest.approx(u1) and got.l1 == pytest.approx(l1)
    assert got.l2 == pytest.approx(3.0 * l_scale)
    assert got.u2 == pytest.approx(tuple(max(u * u_scale, 3.0 * l_scale) for u in (6.0, 3.0)))


def test_oasis_policy_uses_given_bounds_scaled() -> None:
    bounds = PriceBounds((8.0,), 1.0, (6.0,), 2.0)
    policy = OasisPolicy(bounds, u_scale=2.0, l_scale=0.5)
    run_slotted(policy, cluster([[4]], [[4]], 3), [make_job()])
    assert policy.used_bounds == scaled_bounds(bounds, 2.0, 0.5)
    assert policy.used_bounds.u1 == (16.0,) and policy.used_bounds.l2 == 1.0


# ------------------------------------------------- jobs whose b exceeds their B
@pytest.mark.parametrize("name", ["oasis", "dorm"])
def test_a_job_needing_more_pss_than_workers_never_runs(name: str) -> None:
    # b = 2 > B = 1: (6) needs z >= 2y > y, (7) forbids it -> the job cannot run
    jobs = [make_job(worker_bw=2.0, ps_bw=1.0), make_job()]
    run = run_slotted(make_admission_policy(name), cluster([[8], [8]], [[8], [8]], 4), jobs)
    assert run.outcomes[0].finish is None and run.outcomes[1].finish is not None


@pytest.mark.parametrize("name", ["fifo", "drf", "rrh"])
def test_baselines_never_run_a_job_needing_more_pss_than_workers(name: str) -> None:
    jobs = [make_job(worker_bw=2.0, ps_bw=1.0), make_job()]
    run = run_slotted(make_admission_policy(name), cluster([[8], [8]], [[8], [8]], 4), jobs)
    assert run.outcomes[0].finish is None and run.outcomes[1].finish is not None


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: FifoPolicy(workers=(0, 3)), "workers"),
        (lambda: FifoPolicy(workers=(4, 3)), "workers"),
        (lambda: FifoPolicy(workers=(1.5, 3)), "workers"),
        (lambda: FifoPolicy(workers=(True, 3)), "workers"),
        (lambda: FifoPolicy(seed=-1), "seed"),
        (lambda: FifoPolicy(seed=1.0), "seed"),
        (lambda: RrhPolicy(workers=(2, 1)), "workers"),
        (lambda: RrhPolicy(workers=(0, 0)), "workers"),
        (lambda: RrhPolicy(seed=-3), "seed"),
        (lambda: RrhPolicy(threshold=float("nan")), "threshold"),
        (lambda: RrhPolicy(threshold="0"), "threshold"),
        (lambda: DormPolicy(theta=-0.1), "theta"),
        (lambda: DormPolicy(theta=float("inf")), "theta"),
        (lambda: DormPolicy(max_adjust=-1), "max_adjust"),
        (lambda: DormPolicy(max_adjust=1.0), "max_adjust"),
        (lambda: DormPolicy(max_adjust=True), "max_adjust"),
        (lambda: DormPolicy(time_limit_s=0.0), "time_limit_s"),
        (lambda: DormPolicy(time_limit_s=-1.0), "time_limit_s"),
        (lambda: OasisPolicy(bounds=(1.0, 1.0)), "bounds"),
        (lambda: OasisPolicy(u_scale=0.0), "u_scale"),
        (lambda: OasisPolicy(l_scale=-1.0), "l_scale"),
        (lambda: OasisPolicy(l_scale=float("nan")), "l_scale"),
        (lambda: OasisPolicy(eta=0.0), "eta"),
        (lambda: OasisPolicy(l_quantile=1.0), "l_quantile"),
        (lambda: OasisPolicy(name=""), "name"),
        (lambda: scaled_bounds(PriceBounds((2.0,), 1.0, (2.0,), 1.0), u_scale=0.0), "u_scale"),
        (lambda: scaled_bounds(PriceBounds((2.0,), 1.0, (2.0,), 1.0), l_scale=-2.0),
         "l_scale"),
        (lambda: fixed_worker_counts((), 0, 2, seed=0), "workers"),
        (lambda: make_admission_policy("lifo"), "name"),
    ],
)
def test_bad_input_names_the_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


@pytest.mark.parametrize(
    ("call", "name"),
    [(lambda: FifoPolicy(workers=(1,)), "workers"),
     (lambda: RrhPolicy(workers=5), "workers"),
     (lambda: oasis_jobs(5, priority=(1.0,)), "priority"),
     (lambda: oasis_jobs(5, epochs=3), "epochs")],
    ids=["fifo-workers", "rrh-workers", "priority", "epochs"],
)
def test_malformed_ranges_name_the_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


def test_policies_by_name() -> None:
    assert set(ADMISSION_POLICIES) == {"oasis", "fifo", "drf", "rrh", "dorm"}
    for name in ADMISSION_POLICIES:
        policy = make_admission_policy(name)
        assert policy.name == name
        assert make_admission_policy(name) is not policy  # a fresh one each time


def test_policies_do_not_import_the_simulator() -> None:
    # STYLE.md: no policy imports the simulator
    import tdmcore.oasis.admission as admission

    for path in Path(admission.__file__).parent.glob("*.py"):
        words = {word for line in path.read_text().splitlines()
                 if line.startswith(("from", "import"))
                 for word in line.replace(".", " ").split()}
        assert "sim" not in words, path.name


def test_policy_error_names_the_policy() -> None:
    class TooMany:
        name = "too-many"

        def reset(self, cluster, jobs) -> None:
            pass

        def step(self, view) -> SlotDecision:
            return SlotDecision(run={i: Allocation(np.array([3]), np.array([1]))
                                     for i in view.active})

    with pytest.raises(PolicyError, match=r"^too-many: slot 0, job 0: 3 workers > 2"):
        run_slotted(TooMany(), cluster([[8]], [[8]], 2), [make_job()])


def test_oasis_admits_a_job_whose_utility_is_0_by_the_horizon():
    # A review found such a job (a steep sigmoid: f(T - a) underflows to 0) left out of
    # L's minimum, and a population of them alone had no L: OASiS rejected every job.
    # Its L-term now counts at the smallest normal double, L_FLOOR.
    from tdmcore.oasis.online import L_FLOOR

    job = make_job(epochs=2, chunks=2, utility=(10.0, 10.0, 3.0))  # f(99) = 10 e^-960
    assert sigmoid_utility(99, *job.utility) == 0.0
    bounds = PriceBounds.from_jobs([job], 100)
    assert bounds.l1 == bounds.l2 == L_FLOOR
    cl = cluster([[4]], [[4]], 100)
    oasis = run_slotted(make_admission_policy("oasis"), cl, [job])
    fifo = run_slotted(make_admission_policy("fifo"), cl, [job])
    assert oasis.total_utility == pytest.approx(fifo.total_utility) and oasis.total_utility > 9
    # a job arriving after the horizon still has no L: that is an error, named
    with pytest.raises(ValueError, match=r"^jobs: every job arrives after the horizon"):
        PriceBounds.from_jobs([make_job(arrival=100)], 100)


def test_one_rule_says_why_a_job_cannot_run():
    # A review found the rule written three times, the online scheduler's without the
    # b > B case, and n_slots as a NumPy integer refused by some entry points only.
    from tdmcore.oasis.online import unrunnable_reason

    fast_workers = make_job(worker_bw=20.0)  # b > B = 10
    reason = unrunnable_reason(fast_workers, 5)
    assert reason is not None and reason.startswith("worker_bw > ps_bw")
    online = OnlineScheduler(np.ones((1, 1)), np.ones((1, 1)), np.int64(5),
                             PriceBounds((1.0,), 1.0, (1.0,), 1.0))
    assert online.submit(fast_workers).reason == reason
    run = run_slotted(make_admission_policy("fifo"), cluster([[4]], [[4]], 5), [fast_workers])
    assert not run.outcomes[0].admitted and run.outcomes[0].reason == reason
    small = oasis_setting(np.int64(3), np.int64(2), np.int64(2), np.int64(10), 0)
    assert len(small.jobs) == 3 and small.cluster.n_slots == 10
