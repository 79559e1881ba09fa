"""The library's gang API is all or nothing, with one rule for what raises and what
returns Status.ERROR (tdmcore.framework's docstring); the arguments around it are
named when they are wrong."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tdmcore
from tdmcore.framework import PolicyError, ReserveResult, Scheduler, Status
from tdmcore.metronome.policies import make_policy
from tdmcore.model import Cluster, ClusterState, Node, Pod
from tdmcore.sim.cluster import SimCluster, run_cluster
from tdmcore.sim.scenarios import metronome_snapshots


def _state(nodes: int = 2) -> ClusterState:
    return ClusterState(Cluster([Node(f"n{i}", 64, 512, 8, 25.0) for i in range(nodes)]))


def _gang(job: str, size: int, count: int | None = None) -> list[Pod]:
    return [Pod(f"{job}-w{k}", job, gpu=1, gang_size=size) for k in range(count or size)]


def test_a_gang_without_all_its_pods_is_an_error_and_changes_nothing() -> None:
    # issue 41: one pod of a gang of 8 was placed, SUCCESS
    state, scheduler = _state(), Scheduler(make_policy("default"))
    before = state.copy()
    one = scheduler.schedule_gang(state, _gang("a", 8, count=1))
    assert one.status is Status.ERROR and one.decisions == ()
    assert one.message.startswith("pods: job 'a' has gang_size 8, the gang holds 1 of "
                                  "its pods and 0 are placed")
    assert state == before
    whole = scheduler.schedule_gang(state, _gang("a", 8))
    assert whole.status is Status.SUCCESS and len(state.placed) == 8
    # a job's pods already placed count: the rest of a gang completes it
    rest = _gang("b", 3)
    assert scheduler.schedule(state, rest[0]).status is Status.SUCCESS
    assert scheduler.schedule_gang(state, rest[1:]).status is Status.SUCCESS
    # a workload is all of its jobs' pods too
    workload = scheduler.schedule_workload(state, [_gang("c", 2), _gang("d", 2, count=1)])
    assert workload.status is Status.ERROR and "job 'd'" in workload.message


def test_what_raises_and_what_returns_error() -> None:
    state, scheduler = _state(), Scheduler(make_policy("default"))
    with pytest.raises(ValueError, match="^state: "):
        scheduler.schedule_gang("state", _gang("a", 2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^pods: "):
        scheduler.schedule_gang(state, ["a-w0"])  # type: ignore[list-item]
    assert scheduler.schedule_gang(state, []).status is Status.ERROR
    twice = [Pod("p", "a", gpu=1), Pod("p", "a", gpu=1)]
    assert scheduler.schedule_gang(state, twice).status is Status.ERROR
    assert scheduler.schedule_gang(state, [Pod("big", "big", gpu=64)]).status \
        is Status.UNSCHEDULABLE
    assert "Status.ERROR" in tdmcore.framework.__doc__  # the rule is written once, there


class _Exits:
    name = "exits"

    def pre_filter(self, state: object, cycle: object) -> Status:
        return Status.SUCCESS

    def filter(self, state: object, cycle: object) -> object:
        raise SystemExit(3)

    score = normalize_score = reserve = filter  # type: ignore[assignment]


def test_a_policy_calling_sys_exit_is_its_error_not_the_end_of_the_program() -> None:
    with pytest.raises(PolicyError, match="^policy 'exits': filter raised SystemExit: 3"):
        Scheduler(_Exits()).schedule_gang(_state(), [Pod("p", "j", gpu=1)])  # type: ignore[arg-type]


def test_a_run_with_a_job_that_can_never_be_placed_refuses_it() -> None:
    # issue 41: run_cluster returned the mean JCT of the jobs that ran, silently
    s1 = metronome_snapshots(window_s=30)["S1"]
    big = dataclasses.replace(s1.jobs[0], name="too-big", workers=40)
    with pytest.raises(ValueError, match=r"^jobs: 1 job\(s\) can never be placed under "
                                         r"'default', even on the empty cluster "
                                         r"\('too-big'\)"):
        run_cluster(s1.sim, (*s1.jobs, big), "default")


def test_an_asymmetric_latency_matrix_is_refused_as_the_file_loader_refuses_it() -> None:
    nodes = [Node(f"n{i}", 8, 64, 1, 25.0) for i in range(3)]
    lat = np.full((3, 3), 0.05)
    lat[2, 1] = 0.5
    with pytest.raises(ValueError, match=r"^latency_ms\[2\]\[1\]: expected a symmetric "
                                         r"matrix: 0\.5 here but 0\.05 at latency_ms\[1\]\[2\]"):
        SimCluster(Cluster(nodes), np.zeros(3), lat)


def test_a_one_dimensional_demand_is_blamed_on_the_demand() -> None:
    # issue 41: the limits took the blame ("limits: expected 1 values")
    with pytest.raises(ValueError, match=r"^demand: expected shape \(k, bins\)"):
        tdmcore.search_rotations(np.ones(72), 25.0, [72, 36, 72])


def test_reserve_rotations_are_per_job_as_documented() -> None:
    # S1's first two VGG19 jobs (two workers each) share a link under Metronome
    s1 = metronome_snapshots(window_s=30)["S1"]
    state = ClusterState(s1.sim.cluster)
    scheduler = Scheduler(make_policy("metronome"))
    reserves: list[ReserveResult] = []
    for job in s1.jobs[:2]:
        gang = scheduler.schedule_gang(state, job.pods())
        assert gang.status is Status.SUCCESS
        reserves += [r for r in gang.reserves if r.rotations]
    jobs = {j.name for j in s1.jobs[:2]}
    assert reserves and all(set(r.rotations) == jobs for r in reserves)
    assert "per *job*" in (ReserveResult.__doc__ or "")
