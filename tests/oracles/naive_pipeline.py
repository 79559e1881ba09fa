"""The naive peer of one pod's Metronome decision (docs/benchmarks.md).

What a first implementation looks like: a Python loop over nodes for PreFilter
and Filter, a fresh union-find for the loop check of every node, and for every
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

from tdmcore.metronome.link import LinkPod, plan_link
from tdmcore.model import ClusterState, Pod


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


def _has_cycle(state: ClusterState, extra: tuple[Pod, int] | None) -> bool:
    parent: dict = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for n in range(len(state.cluster)):
        pods = _link_rows(state, n, extra)
        if sum(p.bandwidth_gbps for p in pods) <= state.cluster.link_gbps[n]:
            continue
        for job in sorted({p.job for p in pods}):
            a, b = find(("job", job)), find(("link", n))
            if a == b:
                return True
            parent[a] = b
    return False


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
        if not pod.low_comm and _has_cycle(state, (pod, n)):
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
    affinity-graph loop against a union-find of the contended links built once;
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
                if pod.job not in jobs and find(("job", pod.job)) == find(("link", n)):
                    continue  # the new edge closes a cycle
            else:  # the link becomes contended: an edge from each of its jobs
                roots = [find(("job", j)) for j in sorted(jobs | {pod.job})]
                if len(set(roots)) < len(roots):
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
