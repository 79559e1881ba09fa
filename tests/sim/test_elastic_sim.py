"""The elastic simulator, DRAGON's workloads, and invariants of every policy.

``run_elastic`` is checked on hand-computed runs (finish time = images / rate, the
rescale pause, Kubeflow's spread placement), against broken policies
(``PolicyError``), for determinism, on DRAGON's Table 1 (Fig. 7's order of the mean
elapsed time) and its Kubeflow deadlock, and — for every policy on seeded Poisson
workloads — against invariants checked after every decision: no over-commit, every
running job has its PSs and a worker count within its range, no partial gangs for the
gang schedulers, every job finishes, KOD2 with a finite starvation limit starts every
job.  Decision-level cases are in ``test_elastic.py``.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest

from tdmcore.elastic import (
    BATCH_IMAGES,
    DragonPolicy,
    ElasticJob,
    ElasticView,
    Kod2Policy,
    KubeflowPolicy,
    LocalityPolicy,
    Plan,
    TaskRequest,
    WeightedPolicy,
    apply_plan,
    make_elastic_policy,
)
from tdmcore.elastic.job import GRADIENT_GBIT
from tdmcore.model import Cluster, Node
from tdmcore.sim.elastic import PolicyError, run_elastic
from tdmcore.sim.elastic_workloads import (
    DRAGON_TABLE1,
    dragon_poisson,
    dragon_table1,
    gpu_cluster,
    kubeflow_deadlock,
)

POLICIES = ("dragon", "locality", "kubeflow", "kod2", "weighted")


class Scripted:
    """A policy that returns ``script[t]`` (a function of the view) at time ``t``."""

    name = "scripted"
    elastic = True

    def __init__(self, script, sync_s: float = 15.0) -> None:
        self.script = script
        self.sync_s = sync_s

    def reset(self, jobs) -> None:
        self.jobs = jobs

    def start_workers(self, job) -> int:
        return job.min_workers

    def decide(self, view: ElasticView) -> list[Plan]:
        make = self.script.get(view.now_s)
        return [] if make is None else make(view)


class Recorder:
    """Wraps a policy; keeps the (time, plan) pairs of running jobs' rescales."""

    def __init__(self, policy) -> None:
        self.policy = policy
        self.name, self.elastic, self.sync_s = policy.name, policy.elastic, policy.sync_s
        self.start_workers = policy.start_workers
        self.plans: list[tuple[float, Plan]] = []
        self.last: ElasticView | None = None

    def reset(self, jobs) -> None:
        self.policy.reset(jobs)

    def decide(self, view: ElasticView) -> list[Plan]:
        plans = self.policy.decide(view)
        self.plans += [(view.now_s, p) for p in plans]
        self.last = view
        return plans


# -- hand-computed runs ---------------------------------------------------------------------

def one_node(gpus: float = 4.0, link: float = 10.0):
    return gpu_cluster(1, gpus, 32.0, 128.0, link)


def test_single_job_finishes_at_images_over_rate() -> None:
    # AlexNet, 2 workers on one node: 59.1 images/s; 591 steps x 64 = 37,824 images
    # -> 640 s; arrives at 10 -> finishes at 650.  min = max: no scaling.
    j = ElasticJob("a", "AlexNet", 10.0, 591.0, 2, 2, 2)
    for name in POLICIES:
        run = run_elastic(make_elastic_policy(name), one_node(), [j])
        (o,) = run.outcomes
        start = 12.0 if name == "kubeflow" else 10.0  # pods created 1 s apart: ps, w0, w1
        assert o.status == "finished", name
        assert o.start_s == pytest.approx(start)
        assert o.finish_s == pytest.approx(start + 640.0)
        assert o.scaling_s == 0.0 and o.rescales == 0 and o.peak_workers == 2
        assert o.wait_s == pytest.approx(start - 10.0)
        assert o.running_s == pytest.approx(640.0)
        assert run.makespan_s == pytest.approx(start + 640.0)
        assert run.finished == 1 and run.deadlocked == ()


