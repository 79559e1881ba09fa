"""The slotted simulator of the OASiS setting, its scenario and its studies.

``run_slotted`` is checked against hand-made runs (a scripted policy replays a fixed
plan), against broken policies (each constraint (3)-(7) and the activity rules must
stop the run with ``PolicyError``), and — for every shipped policy on random
settings — against an independent replay of the recorded decisions: chunks trained,
completion slot, utility and utilization recomputed here from docs/oasis.md-§4.
"""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from tdmcore.data import open_data
from tdmcore.oasis.admission import (
    ADMISSION_POLICIES,
    Allocation,
    DrfPolicy,
    OasisPolicy,
    SlotDecision,
    SlottedCluster,
    make_admission_policy,
)
from tdmcore.oasis.online import (
    Job,
    PriceBounds,
    chunks_per_worker_slot,
    min_completion_slots,
    sigmoid_utility,
)
from tdmcore.sim.oasis_setting import (
    DECAY,
    GRADIENT_MB,
    PS_SERVERS,
    WORKER_SERVER,
    oasis_cluster,
    oasis_jobs,
    oasis_setting,
)
from tdmcore.sim.oasis_study import compare_admission, performance_ratio_study
from tdmcore.sim.slotted import CRITICAL_DECAY, PolicyError, job_class, run_slotted
from tests.slotted_helpers import Recorder


def make_job(arrival: int = 0, epochs: int = 1, chunks: int = 2, *, tau: float = 1.0,
             minibatches: int = 1, ps_bw: float = 10.0, res: tuple[float, ...] = (1.0,),
             ps_res: tuple[float, ...] | None = None,
             utility: tuple[float, float, float] = (10.0, 0.0, 0.0)) -> Job:
    """No gradient traffic and b = 1: c = floor(1 / (M tau)) chunks per worker-slot;
    ps_bw = 10 -> one PS serves up to 10 workers (z = ceil(y / 10))."""
    return Job(arrival, epochs, chunks, minibatches, tau, 0.0, 1.0, ps_bw, res,
               res if ps_res is None else ps_res, utility)


def one_cpu_cluster(worker_cpu: list[float], ps_cpu: list[float], n_slots: int) -> SlottedCluster:
    return SlottedCluster(np.array(worker_cpu, dtype=float)[:, None],
                          np.array(ps_cpu, dtype=float)[:, None], n_slots, ("cpu",))


def alloc(workers: list[int], ps: list[int]) -> Allocation:
    return Allocation(np.array(workers, dtype=np.int64), np.array(ps, dtype=np.int64))


class Script:
    """A policy that replays ``plan[t] = {job: (workers per server, PSs per server)}``
    and ``rejects[t] = {job: reason}``; it records every view it gets."""

    name = "script"

    def __init__(self, plan, rejects=None) -> None:
        self.plan = plan
        self.rejects = rejects or {}

    def reset(self, cluster, jobs) -> None:
        self.views = []

    def step(self, view) -> SlotDecision:
        self.views.append(view)
        run = {i: a if isinstance(a, Allocation) or not isinstance(a, tuple) else alloc(*a)
               for i, a in self.plan.get(view.t, {}).items()}
        return SlotDecision(run=run, reject=dict(self.rejects.get(view.t, {})))


