"""Scheduler time against the number of jobs sharing a link (Metronome §IV-E, Fig. 16).

The paper times one pod's scheduling (submission to binding, the mean of 100
repetitions) as more jobs already share the links, for Default, Diktyo and
Metronome: the network-blind schedulers cost the same whatever the sharing,
Metronome's Score phase searches rotations over every job on a candidate link and
stays under 1,500 ms; the stop-and-wait controller's optimal offsets take under 5 s.

:func:`scheduler_time` builds that situation on a small cluster and times the
decision itself, without the simulator around it: ``jobs`` jobs share the hub
node's link, a new job's first pod arrives, and the policy schedules it
(PreFilter -> Reserve, :meth:`tdmcore.framework.Scheduler.schedule`) ``repeat``
times on fresh copies of the same state.  For a Metronome policy it also times
the controller's offline recalculation of the hub link with the new pod on it
(the ``optimal`` rotation search, §III-C).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .. import _validation as v
from ..framework import Policy, Scheduler, Status, check_policy
from ..metronome.policies.metronome import MetronomeConfig, link_plan
from ..model import Cluster, ClusterState, Node, Pod, TrafficPattern

__all__ = ["SCHEDULER_TIME_METRICS", "SchedulerTime", "scheduler_time", "sharing_state"]

#: The base period the jobs' periods divide (ms; **[decision]**: VGG19's 422 ms
#: pre-training period, S1, rounded).
BASE_PERIOD_MS = 420.0
#: Link capacity of every node (Gbps), and every job's rate: bulk all-reduce runs at
#: the NIC's rate, so two jobs on a link always contend.
LINK_GBPS = 25.0
#: The metrics of one measurement (:class:`SchedulerTime`'s fields), timed ones first.
SCHEDULER_TIME_METRICS: tuple[str, ...] = (
    "scheduler_ms", "scheduler_ms_p90", "controller_ms", "node", "score")
#: Metrics that are wall-clock times (they differ from run to run).
TIMED_METRICS: tuple[str, ...] = ("scheduler_ms", "scheduler_ms_p90", "controller_ms")


@dataclass(frozen=True)
class SchedulerTime:
    """One measurement: times in ms (medians over the repetitions), the decision."""

    scheduler_ms: float
    scheduler_ms_p90: float
    controller_ms: float
    node: str
    score: float


def _pattern(rng: np.random.Generator) -> TrafficPattern:
    """A periodic job compatible with every other one: its period divides
    :data:`BASE_PERIOD_MS` by 1 or 2 up to a 0.1 % drift, its duty cycle leaves
    room for five jobs on one circle (0.08-0.16 each)."""
    multiple = int(rng.integers(1, 3))
    period = BASE_PERIOD_MS / multiple * float(rng.uniform(0.999, 1.001))
    return TrafficPattern(round(period, 3), round(float(rng.uniform(0.08, 0.16)), 4),
                          LINK_GBPS)


def sharing_state(jobs: int, seed: int = 0) -> tuple[ClusterState, Pod]:
    """``jobs`` two-worker jobs sharing the hub's link, and the new job's first pod.

    Nodes: ``hub`` (``jobs + 1`` GPUs), one ``leaf-i`` per sharing job holding its
    second worker (1 GPU, then full), and one empty ``spare`` node (1 GPU): the
    candidates are the hub, whose link the new pod would share with every job,
    and the spare.  Job 0 is high priority, the others and the new job low.
    Patterns are seeded (:func:`_pattern`).
    """
    jobs = v.whole("jobs", jobs, 0)
    v.seed(seed)
    rng = np.random.default_rng([seed, jobs])
    # The hub's CPU and memory keep the pods' 1:4 ratio, so its shares stay balanced:
    # BalancedAllocation ties it with the spare (the hub first) and LeastAllocated
    # prefers it, so every policy's resource scores send the pod to the hub.
    nodes = [Node("hub", cpu=64.0, mem_gib=256.0, gpu=float(jobs + 1), link_gbps=LINK_GBPS)]
    nodes += [Node(f"leaf-{i}", cpu=8.0, mem_gib=32.0, gpu=1.0, link_gbps=LINK_GBPS)
              for i in range(jobs)]
    nodes.append(Node("spare", cpu=8.0, mem_gib=32.0, gpu=1.0, link_gbps=LINK_GBPS))
    state = ClusterState(Cluster(nodes))
    for i in range(jobs):
        pattern = _pattern(rng)
        priority = 1 if i == 0 else 0
        for w, node in ((0, 0), (1, i + 1)):
            state.place(Pod(f"j{i}-w{w}", f"j{i}", cpu=4.0, mem_gib=16.0, gpu=1.0,
                            pattern=pattern, priority=priority, gang_size=2), node)
    new = Pod("new-w0", "new", cpu=4.0, mem_gib=16.0, gpu=1.0, pattern=_pattern(rng),
              priority=0, gang_size=2)
    return state, new


def scheduler_time(policy: Policy, jobs: int, seed: int = 0, repeat: int = 20
                   ) -> SchedulerTime:
    """Time one pod's scheduling with ``jobs`` jobs sharing the candidate link.

    Parameters
    ----------
    policy : Policy
        The placement policy (a fresh object; :data:`tdmcore.metronome.policies.POLICIES`).
    jobs : int
        Jobs already sharing the hub's link (:func:`sharing_state`), >= 0.
    seed : int
        Their traffic patterns and the new pod's.
    repeat : int
        Timed repetitions (after one untimed run that loads the kernels), >= 1.

    Returns
    -------
    SchedulerTime
        Median and 90th percentile of the decision's wall time (PreFilter ->
        Reserve), the median time of the controller's optimal search of the hub
        link with the new pod placed there (NaN for a policy without a
        controller), the chosen node and its raw score (the policy's Score
        phase, Eq. 18 for Metronome; NaN when the policy reports none).

    Raises
    ------
    ValueError
        Naming the argument: a bad ``jobs``, ``seed`` or ``repeat``, or a policy
        object that lacks an extension point.
    """
    check_policy(policy)
    repeat = v.whole("repeat", repeat)
    state, pod = sharing_state(jobs, seed)
    scheduler = Scheduler(policy)
    first = scheduler.schedule(state.copy(), pod)  # loads the kernels, untimed
    if first.status is not Status.SUCCESS:
        raise ValueError(f"jobs: the new pod found no node ({first.message})")
    times = []
    for _ in range(repeat):
        trial = state.copy()
        tic = time.perf_counter()
        decision = scheduler.schedule(trial, pod)
        times.append(time.perf_counter() - tic)
        if decision.node != first.node:  # deterministic: a change is a bug
            raise RuntimeError("the same decision gave two nodes")
    config = getattr(policy, "config", None)
    controller_ms = math.nan
    if isinstance(config, MetronomeConfig):
        hub = state.copy()
        hub.place(pod, 0)
        link_plan(hub, 0, config, "optimal")
        plans = []
        for _ in range(repeat):
            tic = time.perf_counter()
            link_plan(hub, 0, config, "optimal")
            plans.append(time.perf_counter() - tic)
        controller_ms = float(np.median(plans)) * 1e3
    score = math.nan
    if first.raw_scores is not None and first.node is not None:
        score = float(first.raw_scores[first.node])
    ms = np.asarray(times) * 1e3
    return SchedulerTime(float(np.median(ms)), float(np.percentile(ms, 90)), controller_ms,
                         str(first.node_name), score)
