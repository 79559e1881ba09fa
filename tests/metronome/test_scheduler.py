"""The Metronome pipeline (Algorithm 1) and the baselines, extension point by point.

Comments show the hand arithmetic.  Clusters are tiny so every number can be
checked by hand; randomized clusters check invariants and exactness.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tdmcore.framework import CycleState, Reason, Scheduler, Status, count_reasons
from tdmcore.metronome.affinity import (
    AffinityGraph,
    adjacency,
    bfs_order,
    contended_edges,
    cyclic_blocks,
    loop_free_nodes,
)
from tdmcore.metronome.controller import Controller
from tdmcore.metronome.link import LinkPod, plan_link
from tdmcore.metronome.policies import POLICIES, MetronomeConfig, MetronomePolicy, make_policy
from tdmcore.metronome.policies.metronome import latency_scores, link_pods, normalized_latency
from tdmcore.model import Cluster, ClusterState, Node, Pod, TrafficPattern, Workload
from tdmcore.snapshot import Snapshot
from tests.clusters import random_cluster
from tests.oracles.naive_pipeline import _rejects_loop

VGG19 = TrafficPattern(422.26, 0.2, 25.0)


def paper_testbed(latency=None) -> Cluster:
    """The paper's testbed (§IV-A): 3 A30 nodes (4 MIG GPUs, 25 Gbps), 1 T4 (10 Gbps)."""
    nodes = [Node(f"a30-{i}", 32, 1024, 4, 25.0) for i in range(3)]
    nodes.append(Node("t4", 20, 32, 1, 10.0))
    return Cluster(nodes, latency)


def pod(name, job, pattern=VGG19, prio=0, gpu=1, workload=None) -> Pod:
    return Pod(name, job, cpu=5, mem_gib=5, gpu=gpu, pattern=pattern, priority=prio,
               workload=workload)


def cycle_for(state: ClusterState, p: Pod) -> CycleState:
    return CycleState(p, Snapshot.of(state))


# ------------------------------------------------------------------ PreFilter
def test_prefilter_latency_sums_dependent_pods() -> None:
    # tau (3 nodes): pods of job j on nodes 0 and 2; waiting pod of j:
    # Delta_0 = tau[0,0] + tau[0,2] = 1 + 7 = 8; Delta_1 = 3 + 4 = 7; Delta_2 = 7 + 1 = 8
    tau = [[1, 3, 7], [3, 1, 4], [7, 4, 1]]
    cluster = Cluster([Node(f"n{i}", 64, 64, 4, 25) for i in range(3)], tau)
    state = ClusterState(cluster)
    state.place(pod("j-0", "j"), 0)
    state.place(pod("j-1", "j"), 2)
    np.testing.assert_allclose(latency_scores(state, pod("j-2", "j")), [8, 7, 8])
    # No dependent pod deployed -> mean latency: (1+3+7)/3, (3+1+4)/3, (7+4+1)/3
    np.testing.assert_allclose(latency_scores(state, pod("k-0", "k")), [11 / 3, 8 / 3, 4])
    # LowComm pod -> mean latency even with its job deployed
    np.testing.assert_allclose(latency_scores(state, pod("j-3", "j", pattern=None)),
                               [11 / 3, 8 / 3, 4])


def test_prefilter_counts_appgroup_dependencies() -> None:
    # workload w: jobs a, b depend on each other; a pod of b on node 1 ->
    # a's waiting pod: Delta = tau[:, 1] = [3, 1, 4]
    tau = [[1, 3, 7], [3, 1, 4], [7, 4, 1]]
    w = Workload("w", ("a", "b", "c"), (("a", "b"),))
    cluster = Cluster([Node(f"n{i}", 64, 64, 4, 25) for i in range(3)], tau, [w])
    state = ClusterState(cluster)
    state.place(pod("b-0", "b", workload="w"), 1)
    state.place(pod("c-0", "c", workload="w"), 2)  # c is not declared dependent on a
    np.testing.assert_allclose(latency_scores(state, pod("a-0", "a", workload="w")), [3, 1, 4])


# --------------------------------------------------------------------- Filter
def test_filter_resources_and_bandwidth() -> None:
    # 25 Gbps pod: t4's 10 Gbps link fails Eq. 14; a30-1 is out of GPUs (Eq. 13)
    state = ClusterState(paper_testbed())
    state.place(pod("x-0", "x", gpu=4, pattern=None), 1)
    policy = MetronomePolicy()
    cycle = cycle_for(state, pod("a-0", "a"))
    policy.pre_filter(state, cycle)
    codes = policy.filter(state, cycle)
    assert codes.tolist() == [0, Reason.GPU, 0, Reason.LINK]
    assert count_reasons(codes) == {"Insufficient gpu": 1,
                                    "link slower than the pod's bandwidth (Eq. 14)": 1}


