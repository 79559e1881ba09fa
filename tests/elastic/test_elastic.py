"""The elastic policies decision by decision: DRAGON, its baselines, KOD2, weighted.

Every case is a tiny hand-made cluster (one or two nodes) and a handful of
:class:`ElasticJob` objects in a hand-made :class:`ClusterState`; the comments give
the arithmetic and the step / pseudo-code line each case exercises (docs/elastic.md;
DRAGON §3.3; KOD2 Algorithms 1-3; the blog's Weighting, Gang, ScaleDown, ScaleUp and
Scheduling algorithms).  Whole runs of the simulator are in ``test_elastic_sim.py``.

Unless a case says otherwise a PS asks for (1 core, 4 GiB, 0 GPU) and a worker for
(2 cores, 8 GiB, 1 GPU) — the :class:`ElasticJob` defaults — so on nodes of 32 cores
and 128 GiB only the GPUs bind.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from tdmcore.elastic import (
    BATCH_IMAGES,
    DRAGON_FIG2,
    DragonPolicy,
    ElasticJob,
    ElasticView,
    Kod2Policy,
    KubeflowPolicy,
    LocalityPolicy,
    Plan,
    ScalingCurve,
    TaskRequest,
    WeightedPolicy,
    apply_plan,
    expected_utility,
    kod2_weight,
    make_elastic_policy,
)
from tdmcore.elastic.base import pack
from tdmcore.elastic.dragon import start_plan
from tdmcore.elastic.job import GRADIENT_GBIT, total_request
from tdmcore.elastic.weighted import gang_place
from tdmcore.model import Cluster, ClusterState, Node, Pod
from tdmcore.sim.elastic_workloads import gpu_cluster

# -- helpers ---------------------------------------------------------------------

#: TaskRequests used to give KOD2 jobs different weights (see test_kod2_weight_*).
SMALL = TaskRequest(cpu=1.0, mem_gib=4.0, gpu=1.0)
MEDIUM = TaskRequest(cpu=2.0, mem_gib=8.0, gpu=1.0)  # the default worker
LARGE = TaskRequest(cpu=4.0, mem_gib=16.0, gpu=1.0)


def job(name: str, *, workers: int = 1, lo: int | None = None, hi: int | None = None,
        arrival: float = 0.0, steps: float = 1000.0, model: str = "AlexNet",
        worker: TaskRequest = MEDIUM, ps: TaskRequest | None = None,
        utility: tuple[float, float, float] = (1.0, 0.0, 0.0)) -> ElasticJob:
    return ElasticJob(name, model, arrival, steps, workers if lo is None else lo,
                      workers if hi is None else hi, workers, worker=worker,
                      ps=TaskRequest(1.0, 4.0, 0.0) if ps is None else ps, utility=utility)


def nodes(*gpus: float, cpu: float = 32.0, mem: float = 128.0) -> Cluster:
    """One node per entry of ``gpus``, 10 Gbps links."""
    return Cluster([Node(f"n{i}", cpu, mem, g, 10.0) for i, g in enumerate(gpus)])


def state_of(cluster: Cluster, jobs: list[ElasticJob],
             placed: dict[str, dict[str, list[int]]]) -> ClusterState:
    """``placed[job] = {"ps": [node of ps-0, ...], "w": [node of worker-0, ...]}``."""
    specs = {j.name: j for j in jobs}
    state = ClusterState(cluster)
    for name, where in placed.items():
        for k, n in enumerate(where.get("ps", [])):
            state.place(specs[name].ps_pod(k), n)
        for k, n in enumerate(where.get("w", [])):
            state.place(specs[name].worker_pod(k), n)
    return state


def view_of(cluster: Cluster, jobs: list[ElasticJob],
            placed: dict[str, dict[str, list[int]]], *, now: float,
            waiting: tuple[str, ...] = (), since: dict[str, float] | None = None
            ) -> ElasticView:
    """Running: the jobs in ``placed`` (in that order); waiting since their arrival
    unless ``since`` says otherwise."""
    specs = {j.name: j for j in jobs}
    since = since or {}
    return ElasticView(now, state_of(cluster, jobs, placed), specs, tuple(waiting),
                       tuple(placed), {w: since.get(w, specs[w].arrival_s) for w in waiting})


def summary(plans: list[Plan]) -> list[tuple[str, str, list[tuple[str, int]], list[str]]]:
    return [(p.job, p.action, [(pod.name, n) for pod, n in p.add], list(p.remove))
            for p in plans]


def decide(policy, view: ElasticView, **attrs: float):
    """reset + optional attribute overrides (e.g. ``last_action_s``) + decide, checking
    that the policy did not touch the view's state."""
    policy.reset(view.jobs)
    for key, value in attrs.items():
        setattr(policy, key, value)
    before = view.state.copy()
    plans = policy.decide(view)
    assert view.state.same_as(before), "a policy must not mutate the view's state"
    work = view.state.copy()
    for plan in plans:  # the plans of one decision are consistent with each other
        apply_plan(work, plan)
    return plans


# -- 1. ScalingCurve and the rate model -----------------------------------------------

@pytest.mark.parametrize("model", sorted(DRAGON_FIG2))
def test_curve_returns_the_measured_points_for_1_to_4_workers(model: str) -> None:
    curve = ScalingCurve(DRAGON_FIG2[model])
    for w in range(1, 5):
        assert curve.images_per_s(w) == DRAGON_FIG2[model][w - 1]
    assert curve.images_per_s(0) == 0.0
    assert curve.images_per_s(-3) == 0.0


@pytest.mark.parametrize("model", sorted(DRAGON_FIG2))
def test_curve_extrapolates_sub_linearly_and_monotonically(model: str) -> None:
    curve = ScalingCurve(DRAGON_FIG2[model])
    # sigma: least squares of w / S - 1 = sigma (w - 1) through the origin, S = speed-up
    pts = np.array(DRAGON_FIG2[model])
    w = np.arange(1.0, 5.0)
    x, y = w - 1, w / (pts / pts[0]) - 1
    sigma = float(np.linalg.lstsq(x[:, None], y, rcond=None)[0][0])
    assert 0.0 < curve.sigma < 1.0
    assert curve.sigma == pytest.approx(sigma, rel=1e-12)
    rates = [curve.images_per_s(k) for k in range(4, 33)]
    assert all(b > a for a, b in zip(rates, rates[1:], strict=False))  # monotone
    for k, r in zip(range(4, 33), rates, strict=True):
        assert r <= pts[3] * k / 4 + 1e-9  # never better than linear from 4 workers
    per_worker = [r / k for k, r in zip(range(4, 33), rates, strict=True)]
    assert all(b < a for a, b in zip(per_worker, per_worker[1:], strict=False))


def test_curve_alexnet_beyond_four_by_hand() -> None:
    # AlexNet speed-ups 1, 59.1/38.09, 77.76/38.09, 97.69/38.09; S(w) = w/(1 + s(w-1));
    # imgs(5) = 97.69 S(5) / S(4)
    s = ScalingCurve(DRAGON_FIG2["AlexNet"]).sigma
    expected = 97.69 * (5 / (1 + 4 * s)) / (4 / (1 + 3 * s))
    assert ScalingCurve(DRAGON_FIG2["AlexNet"]).images_per_s(5) == pytest.approx(expected)
    assert 0.2 < s < 0.22  # (0.289 + 2 x 0.4695 + 3 x 0.5597) / 14 = 0.2077


@pytest.mark.parametrize(
    ("measured", "sigma", "at3"),
    [
        # speed-up 1.6 at 2: y = 2/1.6 - 1 = 0.25 = sigma; S(3) = 3/1.5 = 2, S(2) = 1.6
        # -> imgs(3) = 160 x 2 / 1.6 = 200
        ((100.0, 160.0), 0.25, 200.0),
        # super-linear 2.5 at 2: sigma = 2/2.5 - 1 = -0.2 -> clipped to 0 (linear): 375
        ((100.0, 250.0), 0.0, 375.0),
        # slower with 2: sigma = 2/0.5 - 1 = 3 -> clipped to 1: S = 1, flat at 50
        ((100.0, 50.0), 1.0, 50.0),
        # one point: sigma 0, linear
        ((100.0,), 0.0, 300.0),
    ],
)
def test_curve_sigma_is_clipped_to_0_1(measured, sigma: float, at3: float) -> None:
    curve = ScalingCurve(measured)
    assert curve.sigma == pytest.approx(sigma)
    assert curve.images_per_s(3) == pytest.approx(at3)


