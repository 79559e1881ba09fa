"""``diktyo``: latency-aware placement (Diktyo's NetworkOverhead; paper §IV-A "Di").

Filter as :mod:`default`.  Score: the latency score ``Delta_n`` of the pod's
dependencies (same job, and AppGroup dependencies, as the paper's modified
Diktyo) mapped to 0..100, lower latency higher, weighted 5:1 against the
default resource scores as in Diktyo's recommended configuration.  No bandwidth
or traffic-pattern awareness.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ..framework import CycleState, Status
from ..model import ClusterState
from .default import DefaultPolicy, resource_scores
from .metronome import latency_scores

NAME = "diktyo"
NETWORK_WEIGHT = 5.0


class DiktyoPolicy(DefaultPolicy):
    name = NAME

    def pre_filter(self, state: ClusterState, cycle: CycleState) -> Status:
        cycle.latency = latency_scores(state, cycle.pod)
        return Status.SUCCESS

    def score(self, state: ClusterState, cycle: CycleState) -> NDArray[np.float64]:
        assert cycle.latency is not None and cycle.feasible is not None
        delta = cycle.latency
        feasible = cycle.feasible
        lo, hi = delta[feasible].min(), delta[feasible].max()
        network = np.full(delta.shape, 100.0) if hi == lo else 100.0 * (hi - delta) / (hi - lo)
        return np.asarray((NETWORK_WEIGHT * network + resource_scores(state, cycle))
                          / (NETWORK_WEIGHT + 1.0), dtype=np.float64)
