"""The affinity graph of jobs and contended links, and global offsets (§III-B/C).

**[spec §6, revised 2026-11-28]** A cycle of the graph is refused only when the
offsets around it cannot be made consistent.  The cycles through a set of links
are those of a *block* (a biconnected component): :func:`cyclic_blocks` finds the
blocks that hold a cycle, and :mod:`tdmcore.metronome.joint` plans each as one.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from .._equality import ValueEquality
from .._kernels.affinity import components_kernel, loop_filter_kernel
from ..snapshot import Snapshot

__all__ = ["AffinityGraph", "Block", "contended_edges", "cyclic_blocks", "loop_free_nodes"]


def contended_edges(snap: Snapshot) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """The affinity graph's edges and which links are contended, without its
    components: what the controller's offset BFS needs (:meth:`AffinityGraph.of`
    adds the components the loop filter needs).

    Returns ``(edges, contended)``: ``edges`` is ``(E, 2)`` ``(job_id, node)``
    pairs sorted by job, then node; ``contended[n]`` is whether the rows on
    ``n``'s link sum above its capacity.
    """
    n_links = snap.capacity.shape[0]
    contended = snap.sum_bw > snap.capacity
    counts = np.diff(snap.node_ptr)
    pod_node = np.repeat(np.arange(n_links), counts)
    keep = contended[pod_node]
    # (job, link) pairs sorted by job, then link: one integer key each, as a
    # row-wise np.unique sorts structured rows several times slower.
    keys = np.unique(snap.job[keep] * n_links + pod_node[keep])
    edges = np.stack([keys // n_links, keys % n_links], axis=1) if keys.size \
        else np.zeros((0, 2), dtype=np.int64)
    return edges.astype(np.int64, copy=False), contended


Adjacency = tuple[dict[int, list[int]], dict[int, list[int]]]


def adjacency(edges: NDArray[np.int64]) -> Adjacency:
    """``(links of each job, jobs of each link)`` of ``edges`` (``(job_id, node)``
    pairs), in the order of ``edges``: the lists :func:`bfs_order` walks."""
    by_job: dict[int, list[int]] = {}
    by_link: dict[int, list[int]] = {}
    for j, n in edges.tolist():
        by_job.setdefault(j, []).append(n)
        by_link.setdefault(n, []).append(j)
    return by_job, by_link


def bfs_order(adjacent: Adjacency, root_job: int) -> list[tuple[int, int, int]]:
    """``(job, via_link, parent_job)`` in BFS order from ``root_job`` (-1: root) over
    the bipartite graph whose :func:`adjacency` is ``adjacent`` (built once for
    several roots)."""
    by_job, by_link = adjacent
    out = [(root_job, -1, -1)]
    seen_jobs = {root_job}
    seen_links: set[int] = set()
    queue = deque([root_job])
    while queue:
        j = queue.popleft()
        for n in by_job.get(j, ()):
            if n in seen_links:
                continue
            seen_links.add(n)
            for other in by_link[n]:
                if other not in seen_jobs:
                    seen_jobs.add(other)
                    out.append((other, n, j))
                    queue.append(other)
    return out


@dataclass(frozen=True, eq=False)
class AffinityGraph(ValueEquality):
    """Bipartite graph: job ids ``0..J-1`` and links (= nodes) ``0..N-1``.

    ``edges`` lists ``(job_id, node)`` for every job with a row on a contended
    link (the rows' summed bandwidth above capacity; a job's row is one pod's
    demand and a job wholly on one node has none, docs/traffic-circle.md).
    """

    n_jobs: int
    n_links: int
    edges: NDArray[np.int64]  # (E, 2)
    contended: NDArray[np.bool_]
    comp_job: NDArray[np.int64]
    comp_link: NDArray[np.int64]

    @classmethod
    def of(cls, snap: Snapshot) -> AffinityGraph:
        n_links = snap.capacity.shape[0]
        n_jobs = len(snap.job_ids)
        edges, contended = contended_edges(snap)
        comp_job = np.empty(n_jobs, dtype=np.int64)
        comp_link = np.empty(n_links, dtype=np.int64)
        components_kernel(edges, n_jobs, n_links, comp_job, comp_link)
        return cls(n_jobs, n_links, edges, contended, comp_job, comp_link)

    def has_cycle(self) -> bool:
        """A forest has ``vertices - components`` edges; more means a cycle."""
        if self.edges.shape[0] == 0:
            return False
        vertices = np.unique(self.edges[:, 0]).size + np.unique(self.edges[:, 1]).size
        components = np.unique(self.comp_job[self.comp_job >= 0]).size
        return bool(self.edges.shape[0] > vertices - components)

    def bfs_order(self, root_job: int) -> list[tuple[int, int, int]]:
        """``(job, via_link, parent_job)`` in BFS order from ``root_job`` (-1: root)."""
        return bfs_order(adjacency(self.edges), root_job)


class Block(NamedTuple):
    """A biconnected component of the affinity graph that holds a cycle: its jobs
    (ids) and its links (nodes), each ascending.  Every cycle of the graph lies in
    one block, and two edges lie on a common cycle exactly when they share a block."""

    jobs: tuple[int, ...]
    links: tuple[int, ...]


def cyclic_blocks(edges: NDArray[np.int64] | list[tuple[int, int]],
                  through: int | None = None) -> list[Block]:
    """The blocks of the bipartite graph of ``edges`` (``(job, node)`` pairs) that
    hold a cycle (more than one edge: the graph is simple), by Tarjan's algorithm
    (iterative, edges on a stack), in the order they close; with ``through``, only
    those of that link's connected component that contain it."""
    adj: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for j, n in (edges.tolist() if isinstance(edges, np.ndarray) else edges):
        adj.setdefault((0, j), []).append((1, n))
        adj.setdefault((1, n), []).append((0, j))
    if through is not None:
        roots = [(1, through)] if (1, through) in adj else []
    else:
        roots = sorted(adj)
    disc: dict[tuple[int, int], int] = {}
    low: dict[tuple[int, int], int] = {}
    found: list[Block] = []
    for root in roots:
        if root in disc:
            continue
        disc[root] = low[root] = len(disc)
        stack = [(root, (-1, -1), iter(adj[root]))]
        pending: list[tuple[tuple[int, int], tuple[int, int]]] = []
        while stack:
            v, parent, it = stack[-1]
            for w in it:
                if w == parent:
                    continue
                if w not in disc:
                    disc[w] = low[w] = len(disc)
                    pending.append((v, w))
                    stack.append((w, v, iter(adj[w])))
                    break
                if disc[w] < disc[v]:
                    low[v] = min(low[v], disc[w])
                    pending.append((v, w))
            else:
                stack.pop()
                if not stack:
                    continue
                u = stack[-1][0]
                low[u] = min(low[u], low[v])
                if low[v] >= disc[u]:  # u separates v's subtree: one block closes
                    block = []
                    while True:
                        e = pending.pop()
                        block.append(e)
                        if e == (u, v):
                            break
                    if len(block) > 1:
                        vertices = {x for e in block for x in e}
                        links = tuple(sorted(x[1] for x in vertices if x[0] == 1))
                        if through is None or through in links:
                            found.append(Block(tuple(sorted(x[1] for x in vertices
                                                            if x[0] == 0)), links))
    return found