def test_rate_remote_workers_slow_a_job_by_hand() -> None:
    j = job("a", workers=2)
    # all local: the curve itself, 59.1 images/s
    assert j.rate(2) == pytest.approx(59.1)
    # 1 of 2 remote on 1 Gbps: round = 2 x 64 / 59.1 + 2 x 1.952 Gbit x 1 / 1 Gbps
    #   = 2.16582 + 3.904 = 6.06982 s for 128 images -> 21.088 images/s
    compute = 2 * BATCH_IMAGES / 59.1
    comm = 2 * (244 * 8 / 1000) * 1 / 1.0
    assert GRADIENT_GBIT["AlexNet"] == pytest.approx(1.952)
    assert j.rate(2, 1, 1.0) == pytest.approx(128 / (compute + comm))
    assert j.rate(2, 1, 1.0) == pytest.approx(21.088, abs=1e-3)
    # more remote workers or a slower link: slower; a faster link: closer to 59.1
    assert j.rate(2, 2, 1.0) < j.rate(2, 1, 1.0) < j.rate(2, 1, 10.0) < j.rate(2)
    assert j.rate(0) == 0.0
    assert j.images == 1000 * BATCH_IMAGES


def test_job_pods_and_total_request() -> None:
    j = job("a", workers=2, lo=1, hi=4)
    assert [p.name for p in j.gang(2)] == ["a-ps-0", "a-worker-0", "a-worker-1"]
    assert all(p.job == "a" for p in j.gang(2))
    assert j.is_worker("a-worker-3") and not j.is_worker("a-ps-0")
    # (GPUs, cores, GiB) = (0 + 3 x 1, 1 + 3 x 2, 4 + 3 x 8)
    assert total_request(j, 3) == (3.0, 7.0, 28.0)


# -- 2. Plans and apply_plan --------------------------------------------------------------

def test_apply_plan_is_atomic_when_the_second_add_does_not_fit() -> None:
    a = job("a", workers=2)
    cluster = nodes(1.0)
    state = state_of(cluster, [a], {"a": {"ps": [0]}})
    before = state.copy()
    # worker-0 takes the only GPU, worker-1 does not fit: nothing may remain
    plan = Plan("a", "scale_up", ((a.worker_pod(0), 0), (a.worker_pod(1), 0)))
    with pytest.raises(ValueError, match="^plan: scale_up of 'a' cannot be applied"):
        apply_plan(state, plan)
    assert state.same_as(before)
    # a removal followed by an add that does not fit: the removal is undone too
    plan = Plan("a", "scale_up", ((Pod("a-worker-9", "a", gpu=2.0), 0),), remove=("a-ps-0",))
    with pytest.raises(ValueError, match="^plan:"):
        apply_plan(state, plan)
    assert state.same_as(before)
    assert "a-ps-0" in state.placed


def test_apply_plan_commits_a_plan_that_fits() -> None:
    a = job("a", workers=2)
    cluster = nodes(2.0)
    state = state_of(cluster, [a], {"a": {"ps": [0], "w": [0]}})
    apply_plan(state, Plan("a", "scale_up", ((a.worker_pod(1), 0),)))
    assert state.free_gpu.tolist() == [0.0]
    apply_plan(state, Plan("a", "scale_down", remove=("a-worker-0", "a-worker-1")))
    assert state.free_gpu.tolist() == [2.0]
    assert [p.pod.name for p in state.job_pods("a")] == ["a-ps-0"]


@pytest.mark.parametrize(
    "remove",
    [("b-worker-0",),                  # another job's pod
     ("a-worker-7",),                  # not placed
     ("a-worker-0", "a-worker-0")],    # the same pod twice
)
def test_apply_plan_rejects_removals_it_cannot_do(remove: tuple[str, ...]) -> None:
    a, b = job("a", workers=1), job("b", workers=1)
    state = state_of(nodes(4.0), [a, b], {"a": {"ps": [0], "w": [0]},
                                          "b": {"ps": [0], "w": [0]}})
    before = state.copy()
    with pytest.raises(ValueError, match="^plan:"):
        apply_plan(state, Plan("a", "scale_down", remove=remove))
    assert state.same_as(before)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: Plan("a", "grow"), "action"),
        (lambda: Plan("a", "START"), "action"),
        (lambda: Plan("a", "start", ((Pod("b-worker-0", "b", gpu=1.0), 0),)), "add"),
        (lambda: apply_plan(ClusterState(nodes(1.0)), ("a", "start")), "plan"),
    ],
)
def test_plan_bad_input_names_the_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(name) + ":"):
        call()


# -- 3. pack -------------------------------------------------------------------------------

def gang_of(n_workers: int) -> list[Pod]:
    return job("g", workers=max(n_workers, 1)).gang(n_workers)


@pytest.mark.parametrize(
    ("free", "n_workers", "expected"),
    [
        # both nodes hold ps + 2 workers: the one with most free GPUs (node 1)
        ([[2, 32, 128], [4, 32, 128]], 2, [1, 1, 1]),
        # equal: the lower index
        ([[4, 32, 128], [4, 32, 128]], 2, [0, 0, 0]),
        # ps + 4 workers fit nowhere; node 0 has the most GPUs but only 3 cores:
        # ps (1) + worker (2) = 3 cores -> prefix 2; node 1: ps + 3 workers -> prefix 4:
        # node 1 first, then the rest (node 0) takes worker-3 (2 of its 3 cores)
        ([[4, 3, 128], [3, 32, 128]], 4, [1, 1, 1, 1, 0]),
        # ps + 6 workers on 1 + 3 + 2 GPUs: node 1 holds the longest prefix (ps + 3),
        # then by most free GPUs node 2 (2) before node 0 (1) — not index order
        ([[1, 32, 128], [3, 32, 128], [2, 32, 128]], 6, [1, 1, 1, 1, 2, 2, 0]),
        # ps + 4 workers, 2 GPUs each: both hold a prefix of 3; the first in order
        # (equal free: the lower index) is filled first
        ([[2, 32, 128], [2, 32, 128]], 4, [0, 0, 0, 1, 1]),
        # partial: one GPU for 3 workers -> ps and worker-0, the rest None
        ([[1, 32, 128]], 3, [0, 0, None, None]),
        # nothing fits at all (no core for the ps)
        ([[4, 0, 128]], 2, [None, None, None]),
    ],
)
def test_pack(free, n_workers: int, expected) -> None:
    arr = np.array(free, dtype=float)
    copy = arr.copy()
    assert pack(gang_of(n_workers), arr) == expected
    np.testing.assert_array_equal(arr, copy)  # free is not modified


def test_start_plan_needs_the_ps_and_lo_workers() -> None:
    a = job("a", workers=4, lo=2)
    cluster = nodes(3.0)
    state = ClusterState(cluster)
    plan = start_plan(a, 2, 4, state)  # 3 GPUs: ps + 3 of the 4 workers
    assert plan is not None and [n for _, n in plan.add] == [0, 0, 0, 0]
    assert start_plan(a, 4, 4, state) is None  # exactly 4 does not fit
    ps_cpu = job("b", workers=1, ps=TaskRequest(cpu=64.0))
    assert start_plan(ps_cpu, 1, 1, state) is None  # the PS fits nowhere


# -- 4. DRAGON -----------------------------------------------------------------------------

def r4() -> ElasticJob:
    """Running job: 4 workers, min 1, max 4 (surplus 3)."""
    return job("r", workers=4, lo=1, hi=4)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        # waited 30 s = tau: not urgent ("longer than tau"); w does not fit; mu not
        # reached (30 - 0 < 60): nothing
        (30.0, []),
        # waited 30.5 s > tau: step 1 frees one GPU of r (worker-3: all on the PS
        # node, highest index first) and starts w with min_workers = 1
        (30.5, [("r", "scale_down", [], ["r-worker-3"]),
                ("w", "start", [("w-ps-0", 0), ("w-worker-0", 0)], [])]),
    ],
)
def test_dragon_urgent_threshold_tau(now: float, expected) -> None:
    r, w = r4(), job("w", workers=1)
    view = view_of(nodes(4.0), [r, w], {"r": {"ps": [0], "w": [0, 0, 0, 0]}}, now=now,
                   waiting=("w",), since={"w": 0.0})
    assert summary(decide(DragonPolicy(), view)) == expected


