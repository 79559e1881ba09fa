"""The controller's view of the jobs in the event engine (docs/simulator.md).

The stop-and-wait controller (:class:`tdmcore.metronome.controller.Controller`) owns
the offsets, the link plans and the regulation windows; the engine regulates
in the loop by the same rule (:mod:`tdmcore._kernels.regulation`).  This keeps the
two in step: it loads each engine job's thresholds, priority, target phase and
windows from the controller, hands the controller a report the engine stopped
before, applies what the controller decides (pauses, new offsets, injected idle)
to the running jobs, and gives the controller the anchors (latest iteration
starts) the engine and the closed-form stretches saw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..._kernels import regulation as R
from ...metronome.controller import Controller, PatternUpdate, Readjustment, Watch
from ...model import ClusterState
from ..engine.network import FlowEngine
from .book import Book

if TYPE_CHECKING:
    from .skip_ahead import SkipAhead


def load_monitor_params(engine: FlowEngine, j: int, ctrl: Controller, name: str,
                        high: set[str], slot_of: dict[str, int], *, monitor: bool,
                        idle: dict[str, float] | None = None) -> None:
    """Give engine slot ``j`` (job ``name``) the controller's current view of it:
    its regulation thresholds (:meth:`Controller.thresholds`; ``idle`` is
    :meth:`Controller.idle_map` when the caller has it), whether it is high
    priority (``high``: :meth:`Controller.high_jobs`), and the terms of its target
    phase (:meth:`Controller.target_terms`, the alignment's one table: the
    reference job's slot in ``slot_of`` and the terms the engine adds up with
    ``regulation.pxd``'s ``target_phase``; a reference outside the engine leaves
    the pause to the controller).
    """
    limits = ctrl.thresholds(name, None if idle is None else idle.get(name, 0.0))
    found = ctrl.target_terms(name)
    slot, terms = -1, None  # no reference: the target is the offset itself
    if found is not None:
        if found.reference in slot_of:
            slot = slot_of[found.reference]
            terms = (found.compute_ref_ms, found.offset_job_ms, found.offset_ref_ms,
                     found.compute_job_ms)
        else:  # the reference runs outside the engine: the controller computes the target
            slot = -2
    engine.set_regulation(j, monitor and limits is not None, name in high,
                          None if limits is None else limits.as_limits(),
                          ctrl.offsets_ms.get(name, 0.0), ctrl.phase_period_ms(name), slot,
                          terms)


class ControllerMirror:
    """Keeps the engine's regulation and the controller in step."""

    def __init__(self, book: Book, controller: Controller, state: ClusterState) -> None:
        self.book, self.controller, self.state = book, controller, state
        self.monitor = controller.config.monitor
        self.pattern_updates = 0
        self.skip: SkipAhead | None = None  # set by the run: closed forms end here
        book.on_enter = self._entered
        book.on_leave = self._left

    # ------------------------------------------------------------ a job enters, leaves
    def _entered(self, name: str, j: int) -> None:
        anchor = self.controller.anchors_ms.get(name)
        self.book.engine.set_anchor(j, -np.inf if anchor is None else anchor)
        self.load_params(name, j, self.controller.high_jobs())
        self.load_watch(name)

    def _left(self, name: str, j: int) -> None:
        eng = self.book.engine
        if self.monitor:
            self.controller.absorb_watch(self.pod(name), Watch(*eng.watch(j)))
        self.controller.advance_anchor(name, eng.anchor(j))

    def pod(self, name: str) -> str:
        """The pod that reports for job ``name``."""
        return self.state.job_members[name][0]

    # ------------------------------------------------------------ engine <- controller
    def load_watch(self, name: str) -> None:
        """The engine takes the controller's regulation windows of ``name``."""
        self.book.engine.set_watch(self.book.slot[name],
                                   *self.controller.export_watch(self.pod(name)))

    def load_params(self, name: str, j: int, high: set[str],
                    idle: dict[str, float] | None = None) -> None:
        load_monitor_params(self.book.engine, j, self.controller, name, high, self.book.slot,
                            monitor=self.monitor, idle=idle)

    def refresh_params(self) -> None:
        """Every engine job's thresholds, priority and target after a change."""
        if not self.book.slot:
            return
        high = self.controller.high_jobs()
        idle = self.controller.idle_map()
        for name, j in self.book.slot.items():
            self.load_params(name, j, high, idle)

    # ------------------------------------------------------------ engine -> controller
    def sync_anchors(self) -> None:
        """The controller's anchors from the engine (every reported iteration start)."""
        for name, j in self.book.slot.items():
            self.controller.advance_anchor(name, self.book.engine.anchor(j))

    def refresh_anchor(self, job: str, t: float) -> None:
        """Before ``job`` is aligned: if its reference job runs in closed form, give
        the controller that job's latest iteration start by ``t`` (what its reports
        would have said)."""
        ref = self.controller.reference(job)
        if ref is None or self.skip is None:
            return
        last = self.skip.last_start(ref, t)
        if last is not None:
            self.controller.advance_anchor(ref, last)

    def report(self, j: int, t: float) -> None:
        """The engine stopped before job slot ``j``'s report: the controller takes it
        (a changed pattern, repeated readjustments, or a target it must compute)."""
        ctrl = self.controller
        book, eng = self.book, self.book.engine
        name = book.name_of[j]
        pod = self.pod(name)
        self.sync_anchors()
        self.refresh_anchor(name, t)
        ctrl.absorb_watch(pod, Watch(*eng.watch(j)))
        before = dict(ctrl.offsets_ms)
        start, duration, own = eng.last_report(j)
        # the agent measures the comm phase (with the latency tail): what is not its own
        comm = min(max(duration - own, 0.0), duration)
        actions = ctrl.report_iteration(pod, start, duration, comm)
        changed = False
        for action in actions:
            if isinstance(action, Readjustment):
                self.pause(name, t, action.pause_ms)
            elif isinstance(action, PatternUpdate):
                self.pattern_updates += 1
                changed = True
        eng.resume(j, t)
        if changed:
            self.update_idle(t)
            self.apply_offsets(t, before, exclude="")
            self.refresh_params()
        else:
            self.load_params(name, j, ctrl.high_jobs())
        self.load_watch(name)

    # ------------------------------------------------------------ the controller acts
    def pause(self, name: str, at_ms: float, pause_ms: float) -> None:
        """The controller paused job ``name`` (between iterations at ``at_ms``)."""
        book = self.book
        res = book.results[name]
        res.readjustments += 1
        period = self.controller.phase_period_ms(name)
        j = book.slot[name]
        book.engine.hold(j, (at_ms + pause_ms) % period, period)
        book.engine.mark_paused(j, at_ms)  # counted as it is taken (a shift may move it)

    def idle_map(self) -> dict[str, float]:
        """Idle injection: each job's compute phase grows by the most any link of it
        injects (base period unification, step 2; :meth:`Controller.idle_map`)."""
        return self.controller.idle_map()

    def update_idle(self, t: float) -> None:
        """Every running job's injected idle from the current plans (new idle ends a
        closed-form stretch)."""
        idle = self.idle_map()
        if self.skip is not None:
            for name, stretch in list(self.skip.stretches.items()):
                if idle.get(name, 0.0) != stretch.idle:
                    self.skip.to_engine(name, t)
        for name, j in self.book.slot.items():
            self.book.engine.set_idle(j, idle.get(name, 0.0))

    def apply_offsets(self, t: float, before: dict[str, float], exclude: str) -> None:
        """After the offsets changed: move each running low-priority job whose offset
        changed onto its new target phase (high-priority jobs are never moved)."""
        ctrl, book = self.controller, self.book
        after = ctrl.offsets_ms
        stretches = self.skip.stretches if self.skip is not None else {}
        moved = [name for name in (*book.slot, *stretches)
                 if name != exclude and not ctrl.is_high(name)
                 and not (name in before and abs(after.get(name, 0.0) - before[name]) <= 1e-9)]
        for name in moved:
            if name in stretches:  # a shift ends a closed form
                assert self.skip is not None
                self.skip.to_engine(name, t)
        self.sync_anchors()
        eng = book.engine
        for name in moved:
            self.refresh_anchor(name, t)
            target = ctrl.target_phase(name)
            j = book.slot[name]
            if target is None or eng.is_done(j):
                continue
            period = ctrl.phase_period_ms(name)
            if eng.is_waiting(j):  # not started yet: move the start
                now = max(t, eng.next_event_ms(j))
                eng.start_at(j, R.next_start_ms(target, now, period))
            else:
                eng.hold(j, target, period)