def loop_free_nodes(snap: Snapshot, graph: AffinityGraph, candidates: NDArray[np.int64],
                    job_id: int, bandwidth_gbps: float,
                    adds: NDArray[np.bool_] | None = None) -> NDArray[np.bool_]:
    """Mask of nodes where placing a pod of ``job_id`` closes no new cycle (the
    Filter keeps the others whose cycles have a common perfect plan,
    :func:`tdmcore.metronome.joint.common_rotations`).

    ``adds[n]``: whether the pod would add a row to n's link
    (:meth:`~tdmcore.model.ClusterState.waiting_link_gbps` > 0); where it adds
    none, the graph gains no edge.  None: it adds one everywhere.
    """
    n_links = snap.capacity.shape[0]
    ok = np.ones(n_links, dtype=np.bool_)
    if adds is None:
        adds = np.ones(n_links, dtype=np.bool_)
    elif adds.shape != (n_links,):
        raise ValueError(f"adds: expected {n_links} flags (one per node), got {adds.shape}")
    loop_filter_kernel(candidates, snap.node_ptr, snap.job, snap.sum_bw, snap.capacity,
                       graph.contended, graph.comp_job, graph.comp_link, job_id,
                       float(bandwidth_gbps), np.ascontiguousarray(adds, dtype=np.bool_), ok)
    return ok