def test_dragon_urgent_job_that_fits_is_left_to_afcfs() -> None:
    # w is urgent (100 s > tau) but fits on node 1: no scale-down; step 2 starts it.
    # The last action is now (the authors' controller sets lastActionTime whenever a
    # high-priority job exists): no scale-up of r (node 0 is full anyway)
    r, w = job("r", workers=4, lo=4, hi=8), job("w", workers=1)
    view = view_of(nodes(4.0, 4.0), [r, w], {"r": {"ps": [0], "w": [0, 0, 0, 0]}},
                   now=100.0, waiting=("w",), since={"w": 0.0})
    pol = DragonPolicy()
    assert summary(decide(pol, view)) == [
        ("w", "start", [("w-ps-0", 1), ("w-worker-0", 1)], [])]
    assert pol.last_action_s == 100.0


def test_dragon_urgent_job_that_fits_leaves_arrival_order_to_afcfs() -> None:
    # [decision] (dragon.py): big (2 GPUs, waiting since 0 s) and small (1 GPU, since
    # 1 s) are both urgent and both fit the two free GPUs without a scale-down: step
    # 1 frees nothing and AFCFS starts the older one, as the authors' controller does
    r = job("r", workers=2)
    big, small = job("big", workers=2), job("small", workers=1)
    view = view_of(nodes(4.0), [r, big, small], {"r": {"ps": [0], "w": [0, 0]}},
                   now=100.0, waiting=("big", "small"), since={"big": 0.0, "small": 1.0})
    assert summary(decide(DragonPolicy(), view)) == [
        ("big", "start", [("big-ps-0", 0), ("big-worker-0", 0), ("big-worker-1", 0)], [])]


def test_dragon_start_workers_follow_scaling() -> None:
    # without scaling AFCFS starts exactly `workers`: the simulator's "can it ever
    # start" check must ask for that many, not min_workers
    j = job("j", workers=3, lo=1)
    assert DragonPolicy().start_workers(j) == 1
    assert DragonPolicy(scaling=False).start_workers(j) == 3


@pytest.mark.parametrize(
    ("waiting", "chosen"),
    [
        # big needs 2 GPUs at its minimum, small 1: the smallest total request
        ((job("big", workers=2), job("small", workers=1)), "small"),
        # equal requests: arrival order
        ((job("one", workers=1), job("two", workers=1)), "one"),
        # same GPUs, fewer cores: the second (1 GPU, 1 + 2 cores) beats (1 GPU, 1 + 4)
        ((job("fat", workers=1, worker=LARGE), job("thin", workers=1)), "thin"),
    ],
)
def test_dragon_picks_the_urgent_job_with_the_smallest_request(waiting, chosen: str) -> None:
    r = r4()
    names = tuple(j.name for j in waiting)
    view = view_of(nodes(4.0), [r, *waiting], {"r": {"ps": [0], "w": [0, 0, 0, 0]}},
                   now=100.0, waiting=names, since=dict.fromkeys(names, 0.0))
    plans = decide(DragonPolicy(), view)
    assert [p.action for p in plans] == ["scale_down", "start"]
    assert plans[1].job == chosen and plans[0].remove == ("r-worker-3",)


@pytest.mark.parametrize(
    ("workers1", "workers2", "victim", "removed"),
    [
        # surplus 1 (r1) vs 2 (r2): r2, its highest worker
        (2, 3, "r2", "r2-worker-2"),
        # the other way round: r1 — the surplus decides, not the start order
        (3, 2, "r1", "r1-worker-2"),
        # equal surplus: the first started
        (2, 2, "r1", "r1-worker-1"),
    ],
)
def test_dragon_victim_has_the_most_surplus(workers1: int, workers2: int, victim: str,
                                            removed: str) -> None:
    r1 = job("r1", workers=workers1, lo=1, hi=4)
    r2 = job("r2", workers=workers2, lo=1, hi=4)
    w = job("w", workers=1)
    gpus = float(workers1 + workers2)  # full
    view = view_of(nodes(gpus), [r1, r2, w], {"r1": {"ps": [0], "w": [0] * workers1},
                                              "r2": {"ps": [0], "w": [0] * workers2}},
                   now=31.0, waiting=("w",), since={"w": 0.0})
    plans = decide(DragonPolicy(), view)
    assert summary(plans)[0] == (victim, "scale_down", [], [removed])
    assert plans[1].job == "w" and plans[1].action == "start"


@pytest.mark.parametrize(
    ("min_w", "removed", "node"),
    [
        # r: ps on node 0; workers 0, 1 on node 1 and 2, 3 on node 0.  Nodes without
        # the PS first (then highest index): worker-1, not worker-3.  w needs 1 GPU:
        # fits on node 1 after one removal
        (1, ["r-worker-1"], 1),
        # w needs 2 GPUs: after worker-1 node 1 has 1 free -> still no; worker-0 next
        # (still node 1) -> 2 free on node 1
        (2, ["r-worker-1", "r-worker-0"], 1),
    ],
)
def test_dragon_removes_workers_off_the_ps_node_first(min_w: int, removed, node: int) -> None:
    r = r4()
    w = job("w", workers=min_w)
    view = view_of(nodes(2.0, 2.0), [r, w], {"r": {"ps": [0], "w": [1, 1, 0, 0]}},
                   now=31.0, waiting=("w",), since={"w": 0.0})
    plans = decide(DragonPolicy(), view)
    assert summary(plans)[0] == ("r", "scale_down", [], removed)
    assert {n for _, n in plans[1].add} == {node}


def test_dragon_changes_nothing_if_all_surplus_is_not_enough() -> None:
    # r: a PS holding 1 GPU + 3 workers on 4 GPUs, min 2 -> surplus 1.  w needs 2 GPUs.
    # Removing the PS too would make room, but never a PS and never below min: nothing.
    r = job("r", workers=3, lo=2, hi=4, ps=TaskRequest(1.0, 4.0, 1.0))
    other = job("o", workers=1)  # surplus 0: not a victim
    w = job("w", workers=2)
    view = view_of(nodes(4.0, 1.0), [r, other, w], {"r": {"ps": [0], "w": [0, 0, 0]},
                                                    "o": {"ps": [1], "w": [1]}},
                   now=31.0, waiting=("w",), since={"w": 0.0})
    pol = DragonPolicy()
    assert decide(pol, view) == []
    assert pol.last_action_s == 31.0  # the urgent job still counts as an action


@pytest.mark.parametrize(
    ("free_gpus", "policy", "expected"),
    [
        # 3 free GPUs: a (min 2, asks 4) starts first, with as many as fit (3); b waits
        (3.0, DragonPolicy, [("a", 3)]),
        # 1 free GPU: a's minimum does not fit; b (1 worker) is the first that fits
        (1.0, DragonPolicy, [("b", 1)]),
        # 4 free: a with its 4; b still fits? no GPU left -> only a
        (4.0, DragonPolicy, [("a", 4)]),
        # 5 free: a with 4, then b with 1 (AFCFS repeats)
        (5.0, DragonPolicy, [("a", 4), ("b", 1)]),
        # locality: exactly `workers`: a needs 4 of 3 -> skipped; b starts
        (3.0, LocalityPolicy, [("b", 1)]),
    ],
)
def test_afcfs_starts_the_first_fitting_job_in_arrival_order(free_gpus: float, policy,
                                                            expected) -> None:
    a = job("a", workers=4, lo=2, hi=4, arrival=1.0)
    b = job("b", workers=1, arrival=2.0)
    view = view_of(nodes(free_gpus), [a, b], {}, now=2.0, waiting=("a", "b"))
    plans = decide(policy(), view)
    assert [(p.job, len(p.add) - 1) for p in plans] == expected
    assert all(p.action == "start" and {n for _, n in p.add} == {0} for p in plans)