def test_filter_drops_a_placement_that_closes_a_loop() -> None:
    # The paper's example: a and b contend on link e, b and c on f; placing a pod of c
    # on g, where a already runs, would make c contend with a: a loop a-e-b-f-c-g-a.
    cluster = Cluster([Node(n, 64, 64, 8, 25.0) for n in ("e", "f", "g", "h")])
    state = ClusterState(cluster)
    for name, job, node in (("a-0", "a", 0), ("b-0", "b", 0), ("b-1", "b", 1),
                            ("c-0", "c", 1), ("a-1", "a", 2)):
        state.place(pod(name, job), node)
    snap = Snapshot.of(state)
    graph = AffinityGraph.of(snap)
    assert not graph.has_cycle()
    ok = loop_free_nodes(snap, graph, np.arange(4), snap.job_id("c"), 25.0)
    # e: c joins a, b (already connected through f) -> a new cycle; f: c already
    # there; g: c meets a (connected via e-b-f) -> a new cycle; h: empty -> no edge
    assert ok.tolist() == [False, True, False, True]
    policy = MetronomePolicy()
    cycle = cycle_for(state, pod("c-1", "c"))
    policy.pre_filter(state, cycle)
    # spec §6, revised 2026-11-28: g closes the paper's triangle a-e-b-f-c-g-a, whose
    # links carry three different pairs: refused.  e closes b-e-c-f-b, whose links
    # both carry b and c (a hangs off e alone), and three VGG19 arcs of 14.4 bins
    # fit apart on e with b and c where f has them: kept.
    assert policy.filter(state, cycle).tolist() == [0, 0, Reason.DEPENDENCY_LOOP, 0]
    assert [_rejects_loop(state, (pod("c-1", "c"), n)) for n in range(4)] == \
        [False, False, True, False]


def _two_links_sharing_a_and_b(b1: TrafficPattern, a1: TrafficPattern
                               ) -> tuple[ClusterState, Pod]:
    """Jobs a and b contend on n0 (15 + 15 > 25 Gbps, period 100 ms: a's comm in
    bins 0-36 of 72, b's 21.6 bins); a's second pod runs alone on n1 with ``a1``;
    b's second pod (``b1``) waits.  On n1 it makes the link carry {a, b}, n0's set:
    a cycle a-n0-b-n1-a through two links that carry the same jobs."""
    state = ClusterState(Cluster([Node(f"n{i}", 64, 64, 8, 25.0) for i in range(3)]))
    state.place(pod("a-0", "a", TrafficPattern(100.0, 0.5, 15.0), prio=1), 0)
    state.place(pod("b-0", "b", TrafficPattern(100.0, 0.3, 15.0)), 0)
    state.place(pod("a-1", "a", a1, prio=1), 1)
    return state, pod("b-1", "b", b1)


def test_a_cycle_of_links_with_one_common_perfect_plan_is_accepted() -> None:
    # spec §6, revised 2026-11-28.  b-1 with b-0's pattern beside a-1 with a-0's:
    # n1 then carries exactly n0's rows, so b's perfect rotations on n0 (its 21.6
    # bins inside a's idle bins 36-72: rotations 36..50) are perfect on n1 too: one
    # plan for both links, the cycle is accepted (the paper's rule refused it).
    state, waiting = _two_links_sharing_a_and_b(TrafficPattern(100.0, 0.3, 15.0),
                                                TrafficPattern(100.0, 0.5, 15.0))
    snap = Snapshot.of(state)
    ok = loop_free_nodes(snap, AffinityGraph.of(snap), np.arange(3), snap.job_id("b"), 15.0)
    assert ok.tolist() == [True, False, True]  # n1 closes the cycle a-n0-b-n1-a
    cycle = cycle_for(state, waiting)
    policy = MetronomePolicy()
    policy.pre_filter(state, cycle)
    assert policy.filter(state, cycle).tolist() == [0, 0, 0]
    assert not _rejects_loop(state, (waiting, 1))
    # and the controller applies one plan to both links: the same relative shift
    state.place(waiting, 1)
    ctl = Controller(state)
    ctl.update_offsets()
    assert ctl.links[0].job_rotations == ctl.links[1].job_rotations
    assert ctl.links[0].result.perfect and ctl.links[1].result.perfect


def test_a_cycle_whose_link_plans_disagree_is_rejected() -> None:
    # The same cycle, but a's pod on n1 sends for 0.2 of the period (bins 0-14.4)
    # and b's for 0.75 (54 bins): on n1 b fits only at rotations 15..18, on n0 only
    # at 36..50.  Each link alone has a perfect plan, none is perfect on both: the
    # offsets of a and b cannot agree around the cycle, so n1 is filtered out.
    state, waiting = _two_links_sharing_a_and_b(TrafficPattern(100.0, 0.75, 15.0),
                                                TrafficPattern(100.0, 0.2, 15.0))
    assert plan_link([LinkPod("a-1", 100.0, 0.2, 15.0, 1, "a"),
                      LinkPod("b-1", 100.0, 0.75, 15.0, 0, "b")], 25.0).result.perfect
    cycle = cycle_for(state, waiting)
    policy = MetronomePolicy()
    policy.pre_filter(state, cycle)
    assert policy.filter(state, cycle).tolist() == [0, Reason.DEPENDENCY_LOOP, 0]
    assert _rejects_loop(state, (waiting, 1))


