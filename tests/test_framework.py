"""The generic framework (issue 39): one way a tentative state commits or rolls
back, per-node reason codes from Filter, per-policy cycle data and one Reserve
entry, whatever the policy."""

from __future__ import annotations

import pathlib
from dataclasses import fields

import numpy as np
import pytest

from tdmcore.framework import (
    CycleState,
    PolicyError,
    Reason,
    ReserveResult,
    Scheduler,
    Status,
    count_reasons,
)
from tdmcore.metronome.policies import make_policy
from tdmcore.metronome.policies.metronome import LinkReservation, MetronomeCycle
from tdmcore.model import Cluster, ClusterState, Node, Pod, TrafficPattern

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _cluster(k: int = 3) -> Cluster:
    return Cluster([Node(f"n{i}", 8, 32, 8, 25.0) for i in range(k)])


def _pod(name: str, job: str, gpu: int = 1, gbps: float = 5.0) -> Pod:
    return Pod(name, job, cpu=1, gpu=gpu, pattern=TrafficPattern(100.0, 0.3, gbps))


# ------------------------------------------------------------------ restore_from
def test_restore_from_commits_a_copy_in_place_and_rolls_back() -> None:
    state = ClusterState(_cluster())
    state.place(_pod("a-0", "a"), 0)
    saved = state.copy()
    trial = state.copy()
    trial.place(_pod("a-1", "a"), 1)
    same = state
    state.restore_from(trial)  # commit: the object its holders know, the trial's contents
    assert state is same and state.node_of("a-1") == 1 and state.link_rows == trial.link_rows
    assert state.version == trial.version
    state.restore_from(saved)  # roll back
    assert state.node_of("a-1") is None and state.same_as(saved)


def test_restore_from_refuses_what_is_no_copy_of_the_state() -> None:
    state = ClusterState(_cluster())
    before = state.copy()
    with pytest.raises(ValueError, match="^other: expected a tdmcore.model.ClusterState"):
        state.restore_from("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^other: a state of another cluster"):
        state.restore_from(ClusterState(_cluster()))
    assert state.same_as(before)


def test_no_state_is_overwritten_through_its_dict() -> None:
    # restore_from is the one owner of "this state becomes that one"
    hits = [f"{p.relative_to(ROOT)}:{n}"
            for folder in ("src", "k8s_bridge") for p in sorted((ROOT / folder).rglob("*.py"))
            for n, line in enumerate(p.read_text().splitlines(), 1)
            if "__dict__.update(" in line]
    assert hits == []


# ------------------------------------------------------------ reasons per node
class _Mask:
    """A user's policy of before issue 39: Filter answers a boolean mask."""

    name = "mask"

    def __init__(self, mask: list[bool]) -> None:
        self.mask = mask

    def pre_filter(self, state: ClusterState, cycle: CycleState) -> Status:
        return Status.SUCCESS

    def filter(self, state: ClusterState, cycle: CycleState) -> object:
        return np.array(self.mask)

    def score(self, state: ClusterState, cycle: CycleState) -> object:
        return np.zeros(len(self.mask))

    def normalize_score(self, state: ClusterState, cycle: CycleState) -> object:
        return np.zeros(len(self.mask))

    def reserve(self, state: ClusterState, cycle: CycleState, node: int) -> ReserveResult:
        state.place(cycle.pod, node)
        return ReserveResult(node, {}, True, tuple(state.link_rows[node]))


class _Named(_Mask):
    """Filter answers codes, one of them the policy's own, named."""

    name = "named"
    reason_names = {512: "the node runs too hot"}

    def __init__(self, codes: list[int]) -> None:
        super().__init__([c == 0 for c in codes])
        self.codes = codes

    def filter(self, state: ClusterState, cycle: CycleState) -> object:
        return np.array(self.codes)


def test_a_boolean_mask_still_works_by_the_compatibility_rule() -> None:
    state = ClusterState(_cluster())
    sched = Scheduler(_Mask([False, True, False]))
    decision, cycle = sched.decide(state, _pod("a-0", "a"))
    assert decision.status is Status.SUCCESS and decision.node == 1
    assert cycle.codes is not None
    assert cycle.codes.tolist() == [Reason.POLICY, 0, Reason.POLICY]
    assert sched.describe(int(cycle.codes[0])) == "rejected by the policy's Filter"
    refused = Scheduler(_Mask([False, False, False])).schedule(state, _pod("a-0", "a"))
    assert refused.status is Status.UNSCHEDULABLE
    assert refused.message == "0/3 nodes are available: 3 rejected by the policy's Filter"


def test_a_policy_names_its_own_rule_and_every_node_has_its_reason() -> None:
    state = ClusterState(_cluster())
    codes = [512, Reason.GPU | Reason.CPU, 512 | 1024]
    sched = Scheduler(_Named(codes))
    decision, cycle = sched.decide(state, _pod("a-0", "a"))
    assert decision.status is Status.UNSCHEDULABLE
    assert decision.message == ("0/3 nodes are available: 1 Insufficient cpu, 1 "
                                "Insufficient gpu, 2 the node runs too hot, 1 rejected by "
                                "the policy's Filter (reason 0x400)")
    assert [sched.describe(c) for c in cycle.codes.tolist()] == [
        "the node runs too hot", "Insufficient cpu, Insufficient gpu",
        "the node runs too hot, rejected by the policy's Filter (reason 0x400)"]
    # a front door's words come first (the bridge names Kubernetes' GPU resource)
    assert sched.describe(Reason.GPU, {Reason.GPU: "Insufficient nvidia.com/gpu"}) == \
        "Insufficient nvidia.com/gpu"
    assert count_reasons(np.array([0, 0])) == {}