def test_afcfs_packs_a_gang_on_one_node_when_one_fits() -> None:
    # node 0 has 2 free GPUs, node 1 has 4: ps + 3 workers all on node 1
    a = job("a", workers=3)
    view = view_of(nodes(2.0, 4.0), [a], {}, now=0.0, waiting=("a",))
    plans = decide(DragonPolicy(), view)
    assert summary(plans) == [("a", "start", [("a-ps-0", 1), ("a-worker-0", 1),
                                              ("a-worker-1", 1), ("a-worker-2", 1)], [])]


@pytest.mark.parametrize(
    ("now", "last", "max_w", "expected"),
    [
        # 59 s since the last action < mu = 60: nothing
        (59.0, 0.0, 8, []),
        # 60 s: node 0 has 2 free GPUs and r's tasks; node 1 has 4 free but no task of
        # r: only node 0 -> worker-2, worker-3 (up to max 8: limited by the node)
        (60.0, 0.0, 8, [("r", "scale_up", [("r-worker-2", 0), ("r-worker-3", 0)], [])]),
        # max 3: one worker
        (60.0, 0.0, 3, [("r", "scale_up", [("r-worker-2", 0)], [])]),
        # already at max
        (60.0, 0.0, 2, []),
        # the last action 20 s ago
        (80.0, 60.0, 8, []),
    ],
)
def test_dragon_scale_up_after_mu_on_the_jobs_own_nodes(now: float, last: float, max_w: int,
                                                       expected) -> None:
    r = job("r", workers=2, lo=1, hi=max_w)
    view = view_of(nodes(4.0, 4.0), [r], {"r": {"ps": [0], "w": [0, 0]}}, now=now)
    pol = DragonPolicy()
    assert summary(decide(pol, view, last_action_s=last)) == expected
    if now - last >= 60.0:
        assert pol.last_action_s == now


def test_dragon_scale_up_uses_any_node_holding_a_task_of_the_job() -> None:
    # r's PS is on node 1 (no GPU needed), its worker on node 0 (full): node 1 counts
    r = job("r", workers=1, lo=1, hi=4)
    view = view_of(nodes(1.0, 2.0), [r], {"r": {"ps": [1], "w": [0]}}, now=60.0)
    assert summary(decide(DragonPolicy(), view, last_action_s=0.0)) == [
        ("r", "scale_up", [("r-worker-1", 1), ("r-worker-2", 1)], [])]


def test_locality_never_scales() -> None:
    # free GPUs beside r for 1000 s: DRAGON scales r up (step 3), locality does not
    r = job("r", workers=2, lo=1, hi=8)
    view = view_of(nodes(4.0), [r], {"r": {"ps": [0], "w": [0, 0]}}, now=1000.0)
    assert [p.action for p in decide(DragonPolicy(), view)] == ["scale_up"]
    assert decide(LocalityPolicy(), view) == []
    # an urgent job that fits after a scale-down: DRAGON scales r down (step 1),
    # locality waits
    r, w = r4(), job("w", workers=1)
    view = view_of(nodes(4.0), [r, w], {"r": {"ps": [0], "w": [0, 0, 0, 0]}}, now=1000.0,
                   waiting=("w",), since={"w": 0.0})
    assert [p.action for p in decide(DragonPolicy(), view)] == ["scale_down", "start"]
    assert decide(LocalityPolicy(), view) == []
    assert decide(DragonPolicy(scaling=False), view) == []


def test_locality_starts_exactly_workers() -> None:
    # 8 free GPUs; a asks 3 (min 1, max 8): locality starts 3, DRAGON too (AFCFS
    # launches `workers`), and neither more
    a = job("a", workers=3, lo=1, hi=8)
    view = view_of(nodes(8.0), [a], {}, now=0.0, waiting=("a",))
    for pol in (LocalityPolicy(), DragonPolicy()):
        plans = decide(pol, view)
        assert [(p.action, len(p.add)) for p in plans] == [("start", 4)]


# -- 5. Kubeflow (decision level; the deadlock run is in test_elastic_sim.py) ---------------

def test_kubeflow_spreads_pods_least_allocated() -> None:
    # 2 empty nodes (4 GPUs, 16 cores, 64 GiB); pods created at once (interval 0).
    # score = mean(free cores / 16, free GiB / 64):
    #   ps (1, 4): tie 1.0 -> node 0 (15, 60)
    #   w0 (2, 8): node 0 (15/16 + 60/64)/2 = .9375 < node 1 1.0 -> node 1 (14, 56)
    #   w1: node 0 .9375 > node 1 .875 -> node 0 (13, 52)
    #   w2: node 0 .8125 < node 1 .875 -> node 1
    a = job("a", workers=3)
    cluster = gpu_cluster(2, 4.0, 16.0, 64.0, 1.0)
    view = view_of(cluster, [a], {}, now=0.0, waiting=("a",))
    plans = decide(KubeflowPolicy(pod_interval_s=0.0), view)
    assert [(p.job, p.action) for p in plans] == [("a", "place")] * 4
    assert [(pod.name, n) for p in plans for pod, n in p.add] == [
        ("a-ps-0", 0), ("a-worker-0", 1), ("a-worker-1", 0), ("a-worker-2", 1)]


def test_kubeflow_pods_of_jobs_submitted_together_interleave() -> None:
    # a arrives at 0, b at 0.5, one pod per second each: by t = 2 the pods created
    # are a-ps 0, b-ps .5, a-w0 1, b-w0 1.5, a-w1 2 (b-w1 at 2.5 not yet), placed in
    # creation order; LeastAllocated puts each job's pods on one node here:
    #   a-ps -> 0 (tie); b-ps -> 1 (1.0 > .9375); a-w0 -> 0 (tie .9375);
    #   b-w0 -> 1 (.9375 > .8125); a-w1 -> 0 (tie .8125)
    a, b = job("a", workers=2, arrival=0.0), job("b", workers=2, arrival=0.5)
    cluster = gpu_cluster(2, 4.0, 16.0, 64.0, 1.0)
    view = view_of(cluster, [a, b], {}, now=2.0, waiting=("a", "b"))
    plans = decide(KubeflowPolicy(), view)
    assert [(pod.name, n) for p in plans for pod, n in p.add] == [
        ("a-ps-0", 0), ("b-ps-0", 1), ("a-worker-0", 0), ("b-worker-0", 1),
        ("a-worker-1", 0)]


def test_kubeflow_places_no_gang_and_skips_pods_that_do_not_fit() -> None:
    # one GPU: a-w0 takes it, a-w1 stays pending, b's PS (no GPU) is still placed,
    # b's worker is not: two partial gangs
    a, b = job("a", workers=2), job("b", workers=1, arrival=0.0)
    view = view_of(nodes(1.0), [a, b], {}, now=5.0, waiting=("a", "b"))
    plans = decide(KubeflowPolicy(), view)
    assert [(pod.name, n) for p in plans for pod, n in p.add] == [
        ("a-ps-0", 0), ("b-ps-0", 0), ("a-worker-0", 0)]
    # already placed pods are not placed again
    state = view.state.copy()
    for p in plans:
        apply_plan(state, p)
    again = ElasticView(6.0, state, view.jobs, view.waiting, (), view.waiting_since_s)
    pol = KubeflowPolicy()
    pol.reset(view.jobs)
    assert pol.decide(again) == []


# -- 6. KOD2 ---------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("worker", "min_w", "expected"),
    [
        # min 2: cpu 1 + 2x2 = 5 of 32, mem 4 + 2x8 = 20 of 128: norm .15625 + .15625
        # = .3125; w' = 2 / .3125 = 6.4; 1 / (1 + e^-6.4) = 0.998341
        (MEDIUM, 2, 1 / (1 + math.exp(-6.4))),
        # min 1: (3/32 + 12/128) = .1875; w' = 5.333 -> 0.995195
        (MEDIUM, 1, 1 / (1 + math.exp(-1 / 0.1875))),
        # min 1, large worker: (5/32 + 20/128) = .3125; w' = 3.2 -> 0.960834
        (LARGE, 1, 1 / (1 + math.exp(-3.2))),
        # min 1, small worker: (2/32 + 8/128) = .125; w' = 8 -> 0.999665
        (SMALL, 1, 1 / (1 + math.exp(-8.0))),
    ],
)
def test_kod2_weight_by_hand(worker: TaskRequest, min_w: int, expected: float) -> None:
    j = job("a", workers=min_w, worker=worker)
    assert kod2_weight(j, 32.0, 128.0) == pytest.approx(expected, rel=1e-12)
    assert 0.0 < kod2_weight(j, 32.0, 128.0) < 1.0


