"""``exclusive``: bandwidth as an exclusive resource (paper §IV-A, refs [12], [13]).

A pod fits a node only if the bandwidth of the jobs already crossing its link
plus what the pod adds (:meth:`~tdmcore.model.ClusterState.waiting_link_gbps`:
one pod's demand per job, nothing for a job wholly on one node) stays within the
host link: no sharing, so no contention, but pods that would
share a link wait (the paper's exclusive schedulers run one job per snapshot).
Scoring as :mod:`default`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ...framework import CycleState, Reason
from ...model import ClusterState
from .default import DefaultPolicy, resource_fit

NAME = "exclusive"


class ExclusivePolicy(DefaultPolicy):
    name = NAME

    def filter(self, state: ClusterState, cycle: CycleState) -> NDArray[np.int64]:
        codes = resource_fit(state, cycle)
        snap = cycle.snapshot
        free_bw = snap.sum_bw + state.waiting_link_gbps(cycle.pod) <= snap.capacity + 1e-9
        codes[~free_bw & (codes == 0)] = Reason.BANDWIDTH
        return codes
