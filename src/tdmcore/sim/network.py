"""The flow-level network model as a Python API (docs/simulator.md, "Network and job model").

Each :class:`FlowJob` iterates ``iterations`` times: compute for
``t_p (1 - d_p)`` (times multiplicative lognormal noise, plus any idle-injection
stretch), then each of its network pods sends ``r_p t_p d_p`` Gbit through its
node's host link; the iteration ends when all its transfers end.  A job whose pods
all sit on one node (``links`` all ``None``) sends nothing over host links and
iterates in ``t_p`` as if alone (**[decision]**: its communication is local).
Links share bandwidth max-min fairly, each transfer capped at its ``r_p``;
background traffic takes its share off the top (like the paper's iPerf3).  Two or
more transfers that together ask for more than a link has left contend, and share
only ``contention_efficiency`` (``eta``) of it (:data:`CONTENTION_EFFICIENCY`).

:class:`FlowEngine` holds the state arrays of the event engine (the Cython module
:mod:`tdmcore._kernels._flow`) for a changing set of jobs; :func:`simulate_flows`
and the cluster simulator (:mod:`tdmcore.sim.cluster`) both run on it.

Compute noise: iteration ``i`` of job ``k`` (its index in ``jobs``) under ``seed``
multiplies its compute time by ``exp(sigma z - sigma^2 / 2)`` with
``z = noise_normal(seed, k, i)``, a counter-based draw (SplitMix64 and Box-Muller,
:func:`tdmcore._kernels.flow.noise_normal`): any iteration's noise is known
without drawing the ones before it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .. import _validation as v
from .._kernels import flow as K

__all__ = ["CONTENTION_EFFICIENCY", "FlowEngine", "FlowJob", "FlowResult",
           "check_efficiency", "simulate_flows"]

#: ``eta``: the share of a link's free capacity that two or more contending
#: transfers get together (docs/simulator.md, "Contention"): where fluid max-min
#: sharing gives contending transfers the whole link, real collectives may lose
#: goodput to congestion control, retransmissions and rings stalled on their
#: slowest segment.  Fitted on the Metronome paper's own measurements of its
#: baselines (Table V, read as times) by :func:`tdmcore.sim.calibration.calibrate`
#: (``tdmcore calibrate``, seeds 0-2): fitted on S1-S3 (RMS error 11.1 %, all of
#: it S2's -18 %), checked on S4 and S5 (RMS error 4.4 %).  The error hardly moves
#: between 0.90 and 1.00: the paper's baselines lose no more than fluid sharing
#: predicts, except in S2 (docs/fidelity.md).
CONTENTION_EFFICIENCY = 0.99


def check_efficiency(value: Any, name: str = "contention_efficiency") -> float:
    """``value`` as a contention efficiency in (0, 1], or ValueError naming ``name``."""
    eta = v.real_number(name, value)
    if not 0.0 < eta <= 1.0:
        raise ValueError(f"{name}: expected 0 < eta <= 1, got {value!r}")
    return eta


@dataclass(frozen=True)
class FlowJob:
    """A periodic job: ``period_ms`` (``t_p``), ``duty_cycle`` (``d_p``), and one
    entry per pod in ``links`` (its node's link index, or None when the job is on
    one node) with its rate ``bandwidth_gbps`` (``r_p``)."""

    name: str
    period_ms: float
    duty_cycle: float
    bandwidth_gbps: float
    links: tuple[int | None, ...]
    iterations: int
    start_ms: float = 0.0
    stretch_ms: float = 0.0
    tail_ms: float = 0.0

    def __post_init__(self) -> None:
        v.positive_float("period_ms", self.period_ms)
        d = v.real_number("duty_cycle", self.duty_cycle)
        if not 0.0 <= d <= 1.0:
            raise ValueError(f"duty_cycle: expected 0 <= d <= 1, got {d}")
        v.positive_float("bandwidth_gbps", self.bandwidth_gbps)
        if not isinstance(self.links, tuple) or not self.links:
            raise ValueError("links: expected a non-empty tuple (one entry per pod)")
        for link in self.links:
            if link is not None and (isinstance(link, bool) or not isinstance(
                    link, int | np.integer) or link < 0):
                raise ValueError(f"links: expected link indices >= 0 or None, got {link!r}")
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int) \
                or self.iterations < 0:
            raise ValueError(f"iterations: expected an integer >= 0, got {self.iterations!r}")
        if v.real_number("start_ms", self.start_ms) < 0:
            raise ValueError(f"start_ms: must be >= 0, got {self.start_ms}")
        if v.real_number("stretch_ms", self.stretch_ms) < 0:
            raise ValueError(f"stretch_ms: must be >= 0, got {self.stretch_ms}")
        if v.real_number("tail_ms", self.tail_ms) < 0:
            raise ValueError(f"tail_ms: must be >= 0, got {self.tail_ms}")

    @property
    def networked(self) -> bool:
        return any(link is not None for link in self.links)

    @property
    def volume_gbit(self) -> float:
        """``r_p t_p d_p`` per pod and iteration, Gbit."""
        return self.bandwidth_gbps * self.period_ms * self.duty_cycle * 1e-3


@dataclass(frozen=True)
class FlowResult:
    """Iteration end times per job, and what every pod and link carried."""

    iteration_end_ms: tuple[NDArray[np.float64], ...]  # per job, the iterations it finished
    pod_sent_gbit: NDArray[np.float64]
    #: ``r_p t_p d_p`` times the iterations the pod's job finished
    pod_demand_gbit: NDArray[np.float64]
    link_sent_gbit: NDArray[np.float64]
    end_ms: float

    def iteration_ms(self, job: int, starts: Sequence[float]) -> NDArray[np.float64]:
        """Durations of job ``job``'s iterations (first one from its start)."""
        ends = self.iteration_end_ms[job]
        return np.diff(np.concatenate(([starts[job]], ends)))