def test_kod2_weight_of_a_free_job_is_one() -> None:
    free = job("a", workers=1, worker=TaskRequest(0, 0, 1), ps=TaskRequest(0, 0, 0))
    assert kod2_weight(free, 32.0, 128.0) == 1.0
    assert kod2_weight(job("b"), 0.0, 0.0) == 1.0


@pytest.mark.parametrize(
    "waiting",
    [
        # l: min 1 -> 0.99520 < running h's 0.99834: 6 GPUs are free, it fits: starts
        # (until 2026-11-28 it waited behind h; elastic.md, revised)
        job("l", workers=1),
        # e: same shape as h -> equal weight
        job("e", workers=2),
        # s: small worker, 0.99966 > h's
        job("s", workers=1, worker=SMALL),
    ],
)
def test_kod2_admits_a_job_that_fits_whatever_its_weight(waiting: ElasticJob) -> None:
    h = job("h", workers=2)  # min = max = 2: no scale-out
    view = view_of(nodes(8.0), [h, waiting], {"h": {"ps": [0], "w": [0, 0]}}, now=10.0,
                   waiting=(waiting.name,))
    plans = decide(Kod2Policy(), view)
    assert [(p.job, p.action) for p in plans] == [(waiting.name, "start")]
    assert len(plans[0].add) == 1 + waiting.min_workers  # with min_workers


def test_kod2_admits_in_descending_weight() -> None:
    # nothing runs; both fit on 8 GPUs: m (0.99834) goes first although l (0.99520)
    # arrived first, and l starts too, lighter than the running m
    low, m = job("l", workers=1, arrival=0.0), job("m", workers=2, arrival=1.0)
    view = view_of(nodes(8.0), [low, m], {}, now=1.0, waiting=("l", "m"))
    assert [(p.job, p.action) for p in decide(Kod2Policy(), view)] == [("m", "start"),
                                                                      ("l", "start")]


def test_kod2_a_lighter_job_that_fits_starts_while_a_heavier_one_waits() -> None:
    # 3 GPUs: h (0.99834, min = max = 2) holds 2.  big (small workers, min 2:
    # w' = 2 / (3/32 + 12/128) = 10.7 -> 0.99998) needs 2 and cannot scale in h (no
    # surplus); l (0.99520) needs 1 and fits: it starts (before 2026-11-28 the
    # heaviest waiting job blocked it)
    h = job("h", workers=2)
    big = job("big", workers=2, worker=SMALL, arrival=1.0)
    low = job("l", workers=1, arrival=2.0)
    view = view_of(nodes(3.0), [h, big, low], {"h": {"ps": [0], "w": [0, 0]}}, now=10.0,
                   waiting=("big", "l"))
    pol = Kod2Policy()
    plans = decide(pol, view)
    assert pol.weight("big") > pol.weight("h") > pol.weight("l")
    assert [(p.job, p.action) for p in plans] == [("l", "start")]


def test_kod2_only_the_heaviest_job_that_does_not_fit_scales_in() -> None:
    # 2 GPUs held by lo (0.96083, 2 workers, min 1: surplus 1).  big (0.99999, min 3)
    # is the heaviest waiting job and does not fit even with lo's surplus: its
    # scale-in fails; l (0.99520, min 1) could have lo's surplus worker, but weight
    # gives scale-in only to the heaviest waiting job that does not fit: nothing
    lo = job("lo", workers=2, lo=1, hi=2, worker=LARGE)
    big = job("big", workers=3, worker=SMALL, arrival=1.0)
    low = job("l", workers=1, arrival=2.0)
    view = view_of(nodes(2.0), [lo, big, low], {"lo": {"ps": [0], "w": [0, 0]}}, now=10.0,
                   waiting=("big", "l"))
    pol = Kod2Policy()
    assert decide(pol, view) == []
    assert pol.weight("big") > pol.weight("l") > pol.weight("lo")
    # without big, l is the heaviest waiting job that does not fit: it scales lo in
    view = view_of(nodes(2.0), [lo, low], {"lo": {"ps": [0], "w": [0, 0]}}, now=10.0,
                   waiting=("l",))
    assert summary(decide(Kod2Policy(), view)) == [
        ("lo", "scale_down", [], ["lo-worker-1"]),
        ("l", "start", [("l-ps-0", 0), ("l-worker-0", 0)], [])]


def test_kod2_a_heavier_job_scales_in_before_a_lighter_one_takes_the_free_room() -> None:
    # 4 GPUs: lo (0.96083, 3 workers, min 1) holds 3, 1 is free.  n (0.99966, min 2)
    # goes first: it does not fit, scales lo in by one worker and takes 2 GPUs; then
    # l (0.99520, min 1) does not fit and, now the heaviest waiting job that does
    # not fit, scales lo in once more
    lo = job("lo", workers=3, lo=1, hi=3, worker=LARGE)
    n = job("n", workers=2, worker=SMALL, arrival=2.0)
    low = job("l", workers=1, arrival=1.0)
    view = view_of(nodes(4.0), [lo, n, low], {"lo": {"ps": [0], "w": [0, 0, 0]}}, now=10.0,
                   waiting=("l", "n"))
    assert [(p.job, p.action, list(p.remove)) for p in decide(Kod2Policy(), view)] == [
        ("lo", "scale_down", ["lo-worker-2"]), ("n", "start", []),
        ("lo", "scale_down", ["lo-worker-1"]), ("l", "start", [])]


SCALE_IN = [
    # n (small worker, 0.99966) needs 1 GPU; the node's GPUs are all held.
    # Alg. 2 line 3: ascending weight: lo (0.96083) before mid (0.99520); lines 15-23:
    # one worker at a time, re-testing: lo's last worker
    ("lo first", 2, 2, [("lo", ["lo-worker-1"])]),
    # lo at its minimum (1): lines 19-23 keep min_workers: skipped; mid's highest
    ("skip at min", 1, 3, [("mid", ["mid-worker-2"])]),
    # neither has surplus: nothing
    ("no surplus", 1, 1, []),
]


@pytest.mark.parametrize(("case", "n_lo", "n_mid", "expected"), SCALE_IN,
                         ids=[c[0] for c in SCALE_IN])
def test_kod2_scale_in_ascending_weight_never_below_min(case: str, n_lo: int, n_mid: int,
                                                        expected) -> None:
    lo = job("lo", workers=n_lo, lo=1, hi=4, worker=LARGE)
    mid = job("mid", workers=n_mid, lo=1, hi=4)
    n = job("n", workers=1, worker=SMALL, arrival=5.0)
    # mid started first: the weight, not the start order, decides
    view = view_of(nodes(float(n_lo + n_mid)), [lo, mid, n],
                   {"mid": {"ps": [0], "w": [0] * n_mid}, "lo": {"ps": [0], "w": [0] * n_lo}},
                   now=10.0, waiting=("n",))
    pol = Kod2Policy()
    plans = decide(pol, view)
    assert pol.weight("lo") < pol.weight("mid") < pol.weight("n")
    got = [(p.job, list(p.remove)) for p in plans if p.action == "scale_down"]
    assert got == expected
    assert [p.job for p in plans if p.action == "start"] == (["n"] if expected else [])


@pytest.mark.parametrize(
    ("e_arrival", "scaled_in"),
    [
        # e has n's weight and arrived earlier: excluded (Alg. 2 lines 4-8): n waits
        (0.0, False),
        # e arrived after n: a legitimate victim: e's worker-3 goes, n starts
        (9.0, True),
    ],
)
def test_kod2_scale_in_skips_equal_weight_earlier_arrivals(e_arrival: float,
                                                           scaled_in: bool) -> None:
    e = job("e", workers=4, lo=1, hi=4, arrival=e_arrival)
    n = job("n", workers=1, lo=1, hi=1, arrival=5.0)  # min 1, same request: equal weight
    view = view_of(nodes(4.0), [e, n], {"e": {"ps": [0], "w": [0, 0, 0, 0]}}, now=10.0,
                   waiting=("n",))
    pol = Kod2Policy()
    plans = decide(pol, view)
    assert pol.weight("e") == pol.weight("n")
    if scaled_in:
        assert summary(plans) == [("e", "scale_down", [], ["e-worker-3"]),
                                  ("n", "start", [("n-ps-0", 0), ("n-worker-0", 0)], [])]
    else:
        assert plans == []


