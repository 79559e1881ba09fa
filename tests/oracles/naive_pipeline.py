"""The naive peer of one pod's Metronome decision (docs/benchmarks.md).

What a first implementation looks like: a Python loop over nodes for PreFilter
and Filter, a fresh union-find for the loop check of every node (spec §6,
revised 2026-11-28: cycles stay when one rotation vector is perfect on every link
of them, tried by brute force), and for every
feasible node the full single-link computation (:func:`tdmcore.metronome.link.plan_link`:
unify, discretize, search with exact scores), then NormalizeScore in Python.  Its
decision must equal tdmcore's; the suites check that before timing.

It is independent of the kernels in PreFilter, Filter, the link rows, EarlyReturn and
NormalizeScore; a link's score is :func:`plan_link`'s, whose composition is checked
on its own against the oracles' pieces (unify, discretize, search:
``tests/metronome/test_link_oracle.py``).
"""

from __future__ import annotations

import math

import numpy as np

from tdmcore.metronome.link import LinkPod, plan_link
from tdmcore.model import ClusterState, Pod
from tests.oracles import naive


def _link_rows(state: ClusterState, n: int, extra: tuple[Pod, int] | None) -> list[Pod]:
    """The rows of node n's link, straight from the rule in
    docs/traffic-circle.md: one pod per job with traffic crossing the link (its first pod
    there), none for a job whose ``gang_size`` pods are all placed on one node;
    ``extra`` is a pod assumed placed on ``extra[1]`` after every placed pod."""
    placed = sorted(state.placed.values(), key=lambda e: e.order)
    where = [(e.pod, e.node) for e in placed]
    if extra is not None:
        where.append(extra)
    rows: list[Pod] = []
    for pod, node in where:
        if node != n or pod.pattern is None or any(r.job == pod.job for r in rows):
            continue
        mates = [m for q, m in where if q.job == pod.job]
        local = pod.gang_size is not None and len(mates) == pod.gang_size \
            and set(mates) == {n}
        if not local:
            rows.append(pod)
    return rows


def _contended_links(state: ClusterState, extra: tuple[Pod, int] | None
                     ) -> dict[int, frozenset]:
    """Every contended link (its rows sum above its capacity) -> the set of jobs on it."""
    out = {}
    for n in range(len(state.cluster)):
        pods = _link_rows(state, n, extra)
        if sum(p.bandwidth_gbps for p in pods) > state.cluster.link_gbps[n]:
            out[n] = frozenset(p.job for p in pods)
    return out


def _cycle_blocks(state: ClusterState, extra: tuple[Pod, int] | None
                  ) -> list[tuple[set, set]]:
    """The affinity graph's cycles grouped into blocks: every simple cycle found by
    walking all paths (slow on purpose: tiny graphs), cycles that share an edge in
    one group.  Returns (jobs, links) per group."""
    adj: dict = {}
    for n, jobs in _contended_links(state, extra).items():
        for job in jobs:
            adj.setdefault(("job", job), set()).add(("link", n))
            adj.setdefault(("link", n), set()).add(("job", job))
    return _blocks_of(adj)


def _blocks_of(adj: dict) -> list[tuple[set, set]]:
    """:func:`_cycle_blocks` of a graph given as vertex -> neighbours."""
    order = sorted(adj, key=repr)
    groups: list[set] = []  # edge sets
    for i, start in enumerate(order):
        stack = [[start]]
        while stack:
            path = stack.pop()
            for w in adj[path[-1]]:
                if w == start and len(path) > 2:
                    cycle = {frozenset(e) for e in zip(path, path[1:] + [start], strict=True)}
                    joined = [g for g in groups if g & cycle]
                    for g in joined:
                        groups.remove(g)
                        cycle |= g
                    groups.append(cycle)
                elif w not in path and order.index(w) > i:
                    stack.append(path + [w])
    out = []
    for edges in groups:
        vertices = {v for e in edges for v in e}
        out.append(({v[1] for v in vertices if v[0] == "job"},
                    {v[1] for v in vertices if v[0] == "link"}))
    return out


def _plan(state: ClusterState, n: int, extra: tuple[Pod, int] | None, bins: int):
    pods = _link_rows(state, n, extra)
    link = [LinkPod(p.name, p.pattern.period_ms, p.pattern.duty_cycle,
                    p.pattern.bandwidth_gbps, p.priority, p.job) for p in pods]
    return plan_link(link, float(state.cluster.link_gbps[n]), bins=bins)


