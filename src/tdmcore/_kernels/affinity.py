"""Affinity-graph loop detection for the Filter phase (Metronome paper §III-B).

The affinity graph is bipartite: jobs on one side, host links on the other, an
edge when a job has a pod on a contended link (its summed bandwidth exceeds the
capacity, so rotations there constrain the job's offset).  This kernel finds the
placements that would close a new cycle: with a cycle, the global offsets of
§III-C may not be assignable consistently.  **[spec §6, revised 2026-11-28]** Only
a cycle whose offsets cannot be made consistent is refused: the Filter keeps a
flagged placement when one rotation vector is perfect on every link of the cycles
it closes (:mod:`tdmcore.metronome.joint`); the kernel only finds the candidates.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit


@jit
def loop_filter_kernel(
    candidates: np.ndarray, node_ptr: np.ndarray, job: np.ndarray, sum_bw: np.ndarray,
    capacity: np.ndarray, contended: np.ndarray, comp_job: np.ndarray, comp_link: np.ndarray,
    w_job: int, w_bw: float, w_adds: np.ndarray, out_ok: np.ndarray,
) -> None:
    """``out_ok[n] = False`` where placing the waiting pod on node n closes a new cycle
    (whatever cycles the graph has already).

    ``comp_job`` / ``comp_link`` are connected-component labels of the current
    graph (-1: a vertex without edges, a component of its own); ``w_job`` may be
    past the end of ``comp_job`` (a job with nothing placed yet).  ``w_adds[n]``:
    whether the waiting pod adds a row to n's link (its job is not there yet and
    does not become local there).
    """
    w_comp = comp_job[w_job] if w_job < comp_job.shape[0] else -1
    for c in range(candidates.shape[0]):
        n = candidates[c]
        out_ok[n] = True
        lo = node_ptr[n]
        hi = node_ptr[n + 1]
        if not w_adds[n] or sum_bw[n] + w_bw <= capacity[n] or hi == lo:
            continue  # no new row, or no contention after placement: no new edge
        on_node = False
        for i in range(lo, hi):
            if job[i] == w_job:
                on_node = True
                break
        if contended[n]:
            if on_node:
                continue  # the edge (job, link) exists already
            # One new edge: a cycle iff the job already reaches this link.
            if w_comp >= 0 and w_comp == comp_link[n]:
                out_ok[n] = False
            continue
        # The link becomes contended: edges from every job on it, waiting job included.
        # A cycle iff two distinct jobs among them are already connected.
        for i in range(lo, hi + 1):
            ji = w_job if i == hi else job[i]
            ci = w_comp if i == hi else comp_job[ji]
            if ci < 0:
                continue
            for j in range(i + 1, hi + 1):
                jj = w_job if j == hi else job[j]
                if jj == ji:
                    continue
                cj = w_comp if j == hi else comp_job[jj]
                if cj == ci:
                    out_ok[n] = False
                    break
            if not out_ok[n]:
                break


@jit
def components_kernel(edges: np.ndarray, n_jobs: int, n_links: int, comp_job: np.ndarray,
                      comp_link: np.ndarray) -> None:
    """Connected-component labels of the bipartite graph of ``edges`` (``(E, 2)``
    ``(job, link)`` pairs): ``comp_job[j]`` and ``comp_link[n]``, -1 for a vertex
    without edges.

    Vertices are numbered jobs first (``0..n_jobs-1``), then links; the components,
    isolated vertices included, are labelled 0, 1, ... in the order of their
    smallest vertex (the labels ``scipy.sparse.csgraph.connected_components`` gives
    an undirected graph, which the tests compare against).  Union-find with path
    halving: ``O(E alpha + V)``.
    """
    size = n_jobs + n_links
    parent = np.arange(size)
    has_edge = np.zeros(size, dtype=np.bool_)
    for e in range(edges.shape[0]):
        a = edges[e, 0]
        b = n_jobs + edges[e, 1]
        has_edge[a] = True
        has_edge[b] = True
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        if a != b:  # the larger root under the smaller: a root is its component's least vertex
            if a < b:
                parent[b] = a
            else:
                parent[a] = b
    label = np.full(size, -1, dtype=np.int64)
    count = 0
    for v in range(size):
        r = v
        while parent[r] != r:
            r = parent[r]
        if label[r] < 0:
            label[r] = count
            count += 1
        lab = label[r] if has_edge[v] else -1
        if v < n_jobs:
            comp_job[v] = lab
        else:
            comp_link[v - n_jobs] = lab