def test_rescale_pauses_the_job_for_rescale_s() -> None:
    # DRAGON, AlexNet, 2 workers (max 4) on a 4-GPU node, arrives at 10.  Syncs every
    # 15 s from 10; the last action is the start at 10; at 70 (60 s = mu later) step 3
    # scales up to 4 workers on the same node: paused 70..115 (rescale 45 s), then
    # 97.69 images/s.  Images done by 70: 60 x 59.1 = 3,546 of 37,824:
    # finish = 115 + 34,278 / 97.69 = 465.885 s
    j = ElasticJob("a", "AlexNet", 10.0, 591.0, 2, 4, 2)
    rec = Recorder(DragonPolicy())
    run = run_elastic(rec, one_node(), [j])
    (o,) = run.outcomes
    assert [(t, p.action, len(p.add)) for t, p in rec.plans] == [
        (10.0, "start", 3), (70.0, "scale_up", 2)]
    assert o.finish_s == pytest.approx(115.0 + (37824 - 60 * 59.1) / 97.69)
    assert o.scaling_s == 45.0 and o.rescales == 1 and o.peak_workers == 4
    assert o.running_s == pytest.approx(o.finish_s - 10.0 - 45.0)
    # busy GPUs: 2 from 10, 0 during the pause, 4 from 115
    busy = dict(zip(run.times_s.tolist(), run.busy_gpus.tolist(), strict=True))
    assert busy[10.0] == 2.0 and busy[70.0] == 0.0 and busy[115.0] == 4.0
    # rescale_s = 0: no pause
    fast = run_elastic(DragonPolicy(), one_node(), [j], rescale_s=0.0).outcomes[0]
    assert fast.finish_s == pytest.approx(70.0 + (37824 - 60 * 59.1) / 97.69)
    assert fast.scaling_s == 0.0 and fast.rescales == 1


def test_a_scaled_down_victim_pauses_too() -> None:
    # r holds the 4 GPUs (min 1); w arrives at 5 and is urgent after 30 s: at the
    # sync of 45 (0, 15, 30, 45) DRAGON removes r's worker-3 and starts w.  r pauses
    # 45..90 and runs with 3 workers after; w starts at 45 without a pause.
    r = ElasticJob("r", "AlexNet", 0.0, 5000.0, 1, 4, 4)
    w = ElasticJob("w", "AlexNet", 5.0, 100.0, 1, 1, 1)
    rec = Recorder(DragonPolicy())
    run = run_elastic(rec, one_node(), [r, w])
    assert [(t, p.job, p.action) for t, p in rec.plans][:3] == [
        (0.0, "r", "start"), (45.0, "r", "scale_down"), (45.0, "w", "start")]
    ro, wo = run.outcomes
    assert wo.start_s == 45.0 and wo.finish_s == pytest.approx(45.0 + 6400 / 38.09)
    assert ro.rescales >= 1 and ro.scaling_s == 45.0 * ro.rescales
    # r: 45 s at 97.69, then paused to 90, then 77.76 (3 workers) at least until w ends
    done_at_w_end = 45 * 97.69 + (wo.finish_s - 90.0) * 77.76
    assert done_at_w_end < r.images


def test_kubeflow_spread_placement_is_slower_by_the_formula() -> None:
    # 2 nodes (4 GPUs, 16 cores, 64 GiB, 1 Gbps); AlexNet ps + 3 workers, pods 1 s apart:
    # ps -> node 0, w0 -> 1, w1 -> 0, w2 -> 1 (LeastAllocated, see test_elastic.py);
    # runs from 3 s with 2 remote workers: round = 3 x 64 / 77.76 + 2 x 1.952 x 2 / 1
    j = ElasticJob("a", "AlexNet", 0.0, 500.0, 3, 3, 3)
    cluster = gpu_cluster(2, 4.0, 16.0, 64.0, 1.0)
    rate = 3 * BATCH_IMAGES / (3 * BATCH_IMAGES / 77.76 + 2 * GRADIENT_GBIT["AlexNet"] * 2)
    assert rate == pytest.approx(j.rate(3, 2, 1.0))
    (o,) = run_elastic(KubeflowPolicy(), cluster, [j]).outcomes
    assert o.start_s == 3.0
    assert o.finish_s == pytest.approx(3.0 + j.images / rate)
    # locality packs all on one node: 77.76 images/s
    (o,) = run_elastic(LocalityPolicy(), cluster, [j]).outcomes
    assert o.finish_s == pytest.approx(j.images / 77.76)