@pytest.mark.parametrize("names, message", [
    ([("x", "y")], "^policy.reason_names: expected a mapping"),
    ({4: "hot"}, r"^policy.reason_names: 4 is not a policy's own reason"),
    ({768: "hot"}, r"^policy.reason_names: 768 is not a policy's own reason"),
    ({512: " "}, r"^policy.reason_names\[512\]: expected a non-empty string"),
])
def test_bad_reason_names_are_refused(names: object, message: str) -> None:
    policy = _Named([0, 0, 0])
    policy.reason_names = names  # type: ignore[assignment]
    with pytest.raises(ValueError, match=message):
        Scheduler(policy)


@pytest.mark.parametrize("answer", [np.zeros(3), np.array([0, -1, 0]), np.zeros(2, int), 7])
def test_a_filter_answer_that_is_no_reasons_is_the_policys_error(answer: object) -> None:
    policy = _Named([0, 0, 0])
    policy.filter = lambda state, cycle: answer  # type: ignore[method-assign]
    with pytest.raises(PolicyError, match="^policy 'named': filter must return 3 reason codes"):
        Scheduler(policy).decide(ClusterState(_cluster()), _pod("a-0", "a"))


# ------------------------------------------------------- per-policy cycle data
def test_cycle_state_holds_no_policys_fields_and_each_policy_keeps_its_data_by_name() -> None:
    assert {f.name for f in fields(CycleState)} == {
        "pod", "snapshot", "codes", "feasible", "raw_scores", "scores", "finalists", "data"}
    state = ClusterState(_cluster())
    for name in ("metronome", "metronome-no-phase3", "diktyo", "default"):
        _, cycle = Scheduler(make_policy(name)).decide(state, _pod("a-0", "a"))
        assert set(cycle.data) == ({name} if name != "default" else set())
    _, cycle = Scheduler(make_policy("metronome")).decide(state, _pod("a-0", "a"))
    assert isinstance(cycle.data["metronome"], MetronomeCycle)


# --------------------------------------------------------------- one Reserve
def test_scheduler_reserve_places_the_pod_and_returns_the_policys_extension() -> None:
    state = ClusterState(_cluster(2))
    sched = Scheduler(make_policy("metronome"))
    state.place(_pod("a-0", "a", gbps=15.0), 0)
    state.place(_pod("a-1", "a", gbps=15.0), 1)  # a crosses both links
    waiting = _pod("b-0", "b", gbps=15.0)
    decision, cycle = sched.decide(state, waiting)
    result = sched.reserve(state, cycle, decision.node)
    assert state.node_of("b-0") == decision.node and result.node == decision.node
    assert isinstance(result.extension, LinkReservation)
    assert result.rotations == result.extension.rotations and set(result.rotations) == {"a", "b"}
    assert result.base_period_ms == result.extension.base_period_ms > 0
    assert result.plan is result.extension.plan
    plain = ReserveResult(0, {}, True, ())
    assert plain.rotations == {} and plain.base_period_ms == 0.0 and plain.plan is None


def test_scheduler_reserve_refuses_a_stale_cycle_or_a_node_filter_did_not_pass() -> None:
    state = ClusterState(_cluster(2))
    state.place(Pod("x", "x", cpu=1, gpu=8), 0)  # node 0 is full
    sched = Scheduler(make_policy("metronome"))
    waiting = _pod("a-0", "a")
    decision, cycle = sched.decide(state, waiting)
    before = state.copy()
    for node in (0, 2, -1, True, "1"):
        with pytest.raises(ValueError, match="^node: .* is not a node Filter passed for pod "
                                             "'a-0' in this cycle"):
            sched.reserve(state, cycle, node)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^cycle: expected a tdmcore.framework.CycleState"):
        sched.reserve(state, "cycle", 1)  # type: ignore[arg-type]
    assert state.same_as(before)
    state.place(_pod("b-0", "b"), 1)  # the state moved on since the decision
    moved = state.copy()
    with pytest.raises(ValueError, match="^cycle: decided on another state"):
        sched.reserve(state, cycle, 1)
    assert state.same_as(moved)
    assert decision.node == 1


def test_a_users_failing_reserve_leaves_the_state_as_it_was() -> None:
    class _Breaks(_Mask):
        def reserve(self, state: ClusterState, cycle: CycleState, node: int) -> ReserveResult:
            state.place(cycle.pod, node)
            raise RuntimeError("disk full")

    state = ClusterState(_cluster())
    sched = Scheduler(_Breaks([True, True, True]))
    _, cycle = sched.decide(state, _pod("a-0", "a"))
    with pytest.raises(PolicyError, match="reserve raised RuntimeError: disk full"):
        sched.reserve(state, cycle, 0)
    assert state.node_of("a-0") is None and state.placed == {}


def test_two_cycles_of_one_decision_are_equal_values() -> None:
    # CycleState compares by value, the policy's data too (arrays inside)
    state = ClusterState(_cluster())
    sched = Scheduler(make_policy("metronome"))
    _, one = sched.decide(state, _pod("a-0", "a"))
    _, two = sched.decide(state, _pod("a-0", "a"))
    assert one == two and one.data["metronome"] == two.data["metronome"]