def _common_perfect_vector(state: ClusterState, jobs: set, nodes: set,
                           extra: tuple[Pod, int] | None, bins: int = 72) -> bool:
    """Whether the cycles of a block (running through ``jobs``, on the links
    ``nodes``) keep consistent offsets: every link carries every one of ``jobs``
    (else the links carry different sets: the paper's loop), the links unify their
    jobs alike (one base period; each job one multiple and one idle), and one
    rotation per job on the links (a job hanging off one link included) is perfect
    on every link: every vector, jobs ranked by priority then deploy order (the
    first at 0, each other within ``ceil(N / multiple)``), tried on every link by
    brute force, a link's demand taken with a zero row for a job it lacks."""
    plans = [_plan(state, n, extra, bins) for n in sorted(nodes)]
    if not all(jobs <= set(plan.jobs) for plan in plans):
        return False
    placed = sorted(state.placed.values(), key=lambda e: e.order)
    where = [e.pod for e in placed] + ([extra[0]] if extra is not None else [])

    def rank(job):
        first = next(i for i, p in enumerate(where) if p.job == job)
        return (-where[first].priority, first)

    ranked = sorted({j for plan in plans for j in plan.jobs}, key=rank)
    mult, idle = {}, {}
    for plan in plans:
        if not plan.base.compatible or not math.isclose(
                plan.base.period_ms, plans[0].base.period_ms, rel_tol=1e-9):
            return False
        for p, m, i in zip(plan.pods, plan.base.multiples, plan.base.idle_ms, strict=True):
            if mult.setdefault(p.job_name, int(m)) != int(m) \
                    or abs(idle.setdefault(p.job_name, float(i)) - float(i)) > 1e-9:
                return False
    bins = plans[0].bins
    demands = []
    for plan in plans:
        rows = np.zeros((len(ranked), bins))
        for row, job in zip(plan.demand, plan.jobs, strict=True):
            rows[ranked.index(job)] = row
        demands.append(rows)
    limits = [1] + [math.ceil(bins / mult[j]) for j in ranked[1:]]
    return naive.joint_search(demands, [p.capacity_gbps for p in plans], limits) is not None


def _rejects_loop(state: ClusterState, extra: tuple[Pod, int] | None,
                  bins: int = 72) -> bool:
    """The loop rule of the Filter, from its statement (spec §6, revised
    2026-11-28, read over blocks as tdmcore.metronome.joint's [decision] says):
    after the placement ``extra``, cycles that share an edge constrain the same
    offsets, so each group of them is accepted only when all its links carry the
    jobs its cycles run through and one rotation vector is perfect on every link."""
    return any(not _common_perfect_vector(state, jobs, links, extra, bins)
               for jobs, links in _cycle_blocks(state, extra))


def decide(state: ClusterState, pod: Pod) -> int | None:
    cluster = state.cluster
    n_nodes = len(cluster)
    # PreFilter
    deps = [p.node for p in state.job_pods(pod.job)]
    for other in cluster.dependent_jobs(pod.workload, pod.job):
        deps += [p.node for p in state.job_pods(other)]
    if pod.low_comm or not deps:
        delta = [sum(cluster.latency[n]) / n_nodes for n in range(n_nodes)]
    else:
        delta = [sum(cluster.latency[n][m] for m in deps) for n in range(n_nodes)]
    # Filter
    feasible = []
    for n in range(n_nodes):
        if (state.cluster.cpu[n] - state.used_cpu[n] + 1e-9 < pod.cpu
                or state.cluster.mem_gib[n] - state.used_mem[n] + 1e-9 < pod.mem_gib
                or state.cluster.gpu[n] - state.used_gpu[n] + 1e-9 < pod.gpu
                or cluster.link_gbps[n] < pod.bandwidth_gbps):
            continue
        if not pod.low_comm and _rejects_loop(state, (pod, n)):
            continue
        feasible.append(n)
    if not feasible:
        return None
    # Score
    scores = {}
    for n in feasible:
        before = _link_rows(state, n, None)
        after = _link_rows(state, n, (pod, n))
        total = sum(p.bandwidth_gbps for p in after)
        # the pod adds no row (its job is on the link already, or it completes its
        # job on n): the link is as it was -> EarlyReturn
        adds = any(p.name == pod.name for p in after)
        if pod.low_comm or not state.pods_on(n) or not adds \
                or total <= cluster.link_gbps[n]:
            scores[n] = 100.0
            continue
        link = [LinkPod(p.name, p.pattern.period_ms, p.pattern.duty_cycle,
                        p.pattern.bandwidth_gbps, p.priority, p.job) for p in before]
        w = pod.pattern
        link.append(LinkPod(pod.name, w.period_ms, w.duty_cycle, w.bandwidth_gbps,
                            pod.priority, pod.job))
        scores[n] = plan_link(link, float(cluster.link_gbps[n])).result.score
    # NormalizeScore
    best = max(scores.values())
    at_max = [n for n in feasible if math.isclose(scores[n], best, abs_tol=1e-9, rel_tol=0)]
    return _latency_tie_break(at_max, delta, pod)