def test_scripted_plans_are_applied_in_order() -> None:
    # start with 1 worker at 0; scale up by 2 at 15 (pause to 60); AlexNet 1 worker
    # 38.09 images/s for 15 s, then 77.76 from 60
    j = ElasticJob("a", "AlexNet", 0.0, 300.0, 1, 3, 1)
    script = {
        0.0: lambda v: [Plan("a", "start", ((j.ps_pod(0), 0), (j.worker_pod(0), 0)))],
        15.0: lambda v: [Plan("a", "scale_up", ((j.worker_pod(1), 0), (j.worker_pod(2), 0)))],
    }
    (o,) = run_elastic(Scripted(script), one_node(), [j]).outcomes
    assert o.finish_s == pytest.approx(60.0 + (j.images - 15 * 38.09) / 77.76)
    assert o.scaling_s == 45.0 and o.peak_workers == 3


def test_a_job_runs_only_with_its_ps_and_its_minimum() -> None:
    # pods placed one by one ("place"): workers without the PS do nothing; with the PS
    # at 30 s the job (min 2) runs from 30 s at 59.1 images/s
    j = ElasticJob("a", "AlexNet", 0.0, 591.0, 2, 2, 2)
    script = {
        0.0: lambda v: [Plan("a", "place", ((j.worker_pod(0), 0),))],
        15.0: lambda v: [Plan("a", "place", ((j.worker_pod(1), 0),))],
        30.0: lambda v: [Plan("a", "place", ((j.ps_pod(0), 0),))],
    }
    (o,) = run_elastic(Scripted(script), one_node(), [j]).outcomes
    assert o.start_s == 30.0 and o.finish_s == pytest.approx(670.0)
    # never the PS: held pods, no run, reported deadlocked
    del script[30.0]
    (o,) = run_elastic(Scripted(script), one_node(), [j]).outcomes
    assert o.status == "deadlocked" and o.start_s is None


# -- broken policies ----------------------------------------------------------------------

@pytest.mark.parametrize(
    "bad",
    [
        # a worker asking 8 GPUs of a 4-GPU node
        lambda j: [Plan("a", "start", ((j.ps_pod(0), 0),
                                       (ElasticJob("a", "AlexNet", 0.0, 1.0, 1, 1, 1,
                                                   worker=TaskRequest(gpu=8.0)).worker_pod(0),
                                        0)))],
        # the same pod twice
        lambda j: [Plan("a", "start", ((j.ps_pod(0), 0), (j.ps_pod(0), 0)))],
        # a node that does not exist
        lambda j: [Plan("a", "start", ((j.ps_pod(0), 3),))],
        # removing a pod that is not placed
        lambda j: [Plan("a", "scale_down", remove=("a-worker-0",))],
    ],
)
def test_a_plan_that_cannot_be_applied_raises_policy_error(bad) -> None:
    j = ElasticJob("a", "AlexNet", 0.0, 100.0, 1, 1, 1)
    with pytest.raises(PolicyError, match=r"^scripted: at 0\.0 s: plan:"):
        run_elastic(Scripted({0.0: lambda v: bad(j)}), one_node(), [j])


def test_there_is_one_policy_error() -> None:
    from tdmcore import framework
    from tdmcore.sim import slotted

    assert PolicyError is framework.PolicyError is slotted.PolicyError
    assert issubclass(PolicyError, ValueError)  # a policy is an argument


def test_removing_another_jobs_pod_raises_policy_error() -> None:
    a = ElasticJob("a", "AlexNet", 0.0, 1000.0, 1, 1, 1)
    b = ElasticJob("b", "AlexNet", 0.0, 1000.0, 1, 1, 1)
    script = {
        0.0: lambda v: [Plan("a", "start", ((a.ps_pod(0), 0), (a.worker_pod(0), 0))),
                        Plan("b", "start", ((b.ps_pod(0), 0), (b.worker_pod(0), 0)))],
        15.0: lambda v: [Plan("b", "scale_down", remove=("a-worker-0",))],
    }
    with pytest.raises(PolicyError, match="15.0 s: plan: scale_down of 'b'"):
        run_elastic(Scripted(script), one_node(), [a, b])


