"""The stop-and-wait controller (paper §III-C, docs/scheduler.md): one facade over
its rooms in :mod:`tdmcore.metronome.control`.

Front-end independent: the simulator feeds it iteration reports from its network
model, the Kubernetes bridge from the agents; both apply what it returns (time
shifts, pauses, pattern updates).  :class:`Controller` ties together the link
plans (:class:`~tdmcore.metronome.control.planner.Planner`: Reserve outputs,
phase three, joint plans of cycles), the global offsets they give
(:class:`~tdmcore.metronome.control.alignment.Alignment`, a pure value with the
one table of target-phase terms) and the continuous regulation
(:class:`~tdmcore.metronome.control.monitor.Monitor`); its settings and values
live in :mod:`tdmcore.metronome.control.config`.  A front end that keeps state
of its own hands it over through :meth:`Controller.restore` (the bridge's
rebuild) or :meth:`Controller.export_watch` / :meth:`Controller.absorb_watch` /
:meth:`Controller.advance_anchor` (the simulator's event engine).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import _validation as v
from .._kernels import regulation as R
from ..framework import ReserveResult
from ..model import ClusterState, TrafficPattern
from ..snapshot import Snapshot
from .affinity import contended_edges
from .control.alignment import Alignment, TargetTerms, align
from .control.config import (
    ControllerConfig,
    PatternUpdate,
    Readjustment,
    Thresholds,
    Watch,
    job_pattern,
)
from .control.monitor import Monitor
from .control.planner import Planner
from .link import LinkPlan
from .policies.metronome import MetronomeConfig

__all__ = ["Controller", "ControllerConfig", "PatternUpdate", "Readjustment",
           "TargetTerms", "Thresholds", "Watch"]


class Controller:
    """Global offsets, phase three and continuous regulation.

    ``planner``, ``alignment`` and ``monitor`` are its rooms; :attr:`links`,
    :attr:`offsets_ms`, :attr:`roots`, :attr:`parents`, :attr:`phase_periods_ms`,
    :attr:`anchors_ms` and :attr:`recalculations` read them.
    """

    def __init__(self, state: ClusterState, config: ControllerConfig | None = None) -> None:
        if not isinstance(state, ClusterState):
            raise ValueError(f"state: expected a ClusterState, got {type(state).__name__}")
        if config is not None and not isinstance(config, ControllerConfig):
            raise ValueError(f"config: expected a ControllerConfig, got {type(config).__name__}")
        self.state = state
        self.config = config or ControllerConfig()
        self.planner = Planner(state, self.config)
        self.monitor = Monitor(state, self.config, self)
        self.alignment = Alignment()

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

    # ------------------------------------------------------------ what the rooms hold
    @property
    def links(self) -> dict[int, LinkPlan]:
        """node -> the plan of its contended link."""
        return self.planner.links

    @property
    def recalculations(self) -> int:
        """Links planned in ``optimal`` mode (phase three) so far."""
        return self.planner.recalculations

    @property
    def offsets_ms(self) -> dict[str, float]:
        """job -> global offset (ms)."""
        return self.alignment.offsets_ms

    @property
    def roots(self) -> dict[str, str]:
        """job -> the reference job of its affinity component (offset 0)."""
        return self.alignment.roots

    @property
    def parents(self) -> dict[str, str]:
        """job -> the job it was reached from in the BFS (:meth:`update_offsets`): the
        one it shares a planned link with, whose iterations its target follows."""
        return self.alignment.parents

    @property
    def phase_periods_ms(self) -> dict[str, float]:
        """job -> the spacing (ms) of the start times that put it on its offset
        (:meth:`phase_period_ms`), for jobs reached from a reference job."""
        return self.alignment.phase_periods_ms

    @property
    def anchors_ms(self) -> dict[str, float]:
        """job -> start of its latest reported iteration (ms); change it through
        :meth:`advance_anchor`."""
        return self.monitor.anchors_ms

    @property
    def rules(self) -> NDArray[np.int64]:
        """The regulation's rules in the rule's order (``N_RULES`` values)."""
        return self.monitor.rules

    # ------------------------------------------------------------ scheduling side
    def on_reserve(self, result: ReserveResult) -> dict[str, float]:
        """Take the scheduler's Reserve output; return every pod's global shift (ms).

        With ``SkipPhaseThree = 0`` (and phase three enabled) the link's rotations
        are recalculated in ``optimal`` mode first.
        """
        self._check_reserve("result", result)
        self.planner.take_reserve(result)
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
        if self.planner.placement_keeps_offsets(results, self.roots):
            assert self.planner.synced is not None
            return self._carry_offsets(len(self.state.placed) - self.planner.synced[1])
        for result in results:
            self.planner.take_reserve(result)
        return self.update_offsets()

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
        if job is not None and self.planner.removal_keeps_offsets(node, job, self.roots):
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
        self.alignment = self.alignment.carried(members)
        offsets = self.alignment.offsets_ms
        self.monitor.forget(members)
        for entry in itertools.islice(reversed(state.placed.values()), new_pods):
            entry.shift_ms = float(offsets[entry.pod.job])
        self.planner.mark_synced()
        return {name: offsets[job] for job, names in members.items() for name in names}

    def plan_link(self, node: int, *, optimal: bool) -> None:
        """(Re)plan ``node``'s link as :meth:`on_reserve` would.

        ``optimal=True`` asks for phase three (``SkipPhaseThree = 0``);
        it runs only when phase three is enabled, else the ``first`` mode does.
        A link with fewer than two traffic pods has nothing to plan: a ValueError
        naming ``node`` (the unification kernel needs two patterns).
        """
        self.planner.plan_link(node, optimal=optimal)

    def update_offsets(self) -> dict[str, float]:
        """Replan what changed (:meth:`Planner.refresh
        <tdmcore.metronome.control.planner.Planner.refresh>`) and walk the affinity
        graph for the global offsets (:func:`~tdmcore.metronome.control.alignment.
        align`, §III-C "Global offset").  Jobs on no contended link keep offset 0.
        Returns pod -> shift (ms)."""
        state = self.state
        snap = Snapshot.of(state)
        edges, _ = contended_edges(snap)
        names = {i: j for j, i in snap.job_ids.items()}
        self.planner.refresh(edges, names)
        self.alignment = align(state, self.links, edges, names, self.planner.idle_map())
        self.monitor.forget(state.job_members)
        self.planner.mark_synced()
        return state.set_job_shifts(self.alignment.offsets_ms)

    def restore(self, plans: Mapping[int, LinkPlan | bool], *,
                watches: Mapping[str, Watch] | None = None,
                anchors_ms: Mapping[str, float] | None = None) -> dict[str, float]:
        """Rebuild from what a front end recorded (the Kubernetes controller after a
        restart or a rebuild of its state), then :meth:`update_offsets`.

        ``plans``: node -> a :class:`~tdmcore.metronome.link.LinkPlan` made earlier
        for exactly the link's traffic pods and capacity (taken as it is), or the
        ``optimal`` flag to plan it with (:meth:`plan_link`).  ``watches`` (pod ->
        regulation windows) and ``anchors_ms`` (job -> latest iteration start) carry
        over for the pods and jobs still placed; the others are dropped.  Everything
        is checked before anything changes.  Returns pod -> shift (ms).
        """
        watches = {p: w for p, w in (watches or {}).items() if p in self.state.placed}
        anchors = dict(anchors_ms or {})
        self.planner.check_restore(plans)
        for pod, watch in watches.items():
            self.monitor.check_watch(pod, watch)
        for job, start in anchors.items():
            if not isinstance(start, (int, float)) or math.isnan(start):
                raise ValueError(f"anchors_ms: {job!r} has no start time ({start!r})")
        self.planner.restore(plans)
        self.monitor.watches.update({p: w.copy() for p, w in watches.items()})
        self.monitor.anchors_ms.update({j: float(a) for j, a in anchors.items()
                                        if j in self.state.job_members})
        return self.update_offsets()

    # ------------------------------------------------------------ where jobs start
    def _known(self, job: str) -> None:
        """A ValueError naming ``job`` unless it has a placed pod (the public
        per-job questions below ask it first; a KeyError said nothing)."""
        if job not in self.state.job_members:
            raise ValueError(f"job: {job!r} has no placed pod")

    def _pattern(self, job: str) -> TrafficPattern | None:
        """The traffic pattern of the job's first pod that has one (LowComm: None)."""
        return job_pattern(self.state, job)

    def _period(self, job: str) -> float:
        pattern = self._pattern(job)
        return pattern.period_ms if pattern is not None else 1.0

    def reference(self, job: str) -> str | None:
        """The job whose reported iterations ``job``'s target follows: its BFS
        parent (:attr:`parents`), the job it shares a planned link with; ``None``
        for a component's reference job or a job on no contended link."""
        self._known(job)
        return self.parents.get(job)

    def target_terms(self, job: str) -> TargetTerms | None:
        """The terms of ``job``'s target phase besides its reference's anchor
        (:meth:`Alignment.target_terms
        <tdmcore.metronome.control.alignment.Alignment.target_terms>`), the table
        the simulator's engine loads; None without a reference."""
        self._known(job)
        return self.alignment.target_terms(job)

    def target_phase(self, job: str) -> float | None:
        """Where ``job``'s iterations should start, modulo :meth:`phase_period_ms`.

        Offsets place comm phases: the target comm start is the :meth:`reference`
        job's latest reported comm start (iteration start + compute + its injected
        idle) plus the difference of the two offsets, and the job's iteration must
        start its compute time and its own injected idle before that
        (:meth:`Alignment.target_phase
        <tdmcore.metronome.control.alignment.Alignment.target_phase>`, by
        ``regulation.pxd``'s ``target_phase``, the engine's formula too).  Drift of
        the reference job is thereby followed.  ``None`` when the job has no
        reference or the reference has not reported yet.
        """
        self._known(job)
        return self.alignment.target_phase(job, self.anchors_ms)

    def pause_ms(self, job: str, end_ms: float) -> float:
        """The pause after an iteration of ``job`` ending at ``end_ms`` that puts its
        next start on :meth:`target_phase` (its offset when it has none) plus a
        multiple of :meth:`phase_period_ms` (``regulation.pxd``'s ``pause_to``)."""
        end_ms = v.real_number("end_ms", end_ms)
        target = self.target_phase(job)
        if target is None:
            target = self.offsets_ms.get(job, 0.0)
        return float(R.pause_ms(target, end_ms, self.phase_period_ms(job)))

    def phase_period_ms(self, job: str) -> float:
        """The spacing of the start times that put ``job`` on its offset: a pause
        or a shift brings its next iteration to :meth:`target_phase` plus a
        multiple of this (its own period when no reference job sets its phase;
        else :func:`~tdmcore.metronome.control.alignment.lattice_ms`)."""
        self._known(job)
        found = self.phase_periods_ms.get(job)
        return found if found is not None else self._period(job)

    # ------------------------------------------------------------ what the plans say
    def is_high(self, job: str) -> bool:
        """High priority: no job sharing a contended link with it ranks above it
        (such a job is never paused; :meth:`Planner.is_high
        <tdmcore.metronome.control.planner.Planner.is_high>`)."""
        self._known(job)
        return self.planner.is_high(job)

    def high_jobs(self) -> set[str]:
        """Every placed job that :meth:`is_high` holds for, in one pass."""
        return self.planner.high_jobs()

    def idle_ms(self, job: str) -> float:
        """Idle injected into ``job``'s compute phase: the most any of its links'
        plans injects (base period unification, docs/traffic-circle.md step 2)."""
        self._known(job)
        return self.planner.idle_ms(job)

    def idle_map(self) -> dict[str, float]:
        """:meth:`idle_ms` of every job that has idle injected, in one pass."""
        return self.planner.idle_map()

    def thresholds(self, job: str, idle_ms: float | None = None) -> Thresholds | None:
        """The regulation thresholds of ``job``'s pods (None for a LowComm job), with
        :meth:`idle_ms` injected unless ``idle_ms`` is given
        (:meth:`Thresholds.of <tdmcore.metronome.control.config.Thresholds.of>`)."""
        self._known(job)
        return self.planner.thresholds(job, idle_ms)

    # ------------------------------------------------------------ regulation (the monitor)
    def report_iteration(self, pod: str, start_ms: float, duration_ms: float,
                         comm_ms: float | None = None) -> list[Readjustment | PatternUpdate]:
        """One finished iteration of ``pod``; what the front end must apply
        (:meth:`Monitor.report_iteration
        <tdmcore.metronome.control.monitor.Monitor.report_iteration>`)."""
        return self.monitor.report_iteration(pod, start_ms, duration_ms, comm_ms)

    def report_iterations(self, pod: str, starts_ms: ArrayLike, durations_ms: ArrayLike,
                          comms_ms: ArrayLike | None = None, *, batch: bool = False
                          ) -> list[tuple[int, Readjustment | PatternUpdate]]:
        """Several finished iterations of ``pod`` at once, oldest first
        (:meth:`Monitor.report_iterations
        <tdmcore.metronome.control.monitor.Monitor.report_iterations>`)."""
        return self.monitor.report_iterations(pod, starts_ms, durations_ms, comms_ms,
                                              batch=batch)

    def absorb_quiet(self, pod: str, count: int, starts_ms: ArrayLike,
                     durations_ms: ArrayLike, comms_ms: ArrayLike | None = None) -> None:
        """``count`` finished iterations of ``pod`` known to trigger nothing
        (:meth:`Monitor.absorb_quiet
        <tdmcore.metronome.control.monitor.Monitor.absorb_quiet>`)."""
        self.monitor.absorb_quiet(pod, count, starts_ms, durations_ms, comms_ms)

    def quiet_bounds(self, job: str, watch: Watch | None) -> tuple[float, float, float] | None:
        """``(own_lo, own_hi, longest)`` under which ``job``'s reports are quiet
        (:meth:`Monitor.quiet_bounds
        <tdmcore.metronome.control.monitor.Monitor.quiet_bounds>`)."""
        return self.monitor.quiet_bounds(job, watch)

    def watch_state(self, pod: str) -> Watch | None:
        """What the monitor holds for ``pod`` (a copy), None before its first report."""
        return self.monitor.watch_state(pod)

    def set_watch_state(self, pod: str, watch: Watch) -> None:
        """Replace the monitor's view of ``pod`` (checked first)."""
        self.monitor.set_watch_state(pod, watch)

    def export_watch(self, pod: str) -> Watch:
        """``pod``'s regulation windows for a front end that takes its reports
        elsewhere (the simulator's event engine): a copy, empty before its first
        report.  :meth:`absorb_watch` hands them back."""
        if pod not in self.state.placed:
            raise ValueError(f"pod: {pod!r} is not placed")
        watch = self.monitor.watch_state(pod)
        return Watch.empty(self.config) if watch is None else watch

    def export_watches(self) -> dict[str, Watch]:
        """Every pod's regulation windows (copies), for :meth:`restore`."""
        return {pod: watch.copy() for pod, watch in self.monitor.watches.items()}

    def absorb_watch(self, pod: str, watch: Watch) -> None:
        """Take back ``pod``'s regulation windows after reports taken elsewhere by
        the same rule (:meth:`export_watch`); checked before anything changes."""
        self.monitor.set_watch_state(pod, watch)

    def advance_anchor(self, job: str, start_ms: float, *, first: bool = False) -> None:
        """An iteration of ``job`` started at ``start_ms``, reported elsewhere: its
        anchor (:attr:`anchors_ms`) moves there unless it is already later
        (``-inf``: no iteration yet, nothing changes).  With ``first``, the start
        of its first iteration: taken only when the job has no anchor yet."""
        if not isinstance(job, str):
            raise ValueError(f"job: expected a job name, got {type(job).__name__}")
        start = float(start_ms)
        if math.isnan(start):
            raise ValueError("start_ms: expected a time, got nan")
        if first:
            self.monitor.anchors_ms.setdefault(job, start)
        else:
            self.monitor.advance_anchor(job, start)

    def _replan(self, nodes: set[int]) -> None:
        """The patterns of pods on ``nodes`` changed: drop those links' plans and
        recompute (the monitor's pattern updates)."""
        for node in nodes:
            self.links.pop(node, None)
        self.update_offsets()