def test_kod2_scale_in_searches_the_ps_node_last() -> None:
    # Alg. 2 lines 12-13: the PS's node last.  lo: ps on node 0; workers 0, 1 on node 1,
    # 2, 3 on node 0: worker-1 (node 1) goes first, not worker-3 (highest index)
    lo = job("lo", workers=4, lo=1, hi=4, worker=LARGE)
    n = job("n", workers=1, worker=SMALL)
    view = view_of(nodes(2.0, 2.0), [lo, n], {"lo": {"ps": [0], "w": [1, 1, 0, 0]}},
                   now=10.0, waiting=("n",))
    plans = decide(Kod2Policy(), view)
    assert summary(plans)[0] == ("lo", "scale_down", [], ["lo-worker-1"])
    assert {nd for _, nd in plans[1].add} == {1}


def test_kod2_scale_in_fails_as_a_whole() -> None:
    # lo min 3 with 4 workers: 1 removable; n needs 2 GPUs: nothing changes
    lo = job("lo", workers=4, lo=3, hi=4, worker=LARGE)
    n = job("n", workers=2, worker=SMALL)
    view = view_of(nodes(4.0), [lo, n], {"lo": {"ps": [0], "w": [0, 0, 0, 0]}},
                   now=10.0, waiting=("n",))
    assert decide(Kod2Policy(), view) == []


@pytest.mark.parametrize(
    ("now", "starts"),
    [
        # Alg. 1 lines 27-29.  h (0.99834) holds all 4 GPUs, 2 above its minimum; l
        # (0.99520) arrived at 0, does not fit and may not scale in the heavier h.
        # STARVELIMIT 300 s:
        (300.0, False),   # waited exactly 300 s: not longer than the limit
        (300.5, True),    # starving: weight max(h's 0.99834, 0.99520) + 1 > h's: h's
                          # highest worker goes, l starts
    ],
)
def test_kod2_starvation_raises_the_weight(now: float, starts: bool) -> None:
    h = job("h", workers=4, lo=2, hi=4)
    l_ = job("l", workers=1)
    view = view_of(nodes(4.0), [h, l_], {"h": {"ps": [0], "w": [0, 0, 0, 0]}}, now=now,
                   waiting=("l",), since={"l": 0.0})
    pol = Kod2Policy(starve_limit_s=300.0)
    plans = decide(pol, view)
    assert [(p.job, p.action) for p in plans] == (
        [("h", "scale_down"), ("l", "start")] if starts else [])
    base = kod2_weight(l_, 32.0, 128.0)
    top = kod2_weight(h, 32.0, 128.0)  # the largest running weight
    assert pol.weight("l") == pytest.approx(max(top, base) + 1.0 if starts else base)
    assert (pol.weight("l") > pol.weight("h")) == starts


def test_kod2_starving_job_may_scale_in_a_higher_base_weight() -> None:
    # h (0.99834) holds all 4 GPUs with surplus 2; l (0.99520) starving: 1.99520 > h:
    # h is a victim now, its highest worker goes
    h = job("h", workers=4, lo=2, hi=4)
    l_ = job("l", workers=1)
    view = view_of(nodes(4.0), [h, l_], {"h": {"ps": [0], "w": [0, 0, 0, 0]}}, now=400.0,
                   waiting=("l",), since={"l": 0.0})
    plans = decide(Kod2Policy(starve_limit_s=300.0), view)
    assert summary(plans) == [("h", "scale_down", [], ["h-worker-3"]),
                              ("l", "start", [("l-ps-0", 0), ("l-worker-0", 0)], [])]


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        # Alg. 3 line 3: descending weight; lines 7-12: a node that cannot host a worker
        # is skipped, one worker per node.
        # 2 GPUs per node, 1 free on each.  a (small worker, higher weight) first: one
        # worker on its own node 0, one on node 1 (one per node): nothing left for b
        (2.0, [("a", "scale_up", [("a-worker-1", 0), ("a-worker-2", 1)], [])]),
        # 4 per node, 3 free on each: a one per node (2: room 3 but only 2 nodes), then
        # b one per node, own node (1) first
        (4.0, [("a", "scale_up", [("a-worker-1", 0), ("a-worker-2", 1)], []),
               ("b", "scale_up", [("b-worker-1", 1), ("b-worker-2", 0)], [])]),
    ],
)
def test_kod2_scale_out_one_worker_per_node_in_descending_weight(gpus: float,
                                                                 expected) -> None:
    b = job("b", workers=1, lo=1, hi=4)                 # 0.99998 on 64 cores / 256 GiB
    a = job("a", workers=1, lo=1, hi=4, worker=SMALL)   # 1 - 1e-7: larger
    # running order b then a: the descending weight, not the start order, decides
    view = view_of(nodes(gpus, gpus), [b, a], {"b": {"ps": [1], "w": [1]},
                                               "a": {"ps": [0], "w": [0]}}, now=10.0)
    pol = Kod2Policy()
    plans = decide(pol, view)
    assert pol.weight("a") > pol.weight("b")
    assert summary(plans) == expected


# -- 7. Weighted scheduler -------------------------------------------------------------------

def weighted_with_queue(queue: list[tuple[str, float, int]]) -> WeightedPolicy:
    """A policy whose queue holds ``(name, U, workers)``; R = 5 + 10 x workers (ps 1 core
    + 4 GiB, workers 2 cores + 8 GiB)."""
    pol = WeightedPolicy()
    jobs = {name: job(name, workers=w) for name, _, w in queue}
    jobs["j"] = job("j", workers=1)
    pol.reset(jobs)
    for name, u, _ in queue:
        pol.utility[name] = u
    pol.queue = [name for name, _, _ in queue]
    return pol


QUEUE = [("q1", 5.0, 1), ("q2", 3.0, 2), ("q3", 3.0, 1)]  # R = 15, 25, 15


@pytest.mark.parametrize(
    ("u", "workers", "expected"),
    [
        # line 10: U > u at q1 -> before q1
        (6.0, 1, ["j", "q1", "q2", "q3"]),
        # U == u at q1 and R 25 > 15 -> before q1
        (5.0, 2, ["j", "q1", "q2", "q3"]),
        # U == u, R == r at q1: not before q1; q2: 5 > 3 -> before q2
        (5.0, 1, ["q1", "j", "q2", "q3"]),
        # U == 3: q2 has R 25 < 35 -> before q2
        (3.0, 3, ["q1", "j", "q2", "q3"]),
        # R 25 == q2's: not before it; q3 has R 15 < 25 -> before q3
        (3.0, 2, ["q1", "q2", "j", "q3"]),
        # ties everywhere: line 19, at the end
        (3.0, 1, ["q1", "q2", "q3", "j"]),
        (1.0, 5, ["q1", "q2", "q3", "j"]),
    ],
)
def test_weighted_queue_insertion(u: float, workers: int, expected: list[str]) -> None:
    pol = weighted_with_queue(QUEUE)
    pol.jobs = {**pol.jobs, "j": job("j", workers=workers)}
    pol.utility["j"] = u
    pol.insert("j")
    assert pol.queue == expected


def test_weighted_insert_into_an_empty_queue() -> None:
    pol = weighted_with_queue([])  # lines 1-3
    pol.insert("j")
    assert pol.queue == ["j"]


def test_weighted_queue_orders_arrivals_through_decide() -> None:
    # utilities (g1, 0, 0) -> g1 / 2; nothing fits (0 GPUs): the queue is the order
    jobs = [job("a", utility=(2.0, 0.0, 0.0)), job("b", utility=(6.0, 0.0, 0.0)),
            job("c", workers=2, utility=(2.0, 0.0, 0.0)), job("d", utility=(4.0, 0.0, 0.0))]
    view = view_of(nodes(0.0), jobs, {}, now=0.0, waiting=("a", "b", "c", "d"))
    pol = WeightedPolicy()
    assert decide(pol, view) == []
    # b (3) > d (2) > c (1, R 25) > a (1, R 15)
    assert pol.queue == ["b", "d", "c", "a"]


