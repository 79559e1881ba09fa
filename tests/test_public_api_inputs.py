"""The public API refuses what it cannot use and never acts on a node it rejected (a
library user's review, 2026-11-24): each test failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import tdmcore
from tdmcore.framework import PolicyError, ReserveResult, Scheduler, Status
from tdmcore.metronome.link import LinkPod, plan_link
from tdmcore.metronome.policies import make_policy
from tdmcore.metronome.policies.default import resource_fit
from tdmcore.model import Cluster, ClusterState, Node, Pod, TrafficPattern
from tdmcore.oasis.admission import Allocation, SlotDecision, SlottedCluster
from tdmcore.oasis.online import Job
from tdmcore.sim.slotted import run_slotted


def _cluster() -> Cluster:
    return Cluster([Node(f"n{i}", cpu=32, mem_gib=64, gpu=4, link_gbps=25.0) for i in range(3)])


class _Policy:
    """A user policy whose Filter keeps n1 and n2 only."""

    name = "user"

    def __init__(self, scores=None, finalists=None):
        self._scores, self._finalists = scores, finalists

    def pre_filter(self, state, cycle):
        return Status.SUCCESS

    def filter(self, state, cycle):
        return np.array([False, True, True])

    def score(self, state, cycle):
        return np.full(3, 50.0)

    def normalize_score(self, state, cycle):
        if self._finalists is not None:
            cycle.finalists = self._finalists
        return cycle.raw_scores if self._scores is None else self._scores

    def reserve(self, state, cycle, node):
        state.place(cycle.pod, node)
        return ReserveResult(node, {}, True, ())


def test_a_node_filter_dropped_never_wins_when_every_score_is_minus_inf():
    state = ClusterState(_cluster())
    d = Scheduler(_Policy(scores=np.full(3, -np.inf))).schedule(state, Pod("a-0", "a", cpu=1))
    assert d.status is Status.SUCCESS and d.node_name == "n1"


def test_finalists_that_exclude_every_feasible_node_are_the_policys_error():
    state = ClusterState(_cluster())
    policy = _Policy(finalists=np.array([True, False, False]))
    with pytest.raises(PolicyError, match="finalists"):
        Scheduler(policy).schedule(state, Pod("a-0", "a", cpu=1))
    assert not state.placed
    with pytest.raises(PolicyError, match="finalists"):
        Scheduler(_Policy(finalists=np.array([True]))).schedule(state, Pod("a-0", "a", cpu=1))


def test_schedule_gang_refuses_an_iterator_instead_of_placing_nothing():
    state = ClusterState(_cluster())
    gang = [Pod(f"a-{i}", "a", cpu=1) for i in range(2)]
    scheduler = Scheduler(make_policy("default"))
    with pytest.raises(ValueError, match="^pods:"):
        scheduler.schedule_gang(state, (p for p in gang))
    with pytest.raises(ValueError, match="^pods:"):
        scheduler.schedule_gang(state, gang[0])
    assert not state.placed
    assert scheduler.schedule_gang(state, tuple(gang)).status is Status.SUCCESS


def test_plan_link_takes_high_and_low_priorities_as_unify_periods_does():
    pods = [LinkPod("a", 422.26, 0.2, 25.0, priority="high"),
            LinkPod("b", 422.26, 0.2, 25.0, priority="low")]
    ints = [LinkPod("a", 422.26, 0.2, 25.0, priority=1), LinkPod("b", 422.26, 0.2, 25.0)]
    assert plan_link(pods, 25.0).shifts_ms == plan_link(ints, 25.0).shifts_ms
    assert plan_link(pods, 25.0, mode="optimal").jobs == ("a", "b")
    with pytest.raises(ValueError, match=r"^pods\[1\]:"):
        plan_link([ints[0], {"name": "b"}], 25.0)  # type: ignore[list-item]


@pytest.mark.parametrize("bad", [["400"], np.array([400 + 300j]), [True]])
def test_pattern_arrays_refuse_text_complex_and_bools_as_numbers_do(bad):
    with pytest.raises(ValueError, match="^period_ms:"):
        tdmcore.discretize(bad, 0.2, 25.0, 400.0)
    with pytest.raises(ValueError, match="^duty_cycle:"):
        tdmcore.discretize(400.0, bad, 25.0, 400.0)
    with pytest.raises(ValueError, match="^period_ms:"):
        TrafficPattern(bad, 0.2, 25.0)  # type: ignore[arg-type]


def _slotted():
    job = Job(arrival=0, epochs=1, chunks=4, minibatches=1, tau=0.3, grad_size=0.05,
              worker_bw=1.0, ps_bw=2.0, worker_res=(1.0, 2.0), ps_res=(1.0, 1.0))
    cluster = SlottedCluster(np.full((2, 2), 4.0), np.full((2, 2), 4.0), 5,
                             resources=("gpu", "cpu"))
    return job, cluster


class _Slotted:
    name = "user-slotted"

    def __init__(self, answer):
        self.answer = answer

    def reset(self, cluster, jobs):
        pass

    def step(self, view):
        return self.answer(view)


@pytest.mark.parametrize("answer", [
    lambda v: SlotDecision(run={i: Allocation(np.array([0.5, 0.5]), np.array([0.5, 0.5]))
                                for i in v.active}),
    lambda v: SlotDecision(run={i: Allocation([1, 1], [1, 0]) for i in v.active}),
    lambda v: None,
])
def test_run_slotted_refuses_fractional_or_malformed_allocations(answer):
    job, cluster = _slotted()
    with pytest.raises(PolicyError):
        run_slotted(_Slotted(answer), cluster, [job])


def test_run_slotted_takes_whole_counts_in_float_arrays():
    job, cluster = _slotted()
    ok = _Slotted(lambda v: SlotDecision(run={i: Allocation(np.array([1.0, 1.0]),
                                                            np.array([1.0, 0.0]))
                                              for i in v.active}))
    assert run_slotted(ok, cluster, [job]).finished == 1


def test_resource_fit_is_importable_for_the_documented_policy():
    assert callable(resource_fit)


def test_a_hand_made_base_period_is_checked_as_unify_periods_makes_it() -> None:
    """NaN idle drew empty rows, fractional multiples were truncated, a list of
    multiples was a TypeError; each is a ValueError naming base now."""
    from dataclasses import replace

    base = tdmcore.unify_periods([200.0, 185.0], [1, 0])
    args = ([200.0, 185.0], [0.2, 0.2], [10.0, 10.0])
    tdmcore.discretize_unified(base, *args)  # as made: accepted
    for bad in (replace(base, idle_ms=np.array([0.0, np.nan])),
                replace(base, multiples=np.array([1.5, 1.0])),
                replace(base, multiples=[1, 1]),
                replace(base, period_ms=float("nan")),
                replace(base, period_ms=-1.0),
                replace(base, compatible="yes")):
        with pytest.raises(ValueError, match="^base: "):
            tdmcore.discretize_unified(bad, *args)


_D = tdmcore.discretize([100.0, 100.0], [0.3, 0.3], [10.0, 10.0], 100.0)


@pytest.mark.parametrize(("call", "name"), [
    (lambda: tdmcore.score(_D, [0, [1]], 25.0), "rotations"),
    (lambda: tdmcore.score(_D, [0, 1e308], 25.0), "rotations"),
    (lambda: tdmcore.discretize([100, [1]], [0.3, 0.3], [10, 10], 100.0), "period_ms"),
    (lambda: tdmcore.unify_periods([100, [1]], [1, 0]), "periods_ms"),
    (lambda: tdmcore.average_bandwidth_utilization([25, [25]], [0.1, 0.2]),
     "capacities_gbps"),
    (lambda: tdmcore.rotations_to_shifts([0, [1]], 100.0), "rotations"),
    (lambda: tdmcore.search_rotations(_D, 25.0, [0, [1]]), "limits"),
])
def test_ragged_and_out_of_range_arrays_are_refused_by_name(call, name):
    # A review found numpy's "inhomogeneous shape" message (no argument named) and
    # 1e308 cast to int64's minimum, an undefined conversion, scored as a rotation.
    with pytest.raises(ValueError, match=rf"^{name}: expected (numbers|integers) "):
        call()


def test_place_refuses_a_shift_that_is_not_finite():
    state = ClusterState(_cluster())
    with pytest.raises(ValueError, match="^shift_ms: "):
        state.place(Pod("p", "j"), 0, shift_ms=float("nan"))
    assert not state.placed


def test_periods_rates_and_links_beyond_their_caps_are_refused():
    # A review found 1e308 ms periods and Gbps links accepted: the circle's
    # arithmetic overflowed (a base period of 300 digits, RuntimeWarnings).
    with pytest.raises(ValueError, match=r"^period_ms: at most 1e\+07"):
        TrafficPattern(1e308, 0.5, 1.0)
    with pytest.raises(ValueError, match=r"^bandwidth_gbps\[1\]: at most 1e\+06"):
        tdmcore.discretize([100.0, 100.0], [0.3, 0.3], [10.0, 1e308], 100.0)
    with pytest.raises(ValueError, match=r"^link_gbps: at most 1e\+06"):
        Node("n", cpu=1, mem_gib=1, gpu=1, link_gbps=1e308)
    # every capacity argument takes the one rule (_validation.capacity)
    with pytest.raises(ValueError, match=r"^capacity_gbps: at most 1e\+06"):
        plan_link([LinkPod("a", 100.0, 0.5, 1.0), LinkPod("b", 100.0, 0.5, 1.0)], 1e308)
    with pytest.raises(ValueError, match=r"^capacity_gbps: at most 1e\+06"):
        tdmcore.score(_D, [0, 0], 1e308)
    from tdmcore.sim.engine.network import FlowJob, simulate_flows

    with pytest.raises(ValueError, match=r"^link_capacity_gbps\[1\]: at most 1e\+06"):
        simulate_flows([FlowJob("a", 100.0, 0.5, 5.0, (0,), 5)], [10.0, 1e308])


def test_helpers_given_the_wrong_object_name_the_argument():
    # They raised AttributeError ('str' object has no attribute ...).
    from tdmcore.elastic.weighted import expected_utility
    from tdmcore.oasis.admission.oasis import scaled_bounds

    with pytest.raises(ValueError, match="^job: expected an ElasticJob"):
        expected_utility("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^bounds: expected a PriceBounds"):
        scaled_bounds("x")  # type: ignore[arg-type]


@pytest.mark.parametrize("answer", [None, "raise"])
def test_a_reserve_that_placed_the_pod_and_failed_leaves_no_placement(answer):
    # The gang path tried on a copy; the single pod's path left the pod placed
    # (and the node's resources used) behind the PolicyError.
    class Placing(_Policy):
        def reserve(self, state, cycle, node):
            state.place(cycle.pod, node)
            if answer == "raise":
                raise RuntimeError("after placing")
            return None

    state = ClusterState(_cluster())
    state.place(Pod("b-0", "b", cpu=1), 0)
    before = state.copy()
    with pytest.raises(PolicyError):
        Scheduler(Placing()).schedule(state, Pod("a-0", "a", cpu=1))
    assert state == before  # placements, resources, order and version


# A scheduler author's review, 2026-11-25: each of these raised a raw TypeError,
# AttributeError or IndexError, answered silently wrong, or changed state first.

def test_discretize_unified_refuses_a_base_unified_for_other_periods():
    base = tdmcore.unify_periods([400.0, 300.0], ["high", "low"])  # T = 1200, [3, 4]
    with pytest.raises(ValueError, match=r"^period_ms: base was unified for periods"):
        tdmcore.discretize_unified(base, [100.0, 999.0], [0.2, 0.2], [25.0, 25.0])
    rows = tdmcore.discretize_unified(base, [400.0, 300.0], [0.2, 0.2], [25.0, 25.0])
    assert rows.limits.tolist() == [24, 18]


def test_unify_periods_caps_periods_as_the_traffic_pattern_does():
    with pytest.raises(ValueError, match=r"^periods_ms\[1\]: at most 1e\+07, got 3000000000000\.0"):
        tdmcore.unify_periods([1e12 / 1e6, 3e12], ["high", "low"])


def test_controller_plan_link_refuses_a_bad_node_before_planning():
    from tdmcore.metronome.controller import Controller

    state = ClusterState(_cluster())
    sch = Scheduler(make_policy("metronome"))
    ctl = Controller.for_policy(state, sch.policy)
    vgg = TrafficPattern(422.26, 0.2, 25.0)
    for job, prio in (("a", 1), ("b", 0)):
        gang = sch.schedule_gang(state, [Pod(f"{job}-{i}", job, gpu=1, pattern=vgg,
                                             priority=prio, spread=True) for i in range(2)])
        ctl.on_reserve_gang([d.reserve for d in gang.decisions])
    before = (ctl.recalculations, dict(ctl.links))
    for bad in (1.5, True, "1", -1, 3):
        with pytest.raises(ValueError, match=r"^node: "):
            ctl.plan_link(bad, optimal=True)
    with pytest.raises(ValueError, match=r"^optimal: "):
        ctl.plan_link(0, optimal="yes")
    with pytest.raises(ValueError, match=r"^results: "):
        ctl.on_reserve_gang(gang.decisions[0].reserve)
    with pytest.raises(ValueError, match=r"^results: "):
        ctl.on_reserve_gang(None)
    assert (ctl.recalculations, dict(ctl.links)) == before


@pytest.mark.parametrize(("call", "name"), [
    (lambda: Cluster(None), "nodes"),
    (lambda: Cluster(Node("n", cpu=1, mem_gib=1, gpu=1, link_gbps=1)), "nodes"),
    (lambda: Cluster(_cluster().nodes, workloads=["w"]), r"workloads\[0\]"),
    (lambda: Cluster(_cluster().nodes, workloads=None), "workloads"),
    (lambda: tdmcore.model.Workload("w", ("a", "b"), dependencies=None), "dependencies"),
    (lambda: ClusterState("x"), "cluster"),
    (lambda: Scheduler(None), "policy"),
    (lambda: Scheduler(object()), "policy"),
    (lambda: Scheduler(_Policy), "policy"),
    (lambda: Scheduler(make_policy("default")).schedule("s", Pod("p", "j")), "state"),
    (lambda: Scheduler(make_policy("default")).schedule_gang("s", [Pod("p", "j")]), "state"),
    (lambda: Scheduler(make_policy("default")).decide(ClusterState(_cluster()), Pod("p", "j"),
                                                      snapshot="x"), "snapshot"),
    (lambda: ClusterState(_cluster()).pods_on(3), "node"),
    (lambda: ClusterState(_cluster()).pods_on(-1), "node"),
    (lambda: ClusterState(_cluster()).remove(["x"]), "pod_name"),
    (lambda: ClusterState(_cluster()).update_pattern(["x"], TrafficPattern(100, 0.2, 1)),
     "pod_name"),
    (lambda: ClusterState(_cluster()).set_shifts([("p", 1.0)]), "shifts_ms"),
    (lambda: ClusterState(_cluster()).set_job_shifts([("j", 1.0)]), "shifts_ms"),
    (lambda: tdmcore.score(None, [0], 25.0), "demand"),
    (lambda: tdmcore.search_rotations(None, 25.0, [72]), "demand"),
    (lambda: tdmcore.search_rotations(np.full((2, 72), 1e307), 25.0, [72, 72]), "demand"),
    (lambda: plan_link([LinkPod(None, 100.0, 0.2, 5.0)], 25.0), r"pods\[0\]"),
    (lambda: plan_link([LinkPod("a", 100.0, 0.2, 5.0, job=3)], 25.0), r"pods\[0\]"),
])
def test_wrong_objects_are_refused_by_name(call, name):
    with pytest.raises(ValueError, match=rf"^{name}: "):
        call()


def test_run_cluster_refuses_jobs_that_are_no_sequence():
    from tdmcore.sim.scenarios import metronome_snapshots

    sc = metronome_snapshots(10.0)["S1"]
    from tdmcore.sim.cluster import run_cluster

    for bad in (None, sc.jobs[0]):
        with pytest.raises(ValueError, match=r"^jobs: "):
            run_cluster(sc.sim, bad, "default")
