"""The generic framework (issue 39): one way a tentative state commits or rolls
back, per-node reason codes from Filter, per-policy cycle data and one Reserve
entry, whatever the policy."""

from __future__ import annotations

import pathlib

import pytest

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