# -- determinism and the workloads ------------------------------------------------------------

def test_dragon_table1_is_table_1() -> None:
    cluster, jobs = dragon_table1()
    assert len(cluster) == 2
    assert cluster.gpu.tolist() == [4.0, 4.0] and cluster.cpu.tolist() == [16.0, 16.0]
    assert cluster.mem_gib.tolist() == [64.0, 64.0] and cluster.link_gbps.tolist() == [1, 1]
    models = "R I I A R A I R I A I A".split()
    workers = [4, 4, 2, 2, 3, 2, 2, 1, 2, 2, 1, 1]
    mins = [2, 2, 2, 2, 2, 2, 2, 1, 2, 2, 1, 1]
    steps = [2800, 3600, 1000, 450, 2100, 1000, 2000, 2400, 2500, 800, 1000, 1200]
    arrivals = [0, 0.56, 2.53, 6.34, 7.58, 13.11, 19.01, 27.54, 34.56, 42.58, 47.58, 51.19]
    full = {"R": "ResNet50", "I": "InceptionV3", "A": "AlexNet"}
    assert len(jobs) == len(DRAGON_TABLE1) == 12
    for i, j in enumerate(jobs):
        assert (j.name, j.model, j.workers, j.min_workers, j.max_workers, j.steps,
                j.arrival_s) == (f"job{i + 1}", full[models[i]], workers[i], mins[i], 4,
                                 steps[i], arrivals[i])


@pytest.mark.parametrize("seed", [0, 7])
def test_dragon_poisson_follows_section_4_1(seed: int) -> None:
    cluster, jobs = dragon_poisson(40, 150.0, seed)
    assert len(cluster) == 4 and cluster.gpu.tolist() == [8.0] * 4
    assert len(jobs) == 40 and len({j.name for j in jobs}) == 40
    arrivals = [j.arrival_s for j in jobs]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0.0 < arrivals[1]
    for j in jobs:
        assert 2 <= j.min_workers <= j.workers <= j.max_workers <= 8
        assert 450 <= j.steps <= 3600
        assert 1.0 <= j.utility[0] <= 10.0 and j.utility[1] in (0.0, 1 / 600)
    # seeded: the same jobs again, others for another seed
    assert dragon_poisson(40, 150.0, seed)[1] == jobs
    assert dragon_poisson(40, 150.0, seed + 1)[1] != jobs
    # the mean gap scales the arrivals
    gaps = np.diff(arrivals)
    assert 50.0 < float(np.mean(gaps)) < 400.0


def test_poisson_arrivals_start_with_one_job_at_zero() -> None:
    # until 2026-11-24 the arrival times were shifted back by the mean gap and clipped
    # at 0: seeds 0-5 had 0, 2, 0, 3, 1 and 0 jobs at t = 0
    for seed in range(6):
        arrivals = [j.arrival_s for j in dragon_poisson(100, 62.0, seed)[1]]
        assert arrivals.count(0.0) == 1


@pytest.mark.parametrize("name", POLICIES)
def test_runs_are_deterministic(name: str) -> None:
    cluster, jobs = dragon_poisson(15, 100.0, 3)
    a = run_elastic(make_elastic_policy(name), cluster, jobs)
    b = run_elastic(make_elastic_policy(name), cluster, jobs)
    assert a.outcomes == b.outcomes
    np.testing.assert_array_equal(a.times_s, b.times_s)
    np.testing.assert_array_equal(a.busy_gpus, b.busy_gpus)


def test_dragon_table1_order_of_fig_7() -> None:
    # DRAGON Fig. 7: mean elapsed DRAGON < locality-aware < Kubeflow; Fig. 6: Kubeflow's
    # running times are longer (spread over 1 GbE); Fig. 8: DRAGON's utilization is the
    # highest
    cluster, jobs = dragon_table1()
    runs = {n: run_elastic(make_elastic_policy(n), cluster, jobs)
            for n in ("dragon", "locality", "kubeflow")}
    assert all(r.finished == 12 for r in runs.values())
    elapsed = {n: r.mean("elapsed_s") for n, r in runs.items()}
    assert elapsed["dragon"] < elapsed["locality"] < elapsed["kubeflow"]
    assert runs["kubeflow"].mean("running_s") > 1.2 * runs["locality"].mean("running_s")
    assert runs["dragon"].gpu_utilization > runs["locality"].gpu_utilization
    assert runs["dragon"].mean("scaling_s") > 0.0 == runs["locality"].mean("scaling_s")


