# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Flow-level network model of periodic training jobs (docs/simulator.md): the event engine.

A job iterates: compute, then every one of its network pods sends a volume through
its node's host link; the iteration ends when the last of its transfers ends
(synchronous data parallel), plus a fixed latency tail (high-latency node pairs).
A link of capacity ``B`` (minus background traffic) shares bandwidth max-min fairly
among its active transfers, each capped at its own rate ``r_p``; when two or more
transfers together ask for more than that, they share ``eta x`` it (the link's
contention efficiency ``L_ETA``, docs/simulator.md).  Rates change only at events
(a phase ends, a transfer ends), so the model is exact between events.

The engine is a discrete-event loop over a binary heap: every job has at most one
pending event (its compute or latency tail ends, or its next iteration starts) and
every link one (its earliest transfer completion at the current rates).  An event
touches only its own job or link, so a step costs ``O(log n)`` plus the pods on one
link, whatever the cluster's size.  Links are brought up to date lazily (each keeps
the time its transfers were last advanced).

The stop-and-wait controller's continuous regulation (docs/scheduler.md) runs in
the loop: every finished iteration is reported at once, exactly as
:meth:`tdmcore.controller.Controller.report_iteration` would take it (window of
iteration times, slow count against ``a_t x baseline``, readjustment pauses onto
the job's target phase, windows of own parts for drift, re-measuring a pattern that
stands); a report whose outcome needs the controller itself (a pattern that
changes, or a target phase that depends on a job outside the engine) stops the
loop *before* it is taken, so the caller hands that one report to the controller.  ``tests/test_engine_monitor.py`` checks this monitor
against the controller on thousands of random report streams.

Compute noise is counter-based: iteration ``i`` of the job with noise key ``k``
under seed ``s`` draws ``z = noise_normal(s, k, i)``, so any iteration's noise is
known without drawing the ones before it; the closed-form stretches below use the
same function.

Cython rather than Numba: the loop is many small steps over shared state, and a
call between Numba functions reference-counts every array it passes (measured:
~1.7-3.4 us per iteration with Numba helpers, against the tens of nanoseconds the
work takes).  Here every step works on raw pointers.  Units: ms, Gbit, Gbps
(1e-3 Gbit/ms).  Every state array belongs to the caller
(:class:`tdmcore.sim.network.FlowEngine`); the functions change them in place.
"""

from cpython.exc cimport PyErr_CheckSignals
from libc.math cimport sqrt, log, cos, exp, fabs, floor, fmod, copysign, INFINITY, NAN, isnan

ctypedef long long i64
ctypedef unsigned long long u64

#: A transfer with less than this left (Gbit) is finished (float round-off).
DONE_GBIT = 1e-12
cdef double DONE = 1e-12

cpdef enum:
    # phases
    PHASE_WAIT = 0      # the next iteration starts at F_T
    PHASE_COMPUTE = 1   # compute ends at F_T
    PHASE_COMM = 2      # transfers pending
    PHASE_DONE = 3      # every iteration done
    PHASE_READY = 4     # an iteration just ended; its report or the next start is due
    PHASE_TAIL = 5      # transfers done, the latency tail ends at F_T
    PHASE_FREE = 6      # an unused slot

cpdef enum:
    # why advance() returned (out[0]; the job slot concerned is out[1])
    STOP_TIME = 0       # reached until
    STOP_FINISHED = 1   # a job finished its last iteration (its slot is PHASE_DONE)
    STOP_SAMPLES = 2    # a job's buffer of sampled iteration times is full
    STOP_IDLE = 3       # nothing is left to happen
    STOP_SOLO = 4       # a job flagged to leave is between iterations, no hold pending
    STOP_REPORT = 5     # a job's report needs the controller

cpdef enum:
    # what monitor_outcome decides for one report
    REPORT_QUIET = 0
    REPORT_PAUSE = 1
    REPORT_CONTROLLER = 2
    REPORT_QUIET_KEEP = 3   # a drifted window, re-measured: the pattern stands
    REPORT_PAUSE_KEEP = 4   # a pause; repeated, re-measured: the pattern stands

cpdef enum:
    # job fields: rows of the float array ``jf``
    F_T = 0            # time of the job's pending event
    F_ISTART = 1       # start of the iteration in progress (or of the last one)
    F_COMPUTE = 2      # compute time before noise (ms)
    F_STRETCH = 3      # idle injected into every compute phase (ms)
    F_TAIL = 4         # latency tail per iteration (ms)
    F_HOLD_PHASE = 5   # next start: the first time congruent to this (NaN: none)
    F_HOLD_PERIOD = 6
    F_BUSY = 7         # sum of the iteration times since the job entered the engine
    F_ANCHOR = 8       # start of the latest finished iteration (the controller's anchor)
    F_SLOW = 9         # an iteration longer than this is slow (a_t x baseline)
    F_OLO = 10         # drift: the window of own parts has its p75 below this ...
    F_OHI = 11         # ... or its p25 above this
    F_PPAT = 12        # the pattern's period (a re-measured one stands near it)
    F_TFIX = 13        # target phase when the reference job is not tracked here
    F_PAUSE_MS = 14    # pauses taken in the engine (ms)
    F_LAST_DUR = 15    # the latest finished iteration's time and start
    F_LAST_START = 16
    F_JOB_PERIOD = 17  # the phase period: a pause is taken, and held, modulo it
    # target phase = anchor(root) + compute(root) + offset(job) - offset(root) - compute(job),
    # term by term in that order (Controller.target_phase)
    F_T_CR = 18
    F_T_OJ = 19
    F_T_OR = 20
    F_T_CJ = 21
    F_CSTART = 22      # when the iteration in progress started communicating
    F_LAST_OWN = 23    # the latest finished iteration's own part (without communication)
    F_IDLE = 24        # idle the plans inject (re-measuring: taken off)
    F_CPAT = 25        # the pattern's communication time (re-measuring: kept)
    F_TOL_MS = 26      # drift_tol x period: a re-measured period this close stands
    N_JF = 27

cpdef enum:
    # job fields: rows of the integer array ``ji``
    I_PHASE = 0
    I_ITER = 1         # iterations finished (the index of the next one)
    I_NITERS = 2
    I_PENDING = 3      # transfers in flight
    I_POD0 = 4         # the job's pods are pods[I_POD0 : I_POD0 + I_NPOD]
    I_NPOD = 5
    I_LEAVE = 6        # stop (STOP_SOLO) when between iterations
    I_KEY = 7          # noise key
    I_DONE = 8         # iterations finished since the job entered the engine
    I_STEP = 9         # iteration i is sampled when i % step == 0
    I_NSAMP = 10       # samples in the buffer
    I_MON = 11         # monitored by the controller
    I_HIGH = 12        # never paused
    I_ROOT = 13        # slot of the reference job (-1: use F_TFIX; -2: ask the controller)
    I_WIN_N = 14       # window: count, next write position (a ring of `window` entries)
    I_WIN_POS = 15
    I_HIST_N = 16      # histories (iteration times, own parts): count, next write position
    I_HIST_POS = 17
    I_REPORTS = 18     # reports taken (the controller's watch.iterations)
    I_READJ_N = 19     # readjustment marks kept (report indices, oldest first)
    I_READJ = 20       # readjustments made in the engine
    I_REPORTED = 21    # the latest iteration's report has been taken
    I_SLOWN = 22       # window entries > F_SLOW; own-part window entries > F_OHI, < F_OLO
    I_ABOVE = 23
    I_BELOW = 24
    I_OWN_N = 25       # own-part window: count, next write position
    I_OWN_POS = 26
    N_JI = 27

cpdef enum:
    # pod fields (float rows, then integer rows)
    P_CAP = 0
    P_VOLUME = 1
    P_LEFT = 2
    P_RATE = 3
    P_SENT = 4
    N_PF = 5
cpdef enum:
    P_JOB = 0
    P_LINK = 1
    P_ACTIVE = 2
    N_PI = 3

cpdef enum:
    # link fields
    L_CAP = 0
    L_BG = 1
    L_T = 2      # transfers on the link advanced up to this time
    L_SENT = 3
    L_MARK = 4   # scratch: the _comm call (C_MARK) that last relinked it
    L_ETA = 5    # contention efficiency: the share of the link a saturating crowd gets
    N_LF = 6

cpdef enum:
    # monitor configuration (``cfg``)
    C_WINDOW = 0
    C_OT = 1
    C_HORIZON = 2
    C_LIMIT = 3
    C_SEED = 4
    C_MARK = 5     # a counter: each _comm call marks the links it relinks
    N_CFG = 6


cdef u64 GOLDEN = 0x9E3779B97F4A7C15ULL
cdef double TWO_POW_M53 = 1.1102230246251565e-16
cdef double TWO_PI = 6.283185307179586


# ---------------------------------------------------------------------------- noise
cdef inline u64 _mix(u64 x) noexcept nogil:
    """SplitMix64's finaliser: a bijective 64-bit mixer."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL
    return x ^ (x >> 31)


