"""A job's row on a link is one pod's demand; a job wholly on one node is LowComm.

docs/traffic-circle.md and docs/simulator.md .  The rule has one
owner, :meth:`ClusterState.job_links`; these tests check it where it acts: the
cluster state's link rows, the snapshot the kernels read, the Score phase and
EarlyReturn, the loop filter (against the brute-force pipeline of
``asv_bench.naive_pipeline``, written from the spec) and the simulator's transfers.
"""

from __future__ import annotations

import numpy as np
import pytest

from tdmcore.framework import CycleState, Scheduler, Status
from tdmcore.metronome.policies import MetronomeConfig, MetronomePolicy
from tdmcore.model import Cluster, ClusterState, Node, Pod, TrafficPattern
from tdmcore.sim.cluster import SimCluster, SimJob, run_cluster
from tdmcore.snapshot import Snapshot
from tests.oracles.naive_pipeline import _rejects_loop as rejects_loop
from tests.oracles.naive_pipeline import decide as naive_decide

VGG19 = TrafficPattern(422.26, 0.2, 25.0)
HALF = TrafficPattern(100.0, 0.5, 25.0)


def _state(n_nodes: int = 3, gpus: float = 4) -> ClusterState:
    return ClusterState(Cluster([Node(f"n{i}", 32, 64, gpus, 25.0) for i in range(n_nodes)]))


def _pod(name: str, job: str, pattern: TrafficPattern | None = VGG19, prio: int = 0,
         gang: int | None = None) -> Pod:
    return Pod(name, job, cpu=1, mem_gib=1, gpu=1, pattern=pattern, priority=prio,
               gang_size=gang)


def test_two_pods_of_a_job_on_one_link_make_one_row() -> None:
    state = _state()
    state.place(_pod("a-0", "a"), 0)
    state.place(_pod("a-1", "a"), 0)
    state.place(_pod("b-0", "b"), 0)
    state.place(_pod("a-2", "a"), 1)
    assert state.link_rows == [["a-0", "b-0"], ["a-2"], []]
    snap = Snapshot.of(state)
    # one row per job: 25 + 25 = 50 Gbps on n0 (not 75), 25 on n1
    assert snap.sum_bw.tolist() == [50.0, 25.0, 0.0]
    assert snap.n_pods.tolist() == [3, 1, 0]  # every pod still counts as a pod
    # the pod that stood for a on n0 leaves: a-1 takes its place, order kept
    state.remove("a-0")
    assert state.link_rows[0] == ["a-1", "b-0"]
    state.remove("a-1")
    assert state.link_rows[0] == ["b-0"]


def test_a_complete_gang_on_one_node_has_no_row() -> None:
    state = _state()
    state.place(_pod("a-0", "a", gang=2), 0)
    # incomplete: a may still spread, so it keeps its row
    assert state.link_rows[0] == ["a-0"]
    state.place(_pod("a-1", "a", gang=2), 0)
    assert state.link_rows[0] == [] and state.job_links("a") == {}
    # a finishing pod by pod stays local (no transient row)
    state.remove("a-0")
    assert state.link_rows[0] == []
    # a complete gang over two nodes keeps one row on each
    state.place(_pod("b-0", "b", gang=3), 0)
    state.place(_pod("b-1", "b", gang=3), 1)
    state.place(_pod("b-2", "b", gang=3), 1)
    assert state.job_links("b") == {0: "b-0", 1: "b-1"}


def test_gang_size_must_agree_and_bound_the_job() -> None:
    state = _state()
    state.place(_pod("a-0", "a", gang=1), 0)
    with pytest.raises(ValueError, match="^gang_size"):
        state.place(_pod("a-1", "a", gang=1), 0)
    with pytest.raises(ValueError, match="^gang_size"):
        state.place(_pod("a-2", "a", gang=2), 0)
    with pytest.raises(ValueError, match="^gang_size"):
        Pod("x", "x", gang_size=0)


def test_waiting_link_gbps_per_node() -> None:
    state = _state()
    state.place(_pod("a-0", "a", gang=2), 0)
    # a-1 on n0 completes a wholly on n0 (LowComm there): adds nothing; elsewhere a
    # new row of 25 Gbps
    assert state.waiting_link_gbps(_pod("a-1", "a", gang=2)).tolist() == [0.0, 25.0, 25.0]
    # gang of 3: a-1 on n0 leaves the job incomplete, its row on n0 exists already
    state = _state()
    state.place(_pod("b-0", "b", gang=3), 0)
    assert state.waiting_link_gbps(_pod("b-1", "b", gang=3)).tolist() == [0.0, 25.0, 25.0]
    # a one-pod job is local wherever it goes; a LowComm pod adds nothing
    assert not state.waiting_link_gbps(_pod("c-0", "c", gang=1)).any()
    assert not state.waiting_link_gbps(_pod("d-0", "d", pattern=None)).any()


