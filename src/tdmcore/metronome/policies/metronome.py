"""``metronome``: the network- and priority-aware TDM scheduler (Algorithm 1).

docs/scheduler.md, paper §III-B.  Every extension point works on arrays over
all nodes; the Score phase runs one compiled call for all candidate nodes
(:mod:`tdmcore._kernels.node_score`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from ... import _validation as v
from ..._equality import ValueEquality
from ..._kernels.node_score import ScoreSettings, WaitingPod, score_nodes_kernel
from ...framework import CycleState, Reason, ReserveResult, Status
from ...model import ClusterState, Pod
from ..affinity import AffinityGraph, cyclic_blocks, loop_free_nodes
from ..base_period import check_settings
from ..joint import common_rotations, lead_first
from ..link import LinkPlan, LinkPod, _plan_link
from ..scoring import PERFECT_RTOL
from .default import resource_fit

NAME = "metronome"
#: Two node scores are the same maximum when their excesses differ by at most
#: 1e-9 B (docs/traffic-circle.md): 100 x 1e-9 B / (B N) in score units, N >= 8.
SCORE_TIE_PER_BIN = 1e-7


@dataclass(frozen=True)
class MetronomeConfig:
    """Thresholds with the paper's defaults (§IV-A).

    ``phase_three`` and ``monitor`` are read by the controller (the ablations
    ``metronome-no-phase3`` and ``metronome-no-monitor``); ``exact_scores`` makes
    the Score phase compute every node's exact score even when it cannot change
    the decision (for reporting).
    """

    bins: int = 72
    gt_ms: float = 5.0
    et_frac: float = 0.10
    max_multiple: int = 8
    phase_three: bool = True
    monitor: bool = True
    exact_scores: bool = False

    def __post_init__(self) -> None:
        v.bins_count(self.bins)
        # base-period unification's one check of its settings (a NumPy integer M is
        # kept as an int; a bool is refused)
        gt, et, m_max = check_settings(self.gt_ms, self.et_frac, self.max_multiple)
        object.__setattr__(self, "gt_ms", gt)
        object.__setattr__(self, "et_frac", et)
        object.__setattr__(self, "max_multiple", m_max)
        for name in ("phase_three", "monitor", "exact_scores"):
            v.boolean(name, getattr(self, name))


@dataclass(eq=False)
class MetronomeCycle(ValueEquality):
    """What Metronome's extension points share in one cycle, kept in
    :attr:`CycleState.data <tdmcore.framework.CycleState.data>` under the policy's
    name."""

    latency: NDArray[np.float64] | None = None  # Delta_n (PreFilter)
    adds: NDArray[np.bool_] | None = None  # the pod adds a row to the node's link
    early: NDArray[np.bool_] | None = None  # EarlyReturn per node (Score)
    max_score: float = 0.0  # NormalizeScore's maximum raw score


@dataclass(frozen=True)
class LinkReservation:
    """Metronome's :attr:`ReserveResult.extension
    <tdmcore.framework.ReserveResult.extension>`: what Reserve computed for the
    node's link (Alg. 1 lines 33-36).

    Attributes
    ----------
    rotations : dict of str to int
        Rotation per job on the link (bins).
    base_period_ms : float
        The link's base period ``T``.
    plan : LinkPlan
        The link plan the rotations come from (shared: the controller's plan of
        the same link in the same mode is this one).
    """

    rotations: dict[str, int]
    base_period_ms: float
    plan: LinkPlan = field(compare=False, repr=False)


def dependency_nodes(state: ClusterState, pod: Pod) -> list[int]:
    """Nodes of the deployed pods that ``pod`` depends on, one entry per pod: every
    pod of its job, then the pods of jobs declared dependent in its workload."""
    nodes = [p.node for p in state.job_pods(pod.job)]
    for other in sorted(state.cluster.dependent_jobs(pod.workload, pod.job)):
        nodes.extend(p.node for p in state.job_pods(other))
    return nodes


def latency_scores(state: ClusterState, pod: Pod) -> NDArray[np.float64]:
    """PreFilter's ``Delta_n`` for every node n (CalculateLatencyScore).

    ``Delta_n = sum_q tau[n, node(q)]`` over deployed pods q that depend on the
    pod: every pod of its job, and the pods of jobs declared dependent in its
    workload (AppGroup).  A LowComm pod, or one with no dependent pod deployed,
    gets the mean latency of n to all nodes instead.
    """
    cluster = state.cluster
    if pod.low_comm:
        return cluster.mean_latency.copy()
    nodes = dependency_nodes(state, pod)
    if not nodes:
        return cluster.mean_latency.copy()
    # only the nodes that hold dependents contribute: O(nodes x k), not O(nodes^2)
    used, counts = np.unique(np.asarray(nodes), return_counts=True)
    total = cluster.latency[:, used] @ counts.astype(np.float64)
    # "If that sum is 0": per node, literally (possible when tau has zero entries).
    return np.asarray(np.where(total == 0.0, cluster.mean_latency, total), dtype=np.float64)


def normalized_latency(delta: NDArray[np.float64]) -> NDArray[np.float64]:
    """Eq. (19): ``100 - floor(100 (D - Dmin) / (Dmax - Dmin))``, or ``100 - (D - Dmin)``.

    ``Dmin``/``Dmax`` are taken over all cached ``Delta_n`` (all nodes), as the
    paper's text says.
    """
    lo, hi = float(delta.min()), float(delta.max())
    if hi != lo:
        return np.asarray(100.0 - np.floor(100.0 * (delta - lo) / (hi - lo)), dtype=np.float64)
    return np.asarray(100.0 - (delta - lo), dtype=np.float64)


class MetronomePolicy:
    """The extension points of Algorithm 1."""

    def __init__(self, config: MetronomeConfig | None = None, name: str = NAME) -> None:
        self.config = config or MetronomeConfig()
        self.name = name

    def data(self, cycle: CycleState) -> MetronomeCycle:
        """This policy's data of ``cycle`` (under its name)."""
        return cycle.data_of(self.name, MetronomeCycle)

    # PreFilter (lines 1-3) ------------------------------------------------------
    def pre_filter(self, state: ClusterState, cycle: CycleState) -> Status:
        self.data(cycle).latency = latency_scores(state, cycle.pod)
        return Status.SUCCESS

    # Filter (lines 4-13) --------------------------------------------------------
    def filter(self, state: ClusterState, cycle: CycleState) -> NDArray[np.int64]:
        """A :class:`~tdmcore.framework.Reason` per node: resources (Eq. 13), then
        the link's rate (Eq. 14), then the dependency loop (spec §6)."""
        pod, snap = cycle.pod, cycle.snapshot
        codes = resource_fit(state, cycle)
        codes[(snap.capacity < pod.bandwidth_gbps) & (codes == 0)] = Reason.LINK  # Eq. (14)
        feasible = codes == 0
        if not pod.low_comm and feasible.any():
            graph = AffinityGraph.of(snap)
            candidates = np.flatnonzero(feasible).astype(np.int64)
            no_loop = loop_free_nodes(snap, graph, candidates, snap.job_id(pod.job),
                                      pod.bandwidth_gbps, self._adds(state, cycle))
            # spec §6, revised 2026-11-28: a new cycle stays when its offsets agree;
            # so does a new row on a link of a cycle (it may break the cycle's plan)
            check = feasible & ~no_loop
            if graph.has_cycle():
                on_cycle = np.zeros_like(check)
                for block in cyclic_blocks(graph.edges):
                    on_cycle[list(block.links)] = True
                check |= feasible & on_cycle & self._adds(state, cycle)
            closing = np.flatnonzero(check).tolist()
            if closing:
                edges = {(int(j), int(m)) for j, m in graph.edges.tolist()}
                for n in closing:
                    no_loop[n] = self._offsets_agree(state, cycle, edges, int(n))
            codes[feasible & ~no_loop] = Reason.DEPENDENCY_LOOP
        return codes

    def _offsets_agree(self, state: ClusterState, cycle: CycleState,
                       edges: set[tuple[int, int]], node: int) -> bool:
        """Whether the cycles through ``node``'s link once the waiting pod is placed
        there (new ones, or ones the link was on) keep consistent offsets: each
        block with a cycle through ``node``'s link
        (:func:`~tdmcore.metronome.affinity.cyclic_blocks`, over the affinity graph's
        ``edges`` plus the link's edges after the placement) has links that all
        carry the jobs its cycles run through, and a common perfect plan
        (:func:`tdmcore.metronome.joint.common_rotations`; spec §6, revised
        2026-11-28, and the [decision] of :mod:`tdmcore.metronome.joint`)."""
        pod, snap, cfg = cycle.pod, cycle.snapshot, self.config
        pattern = pod.pattern
        assert pattern is not None
        waiting = snap.job_id(pod.job)
        on_link = snap.job[snap.node_ptr[node]:snap.node_ptr[node + 1]].tolist()
        after = sorted(edges | {(int(j), node) for j in [*on_link, waiting]})
        names = {i: j for j, i in snap.job_ids.items()}
        names[waiting] = pod.job
        pods = link_pods(state, node)
        pods.append(LinkPod(name=pod.name, job=pod.job, priority=pod.priority,
                            period_ms=pattern.period_ms, duty_cycle=pattern.duty_cycle,
                            bandwidth_gbps=pattern.bandwidth_gbps))
        plans = {node: _plan_link(pods, float(state.cluster.link_gbps[node]), cfg.bins,
                                  "first", float(cfg.gt_ms), float(cfg.et_frac),
                                  cfg.max_multiple)}
        for block in cyclic_blocks(after, through=node):
            for m in block.links:
                if m not in plans:
                    plans[m] = link_plan(state, m, cfg, mode="first")
            links = lead_first(plans, list(block.links))
            jobs = sorted({j for m in links for j in plans[m].jobs},
                          key=lambda j: job_rank(state, j, pod), reverse=True)
            if common_rotations([plans[m] for m in links], jobs,
                                [names[j] for j in block.jobs]) is None:
                return False
        return True

    def _adds(self, state: ClusterState, cycle: CycleState) -> NDArray[np.bool_]:
        """Per node: would the waiting pod add a row to that node's link?

        :meth:`ClusterState.waiting_link_gbps` decides (one pod's demand per job
        and link; a job completed wholly on one node is LowComm), once per cycle.
        """
        data = self.data(cycle)
        if data.adds is None:
            data.adds = np.asarray(state.waiting_link_gbps(cycle.pod) > 0.0)
        return data.adds

    # Score (lines 14-16) --------------------------------------------------------
    def score(self, state: ClusterState, cycle: CycleState) -> NDArray[np.float64]:
        """Eq. (18) per feasible node, EarlyReturn where no contention can arise.

        **[decision, docs/traffic-circle.md "Score, excess and utilisation"]** A node
        where the waiting pod adds no row to the link — its job already crosses
        that link (a job's row is one pod's demand), or the pod completes its job
        wholly on that node (the job is LowComm there) — leaves the link's load as
        it is, so it scores as EarlyReturn: 100, no rotation, even on a link that
        is already over capacity (that contention stays wherever the pod goes).
        """
        pod, snap = cycle.pod, cycle.snapshot
        assert cycle.feasible is not None
        n_nodes = snap.capacity.shape[0]
        scores = np.zeros(n_nodes)
        early = np.zeros(n_nodes, dtype=np.bool_)
        if pod.low_comm:  # LowComm: 100, no rotation (EarlyReturn)
            scores[cycle.feasible] = 100.0
            early[cycle.feasible] = True
            self.data(cycle).early = early
            return scores
        pattern = pod.pattern
        assert pattern is not None
        perfect = np.zeros(n_nodes, dtype=np.bool_)
        cfg = self.config
        candidates = np.flatnonzero(cycle.feasible).astype(np.int64)
        if not cfg.exact_scores:
            # NormalizeScore's preference among perfect nodes: best Eq. (19) latency
            # score first, then node order (a stable sort keeps node order).
            latency = self.data(cycle).latency
            assert latency is not None
            preference = normalized_latency(latency)[candidates]
            candidates = candidates[np.argsort(-preference, kind="stable")]
        pod_row = WaitingPod(pattern.period_ms, pattern.duty_cycle, pattern.bandwidth_gbps,
                             pod.priority, state.next_order)
        settings = ScoreSettings(cfg.bins, cfg.gt_ms, cfg.et_frac, cfg.max_multiple,
                                 PERFECT_RTOL, cfg.exact_scores)
        score_nodes_kernel(candidates, snap.pod_table(), self._adds(state, cycle), pod_row,
                           settings, scores, perfect, early)
        self.data(cycle).early = early
        return scores

    # NormalizeScore (lines 17-29) -----------------------------------------------
    def normalize_score(self, state: ClusterState, cycle: CycleState) -> NDArray[np.float64]:
        assert cycle.raw_scores is not None and cycle.feasible is not None
        data = self.data(cycle)
        assert data.latency is not None
        raw, feasible = cycle.raw_scores, cycle.feasible
        best = float(raw[feasible].max())
        data.max_score = best
        at_max = feasible & (raw >= best - SCORE_TIE_PER_BIN / self.config.bins)
        cycle.finalists = at_max  # only a node at the maximum may win
        if int(at_max.sum()) == 1:
            return np.where(at_max, raw, np.where(feasible, np.maximum(raw, 0.0), 0.0))
        latency = normalized_latency(data.latency)
        if cycle.pod.low_comm:
            latency = 100.0 - latency
        return np.asarray(np.where(at_max, latency, 0.0), dtype=np.float64)

    # Reserve (lines 30-40) ------------------------------------------------------
    def reserve(self, state: ClusterState, cycle: CycleState, node: int) -> ReserveResult:
        pod = cycle.pod
        state.place(pod, node)
        data = self.data(cycle)
        early = pod.low_comm or bool(data.early is not None and data.early[node])
        link_names = tuple(state.link_rows[node])  # one pod per job crossing the link
        # **[decision]** Algorithm 1's "n* then has exactly 2 pods" counts the link's
        # rows: one per job crossing it (spec §2, revised), so a LowComm pod or a
        # job's second pod on n*, which put nothing more on the link, do not count.
        perfect_max = data.max_score >= 100.0 - SCORE_TIE_PER_BIN / self.config.bins
        skip = early or not perfect_max or len(link_names) == 2
        if early:
            return ReserveResult(node, {}, True, link_names)
        plan = link_plan(state, node, self.config, mode="first")
        state.set_shifts(plan.shifts_ms)
        return ReserveResult(node, dict(plan.shifts_ms), skip, link_names,
                             LinkReservation(plan.job_rotations, plan.base.period_ms, plan))


def job_rank(state: ClusterState, job: str, waiting: Pod | None = None) -> tuple[int, int]:
    """``(priority, -deploy order)`` of ``job``'s first pod, the larger the higher
    (the controller's ranking: priority, then the earliest deployed); a job with no
    pod placed yet is ``waiting``'s, deployed next."""
    members = state.job_members.get(job)
    if members:
        first = state.placed[members[0]]
        return first.pod.priority, -first.order
    assert waiting is not None and waiting.job == job
    return waiting.priority, -state.next_order


def link_pods(state: ClusterState, node: int) -> list[LinkPod]:
    """The rows of a node's link, one pod per job crossing it (in deploy order,
    :attr:`ClusterState.link_rows`), as :class:`LinkPod`."""
    out = []
    for name in state.link_rows[node]:
        p = state.placed[name].pod
        assert p.pattern is not None
        out.append(LinkPod(name=p.name, job=p.job, priority=p.priority,
                           period_ms=p.pattern.period_ms, duty_cycle=p.pattern.duty_cycle,
                           bandwidth_gbps=p.pattern.bandwidth_gbps))
    return out


def link_plan(state: ClusterState, node: int, config: MetronomeConfig,
              mode: str = "first") -> LinkPlan:
    """:func:`tdmcore.metronome.link.plan_link` for the pods on ``node`` (first, optimal or
    compact)."""
    pods = link_pods(state, node)
    kind: Literal["first", "optimal", "compact"] = \
        "optimal" if mode == "optimal" else "compact" if mode == "compact" else "first"
    # the pods' patterns and the config are valid: the unchecked path
    return _plan_link(pods, float(state.cluster.link_gbps[node]), config.bins, kind,
                      float(config.gt_ms), float(config.et_frac), config.max_multiple)