@pytest.mark.parametrize(
    ("tau", "workers_by_slot", "finish", "utility"),
    [
        # c = floor(1 / 1.0) = 1: 3 workers -> 3 + 3 = 6 chunks by slot 2, delay 1
        (1.0, {1: 3, 2: 3}, 2, 10 / (1 + math.e)),
        # c = floor(1 / 0.5) = 2: 2 then 1 workers -> 4 + 2 = 6 by slot 2
        (0.5, {1: 2, 2: 1}, 2, 10 / (1 + math.e)),
        # c = 2: 3 workers -> 6 chunks in its arrival slot, delay 0 -> 10 / 2 = 5
        (0.5, {1: 3}, 1, 5.0),
        # paused in slot 2: 3 + 0 + 3 = 6 by slot 3, delay 2 -> 10 / (1 + e^2) = 1.19
        (1.0, {1: 3, 3: 3}, 3, 10 / (1 + math.e ** 2)),
        # one worker in slots 1-4: 4 < 6 chunks by the horizon -> no utility
        (1.0, {1: 1, 2: 1, 3: 1, 4: 1}, None, 0.0),
    ],
)
def test_completion_slot_and_utility_by_hand(tau, workers_by_slot, finish, utility) -> None:
    job = make_job(arrival=1, epochs=2, chunks=3, tau=tau, utility=(10.0, 1.0, 0.0))
    plan = {t: {0: ([y], [1])} for t, y in workers_by_slot.items()}
    policy = Script(plan)
    run = run_slotted(policy, one_cpu_cluster([4], [4], 5), [job])
    out = run.outcomes[0]
    assert (out.admitted, out.finish) == (True, finish)
    assert out.utility == pytest.approx(utility)
    assert run.total_utility == pytest.approx(utility)
    assert out.reason == ("finished" if finish is not None else "not finished by the horizon")
    assert out.delay == (None if finish is None else finish - 1)
    # the view: nothing active before the arrival; chunks done so far; completion seen
    assert policy.views[0].active == () and policy.views[1].arrived == (0,)
    c = chunks_per_worker_slot(job)
    if finish is not None and finish + 1 < 5:
        assert policy.views[finish + 1].completed == (0,)
        assert policy.views[finish + 1].active == ()
    assert policy.views[2].done[0] == c * workers_by_slot[1]
    # utilization of slot 1: y workers of 1 CPU on 4, one PS of 1 CPU on 4
    assert run.worker_utilization[1, 0] == pytest.approx(workers_by_slot[1] / 4)
    assert run.ps_utilization[1, 0] == pytest.approx(1 / 4)
    assert run.worker_utilization[0, 0] == 0.0


def test_slot_view_remaining_and_slots_needed() -> None:
    # V = 3 x 4 = 12, c = 2 (tau 0.5); after 2 workers in slot 0, 4 done, 8 remaining:
    # 3 workers -> ceil(8 / 6) = 2 slots; 0 workers -> inf
    job = make_job(epochs=3, chunks=4, tau=0.5)
    policy = Script({0: {0: ([2], [1])}})
    run_slotted(policy, one_cpu_cluster([4], [4], 2), [job])
    view = policy.views[1]
    assert view.remaining(0) == 8
    assert view.slots_needed(0, 3) == 2.0 and view.slots_needed(0, 4) == 1.0
    assert view.slots_needed(0, 0) == math.inf


@pytest.mark.parametrize("name", list(ADMISSION_POLICIES))
def test_unrunnable_jobs_are_rejected_for_every_policy(name: str) -> None:
    # job 0: M tau = 2 x 1.0 = 2 slots per chunk -> c = 0; job 2 arrives after the
    # horizon (slot 6 of 6); job 1 is an easy one: V = 2, room for all its workers
    jobs = [make_job(minibatches=2), make_job(chunks=2, utility=(10.0, 0.0, 0.0)),
            make_job(arrival=6)]
    assert chunks_per_worker_slot(jobs[0]) == 0
    policy = Recorder(make_admission_policy(name))
    run = run_slotted(policy, one_cpu_cluster([8, 8], [8], 6), jobs)
    assert run.outcomes[0].reason == "one chunk takes more than a slot (c = 0)"
    assert run.outcomes[2].reason == "arrives after the horizon"
    for i in (0, 2):
        assert not run.outcomes[i].admitted and run.outcomes[i].finish is None
        assert run.outcomes[i].utility == 0.0
        assert all(i not in v.active for v in policy.views)  # the policy never sees it
    assert run.outcomes[1].admitted and run.outcomes[1].finish is not None
    assert run.acceptance_rate == pytest.approx(1 / 3)


# Two worker servers of 2 CPUs, one PS server of 2 CPUs, 4 slots.  Jobs: 0 (z = y,
# ps_bw = b), 1 (one PS per 10 workers), 2 arrives at slot 2, 3 finishes in slot 0.
BROKEN_JOBS = [make_job(epochs=5, chunks=2, ps_bw=1.0), make_job(epochs=5, chunks=2),
               make_job(arrival=2), make_job(epochs=1, chunks=1)]