@dataclass(frozen=True)
class MonitorConfig:
    """The controller's regulation thresholds as the engine takes them
    (:class:`tdmcore.controller.ControllerConfig`)."""

    window: int = 10
    o_t: int = 5
    horizon: int = 50
    limit: int = 3


class FlowEngine:
    """The event engine's state for a changing set of jobs on fixed links.

    Jobs live in slots (reused after :meth:`remove`); their pods in a pool of
    contiguous blocks; links keep an index of their pods.  The arrays grow on
    demand.  ``samples_per_job`` sampled iteration times are buffered per job
    (iteration ``i`` is sampled when ``i % step == 0``); a full buffer stops
    :meth:`run` (``STOP_SAMPLES``) so the caller can :meth:`take_samples`.
    """

    jf: NDArray[np.float64]
    ji: NDArray[np.int64]
    pf: NDArray[np.float64]
    pi: NDArray[np.int64]
    win: NDArray[np.float64]
    wino: NDArray[np.float64]
    hist: NDArray[np.float64]
    histo: NDArray[np.float64]
    readj: NDArray[np.int64]
    samples: NDArray[np.float64]
    ev_t: NDArray[np.float64]
    ev_s: NDArray[np.int64]

    def __init__(self, capacity_gbps: NDArray[np.float64], background_gbps: NDArray[np.float64],
                 *, seed: int = 0, sigma: float = 0.0, monitor: MonitorConfig | None = None,
                 samples_per_job: int = 512, jobs_hint: int = 8,
                 contention_efficiency: float = 1.0) -> None:
        cap = np.asarray(capacity_gbps, dtype=np.float64)
        self.n_links = cap.shape[0]
        self.sigma = float(sigma)
        self.monitor = monitor or MonitorConfig()
        m = self.monitor
        self.cfg = np.array([m.window, m.o_t, m.horizon, m.limit, int(seed), 0], dtype=np.int64)
        self.lf = np.zeros((K.N_LF, self.n_links))
        self.lf[K.L_CAP] = cap
        self.lf[K.L_BG] = np.asarray(background_gbps, dtype=np.float64)
        self.lf[K.L_ETA] = check_efficiency(contention_efficiency)
        self.lptr = np.zeros(self.n_links + 1, dtype=np.int64)
        self.lpods = np.zeros(0, dtype=np.int64)
        self.n_samples = int(samples_per_job)
        self.slots = 0
        self.free: list[int] = []
        self.pod_used = 0  # pool high-water mark
        self.pod_live = 0
        self.out = np.zeros(2, dtype=np.int64)
        self.hsize = np.zeros(1, dtype=np.int64)
        self._alloc(max(1, jobs_hint), max(4, 2 * jobs_hint))

    # ------------------------------------------------------------ storage
    def _alloc(self, n_slots: int, n_pods: int) -> None:
        """(Re)allocate job and pod arrays, keeping what is there."""
        old = self.__dict__.get("jf")
        m = self.monitor
        jf = np.zeros((K.N_JF, n_slots))
        ji = np.zeros((K.N_JI, n_slots), dtype=np.int64)
        ji[K.I_PHASE] = K.PHASE_FREE
        win = np.zeros((n_slots, m.window))
        wino = np.zeros((n_slots, m.window))
        hist = np.zeros((n_slots, m.horizon))
        histo = np.zeros((n_slots, m.horizon))
        readj = np.zeros((n_slots, m.horizon + 1), dtype=np.int64)
        samples = np.zeros((n_slots, self.n_samples))
        pf = np.zeros((K.N_PF, n_pods))
        pi = np.zeros((K.N_PI, n_pods), dtype=np.int64)
        pi[K.P_LINK] = -1
        ev_t = np.full(n_slots + self.n_links, np.inf)
        ev_s = np.zeros(n_slots + self.n_links, dtype=np.int64)
        if old is not None:
            s = self.slots
            jf[:, :s] = self.jf[:, :s]
            ji[:, :s] = self.ji[:, :s]
            win[:s] = self.win[:s]
            wino[:s] = self.wino[:s]
            hist[:s] = self.hist[:s]
            histo[:s] = self.histo[:s]
            readj[:s] = self.readj[:s]
            samples[:s] = self.samples[:s]
            u = self.pod_used
            pf[:, :u] = self.pf[:, :u]
            pi[:, :u] = self.pi[:, :u]
            old_slots = self.jf.shape[1]
            ev_t[:s] = self.ev_t[:s]
            ev_s[:s] = self.ev_s[:s]
            ev_t[n_slots:] = self.ev_t[old_slots:]
            ev_s[n_slots:] = self.ev_s[old_slots:]
        self.jf, self.ji, self.win, self.wino, self.hist = jf, ji, win, wino, hist
        self.histo, self.readj = histo, readj
        self.samples, self.pf, self.pi, self.ev_t, self.ev_s = samples, pf, pi, ev_t, ev_s
        size = 2 * (n_slots + self.n_links) + 16
        self.ht = np.zeros(size)
        self.hid = np.zeros(size, dtype=np.int64)
        self.hst = np.zeros(size, dtype=np.int64)
        K.rebuild_heap(self.ev_t, self.ev_s, self.ht, self.hid, self.hst, self.hsize,
                       n_slots, self.n_links)
        self.scratch = np.zeros(max(8, n_pods), dtype=np.int64)
        self.scratch_f = np.zeros(max(m.window, m.horizon + 1))

    def _state(self) -> tuple[NDArray[Any], ...]:
        """The arrays every engine call takes, in its order."""
        return (self.jf, self.ji, self.pf, self.pi, self.lf, self.lptr, self.lpods,
                self.ev_t, self.ev_s, self.ht, self.hid, self.hst, self.hsize, self.win,
                self.wino, self.hist, self.histo, self.readj, self.cfg, self.samples,
                self.scratch, self.scratch_f)

    def _compact_pods(self) -> None:
        """Move the live pods to the front of the pool (slot order)."""
        order: list[int] = []
        for j in range(self.slots):
            if self.ji[K.I_PHASE, j] != K.PHASE_FREE:
                p0, n = int(self.ji[K.I_POD0, j]), int(self.ji[K.I_NPOD, j])
                self.ji[K.I_POD0, j] = len(order)
                order.extend(range(p0, p0 + n))
        idx = np.asarray(order, dtype=np.int64)
        n = idx.size
        self.pf[:, :n] = self.pf[:, idx]
        self.pi[:, :n] = self.pi[:, idx]
        self.pi[K.P_LINK, n:] = -1
        self.pi[K.P_ACTIVE, n:] = 0
        self.pod_used = n

    def _reindex(self) -> None:
        """The links' pod index (CSR) from the live pods."""
        used = self.pod_used
        links = self.pi[K.P_LINK, :used]
        live = np.zeros(used, dtype=np.bool_)
        for j in range(self.slots):
            if self.ji[K.I_PHASE, j] != K.PHASE_FREE:
                p0, n = int(self.ji[K.I_POD0, j]), int(self.ji[K.I_NPOD, j])
                live[p0:p0 + n] = True
        on = np.flatnonzero(live & (links >= 0))
        counts = np.bincount(links[on], minlength=self.n_links)
        self.lptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.lpods = on[np.argsort(links[on], kind="stable")].astype(np.int64)

    # ------------------------------------------------------------ jobs
    def add(self, *, key: int, compute_ms: float, iterations: int, start_ms: float,
            links: Sequence[int], cap_gbps: float, volume_gbit: float, tail_ms: float = 0.0,
            stretch_ms: float = 0.0, done: int = 0, step: int = 1,
            job_period_ms: float = 1.0) -> int:
        """Add a job that starts iteration ``done`` at ``start_ms``; return its slot.

        ``links``: one entry per pod, its link or -1 (on one node with the
        others).  ``step``: iteration ``i`` is sampled when ``i % step == 0``.
        """
        if self.free:
            j = self.free.pop()
        else:
            if self.slots == self.jf.shape[1]:
                self._alloc(2 * self.slots, max(self.pf.shape[1], 2 * self.pod_used))
            j = self.slots
            self.slots += 1
        n = len(links)
        if self.pod_used + n > self.pf.shape[1]:
            if self.pod_live + n <= self.pf.shape[1] // 2:
                self._compact_pods()
            else:
                self._alloc(self.jf.shape[1], 2 * (self.pod_live + n) + 8)
                self._compact_pods()
        p0 = self.pod_used
        self.pod_used += n
        self.pod_live += n
        jf, ji = self.jf, self.ji
        jf[:, j] = 0.0
        ji[:, j] = 0
        jf[K.F_T, j] = start_ms
        jf[K.F_ISTART, j] = start_ms
        jf[K.F_CSTART, j] = start_ms
        jf[K.F_COMPUTE, j] = compute_ms
        jf[K.F_STRETCH, j] = stretch_ms
        jf[K.F_TAIL, j] = tail_ms
        jf[K.F_HOLD_PHASE, j] = np.nan
        jf[K.F_HOLD_PERIOD, j] = job_period_ms
        jf[K.F_ANCHOR, j] = -np.inf
        jf[K.F_SLOW, j] = np.inf
        jf[K.F_OLO, j] = -np.inf
        jf[K.F_OHI, j] = np.inf
        jf[K.F_PPAT, j] = job_period_ms
        jf[K.F_JOB_PERIOD, j] = job_period_ms
        ji[K.I_PHASE, j] = K.PHASE_WAIT
        ji[K.I_ITER, j] = done
        ji[K.I_NITERS, j] = iterations
        ji[K.I_POD0, j] = p0
        ji[K.I_NPOD, j] = n
        ji[K.I_KEY, j] = key
        ji[K.I_STEP, j] = max(1, step)
        ji[K.I_HIGH, j] = 1
        ji[K.I_ROOT, j] = -1
        ji[K.I_REPORTED, j] = 1
        self.pf[:, p0:p0 + n] = 0.0
        self.pf[K.P_CAP, p0:p0 + n] = cap_gbps
        self.pf[K.P_VOLUME, p0:p0 + n] = volume_gbit
        self.pi[K.P_JOB, p0:p0 + n] = j
        self.pi[K.P_LINK, p0:p0 + n] = np.asarray(links, dtype=np.int64)
        self.pi[K.P_ACTIVE, p0:p0 + n] = 0
        self._reindex()
        self.schedule(j, start_ms)
        return j

    def schedule(self, e: int, t: float) -> None:
        """Entity ``e`` (a job slot; ``slots + link`` for a link) has its event at ``t``."""
        K.schedule(e, t, self.ev_t, self.ev_s, self.ht, self.hid, self.hst, self.hsize,
                   self.jf.shape[1], self.n_links)

    def remove(self, j: int) -> None:
        """Free slot ``j`` (a job between iterations: no transfer in flight)."""
        self.schedule(j, np.inf)
        n = int(self.ji[K.I_NPOD, j])
        p0 = int(self.ji[K.I_POD0, j])
        self.pi[K.P_LINK, p0:p0 + n] = -1
        self.pi[K.P_ACTIVE, p0:p0 + n] = 0
        self.ji[K.I_PHASE, j] = K.PHASE_FREE
        self.ji[K.I_NPOD, j] = 0
        self.pod_live -= n
        self.free.append(j)
        self._reindex()

    def pods(self, j: int) -> slice:
        p0 = int(self.ji[K.I_POD0, j])
        return slice(p0, p0 + int(self.ji[K.I_NPOD, j]))

    def set_transfers(self, j: int, t: float, left: NDArray[np.float64],
                      sent: NDArray[np.float64]) -> None:
        """Job ``j`` is mid-communication at ``t``: its pods have ``left`` Gbit to
        go (0: done) and have sent ``sent``.  Its links must carry no other
        transfer (the job was alone on them)."""
        pods = self.pods(j)
        self.pf[K.P_LEFT, pods] = left
        self.pf[K.P_SENT, pods] = sent
        active = (left > 0.0) & (self.pi[K.P_LINK, pods] >= 0)
        self.pi[K.P_ACTIVE, pods] = active.astype(np.int64)
        self.ji[K.I_PENDING, j] = int(active.sum())
        for link in sorted(set(self.pi[K.P_LINK, pods][active].tolist())):
            self.lf[K.L_T, link] = t
            K.relink(link, self.sigma, self._state())

    def run(self, t: float, until: float) -> tuple[float, int, int]:
        """Run the events before ``until``; return (time reached, STOP_*, slot)."""
        t = K.advance(t, until, self.sigma, self._state(), self.out)
        return float(t), int(self.out[0]), int(self.out[1])

    def flush(self, t: float) -> None:
        """Advance every link's transfers to ``t`` (sent volumes exact at ``t``)."""
        K.flush_links(t, self.sigma, self._state())

    def take_samples(self, j: int) -> NDArray[np.float64]:
        n = int(self.ji[K.I_NSAMP, j])
        out = self.samples[j, :n].copy()
        self.ji[K.I_NSAMP, j] = 0
        return out

    def resume(self, j: int, t: float) -> None:
        """Job ``j`` (READY after a stop) goes on at ``t`` (its report taken)."""
        self.ji[K.I_REPORTED, j] = 1
        self.schedule(j, t)

    # ------------------------------------------------------------ monitor
    def set_monitor_state(self, j: int, durations: Sequence[float], own: Sequence[float],
                          history: Sequence[float], history_own: Sequence[float],
                          reports: int, readjusted_at: Sequence[int]) -> None:
        """Load the controller's view of job ``j`` (its thresholds already set):
        :meth:`tdmcore.controller.Controller.watch_state`."""
        w, h = self.win.shape[1], self.hist.shape[1]
        jf, ji = self.jf, self.ji
        vals = np.asarray(list(durations)[-w:], dtype=np.float64)
        self.win[j, :vals.size] = vals
        ji[K.I_WIN_N, j] = vals.size
        ji[K.I_WIN_POS, j] = vals.size % w
        ji[K.I_SLOWN, j] = int((vals > jf[K.F_SLOW, j]).sum())
        ov = np.asarray(list(own)[-w:], dtype=np.float64)
        self.wino[j, :ov.size] = ov
        ji[K.I_OWN_N, j] = ov.size
        ji[K.I_OWN_POS, j] = ov.size % w
        ji[K.I_ABOVE, j] = int((ov > jf[K.F_OHI, j]).sum())
        ji[K.I_BELOW, j] = int((ov < jf[K.F_OLO, j]).sum())
        hv = np.asarray(list(history)[-h:], dtype=np.float64)
        self.hist[j, :hv.size] = hv
        self.histo[j, :hv.size] = np.asarray(list(history_own)[-h:], dtype=np.float64)
        ji[K.I_HIST_N, j] = hv.size
        ji[K.I_HIST_POS, j] = hv.size % h
        ji[K.I_REPORTS, j] = int(reports)
        marks = list(readjusted_at)[-(self.readj.shape[1]):]
        self.readj[j, :len(marks)] = marks
        ji[K.I_READJ_N, j] = len(marks)

    def monitor_state(self, j: int) -> tuple[list[float], list[float], list[float],
                                             list[float], int, list[int]]:
        """Job ``j``'s windows of iteration times and own parts, its histories of
        both (oldest first), its reports and its readjustment marks."""
        def ring(buf: NDArray[np.float64], n: int, pos: int) -> list[float]:
            size = buf.shape[1]
            return [float(buf[j, (pos - n + k) % size]) for k in range(n)]
        ji = self.ji
        return (ring(self.win, int(ji[K.I_WIN_N, j]), int(ji[K.I_WIN_POS, j])),
                ring(self.wino, int(ji[K.I_OWN_N, j]), int(ji[K.I_OWN_POS, j])),
                ring(self.hist, int(ji[K.I_HIST_N, j]), int(ji[K.I_HIST_POS, j])),
                ring(self.histo, int(ji[K.I_HIST_N, j]), int(ji[K.I_HIST_POS, j])),
                int(ji[K.I_REPORTS, j]),
                [int(x) for x in self.readj[j, :int(ji[K.I_READJ_N, j])]])