def test_a_gang_half_placed_on_two_shared_links_keeps_its_offsets_consistent() -> None:
    # S1's third job, one pod at a time: a and b share n0 and n1 (VGG19-like, duty
    # 0.2, 15 Gbps on 25); c's first pod on n0 makes it carry {a, b, c}, n1 still
    # {a, b}: a cycle a-n0-b-n1-a through links of different sets.  Its offsets
    # agree: n0's three arcs of 14.4 bins fit apart, and the same a and b rotations
    # are perfect on n1, which carries the same rows less c.  Accepted, and c's
    # second pod then completes the set on n1 too.
    state = ClusterState(Cluster([Node(f"n{i}", 64, 64, 8, 25.0) for i in range(3)]))
    vgg = TrafficPattern(100.0, 0.2, 15.0)
    for name, job, node in (("a-0", "a", 0), ("b-0", "b", 0), ("a-1", "a", 1),
                            ("b-1", "b", 1)):
        state.place(pod(name, job, vgg, prio=1 if job == "a" else 0), node)
    snap = Snapshot.of(state)
    graph = AffinityGraph.of(snap)
    assert graph.has_cycle()
    assert [tuple(b) for b in cyclic_blocks(graph.edges)] == [((0, 1), (0, 1))]
    policy = MetronomePolicy()
    for name, node in (("c-0", 0), ("c-1", 1)):
        waiting = pod(name, "c", vgg)
        cycle = cycle_for(state, waiting)
        policy.pre_filter(state, cycle)
        feasible = policy.filter(state, cycle) == 0
        assert feasible[node] and not _rejects_loop(state, (waiting, node))
        state.place(waiting, node)
    ctl = Controller(state)
    ctl.update_offsets()
    assert ctl.links[0].job_rotations == ctl.links[1].job_rotations
    assert ctl.links[0].result.perfect


#: circles of 24 bins keep the brute force's joint search (24^4 vectors at most) quick
LOOP_BINS = 24


def _random_links(rng: np.random.Generator, max_nodes: int, max_jobs: int,
                  max_pods: int) -> tuple[ClusterState, int, int]:
    """A random state of 10 Gbps pods (period 100 ms, duty 0.2, 0.4 or 0.6 per pod)
    on 15 or 25 Gbps links; with its node and job counts.  Three pods of duty 0.4
    interleave on a 25 Gbps link (no three at once) but not on a 15 Gbps one (no two
    at once), and a job's pods may send for different shares of the period, so some
    links that carry the same jobs have no common perfect plan."""
    n_nodes = int(rng.integers(2, max_nodes))
    n_jobs = int(rng.integers(2, max_jobs))
    caps = rng.choice([15.0, 25.0], size=n_nodes)
    state = ClusterState(Cluster([Node(f"n{i}", 64, 64, 16, float(caps[i]))
                                  for i in range(n_nodes)]))
    for i in range(int(rng.integers(0, max_pods))):
        j = int(rng.integers(0, n_jobs))
        duty = float(rng.choice([0.2, 0.4, 0.6]))
        state.place(pod(f"p{i}", f"j{j}", pattern=TrafficPattern(100, duty, 10.0)),
                    int(rng.integers(0, n_nodes)))
        if _rejects_loop(state, None, LOOP_BINS):  # Metronome never builds such a state
            state.remove(f"p{i}")
    return state, n_nodes, n_jobs


def test_loop_filter_matches_the_brute_force_loop_rule() -> None:
    """The Filter's loop rule (the kernel's new cycles, blocks, common plans)
    against the naive pipeline's statement of it on 400 random states, every node:
    refused outright, new cycles kept (their offsets agree) and new cycles refused
    (no common perfect vector) all occur."""
    rng = np.random.default_rng(7)
    seen = {"no cycle": 0, "cycle kept": 0, "cycle refused": 0}
    for _ in range(400):
        state, n_nodes, n_jobs = _random_links(rng, 5, 4, 14)
        snap = Snapshot.of(state)
        graph = AffinityGraph.of(snap)
        w = int(rng.integers(0, n_jobs + 1))
        waiting = pod("w", f"j{w}", pattern=TrafficPattern(
            100, float(rng.choice([0.2, 0.4, 0.6])), 10.0))
        new_cycle = ~loop_free_nodes(snap, graph, np.arange(n_nodes), snap.job_id(f"j{w}"),
                                     10.0, np.asarray(state.waiting_link_gbps(waiting) > 0.0))
        cycle = cycle_for(state, waiting)
        policy = MetronomePolicy(MetronomeConfig(bins=LOOP_BINS))
        policy.pre_filter(state, cycle)
        feasible = policy.filter(state, cycle) == 0
        for n in range(n_nodes):
            assert feasible[n] == (not _rejects_loop(state, (waiting, n), LOOP_BINS)), \
                (n, w, list(state.placed))
            kind = ("no cycle" if not new_cycle[n] else
                    "cycle kept" if feasible[n] else "cycle refused")
            seen[kind] += 1
    assert min(seen.values()) >= 10, seen