@pytest.mark.parametrize(
    ("plan", "rejects", "match"),
    [
        ({0: {1: ([2, 1], [1])}}, None, r"3 workers > 2 chunks \(constraint \(3\)\)"),
        ({0: {0: ([1, 1], [1])}}, None, r"constraint \(6\)"),        # y = 2 needs z = 2
        ({0: {1: ([1, 0], [0])}}, None, r"0 PSs cannot serve 1 workers \(constraint \(6\)\)"),
        ({0: {1: ([1, 0], [2])}}, None, r"2 PSs > 1 workers \(constraint \(7\)\)"),
        ({0: {1: ([2, 0], [1]), 0: ([1, 0], [1])}}, None,            # 3 CPUs on server 0
         r"slot 0: server capacity exceeded"),
        ({0: {0: ([1, 1], [2]), 1: ([1, 0], [1])}}, None,            # 3 PS CPUs on 2
         r"capacity exceeded"),
        ({1: {2: ([1, 0], [1])}}, None, r"slot 1: runs job 2, not active"),  # arrives at 2
        ({0: {3: ([1, 0], [1])}, 1: {3: ([1, 0], [1])}}, None,     # finished in slot 0
         r"slot 1: runs job 3, not active"),
        ({0: {0: ([1, 0], [1])}}, {0: {0: "no"}}, r"runs job 0, not active"),
        ({}, {0: {2: "too early"}}, r"rejects job 2, not active"),
        ({1: {0: ([1, 0], [1])}}, {0: {0: "gone"}}, r"slot 1: runs job 0, not active"),
        ({0: {1: ([1, 0, 0], [1])}}, None, r"wrong shape"),
        ({0: {1: ([-1, 1], [0])}}, None, r"negative"),
        ({0: {1: [[1, 0], [1]]}}, None, r"expected an Allocation"),
    ],
    ids=["(3)", "(6)", "(6)-no-ps", "(7)", "(4)", "(5)", "before-arrival", "after-finish",
         "run-and-reject", "reject-inactive", "run-after-reject", "shape", "negative",
         "not-allocation"],
)
def test_broken_policies_raise_policy_error(plan, rejects, match) -> None:
    cluster = one_cpu_cluster([2, 2], [2], 4)
    with pytest.raises(PolicyError, match=f"^script: .*{match}"):
        run_slotted(Script(plan, rejects), cluster, BROKEN_JOBS)


def test_a_correct_script_of_the_same_jobs_runs() -> None:
    # the same jobs, feasible: guards the table above against passing for a wrong reason
    plan = {0: {0: ([1, 0], [1]), 3: ([0, 1], [1])}}
    run = run_slotted(Script(plan), one_cpu_cluster([2, 2], [2], 4), BROKEN_JOBS)
    assert run.outcomes[3].finish == 0 and run.outcomes[0].finish is None


def small_setting(seed: int, n_jobs: int = 15):
    return oasis_setting(n_jobs=n_jobs, n_worker_servers=2, n_ps_servers=2, n_slots=30,
                         seed=seed, epochs=(2, 10), chunks=(2, 10))


@pytest.mark.parametrize("name", list(ADMISSION_POLICIES))
def test_runs_are_deterministic_and_policies_reset(name: str) -> None:
    setting = small_setting(3)
    first = run_slotted(make_admission_policy(name), setting.cluster, setting.jobs)
    reused = make_admission_policy(name)
    other = small_setting(4)
    run_slotted(reused, other.cluster, other.jobs)  # a previous run must not leak
    for again in (run_slotted(make_admission_policy(name), setting.cluster, setting.jobs),
                  run_slotted(reused, setting.cluster, setting.jobs)):
        assert again.outcomes == first.outcomes
        np.testing.assert_array_equal(again.worker_utilization, first.worker_utilization)
        np.testing.assert_array_equal(again.ps_utilization, first.ps_utilization)


