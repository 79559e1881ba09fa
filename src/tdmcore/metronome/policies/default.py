"""``default``: Kubernetes' default scheduler, network-unaware (paper §IV-A "De").

Filter: NodeResourcesFit (CPU, memory, GPU; Eq. 13).  Score: the mean of
NodeResourcesLeastAllocated (free share of CPU and memory after placement) and
NodeResourcesBalancedAllocation (1 - standard deviation of the used shares), both
0..100.  Ties: first node in cluster order (kube-scheduler picks at random; a
simulator needs determinism).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ...framework import CycleState, Reason, ReserveResult, Status
from ...model import ClusterState

NAME = "default"
_EPS = 1e-9


def resource_fit(state: ClusterState, cycle: CycleState) -> NDArray[np.int64]:
    """A :class:`~tdmcore.framework.Reason` per node: the resources short for the
    pod (CPU, memory, GPU; Eq. 13, NodeResourcesFit names each), else, for a pod
    with ``spread`` (required pod anti-affinity on its job), ``ANTI_AFFINITY`` on
    the nodes with a pod of its job (InterPodAffinity's Filter); 0: it fits."""
    pod, snap = cycle.pod, cycle.snapshot
    codes = (np.where(snap.free_cpu + _EPS >= pod.cpu, 0, int(Reason.CPU))
             | np.where(snap.free_mem + _EPS >= pod.mem_gib, 0, int(Reason.MEMORY))
             | np.where(snap.free_gpu + _EPS >= pod.gpu, 0, int(Reason.GPU))).astype(np.int64)
    if pod.spread:
        taken = np.zeros(codes.shape[0], dtype=np.bool_)
        taken[[p.node for p in state.job_pods(pod.job)]] = True
        codes[taken & (codes == 0)] = Reason.ANTI_AFFINITY
    return codes


def _used_shares(state: ClusterState, cycle: CycleState) -> NDArray[np.float64]:
    """Per node, the share of its CPU and of its memory in use after placing the pod
    (rows: CPU, memory)."""
    pod, cluster = cycle.pod, state.cluster
    shares = []
    for alloc, used, req in ((cluster.cpu, state.used_cpu, pod.cpu),
                             (cluster.mem_gib, state.used_mem, pod.mem_gib)):
        with np.errstate(divide="ignore", invalid="ignore"):
            shares.append(np.where(alloc > 0, np.clip((used + req) / alloc, 0, 1), 0.0))
    return np.stack(shares)


def _balanced(used_share: NDArray[np.float64]) -> NDArray[np.float64]:
    """NodeResourcesBalancedAllocation of per-node used shares: ``100 (1 - std)``."""
    return np.asarray(100.0 * (1.0 - used_share.std(axis=0)), dtype=np.float64)


def balanced_allocation(state: ClusterState, cycle: CycleState) -> NDArray[np.float64]:
    """NodeResourcesBalancedAllocation alone (0..100)."""
    return _balanced(_used_shares(state, cycle))


def resource_scores(state: ClusterState, cycle: CycleState) -> NDArray[np.float64]:
    """LeastAllocated (``100 (1 - mean used share)``) and BalancedAllocation,
    averaged (0..100)."""
    used_share = _used_shares(state, cycle)
    least = 100.0 * (1.0 - used_share.mean(axis=0))
    return np.asarray((least + _balanced(used_share)) / 2.0, dtype=np.float64)


class DefaultPolicy:
    name = NAME

    def pre_filter(self, state: ClusterState, cycle: CycleState) -> Status:
        return Status.SUCCESS

    def filter(self, state: ClusterState, cycle: CycleState) -> NDArray[np.int64]:
        return resource_fit(state, cycle)

    def score(self, state: ClusterState, cycle: CycleState) -> NDArray[np.float64]:
        return resource_scores(state, cycle)

    def normalize_score(self, state: ClusterState, cycle: CycleState) -> NDArray[np.float64]:
        assert cycle.raw_scores is not None
        return cycle.raw_scores

    def reserve(self, state: ClusterState, cycle: CycleState, node: int) -> ReserveResult:
        state.place(cycle.pod, node)
        return ReserveResult(node, {}, True, tuple(state.link_rows[node]))
