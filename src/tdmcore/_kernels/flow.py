"""Flow-level network model of periodic training jobs (spec/simulator.md): the event engine.

A job iterates: compute, then every one of its network pods sends a volume through
its node's host link; the iteration ends when the last of its transfers ends
(synchronous data parallel), plus a fixed latency tail (high-latency node pairs).
A link of capacity ``B`` (minus background traffic) shares bandwidth max-min fairly
among its active transfers, each capped at its own rate ``r_p``.  Rates change only
at events (a phase ends, a transfer ends), so the model is exact between events.

The engine is a discrete-event loop over a binary heap: every job has at most one
pending event (its compute or latency tail ends, or its next iteration starts) and
every link one (its earliest transfer completion at the current rates).  An event
touches only its own job or link, so a step costs ``O(log n)`` plus the pods on one
link, whatever the cluster's size.  Links are brought up to date lazily (each keeps
the time its transfers were last advanced).

The stop-and-wait controller's continuous regulation (spec/metronome.md §7) runs in
the loop: every finished iteration is reported at once, exactly as
:meth:`tdmcore.controller.Controller.report_iteration` would take it (window of
iteration times, slow count against ``a_t x period``, readjustment pauses onto the
job's target phase); a report whose outcome needs the controller itself (a
changed pattern: drift, or readjustments repeating) stops the loop *before* it is
taken, so the caller hands that one report to the controller.  The test suite
checks this monitor against the controller on thousands of random report streams.

Compute noise is counter-based: iteration ``i`` of the job with noise key ``k``
under seed ``s`` draws ``z = normal(s, k, i)`` (:func:`noise_normal`), so any
iteration's noise is known without drawing the ones before it; the closed-form
stretches of the simulator use the same function.

Units: ms, Gbit, Gbps (1e-3 Gbit/ms).  Every state array belongs to the caller
(:class:`tdmcore.sim.network.FlowEngine`); the kernels change them in place.
"""

from __future__ import annotations

import math

import numpy as np

from .._config import jit

#: A transfer with less than this left (Gbit) is finished (float round-off).
DONE_GBIT = 1e-12

PHASE_WAIT = 0      # the next iteration starts at F_T
PHASE_COMPUTE = 1   # compute ends at F_T
PHASE_COMM = 2      # transfers pending
PHASE_DONE = 3      # every iteration done
PHASE_READY = 4     # an iteration just ended; its report or the next start is due
PHASE_TAIL = 5      # transfers done, the latency tail ends at F_T
PHASE_FREE = 6      # an unused slot

#: Why :func:`advance` returned (``out[0]``; the job slot concerned is ``out[1]``).
STOP_TIME = 0       # reached until_ms
STOP_FINISHED = 1   # a job finished its last iteration (its slot is PHASE_DONE)
STOP_SAMPLES = 2    # a job's buffer of sampled iteration times is full
STOP_IDLE = 3       # nothing is left to happen
STOP_SOLO = 4       # a job flagged to leave is between iterations, no hold pending
STOP_REPORT = 5     # a job's report needs the controller (drift, repeated pauses, or a
#                     target phase that depends on a job outside the loop)

#: What :func:`monitor_outcome` decides for one report.
REPORT_QUIET = 0
REPORT_PAUSE = 1
REPORT_CONTROLLER = 2

# ---- job fields (rows of the float array ``jf``)
F_T = 0            # time of the job's pending event
F_ISTART = 1       # start of the iteration in progress (or of the last one)
F_COMPUTE = 2      # compute time before noise (ms)
F_STRETCH = 3      # idle injected into every compute phase (ms)
F_TAIL = 4         # latency tail per iteration (ms)
F_HOLD_PHASE = 5   # next start: the first time congruent to this (NaN: none)
F_HOLD_PERIOD = 6
F_BUSY = 7         # sum of the iteration times since the job entered the loop
F_ANCHOR = 8       # start of the latest finished iteration (the controller's anchor)
F_SLOW = 9         # an iteration longer than this is slow (a_t x period)
F_DLO = 10         # drift: the window's p75 below this ...
F_DHI = 11         # ... or its p25 above this
F_PPAT = 12        # the pattern's period (pauses are taken modulo it)
F_TFIX = 13        # target phase when the reference job is not tracked here
F_PAUSE_MS = 14    # pauses taken in the loop (ms)
F_LAST_DUR = 15    # the latest finished iteration's time and start
F_LAST_START = 16
F_JOB_PERIOD = 17  # the job's period: a pause is a hold modulo it
# target phase = anchor(root) + compute(root) + offset(job) - offset(root) - compute(job),
# term by term in that order (Controller.target_phase)
F_T_CR = 18
F_T_OJ = 19
F_T_OR = 20
F_T_CJ = 21
N_JF = 22

