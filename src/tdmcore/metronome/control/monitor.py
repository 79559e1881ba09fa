"""The stop-and-wait controller's continuous regulation (paper §III-C, spec §7).

:class:`Monitor` keeps each pod's regulation windows (:class:`~.config.Watch`) and
each job's anchor (the start of its latest reported iteration), and takes
iteration reports by the rule of :mod:`tdmcore._kernels.regulation` (the
simulator's event engine runs the same lines).  What a report leads to that is
not the windows' own business -- the thresholds, who is high priority, how long a
pause is, replanning after a new pattern -- it asks its :class:`Host`, the controller
(:class:`tdmcore.metronome.controller.Controller`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ... import _validation as v
from ..._kernels import regulation as R
from ...model import ClusterState, TrafficPattern
from .config import ControllerConfig, PatternUpdate, Readjustment, Thresholds, Watch

__all__ = ["Host", "Monitor"]


class Host(Protocol):
    """What the monitor asks the controller."""

    def thresholds(self, job: str, idle_ms: float | None = None) -> Thresholds | None: ...

    def is_high(self, job: str) -> bool: ...

    def pause_ms(self, job: str, end_ms: float) -> float: ...

    def _replan(self, nodes: set[int]) -> None: ...


class Monitor:
    """Regulation windows per pod and anchors per job; reports in, actions out."""

    def __init__(self, state: ClusterState, config: ControllerConfig, host: Host) -> None:
        self.state = state
        self.config = config
        self.host = host
        self.watches: dict[str, Watch] = {}
        #: job -> start of its latest reported iteration (ms)
        self.anchors_ms: dict[str, float] = {}

    def forget(self, jobs: Mapping[str, object]) -> None:
        """Drop the anchors of jobs no longer in ``jobs``."""
        self.anchors_ms = {r: a for r, a in self.anchors_ms.items() if r in jobs}

    def advance_anchor(self, job: str, start_ms: float) -> None:
        """An iteration of ``job`` started at ``start_ms`` (reported elsewhere): its
        anchor moves there unless it is already as late (``-inf``: none yet)."""
        if start_ms > self.anchors_ms.get(job, -np.inf):
            self.anchors_ms[job] = start_ms

    def watch_state(self, pod: str) -> Watch | None:
        """What the monitor holds for ``pod`` (a copy), None before its first report."""
        watch = self.watches.get(pod)
        return None if watch is None else watch.copy()

    def set_watch_state(self, pod: str, watch: Watch) -> None:
        """Replace the monitor's view of ``pod`` (a front end that takes the reports
        elsewhere, like the simulator's event engine, hands it back this way)."""
        self.check_watch(pod, watch)
        self.watches[pod] = watch.copy()

    def check_watch(self, pod: str, watch: Watch) -> None:
        """A ValueError unless ``watch`` fits this monitor and ``pod`` is placed."""
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
        limits = self.host.thresholds(job)
        if not self.config.monitor or limits is None:
            return -np.inf, np.inf, np.inf
        x = Watch.empty(self.config) if watch is None else watch
        bounds: tuple[float, float, float] | None = R.bounds(
            *x, limits.as_limits(), self.rules, self.host.is_high(job))
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
            limits = self.host.thresholds(entry.pod.job)
            assert limits is not None
            trial = (self.watches[pod].copy() if pod in self.watches
                     else Watch.empty(self.config))
            trial.counters[R.REPORTS] += skipped
            own = durations - (comms if comms is not None else limits.comm)
            quiet = R.take_quiet(*trial, limits.as_limits(), self.rules, durations, own,
                                 self.host.is_high(entry.pod.job))
            if quiet < durations.size:
                raise ValueError(f"durations_ms: these reports are not quiet (report "
                                 f"{quiet} of {durations.size} would act)")
            # all quiet: the trial is what report_iterations would leave, taken once
            self.watches[pod] = trial
            self._advance(entry.pod.job, starts)
            return
        actions = self.report_iterations(pod, starts, durations, comms)
        assert not actions, actions  # nothing is regulated: only the anchor moves

    def _advance(self, job: str, starts: NDArray[np.float64]) -> None:
        """The job's anchor after reports starting at ``starts`` (none: unchanged)."""
        if starts.size:
            self.anchors_ms[job] = max(float(starts.max()), self.anchors_ms.get(job, -np.inf))

    def _new_watch(self, pod: str) -> Watch:
        watch = self.watches.get(pod)
        if watch is None:
            watch = self.watches[pod] = Watch.empty(self.config)
        return watch

    # --------------------------------------------------------------- monitoring
    def report_iteration(self, pod: str, start_ms: float, duration_ms: float,
                         comm_ms: float | None = None) -> list[Readjustment | PatternUpdate]:
        """One finished iteration of ``pod``; returns what the front end must apply.

        Continuous regulation, by the rule of :mod:`tdmcore._kernels.regulation`
        (the simulator's event engine runs the same lines): in the last ``window``
        iterations, more than ``o_t`` slower than ``a_t`` x the baseline -> pause a
        low-priority pod so that its next iteration starts on its assigned offset
        (the controller's ``target_phase``; high-priority pods are never paused).  Otherwise,
        with a full window of own parts (``duration - comm_ms``; without
        ``comm_ms``, the pattern's communication time is taken off) whose middle
        half (25th to 75th percentile) lies outside the band of
        :meth:`Host.thresholds`, or after ``readjust_limit`` readjustments within
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
        limits = self.host.thresholds(job)
        assert limits is not None
        watch = self._new_watch(pod)
        own = duration - (float(comm_ms) if comm_ms is not None else limits.comm)
        outcome, period, comm, slow = R.report(*watch, limits.as_limits(), self.rules,
                                               duration, own, self.host.is_high(job))
        if outcome == R.DRIFT_UPDATE:
            update = self._update_pattern(job, pattern, period, comm, "pattern drift")
            return [] if update is None else [update]
        if outcome not in (R.PAUSE, R.PAUSE_KEEP, R.PAUSE_UPDATE):
            return []
        out: list[Readjustment | PatternUpdate] = [Readjustment(
            pod, self.host.pause_ms(job, start + duration), int(slow))]
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
                self._advance(job, starts[k:])
                return out
            limits = self.host.thresholds(job)
            assert limits is not None
            own = durations[k:] - (comms[k:] if comms is not None else limits.comm)
            m = R.take_quiet(*self._new_watch(pod), limits.as_limits(), self.rules,
                             durations[k:], own, self.host.is_high(job))
            if m:
                self._advance(job, starts[k:k + m])
                k += m
            if k < n:
                actions = self.report_iteration(pod, float(starts[k]), float(durations[k]),
                                                None if comms is None else float(comms[k]))
                out.extend((k, a) for a in actions)
                k += 1
                if batch and k < n and any(isinstance(a, Readjustment) for a in actions):
                    self._advance(job, starts[k:])
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
            self.watches.pop(name, None)
        self.host._replan(nodes)
        return PatternUpdate(job, members, pattern, new, reason)
