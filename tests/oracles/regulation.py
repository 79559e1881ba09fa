"""The controller's regulation rule written straight from docs/scheduler.md (slow on purpose).

Nothing here shares code with :mod:`tdmcore`: plain deques and lists, every report
taken in full, percentiles by their definition (linear interpolation between the
order statistics, numpy's default method), the median as the middle value or the
mean of the two middle ones.

One pod, report by report: the iteration time ``d`` joins the window of the last
``window`` iteration times, its own part ``o`` (the time without communication) the
window of own parts, both join histories of the last ``horizon``.  More than ``o_t``
slow iterations (``> slow``) in the window pause a pod that is not high priority: its
windows are cleared and the report index marked; ``limit`` marks within ``horizon``
reports re-measure the pattern from the histories' uncontended iterations, those
at or below ``slow`` (median iteration time less the injected idle; comm: median
of iteration time less own part), or, when none was uncontended, from the own
parts as after a drift (spec §7, revised 2026-11-28: never from contended
iterations).  Otherwise a full
window of own parts whose 25th percentile lies above ``own_hi`` or whose 75th lies
below ``own_lo`` re-measures it too (median own part less idle plus the pattern's
comm time).  A re-measured period within ``tol_ms`` of the pattern's, or not
positive, stands (the window of own parts, or the marks, are consumed); any other
is a new pattern.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

QUIET, PAUSE, QUIET_KEEP, PAUSE_KEEP, DRIFT_UPDATE, PAUSE_UPDATE = (
    "quiet", "pause", "quiet_keep", "pause_keep", "drift_update", "pause_update")


@dataclass(frozen=True)
class Limits:
    slow: float
    own_lo: float
    own_hi: float
    idle: float
    comm: float
    period: float
    tol_ms: float


def percentile(values: list[float], q: float) -> float:
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0


class Monitor:
    """One pod's monitor."""

    def __init__(self, window: int, o_t: int, horizon: int, limit: int) -> None:
        self.window, self.o_t, self.horizon, self.limit = window, o_t, horizon, limit
        self.durations: deque[float] = deque(maxlen=window)
        self.own: deque[float] = deque(maxlen=window)
        self.history: deque[float] = deque(maxlen=horizon)
        self.history_own: deque[float] = deque(maxlen=horizon)
        self.reports = 0
        self.marks: list[int] = []

    def report(self, d: float, o: float, lim: Limits, high: bool
               ) -> tuple[str, float | None, float | None, int]:
        """Take one report: ``(outcome, new period, new comm, slow count)``."""
        self.durations.append(d)
        self.own.append(o)
        self.history.append(d)
        self.history_own.append(o)
        self.reports += 1
        self.marks = [m for m in self.marks if self.reports - m < self.horizon]
        slow = sum(1 for x in self.durations if x > lim.slow)
        if slow <= self.o_t or high:
            if len(self.own) < self.window:
                return QUIET, None, None, slow
            own = list(self.own)
            if percentile(own, 0.25) > lim.own_hi or percentile(own, 0.75) < lim.own_lo:
                period = median(list(self.history_own)) - lim.idle + lim.comm
                if abs(period - lim.period) <= lim.tol_ms or period <= 0.0:
                    self.own.clear()
                    return QUIET_KEEP, None, None, slow
                return DRIFT_UPDATE, period, lim.comm, slow
            return QUIET, None, None, slow
        self.durations.clear()
        self.own.clear()
        self.marks.append(self.reports)
        if len(self.marks) >= self.limit:
            calm = [(a, b) for a, b in zip(self.history, self.history_own, strict=True)
                    if a <= lim.slow]
            if calm:
                period = median([a for a, _ in calm]) - lim.idle
                comm = median([a - b for a, b in calm])
            else:
                period = median(list(self.history_own)) - lim.idle + lim.comm
                comm = lim.comm
            if abs(period - lim.period) <= lim.tol_ms or period <= 0.0:
                self.marks.clear()
                return PAUSE_KEEP, None, None, slow
            return PAUSE_UPDATE, period, comm, slow
        return PAUSE, None, None, slow