# ---- job fields (rows of the integer array ``ji``)
I_PHASE = 0
I_ITER = 1         # iterations finished (the index of the next one)
I_NITERS = 2
I_PENDING = 3      # transfers in flight
I_POD0 = 4         # the job's pods are pods[I_POD0 : I_POD0 + I_NPOD]
I_NPOD = 5
I_LEAVE = 6        # stop (STOP_SOLO) when between iterations
I_KEY = 7          # noise key
I_DONE = 8         # iterations finished since the job entered the loop
I_STEP = 9         # iteration i is sampled when i % step == 0
I_NSAMP = 10       # samples in the buffer
I_MON = 11         # monitored by the controller
I_HIGH = 12        # never paused
I_ROOT = 13        # slot of the reference job (-1: use F_TFIX; -2: ask the controller)
I_WIN_N = 14       # window: count, next write position (a ring of `window` entries)
I_WIN_POS = 15
I_HIST_N = 16      # history: count, next write position (a ring of `horizon` entries)
I_HIST_POS = 17
I_REPORTS = 18     # reports taken (the controller's watch.iterations)
I_READJ_N = 19     # readjustment marks kept (report indices, oldest first)
I_READJ = 20       # readjustments made in the loop
I_REPORTED = 21    # the latest iteration's report has been taken
I_SLOWN = 22       # window entries > F_SLOW, > F_DHI, < F_DLO
I_ABOVE = 23
I_BELOW = 24
N_JI = 25

# ---- pod fields
P_CAP = 0
P_VOLUME = 1
P_LEFT = 2
P_RATE = 3
P_SENT = 4
N_PF = 5
P_JOB = 0
P_LINK = 1
P_ACTIVE = 2
N_PI = 3

# ---- link fields
L_CAP = 0
L_BG = 1
L_T = 2      # transfers on the link advanced up to this time
L_SENT = 3
N_LF = 4

# ---- monitor configuration (``cfg``): window, o_t, horizon, readjust limit
C_WINDOW = 0
C_OT = 1
C_HORIZON = 2
C_LIMIT = 3
C_SEED = 4
N_CFG = 5

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_TWO_PI = 2.0 * math.pi