def test_components_equal_scipy_connected_components() -> None:
    """The components kernel against scipy's ``connected_components`` (undirected)
    on 3,000 seeded bipartite graphs, empty and edgeless ones included: the same
    labels, vertex for vertex (-1 where a vertex has no edge), and the same labels
    through :meth:`AffinityGraph.of` on random clusters."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from tdmcore._kernels.affinity import components_kernel

    rng = np.random.default_rng(20261129)
    merged = 0
    for _ in range(3000):
        n_jobs, n_links = int(rng.integers(0, 12)), int(rng.integers(1, 12))
        n_edges = int(rng.integers(0, 2 * (n_jobs + n_links))) if n_jobs else 0
        pairs = {(int(rng.integers(0, n_jobs)), int(rng.integers(0, n_links)))
                 for _ in range(n_edges)}
        edges = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
        size = n_jobs + n_links
        graph = coo_matrix((np.ones(len(edges)), (edges[:, 0], n_jobs + edges[:, 1])),
                           shape=(size, size))
        count, labels = connected_components(graph, directed=False)
        has_edge = np.zeros(size, dtype=bool)
        has_edge[edges[:, 0]] = True
        has_edge[n_jobs + edges[:, 1]] = True
        want = np.where(has_edge, labels, -1)
        comp_job = np.full(n_jobs, -7, dtype=np.int64)
        comp_link = np.full(n_links, -7, dtype=np.int64)
        components_kernel(edges, n_jobs, n_links, comp_job, comp_link)
        assert np.array_equal(np.concatenate([comp_job, comp_link]), want), edges.tolist()
        merged += size - count > 1
    assert merged > 1000  # most graphs join vertices across several edges
    for _ in range(100):
        state, _, _ = _random_links(rng, 7, 7, 12)
        snap = Snapshot.of(state)
        graph = AffinityGraph.of(snap)
        size = graph.n_jobs + graph.n_links
        if not graph.edges.shape[0]:
            assert (graph.comp_job == -1).all() and (graph.comp_link == -1).all()
            continue
        adjacency_matrix = coo_matrix((np.ones(graph.edges.shape[0]),
                                       (graph.edges[:, 0], graph.n_jobs + graph.edges[:, 1])),
                                      shape=(size, size))
        labels = connected_components(adjacency_matrix, directed=False)[1]
        has_edge = np.zeros(size, dtype=bool)
        has_edge[graph.edges[:, 0]] = True
        has_edge[graph.n_jobs + graph.edges[:, 1]] = True
        want = np.where(has_edge, labels, -1)
        assert np.array_equal(np.concatenate([graph.comp_job, graph.comp_link]), want)


def test_contended_edges_and_bfs_agree_with_the_affinity_graph() -> None:
    # contended_edges is the graph's edge list without its components, and a BFS
    # over a prebuilt adjacency is the BFS over the edges: on random clusters.
    rng = np.random.default_rng(11)
    for _ in range(100):
        state, _, _ = _random_links(rng, 7, 7, 12)
        snap = Snapshot.of(state)
        graph = AffinityGraph.of(snap)
        edges, contended = contended_edges(snap)
        assert np.array_equal(edges, graph.edges) and edges.dtype == np.int64
        assert np.array_equal(contended, graph.contended)
        adjacent = adjacency(edges)
        for root in set(edges[:, 0].tolist()):
            walk = bfs_order(adjacent, root)
            assert walk == graph.bfs_order(root)
            # every job of the root's component once, each reached over an edge
            assert len({j for j, _, _ in walk}) == len(walk)
            assert all((j, n) in set(map(tuple, edges.tolist())) for j, n, _ in walk[1:])


def test_set_job_shifts_writes_every_pod_of_each_job_or_nothing() -> None:
    state = ClusterState(paper_testbed())
    for name, job, node in (("a-0", "a", 0), ("a-1", "a", 1), ("b-0", "b", 1)):
        state.place(pod(name, job), node)
    out = state.set_job_shifts({"a": np.float64(12.5), "b": 3.0})
    assert out == {"a-0": 12.5, "a-1": 12.5, "b-0": 3.0}
    assert [state.placed[n].shift_ms for n in ("a-0", "a-1", "b-0")] == [12.5, 12.5, 3.0]
    assert all(type(state.placed[n].shift_ms) is float for n in ("a-0", "a-1", "b-0"))
    before = state.copy()
    with pytest.raises(ValueError, match="^shifts_ms: no shift for job 'b'"):
        state.set_job_shifts({"a": 1.0})
    with pytest.raises(ValueError, match="^shifts_ms: the shift of job 'a': must be finite"):
        state.set_job_shifts({"b": 1.0, "a": float("inf")})
    with pytest.raises(ValueError, match="^shifts_ms: the shift of job 'a': expected a number"):
        state.set_job_shifts({"b": 1.0, "a": "7"})  # was taken, and returned as '7'
    with pytest.raises(ValueError, match="^shifts_ms: the shift of 'a-0': expected a number"):
        state.set_shifts({"a-0": "5"})
    assert state.same_as(before)  # nothing written


# ---------------------------------------------------------------------- Score
def test_score_lowcomm_early_return_and_search() -> None:
    state = ClusterState(paper_testbed())
    state.place(pod("a-0", "a", prio=1), 0)  # a30-0: VGG19 alone
    state.place(pod("s-0", "s", pattern=TrafficPattern(422.26, 0.2, 5.0)), 1)
    state.place(pod("f-0", "f", pattern=TrafficPattern(422.26, 0.9, 25.0)), 2)
    policy = MetronomePolicy(MetronomeConfig(exact_scores=True))
    cycle = cycle_for(state, pod("b-0", "b"))
    policy.pre_filter(state, cycle)
    cycle.feasible = np.array([True, True, True, False])
    scores = policy.score(state, cycle)
    # a30-0: 25 + 25 > 25 -> search; two 20 % arcs fit on the circle -> 100
    # a30-1: 5 + 25 = 30 > 25 -> search; perfect as well -> 100 (not EarlyReturn)
    # a30-2: a 90 % arc and a 20 % arc at 25 Gbps: overlap >= 0.1 x 72 = 7.2 bins of
    #        25 Gbps excess -> score = 100 (1 - 7.2 x 25 / (25 x 72)) = 90
    assert scores[0] == 100.0 and scores[1] == 100.0
    assert scores[2] == pytest.approx(90.0, abs=1e-9)
    assert policy.data(cycle).early.tolist()[:3] == [False, False, False]
    # EarlyReturn: 5 Gbps pod next to the 5 Gbps pod fits (10 <= 25)
    cycle = cycle_for(state, pod("q-0", "q", pattern=TrafficPattern(100, 0.5, 5.0)))
    policy.pre_filter(state, cycle)
    cycle.feasible = np.array([True, True, True, True])
    policy.score(state, cycle)
    assert policy.data(cycle).early.tolist() == [False, True, False, True]
    # LowComm: 100 everywhere, no rotation
    cycle = cycle_for(state, pod("l-0", "l", pattern=None))
    cycle.feasible = np.ones(4, dtype=bool)
    assert policy.score(state, cycle).tolist() == [100.0] * 4


def test_node_scores_equal_plan_link_on_random_clusters() -> None:
    """The batch Score kernel gives each node the score plan_link gives that link."""
    policy = MetronomePolicy(MetronomeConfig(exact_scores=True))
    for seed in range(3):
        state, waiting = random_cluster(40, seed)
        cycle = cycle_for(state, waiting)
        policy.pre_filter(state, cycle)
        cycle.feasible = np.ones(40, dtype=bool)
        scores = policy.score(state, cycle)
        for n in range(40):
            pods = [LinkPod(p.name, p.pattern.period_ms, p.pattern.duty_cycle,
                            p.pattern.bandwidth_gbps, p.priority, p.job)
                    for p in state.pods_on(n) if p.pattern is not None]
            if not pods:
                assert scores[n] == 100.0
                continue
            w = waiting.pattern
            pods.append(LinkPod("waiting", w.period_ms, w.duty_cycle, w.bandwidth_gbps,
                                waiting.priority, waiting.job))
            if sum(p.bandwidth_gbps for p in pods) <= 25.0:
                assert scores[n] == 100.0 and policy.data(cycle).early[n]
                continue
            assert scores[n] == pytest.approx(plan_link(pods, 25.0).result.score, abs=1e-9)


# -------------------------------------------------------------- NormalizeScore
def test_normalize_eq19_hand_arithmetic() -> None:
    # Delta = [8, 7, 8, 12]: min 7, max 12 -> 100 - floor(100 (D - 7) / 5)
    #       = [100 - 20, 100, 80, 0]
    np.testing.assert_allclose(normalized_latency(np.array([8.0, 7.0, 8.0, 12.0])),
                               [80, 100, 80, 0])
    # all equal -> 100 - (D - Dmin) = 100
    np.testing.assert_allclose(normalized_latency(np.array([3.0, 3.0])), [100, 100])


def test_normalize_unique_max_wins_and_ties_use_latency() -> None:
    policy = MetronomePolicy()
    state = ClusterState(paper_testbed())
    cycle = cycle_for(state, pod("a-0", "a"))
    policy.data(cycle).latency = np.array([5.0, 1.0, 1.0, 3.0])
    cycle.feasible = np.ones(4, dtype=bool)
    cycle.raw_scores = np.array([100.0, 90.0, 95.0, 50.0])
    out = policy.normalize_score(state, cycle)
    assert int(np.argmax(out)) == 0  # the only 100 wins despite its latency
    cycle.raw_scores = np.array([100.0, 100.0, 100.0, 50.0])
    out = policy.normalize_score(state, cycle)
    # max nodes get Eq. 19: Delta 5 -> 0, 1 -> 100, 1 -> 100; non-max -> 0
    assert out.tolist() == [0.0, 100.0, 100.0, 0.0]
    decision, _ = Scheduler(policy).decide(state, pod("a-0", "a"))
    assert decision.node == 0  # empty cluster, flat latency: first node in order
    # LowComm pods reverse the latency score: 100 - Delta'
    cycle.pod = pod("l-0", "l", pattern=None)
    assert policy.normalize_score(state, cycle).tolist() == [100.0, 0.0, 0.0, 0.0]


def test_lazy_scoring_decides_like_exact_scoring() -> None:
    """Stopping at the first perfect node in NormalizeScore order changes no decision."""
    lazy = Scheduler(MetronomePolicy())
    exact = Scheduler(MetronomePolicy(MetronomeConfig(exact_scores=True)))
    for seed in range(40):
        state, waiting = random_cluster(30, seed, max_pods=3)
        # give the waiting pod a deployed sibling so latency matters
        sibling = Pod("sib", waiting.job, cpu=1, mem_gib=1, gpu=0, pattern=waiting.pattern)
        state.place(sibling, seed % 30)
        d1, _ = lazy.decide(state, waiting)
        d2, _ = exact.decide(state, waiting)
        assert d1.node == d2.node, seed


# -------------------------------------------------------------------- Reserve
def test_reserve_skip_phase_three_and_shifts() -> None:
    state = ClusterState(paper_testbed())
    sched = Scheduler(MetronomePolicy())
    r1 = sched.schedule(state, pod("a-0", "a", prio=1)).reserve
    assert r1.skip_phase_three and r1.shifts_ms == {}  # empty node: EarlyReturn
    r2 = sched.schedule(state, pod("b-0", "b")).reserve
    # a30-0 (first in order) holds a and b: perfect, but only 2 pods -> skip
    assert r2.node == 0 and r2.skip_phase_three
    # 'first' search: b's perfect rotations 15..57 (b's 14.4-bin arc must clear a's
    # bins 0..14.4) -> middle 36 -> shift = 36 / 72 x 422.26 = 211.13 ms
    assert r2.rotations == {"a": 0, "b": 36}
    assert r2.shifts_ms["b-0"] == pytest.approx(36 / 72 * 422.26)
    r3 = sched.schedule(state, pod("c-0", "c")).reserve
    # three pods, max score 100, no EarlyReturn -> the controller must run phase 3
    assert r3.node == 0 and not r3.skip_phase_three
    assert r3.link_pods == ("a-0", "b-0", "c-0")


# ------------------------------------------------------------------------ gangs
def test_rejected_gang_leaves_state_exactly_as_before() -> None:
    state = ClusterState(paper_testbed())
    sched = Scheduler(make_policy("metronome"))
    assert sched.schedule_gang(state, [pod(f"a-{i}", "a", gpu=2) for i in range(3)]).status \
        is Status.SUCCESS
    before = state.copy()
    # 4 pods x 2 GPUs: only 6 GPUs left on A30 nodes (+1 on t4, whose link is too slow)
    result = sched.schedule_gang(state, [pod(f"b-{i}", "b", gpu=2) for i in range(4)])
    assert result.status is Status.UNSCHEDULABLE
    assert result.message.startswith("gang rejected at b-")
    assert state.same_as(before)


def test_workload_is_all_or_nothing() -> None:
    state = ClusterState(paper_testbed())
    sched = Scheduler(make_policy("metronome"))
    jobs = [[pod("a-0", "a", gpu=4)], [pod("b-0", "b", gpu=4)],
            [pod("c-0", "c", gpu=4)], [pod("d-0", "d", gpu=4)]]
    before = state.copy()
    assert sched.schedule_workload(state, jobs).status is Status.UNSCHEDULABLE
    assert state.same_as(before)
    assert sched.schedule_workload(state, jobs[:3]).status is Status.SUCCESS
    assert len(state.placed) == 3


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
def test_no_policy_ever_overcommits(policy_name: str) -> None:
    rng = np.random.default_rng(11)
    for trial in range(6):
        state = ClusterState(Cluster([Node(f"n{i}", float(rng.integers(4, 33)),
                                           float(rng.integers(8, 65)),
                                           float(rng.integers(0, 5)), 25.0)
                                      for i in range(int(rng.integers(2, 7)))]))
        sched = Scheduler(make_policy(policy_name))
        for j in range(12):
            before = state.copy()
            prio = int(rng.integers(0, 2))
            gang = [Pod(f"t{trial}j{j}p{i}", f"t{trial}j{j}", cpu=float(rng.integers(1, 9)),
                        mem_gib=float(rng.integers(1, 17)), gpu=float(rng.integers(0, 3)),
                        pattern=None if rng.random() < 0.2 else TrafficPattern(
                            float(rng.choice([100.0, 200.0, 422.26])),
                            float(rng.uniform(0.05, 0.5)), float(rng.uniform(5, 25))),
                        priority=prio)
                    for i in range(int(rng.integers(1, 4)))]
            result = sched.schedule_gang(state, gang)
            assert np.all(state.used_cpu <= state.cluster.cpu + 1e-9)
            assert np.all(state.used_mem <= state.cluster.mem_gib + 1e-9)
            assert np.all(state.used_gpu <= state.cluster.gpu + 1e-9)
            if result.status is Status.SUCCESS:
                assert all(p.name in state.placed for p in gang)
            else:
                assert state.same_as(before)
        if policy_name.startswith("metronome"):
            assert not _rejects_loop(state, None)


# -------------------------------------------------------- the paper's snapshots
SNAPSHOTS = {
    # Table IV; periods from Table VI (high-priority / uncontended time per iteration),
    # duty cycles from the Muri profiles (2-GPU rows) as in tdmcore/data/snapshots.json.
    "S1": [("vgg19-a", TrafficPattern(422.26, 0.2, 25.0), 1),
           ("vgg19-b", TrafficPattern(422.26, 0.2, 25.0), 0),
           ("vgg19-c", TrafficPattern(422.26, 0.2, 25.0), 0)],
    "S2": [("vgg16", TrafficPattern(87.92, 40 / 191, 25.0), 1),
           ("vgg19", TrafficPattern(98.68, 41 / 205, 25.0), 0)],
    "S4": [("bert-a", TrafficPattern(533.53, 18 / 195, 25.0), 1),
           ("bert-b", TrafficPattern(533.53, 18 / 195, 25.0), 0)],
    # S0: GPT-2 (Muri gpt2 iteration 433 ms; comm from its 498 MB of gradients at
    # 25 Gbps: 159 ms -> 0.37) and GoogLeNet (period not in the shared data: 127 ms is
    # chosen so that no multiple within G_T exists and idle would exceed E_T).
    "S0": [("gpt2", TrafficPattern(433.0, 0.37, 25.0), 1),
           ("googlenet", TrafficPattern(127.0, 0.3, 10.0), 0)],
}


def _place_snapshot(name: str, gang_size: int | None = None
                    ) -> tuple[ClusterState, dict[str, object]]:
    state = ClusterState(paper_testbed())
    sched = Scheduler(make_policy("metronome"))
    decisions = {}
    for job, pattern, prio in SNAPSHOTS[name]:
        gang = [Pod(f"{job}-{i}", job, cpu=5, mem_gib=5, gpu=1, pattern=pattern,
                    priority=prio, gang_size=gang_size) for i in range(2)]
        result = sched.schedule_gang(state, gang)
        assert result.status is Status.SUCCESS, result.message
        decisions.update({d.pod: d for d in result.decisions})
    assert not _rejects_loop(state, None)
    return state, decisions


def test_snapshot_s1_gangs_are_placed_compactly() -> None:
    # Gang size unknown: each job keeps one row (one pod's demand) on every link it
    # crosses.  a-0 -> a30-0 (empty, node order); a-1: a30-0 already carries a's row,
    # so a-1 adds nothing there -> EarlyReturn 100; every empty node scores 100 too,
    # and the latency tie-break (tau = 1 to a-0's node) keeps a-1 beside a-0.
    # b-0 joins a30-0 (two 20 % arcs interleave: 100), b-1 follows it (adds no row).
    # c-0: a30-0 is full (4 GPUs) -> a30-1; c-1 beside it.
    state, decisions = _place_snapshot("S1")
    where = {p: state.cluster.nodes[state.node_of(p)].name for p in decisions}
    assert where == {"vgg19-a-0": "a30-0", "vgg19-a-1": "a30-0", "vgg19-b-0": "a30-0",
                     "vgg19-b-1": "a30-0", "vgg19-c-0": "a30-1", "vgg19-c-1": "a30-1"}
    assert decisions["vgg19-a-1"].raw_scores[0] == 100.0
    assert decisions["vgg19-a-1"].reserve.skip_phase_three  # EarlyReturn: no rotation
    # the link of a30-0 carries one row per job: 2 x 25 Gbps, not 4 x 25
    assert state.link_rows[0] == ["vgg19-a-0", "vgg19-b-0"]
    assert Snapshot.of(state).sum_bw[0] == 50.0


def test_snapshot_s1_complete_gangs_on_one_node_use_no_link() -> None:
    # Gang size known (as the simulator gives it): a job whose two pods both sit on
    # one node is LowComm there (docs/traffic-circle.md, revised): no row on any link.
    state, decisions = _place_snapshot("S1", gang_size=2)
    nodes = {job: {state.node_of(f"{job}-{i}") for i in range(2)}
             for job in ("vgg19-a", "vgg19-b", "vgg19-c")}
    assert all(len(n) == 1 for n in nodes.values())  # every job on one node
    assert all(rows == [] for rows in state.link_rows)
    assert not Snapshot.of(state).sum_bw.any()


def test_snapshot_s4_two_bert_share_perfectly() -> None:
    state, decisions = _place_snapshot("S4")
    shared = [n for n in range(4) if len(state.link_rows[n]) > 1]
    for n in shared:  # wherever they share a link, they do so without contention
        assert plan_link(link_pods(state, n), 25.0).result.perfect


def test_snapshot_s0_incompatible_jobs_kept_apart() -> None:
    # GPT-2 and GoogLeNet cannot be unified (docs/traffic-circle.md step 3): no perfect score where
    # they meet, so GoogLeNet goes to empty links while there are any.
    state, decisions = _place_snapshot("S0")
    gpt2 = {state.node_of(f"gpt2-{i}") for i in range(2)}
    goog = {state.node_of(f"googlenet-{i}") for i in range(2)}
    assert not gpt2 & goog
    assert decisions["googlenet-0"].raw_scores[0] < 100.0  # next to GPT-2: not perfect


def test_snapshot_s2_incompatible_pair_apart_while_possible() -> None:
    state, decisions = _place_snapshot("S2")
    # 87.92 vs 98.68 ms do not unify (mean 93.3 is 5.4 ms away; idle of 10.8 ms
    # exceeds 10 % of 98.68... for the high-priority 87.92 the idle would be needed on
    # the low one with the longer period) -> vgg19 avoids vgg16's node (a30-0, where
    # both vgg16 pods went) and takes the first empty one.
    assert {state.node_of(f"vgg16-{i}") for i in range(2)} == {0}
    assert {state.node_of(f"vgg19-{i}") for i in range(2)} == {1}
    assert decisions["vgg19-0"].raw_scores[0] < 100.0


def test_default_scheduler_ignores_the_network() -> None:
    # The default scheduler spreads by free resources and can put a 25 Gbps pod behind
    # the T4's 10 Gbps link; Metronome never does (Eq. 14).
    for name, expect_t4 in (("default", True), ("metronome", False)):
        state = ClusterState(paper_testbed())
        sched = Scheduler(make_policy(name))
        for j in range(4):
            sched.schedule_gang(state, [pod(f"j{j}-0", f"j{j}")])
        used_t4 = bool(state.node_pods[3])
        assert used_t4 == expect_t4, name


def test_exclusive_rejects_sharing() -> None:
    state = ClusterState(paper_testbed())
    sched = Scheduler(make_policy("exclusive"))
    assert sched.schedule_gang(state, [pod(f"a-{i}", "a") for i in range(3)]).status \
        is Status.SUCCESS
    result = sched.schedule_gang(state, [pod("b-0", "b")])
    assert result.status is Status.UNSCHEDULABLE
    assert "Insufficient link bandwidth" in result.message


def test_diktyo_packs_dependent_pods_close() -> None:
    # two racks: nodes 0,1 (tau 2 inside) and 2,3; cross-rack tau 9
    tau = np.array([[1, 2, 9, 9], [2, 1, 9, 9], [9, 9, 1, 2], [9, 9, 2, 1]], float)
    cluster = Cluster([Node(f"n{i}", 8, 64, 2, 25) for i in range(4)], tau)
    state = ClusterState(cluster)
    state.place(pod("a-0", "a", gpu=2), 2)
    decision = Scheduler(make_policy("diktyo")).schedule(state, pod("a-1", "a"))
    assert decision.node_name == "n3"  # same rack as a-0 (node 2 is full)


def test_diktyo_first_pod_has_no_network_preference() -> None:
    # NetworkOverhead: a pod with no scheduled dependency has no network cost, so
    # the resource scores alone decide -> the same node as the default scheduler,
    # even when that node has the worst latency to everyone (the paper's snapshot 4:
    # Diktyo "fails to detect the dependencies of the job's first pod").
    tau = np.array([[1, 9, 9], [9, 1, 2], [9, 2, 1]], float)
    cluster = Cluster([Node(f"n{i}", 8, 64, 2, 25) for i in range(3)], tau)
    state = ClusterState(cluster)
    first = pod("a-0", "a")
    diktyo = Scheduler(make_policy("diktyo")).decide(state, first)[0]
    default = Scheduler(make_policy("default")).decide(state, first)[0]
    assert diktyo.node == default.node == 0  # all equal: first node in order
    assert np.ptp(diktyo.scores) == 0.0
    # Metronome's PreFilter falls back to the mean latency instead (docs/scheduler.md) and
    # keeps off node 0 (mean tau 19/3 against 4 and 4)
    assert Scheduler(make_policy("metronome")).decide(state, first)[0].node == 1


def test_diktyo_scores_balanced_allocation_not_least_allocated() -> None:
    # scheduler-plugins' example configuration for NetworkOverhead disables
    # NodeResourcesFit's (least-allocated) score: a first pod (no network cost
    # anywhere) on a half-used but balanced node 0 and an empty node 1 ties under
    # Diktyo (first node wins), while the default scheduler prefers the empty node.
    tau = np.array([[1, 2], [2, 1]], float)
    cluster = Cluster([Node(f"n{i}", 8, 64, 2, 25) for i in range(2)], tau)
    state = ClusterState(cluster)
    state.place(Pod("x-0", "x", cpu=4, mem_gib=32, gpu=0), 0)  # half of CPU and memory
    first = Pod("a-0", "a", cpu=0, mem_gib=0, gpu=1, pattern=VGG19)
    diktyo = Scheduler(make_policy("diktyo")).decide(state, first)[0]
    default = Scheduler(make_policy("default")).decide(state, first)[0]
    assert default.node == 1
    assert diktyo.node == 0 and np.ptp(diktyo.scores) == 0.0


def test_every_pair_of_policies_shares_the_framework() -> None:
    state = ClusterState(paper_testbed())
    for name, other in itertools.combinations(sorted(POLICIES), 2):
        for n in (name, other):
            d, _ = Scheduler(make_policy(n)).decide(state, pod("z-0", "z"))
            assert d.status is Status.SUCCESS


def test_make_policy_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="^name: unknown policy"):
        make_policy("random")


# ------------------------------------------- regressions from the spec review
def test_a_node_below_the_maximum_never_wins() -> None:
    # Nodes 1 and 2 tie at the maximum (80) and both sit at Delta_max, so Eq. 19 gives
    # them 0 -- the same as the non-maximal node 0 (60).  Node 0 must not win.
    tau = np.full((4, 4), 2.0)
    np.fill_diagonal(tau, 1.0)
    nodes = [Node(f"n{i}", 4, 4, 0, 10) for i in range(3)] + [Node("n3", 0.5, 4, 0, 10)]
    state = ClusterState(Cluster(nodes, tau))
    state.place(Pod("x0", "X", cpu=0, pattern=TrafficPattern(100, 0.1, 1)), 3)
    for n, (job, duty) in enumerate((("A", 0.8), ("B", 0.6), ("C", 0.6))):
        state.place(Pod(job.lower(), job, cpu=1, pattern=TrafficPattern(100, duty, 10)), n)
    for exact in (False, True):
        sched = Scheduler(MetronomePolicy(MetronomeConfig(exact_scores=exact)))
        decision = sched.decide(state, Pod("x1", "X", cpu=1,
                                           pattern=TrafficPattern(100, 0.6, 10)))[0]
        assert decision.raw_scores[1] == decision.raw_scores[2] > decision.raw_scores[0]
        assert decision.node == 1, exact


def test_decide_rejects_another_states_snapshot_and_bad_arguments() -> None:
    full = ClusterState(paper_testbed())
    full.place(pod("big", "big", gpu=4), 0)
    empty = ClusterState(paper_testbed())
    sched = Scheduler(make_policy("metronome"))
    snap_of_empty = Snapshot.of(empty)
    decision, _ = sched.decide(full, pod("a-0", "a", gpu=1), snap_of_empty)
    assert decision.node != 0  # node 0 is full in *this* state
    with pytest.raises(ValueError, match="^pod:"):
        sched.schedule(full, "a-0")
    with pytest.raises(ValueError, match="^node:"):
        full.place(pod("a-1", "a"), True)
    with pytest.raises(ValueError, match="^node:"):
        full.place(pod("a-1", "a"), 1.0)
    with pytest.raises(ValueError, match="^shifts_ms:"):
        full.set_shifts({"big": float("nan")})


def test_job_pods_must_share_priority_before_anything_is_reserved() -> None:
    state = ClusterState(paper_testbed())
    sched = Scheduler(make_policy("metronome"))
    sched.schedule(state, pod("a-0", "a", prio=1))
    before = state.copy()
    decision = sched.schedule(state, pod("a-1", "a", prio=0))
    assert decision.status is Status.ERROR and decision.message.startswith("priority:")
    assert state.same_as(before)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"jobs": "abc"}, "jobs"), ({"jobs": ("a", 3)}, "jobs"),
     ({"dependencies": (("a",),)}, "dependencies"),
     ({"dependencies": (("a", "z"),)}, "dependencies")],
)
def test_workload_validation(kwargs, name) -> None:
    with pytest.raises(ValueError, match=f"^{name}:"):
        Workload(**{"name": "w", "jobs": ("a", "b"), **kwargs})