cdef inline double _normal(u64 seed, u64 key, u64 i) noexcept nogil:
    cdef u64 base = _mix(_mix(seed + GOLDEN) + key * GOLDEN)
    cdef u64 c = 2 * i
    cdef u64 h1 = _mix(base + (c + 1) * GOLDEN)
    cdef u64 h2 = _mix(base + (c + 2) * GOLDEN)
    cdef double u1 = (<double>(h1 >> 11) + 1.0) * TWO_POW_M53
    cdef double u2 = <double>(h2 >> 11) * TWO_POW_M53
    return sqrt(-2.0 * log(u1)) * cos(TWO_PI * u2)


cdef inline double _factor(u64 seed, u64 key, u64 i, double sigma) noexcept nogil:
    if sigma == 0.0:
        return 1.0
    return exp(sigma * _normal(seed, key, i) - sigma * sigma / 2.0)


cpdef double noise_normal(u64 seed, u64 key, u64 i):
    """A standard normal for iteration ``i`` of noise key ``key`` under ``seed``.

    ``base = mix(mix(seed + g) + key g)``, ``h_m = mix(base + (2 i + m) g)`` for
    m = 1, 2 (``mix`` is SplitMix64's finaliser, ``g`` the golden-ratio constant
    0x9E3779B97F4A7C15, arithmetic modulo 2^64); ``u1 = ((h_1 >> 11) + 1) / 2^53``
    in (0, 1], ``u2 = (h_2 >> 11) / 2^53``; Box-Muller:
    ``z = sqrt(-2 ln u1) cos(2 pi u2)``.
    """
    return _normal(seed, key, i)


cpdef double noise_factor(u64 seed, u64 key, u64 i, double sigma):
    """Lognormal compute multiplier, mean 1: ``exp(sigma z - sigma^2 / 2)``."""
    return _factor(seed, key, i, sigma)


cdef inline double _pymod(double a, double b) noexcept nogil:
    """Python's float ``a % b`` (the sign of ``b``), as CPython computes it."""
    cdef double m = fmod(a, b)
    if m != 0.0:
        if (b < 0.0) != (m < 0.0):
            m += b
    else:
        m = copysign(0.0, b)
    return m


# ---------------------------------------------------------------------------- state
cdef struct Eng:
    double* jf
    i64* ji
    i64 ns           # job slots (columns of jf / ji)
    double* pf
    i64* pi
    i64 npods        # pod columns
    double* lf
    i64 nl           # links
    i64* lptr
    i64* lpods
    double* ev_t
    i64* ev_s
    double* ht
    i64* hid
    i64* hst
    i64* hsize
    i64 hcap
    double* win
    double* wino
    i64 w
    double* hist
    double* histo
    i64 h
    i64* readj
    i64 rcap
    i64* cfg
    double* samples
    i64 scap
    i64* scratch
    double* scratch_f
    double sigma


cdef inline i64 JX(Eng* e, int f, i64 j) noexcept nogil:
    return f * e.ns + j


cdef inline i64 PX(Eng* e, int f, i64 p) noexcept nogil:
    return f * e.npods + p


cdef inline i64 LX(Eng* e, int f, i64 k) noexcept nogil:
    return f * e.nl + k