# ------------------------------------------------------------------------ noise
@jit
def _mix(x: np.uint64) -> np.uint64:
    """SplitMix64's finaliser: a bijective 64-bit mixer."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@jit
def noise_normal(seed: int, key: int, i: int) -> float:
    """A standard normal for iteration ``i`` of noise key ``key`` under ``seed``.

    ``base = mix(mix(seed + g) + key g)``, ``h_m = mix(base + (2 i + m) g)`` for
    m = 1, 2 (g the golden-ratio constant, arithmetic modulo 2^64);
    ``u1 = ((h_1 >> 11) + 1) / 2^53`` in (0, 1], ``u2 = (h_2 >> 11) / 2^53``;
    Box-Muller: ``z = sqrt(-2 ln u1) cos(2 pi u2)``.
    """
    base = _mix(_mix(np.uint64(seed) + _GOLDEN) + np.uint64(key) * _GOLDEN)
    c = np.uint64(2 * i)
    h1 = _mix(base + (c + np.uint64(1)) * _GOLDEN)
    h2 = _mix(base + (c + np.uint64(2)) * _GOLDEN)
    u1 = (float(h1 >> np.uint64(11)) + 1.0) * 1.1102230246251565e-16  # 2^-53
    u2 = float(h2 >> np.uint64(11)) * 1.1102230246251565e-16
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(_TWO_PI * u2)


@jit
def noise_factor(seed: int, key: int, i: int, sigma: float) -> float:
    """Lognormal compute multiplier, mean 1: ``exp(sigma z - sigma^2 / 2)``."""
    if sigma == 0.0:
        return 1.0
    return math.exp(sigma * noise_normal(seed, key, i) - sigma * sigma / 2.0)


@jit
def noise_factors(seed: int, key: int, i0: int, sigma: float, out: np.ndarray) -> None:
    """``out[k] = noise_factor(seed, key, i0 + k, sigma)``."""
    for k in range(out.shape[0]):
        out[k] = noise_factor(seed, key, i0 + k, sigma)


# ------------------------------------------------------------------------ heap
@jit
def _less(ht: np.ndarray, hid: np.ndarray, a: int, b: int) -> bool:
    return ht[a] < ht[b] or (ht[a] == ht[b] and hid[a] < hid[b])


@jit
def _swap(ht: np.ndarray, hid: np.ndarray, hst: np.ndarray, a: int, b: int) -> None:
    ht[a], ht[b] = ht[b], ht[a]
    hid[a], hid[b] = hid[b], hid[a]
    hst[a], hst[b] = hst[b], hst[a]


@jit
def _sift_down(ht: np.ndarray, hid: np.ndarray, hst: np.ndarray, n: int, i: int) -> None:
    while True:
        left = 2 * i + 1
        if left >= n:
            return
        child = left
        if left + 1 < n and _less(ht, hid, left + 1, left):
            child = left + 1
        if _less(ht, hid, child, i):
            _swap(ht, hid, hst, child, i)
            i = child
        else:
            return


@jit
def rebuild_heap(ev_t: np.ndarray, ev_s: np.ndarray, ht: np.ndarray, hid: np.ndarray,
                 hst: np.ndarray, hsize: np.ndarray) -> None:
    """The heap from every entity's scheduled event (``ev_t`` finite)."""
    n = 0
    for e in range(ev_t.shape[0]):
        if ev_t[e] < np.inf:
            ht[n] = ev_t[e]
            hid[n] = e
            hst[n] = ev_s[e]
            n += 1
    for i in range(n // 2 - 1, -1, -1):
        _sift_down(ht, hid, hst, n, i)
    hsize[0] = n


@jit
def schedule(e: int, t: float, ev_t: np.ndarray, ev_s: np.ndarray, ht: np.ndarray,
             hid: np.ndarray, hst: np.ndarray, hsize: np.ndarray) -> None:
    """Entity ``e``'s one pending event is now at ``t`` (inf: none).  Older heap
    entries of ``e`` go stale (their stamp no longer matches)."""
    ev_s[e] += 1
    ev_t[e] = t
    if t == np.inf:
        return
    n = hsize[0]
    if n == ht.shape[0]:  # full of stale entries: rebuild from the live ones
        rebuild_heap(ev_t, ev_s, ht, hid, hst, hsize)
        return
    ht[n] = t
    hid[n] = e
    hst[n] = ev_s[e]
    i = n
    hsize[0] = n + 1
    while i > 0:
        parent = (i - 1) // 2
        if _less(ht, hid, i, parent):
            _swap(ht, hid, hst, i, parent)
            i = parent
        else:
            break


@jit
def _pop(ht: np.ndarray, hid: np.ndarray, hst: np.ndarray, hsize: np.ndarray) -> None:
    n = hsize[0] - 1
    hsize[0] = n
    if n > 0:
        ht[0] = ht[n]
        hid[0] = hid[n]
        hst[0] = hst[n]
        _sift_down(ht, hid, hst, n, 0)


# ------------------------------------------------------------------------ links
@jit
def _waterfill(lk: int, lf: np.ndarray, lptr: np.ndarray, lpods: np.ndarray,
               pf: np.ndarray, pi: np.ndarray, scratch: np.ndarray) -> float:
    """Max-min fair rates of link ``lk``'s active transfers (each capped at its
    rate) by progressive filling; returns the earliest completion time."""
    k = 0
    for q in range(lptr[lk], lptr[lk + 1]):
        p = lpods[q]
        if pi[P_ACTIVE, p] != 0:
            # insertion sort by cap (ties keep pod order)
            m = k
            cap = pf[P_CAP, p]
            while m > 0 and pf[P_CAP, scratch[m - 1]] > cap:
                scratch[m] = scratch[m - 1]
                m -= 1
            scratch[m] = p
            k += 1
    if k == 0:
        return np.inf
    left = lf[L_CAP, lk] - lf[L_BG, lk]
    if left < 0.0:
        left = 0.0
    i = 0
    while i < k:
        share = left / (k - i)
        p = scratch[i]
        if pf[P_CAP, p] <= share:
            pf[P_RATE, p] = pf[P_CAP, p]
            left -= pf[P_CAP, p]
            i += 1
        else:
            for m in range(i, k):
                pf[P_RATE, scratch[m]] = share
            break
    t0 = lf[L_T, lk]
    first = np.inf
    for m in range(k):
        p = scratch[m]
        r = pf[P_RATE, p]
        if r > 0.0:
            finish = t0 + pf[P_LEFT, p] / (r * 1e-3)
            if finish < first:
                first = finish
    return first


@jit
def _progress(lk: int, t: float, lf: np.ndarray, lptr: np.ndarray, lpods: np.ndarray,
              pf: np.ndarray, pi: np.ndarray, jf: np.ndarray, ji: np.ndarray,
              ev_t: np.ndarray, ev_s: np.ndarray, ht: np.ndarray, hid: np.ndarray,
              hst: np.ndarray, hsize: np.ndarray) -> None:
    """Advance link ``lk``'s transfers to ``t``; a transfer that is done leaves,
    and a job whose last transfer left enters its latency tail."""
    t0 = lf[L_T, lk]
    if t > t0:
        dt = t - t0
        for q in range(lptr[lk], lptr[lk + 1]):
            p = lpods[q]
            if pi[P_ACTIVE, p] == 0:
                continue
            r = pf[P_RATE, p]
            left = pf[P_LEFT, p]
            if r > 0.0 and (t0 + left / (r * 1e-3) <= t or left - r * 1e-3 * dt <= DONE_GBIT):
                moved = left
            else:
                moved = r * 1e-3 * dt
            pf[P_LEFT, p] = left - moved
            pf[P_SENT, p] += moved
            lf[L_SENT, lk] += moved
            if moved == left:
                pf[P_LEFT, p] = 0.0
                pi[P_ACTIVE, p] = 0
                pf[P_RATE, p] = 0.0
                j = pi[P_JOB, p]
                ji[I_PENDING, j] -= 1
                if ji[I_PENDING, j] == 0:
                    ji[I_PHASE, j] = PHASE_TAIL
                    jf[F_T, j] = t + jf[F_TAIL, j]
                    schedule(j, jf[F_T, j], ev_t, ev_s, ht, hid, hst, hsize)
    lf[L_T, lk] = t


@jit
def _relink(lk: int, n_slots: int, lf: np.ndarray, lptr: np.ndarray, lpods: np.ndarray,
            pf: np.ndarray, pi: np.ndarray, scratch: np.ndarray, ev_t: np.ndarray,
            ev_s: np.ndarray, ht: np.ndarray, hid: np.ndarray, hst: np.ndarray,
            hsize: np.ndarray) -> None:
    """New rates on link ``lk`` (already advanced); schedule its next completion."""
    first = _waterfill(lk, lf, lptr, lpods, pf, pi, scratch)
    schedule(n_slots + lk, first, ev_t, ev_s, ht, hid, hst, hsize)


@jit
def flush_links(t: float, lf: np.ndarray, lptr: np.ndarray, lpods: np.ndarray,
                pf: np.ndarray, pi: np.ndarray, jf: np.ndarray, ji: np.ndarray,
                ev_t: np.ndarray, ev_s: np.ndarray, ht: np.ndarray, hid: np.ndarray,
                hst: np.ndarray, hsize: np.ndarray, scratch: np.ndarray) -> None:
    """Bring every link's transfers up to ``t`` (rates stand: no event lies
    before ``t``), so that ``P_SENT`` and ``L_SENT`` are exact at ``t``."""
    n_slots = jf.shape[1]
    for lk in range(lf.shape[1]):
        if ev_t[n_slots + lk] < np.inf and lf[L_T, lk] < t:
            _progress(lk, t, lf, lptr, lpods, pf, pi, jf, ji, ev_t, ev_s, ht, hid, hst,
                      hsize)
            _relink(lk, n_slots, lf, lptr, lpods, pf, pi, scratch, ev_t, ev_s, ht, hid,
                    hst, hsize)


# ------------------------------------------------------------------------ monitor
@jit
def _ring_get(buf: np.ndarray, j: int, n: int, pos: int, k: int) -> float:
    """The k-th oldest of the n entries of a ring whose next write is at pos."""
    size = buf.shape[1]
    return buf[j, (pos - n + k) % size]


@jit
def _quartiles(values: np.ndarray, n: int) -> tuple[float, float]:
    """p25 and p75 with linear interpolation (numpy's default), in place."""
    values[:n].sort()
    out0 = 0.0
    out1 = 0.0
    for m in range(2):
        q = 0.25 if m == 0 else 0.75
        pos = q * (n - 1)
        lo = int(math.floor(pos))
        hi = min(lo + 1, n - 1)
        a = values[lo]
        b = values[hi]
        v = a + (b - a) * (pos - lo)
        if m == 0:
            out0 = v
        else:
            out1 = v
    return out0, out1


@jit
def monitor_outcome(j: int, t: float, jf: np.ndarray, ji: np.ndarray, win: np.ndarray,
                    readj: np.ndarray, cfg: np.ndarray, scratch_f: np.ndarray) -> int:
    """What the report of job ``j``'s latest iteration leads to; changes nothing.

    The rules of :meth:`Controller.report_iteration`: the duration joins the
    window (the oldest leaves a full one); more than ``o_t`` slow iterations in it
    pause a job that is not high priority; otherwise a full window whose p25 lies
    above ``period (1 + tol)`` or whose p75 lies below ``period (1 - tol)`` is a
    changed pattern (the controller's to handle).  A pause that makes
    ``readjust_limit`` within ``horizon`` reports is one too.
    """
    if ji[I_MON, j] == 0:
        return REPORT_QUIET
    d = jf[F_LAST_DUR, j]
    w = cfg[C_WINDOW]
    n = ji[I_WIN_N, j]
    pos = ji[I_WIN_POS, j]
    slow = ji[I_SLOWN, j]
    above = ji[I_ABOVE, j]
    below = ji[I_BELOW, j]
    if n == w:  # the oldest leaves
        old = win[j, pos % w]
        slow -= old > jf[F_SLOW, j]
        above -= old > jf[F_DHI, j]
        below -= old < jf[F_DLO, j]
    slow += d > jf[F_SLOW, j]
    above += d > jf[F_DHI, j]
    below += d < jf[F_DLO, j]
    n_after = min(n + 1, w)
    if slow <= cfg[C_OT] or ji[I_HIGH, j] != 0:
        if n_after == w:
            # p25 > x needs sorted[lo25 + 1] > x, i.e. at least w - lo25 - 1 entries
            # above x; p75 < y needs at least lo75 + 1 entries below y.
            lo25 = int(math.floor(0.25 * (w - 1)))
            lo75 = int(math.floor(0.75 * (w - 1)))
            if above >= w - lo25 - 1 or below >= lo75 + 1:
                start = 1 if n == w else 0
                for k in range(start, n):
                    scratch_f[k - start] = _ring_get(win, j, n, pos, k)
                scratch_f[w - 1] = d
                p25, p75 = _quartiles(scratch_f, w)
                if p25 > jf[F_DHI, j] or p75 < jf[F_DLO, j]:
                    return REPORT_CONTROLLER
        return REPORT_QUIET
    # a pause: would the readjustments then repeat too often?
    reports = ji[I_REPORTS, j] + 1
    kept = 0
    for k in range(ji[I_READJ_N, j]):
        if reports - readj[j, k] < cfg[C_HORIZON]:
            kept += 1
    if kept + 1 >= cfg[C_LIMIT] or ji[I_ROOT, j] == -2:
        return REPORT_CONTROLLER
    return REPORT_PAUSE


@jit
def _window_push(j: int, d: float, jf: np.ndarray, ji: np.ndarray, win: np.ndarray,
                 hist: np.ndarray) -> None:
    w = win.shape[1]
    n = ji[I_WIN_N, j]
    pos = ji[I_WIN_POS, j]
    if n == w:
        old = win[j, pos]
        ji[I_SLOWN, j] -= old > jf[F_SLOW, j]
        ji[I_ABOVE, j] -= old > jf[F_DHI, j]
        ji[I_BELOW, j] -= old < jf[F_DLO, j]
    else:
        ji[I_WIN_N, j] = n + 1
    win[j, pos] = d
    ji[I_WIN_POS, j] = (pos + 1) % w
    ji[I_SLOWN, j] += d > jf[F_SLOW, j]
    ji[I_ABOVE, j] += d > jf[F_DHI, j]
    ji[I_BELOW, j] += d < jf[F_DLO, j]
    h = hist.shape[1]
    hist[j, ji[I_HIST_POS, j]] = d
    ji[I_HIST_POS, j] = (ji[I_HIST_POS, j] + 1) % h
    if ji[I_HIST_N, j] < h:
        ji[I_HIST_N, j] += 1


@jit
def monitor_apply(j: int, t: float, outcome: int, jf: np.ndarray, ji: np.ndarray,
                  win: np.ndarray, hist: np.ndarray, readj: np.ndarray,
                  cfg: np.ndarray) -> None:
    """Take the report of job ``j``'s latest iteration (a quiet one, or a pause)."""
    if ji[I_MON, j] == 0:
        return
    d = jf[F_LAST_DUR, j]
    _window_push(j, d, jf, ji, win, hist)
    reports = ji[I_REPORTS, j] + 1
    ji[I_REPORTS, j] = reports
    # readjustment marks older than the horizon are forgotten
    n = ji[I_READJ_N, j]
    drop = 0
    while drop < n and reports - readj[j, drop] >= cfg[C_HORIZON]:
        drop += 1
    if drop:
        for k in range(n - drop):
            readj[j, k] = readj[j, k + drop]
        ji[I_READJ_N, j] = n - drop
    if outcome != REPORT_PAUSE:
        return
    target = jf[F_TFIX, j]
    if ji[I_ROOT, j] >= 0:
        anchor = jf[F_ANCHOR, ji[I_ROOT, j]]
        if anchor > -np.inf:  # the reference has a phase
            target = anchor + jf[F_T_CR, j] + jf[F_T_OJ, j] - jf[F_T_OR, j] - jf[F_T_CJ, j]
    pause = (target - t) % jf[F_PPAT, j]
    ji[I_READJ, j] += 1
    jf[F_PAUSE_MS, j] += pause
    ji[I_WIN_N, j] = 0
    ji[I_WIN_POS, j] = 0
    ji[I_SLOWN, j] = 0
    ji[I_ABOVE, j] = 0
    ji[I_BELOW, j] = 0
    readj[j, ji[I_READJ_N, j]] = reports
    ji[I_READJ_N, j] += 1
    period = jf[F_JOB_PERIOD, j]
    jf[F_HOLD_PHASE, j] = (t + pause) % period
    jf[F_HOLD_PERIOD, j] = period


# ------------------------------------------------------------------------ jobs
@jit
def _begin(j: int, t: float, jf: np.ndarray, ji: np.ndarray, sigma: float, seed: int,
           ev_t: np.ndarray, ev_s: np.ndarray, ht: np.ndarray, hid: np.ndarray,
           hst: np.ndarray, hsize: np.ndarray) -> None:
    """Job ``j`` starts its next iteration at ``t``: compute (with its noise)."""
    i = ji[I_ITER, j]
    ji[I_PHASE, j] = PHASE_COMPUTE
    jf[F_ISTART, j] = t
    c = jf[F_COMPUTE, j] * noise_factor(seed, ji[I_KEY, j], i, sigma) + jf[F_STRETCH, j]
    jf[F_T, j] = t + c
    schedule(j, jf[F_T, j], ev_t, ev_s, ht, hid, hst, hsize)


@jit
def _comm(j: int, t: float, jf: np.ndarray, ji: np.ndarray, pf: np.ndarray,
          pi: np.ndarray, lf: np.ndarray, lptr: np.ndarray, lpods: np.ndarray,
          ev_t: np.ndarray, ev_s: np.ndarray, ht: np.ndarray, hid: np.ndarray,
          hst: np.ndarray, hsize: np.ndarray, scratch: np.ndarray) -> None:
    """Job ``j``'s compute ended at ``t``: its transfers start."""
    n_slots = jf.shape[1]
    ji[I_PHASE, j] = PHASE_COMM
    ji[I_PENDING, j] = 0
    p0 = ji[I_POD0, j]
    p1 = p0 + ji[I_NPOD, j]
    for p in range(p0, p1):
        lk = pi[P_LINK, p]
        if lk < 0 or pf[P_VOLUME, p] <= 0.0:
            continue
        _progress(lk, t, lf, lptr, lpods, pf, pi, jf, ji, ev_t, ev_s, ht, hid, hst, hsize)
        pf[P_LEFT, p] = pf[P_VOLUME, p]
        pi[P_ACTIVE, p] = 1
        ji[I_PENDING, j] += 1
    if ji[I_PENDING, j] == 0:  # all its pods on one node: nothing crosses a link
        ji[I_PHASE, j] = PHASE_TAIL
        jf[F_T, j] = t
        schedule(j, t, ev_t, ev_s, ht, hid, hst, hsize)
        return
    for p in range(p0, p1):
        lk = pi[P_LINK, p]
        if lk < 0 or pi[P_ACTIVE, p] == 0:
            continue
        seen = False
        for q in range(p0, p):
            if pi[P_LINK, q] == lk:
                seen = True
                break
        if not seen:
            _relink(lk, n_slots, lf, lptr, lpods, pf, pi, scratch, ev_t, ev_s, ht, hid, hst,
                    hsize)


@jit
def _ready(j: int, t: float, jf: np.ndarray, ji: np.ndarray, win: np.ndarray,
           hist: np.ndarray, readj: np.ndarray, cfg: np.ndarray, sigma: float,
           ev_t: np.ndarray, ev_s: np.ndarray, ht: np.ndarray, hid: np.ndarray,
           hst: np.ndarray, hsize: np.ndarray, scratch_f: np.ndarray,
           samples: np.ndarray) -> int:
    """Job ``j`` is between iterations at ``t``: its report, then its next start.
    Returns a STOP_* reason, or -1 to go on.  On a stop the job stays READY with
    an event at ``t``, so that the loop takes it up again where it stopped."""
    if ji[I_NSAMP, j] == samples.shape[1] and ji[I_ITER, j] < ji[I_NITERS, j]:
        schedule(j, t, ev_t, ev_s, ht, hid, hst, hsize)
        return STOP_SAMPLES
    if ji[I_REPORTED, j] == 0:
        outcome = monitor_outcome(j, t, jf, ji, win, readj, cfg, scratch_f)
        if outcome == REPORT_CONTROLLER:
            schedule(j, t, ev_t, ev_s, ht, hid, hst, hsize)
            return STOP_REPORT
        monitor_apply(j, t, outcome, jf, ji, win, hist, readj, cfg)
        ji[I_REPORTED, j] = 1
    if ji[I_ITER, j] >= ji[I_NITERS, j]:
        ji[I_PHASE, j] = PHASE_DONE
        schedule(j, np.inf, ev_t, ev_s, ht, hid, hst, hsize)
        return STOP_FINISHED
    hold = jf[F_HOLD_PHASE, j]
    if ji[I_LEAVE, j] != 0 and hold != hold:
        schedule(j, t, ev_t, ev_s, ht, hid, hst, hsize)
        return STOP_SOLO
    start = t
    if hold == hold:  # not NaN: a shift or a pause
        start = t + (hold - t) % jf[F_HOLD_PERIOD, j]
        jf[F_HOLD_PHASE, j] = np.nan
    if start > t:
        ji[I_PHASE, j] = PHASE_WAIT
        jf[F_T, j] = start
        schedule(j, start, ev_t, ev_s, ht, hid, hst, hsize)
    else:
        _begin(j, t, jf, ji, sigma, cfg[C_SEED], ev_t, ev_s, ht, hid, hst, hsize)
    return -1


@jit
def _iteration_end(j: int, t: float, jf: np.ndarray, ji: np.ndarray,
                   samples: np.ndarray) -> None:
    d = t - jf[F_ISTART, j]
    i = ji[I_ITER, j]
    ji[I_ITER, j] = i + 1
    ji[I_DONE, j] += 1
    jf[F_BUSY, j] += d
    if i % ji[I_STEP, j] == 0:
        samples[j, ji[I_NSAMP, j]] = d
        ji[I_NSAMP, j] += 1
    jf[F_LAST_DUR, j] = d
    jf[F_LAST_START, j] = jf[F_ISTART, j]
    if jf[F_ISTART, j] > jf[F_ANCHOR, j]:
        jf[F_ANCHOR, j] = jf[F_ISTART, j]
    ji[I_PHASE, j] = PHASE_READY
    ji[I_REPORTED, j] = 0


@jit
def advance(t: float, until: float, sigma: float,
            jf: np.ndarray, ji: np.ndarray, pf: np.ndarray, pi: np.ndarray,
            lf: np.ndarray, lptr: np.ndarray, lpods: np.ndarray,
            ev_t: np.ndarray, ev_s: np.ndarray, ht: np.ndarray, hid: np.ndarray,
            hst: np.ndarray, hsize: np.ndarray,
            win: np.ndarray, hist: np.ndarray, readj: np.ndarray, cfg: np.ndarray,
            samples: np.ndarray, scratch: np.ndarray, scratch_f: np.ndarray,
            out: np.ndarray) -> float:
    """Run events in time order from ``t``; return the time reached.

    ``out[0]`` says why it returned (STOP_*), ``out[1]`` which job slot.  Events
    at ``until`` or later are left for the next call.  Between calls the caller
    may change anything (add or remove jobs, set holds, stretches, monitor
    parameters), which is how arrivals and the controller act on the model.
    """
    n_slots = jf.shape[1]
    out[1] = -1
    while True:
        if hsize[0] == 0:
            out[0] = STOP_IDLE
            return t
        e = hid[0]
        if hst[0] != ev_s[e]:  # stale
            _pop(ht, hid, hst, hsize)
            continue
        te = ht[0]
        if te >= until:
            out[0] = STOP_TIME
            return until
        _pop(ht, hid, hst, hsize)
        ev_t[e] = np.inf
        t = te
        if e >= n_slots:  # a link: transfers complete
            lk = e - n_slots
            _progress(lk, t, lf, lptr, lpods, pf, pi, jf, ji, ev_t, ev_s, ht, hid, hst,
                      hsize)
            _relink(lk, n_slots, lf, lptr, lpods, pf, pi, scratch, ev_t, ev_s, ht, hid, hst,
                    hsize)
            continue
        j = e
        ph = ji[I_PHASE, j]
        if ph == PHASE_WAIT:
            if ji[I_ITER, j] >= ji[I_NITERS, j]:
                ji[I_PHASE, j] = PHASE_DONE
                out[0] = STOP_FINISHED
                out[1] = j
                return t
            _begin(j, t, jf, ji, sigma, cfg[C_SEED], ev_t, ev_s, ht, hid, hst, hsize)
        elif ph == PHASE_COMPUTE:
            _comm(j, t, jf, ji, pf, pi, lf, lptr, lpods, ev_t, ev_s, ht, hid, hst, hsize,
                  scratch)
        elif ph == PHASE_TAIL or ph == PHASE_READY:
            if ph == PHASE_TAIL:
                _iteration_end(j, t, jf, ji, samples)
            stop = _ready(j, t, jf, ji, win, hist, readj, cfg, sigma, ev_t, ev_s, ht, hid,
                          hst, hsize, scratch_f, samples)
            if stop >= 0:
                out[0] = stop
                out[1] = j
                return t
