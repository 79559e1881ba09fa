"""``exclusive``: bandwidth as an exclusive resource (paper §IV-A, refs [12], [13]).

A pod fits a node only if the bandwidth of the pods already there plus its own
stays within the host link: no sharing, so no contention, but pods that would
share a link wait (the paper's exclusive schedulers run one job per snapshot).
Scoring as :mod:`default`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ..framework import CycleState
from ..model import ClusterState
from .default import DefaultPolicy, resource_fit

NAME = "exclusive"


class ExclusivePolicy(DefaultPolicy):
    name = NAME

    def filter(self, state: ClusterState, cycle: CycleState) -> NDArray[np.bool_]:
        fits = resource_fit(state, cycle)
        snap = cycle.snapshot
        free_bw = snap.sum_bw + cycle.pod.bandwidth_gbps <= snap.capacity + 1e-9
        dropped = int((fits & ~free_bw).sum())
        if dropped:
            cycle.reasons["Insufficient bandwidth"] = dropped
        return np.asarray(fits & free_bw)