# ------------------------------------------------- every policy, random settings
def replay(cluster: SlottedCluster, jobs, rec: Recorder):
    """Chunks, finish slots and utilization recomputed from the recorded decisions."""
    n_slots = cluster.n_slots
    done = np.zeros(len(jobs), dtype=np.int64)
    finish: list[int | None] = [None] * len(jobs)
    util_w = np.zeros((n_slots, cluster.worker_capacity.shape[1]))
    util_p = np.zeros_like(util_w)
    for t, run in enumerate(rec.runs):
        used_w = np.zeros_like(cluster.worker_capacity)
        used_p = np.zeros_like(cluster.ps_capacity)
        for i, (y, z) in run.items():
            job = jobs[i]
            assert job.arrival <= t and finish[i] is None
            ny, nz = int(y.sum()), int(z.sum())
            assert ny <= job.chunks and nz <= ny                                # (3), (7)
            assert job.worker_bw * ny <= job.ps_bw * nz * (1 + 1e-9)            # (6)
            used_w += y[:, None] * np.array(job.worker_res)
            used_p += z[:, None] * np.array(job.ps_res)
            done[i] += chunks_per_worker_slot(job) * ny
            if done[i] >= job.workload_chunks:
                finish[i] = t
        assert np.all(used_w <= cluster.worker_capacity + 1e-9)                 # (4)
        assert np.all(used_p <= cluster.ps_capacity + 1e-9)                     # (5)
        util_w[t] = used_w.sum(axis=0) / cluster.worker_capacity.sum(axis=0)
        util_p[t] = used_p.sum(axis=0) / cluster.ps_capacity.sum(axis=0)
    return finish, util_w, util_p


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("name", list(ADMISSION_POLICIES))
def test_invariants_of_every_policy(name: str, seed: int) -> None:
    setting = small_setting(seed)
    cluster, jobs = setting.cluster, setting.jobs
    rec = Recorder(make_admission_policy(name))
    run = run_slotted(rec, cluster, jobs)  # no PolicyError
    finish, util_w, util_p = replay(cluster, jobs, rec)
    np.testing.assert_allclose(run.worker_utilization, util_w, atol=1e-12)
    np.testing.assert_allclose(run.ps_utilization, util_p, atol=1e-12)
    rejected_at: dict[int, int] = {}
    for t, rejects in enumerate(rec.rejects):
        for i in rejects:
            assert i not in rejected_at
            rejected_at[i] = t
    for i, (job, out) in enumerate(zip(jobs, run.outcomes, strict=True)):
        assert out.finish == finish[i]
        assert out.arrival == job.arrival and out.job_class == job_class(job)
        if out.finish is None:
            assert out.utility == 0.0 and out.reason != "finished"
        else:
            assert out.utility == pytest.approx(sigmoid_utility(out.finish - job.arrival,
                                                                *job.utility), abs=1e-12)
            assert out.reason == "finished"
        if not out.admitted:  # turned away at arrival: never runs, never finishes
            assert out.finish is None
            assert all(i not in r for r in rec.runs)
            assert rejected_at.get(i) == job.arrival
        if i in rejected_at:  # rejected or dropped: never runs from then on
            assert all(i not in r for r in rec.runs[rejected_at[i]:])
            assert out.reason == rec.rejects[rejected_at[i]][i]
    assert 0.0 <= run.acceptance_rate <= 1.0
    assert run.acceptance_rate == pytest.approx(np.mean([o.admitted for o in run.outcomes]))
    assert run.finished == sum(f is not None for f in finish) > 0
    assert run.total_utility == pytest.approx(sum(o.utility for o in run.outcomes))
    assert sum(run.utility_by_class().values()) == pytest.approx(run.total_utility)
    for cls in ("sensitive", "critical"):
        want = [o.delay - j.utility[2] for j, o in zip(jobs, run.outcomes, strict=True)
                if o.finish is not None and o.job_class == cls]
        np.testing.assert_allclose(run.lateness(cls), want)
    if name in ("drf", "dorm"):  # every job is admitted
        assert run.acceptance_rate == 1.0
    assert len(run.decision_s) == cluster.n_slots and run.wall_s > 0