def test_kubeflow_deadlocks_where_gang_schedulers_finish() -> None:
    # 4 ResNet-50 jobs of 4 workers, submitted 0.5 s apart on 2 x 4 GPUs: their pods
    # interleave; every GPU ends up in a partial gang and no job can run
    cluster, jobs = kubeflow_deadlock()
    rec = Recorder(KubeflowPolicy())
    run = run_elastic(rec, cluster, jobs)
    assert run.finished == 0
    assert run.deadlocked == ("job1", "job2", "job3", "job4")
    assert all(o.status == "deadlocked" and o.start_s is None for o in run.outcomes)
    assert math.isinf(run.mean("elapsed_s")) and math.isinf(run.makespan_s)
    state = rec.last.state.copy()
    for t, p in rec.plans:
        if t == rec.last.now_s:
            apply_plan(state, p)
    assert state.free_gpu.tolist() == [0.0, 0.0]
    held = [sum(p.pod.gpu for p in state.job_pods(j.name)) for j in jobs]
    assert sum(held) == 8.0 and all(0 < h < 4 for h in held)
    assert held == [3.0, 2.0, 2.0, 1.0]  # docs/elastic.md
    assert rec.last.now_s <= 3600.0 + 5.0  # nothing changed for stall_s = 1 h: stop
    for name in ("dragon", "locality", "kod2", "weighted"):
        run = run_elastic(make_elastic_policy(name), cluster, jobs)
        assert run.finished == 4 and run.deadlocked == (), name


def test_a_job_too_big_for_the_cluster_is_rejected_and_blocks_nobody() -> None:
    # big's minimum gang (PS + 8 one-GPU workers) cannot fit the empty 4-GPU node:
    # rejected at arrival under every policy, so it blocks no queue
    big = ElasticJob("big", "AlexNet", 0.0, 100.0, 8, 8, 8)
    small = ElasticJob("small", "AlexNet", 1.0, 100.0, 1, 1, 1)
    for name in ("dragon", "locality", "kubeflow", "kod2", "weighted"):
        run = run_elastic(make_elastic_policy(name), one_node(), [big, small])
        statuses = {o.name: o.status for o in run.outcomes}
        assert statuses == {"big": "rejected", "small": "finished"}, name
        assert math.isinf(run.mean("elapsed_s"))


# -- invariants on random arrival sequences -------------------------------------------------

class Checked:
    """Wraps a policy and checks the state its plans lead to after every decision."""

    def __init__(self, policy) -> None:
        self.policy = policy
        self.name, self.elastic, self.sync_s = policy.name, policy.elastic, policy.sync_s
        self.actions: Counter[str] = Counter()
        self.decisions = 0

    def reset(self, jobs) -> None:
        self.jobs = jobs
        self.policy.reset(jobs)

    def decide(self, view: ElasticView) -> list[Plan]:
        plans = self.policy.decide(view)
        self.decisions += 1
        state = view.state.copy()
        running = set(view.running)
        for plan in plans:
            apply_plan(state, plan)
            self.actions[plan.action] += 1
            if plan.action == "start":
                assert plan.job in view.waiting
                running.add(plan.job)
            elif plan.action in ("scale_up", "scale_down"):
                assert plan.job in running, (view.now_s, plan)
        # never over-commit
        for free in (state.free_gpu, state.free_cpu, state.free_mem):
            assert np.all(free >= -1e-9), (view.now_s, free)
        for name, job in self.jobs.items():
            pods = state.job_pods(name)
            n_ps = sum(not job.is_worker(p.pod.name) for p in pods)
            n_w = len(pods) - n_ps
            if name in running:
                assert n_ps == job.n_ps, (view.now_s, name)
                lo, hi = ((job.min_workers, job.max_workers) if self.elastic
                          else (job.workers, job.workers))
                assert lo <= n_w <= hi, (view.now_s, name, n_w, lo, hi)
            elif self.name != "kubeflow":
                assert not pods, (view.now_s, name, "partial gang")
        return plans


