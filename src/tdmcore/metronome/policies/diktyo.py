"""``diktyo``: latency-aware placement (scheduler-plugins' NetworkOverhead; paper §IV-A "Di").

Filter as :mod:`default`.  Score: NetworkOverhead's network cost of placing the
pod on node n, the sum of ``tau[n, node(q)]`` over its *deployed* dependencies q
(the pods of its job and of the jobs declared dependent in its workload, as the
paper's modified Diktyo), mapped to 0..100 (lowest cost 100), weighted 5:1
against NodeResourcesBalancedAllocation, as in scheduler-plugins' example
configuration for NetworkOverhead (weight 5; NodeResourcesFit's score, the
least-allocated one :mod:`default` also uses, disabled).
No bandwidth or traffic-pattern awareness.

**[decision, docs/simulator.md]** As in
NetworkOverhead's Score, a pod none of whose dependencies is scheduled yet (a
job's first pod, with no dependent job running) has no network cost anywhere: its
network score is the same on every node and only the resource scores decide.
This is the paper's "fails to detect the dependencies of the job's first pod"
(§IV-B1, snapshot 4): the first pod lands wherever the default scoring puts it,
congested node included.  (Metronome instead falls back to the mean latency of
each node, docs/scheduler.md PreFilter.)
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ...framework import CycleState, Status
from ...model import ClusterState
from .default import DefaultPolicy, balanced_allocation
from .metronome import dependency_nodes

NAME = "diktyo"
NETWORK_WEIGHT = 5.0


def network_cost(state: ClusterState, cycle: CycleState) -> NDArray[np.float64] | None:
    """``sum_q tau[n, node(q)]`` over the pod's deployed dependencies, per node n;
    None when it has none deployed (or is LowComm): no cost anywhere."""
    pod = cycle.pod
    if pod.low_comm:
        return None
    nodes = dependency_nodes(state, pod)
    if not nodes:
        return None
    used, counts = np.unique(np.asarray(nodes), return_counts=True)
    return np.asarray(state.cluster.latency[:, used] @ counts.astype(np.float64),
                      dtype=np.float64)


class DiktyoPolicy(DefaultPolicy):
    name = NAME

    def pre_filter(self, state: ClusterState, cycle: CycleState) -> Status:
        cycle.data[self.name] = network_cost(state, cycle)  # this policy's cycle data
        return Status.SUCCESS

    def score(self, state: ClusterState, cycle: CycleState) -> NDArray[np.float64]:
        assert cycle.feasible is not None
        cost, feasible = cycle.data.get(self.name), cycle.feasible
        if cost is None:
            network = np.full(feasible.shape, 100.0)
        else:
            lo, hi = cost[feasible].min(), cost[feasible].max()
            network = np.full(cost.shape, 100.0) if hi == lo \
                else 100.0 * (hi - cost) / (hi - lo)
        return np.asarray((NETWORK_WEIGHT * network + balanced_allocation(state, cycle))
                          / (NETWORK_WEIGHT + 1.0), dtype=np.float64)
