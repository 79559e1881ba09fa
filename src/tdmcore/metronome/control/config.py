"""The stop-and-wait controller's settings and the values it hands out (paper
§III-C, §IV-A): its thresholds (:class:`ControllerConfig`), its actions
(:class:`Readjustment`, :class:`PatternUpdate`), one pod's regulation windows
(:class:`Watch`) and thresholds (:class:`Thresholds`), in the orders of the
regulation rule (:mod:`tdmcore._kernels.regulation`), and a job's pattern
(:func:`job_pattern`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from ... import _validation as v
from ..._kernels import regulation as R
from ...model import ClusterState, TrafficPattern
from ..policies.metronome import MetronomeConfig

__all__ = ["ControllerConfig", "PatternUpdate", "Readjustment", "Thresholds", "Watch",
           "job_pattern"]

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
        rotations instead of phase three, :meth:`Planner.recalc_mode
        <tdmcore.metronome.control.planner.Planner.recalc_mode>`) and
        ``metronome-no-monitor`` (never regulate).
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

    @classmethod
    def of(cls, pattern: TrafficPattern, idle_ms: float, config: ControllerConfig
           ) -> Thresholds:
        """The thresholds of a pod with ``pattern`` and ``idle_ms`` injected.

        **[decision]** The baseline is the pattern's period plus the injected idle
        (the paper's "ideal duration without communication contention", §III-C):
        idle the controller asks for is no slowdown.  A changed pattern is judged
        on the iteration's own part, its time without communication: contention
        stretches communication, not computation, so it is regulated (pauses)
        and never taken for a new pattern.
        """
        base = pattern.period_ms + idle_ms
        own = pattern.period_ms - pattern.comm_ms + idle_ms
        band = config.drift_tol * base
        return cls(config.a_t * base, own - band, own + band, idle_ms, pattern.comm_ms,
                   pattern.period_ms, config.drift_tol * pattern.period_ms)


def job_pattern(state: ClusterState, job: str) -> TrafficPattern | None:
    """The traffic pattern of the job's first pod that has one (LowComm: None)."""
    for name in state.job_members[job]:
        pattern = state.placed[name].pod.pattern
        if pattern is not None:
            return pattern
    return None