SEEDS = (0, 1, 2)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", POLICIES)
def test_invariants_on_poisson_workloads(name: str, seed: int) -> None:
    cluster, jobs = dragon_poisson(25, 100.0, seed)
    checked = Checked(make_elastic_policy(name))
    run = run_elastic(checked, cluster, jobs)
    assert checked.decisions > 25
    if name != "kubeflow":
        assert run.finished == len(jobs), [o for o in run.outcomes if o.status != "finished"]
    for o in run.outcomes:
        if o.status == "finished":
            assert o.start_s is not None and o.arrival_s <= o.start_s < o.finish_s
            assert o.running_s is not None and o.running_s > 0
            assert 1 <= o.peak_workers <= next(j for j in jobs if j.name == o.name).max_workers
    if name in ("dragon", "kod2"):  # the scaling branches are exercised
        assert checked.actions["scale_down"] > 0 and checked.actions["scale_up"] > 0


def test_scaling_happens_across_the_seeds() -> None:
    total: Counter[str] = Counter()
    for seed in SEEDS:
        cluster, jobs = dragon_poisson(25, 100.0, seed)
        checked = Checked(WeightedPolicy())
        run_elastic(checked, cluster, jobs)
        total += checked.actions
    assert total["scale_down"] > 0 and total["scale_up"] > 0


@pytest.mark.parametrize("limit", [60.0, 300.0])
@pytest.mark.parametrize("seed", [4, 5])
def test_kod2_with_a_finite_starve_limit_starts_every_job(limit: float, seed: int) -> None:
    cluster, jobs = dragon_poisson(25, 62.0, seed)
    pol = Kod2Policy(starve_limit_s=limit)
    run = run_elastic(Checked(pol), cluster, jobs)
    assert all(o.start_s is not None for o in run.outcomes)
    assert run.finished == len(jobs)


@pytest.mark.parametrize(("limit", "start"), [(100.0, 105.0), (300.0, 315.0)])
def test_kod2_starving_job_starts_at_the_first_sync_after_the_limit(limit: float,
                                                                   start: float) -> None:
    # h (min 2, weight 0.99834) starts at 0 and scales out to all 3 GPUs; l (min 1,
    # 0.99520) arrives at 1, does not fit and may not scale in the heavier h; after
    # `limit` s it starves: first sync with now - 1 > limit among 0, 15, 30, ...,
    # where it scales h in
    c = gpu_cluster(1, 3.0, 32.0, 128.0, 10.0)
    h = ElasticJob("h", "AlexNet", 0.0, 30000.0, 2, 3, 2)
    l_ = ElasticJob("l", "AlexNet", 1.0, 1000.0, 1, 1, 1)
    run = run_elastic(Kod2Policy(starve_limit_s=limit), c, [h, l_])
    assert run.outcomes[1].start_s == start
    assert run.outcomes[0].finish_s > start  # h still ran: the weight made l start
    assert run.outcomes[0].rescales == 2  # out at 0, in for l


# -- bad input ------------------------------------------------------------------------------

J = ElasticJob("a", "AlexNet", 0.0, 100.0, 1, 1, 1)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: run_elastic(DragonPolicy(), "cluster", [J]), "cluster"),
        (lambda: run_elastic(DragonPolicy(), one_node(), []), "jobs"),
        (lambda: run_elastic(DragonPolicy(), one_node(), [J, J]), "jobs[1]"),
        (lambda: run_elastic(DragonPolicy(), one_node(), [J, "b"]), "jobs[1]"),
        (lambda: run_elastic(DragonPolicy(), one_node(), [J], rescale_s=-1.0), "rescale_s"),
        (lambda: run_elastic(DragonPolicy(), one_node(), [J], rescale_s=float("nan")),
         "rescale_s"),
        (lambda: run_elastic(DragonPolicy(), one_node(), [J], horizon_s=0.0), "horizon_s"),
        (lambda: run_elastic(DragonPolicy(), one_node(), [J], horizon_s=float("inf")),
         "horizon_s"),
        (lambda: dragon_poisson(0), "n_jobs"),
        (lambda: dragon_poisson(2.0), "n_jobs"),
        (lambda: dragon_poisson(True), "n_jobs"),
        (lambda: dragon_poisson(5, 0.0), "mean_gap_s"),
        (lambda: dragon_poisson(5, -1.0), "mean_gap_s"),
        (lambda: dragon_poisson(5, float("nan")), "mean_gap_s"),
        (lambda: dragon_poisson(5, "200"), "mean_gap_s"),
        (lambda: dragon_poisson(5, 200.0, -1), "seed"),
        (lambda: dragon_poisson(5, 200.0, 1.5), "seed"),
        (lambda: run_elastic(DragonPolicy(), one_node(), [J]).mean("makespan"), "what"),
    ],
)
def test_bad_input_names_the_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(name) + ":"):
        call()