cdef Eng _eng(double[:, ::1] jf, i64[:, ::1] ji, double[:, ::1] pf, i64[:, ::1] pi,
              double[:, ::1] lf, i64[::1] lptr, i64[::1] lpods, double[::1] ev_t,
              i64[::1] ev_s, double[::1] ht, i64[::1] hid, i64[::1] hst, i64[::1] hsize,
              double[:, ::1] win, double[:, ::1] wino, double[:, ::1] hist,
              double[:, ::1] histo,
              i64[:, ::1] readj, i64[::1] cfg, double[:, ::1] samples, i64[::1] scratch,
              double[::1] scratch_f, double sigma):
    cdef Eng e
    e.jf = &jf[0, 0]
    e.ji = &ji[0, 0]
    e.ns = jf.shape[1]
    e.pf = &pf[0, 0]
    e.pi = &pi[0, 0]
    e.npods = pf.shape[1]
    e.lf = &lf[0, 0] if lf.shape[1] > 0 else NULL
    e.nl = lf.shape[1]
    e.lptr = &lptr[0]
    e.lpods = &lpods[0] if lpods.shape[0] > 0 else NULL
    e.ev_t = &ev_t[0]
    e.ev_s = &ev_s[0]
    e.ht = &ht[0]
    e.hid = &hid[0]
    e.hst = &hst[0]
    e.hsize = &hsize[0]
    e.hcap = ht.shape[0]
    e.win = &win[0, 0]
    e.wino = &wino[0, 0]
    e.w = win.shape[1]
    e.hist = &hist[0, 0]
    e.histo = &histo[0, 0]
    e.h = hist.shape[1]
    e.readj = &readj[0, 0]
    e.rcap = readj.shape[1]
    e.cfg = &cfg[0]
    e.samples = &samples[0, 0]
    e.scap = samples.shape[1]
    e.scratch = &scratch[0]
    e.scratch_f = &scratch_f[0]
    e.sigma = sigma
    return e


# ---------------------------------------------------------------------------- heap
# An indexed binary min-heap of the entities' pending events, ordered by (time,
# entity): ``ht``/``hid`` hold the entries, ``hst[ent]`` the position of entity
# ``ent`` in it (-1: no pending event).  Each entity has at most one entry, moved
# in place when its event moves, so the heap holds only live events.
cdef inline bint _less(Eng* e, i64 a, i64 b) noexcept nogil:
    return e.ht[a] < e.ht[b] or (e.ht[a] == e.ht[b] and e.hid[a] < e.hid[b])


cdef inline void _swap(Eng* e, i64 a, i64 b) noexcept nogil:
    cdef double t = e.ht[a]
    cdef i64 x = e.hid[a]
    e.ht[a] = e.ht[b]
    e.hid[a] = e.hid[b]
    e.ht[b] = t
    e.hid[b] = x
    e.hst[e.hid[a]] = a
    e.hst[x] = b


cdef inline void _sift_down(Eng* e, i64 n, i64 i) noexcept nogil:
    cdef i64 left, child
    while True:
        left = 2 * i + 1
        if left >= n:
            return
        child = left
        if left + 1 < n and _less(e, left + 1, left):
            child = left + 1
        if _less(e, child, i):
            _swap(e, child, i)
            i = child
        else:
            return


cdef inline void _sift_up(Eng* e, i64 i) noexcept nogil:
    cdef i64 parent
    while i > 0:
        parent = (i - 1) // 2
        if _less(e, i, parent):
            _swap(e, i, parent)
            i = parent
        else:
            return


cdef void _rebuild(Eng* e) noexcept nogil:
    cdef i64 n = 0, k, i
    cdef i64 total = e.ns + e.nl
    for k in range(total):
        e.hst[k] = -1
    for k in range(total):
        if e.ev_t[k] < INFINITY:
            e.ht[n] = e.ev_t[k]
            e.hid[n] = k
            e.hst[k] = n
            n += 1
    i = n // 2 - 1
    while i >= 0:
        _sift_down(e, n, i)
        i -= 1
    e.hsize[0] = n


