"""The array snapshot of a cluster state that the scheduling kernels read.

Domain objects -> array snapshot -> kernels -> decision: this is the second step.
Built by a Cython loop over the state's Python objects
(:mod:`tdmcore._kernels._snapshot`), so a decision on a 5,000-pod cluster does not
pay for a Python-level walk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ._equality import ValueEquality
from ._kernels._snapshot import fill_pod_table
from ._kernels.node_score import PodTable
from .model import ClusterState

__all__ = ["Snapshot"]


@dataclass(frozen=True, eq=False)
class Snapshot(ValueEquality):
    """Plain arrays of one :class:`~tdmcore.model.ClusterState` version.

    Node arrays have one entry per node (cluster order).  The link rows form a
    CSR table by node: rows ``node_ptr[n]:node_ptr[n+1]``, one per job whose
    traffic crosses n's link (its pattern, one pod's demand), in deploy order, as
    :attr:`ClusterState.link_rows <tdmcore.model.ClusterState>` keeps them.
    LowComm pods and the pods of jobs wholly on one node only count in
    ``n_pods``; ``sum_bw[n]`` sums the rows' ``r_p``.
    """

    version: int
    state_id: int
    free_cpu: NDArray[np.float64]
    free_mem: NDArray[np.float64]
    free_gpu: NDArray[np.float64]
    capacity: NDArray[np.float64]
    n_pods: NDArray[np.int64]
    sum_bw: NDArray[np.float64]
    node_ptr: NDArray[np.int64]
    period: NDArray[np.float64]
    duty: NDArray[np.float64]
    bandwidth: NDArray[np.float64]
    priority: NDArray[np.int64]
    job: NDArray[np.int64]
    order: NDArray[np.int64]
    job_ids: dict[str, int]

    @classmethod
    def of(cls, state: ClusterState) -> Snapshot:
        n_nodes = len(state.cluster)
        total = sum(map(len, state.link_rows))
        node_ptr = np.zeros(n_nodes + 1, dtype=np.int64)
        period = np.empty(total)
        duty = np.empty(total)
        bandwidth = np.empty(total)
        priority = np.empty(total, dtype=np.int64)
        job = np.empty(total, dtype=np.int64)
        order = np.empty(total, dtype=np.int64)
        n_pods = np.empty(n_nodes, dtype=np.int64)
        sum_bw = np.empty(n_nodes)
        job_ids: dict[str, int] = {}
        rows = fill_pod_table(state.node_pods, state.link_rows, state.placed, job_ids,
                              node_ptr, period, duty, bandwidth, priority, job, order,
                              n_pods, sum_bw)
        return cls(
            version=state.version,
            state_id=id(state),
            free_cpu=state.free_cpu,
            free_mem=state.free_mem,
            free_gpu=state.free_gpu,
            capacity=state.cluster.link_gbps,
            n_pods=n_pods,
            sum_bw=sum_bw,
            node_ptr=node_ptr,
            period=period[:rows],
            duty=duty[:rows],
            bandwidth=bandwidth[:rows],
            priority=priority[:rows],
            job=job[:rows],
            order=order[:rows],
            job_ids=job_ids,
        )

    def matches(self, state: ClusterState) -> bool:
        """Whether this snapshot shows ``state`` as it is now."""
        return self.state_id == id(state) and self.version == state.version

    def pod_table(self) -> PodTable:
        """The link rows and node totals as the Score kernel takes them."""
        return PodTable(self.node_ptr, self.period, self.duty, self.bandwidth, self.priority,
                        self.order, self.n_pods, self.sum_bw, self.capacity)

    def job_id(self, job: str) -> int:
        """The id of ``job`` in this snapshot, or a fresh one past every known id."""
        return self.job_ids.get(job, len(self.job_ids))