# ------------------------------------------------------------ the §V-A setting
def test_gradient_sizes_are_the_models_csv_column() -> None:
    with open_data("models.csv") as fh:
        table = {row["model"]: float(row["grad_fp32_MB"]) for row in csv.DictReader(fh)}
    assert GRADIENT_MB == table


@pytest.mark.parametrize(("g2", "cls"), [(0.0, "insensitive"), (0.02, "sensitive"),
                                         (CRITICAL_DECAY - 1e-9, "sensitive"),
                                         (CRITICAL_DECAY, "critical"), (3.0, "critical")])
def test_job_class_by_decay(g2: float, cls: str) -> None:
    assert job_class(make_job(utility=(1.0, g2, 1.0))) == cls


def test_decay_ranges_fall_in_their_classes() -> None:
    for cls, (low, high) in DECAY.items():
        assert job_class(make_job(utility=(1.0, low, 0.0))) == cls
        assert job_class(make_job(utility=(1.0, high, 0.0))) == cls


def test_oasis_cluster_server_types() -> None:
    cluster = oasis_cluster(5, 7, 20, seed=3)
    assert cluster.worker_capacity.shape == (5, 5) and cluster.ps_capacity.shape == (7, 5)
    assert cluster.n_slots == 20
    np.testing.assert_array_equal(cluster.worker_capacity[:, :4], np.tile(WORKER_SERVER, (5, 1)))
    for row in cluster.ps_capacity:
        assert tuple(row[:4]) in PS_SERVERS
    for cap in (cluster.worker_capacity, cluster.ps_capacity):
        assert np.all((cap[:, 4] >= 20.0) & (cap[:, 4] <= 50.0))
    again = oasis_cluster(5, 7, 20, seed=3)
    np.testing.assert_array_equal(again.ps_capacity, cluster.ps_capacity)


@pytest.mark.parametrize(
    ("mix", "classes"),
    [((1, 0, 0), {"insensitive"}), ((0, 1, 0), {"sensitive"}), ((0, 0, 2), {"critical"}),
     ((1, 1, 1), {"insensitive", "sensitive", "critical"})],
)
def test_oasis_jobs_follow_their_ranges(mix, classes) -> None:
    jobs, models = oasis_jobs(60, 50, seed=11, mix=mix, priority=(2.0, 5.0), epochs=(3, 4),
                              chunks=(6, 9), slot_s=60.0)
    assert len(jobs) == len(models) == 60 and set(models) <= set(GRADIENT_MB)
    assert {job_class(j) for j in jobs} == classes
    arrivals = [j.arrival for j in jobs]
    assert arrivals == sorted(arrivals) and 0 <= min(arrivals) and max(arrivals) < 35  # 70 %
    for job, model in zip(jobs, models, strict=True):
        g1, g2, g3 = job.utility
        assert 2.0 <= g1 <= 5.0 and 3 <= job.epochs <= 4 and 6 <= job.chunks <= 9
        assert DECAY[job_class(job)][0] <= g2 <= DECAY[job_class(job)][1]
        assert chunks_per_worker_slot(job) >= 1
        assert min_completion_slots(job) <= g3 <= 3 * min_completion_slots(job)
        assert job.grad_size * 60.0 == pytest.approx(GRADIENT_MB[model] * 8 / 1000)
        assert job.worker_res[4] == job.worker_bw and job.ps_res[4] == job.ps_bw
        assert job.ps_res[0] == 0.0  # PSs ask for no GPU
    again, _ = oasis_jobs(60, 50, seed=11, mix=mix, priority=(2.0, 5.0), epochs=(3, 4),
                          chunks=(6, 9), slot_s=60.0)
    assert again == jobs
    other, _ = oasis_jobs(60, 50, seed=12, mix=mix, priority=(2.0, 5.0), epochs=(3, 4),
                          chunks=(6, 9), slot_s=60.0)
    assert other != jobs