def decide_per_node(state: ClusterState, pod: Pod, bins: int = 72) -> int | None:
    """The per-node loop peer at scale (1,000-10,000 nodes), where :func:`decide`
    cannot go: linear in the nodes, but each step in Python, node by node.

    PreFilter sums latencies per node; Filter checks resources, Eq. (14) and the
    affinity-graph loop against a union-find of the contended links built once
    (a node that closes a cycle stays when the cycles through its link have one
    common perfect vector, found by brute force; spec §6, revised 2026-11-28);
    Score runs the full single-link computation (:func:`tdmcore.metronome.link.plan_link`)
    on *every* feasible node where the pod adds contention, where tdmcore stops at
    the first node that scores 100; NormalizeScore in Python.  The link rows are
    the state's own (``link_rows``, ``waiting_link_gbps``).  Its decision must
    equal tdmcore's; the benchmark checks that before timing.
    """
    cluster = state.cluster
    n_nodes = len(cluster)
    # PreFilter
    deps = [p.node for p in state.job_pods(pod.job)]
    for other in sorted(cluster.dependent_jobs(pod.workload, pod.job)):
        deps += [p.node for p in state.job_pods(other)]
    latency = cluster.latency
    if pod.low_comm or not deps:
        delta = [float(cluster.mean_latency[n]) for n in range(n_nodes)]
    else:
        delta = []
        for n in range(n_nodes):
            row = latency[n]
            total = sum(float(row[m]) for m in deps)
            delta.append(total if total != 0.0 else float(cluster.mean_latency[n]))
    # the links as they are: rows, summed bandwidth, contention
    rows_of = [[state.placed[name].pod for name in state.link_rows[n]] for n in range(n_nodes)]
    load = [sum(p.bandwidth_gbps for p in rows) for rows in rows_of]
    cap = [float(x) for x in cluster.link_gbps]
    parent: dict = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for n in range(n_nodes):
        if load[n] > cap[n]:
            for p in rows_of[n]:
                parent[find(("job", p.job))] = find(("link", n))
    adds = state.waiting_link_gbps(pod) > 0.0
    w_bw = pod.bandwidth_gbps
    # Filter
    feasible = []
    for n in range(n_nodes):
        if (cluster.cpu[n] - state.used_cpu[n] + 1e-9 < pod.cpu
                or cluster.mem_gib[n] - state.used_mem[n] + 1e-9 < pod.mem_gib
                or cluster.gpu[n] - state.used_gpu[n] + 1e-9 < pod.gpu
                or cap[n] < w_bw):
            continue
        rows = rows_of[n]
        if not pod.low_comm and adds[n] and rows and load[n] + w_bw > cap[n]:
            jobs = {p.job for p in rows}
            if load[n] > cap[n]:
                closes = pod.job not in jobs and find(("job", pod.job)) == find(("link", n))
            else:  # the link becomes contended: an edge from each of its jobs
                roots = [find(("job", j)) for j in sorted(jobs | {pod.job})]
                closes = len(set(roots)) < len(roots)
            # a new cycle stays when its offsets agree (spec §6, revised 2026-11-28)
            if closes and not _agree_through(state, pod, n, rows_of, load, cap, bins):
                continue
        feasible.append(n)
    if not feasible:
        return None
    # Score
    scores = {}
    for n in feasible:
        rows = rows_of[n]
        if pod.low_comm or not state.node_pods[n] or not adds[n] or load[n] + w_bw <= cap[n]:
            scores[n] = 100.0
            continue
        link = [LinkPod(p.name, p.pattern.period_ms, p.pattern.duty_cycle,
                        p.pattern.bandwidth_gbps, p.priority, p.job) for p in rows]
        w = pod.pattern
        link.append(LinkPod(pod.name, w.period_ms, w.duty_cycle, w.bandwidth_gbps,
                            pod.priority, pod.job))
        scores[n] = plan_link(link, cap[n], bins=bins).result.score
    # NormalizeScore
    best = max(scores.values())
    at_max = [n for n in feasible if scores[n] >= best - 1e-7 / bins]
    return _latency_tie_break(at_max, delta, pod)


def _agree_through(state, pod, n, rows_of, load, cap, bins) -> bool:
    """:func:`_rejects_loop`'s statement for the cycles through node n's link once
    ``pod`` is placed there, in n's connected component only (at scale)."""
    adj: dict = {}

    def edge(job, m):
        adj.setdefault(("job", job), set()).add(("link", m))
        adj.setdefault(("link", m), set()).add(("job", job))

    for m, rows in enumerate(rows_of):
        if load[m] > cap[m]:
            for p in rows:
                edge(p.job, m)
    for p in [*rows_of[n], pod]:
        edge(p.job, n)
    seen, todo = {("link", n)}, [("link", n)]
    while todo:
        for w in adj[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    near = {v: adj[v] & seen for v in seen}
    return all(_common_perfect_vector(state, jobs, links, (pod, n), bins)
               for jobs, links in _blocks_of(near) if n in links)


def _latency_tie_break(at_max, delta, pod):
    """NormalizeScore among the nodes tied at the best score: the latency score
    scaled to 0-100 over every node's ``delta``, reversed for a LowComm pod;
    the highest wins, then the lowest node index."""
    if len(at_max) == 1:
        return at_max[0]
    lo, hi = min(delta), max(delta)

    def norm(d):
        return 100 - math.floor(100 * (d - lo) / (hi - lo)) if hi != lo else 100 - (d - lo)

    values = {n: (100 - norm(delta[n])) if pod.low_comm else norm(delta[n]) for n in at_max}
    top = max(values.values())
    return min(n for n in at_max if values[n] == top)