@pytest.mark.parametrize("gap", [True, math.inf])
def test_dragon_poisson_rejects_bool_and_infinite_gaps(gap) -> None:
    with pytest.raises(ValueError, match="^mean_gap_s:"):
        with np.errstate(all="ignore"):
            dragon_poisson(3, gap)


# -- found by these tests ---------------------------------------------------------------------

@pytest.mark.parametrize("case", ["kubeflow-interval-5", "kubeflow-defaults", "kod2-starve"])
def test_the_run_does_not_stop_while_the_policy_will_still_act(case: str) -> None:
    if case == "kubeflow-interval-5":
        # one job that fits an empty node; its worker pods are created at 5 and 10 s,
        # the sync at 1 s finds nothing to place -> the run stops
        jobs = [ElasticJob("b", "AlexNet", 0.0, 100.0, 2, 2, 2)]
        pol = KubeflowPolicy(pod_interval_s=5.0)
    elif case == "kubeflow-defaults":
        # a (a worker of 8 GPUs: never fits) arrives at 0, b at 0.5.  At the sync of 1 s
        # a's worker does not fit and b's worker (created at 1.5 s) does not exist yet
        jobs = [ElasticJob("a", "AlexNet", 0.0, 100.0, 1, 1, 1, worker=TaskRequest(2, 8, 8)),
                ElasticJob("b", "AlexNet", 0.5, 100.0, 2, 2, 2)]
        pol = KubeflowPolicy()
    else:
        # a (min 8, weight 0.99946) never fits.  Until 2026-11-28 it blocked b (min 1,
        # 0.99520) until b starved (300 s) and outweighed it, and the sync of 15 s
        # ended the run first; now b fits and starts at once
        jobs = [ElasticJob("a", "AlexNet", 0.0, 100.0, 8, 8, 8),
                ElasticJob("b", "AlexNet", 1.0, 100.0, 1, 1, 1)]
        pol = Kod2Policy()
    run = run_elastic(pol, one_node(), jobs)
    assert {o.name: o.status for o in run.outcomes}["b"] == "finished"


def test_overlapping_rescales_count_the_pause_once() -> None:
    # start at 0 with 1 worker; +1 at 15 (pause to 60); +1 at 30 (pause to 75).  The job
    # trains 0..15 at 38.09 and from 75 at 77.76; it makes no progress for 60 s
    j = ElasticJob("a", "AlexNet", 0.0, 300.0, 1, 3, 1)
    script = {
        0.0: lambda v: [Plan("a", "start", ((j.ps_pod(0), 0), (j.worker_pod(0), 0)))],
        15.0: lambda v: [Plan("a", "scale_up", ((j.worker_pod(1), 0),))],
        30.0: lambda v: [Plan("a", "scale_up", ((j.worker_pod(2), 0),))],
    }
    (o,) = run_elastic(Scripted(script), one_node(), [j]).outcomes
    training = 15.0 + (j.images - 15 * 38.09) / 77.76
    assert o.finish_s == pytest.approx(75.0 + (j.images - 15 * 38.09) / 77.76)  # holds
    assert o.running_s == pytest.approx(training)
    assert o.scaling_s == pytest.approx(60.0)