def simulate_flows(jobs: Sequence[FlowJob], link_capacity_gbps: Sequence[float], *,
                   background_gbps: Sequence[float] | None = None,
                   noise_sigma: float = 0.01, seed: int = 0,
                   until_ms: float = math.inf,
                   contention_efficiency: float = CONTENTION_EFFICIENCY) -> FlowResult:
    """Run ``jobs`` on links of ``link_capacity_gbps`` until all finish or ``until_ms``.

    ``noise_sigma``: lognormal compute noise (spec default 1 %), mean 1, seeded
    per job and iteration (the module's docstring).  ``contention_efficiency``:
    ``eta`` in (0, 1], the share of a link that contending transfers get
    together (1: plain max-min fair sharing).
    """
    jobs = tuple(jobs)
    if not jobs or not all(isinstance(j, FlowJob) for j in jobs):
        raise ValueError("jobs: expected a non-empty sequence of FlowJob")
    cap = v.as_float_array("link_capacity_gbps", link_capacity_gbps, ndim=1)
    if cap.size == 0 or np.any(cap <= 0):
        raise ValueError("link_capacity_gbps: expected capacities > 0")
    bg = np.zeros_like(cap) if background_gbps is None else v.as_float_array(
        "background_gbps", background_gbps, ndim=1)
    if bg.shape != cap.shape or np.any(bg < 0):
        raise ValueError(f"background_gbps: expected {cap.size} values >= 0")
    sigma = v.real_number("noise_sigma", noise_sigma)
    if sigma < 0:
        raise ValueError(f"noise_sigma: must be >= 0, got {sigma}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, got {seed!r}")
    until = float(until_ms)
    if math.isnan(until) or until < 0:
        raise ValueError(f"until_ms: expected a time >= 0, got {until_ms!r}")
    eta = check_efficiency(contention_efficiency)
    for i, job in enumerate(jobs):
        for link in job.links:
            if link is not None and link >= cap.size:
                raise ValueError(f"jobs[{i}]: link {link} does not exist "
                                 f"({cap.size} links)")
    longest = max(job.iterations for job in jobs)
    engine = FlowEngine(cap, bg, seed=seed, sigma=sigma, jobs_hint=len(jobs),
                        samples_per_job=max(1, longest),  # every iteration kept
                        contention_efficiency=eta)
    slots = []
    for i, job in enumerate(jobs):
        links = [-1 if link is None else int(link) for link in job.links]
        compute = job.period_ms * (1 - job.duty_cycle) if job.networked else job.period_ms
        slots.append(engine.add(key=i, compute_ms=compute, iterations=job.iterations,
                                start_ms=job.start_ms, links=links,
                                cap_gbps=job.bandwidth_gbps,
                                volume_gbit=job.volume_gbit if job.networked else 0.0,
                                tail_ms=job.tail_ms, stretch_ms=job.stretch_ms))
    t = 0.0
    while True:
        t, reason, _ = engine.run(t, until)
        if reason in (K.STOP_TIME, K.STOP_IDLE):
            break
    engine.flush(t)
    ends = []
    for job, j in zip(jobs, slots, strict=True):
        durations = engine.samples[j, :int(engine.ji[K.I_NSAMP, j])]
        ends.append(job.start_ms + np.cumsum(durations) if durations.size
                    else np.zeros(0))
    pod_sent = np.concatenate([engine.pf[K.P_SENT, engine.pods(j)] for j in slots])
    done = np.array([len(e) for e in ends], dtype=np.float64)
    volumes = np.concatenate([np.full(len(job.links), job.volume_gbit if job.networked
                                      else 0.0) for job in jobs])
    per_pod_done = np.concatenate([np.full(len(job.links), done[i])
                                   for i, job in enumerate(jobs)])
    end = t
    return FlowResult(tuple(ends), pod_sent, volumes * per_pod_done,
                      engine.lf[K.L_SENT].copy(), float(end))