def test_weighted_starts_one_job_per_invocation() -> None:
    # Scheduling lines 17-24: no waiting job beats r (U 5 > 1): the first queued job
    # that can be scheduled starts and the algorithm returns: b fits too but waits
    r = job("r", workers=1, utility=(10.0, 0.0, 0.0))
    a = job("a", workers=1, utility=(2.0, 0.0, 0.0), arrival=1.0)
    b = job("b", workers=1, utility=(2.0, 0.0, 0.0), arrival=2.0)
    view = view_of(nodes(8.0), [r, a, b], {"r": {"ps": [0], "w": [0]}}, now=10.0,
                   waiting=("a", "b"))
    assert [(p.job, p.action) for p in decide(WeightedPolicy(), view)] == [("a", "start")]


def test_weighted_starts_only_the_head_after_a_scale_down() -> None:
    # Scheduling lines 17-22 after a ScaleDown (found by a review, 2026-11-24): the
    # freed room starts h, the first in W, and the algorithm returns; s, which fits
    # the residual capacity all along, waits for the next round (it started too)
    r = job("r", workers=4, lo=2, hi=4, utility=(1.0, 0.0, 0.0))
    h = job("h", workers=2, utility=(5.0, 0.0, 0.0), arrival=1.0)
    s = job("s", workers=1, utility=(2.0, 0.0, 0.0), arrival=2.0,
            worker=TaskRequest(1.0, 1.0, 0.0))
    view = view_of(nodes(4.0), [r, h, s], {"r": {"ps": [0], "w": [0, 0, 0, 0]}}, now=10.0,
                   waiting=("h", "s"))
    assert [(p.job, p.action) for p in decide(WeightedPolicy(), view)] == [
        ("r", "scale_down"), ("h", "start")]


def test_kod2_keeps_a_starved_job_above_every_running_job_at_every_decision() -> None:
    # r (0.99520) holds all 4 GPUs, 3 above its minimum.  c (0.96083) and d (min 3,
    # 0.97560) starve together at 310 and are raised alike (1.99520); c goes first
    # (arrival), scales r in and starts; d does not fit and r's 2 surplus workers
    # cannot make room for its 3.  At 330 g starves too.  Before (a review,
    # 2026-11-24) d's raise was set once, so g was raised above it (2.99520), went
    # first and scaled r in for itself, blocking d; now d is raised again above the
    # running c, keeps its place (g, equal, comes after it in arrival order), and
    # its failed scale-in leaves g none this round
    r = job("r", workers=4, lo=1, hi=4)
    c = job("c", workers=1, worker=LARGE, arrival=0.0)
    d = job("d", workers=3, worker=LARGE, arrival=1.0)
    g = job("g", workers=1, worker=LARGE, arrival=20.0)
    jobs = {j.name: j for j in (r, c, d, g)}
    state = ClusterState(nodes(4.0))
    for pod in (r.ps_pod(0), *(r.worker_pod(i) for i in range(4))):
        state.place(pod, 0)
    policy = Kod2Policy()
    policy.reset(jobs)
    running, waiting = ["r"], ["c", "d", "g"]
    since = {"c": 0.0, "d": 1.0, "g": 20.0}
    started = []
    for now in (310.0, 330.0):
        plans = policy.decide(ElasticView(now, state, jobs, tuple(waiting), tuple(running),
                                          dict(since)))
        for p in plans:
            apply_plan(state, p)
            if p.action == "start":
                waiting.remove(p.job)
                running.append(p.job)
                started.append(p.job)
    assert started == ["c"]  # g does not overtake d
    assert all(policy.weight("d") > policy.weight(j) for j in running)
    assert policy.weight("d") >= policy.weight("g")

def test_expected_utility_by_hand() -> None:
    # AlexNet 1 worker: 38.09 images/s; steps 38.09 x 600 / 64 -> 600 s; utility
    # (10, 1/600, 600): 10 / (1 + e^0) = 5; target 1200: 10 / (1 + e^-1) = 7.311
    j = job("a", steps=38.09 * 600 / 64, utility=(10.0, 1 / 600, 600.0))
    assert expected_utility(j) == pytest.approx(5.0)
    j = job("a", steps=38.09 * 600 / 64, utility=(10.0, 1 / 600, 1200.0))
    assert expected_utility(j) == pytest.approx(10 / (1 + math.exp(-1)))
    # at `workers` (2: 59.1 images/s), not min_workers: 59.1 x 600 / 64 steps -> 600 s
    j = job("a", workers=2, lo=1, hi=4, steps=59.1 * 600 / 64, utility=(10.0, 1 / 600, 600.0))
    assert expected_utility(j) == pytest.approx(5.0)


@pytest.mark.parametrize(
    ("n_workers", "expected"),
    [
        # Gang Scheduling lines 1-14 (oneNodeOk), 15 (first available node).
        # node 0: 2 GPUs, node 1: 4.  ps + 3 workers fit on node 1 alone (one node)
        (3, [1, 1, 1, 1]),
        # ps + 5: no node holds all: first fit by index: ps, w0, w1 on node 0, then 1
        # (pack would start with node 1, which holds the longest prefix)
        (5, [0, 0, 0, 1, 1, 1]),
        # 7 workers > 6 GPUs: None
        (7, None),
    ],
)
def test_gang_place_one_node_else_first_fit(n_workers: int, expected) -> None:
    state = ClusterState(nodes(2.0, 4.0))
    got = gang_place(gang_of(n_workers), state)
    assert (None if got is None else [n for _, n in got]) == expected
    if n_workers == 5:
        assert pack(gang_of(5), np.array([[2.0, 32, 128], [4.0, 32, 128]]))[0] == 1


@pytest.mark.parametrize(
    ("r_min", "r_util", "expected"),
    [
        # Scheduling lines 3-11: h (U 2.5) beats r (U 0.5) and needs 2 GPUs; r has 4 of
        # 4, min 2.  ScaleDown lines 3-4: maxDeleteCount = 4 - 2 = 2; lines 7-18: one
        # worker at a time (last deployed first) until h fits: 3, then 2; h starts
        (2, 1.0, [("r", "scale_down", [], ["r-worker-3", "r-worker-2"]),
                  ("h", "start", [("h-ps-0", 0), ("h-worker-0", 0), ("h-worker-1", 0)],
                   [])]),
        # r's min 3: maxDeleteCount 1, not enough: failed scale-down, nothing changes
        (3, 1.0, []),
        # r's utility equals h's: line 5 (U > u) fails: no ScaleDown; h does not fit
        (2, 5.0, []),
    ],
)
def test_weighted_scale_down(r_min: int, r_util: float, expected) -> None:
    r = job("r", workers=4, lo=r_min, hi=4, utility=(r_util, 0.0, 0.0))
    h = job("h", workers=2, utility=(5.0, 0.0, 0.0))
    view = view_of(nodes(4.0), [r, h], {"r": {"ps": [0], "w": [0, 0, 0, 0]}}, now=10.0,
                   waiting=("h",))
    assert summary(decide(WeightedPolicy(), view)) == expected


def test_weighted_head_blocks_the_queue_when_scale_down_fails() -> None:
    # Scheduling lines 5-17: h (best utility) cannot start and ScaleDown fails -> the
    # loop of lines 17-25 is skipped: s (fits) does not start either
    r = job("r", workers=3, lo=3, hi=3, utility=(1.0, 0.0, 0.0))
    h = job("h", workers=2, utility=(5.0, 0.0, 0.0), arrival=1.0)
    s = job("s", workers=1, utility=(2.0, 0.0, 0.0), arrival=2.0)
    view = view_of(nodes(4.0), [r, h, s], {"r": {"ps": [0], "w": [0, 0, 0]}}, now=10.0,
                   waiting=("h", "s"))
    assert decide(WeightedPolicy(), view) == []
    # without h, s starts (no job beats the best running: lines 17-24)
    view = view_of(nodes(4.0), [r, s], {"r": {"ps": [0], "w": [0, 0, 0]}}, now=10.0,
                   waiting=("s",))
    assert [(p.job, p.action) for p in decide(WeightedPolicy(), view)] == [("s", "start")]