def test_oasis_setting_is_cluster_plus_jobs_of_one_seed() -> None:
    setting = oasis_setting(n_jobs=8, n_worker_servers=3, n_ps_servers=2, n_slots=12, seed=5)
    jobs, models = oasis_jobs(8, 12, 5)
    assert setting.jobs == jobs and setting.models == models and setting.seed == 5
    np.testing.assert_array_equal(setting.cluster.worker_capacity,
                                  oasis_cluster(3, 2, 12, 5).worker_capacity)


def test_short_slots_give_valid_jobs_or_a_named_error() -> None:
    try:
        jobs, _ = oasis_jobs(30, 20, seed=0, slot_s=5.0)
    except ValueError as exc:
        assert str(exc).startswith("slot_s")
    else:
        assert all(chunks_per_worker_slot(j) >= 1 for j in jobs)


# ------------------------------------------------------------------- the studies
def test_compare_admission_runs_the_same_setting() -> None:
    setting = small_setting(1, n_jobs=8)
    seen: list[str] = []
    runs = compare_admission(setting, ["fifo", "drf"], progress=seen.append)
    assert list(runs) == seen == ["fifo", "drf"]
    alone = run_slotted(make_admission_policy("drf"), setting.cluster, setting.jobs)
    assert runs["drf"].outcomes == alone.outcomes
    assert all(r.jobs == setting.jobs for r in runs.values())
    assert set(compare_admission(setting)) == set(ADMISSION_POLICIES)


def test_performance_ratio_study_offline_bounds_oasis() -> None:
    calls: list[None] = []
    rows = performance_ratio_study(server_counts=(4,), priority_highs=(10.0,),
                                   scales=(0.25, 1.0, 4.0), seeds=(0, 1), n_jobs=6,
                                   n_slots=10, progress=lambda: calls.append(None))
    assert len(rows) == len(calls) == 6
    assert {(r.seed, r.scale) for r in rows} == {(s, k) for s in (0, 1)
                                                 for k in (0.25, 1.0, 4.0)}
    for seed in (0, 1):  # one offline optimum per instance, whatever the scale
        assert len({r.offline for r in rows if r.seed == seed}) == 1
    for row in rows:
        assert row.online > 0 and row.servers == 4 and row.priority_high == 10.0
        assert row.ratio >= 1 - 1e-6  # the offline optimum bounds OASiS
        assert row.ratio == pytest.approx(row.offline / row.online)
    # a row's online utility is OASiS's with U and L both at `scale` times their values
    # (the setting as the docstring states it: servers split evenly, g1 in [1, high],
    # 1-3 epochs, 2-8 chunks, 30 s slots)
    setting = oasis_setting(6, 2, 2, 10, 1, priority=(1.0, 10.0), epochs=(1, 3),
                            chunks=(2, 8), slot_s=30.0)
    actual = PriceBounds.from_jobs(list(setting.jobs), 10)
    for row in rows:
        if row.seed == 1:
            policy = OasisPolicy(actual, u_scale=row.scale, l_scale=row.scale)
            online = run_slotted(policy, setting.cluster, setting.jobs).total_utility
            assert row.online == pytest.approx(online)