cdef inline void _remove_at(Eng* e, i64 i) noexcept nogil:
    cdef i64 n = e.hsize[0] - 1
    e.hst[e.hid[i]] = -1
    e.hsize[0] = n
    if i == n:
        return
    e.ht[i] = e.ht[n]
    e.hid[i] = e.hid[n]
    e.hst[e.hid[i]] = i
    if i > 0 and _less(e, i, (i - 1) // 2):
        _sift_up(e, i)
    else:
        _sift_down(e, n, i)


cdef inline void _schedule(Eng* e, i64 ent, double t) noexcept nogil:
    """Entity ``ent``'s one pending event is now at ``t`` (inf: none)."""
    cdef i64 i = e.hst[ent]
    cdef double old
    e.ev_s[ent] += 1
    e.ev_t[ent] = t
    if t == INFINITY:
        if i >= 0:
            _remove_at(e, i)
        return
    if i >= 0:
        old = e.ht[i]
        e.ht[i] = t
        if t < old:
            _sift_up(e, i)
        elif t > old:
            _sift_down(e, e.hsize[0], i)
        return
    i = e.hsize[0]
    e.ht[i] = t
    e.hid[i] = ent
    e.hst[ent] = i
    e.hsize[0] = i + 1
    _sift_up(e, i)


cdef inline void _pop(Eng* e) noexcept nogil:
    """Remove the root: the hole goes down along the smaller children to a leaf
    (one comparison per level), then the last entry fills it and sifts up."""
    cdef i64 n = e.hsize[0] - 1
    cdef i64 hole = 0, left, child
    e.hst[e.hid[0]] = -1
    e.hsize[0] = n
    if n == 0:
        return
    while True:
        left = 2 * hole + 1
        if left >= n:
            break
        child = left
        if left + 1 < n and _less(e, left + 1, left):
            child = left + 1
        e.ht[hole] = e.ht[child]
        e.hid[hole] = e.hid[child]
        e.hst[e.hid[hole]] = hole
        hole = child
    if hole != n:
        e.ht[hole] = e.ht[n]
        e.hid[hole] = e.hid[n]
        e.hst[e.hid[hole]] = hole
        _sift_up(e, hole)


# ---------------------------------------------------------------------------- links
cdef inline double _waterfill(Eng* e, i64 lk) noexcept nogil:
    """Max-min fair rates of link ``lk``'s active transfers (each capped at its
    rate) by progressive filling; returns the earliest completion time.

    Two or more transfers whose rates add up to more than the link has left
    (capacity minus background) contend: they share ``L_ETA`` times it.  One
    transfer alone, or transfers that fit, are not touched (``L_ETA = 1`` is plain
    max-min fair sharing, bit for bit)."""
    cdef i64 k = 0, q, p, m, i
    cdef double cap, left, share, t0, first, r, finish, asked = 0.0
    for q in range(e.lptr[lk], e.lptr[lk + 1]):
        p = e.lpods[q]
        if e.pi[PX(e, P_ACTIVE, p)] != 0:
            m = k  # insertion sort by cap (ties keep pod order)
            cap = e.pf[PX(e, P_CAP, p)]
            asked += cap
            while m > 0 and e.pf[PX(e, P_CAP, e.scratch[m - 1])] > cap:
                e.scratch[m] = e.scratch[m - 1]
                m -= 1
            e.scratch[m] = p
            k += 1
    if k == 0:
        return INFINITY
    left = e.lf[LX(e, L_CAP, lk)] - e.lf[LX(e, L_BG, lk)]
    if left < 0.0:
        left = 0.0
    if k >= 2 and asked > left:
        left *= e.lf[LX(e, L_ETA, lk)]
    i = 0
    while i < k:
        share = left / (k - i)
        p = e.scratch[i]
        if e.pf[PX(e, P_CAP, p)] <= share:
            e.pf[PX(e, P_RATE, p)] = e.pf[PX(e, P_CAP, p)]
            left -= e.pf[PX(e, P_CAP, p)]
            i += 1
        else:
            for m in range(i, k):
                e.pf[PX(e, P_RATE, e.scratch[m])] = share
            break
    t0 = e.lf[LX(e, L_T, lk)]
    first = INFINITY
    for m in range(k):
        p = e.scratch[m]
        r = e.pf[PX(e, P_RATE, p)]
        if r > 0.0:
            finish = t0 + e.pf[PX(e, P_LEFT, p)] / (r * 1e-3)
            if finish < first:
                first = finish
    return first


cdef inline void _progress(Eng* e, i64 lk, double t) noexcept nogil:
    """Advance link ``lk``'s transfers to ``t``; a transfer that is done leaves,
    and a job whose last transfer left enters its latency tail."""
    cdef double t0 = e.lf[LX(e, L_T, lk)]
    cdef double dt = t - t0 if t > t0 else 0.0
    cdef double r, left, moved
    cdef i64 q, p, j
    # With no time passed a transfer can still be due: one whose remaining time is
    # below the resolution of t (at 500 h, t in ms has ulps of 1e-7 ms) ends at t.
    for q in range(e.lptr[lk], e.lptr[lk + 1]):
        p = e.lpods[q]
        if e.pi[PX(e, P_ACTIVE, p)] == 0:
            continue
        r = e.pf[PX(e, P_RATE, p)]
        left = e.pf[PX(e, P_LEFT, p)]
        if r > 0.0 and (t0 + left / (r * 1e-3) <= t or left - r * 1e-3 * dt <= DONE):
            moved = left
        else:
            moved = r * 1e-3 * dt
        if moved == 0.0 and left > 0.0:
            continue
        e.pf[PX(e, P_LEFT, p)] = left - moved
        e.pf[PX(e, P_SENT, p)] += moved
        e.lf[LX(e, L_SENT, lk)] += moved
        if moved == left:
            e.pf[PX(e, P_LEFT, p)] = 0.0
            e.pi[PX(e, P_ACTIVE, p)] = 0
            e.pf[PX(e, P_RATE, p)] = 0.0
            j = e.pi[PX(e, P_JOB, p)]
            e.ji[JX(e, I_PENDING, j)] -= 1
            if e.ji[JX(e, I_PENDING, j)] == 0:
                e.ji[JX(e, I_PHASE, j)] = PHASE_TAIL
                e.jf[JX(e, F_T, j)] = t + e.jf[JX(e, F_TAIL, j)]
                _schedule(e, j, e.jf[JX(e, F_T, j)])
    if t > t0:
        e.lf[LX(e, L_T, lk)] = t


cdef inline void _relink(Eng* e, i64 lk) noexcept nogil:
    """New rates on link ``lk`` (already advanced); schedule its next completion."""
    _schedule(e, e.ns + lk, _waterfill(e, lk))


# ---------------------------------------------------------------------------- monitor
cdef inline double _ring_get(double* buf, i64 size, i64 j, i64 n, i64 pos, i64 k) noexcept nogil:
    """The k-th oldest of the n entries of ring row j whose next write is at pos."""
    cdef i64 idx = (pos - n + k) % size
    if idx < 0:
        idx += size
    return buf[j * size + idx]


cdef inline void _sort(double* v, i64 n) noexcept nogil:
    cdef i64 i, m
    cdef double x
    for i in range(1, n):
        x = v[i]
        m = i
        while m > 0 and v[m - 1] > x:
            v[m] = v[m - 1]
            m -= 1
        v[m] = x


cdef inline double _quantile(double* v, i64 n, double q) noexcept nogil:
    """Linear interpolation on sorted ``v`` (numpy's default method)."""
    cdef double pos = q * (n - 1)
    cdef i64 lo = <i64>floor(pos)
    cdef i64 hi = lo + 1 if lo + 1 < n - 1 else n - 1
    cdef double a = v[lo], b = v[hi]
    return a + (b - a) * (pos - lo)


cdef inline double _median(double* v, i64 n) noexcept nogil:
    """Median of sorted ``v``: the middle value, or the mean of the two middle ones."""
    cdef i64 mid = n // 2
    if n % 2:
        return v[mid]
    return (v[mid - 1] + v[mid]) / 2.0


cdef bint _stands(Eng* e, i64 j, bint drift) noexcept nogil:
    """Re-measuring job ``j``'s pattern with the latest report pushed
    (Controller._remeasure): does the period stand?  After a drift: the median own
    part less the idle plus the pattern's comm time; after repeated
    readjustments: the median iteration time less the idle."""
    cdef double* buf = e.histo if drift else e.hist
    cdef double last = e.jf[JX(e, F_LAST_OWN, j)] if drift else e.jf[JX(e, F_LAST_DUR, j)]
    cdef i64 n = e.ji[JX(e, I_HIST_N, j)]
    cdef i64 pos = e.ji[JX(e, I_HIST_POS, j)]
    cdef i64 k, m, start
    cdef double period
    start = 1 if n == e.h else 0  # a full history drops its oldest
    m = 0
    for k in range(start, n):
        e.scratch_f[m] = _ring_get(buf, e.h, j, n, pos, k)
        m += 1
    e.scratch_f[m] = last
    m += 1
    _sort(e.scratch_f, m)
    period = _median(e.scratch_f, m) - e.jf[JX(e, F_IDLE, j)]
    if drift:
        period = period + e.jf[JX(e, F_CPAT, j)]
    return fabs(period - e.jf[JX(e, F_PPAT, j)]) <= e.jf[JX(e, F_TOL_MS, j)] or period <= 0.0


cdef int _outcome(Eng* e, i64 j) noexcept nogil:
    """What the report of job ``j``'s latest iteration leads to; changes nothing.

    The rules of Controller.report_iteration: the duration joins the window of
    iteration times and its own part the window of own parts (the oldest leaves a
    full window); more than ``o_t`` slow iterations pause a job that is not high
    priority; otherwise a full window of own parts whose p25 lies above ``F_OHI``
    or whose p75 below ``F_OLO`` makes the controller re-measure the pattern, as
    do ``readjust_limit`` pauses within ``horizon`` reports.  A re-measured pattern
    that stands is taken here (``*_KEEP``); one that changes, or a pause whose
    target depends on a job outside the engine, is the controller's.
    """
    if e.ji[JX(e, I_MON, j)] == 0:
        return REPORT_QUIET
    cdef double d = e.jf[JX(e, F_LAST_DUR, j)]
    cdef double o = e.jf[JX(e, F_LAST_OWN, j)]
    cdef i64 w = e.cfg[C_WINDOW]
    cdef i64 n = e.ji[JX(e, I_WIN_N, j)]
    cdef i64 pos = e.ji[JX(e, I_WIN_POS, j)]
    cdef i64 no = e.ji[JX(e, I_OWN_N, j)]
    cdef i64 opos = e.ji[JX(e, I_OWN_POS, j)]
    cdef i64 slow = e.ji[JX(e, I_SLOWN, j)]
    cdef i64 above = e.ji[JX(e, I_ABOVE, j)]
    cdef i64 below = e.ji[JX(e, I_BELOW, j)]
    cdef double old, p25, p75
    cdef i64 lo25, lo75, start, k, reports, kept
    if n == w:  # the oldest leaves
        slow -= e.win[j * e.w + pos % w] > e.jf[JX(e, F_SLOW, j)]
    slow += d > e.jf[JX(e, F_SLOW, j)]
    if no == w:
        old = e.wino[j * e.w + opos % w]
        above -= old > e.jf[JX(e, F_OHI, j)]
        below -= old < e.jf[JX(e, F_OLO, j)]
    above += o > e.jf[JX(e, F_OHI, j)]
    below += o < e.jf[JX(e, F_OLO, j)]
    if slow <= e.cfg[C_OT] or e.ji[JX(e, I_HIGH, j)] != 0:
        if no + 1 >= w:
            # p25 > x needs sorted[lo25 + 1] > x, i.e. at least w - lo25 - 1 entries
            # above x; p75 < y needs at least lo75 + 1 entries below y.
            lo25 = <i64>floor(0.25 * (w - 1))
            lo75 = <i64>floor(0.75 * (w - 1))
            if above >= w - lo25 - 1 or below >= lo75 + 1:
                start = 1 if no == w else 0
                for k in range(start, no):
                    e.scratch_f[k - start] = _ring_get(e.wino, e.w, j, no, opos, k)
                e.scratch_f[w - 1] = o
                _sort(e.scratch_f, w)
                p25 = _quantile(e.scratch_f, w, 0.25)
                p75 = _quantile(e.scratch_f, w, 0.75)
                if p25 > e.jf[JX(e, F_OHI, j)] or p75 < e.jf[JX(e, F_OLO, j)]:
                    if _stands(e, j, True):
                        return REPORT_QUIET_KEEP
                    return REPORT_CONTROLLER
        return REPORT_QUIET
    if e.ji[JX(e, I_ROOT, j)] == -2:
        return REPORT_CONTROLLER
    # a pause: do the readjustments now repeat too often?
    reports = e.ji[JX(e, I_REPORTS, j)] + 1
    kept = 0
    for k in range(e.ji[JX(e, I_READJ_N, j)]):
        if reports - e.readj[j * e.rcap + k] < e.cfg[C_HORIZON]:
            kept += 1
    if kept + 1 >= e.cfg[C_LIMIT]:
        if _stands(e, j, False):
            return REPORT_PAUSE_KEEP
        return REPORT_CONTROLLER
    return REPORT_PAUSE


cdef inline void _clear_windows(Eng* e, i64 j, bint own_only) noexcept nogil:
    if not own_only:
        e.ji[JX(e, I_WIN_N, j)] = 0
        e.ji[JX(e, I_WIN_POS, j)] = 0
        e.ji[JX(e, I_SLOWN, j)] = 0
    e.ji[JX(e, I_OWN_N, j)] = 0
    e.ji[JX(e, I_OWN_POS, j)] = 0
    e.ji[JX(e, I_ABOVE, j)] = 0
    e.ji[JX(e, I_BELOW, j)] = 0


cdef inline void _window_push(Eng* e, i64 j, double d, double o) noexcept nogil:
    cdef i64 n = e.ji[JX(e, I_WIN_N, j)]
    cdef i64 pos = e.ji[JX(e, I_WIN_POS, j)]
    cdef double old
    cdef i64 hp
    if n == e.w:
        e.ji[JX(e, I_SLOWN, j)] -= e.win[j * e.w + pos] > e.jf[JX(e, F_SLOW, j)]
    else:
        e.ji[JX(e, I_WIN_N, j)] = n + 1
    e.win[j * e.w + pos] = d
    e.ji[JX(e, I_WIN_POS, j)] = (pos + 1) % e.w
    e.ji[JX(e, I_SLOWN, j)] += d > e.jf[JX(e, F_SLOW, j)]
    n = e.ji[JX(e, I_OWN_N, j)]
    pos = e.ji[JX(e, I_OWN_POS, j)]
    if n == e.w:
        old = e.wino[j * e.w + pos]
        e.ji[JX(e, I_ABOVE, j)] -= old > e.jf[JX(e, F_OHI, j)]
        e.ji[JX(e, I_BELOW, j)] -= old < e.jf[JX(e, F_OLO, j)]
    else:
        e.ji[JX(e, I_OWN_N, j)] = n + 1
    e.wino[j * e.w + pos] = o
    e.ji[JX(e, I_OWN_POS, j)] = (pos + 1) % e.w
    e.ji[JX(e, I_ABOVE, j)] += o > e.jf[JX(e, F_OHI, j)]
    e.ji[JX(e, I_BELOW, j)] += o < e.jf[JX(e, F_OLO, j)]
    hp = e.ji[JX(e, I_HIST_POS, j)]
    e.hist[j * e.h + hp] = d
    e.histo[j * e.h + hp] = o
    e.ji[JX(e, I_HIST_POS, j)] = (hp + 1) % e.h
    if e.ji[JX(e, I_HIST_N, j)] < e.h:
        e.ji[JX(e, I_HIST_N, j)] += 1


cdef void _apply(Eng* e, i64 j, double t, int outcome) noexcept nogil:
    """Take the report of job ``j``'s latest iteration (not REPORT_CONTROLLER)."""
    if e.ji[JX(e, I_MON, j)] == 0:
        return
    cdef i64 reports, n, drop, k, root
    cdef double target, anchor, pause, period
    _window_push(e, j, e.jf[JX(e, F_LAST_DUR, j)], e.jf[JX(e, F_LAST_OWN, j)])
    reports = e.ji[JX(e, I_REPORTS, j)] + 1
    e.ji[JX(e, I_REPORTS, j)] = reports
    # readjustment marks older than the horizon are forgotten
    n = e.ji[JX(e, I_READJ_N, j)]
    drop = 0
    while drop < n and reports - e.readj[j * e.rcap + drop] >= e.cfg[C_HORIZON]:
        drop += 1
    if drop:
        for k in range(n - drop):
            e.readj[j * e.rcap + k] = e.readj[j * e.rcap + k + drop]
        e.ji[JX(e, I_READJ_N, j)] = n - drop
    if outcome == REPORT_QUIET_KEEP:  # the drifted window was re-measured: consumed
        _clear_windows(e, j, True)
        return
    if outcome != REPORT_PAUSE and outcome != REPORT_PAUSE_KEEP:
        return
    target = e.jf[JX(e, F_TFIX, j)]
    root = e.ji[JX(e, I_ROOT, j)]
    if root >= 0:
        anchor = e.jf[JX(e, F_ANCHOR, root)]
        if anchor > -INFINITY:  # the reference has a phase
            target = anchor + e.jf[JX(e, F_T_CR, j)] + e.jf[JX(e, F_T_OJ, j)] \
                - e.jf[JX(e, F_T_OR, j)] - e.jf[JX(e, F_T_CJ, j)]
    pause = _pymod(target - t, e.jf[JX(e, F_JOB_PERIOD, j)])
    e.ji[JX(e, I_READJ, j)] += 1
    e.jf[JX(e, F_PAUSE_MS, j)] += pause
    _clear_windows(e, j, False)
    if outcome == REPORT_PAUSE_KEEP:  # repeated, re-measured: the marks are consumed
        e.ji[JX(e, I_READJ_N, j)] = 0
    else:
        e.readj[j * e.rcap + e.ji[JX(e, I_READJ_N, j)]] = reports
        e.ji[JX(e, I_READJ_N, j)] += 1
    period = e.jf[JX(e, F_JOB_PERIOD, j)]
    e.jf[JX(e, F_HOLD_PHASE, j)] = _pymod(t + pause, period)
    e.jf[JX(e, F_HOLD_PERIOD, j)] = period


# ---------------------------------------------------------------------------- jobs
cdef inline void _begin(Eng* e, i64 j, double t) noexcept nogil:
    """Job ``j`` starts its next iteration at ``t``: compute (with its noise)."""
    cdef i64 i = e.ji[JX(e, I_ITER, j)]
    cdef double c
    e.ji[JX(e, I_PHASE, j)] = PHASE_COMPUTE
    e.jf[JX(e, F_ISTART, j)] = t
    c = e.jf[JX(e, F_COMPUTE, j)] * _factor(<u64>e.cfg[C_SEED], <u64>e.ji[JX(e, I_KEY, j)],
                                             <u64>i, e.sigma) + e.jf[JX(e, F_STRETCH, j)]
    e.jf[JX(e, F_T, j)] = t + c
    _schedule(e, j, t + c)


cdef inline void _comm(Eng* e, i64 j, double t) noexcept nogil:
    """Job ``j``'s compute ended at ``t``: its transfers start."""
    cdef i64 p0 = e.ji[JX(e, I_POD0, j)]
    cdef i64 p1 = p0 + e.ji[JX(e, I_NPOD, j)]
    cdef i64 p, lk
    cdef double mark, private_end, free, r, finish
    e.ji[JX(e, I_PHASE, j)] = PHASE_COMM
    e.ji[JX(e, I_PENDING, j)] = 0
    e.jf[JX(e, F_CSTART, j)] = t
    for p in range(p0, p1):
        lk = e.pi[PX(e, P_LINK, p)]
        if lk < 0 or e.pf[PX(e, P_VOLUME, p)] <= 0.0:
            continue
        _progress(e, lk, t)
        e.pf[PX(e, P_LEFT, p)] = e.pf[PX(e, P_VOLUME, p)]
        e.pi[PX(e, P_ACTIVE, p)] = 1
        e.ji[JX(e, I_PENDING, j)] += 1
    if e.ji[JX(e, I_PENDING, j)] == 0:  # all its pods on one node: nothing crosses a link
        e.ji[JX(e, I_PHASE, j)] = PHASE_TAIL
        e.jf[JX(e, F_T, j)] = t
        _schedule(e, j, t)
        return
    # Each of its links once, in pod order (marks are exact doubles below 2^53).
    # A link that carries this one pod only keeps its rate until the transfer
    # ends (no other pod can start on it): its end is computed as _waterfill
    # would, and the job's own event at the latest such end completes them all
    # (_private_done) instead of one link event each.
    e.cfg[C_MARK] += 1
    mark = <double>e.cfg[C_MARK]
    private_end = -INFINITY
    for p in range(p0, p1):
        lk = e.pi[PX(e, P_LINK, p)]
        if lk < 0 or e.pi[PX(e, P_ACTIVE, p)] == 0:
            continue
        if e.lptr[lk + 1] - e.lptr[lk] == 1:
            free = e.lf[LX(e, L_CAP, lk)] - e.lf[LX(e, L_BG, lk)]
            if free < 0.0:
                free = 0.0
            r = e.pf[PX(e, P_CAP, p)]
            if r > free:
                r = free
            if r > 0.0:
                e.pf[PX(e, P_RATE, p)] = r
                finish = e.lf[LX(e, L_T, lk)] + e.pf[PX(e, P_LEFT, p)] / (r * 1e-3)
                if finish > private_end:
                    private_end = finish
                continue
        if e.lf[LX(e, L_MARK, lk)] != mark:
            e.lf[LX(e, L_MARK, lk)] = mark
            _relink(e, lk)
    if private_end > -INFINITY:
        e.jf[JX(e, F_T, j)] = private_end
        _schedule(e, j, private_end)


cdef inline void _private_done(Eng* e, i64 j, double t) noexcept nogil:
    """The job's transfers on links without a pending event (those it had to
    itself when they started) end now: advance those links to ``t``; a transfer
    still in flight (it cannot be) gets its link event."""
    cdef i64 p0 = e.ji[JX(e, I_POD0, j)]
    cdef i64 p1 = p0 + e.ji[JX(e, I_NPOD, j)]
    cdef i64 p, lk
    for p in range(p0, p1):
        lk = e.pi[PX(e, P_LINK, p)]
        if lk < 0 or e.pi[PX(e, P_ACTIVE, p)] == 0 or e.ev_t[e.ns + lk] < INFINITY:
            continue
        _progress(e, lk, t)
        if e.pi[PX(e, P_ACTIVE, p)] != 0:
            _relink(e, lk)


cdef inline void _iteration_end(Eng* e, i64 j, double t) noexcept nogil:
    cdef double d = t - e.jf[JX(e, F_ISTART, j)]
    cdef i64 i = e.ji[JX(e, I_ITER, j)]
    e.ji[JX(e, I_ITER, j)] = i + 1
    e.ji[JX(e, I_DONE, j)] += 1
    e.jf[JX(e, F_BUSY, j)] += d
    if i % e.ji[JX(e, I_STEP, j)] == 0:
        e.samples[j * e.scap + e.ji[JX(e, I_NSAMP, j)]] = d
        e.ji[JX(e, I_NSAMP, j)] += 1
    e.jf[JX(e, F_LAST_DUR, j)] = d
    e.jf[JX(e, F_LAST_OWN, j)] = e.jf[JX(e, F_CSTART, j)] - e.jf[JX(e, F_ISTART, j)]
    e.jf[JX(e, F_LAST_START, j)] = e.jf[JX(e, F_ISTART, j)]
    if e.jf[JX(e, F_ISTART, j)] > e.jf[JX(e, F_ANCHOR, j)]:
        e.jf[JX(e, F_ANCHOR, j)] = e.jf[JX(e, F_ISTART, j)]
    e.ji[JX(e, I_PHASE, j)] = PHASE_READY
    e.ji[JX(e, I_REPORTED, j)] = 0


cdef int _ready(Eng* e, i64 j, double t) noexcept nogil:
    """Job ``j`` is between iterations at ``t``: its report, then its next start.
    Returns a STOP_* reason, or -1 to go on.  On a stop the job stays READY with
    an event at ``t``, so that the loop takes it up again where it stopped."""
    cdef int outcome
    cdef double hold, start
    if e.ji[JX(e, I_NSAMP, j)] == e.scap and e.ji[JX(e, I_ITER, j)] < e.ji[JX(e, I_NITERS, j)]:
        _schedule(e, j, t)
        return STOP_SAMPLES
    if e.ji[JX(e, I_REPORTED, j)] == 0:
        outcome = _outcome(e, j)
        if outcome == REPORT_CONTROLLER:
            _schedule(e, j, t)
            return STOP_REPORT
        _apply(e, j, t, outcome)
        e.ji[JX(e, I_REPORTED, j)] = 1
    if e.ji[JX(e, I_ITER, j)] >= e.ji[JX(e, I_NITERS, j)]:
        e.ji[JX(e, I_PHASE, j)] = PHASE_DONE
        _schedule(e, j, INFINITY)
        return STOP_FINISHED
    hold = e.jf[JX(e, F_HOLD_PHASE, j)]
    if e.ji[JX(e, I_LEAVE, j)] != 0 and isnan(hold):
        _schedule(e, j, t)
        return STOP_SOLO
    start = t
    if not isnan(hold):  # a shift or a pause
        start = t + _pymod(hold - t, e.jf[JX(e, F_HOLD_PERIOD, j)])
        e.jf[JX(e, F_HOLD_PHASE, j)] = NAN
    if start > t:
        e.ji[JX(e, I_PHASE, j)] = PHASE_WAIT
        e.jf[JX(e, F_T, j)] = start
        _schedule(e, j, start)
    else:
        _begin(e, j, t)
    return -1


#: ``_advance`` returns to ``advance`` after this many events (not a STOP_* code
#: of the API: ``advance`` goes on at once), so a long run still answers Ctrl-C.
cdef i64 _EVENTS_PER_CHECK = 1 << 18
cdef i64 _STOP_BUDGET = -1


cdef double _advance(Eng* e, double t, double until, i64* out, i64 budget) noexcept nogil:
    cdef i64 ent, j, lk
    cdef i64 done = 0
    cdef double te
    cdef int ph, stop
    out[1] = -1
    while True:
        if done == budget:  # between two events: the caller may look at signals
            out[0] = _STOP_BUDGET
            return t
        done += 1
        if e.hsize[0] == 0:
            out[0] = STOP_IDLE
            return t
        ent = e.hid[0]
        te = e.ht[0]
        if te >= until:
            out[0] = STOP_TIME
            return until
        _pop(e)
        e.ev_t[ent] = INFINITY
        t = te
        if ent >= e.ns:  # a link: transfers complete
            lk = ent - e.ns
            _progress(e, lk, t)
            _relink(e, lk)
            continue
        j = ent
        ph = <int>e.ji[JX(e, I_PHASE, j)]
        if ph == PHASE_WAIT:
            if e.ji[JX(e, I_ITER, j)] >= e.ji[JX(e, I_NITERS, j)]:
                e.ji[JX(e, I_PHASE, j)] = PHASE_DONE
                out[0] = STOP_FINISHED
                out[1] = j
                return t
            _begin(e, j, t)
        elif ph == PHASE_COMPUTE:
            _comm(e, j, t)
        elif ph == PHASE_COMM:
            _private_done(e, j, t)
        elif ph == PHASE_TAIL or ph == PHASE_READY:
            if ph == PHASE_TAIL:
                _iteration_end(e, j, t)
            stop = _ready(e, j, t)
            if stop >= 0:
                out[0] = stop
                out[1] = j
                return t


# ---------------------------------------------------------------------------- Python API
# ``state`` is the tuple of the engine's 22 arrays in the order of ``_eng``'s
# parameters (``tdmcore.sim.network.FlowEngine._state``); the caller keeps them
# alive for the call.
cdef Eng _eng_of(tuple state, double sigma):
    if len(state) != 22:
        raise ValueError(f"state: expected the engine's 22 arrays, got {len(state)}")
    return _eng(state[0], state[1], state[2], state[3], state[4], state[5], state[6],
                state[7], state[8], state[9], state[10], state[11], state[12], state[13],
                state[14], state[15], state[16], state[17], state[18], state[19],
                state[20], state[21], sigma)


def advance(double t, double until, double sigma, tuple state, i64[::1] out):
    """Run events in time order from ``t``; return the time reached.

    ``out[0]`` says why it returned (STOP_*), ``out[1]`` which job slot.  Events
    at ``until`` or later are left for the next call.  Between calls the caller
    may change anything (add or remove jobs, set holds, stretches, monitor
    parameters), which is how arrivals and the controller act on the model.
    """
    cdef Eng e = _eng_of(state, sigma)
    cdef double reached = t
    while True:
        with nogil:
            reached = _advance(&e, reached, until, &out[0], _EVENTS_PER_CHECK)
        if out[0] != _STOP_BUDGET:
            return reached
        # a long stretch of events: let Python run its signal handlers (Ctrl-C
        # raises KeyboardInterrupt here), then go on exactly where it stopped
        PyErr_CheckSignals()


cdef Eng _heap_eng(double[::1] ev_t, i64[::1] ev_s, double[::1] ht, i64[::1] hid,
                   i64[::1] hst, i64[::1] hsize, i64 n_slots, i64 n_links):
    cdef Eng e
    e.ev_t = &ev_t[0]
    e.ev_s = &ev_s[0]
    e.ht = &ht[0]
    e.hid = &hid[0]
    e.hst = &hst[0]
    e.hsize = &hsize[0]
    e.hcap = ht.shape[0]
    e.ns = n_slots
    e.nl = n_links
    return e


def schedule(i64 ent, double t, double[::1] ev_t, i64[::1] ev_s, double[::1] ht,
             i64[::1] hid, i64[::1] hst, i64[::1] hsize, i64 n_slots, i64 n_links):
    """Entity ``ent`` (a job slot, or ``n_slots + link``) has its event at ``t``."""
    cdef Eng e = _heap_eng(ev_t, ev_s, ht, hid, hst, hsize, n_slots, n_links)
    _schedule(&e, ent, t)


def rebuild_heap(double[::1] ev_t, i64[::1] ev_s, double[::1] ht, i64[::1] hid,
                 i64[::1] hst, i64[::1] hsize, i64 n_slots, i64 n_links):
    """The heap from every entity's scheduled event (``ev_t`` finite)."""
    cdef Eng e = _heap_eng(ev_t, ev_s, ht, hid, hst, hsize, n_slots, n_links)
    _rebuild(&e)


def flush_links(double t, double sigma, tuple state):
    """Bring every link's transfers up to ``t`` (no event lies before ``t``), so
    that ``P_SENT`` and ``L_SENT`` are exact at ``t``."""
    cdef Eng e = _eng_of(state, sigma)
    cdef i64 lk
    for lk in range(e.nl):
        if e.ev_t[e.ns + lk] < INFINITY and e.lf[LX(&e, L_T, lk)] < t:
            _progress(&e, lk, t)
            _relink(&e, lk)


def relink(i64 lk, double sigma, tuple state):
    """New rates on link ``lk`` from its transfers as they stand at its ``L_T``."""
    cdef Eng e = _eng_of(state, sigma)
    _relink(&e, lk)


def monitor_outcome(i64 j, double sigma, tuple state):
    """The REPORT_* outcome of job ``j``'s latest iteration (``F_LAST_DUR``)."""
    cdef Eng e = _eng_of(state, sigma)
    return _outcome(&e, j)


def monitor_apply(i64 j, double t, int outcome, double sigma, tuple state):
    """Take job ``j``'s latest report at ``t`` with outcome QUIET or PAUSE."""
    cdef Eng e = _eng_of(state, sigma)
    _apply(&e, j, t, outcome)


# ---------------------------------------------------------------------------- stretches
# A job alone on all its links (or on one node) is affected by nobody: iteration i
# lasts ``compute x noise_i + const`` (const = idle + its comm time alone + its
# latency tail), exactly what the engine computes for it.  These walk a stretch of
# iterations i0 .. i0 + n - 1 starting at s0 without events.

def stretch_summary(u64 seed, u64 key, double sigma, i64 i0, i64 n, double compute,
                    double const):
    """(total time, shortest iteration, longest iteration) of the stretch."""
    cdef double total = 0.0, lo = INFINITY, hi = -INFINITY, d
    cdef i64 i
    if n <= 0:
        return 0.0, INFINITY, -INFINITY
    if sigma == 0.0:
        d = compute + const
        return d * n, d, d
    with nogil:
        for i in range(i0, i0 + n):
            d = compute * _factor(seed, key, <u64>i, sigma) + const
            total += d
            if d < lo:
                lo = d
            if d > hi:
                hi = d
    return total, lo, hi


def stretch_locate(u64 seed, u64 key, double sigma, i64 i0, i64 n, double compute,
                   double const, double s0, double t):
    """``(k, s_k, s_prev)``: ``k`` iterations of the stretch end by ``t`` (at most
    ``n``); iteration ``i0 + k`` starts at ``s_k``; the last one that ended started
    at ``s_prev`` (NaN when none did)."""
    cdef double s = s0, prev = NAN, d
    cdef i64 k
    if sigma == 0.0:
        d = compute + const
        if d <= 0.0:
            return n, s0, NAN
        k = <i64>min(<double>n, max(0.0, floor((t - s0) / d)))
        while k < n and s0 + (k + 1) * d <= t:  # round-off: the ends as multiples of d
            k += 1
        while k > 0 and s0 + k * d > t:
            k -= 1
        return k, s0 + k * d, (s0 + (k - 1) * d) if k > 0 else NAN
    with nogil:
        for k in range(n):
            d = compute * _factor(seed, key, <u64>(i0 + k), sigma) + const
            if s + d > t:
                break
            prev = s
            s += d
        else:
            k = n
    return k, s, prev


def stretch_commit(u64 seed, u64 key, double sigma, i64 i0, i64 n, double compute,
                   double const, double s0, i64 step, double[::1] samples,
                   double[::1] last_d, double[::1] last_s):
    """Walk ``n`` iterations: returns ``(total, samples written, tail kept)``.

    Iteration ``i`` is written to ``samples`` when ``i % step == 0``; the last
    ``len(last_d)`` iterations' times and starts fill ``last_d``/``last_s`` (a ring,
    read back oldest first by the caller from the returned count).
    """
    cdef i64 m = last_d.shape[0], w = 0, kept = 0, k, i
    cdef double total = 0.0, s = s0, d
    cdef double const_d = compute + const
    with nogil:
        for k in range(n):
            i = i0 + k
            if sigma == 0.0:
                d = const_d
            else:
                d = compute * _factor(seed, key, <u64>i, sigma) + const
            if i % step == 0:
                samples[w] = d
                w += 1
            if m > 0:
                last_d[kept % m] = d
                last_s[kept % m] = s
                kept += 1
            total += d
            s += d
    return total, w, kept