@pytest.mark.parametrize(
    ("max_w", "expected"),
    [
        # ScaleUp lines 3-17, node by node: node 0 has 3 free GPUs -> 3 workers;
        # node 1: maxScaleUpNum = 6 - 4 = 2
        (6, [("r", "scale_up", [("r-worker-1", 0), ("r-worker-2", 0), ("r-worker-3", 0),
                                ("r-worker-4", 1), ("r-worker-5", 1)], [])]),
        # max 3: 2 more, on node 0
        (3, [("r", "scale_up", [("r-worker-1", 0), ("r-worker-2", 0)], [])]),
        (1, []),
    ],
)
def test_weighted_scale_up_to_max(max_w: int, expected) -> None:
    r = job("r", workers=1, lo=1, hi=max_w)
    view = view_of(nodes(4.0, 4.0), [r], {"r": {"ps": [0], "w": [0]}}, now=10.0)
    assert summary(decide(WeightedPolicy(), view)) == expected


# -- 10. Bad input ----------------------------------------------------------------------------

def ej(**kw) -> ElasticJob:
    base = dict(name="a", model="AlexNet", arrival_s=0.0, steps=10.0, min_workers=1,
                max_workers=2, workers=1)
    base.update(kw)
    return ElasticJob(**base)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: ej(name="Bad_Name"), "name"),
        (lambda: ej(name=""), "name"),
        (lambda: ej(name=3), "name"),
        (lambda: ej(name="-a"), "name"),
        (lambda: ej(model="VGG16"), "model"),
        (lambda: ej(arrival_s=-1.0), "arrival_s"),
        (lambda: ej(arrival_s=float("nan")), "arrival_s"),
        (lambda: ej(arrival_s=True), "arrival_s"),
        (lambda: ej(steps=0.0), "steps"),
        (lambda: ej(steps=float("inf")), "steps"),
        (lambda: ej(min_workers=0), "min_workers"),
        (lambda: ej(min_workers=1.0), "min_workers"),
        (lambda: ej(max_workers=True), "max_workers"),
        (lambda: ej(workers=0), "workers"),
        (lambda: ej(workers=3), "workers"),                 # above max
        (lambda: ej(min_workers=2, workers=1), "workers"),  # below min
        (lambda: ej(min_workers=3, max_workers=2, workers=2), "workers"),
        (lambda: ej(n_ps=0), "n_ps"),
        (lambda: ej(worker=(2, 8, 1)), "worker"),
        (lambda: ej(ps=None), "ps"),
        (lambda: ej(utility=(1.0, 0.0)), "utility"),
        (lambda: ej(utility="abc"), "utility"),
        (lambda: ej(utility=(1.0, -1.0, 0.0)), "utility"),
        (lambda: ej(utility=("x", 0.0, 0.0)), "utility[0]"),
        (lambda: ej(utility=(1.0, 0.0, float("inf"))), "utility[2]"),
        (lambda: TaskRequest(cpu=-1.0), "cpu"),
        (lambda: TaskRequest(mem_gib="8"), "mem_gib"),
        (lambda: TaskRequest(gpu=float("nan")), "gpu"),
        (lambda: TaskRequest(cpu=True), "cpu"),
        (lambda: ScalingCurve(()), "measured"),
        (lambda: ScalingCurve((10.0, 0.0)), "measured"),
        (lambda: ScalingCurve(((1.0, 2.0),)), "measured"),
        (lambda: DragonPolicy(tau_s=0.0), "tau_s"),
        (lambda: DragonPolicy(tau_s=-1.0), "tau_s"),
        (lambda: DragonPolicy(mu_s=0.0), "mu_s"),
        (lambda: DragonPolicy(mu_s=float("nan")), "mu_s"),
        (lambda: DragonPolicy(sync_s=0.0), "sync_s"),
        (lambda: LocalityPolicy(sync_s=-5.0), "sync_s"),
        (lambda: KubeflowPolicy(sync_s=0.0), "sync_s"),
        (lambda: KubeflowPolicy(pod_interval_s=-1.0), "pod_interval_s"),
        (lambda: KubeflowPolicy(pod_interval_s=float("inf")), "pod_interval_s"),
        (lambda: Kod2Policy(starve_limit_s=0.0), "starve_limit_s"),
        (lambda: Kod2Policy(starve_limit_s=float("inf")), "starve_limit_s"),
        (lambda: Kod2Policy(sync_s=-1.0), "sync_s"),
        (lambda: WeightedPolicy(sync_s=0.0), "sync_s"),
        (lambda: make_elastic_policy("slurm"), "name"),
        (lambda: gpu_cluster(0, 4.0, 16.0, 64.0, 1.0), "n_nodes"),
        (lambda: gpu_cluster(True, 4.0, 16.0, 64.0, 1.0), "n_nodes"),
    ],
)
def test_bad_input_names_the_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(name) + ":"):
        call()


@pytest.mark.parametrize("name", ["dragon", "locality", "kubeflow", "kod2", "weighted"])
def test_make_elastic_policy(name: str) -> None:
    pol = make_elastic_policy(name)
    assert pol.name == name
    assert pol.elastic == (name in ("dragon", "kod2", "weighted"))
    assert make_elastic_policy(name) is not pol  # a fresh one each time


@pytest.mark.parametrize(("args", "needle"), [
    ((2, 1, 0.0), "link_gbps: must be > 0"),
    ((2, 1, -0.01), "link_gbps: must be > 0"),
    ((2, 5, 1.0), "remote_workers: expected an integer in [0, 2], got 5"),
    ((2, -1, 1.0), "remote_workers: expected an integer in [0, 2], got -1"),
])
def test_rate_names_a_bad_argument(args, needle):
    from tdmcore.elastic import ElasticJob

    job = ElasticJob("a", "AlexNet", 0.0, 100.0, 1, 2, 1)
    with pytest.raises(ValueError, match=re.escape(needle)):
        job.rate(*args)


@pytest.mark.parametrize(("totals", "needle"), [
    ((-1.0, 64.0), "total_cpu: must be >= 0"),
    ((float("nan"), 64.0), "total_cpu: must be finite"),
    ((16.0, -1.0), "total_mem_gib: must be >= 0"),
])
def test_kod2_weight_names_a_bad_total(totals, needle):
    from tdmcore.elastic import ElasticJob, kod2_weight

    job = ElasticJob("a", "AlexNet", 0.0, 100.0, 1, 2, 1)
    with pytest.raises(ValueError, match=re.escape(needle)):
        kod2_weight(job, *totals)


def test_a_plan_refuses_a_string_where_it_takes_names() -> None:
    """Plan(remove="j1-worker-0") was iterated letter by letter when applied."""
    with pytest.raises(ValueError, match="^remove: expected a tuple of pod names"):
        Plan("j1", "scale_down", remove="j1-worker-0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^add: expected a tuple of"):
        Plan("j1", "scale_up", add=(("x", 0),))  # type: ignore[arg-type]
    plan = Plan("j1", "scale_down", remove=["j1-worker-0"])  # type: ignore[arg-type]
    assert plan.remove == ("j1-worker-0",)


def test_the_utility_refuses_what_job_refuses() -> None:
    from tdmcore.oasis.online import sigmoid_utility

    assert sigmoid_utility(2, 10.0, 0.0, 0.0) == pytest.approx(5.0)
    for args, field in (((float("nan"), 1.0, 0.0, 0.0), "delay"), ((1, "3", 0.0, 0.0), "g1"),
                        ((1, -1.0, 0.0, 0.0), "g1")):
        with pytest.raises(ValueError, match=f"^{field}"):
            sigmoid_utility(*args)  # type: ignore[arg-type]


def test_elastic_job_sizes_beyond_their_bounds_are_refused_by_name() -> None:
    # A review found steps=1e308 "finished" at 15 s (the images overflowed) and
    # max_workers=10**30 accepted (kod2 then ran for minutes).
    from tdmcore.elastic.job import ElasticJob

    with pytest.raises(ValueError, match="^steps: at most 1e"):
        ElasticJob("j", "ResNet50", 0.0, 1e308, 1, 4, 2)
    with pytest.raises(ValueError, match="^max_workers: expected an integer in"):
        ElasticJob("j", "ResNet50", 0.0, 100.0, 1, 10**30, 2)
    job = ElasticJob("j", "ResNet50", 0.0, 100.0, 1, 4, 2)
    with pytest.raises(ValueError, match="^k: "):
        job.worker_pod("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^k: "):
        job.ps_pod(None)  # type: ignore[arg-type]