# ---------------------------------------------------------------------- bad input
CAP = np.ones((2, 1))


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: SlottedCluster(np.ones(3), CAP, 4, ("cpu",)), "worker_capacity"),
        (lambda: SlottedCluster(-CAP, CAP, 4, ("cpu",)), "worker_capacity"),
        (lambda: SlottedCluster(np.ones((0, 1)), CAP, 4, ("cpu",)), "worker_capacity"),
        (lambda: SlottedCluster(CAP * np.nan, CAP, 4, ("cpu",)), "worker_capacity"),
        (lambda: SlottedCluster(CAP, -CAP, 4, ("cpu",)), "ps_capacity"),
        (lambda: SlottedCluster(CAP, np.ones((2, 2)), 4, ("cpu",)), "ps_capacity"),
        (lambda: SlottedCluster(CAP, np.ones((1, 1, 1)), 4, ("cpu",)), "ps_capacity"),
        (lambda: SlottedCluster(CAP, CAP, 0, ("cpu",)), "n_slots"),
        (lambda: SlottedCluster(CAP, CAP, 2.0, ("cpu",)), "n_slots"),
        (lambda: SlottedCluster(CAP, CAP, True, ("cpu",)), "n_slots"),
        (lambda: SlottedCluster(CAP, CAP, 4), "resources"),
        (lambda: run_slotted(DrfPolicy(), SlottedCluster(CAP, CAP, 4, ("cpu",)), []), "jobs"),
        (lambda: run_slotted(DrfPolicy(), SlottedCluster(CAP, CAP, 4, ("cpu",)),
                             [make_job(res=(1.0, 1.0))]), "jobs"),
        (lambda: run_slotted(DrfPolicy(), SlottedCluster(CAP, CAP, 4, ("cpu",)),
                             [make_job(), "job"]), "jobs"),
        (lambda: run_slotted(DrfPolicy(), CAP, [make_job()]), "cluster"),
        (lambda: oasis_cluster(0, 1, 10), "n_worker_servers"),
        (lambda: oasis_cluster(1, 0, 10), "n_ps_servers"),
        (lambda: oasis_cluster(1, 1, 0), "n_slots"),
        (lambda: oasis_cluster(1, 1, 10, seed=-1), "seed"),
        (lambda: oasis_jobs(0), "n_jobs"),
        (lambda: oasis_jobs(True), "n_jobs"),
        (lambda: oasis_jobs(5, n_slots=0), "n_slots"),
        (lambda: oasis_jobs(5, seed=1.5), "seed"),
        (lambda: oasis_jobs(5, mix=(1, 1)), "mix"),
        (lambda: oasis_jobs(5, mix=(1, -1, 1)), "mix"),
        (lambda: oasis_jobs(5, mix=(0, 0, 0)), "mix"),
        (lambda: oasis_jobs(5, mix=(1, float("nan"), 1)), "mix"),
        (lambda: oasis_jobs(5, priority=(0.0, 10.0)), "priority"),
        (lambda: oasis_jobs(5, priority=(10.0, 5.0)), "priority"),
        (lambda: oasis_jobs(5, priority=(1.0, float("inf"))), "priority"),
        (lambda: oasis_jobs(5, epochs=(0, 3)), "epochs"),
        (lambda: oasis_jobs(5, epochs=(3, 2)), "epochs"),
        (lambda: oasis_jobs(5, epochs=(1.5, 3)), "epochs"),
        (lambda: oasis_jobs(5, chunks=(0, 3)), "chunks"),
        (lambda: oasis_jobs(5, chunks=(4, 3)), "chunks"),
        (lambda: oasis_jobs(5, slot_s=0.0), "slot_s"),
        (lambda: oasis_jobs(5, slot_s=float("nan")), "slot_s"),
        (lambda: oasis_setting(n_jobs=0), "n_jobs"),
        (lambda: oasis_setting(n_ps_servers=0), "n_ps_servers"),
        (lambda: oasis_setting(mix=(1, 0)), "mix"),
        (lambda: oasis_setting(priority=(5.0, 1.0)), "priority"),
        (lambda: oasis_setting(epochs=(2, 1)), "epochs"),
        (lambda: oasis_setting(chunks=(0, 1)), "chunks"),
        (lambda: oasis_setting(slot_s=-1.0), "slot_s"),
        (lambda: compare_admission(small_setting(0, 3), ["fifo", "nope"]), "policies"),
        (lambda: compare_admission(small_setting(0, 3), [42]), "policies"),
        (lambda: compare_admission(small_setting(0, 3), ["drf", DrfPolicy()]), "policies"),
        (lambda: performance_ratio_study(server_counts=(1,)), "server_counts"),
    ],
)
def test_bad_input_names_the_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


def test_policy_error_is_the_one_policy_error() -> None:
    # a policy is an argument: its broken allocation is tdmcore's one PolicyError, a
    # ValueError naming the policy, as a user's scheduling policy's is
    from tdmcore.framework import PolicyError as Framework

    assert PolicyError is Framework and issubclass(PolicyError, ValueError)
