"""The naive peer of one pod's Metronome decision (spec/performance.md).

What a first implementation looks like: a Python loop over nodes for PreFilter
and Filter, a fresh union-find for the loop check of every node, and for every
feasible node the full single-link computation (:func:`tdmcore.link.plan_link`:
unify, discretize, search with exact scores), then NormalizeScore in Python.  Its
decision must equal tdmcore's; the suites check that before timing.
"""

from __future__ import annotations

import math

from tdmcore.link import LinkPod, plan_link
from tdmcore.model import ClusterState, Pod


def _has_cycle(state: ClusterState, extra: tuple[Pod, int] | None) -> bool:
    parent: dict = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for n in range(len(state.cluster)):
        pods = [p for p in state.pods_on(n) if p.pattern is not None]
        if extra is not None and extra[1] == n:
            pods.append(extra[0])
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
        pods = [p for p in state.pods_on(n) if p.pattern is not None]
        total = sum(p.bandwidth_gbps for p in pods) + pod.bandwidth_gbps
        if pod.low_comm or not state.pods_on(n) or total <= cluster.link_gbps[n]:
            scores[n] = 100.0
            continue
        link = [LinkPod(p.name, p.pattern.period_ms, p.pattern.duty_cycle,
                        p.pattern.bandwidth_gbps, p.priority, p.job) for p in pods]
        w = pod.pattern
        link.append(LinkPod(pod.name, w.period_ms, w.duty_cycle, w.bandwidth_gbps,
                            pod.priority, pod.job))
        scores[n] = plan_link(link, float(cluster.link_gbps[n])).result.score
    # NormalizeScore
    best = max(scores.values())
    at_max = [n for n in feasible if math.isclose(scores[n], best, abs_tol=1e-9, rel_tol=0)]
    if len(at_max) == 1:
        return at_max[0]
    lo, hi = min(delta), max(delta)
    def norm(d):
        return 100 - math.floor(100 * (d - lo) / (hi - lo)) if hi != lo else 100 - (d - lo)
    values = {n: (100 - norm(delta[n])) if pod.low_comm else norm(delta[n]) for n in at_max}
    top = max(values.values())
    return min(n for n in at_max if values[n] == top)