def test_kod2_starving_job_is_raised_above_every_running_job() -> None:
    # h (0.99966) runs on all 3 GPUs by 15 s (1 worker at 0, one more per decision);
    # s1 (0.99520) and s2 (0.96083) arrive at 100 and 101 and do not fit.  Both starve
    # at the sync of 405 and are raised alike, above every running job (1.99966): s1
    # scales h in and starts, then s2 does too (s1, of equal weight and earlier, is
    # no victim; h is)
    c = gpu_cluster(1, 3.0, 32.0, 128.0, 10.0)
    ps = TaskRequest(1, 4, 0)
    h = ElasticJob("h", "AlexNet", 0.0, 30000.0, 1, 3, 1, worker=TaskRequest(1, 4, 1),
                   ps=ps)
    s1 = ElasticJob("s1", "AlexNet", 100.0, 1000.0, 1, 1, 1, worker=TaskRequest(2, 8, 1),
                    ps=ps)
    s2 = ElasticJob("s2", "AlexNet", 101.0, 1000.0, 1, 1, 1, worker=TaskRequest(4, 16, 1),
                    ps=ps)
    run = run_elastic(Kod2Policy(starve_limit_s=300.0), c, [h, s1, s2])
    starts = {o.name: o.start_s for o in run.outcomes}
    assert starts["s1"] == 405.0
    assert starts["s2"] == 405.0


def test_mean_scaling_is_over_the_finished_jobs() -> None:
    # a scales up once at 70 (45 s) and finishes; b (8 workers) never fits: rejected
    a = ElasticJob("a", "AlexNet", 10.0, 591.0, 2, 4, 2)
    b = ElasticJob("b", "AlexNet", 1000.0, 100.0, 8, 8, 8)
    run = run_elastic(DragonPolicy(), one_node(), [a, b])
    assert [o.status for o in run.outcomes] == ["finished", "rejected"]
    assert run.mean("scaling_s") == 45.0



def test_a_job_the_policy_would_start_only_whole_is_rejected_if_that_cannot_fit():
    # min 1 but asks 4 workers on a 2-GPU node: DRAGON starts it with what fits, the
    # weighted scheduler only ever starts the whole gang; it must not block the queue
    cluster = Cluster([Node("n0", 32.0, 256.0, 2.0, 10.0)])
    big = ElasticJob("big", "AlexNet", 0.0, 500.0, min_workers=1, max_workers=4, workers=4,
                     utility=(10.0, 0.0, 0.0))
    small = ElasticJob("small", "AlexNet", 0.0, 500.0, 1, 1, 1, utility=(1.0, 0.0, 0.0))
    weighted = {o.name: o.status for o in run_elastic(make_elastic_policy("weighted"), cluster,
                                                      [big, small]).outcomes}
    assert weighted == {"big": "rejected", "small": "finished"}
    dragon = {o.name: o.status for o in run_elastic(make_elastic_policy("dragon"), cluster,
                                                    [big, small]).outcomes}
    assert dragon == {"big": "finished", "small": "finished"}


def test_gpu_utilization_of_a_cpu_only_cluster_is_zero_not_nan():
    cluster = Cluster([Node("n0", 16.0, 64.0, 0.0, 10.0)])
    job = ElasticJob("a", "AlexNet", 0.0, 100.0, 1, 2, 1,
                     worker=TaskRequest(cpu=2.0, mem_gib=4.0))
    run = run_elastic(make_elastic_policy("dragon"), cluster, [job])
    assert run.finished == 1 and run.gpu_utilization == 0.0


@pytest.mark.parametrize("gap_s", [1e8, 1e9])
def test_sparse_arrivals_all_finish_under_every_policy(gap_s) -> None:
    # A fixed 30-day horizon used to cut off every job arriving after it (a gap of
    # 1e9 s: 0 of 3 done, reported as 'starved'); with the horizon after the last
    # arrival, a job whose remaining time fell below the clock's resolution at
    # t ~ 2e8 s then looped for ever.  Each job now finishes on its own.
    from tdmcore.elastic import ELASTIC_POLICIES, make_elastic_policy
    from tdmcore.sim.elastic_workloads import dragon_poisson

    cluster, jobs = dragon_poisson(3, gap_s, 0)
    for name in ELASTIC_POLICIES:
        run = run_elastic(make_elastic_policy(name), cluster, jobs)
        assert [o.status for o in run.outcomes] == ["finished"] * 3, name
    # a horizon before the arrivals leaves them unfinished, not 'starved'
    run = run_elastic(make_elastic_policy("dragon"), cluster, jobs, horizon_s=1.0)
    assert [o.status for o in run.outcomes] == ["unfinished"] * 3