def test_second_pod_of_a_job_scores_100_on_its_own_node() -> None:
    # n0 holds x (50 % of the circle at 25 Gbps) and a-0 (the other 50 %): a perfect
    # interleave.  Summing a's pods made a-1's row 50 Gbps there and the link
    # overloaded (the 80.6 / 91.3 / 65.3 against 100 on an empty node); a's
    # row is one pod's demand, so a-1 adds nothing: EarlyReturn, 100.
    state = _state(2)
    state.place(_pod("x-0", "x", pattern=HALF, prio=1), 0)
    state.place(_pod("x-1", "x", pattern=HALF, prio=1), 1)
    state.place(_pod("a-0", "a", pattern=HALF), 0)
    policy = MetronomePolicy(MetronomeConfig(exact_scores=True))
    waiting = _pod("a-1", "a", pattern=HALF)
    cycle = CycleState(waiting, Snapshot.of(state))
    policy.pre_filter(state, cycle)
    cycle.feasible = np.ones(2, dtype=bool)
    scores = policy.score(state, cycle)
    assert scores[0] == 100.0 and policy.data(cycle).early[0]
    # n1: x's row and a's new row, two 50 % arcs: also perfect, but searched
    assert scores[1] == 100.0 and not policy.data(cycle).early[1]
    decision = Scheduler(policy).schedule(state, waiting)
    assert decision.node == 0  # tau[n0, n0] = 1: beside its sibling
    assert state.link_rows[0] == ["x-0", "a-0"]


def _random_state(seed: int) -> tuple[ClusterState, Pod]:
    rng = np.random.default_rng([seed, 16])
    n_nodes = int(rng.integers(2, 5))
    tau = rng.integers(1, 4, size=(n_nodes, n_nodes)).astype(float)
    tau = (tau + tau.T) / 2
    np.fill_diagonal(tau, 1.0)
    state = ClusterState(Cluster([Node(f"n{i}", 64, 64, 6, 25.0) for i in range(n_nodes)],
                                 tau))
    # common multiples (100 / 200), idle injection (185 beside 200: a gap within
    # E_T) and incompatible periods (137)
    patterns = [TrafficPattern(100.0, 0.3, 15.0), TrafficPattern(200.0, 0.25, 20.0),
                TrafficPattern(100.0, 0.45, 25.0), TrafficPattern(185.0, 0.3, 15.0),
                TrafficPattern(137.0, 0.35, 20.0)]
    for k in range(int(rng.integers(1, 5))):
        size = int(rng.integers(1, 4))
        gang = size if rng.random() < 0.7 else None
        pattern = patterns[int(rng.integers(len(patterns)))]
        prio = int(rng.integers(0, 2))
        for w in range(size):
            nodes = [n for n in range(n_nodes) if state.free_gpu[n] >= 1]
            if not nodes:
                break
            name = f"j{k}-{w}"
            state.place(_pod(name, f"j{k}", pattern=pattern, prio=prio, gang=gang),
                        int(rng.choice(nodes)))
            if rejects_loop(state, None):  # Metronome never builds such a state
                for member in list(state.job_members[f"j{k}"]):
                    state.remove(member)
                break
    size = int(rng.integers(1, 4))
    waiting_job = f"j{int(rng.integers(0, 6))}"
    members = state.job_members.get(waiting_job, [])
    if members:
        first = state.placed[members[0]].pod
        gang = first.gang_size
        if gang is not None and len(members) >= gang:
            waiting_job, gang, first = "w", size, None
        pattern = first.pattern if first is not None \
            else patterns[int(rng.integers(len(patterns)))]
        prio = first.priority if first is not None else int(rng.integers(0, 2))
    else:
        gang = size if rng.random() < 0.7 else None
        pattern, prio = patterns[int(rng.integers(len(patterns)))], int(rng.integers(0, 2))
    return state, _pod("waiting", waiting_job, pattern=pattern, prio=prio, gang=gang)


@pytest.mark.parametrize("seed", range(300))
def test_decisions_equal_the_brute_force_pipeline(seed: int) -> None:
    """Filter (loop check), Score (EarlyReturn, rows) and NormalizeScore against the
    naive pipeline that derives each link's rows from the spec, on states with
    several pods of a job per node, complete and incomplete gangs."""
    state, waiting = _random_state(seed)
    try:
        state.check_pod(waiting)
    except ValueError:
        pytest.skip("the random waiting pod disagrees with its job")
    decision, _ = Scheduler(MetronomePolicy()).decide(state, waiting)
    expected = naive_decide(state, waiting)
    if expected is None:
        assert decision.status is Status.UNSCHEDULABLE
    else:
        assert decision.node == expected


def test_simulator_one_transfer_per_node() -> None:
    # A 4-worker job on two nodes, two pods per node, alone: each node sends one
    # ring segment of r t d per iteration at r, so an iteration takes t_p (compute
    # t (1 - d) + comm t d), as alone.  Summing pods made two 25 Gbps transfers
    # share each 25 Gbps link: comm 2 t d, iteration 1.2 t.
    nodes = [Node(f"n{i}", 32, 64, 2, 25.0) for i in range(2)]
    sim = SimCluster(Cluster(nodes), np.zeros(2), np.zeros((2, 2)))
    job = SimJob("j", "VGG19", TrafficPattern(100.0, 0.2, 25.0), 4, 50, gpu=1.0)
    result = run_cluster(sim, [job], "default", noise_sigma=0.0)
    res = result.jobs["j"]
    assert sorted(res.nodes) == ["n0", "n0", "n1", "n1"]
    assert res.per_1000_s == pytest.approx(100.0, rel=1e-9)
    # each link carried one segment per iteration: 25 Gbps x 20 ms x 50 = 25 Gbit
    np.testing.assert_allclose(result.link_sent_gbit, [25.0, 25.0], rtol=1e-9)
