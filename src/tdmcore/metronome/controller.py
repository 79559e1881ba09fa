"""The stop-and-wait controller (paper §III-C, docs/scheduler.md).

Front-end independent: the simulator feeds it iteration reports from its
network model, the Kubernetes bridge from the agents; both apply what it returns
(time shifts, pauses, pattern updates).  It keeps, per contended link, the
rotations of the jobs on it; turns them into one global offset per job; runs the
phase three (the ``optimal`` search); and regulates pods whose
iterations keep running long.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import _validation as v
from .._kernels import regulation as R
from ..framework import ReserveResult
from ..model import ClusterState, TrafficPattern
from ..snapshot import Snapshot
from .affinity import adjacency, bfs_order, contended_edges, cyclic_blocks
from .joint import plan_blocks
from .link import LinkPlan
from .policies.metronome import MetronomeConfig, link_plan, link_pods

#: Link plans kept by :class:`Controller` (oldest dropped first).
PLAN_CACHE = 1024

__all__ = ["Controller", "ControllerConfig", "PatternUpdate", "Readjustment", "Thresholds",
           "Watch"]


@dataclass(frozen=True)
class ControllerConfig:
    """Thresholds with the paper's defaults (§IV-A, §III-C).

    window : iterations kept per pod (10).
    o_t : more than this many slow iterations in the window trigger a readjustment (5).
    a_t : an iteration is slow above ``a_t`` x its baseline (1.10): the pattern's
        period plus the idle the controller injects into the pod.
    drift_tol : a pod's own iteration time (without its communication) whose middle
        half moves this share of the baseline away counts as a changed traffic
        pattern, and a re-measured period closer than this share to the current
        one changes nothing (0.10; the paper gives no number).  **[decision]**
        equal to ``a_t - 1``.
    readjust_limit, readjust_horizon : this many readjustments within that many
        iterations make the controller re-measure the pattern (3 in 50; the paper:
        "frequent").
    phase_three, monitor : the ablations ``metronome-no-phase3`` (compact
        rotations instead of phase three, :meth:`Controller.
        _recalc_mode`) and ``metronome-no-monitor`` (never regulate).
    """

    window: int = 10
    o_t: int = 5
    a_t: float = 1.10
    drift_tol: float = 0.10
    readjust_limit: int = 3
    readjust_horizon: int = 50
    phase_three: bool = True
    monitor: bool = True
    scheduler: MetronomeConfig = field(default_factory=MetronomeConfig)

    def __post_init__(self) -> None:
        for name in ("window", "o_t", "readjust_limit", "readjust_horizon"):
            object.__setattr__(self, name, v.whole(name, getattr(self, name)))
        if self.o_t >= self.window:
            raise ValueError("o_t: must be below the window length (more than o_t of "
                             "window iterations trigger)")
        for name in ("phase_three", "monitor"):
            v.boolean(name, getattr(self, name))
        if not isinstance(self.scheduler, MetronomeConfig):
            raise ValueError("scheduler: expected a MetronomeConfig")
        if v.real_number("a_t", self.a_t) < 1.0:
            raise ValueError("a_t: must be >= 1")
        if v.real_number("drift_tol", self.drift_tol) <= 0.0:
            raise ValueError("drift_tol: must be > 0")

    @classmethod
    def for_policy(cls, config: MetronomeConfig) -> ControllerConfig:
        return cls(phase_three=config.phase_three, monitor=config.monitor, scheduler=config)


@dataclass(frozen=True)
class Readjustment:
    """Pause ``pod`` for ``pause_ms`` before its next iteration (low priority only)."""

    pod: str
    pause_ms: float
    slow_iterations: int


@dataclass(frozen=True)
class PatternUpdate:
    """The controller replaced the pattern of ``pods`` (one job's pods that have a
    traffic pattern; a pod without one is left as it is) and recomputed.  Each of
    ``pods`` now has ``new``'s period and duty cycle with its own bandwidth
    (``new`` is the reporting pod's)."""

    job: str
    pods: tuple[str, ...]
    old: TrafficPattern
    new: TrafficPattern
    reason: str


class Watch(NamedTuple):
    """One pod's regulation windows, as the regulation rule keeps them
    (:mod:`tdmcore._kernels.regulation`): rings of its last ``window`` iteration
    times (``win``) and own parts (``own``), of its last ``readjust_horizon`` of both
    (``hist``, ``hown``), its readjustment marks (report indices, oldest first) and
    the counters of all these (entries, write positions, reports taken)."""

    win: NDArray[np.float64]
    own: NDArray[np.float64]
    hist: NDArray[np.float64]
    hown: NDArray[np.float64]
    marks: NDArray[np.int64]
    counters: NDArray[np.int64]

    @classmethod
    def empty(cls, config: ControllerConfig) -> Watch:
        w, h = config.window, config.readjust_horizon
        return cls(np.zeros(w), np.zeros(w), np.zeros(h), np.zeros(h),
                   np.zeros(h + 1, dtype=np.int64), np.zeros(R.N_COUNTERS, dtype=np.int64))

    def copy(self) -> Watch:
        return Watch(self.win.copy(), self.own.copy(), self.hist.copy(), self.hown.copy(),
                     self.marks.copy(), self.counters.copy())

    @property
    def reports(self) -> int:
        """Reports taken."""
        return int(self.counters[R.REPORTS])

    def durations(self) -> list[float]:
        """The window of iteration times, oldest first."""
        return self._ring(self.win, R.W_N, R.W_POS)

    def own_parts(self) -> list[float]:
        """The window of own parts, oldest first."""
        return self._ring(self.own, R.O_N, R.O_POS)

    def history(self) -> list[float]:
        return self._ring(self.hist, R.H_N, R.H_POS)

    def history_own(self) -> list[float]:
        return self._ring(self.hown, R.H_N, R.H_POS)

    def readjusted_at(self) -> list[int]:
        """Report indices of the readjustments still within the horizon."""
        return [int(x) for x in self.marks[:int(self.counters[R.MARKS_N])]]

    def _ring(self, buf: NDArray[np.float64], n_at: int, pos_at: int) -> list[float]:
        n, pos, size = int(self.counters[n_at]), int(self.counters[pos_at]), buf.shape[0]
        return [float(buf[(pos - n + k) % size]) for k in range(n)]


@dataclass(frozen=True)
class Thresholds:
    """One pod's regulation thresholds under the current plans (ms).

    ``slow``: an iteration above is slow (``a_t x baseline``); ``own_lo``/``own_hi``:
    the band of its own part (without communication) outside which a window's
    middle half means a changed pattern; ``idle``: what the plans inject into it;
    ``comm``: the pattern's communication time, kept when the pattern is re-measured.
    """

    slow: float
    own_lo: float
    own_hi: float
    idle: float
    comm: float
    period: float
    tol_ms: float

    def as_limits(self) -> NDArray[np.float64]:
        """The thresholds in the regulation rule's order (``N_LIMITS`` values)."""
        out = np.empty(R.N_LIMITS)
        out[R.SLOW], out[R.OWN_LO], out[R.OWN_HI] = self.slow, self.own_lo, self.own_hi
        out[R.IDLE], out[R.COMM], out[R.PERIOD] = self.idle, self.comm, self.period
        out[R.TOL_MS] = self.tol_ms
        return out


class Controller:
    """Global offsets, phase three and continuous regulation."""

    def __init__(self, state: ClusterState, config: ControllerConfig | None = None) -> None:
        if not isinstance(state, ClusterState):
            raise ValueError(f"state: expected a ClusterState, got {type(state).__name__}")
        if config is not None and not isinstance(config, ControllerConfig):
            raise ValueError(f"config: expected a ControllerConfig, got {type(config).__name__}")
        self.state = state
        self.config = config or ControllerConfig()
        self.links: dict[int, LinkPlan] = {}
        self.offsets_ms: dict[str, float] = {}
        self.recalculations = 0
        #: link plans by (pods on the link, capacity, mode): planning is a pure
        #: function of these, and the optimal search is the controller's costliest
        #: step (a link's pods are often replanned unchanged, e.g. a gang retried)
        self._plans: dict[tuple[Any, ...], LinkPlan] = {}
        self._watch: dict[str, Watch] = {}
        #: job -> the reference job of its affinity component (offset 0)
        self.roots: dict[str, str] = {}
        #: job -> the job it was reached from in the BFS (:meth:`update_offsets`): the
        #: one it shares a planned link with, whose iterations its target follows
        self.parents: dict[str, str] = {}
        #: job -> idle injected into its compute phase, as of the offsets
        self._idle: dict[str, float] = {}
        #: (state version, placed pods, plans, node versions) at the last offset
        #: update: :meth:`on_reserve_gang` and :meth:`on_removed` carry the offsets
        #: over when the only change since is one that cannot move them
        self._synced: tuple[int, int, dict[int, LinkPlan], NDArray[np.int64]] | None = None
        #: job -> start of its latest reported iteration (ms)
        self.anchors_ms: dict[str, float] = {}
        #: job -> the spacing (ms) of the start times that put it on its offset
        #: (:meth:`phase_period_ms`), for jobs reached from a reference job
        self.phase_periods_ms: dict[str, float] = {}

    @classmethod
    def for_policy(cls, state: ClusterState, policy: object) -> Controller:
        """The controller of a Metronome policy, with its ablation flags.

        ``metronome-no-phase3`` never runs phase three and
        ``metronome-no-monitor`` never regulates; other policies get the defaults.
        """
        config = getattr(policy, "config", None)
        if isinstance(config, MetronomeConfig):
            return cls(state, ControllerConfig.for_policy(config))
        return cls(state)

    # ------------------------------------------------------------ scheduling side
    def on_reserve(self, result: ReserveResult) -> dict[str, float]:
        """Take the scheduler's Reserve output; return every pod's global shift (ms).

        With ``SkipPhaseThree = 0`` (and phase three enabled) the link's rotations
        are recalculated in ``optimal`` mode first.
        """
        self._check_reserve("result", result)
        self._take_reserve(result)
        return self.update_offsets()

    def _check_reserve(self, name: str, result: Any) -> None:
        """A ValueError naming ``name`` unless ``result`` is a ReserveResult for a
        node of the cluster (checked before anything changes)."""
        if not isinstance(result, ReserveResult):
            raise ValueError(f"{name}: expected ReserveResult values, got "
                             f"{type(result).__name__}")
        self._check_node(name, result.node)

    def _check_node(self, name: str, node: Any) -> None:
        v.whole(name if name == "node" else f"{name}.node", node, 0,
                len(self.state.cluster) - 1)

    def _recalc_mode(self, optimal: bool) -> str:
        """The plan mode of a link: phase three (``optimal``) when
        asked for and enabled, else the scheduler's ``first``;
        without phase three (``metronome-no-phase3``) always ``compact``, the
        paper's ablation (§IV-C: each low-priority comm phase starts where the
        previous one ends, no cushion slots; docs/scheduler.md)."""
        if not self.config.phase_three:
            return "compact"
        return "optimal" if optimal else "first"

    def _take_reserve(self, result: ReserveResult) -> None:
        if result.shifts_ms:
            if not self.state.link_rows[result.node]:
                # A gang's later pods made every job on this link whole on the
                # node (LowComm): the link has no rows left to plan.
                self.links.pop(result.node, None)
                return
            mode = self._recalc_mode(not result.skip_phase_three)
            plan = result.plan if isinstance(result.plan, LinkPlan) else None
            self.links[result.node] = self._plan(result.node, mode, plan)
        # Without shifts (EarlyReturn, LowComm) the link's rotations stand as they are.

    def on_reserve_gang(self, results: Sequence[ReserveResult]) -> dict[str, float]:
        """:meth:`on_reserve` for every pod of a gang, with one offset update.

        The gang's pods are all in the state before the first Reserve is taken,
        so each link's plan is the one :meth:`on_reserve` would make (the last
        Reserve on a node decides its mode), and the offsets after the last
        are the same.  The intermediate offset updates are skipped, and with
        them the recalculations they would run on links that a later Reserve
        of the gang plans again (so :attr:`recalculations` can be lower than
        pod by pod).
        """
        if isinstance(results, ReserveResult) or not isinstance(results, Sequence):
            raise ValueError(f"results: expected a sequence of ReserveResult (one per pod "
                             f"of the gang), got {type(results).__name__}")
        for result in results:
            self._check_reserve("results", result)
        if self._placement_keeps_offsets(results):
            assert self._synced is not None
            return self._carry_offsets(len(self.state.placed) - self._synced[1])
        for result in results:
            self._take_reserve(result)
        return self.update_offsets()

    def _placement_keeps_offsets(self, results: Sequence[ReserveResult]) -> bool:
        """Whether the only change since the last offset update is the placement
        of pods that no Reserve rotated and whose jobs have no link rows at all
        (LowComm: wholly on one node): then the link rows, the affinity graph, the
        plans and every offset are what they were."""
        synced = self._synced
        if synced is None or any(r.shifts_ms for r in results):
            return False
        version, placed, links, _ = synced
        state = self.state
        added = len(state.placed) - placed
        # as many placements as version steps: no removal, no pattern update
        if added <= 0 or state.version != version + added or not self._same_plans(links):
            return False
        new = itertools.islice(reversed(state.placed.values()), added)
        return all(not state.job_links(job) and job not in self.roots
                   for job in {entry.pod.job for entry in new})

    def on_removed(self, node: int, job: str | None = None) -> dict[str, float]:
        """A pod (of ``job``, when given) left ``node``: recompute that link
        (``optimal`` if enabled) and the offsets.

        With ``job`` given, when that removal is the only change since the last
        offset update, ``node``'s link was not contended then and ``job`` was on no
        contended link, the affinity graph, the plans and every offset are what they
        were: the offsets are carried over instead of recomputed (the same values,
        :meth:`update_offsets` would find them again).
        """
        self._check_node("node", node)  # job may have left the cluster whole
        if job is not None and self._removal_keeps_offsets(node, job):
            return self._carry_offsets()
        self.links.pop(node, None)
        return self.update_offsets()

    def _carry_offsets(self, new_pods: int = 0) -> dict[str, float]:
        """:meth:`update_offsets` when nothing it reads has moved since it last ran
        but jobs came or went: every job keeps its offset (a new one, on no
        contended link, gets 0) and every pod its job's.  Only the ``new_pods``
        placed last need their shift written: every other pod got its job's at the
        last update.  Returns pod -> shift, as :meth:`update_offsets` does."""
        state = self.state
        members = state.job_members
        offsets = {name: self.offsets_ms.get(name, 0.0) for name in members}
        self.offsets_ms = offsets
        self.anchors_ms = {r: a for r, a in self.anchors_ms.items() if r in members}
        for entry in itertools.islice(reversed(state.placed.values()), new_pods):
            entry.shift_ms = float(offsets[entry.pod.job])
        self._mark_synced()
        return {name: offsets[job] for job, names in members.items() for name in names}

    def _same_plans(self, links: dict[int, LinkPlan]) -> bool:
        """Whether :attr:`links` holds exactly the plans of ``links``."""
        return len(self.links) == len(links) and all(
            self.links.get(n) is plan for n, plan in links.items())

    def _mark_synced(self) -> None:
        """Record the state the offsets were last computed on."""
        state = self.state
        self._synced = (state.version, len(state.placed), dict(self.links),
                        state.node_versions.copy())

    def _removal_keeps_offsets(self, node: int, job: str) -> bool:
        """Whether the one change since the last offset update is the removal of a
        pod of ``job`` from ``node``, a link without a plan (not contended), with
        ``job`` on no contended link, and ``job`` has no pod with traffic left on
        ``node``: then no edge of the affinity graph, no plan and no offset moved.

        The last condition matters: a removal then only *deletes* link rows (the
        job's row on ``node``, or all its rows when it becomes LowComm), and a row
        sum summed in the same order without one term cannot grow, even in floating
        point, so no link becomes contended.  Had another pod of ``job`` on ``node``
        taken over the row, the row would move to the end of the link's rows (a
        sum in another order) and could carry another bandwidth: either can tip a
        link over its capacity."""
        synced = self._synced
        if synced is None:
            return False
        version, placed, links, node_versions = synced
        state = self.state
        if not (state.version == version + 1 and len(state.placed) == placed - 1
                and 0 <= node < node_versions.shape[0]
                and state.node_versions[node] == node_versions[node] + 1
                and node not in self.links and self._same_plans(links)
                and job not in self.roots):
            return False
        placed_pods = state.placed
        return not any(placed_pods[m].node == node and placed_pods[m].pod.pattern is not None
                       for m in state.job_members.get(job, ()))

    def plan_link(self, node: int, *, optimal: bool) -> None:
        """(Re)plan ``node``'s link as :meth:`on_reserve` would.

        ``optimal=True`` asks for phase three (``SkipPhaseThree = 0``);
        it runs only when phase three is enabled, else the ``first`` mode does.
        A front end that rebuilds the controller from recorded state (the
        Kubernetes controller after a restart) uses this to restore each link.
        A link with fewer than two traffic pods has nothing to plan: a ValueError
        naming ``node`` (the unification kernel needs two patterns).
        """
        node = v.whole("node", node, 0, len(self.state.cluster) - 1)
        v.boolean("optimal", optimal)
        pods = len(link_pods(self.state, node))
        if pods < 2:
            raise ValueError(f"node: link {node} carries {pods} traffic pod(s); a plan "
                             f"needs at least 2")
        self.links[node] = self._plan(node, self._recalc_mode(v.boolean("optimal", optimal)))

    def _plan(self, node: int, mode: str, reserved: LinkPlan | None = None) -> LinkPlan:
        """The link's plan in ``mode``: from the cache, the Reserve's own plan
        (``reserved``, when it planned these pods with these settings and mode),
        or planned now."""
        if mode == "optimal":
            self.recalculations += 1
        pods = tuple(link_pods(self.state, node))
        key = (pods, float(self.state.cluster.link_gbps[node]), mode)
        plan = self._plans.get(key)
        if plan is None:
            cfg = self.config.scheduler
            if reserved is not None and reserved.result_mode == mode \
                    and (reserved.pods, reserved.capacity_gbps) == key[:2] \
                    and reserved.settings == (cfg.bins, float(cfg.gt_ms), float(cfg.et_frac),
                                              cfg.max_multiple):
                plan = reserved  # planning is a pure function of these: no re-plan
            else:
                plan = link_plan(self.state, node, cfg, mode=mode)
            if len(self._plans) >= PLAN_CACHE:
                del self._plans[next(iter(self._plans))]  # the oldest
            self._plans[key] = plan
        return plan

    def update_offsets(self) -> dict[str, float]:
        """Global offsets by BFS over the affinity graph (§III-C "Global offset").

        Each connected component starts from its highest-priority job (ties: the
        earliest deployed) at shift 0; a job reached over link l gets its parent's
        shift plus the difference of their shifts on l, reduced modulo its phase
        lattice (:meth:`phase_period_ms`).  Jobs on no contended link keep shift 0.
        Returns pod -> shift (ms).

        **[decision]** The spec reduces a global shift modulo the job's own period;
        beside a parent of another period that moves the job off the plan (two
        chained VGG19 beside S2's VGG16 of 91.94 ms: 6.74 ms off).  The lattice is
        the smallest shift that keeps the job's place beside its parent, and equals
        the own period when both periods are equal.
        """
        state = self.state
        snap = Snapshot.of(state)
        edges, _ = contended_edges(snap)
        names = {i: j for j, i in snap.job_ids.items()}
        contended = set(edges[:, 1].tolist())
        for node in list(self.links):
            current = tuple(state.link_rows[node])
            stale = tuple(p.name for p in self.links[node].pods) != current
            if node not in contended or stale:
                del self.links[node]
        for node in contended:
            if node not in self.links:
                self.links[node] = self._plan(node, self._recalc_mode(True))
        # the links of a cycle take one common plan (spec §6, revised 2026-11-28):
        # the offsets then agree on every path around it
        self.links.update(self._joint_plans(edges, names))
        rel: dict[tuple[int, str], float] = {}
        for node, plan in self.links.items():
            for job, rot in plan.job_rotations.items():
                rel[(node, job)] = rot / plan.bins * plan.base.period_ms
        offsets: dict[str, float] = {job: 0.0 for job in state.job_members}
        roots: dict[str, str] = {}
        parents: dict[str, str] = {}
        phase: dict[str, float] = {}
        idle = self.idle_map()
        done: set[int] = set()
        members = state.job_members
        adjacent = adjacency(edges)
        jobs_on_edges = sorted(set(edges[:, 0].tolist()),
                               key=lambda j: (-self._priority(names[j]),
                                              state.placed[members[names[j]][0]].order))
        for root in jobs_on_edges:
            if root in done:
                continue
            for job_id, via, parent in bfs_order(adjacent, root):
                done.add(job_id)
                roots[names[job_id]] = names[root]
                if parent < 0:
                    continue
                job, up = names[job_id], names[parent]
                parents[job] = up
                phase[job] = self._lattice_ms(self.links[via], job, up, idle.get(up, 0.0))
                offsets[job] = (offsets[up] + rel[(via, job)] - rel[(via, up)]) % phase[job]
        self.offsets_ms = offsets
        self.roots = roots
        self.parents = parents
        self._idle = idle
        self.phase_periods_ms = phase
        self.anchors_ms = {r: a for r, a in self.anchors_ms.items() if r in state.job_members}
        self._mark_synced()
        return state.set_job_shifts(offsets)

    def _joint_plans(self, edges: NDArray[np.int64], names: dict[int, str]
                     ) -> dict[int, LinkPlan]:
        """The link plans that change when every block of the affinity graph with a
        cycle takes one common plan (:func:`tdmcore.metronome.joint.plan_blocks`)."""
        blocks = cyclic_blocks(edges)
        if not blocks:
            return {}
        on_links = {p.job_name for b in blocks for n in b.links if n in self.links
                    for p in self.links[n].pods}
        rank = {job: self._rank(job) for job in on_links}
        return plan_blocks(self.links, blocks, names, rank)

    def _known(self, job: str) -> None:
        """A ValueError naming ``job`` unless it has a placed pod (the public
        per-job questions below ask it first; a KeyError said nothing)."""
        if job not in self.state.job_members:
            raise ValueError(f"job: {job!r} has no placed pod")

    def _priority(self, job: str) -> int:
        return self.state.placed[self.state.job_members[job][0]].pod.priority

    def _pattern(self, job: str) -> TrafficPattern | None:
        """The traffic pattern of the job's first pod that has one (LowComm: None)."""
        for name in self.state.job_members[job]:
            pattern = self.state.placed[name].pod.pattern
            if pattern is not None:
                return pattern
        return None

    def _period(self, job: str) -> float:
        pattern = self._pattern(job)
        return pattern.period_ms if pattern is not None else 1.0

    def reference(self, job: str) -> str | None:
        """The job whose reported iterations ``job``'s target follows: its BFS
        parent (:attr:`parents`), the job it shares a planned link with; ``None``
        for a component's reference job or a job on no contended link."""
        self._known(job)
        return self.parents.get(job)

    def target_phase(self, job: str) -> float | None:
        """Where ``job``'s iterations should start, modulo :meth:`phase_period_ms`.

        Offsets place comm phases: the target comm start is the :meth:`reference`
        job's latest reported comm start (iteration start + compute + its injected
        idle) plus the difference of the two offsets, and the job's iteration must
        start its compute time and its own injected idle before that.  Drift of the
        reference job is thereby followed.

        **[decision]** The reference is the job's BFS parent, not its component's
        reference job: the phase lattice keeps the job's place beside its parent, and
        a grandchild's target taken from the component's reference would move by
        that job's period from one of its iterations to the next, which is no
        multiple of the lattice (a chain of 100, 200 and 400 ms: the 400 ms job's
        comm phase lands on the 200 ms job's every other time).
        ``None`` when the job has no reference or the reference has not reported
        yet (then nothing needs aligning).
        """
        self._known(job)
        ref = self.parents.get(job)
        if ref is None or ref not in self.anchors_ms:
            return None
        # Offsets place comm phases (the traffic circle puts a unit's comm first);
        # an iteration computes first (and idles, if injected), so its start is its
        # comm start minus that.
        return float(R.target_phase_ms(self.anchors_ms[ref], self._compute_ms(ref),
                                       self.offsets_ms.get(job, 0.0),
                                       self.offsets_ms.get(ref, 0.0), self._compute_ms(job)))

    def pause_ms(self, job: str, end_ms: float) -> float:
        """The pause after an iteration of ``job`` ending at ``end_ms`` that puts its
        next start on :meth:`target_phase` (its offset when it has none) plus a
        multiple of :meth:`phase_period_ms`: the one rule of a readjustment's length."""
        end_ms = v.real_number("end_ms", end_ms)
        target = self.target_phase(job)
        if target is None:
            target = self.offsets_ms.get(job, 0.0)
        return float(R.pause_ms(target, end_ms, self.phase_period_ms(job)))

    def _lattice_ms(self, plan: LinkPlan, job: str, parent: str, parent_idle_ms: float
                    ) -> float:
        """How far apart the start times of ``job`` that keep its place beside
        ``parent`` on ``plan``'s link are: ``P m_parent / lcm(m_parent, m_job)``.

        On the circle (period ``T``) the parent's pattern repeats every
        ``T / m_parent`` and the job's every ``T / m_job``, so shifting the job by
        any sum of the two leaves the pair's arrangement as planned; the smallest
        such shift is ``T / lcm``.  In real time the circle runs at the parent's
        pace (targets follow its reported iterations), ``T = m_parent x P`` with
        ``P`` the parent's period plus its injected idle.
        """
        mult = {p.job_name: int(m) for p, m in zip(plan.pods, plan.base.multiples,
                                                    strict=True)}
        m_up, m_job = mult.get(parent, 1), mult.get(job, 1)
        return (self._period(parent) + parent_idle_ms) * m_up / math.lcm(m_up, m_job)

    def phase_period_ms(self, job: str) -> float:
        """The spacing of the start times that put ``job`` on its offset: a pause
        or a shift brings its next iteration to :meth:`target_phase` plus a
        multiple of this (its own period when no reference job sets its phase).

        **[decision]** Not the job's own period: beside a reference of another
        period (S2: 91.94 against 98.68 ms; S3: a WideResNet of 200.52 ms beside a
        VGG19 of 102.76 ms, 1:2), the target plus a multiple of the job's own period
        is not where the plan put it.  Two patterns on a circle keep their
        arrangement under shifts by either's unit spacing, so the smallest such
        shift, :meth:`_lattice_ms`, is used.
        """
        self._known(job)
        found = self.phase_periods_ms.get(job)
        return found if found is not None else self._period(job)

    def _compute_ms(self, job: str) -> float:
        """What runs before ``job``'s comm phase in an iteration: its compute time
        plus the idle the link plans inject into it (as of the offsets)."""
        pattern = self._pattern(job)
        if pattern is None:
            return 0.0
        return pattern.period_ms - pattern.comm_ms + self._idle.get(job, 0.0)

    def is_high(self, job: str) -> bool:
        """High priority: no job sharing a contended link with it ranks above it
        (such a job is never paused).

        **[decision]** Jobs rank by priority, then by deploy order: the paper's
        "unless stated otherwise, jobs deployed earlier have higher priority"
        (§IV-A) and its reference pod, "the one deployed earlier" among equal
        priorities (§III-B).  Without this, jobs of equal priority would all be
        "high" and a collision between them would never be regulated.
        """
        self._known(job)
        rank = self._rank(job)
        for plan in self.links.values():
            if job in plan.jobs and any(self._rank(j) > rank for j in plan.jobs):
                return False
        return True

    _is_high = is_high

    def _rank(self, job: str) -> tuple[int, int]:
        members = self.state.job_members[job]
        return (self._priority(job), -self.state.placed[members[0]].order)

    def high_jobs(self) -> set[str]:
        """Every placed job that :meth:`is_high` holds for, in one pass over the
        link plans (``O(pods on planned links)`` instead of per job)."""
        low: set[str] = set()
        for plan in self.links.values():
            ranks = {j: self._rank(j) for j in plan.jobs}
            top = max(ranks.values(), default=(0, 0))
            low.update(j for j, r in ranks.items() if r < top)
        return {job for job in self.state.job_members if job not in low}

    def idle_ms(self, job: str) -> float:
        """Idle injected into ``job``'s compute phase: the most any of its links'
        plans injects (base period unification, docs/traffic-circle.md step 2)."""
        self._known(job)
        idle = 0.0
        for plan in self.links.values():
            for pod, value in zip(plan.pods, plan.base.idle_ms, strict=True):
                if pod.job == job:
                    idle = max(idle, float(value))
        return idle

    def idle_map(self) -> dict[str, float]:
        """:meth:`idle_ms` of every job that has idle injected, in one pass."""
        out: dict[str, float] = {}
        for plan in self.links.values():
            for pod, value in zip(plan.pods, plan.base.idle_ms, strict=True):
                if pod.job is not None and value > 0:
                    out[pod.job] = max(out.get(pod.job, 0.0), float(value))
        return out

    def thresholds(self, job: str, idle_ms: float | None = None) -> Thresholds | None:
        """The regulation thresholds of ``job``'s pods (None for a LowComm job).

        **[decision]** The baseline is the pattern's period plus the injected idle
        (the paper's "ideal duration without communication contention", §III-C):
        idle the controller asks for is no slowdown.  A changed pattern is judged
        on the iteration's own part, its time without communication: contention
        stretches communication, not computation, so it is regulated (pauses)
        and never taken for a new pattern.
        """
        self._known(job)
        pattern = self._pattern(job)
        if pattern is None:
            return None
        cfg = self.config
        if idle_ms is not None and v.real_number("idle_ms", idle_ms) < 0:
            raise ValueError(f"idle_ms: must be >= 0, got {idle_ms!r}")
        idle = self.idle_ms(job) if idle_ms is None else float(idle_ms)
        base = pattern.period_ms + idle
        own = pattern.period_ms - pattern.comm_ms + idle
        band = cfg.drift_tol * base
        return Thresholds(cfg.a_t * base, own - band, own + band, idle, pattern.comm_ms,
                          pattern.period_ms, cfg.drift_tol * pattern.period_ms)

    def watch_state(self, pod: str) -> Watch | None:
        """What the monitor holds for ``pod`` (a copy), None before its first report."""
        watch = self._watch.get(pod)
        return None if watch is None else watch.copy()

    def set_watch_state(self, pod: str, watch: Watch) -> None:
        """Replace the monitor's view of ``pod`` (a front end that takes the reports
        elsewhere, like the simulator's event engine, hands it back this way)."""
        if pod not in self.state.placed:
            raise ValueError(f"pod: {pod!r} is not placed")
        if not isinstance(watch, Watch):
            raise ValueError(f"watch: expected a Watch, got {type(watch).__name__}")
        empty = Watch.empty(self.config)
        if any(a.shape != b.shape or a.dtype != b.dtype
               for a, b in zip(watch, empty, strict=True)):
            raise ValueError("watch: its arrays do not fit this controller's window and "
                             "horizon (shapes and dtypes of Watch.empty)")
        # the compiled rule indexes the rings by these counters unchecked
        c = watch.counters
        w, h = self.config.window, self.config.readjust_horizon
        for n, pos, size, what in ((R.W_N, R.W_POS, w, "window"), (R.O_N, R.O_POS, w, "own"),
                                   (R.H_N, R.H_POS, h, "history")):
            if not (0 <= c[n] <= size and 0 <= c[pos] < size):
                raise ValueError(f"watch: the {what} ring's counters ({c[n]}, {c[pos]}) are "
                                 f"outside 0..{size}")
        if not (0 <= c[R.MARKS_N] <= h + 1 and c[R.REPORTS] >= 0):
            raise ValueError("watch: its readjustment marks or report count are out of range")
        self._watch[pod] = watch.copy()

    @property
    def rules(self) -> NDArray[np.int64]:
        """The regulation's rules in the rule's order (``N_RULES`` values)."""
        cfg = self.config
        out = np.empty(R.N_RULES, dtype=np.int64)
        out[R.WINDOW], out[R.O_T] = cfg.window, cfg.o_t
        out[R.HORIZON], out[R.LIMIT] = cfg.readjust_horizon, cfg.readjust_limit
        return out

    def quiet_bounds(self, job: str, watch: Watch | None) -> tuple[float, float, float] | None:
        """``(own_lo, own_hi, longest)``: reports of ``job`` whose own part lies in
        ``[own_lo, own_hi]`` and whose time is at most ``longest`` make the
        controller do nothing, given ``watch`` (its pod's windows; None: empty);
        None when the windows themselves rule that out.  Unbounded when nothing is
        regulated (no monitor, or a LowComm job)."""
        limits = self.thresholds(job)
        if not self.config.monitor or limits is None:
            return -np.inf, np.inf, np.inf
        x = Watch.empty(self.config) if watch is None else watch
        bounds: tuple[float, float, float] | None = R.bounds(
            *x, limits.as_limits(), self.rules, self.is_high(job))
        return bounds

    def absorb_quiet(self, pod: str, count: int, starts_ms: ArrayLike,
                     durations_ms: ArrayLike, comms_ms: ArrayLike | None = None) -> None:
        """``count`` finished iterations of ``pod``, of which the caller knows that
        none triggers anything (no slow count over ``o_t``, no drifted window);
        only the last ones are given (at least the history's length when ``count``
        is larger).  The result is what ``count`` calls of :meth:`report_iteration`
        would leave.
        """
        count = v.whole("count", count, 0)
        starts = v.as_float_array("starts_ms", starts_ms, ndim=1)
        durations = v.as_float_array("durations_ms", durations_ms, ndim=1)
        if starts.shape != durations.shape or durations.size > count:
            raise ValueError("durations_ms: expected at most `count` values, one per start")
        if durations.size < min(count, self.config.readjust_horizon):
            raise ValueError("durations_ms: give at least the last readjust_horizon values")
        entry = self.state.placed.get(pod)
        if entry is None:
            raise ValueError(f"pod: {pod!r} is not placed")
        comms = None
        if comms_ms is not None:
            comms = v.as_float_array("comms_ms", comms_ms, ndim=1)
            if comms.shape != starts.shape or np.any(comms < 0) or np.any(comms > durations):
                raise ValueError("comms_ms: expected one value in [0, duration] per start")
        if np.any(durations <= 0):
            raise ValueError("durations_ms: must be > 0")
        skipped = count - durations.size
        regulated = self.config.monitor and entry.pod.pattern is not None
        if regulated:
            # a dry run on a copy first: reports that are not quiet change nothing
            limits = self.thresholds(entry.pod.job)
            assert limits is not None
            trial = (self._watch[pod].copy() if pod in self._watch
                     else Watch.empty(self.config))
            trial.counters[R.REPORTS] += skipped
            own = durations - (comms if comms is not None else limits.comm)
            quiet = R.take_quiet(*trial, limits.as_limits(), self.rules, durations, own,
                                 self._is_high(entry.pod.job))
            if quiet < durations.size:
                raise ValueError(f"durations_ms: these reports are not quiet (report "
                                 f"{quiet} of {durations.size} would act)")
            # all quiet: the trial is what report_iterations would leave, taken once
            self._watch[pod] = trial
            self._advance_anchor(entry.pod.job, starts)
            return
        actions = self.report_iterations(pod, starts, durations, comms)
        assert not actions, actions  # nothing is regulated: only the anchor moves

    def _advance_anchor(self, job: str, starts: NDArray[np.float64]) -> None:
        """The job's anchor after reports starting at ``starts`` (none: unchanged)."""
        if starts.size:
            self.anchors_ms[job] = max(float(starts.max()), self.anchors_ms.get(job, -np.inf))

    def _new_watch(self, pod: str) -> Watch:
        watch = self._watch.get(pod)
        if watch is None:
            watch = self._watch[pod] = Watch.empty(self.config)
        return watch

    # --------------------------------------------------------------- monitoring
    def report_iteration(self, pod: str, start_ms: float, duration_ms: float,
                         comm_ms: float | None = None) -> list[Readjustment | PatternUpdate]:
        """One finished iteration of ``pod``; returns what the front end must apply.

        Continuous regulation, by the rule of :mod:`tdmcore._kernels.regulation`
        (the simulator's event engine runs the same lines): in the last ``window``
        iterations, more than ``o_t`` slower than ``a_t`` x the baseline -> pause a
        low-priority pod so that its next iteration starts on its assigned offset
        (:meth:`target_phase`; high-priority pods are never paused).  Otherwise,
        with a full window of own parts (``duration - comm_ms``; without
        ``comm_ms``, the pattern's communication time is taken off) whose middle
        half (25th to 75th percentile) lies outside the band of
        :meth:`thresholds`, or after ``readjust_limit`` readjustments within
        ``readjust_horizon`` iterations, the pattern is re-measured
        (:meth:`_update_pattern`).
        """
        entry = self.state.placed.get(pod)
        if entry is None:
            raise ValueError(f"pod: {pod!r} is not placed")
        start = v.real_number("start_ms", start_ms)
        duration = v.real_number("duration_ms", duration_ms)
        if duration <= 0:
            raise ValueError("duration_ms: must be > 0")
        if comm_ms is not None and not 0 <= v.real_number("comm_ms", comm_ms) <= duration:
            raise ValueError("comm_ms: must lie in [0, duration_ms]")
        pattern = entry.pod.pattern
        job = entry.pod.job
        self.anchors_ms[job] = max(start, self.anchors_ms.get(job, start))
        if not self.config.monitor or pattern is None:
            return []
        limits = self.thresholds(job)
        assert limits is not None
        watch = self._new_watch(pod)
        own = duration - (float(comm_ms) if comm_ms is not None else limits.comm)
        outcome, period, comm, slow = R.report(*watch, limits.as_limits(), self.rules,
                                               duration, own, self._is_high(job))
        if outcome == R.DRIFT_UPDATE:
            update = self._update_pattern(job, pattern, period, comm, "pattern drift")
            return [] if update is None else [update]
        if outcome not in (R.PAUSE, R.PAUSE_KEEP, R.PAUSE_UPDATE):
            return []
        out: list[Readjustment | PatternUpdate] = [Readjustment(
            pod, self.pause_ms(job, start + duration), int(slow))]
        if outcome == R.PAUSE_UPDATE:
            update = self._update_pattern(job, pattern, period, comm,
                                          "repeated readjustments")
            if update is not None:
                out.append(update)
        return out

    def report_iterations(self, pod: str, starts_ms: ArrayLike, durations_ms: ArrayLike,
                          comms_ms: ArrayLike | None = None, *, batch: bool = False
                          ) -> list[tuple[int, Readjustment | PatternUpdate]]:
        """Several finished iterations of ``pod`` at once, oldest first.

        Exactly the same as calling :meth:`report_iteration` for each in turn (the
        test suite checks this); the reports that lead to nothing are taken in one
        compiled loop.  Returns ``(index, action)`` pairs: the action the index-th
        report caused.

        With ``batch``, the reports come from a pod that acts only on the answer to
        the whole batch (the bridge's training hook): the iterations after the
        batch's first readjustment ran before the pod could pause, so they are no
        evidence for another one.  They count as reports and move the job's anchor,
        nothing else; the pod's window starts afresh with its next batch.
        """
        entry = self.state.placed.get(pod)
        if entry is None:
            raise ValueError(f"pod: {pod!r} is not placed")
        starts = v.as_float_array("starts_ms", starts_ms, ndim=1)
        durations = v.as_float_array("durations_ms", durations_ms, ndim=1)
        if durations.shape != starts.shape:
            raise ValueError("durations_ms: expected one value per start")
        if np.any(durations <= 0):
            raise ValueError("durations_ms: must be > 0")
        comms = None
        if comms_ms is not None:
            comms = v.as_float_array("comms_ms", comms_ms, ndim=1)
            if comms.shape != starts.shape or np.any(comms < 0) or np.any(comms > durations):
                raise ValueError("comms_ms: expected one value in [0, duration] per start")
        out: list[tuple[int, Readjustment | PatternUpdate]] = []
        n = starts.shape[0]
        if n == 0:
            return out
        job = entry.pod.job
        k = 0
        while k < n:
            pattern = self.state.placed[pod].pod.pattern
            if not self.config.monitor or pattern is None:
                self._advance_anchor(job, starts[k:])
                return out
            limits = self.thresholds(job)
            assert limits is not None
            own = durations[k:] - (comms[k:] if comms is not None else limits.comm)
            m = R.take_quiet(*self._new_watch(pod), limits.as_limits(), self.rules,
                             durations[k:], own, self._is_high(job))
            if m:
                self._advance_anchor(job, starts[k:k + m])
                k += m
            if k < n:
                actions = self.report_iteration(pod, float(starts[k]), float(durations[k]),
                                                None if comms is None else float(comms[k]))
                out.extend((k, a) for a in actions)
                k += 1
                if batch and k < n and any(isinstance(a, Readjustment) for a in actions):
                    self._advance_anchor(job, starts[k:])
                    self._new_watch(pod).counters[R.REPORTS] += n - k
                    return out
        return out

    def _update_pattern(self, job: str, pattern: TrafficPattern, period: float,
                        comm: float, reason: str) -> PatternUpdate | None:
        """Give ``job`` the pattern the regulation rule re-measured.

        **[decision]** After a drift of its own part (no pause involved), the
        period is the median own part, less the injected idle, plus the pattern's
        communication time: a measured comm phase cannot tell a larger gradient
        from a contended link, so the declared all-reduce time is kept (the duty
        cycle follows the period).  After repeated readjustments the pod is
        measured as the paper profiles it, "in an environment without contention"
        (spec §7, revised 2026-11-28): from the history's uncontended iterations,
        those at or below ``a_t`` x the baseline (their median time less the idle,
        their median communication time), or, when none was uncontended, from its
        own part as after a drift.  A contended iteration never sets the pattern,
        and the injected idle is always taken off, so a pause that did not cure
        contention cannot drop the idle unification injected (before the revision
        the contended median became the period: S2's low job 91.94 -> 101.19 ms,
        which removed its idle and silenced the monitor).  The rule's one owner is
        :mod:`tdmcore._kernels.regulation` (``regulation.pxd``).  A period within
        ``drift_tol`` of the current one changes nothing (the rule's ``*_KEEP``
        outcomes: the evidence that prompted the check is consumed, the window of
        own parts after a drift, the readjustment marks after repeated
        readjustments, and the pattern stands).

        All of the job's pods with a pattern take the new period and duty cycle,
        each keeping its own bandwidth; its pods without one are left alone.  The
        new patterns are all built before the first is written.
        """
        duty = min(1.0, max(comm, 0.0) / period)
        new = TrafficPattern(period, duty, pattern.bandwidth_gbps)
        if new == pattern:
            return None
        placed = self.state.placed
        # Only the job's traffic pods take the new period and duty cycle, each
        # keeping its own bandwidth: a pod without a pattern sends nothing.  Every
        # new pattern is built before the first is written (all or nothing).
        updates = {name: TrafficPattern(period, duty, own.bandwidth_gbps)
                   for name in self.state.job_members[job]
                   if (own := placed[name].pod.pattern) is not None}
        members = tuple(updates)
        nodes = set()
        for name, pod_pattern in updates.items():
            self.state.update_pattern(name, pod_pattern)
            nodes.add(placed[name].node)
            self._watch.pop(name, None)
        for node in nodes:
            self.links.pop(node, None)
        self.update_offsets()
        return PatternUpdate(job, members, pattern, new, reason)
