# cython: language_level=3
"""The stop-and-wait controller's regulation rule, written once (paper §III-C).

One pod's monitor state is a :c:type:`Watch`: ring buffers of its last ``window``
iteration times and own parts (the time without communication), its last
``horizon`` of both (re-measuring), its readjustment marks (report indices, oldest
first) and their counters; its thresholds are a row of ``N_LIMITS`` doubles
(:meth:`tdmcore.metronome.controller.Controller.thresholds`) and the rules a row of
``N_RULES`` integers (:class:`~tdmcore.metronome.controller.ControllerConfig`).

:c:func:`decide` says what one report leads to without changing anything;
:c:func:`take` records it.  The controller calls them through
:mod:`tdmcore._kernels.regulation` on its own arrays, the simulator's event engine
(:mod:`tdmcore.sim.engine._flow`) inline on rows of its arrays, so both regulate by
these lines and nothing else.  Every function is ``nogil`` and allocates nothing:
``scratch`` holds ``max(window, horizon + 1)`` doubles.
"""

from libc.math cimport fabs, floor, fmod, copysign, INFINITY

ctypedef long long i64

cpdef enum:
    # what one report leads to (decide)
    QUIET = 0          # nothing
    PAUSE = 1          # pause the pod onto its target phase
    QUIET_KEEP = 3     # a drifted window, re-measured: the pattern stands (window consumed)
    PAUSE_KEEP = 4     # a pause; repeated, re-measured: the pattern stands (marks consumed)
    DRIFT_UPDATE = 5   # a drifted window, re-measured: a new pattern
    PAUSE_UPDATE = 6   # a pause; repeated, re-measured: a new pattern

cpdef enum:
    # counters of a watch (i64)
    W_N = 0          # iteration-time window: entries, next write position
    W_POS = 1
    O_N = 2          # own-part window: entries, next write position
    O_POS = 3
    H_N = 4          # histories (both): entries, next write position
    H_POS = 5
    REPORTS = 6      # reports taken
    MARKS_N = 7      # readjustment marks kept
    N_COUNTERS = 8

cpdef enum:
    # thresholds of a pod (double)
    SLOW = 0         # an iteration longer than this is slow (a_t x baseline)
    OWN_LO = 1       # a window of own parts whose p75 is below this ...
    OWN_HI = 2       # ... or whose p25 is above this has drifted
    IDLE = 3         # idle the plans inject (re-measuring takes it off)
    COMM = 4         # the pattern's communication time (kept after a drift)
    PERIOD = 5       # the pattern's period (a re-measured period stands near it)
    TOL_MS = 6       # a re-measured period this close to PERIOD stands
    N_LIMITS = 7

cpdef enum:
    # rules (i64)
    WINDOW = 0
    O_T = 1
    HORIZON = 2
    LIMIT = 3
    N_RULES = 4


cdef struct Watch:
    double* win      # iteration times, a ring of WINDOW
    double* own      # own parts, a ring of WINDOW
    double* hist     # iteration times, a ring of HORIZON
    double* hown     # own parts, a ring of HORIZON
    i64* marks       # readjustment marks (report indices), oldest first, HORIZON + 1
    i64* c           # N_COUNTERS counters
    const double* lim  # N_LIMITS thresholds


cdef inline double pymod(double a, double b) noexcept nogil:
    """Python's float ``a % b`` (the sign of ``b``), as CPython computes it."""
    cdef double m = fmod(a, b)
    if m != 0.0:
        if (b < 0.0) != (m < 0.0):
            m += b
    else:
        m = copysign(0.0, b)
    return m


cdef inline double target_phase(double anchor_ref, double compute_ref, double offset_job,
                                double offset_ref, double compute_job) noexcept nogil:
    """Where a job's iterations should start (paper §III-C, "Global offset"; spec §7):
    its reference job's latest reported comm start (``anchor_ref`` + ``compute_ref``,
    the reference's compute time and injected idle) plus the difference of the two
    offsets, less the job's own compute time and idle (``compute_job``): offsets place
    comm phases and an iteration computes first.  Summed term by term in this order,
    by the controller (:meth:`tdmcore.metronome.controller.Controller.target_phase`)
    and the simulator's engine alike."""
    return anchor_ref + compute_ref + offset_job - offset_ref - compute_job


cdef inline double pause_to(double target_ms, double now_ms, double period_ms) noexcept nogil:
    """The pause that moves a pod's next start from ``now_ms`` onto ``target_ms``
    modulo ``period_ms`` (its phase period): ``(target - now) mod period``, the one
    rule of a readjustment's length."""
    return pymod(target_ms - now_ms, period_ms)


cdef inline double next_start(double target_ms, double now_ms, double period_ms) noexcept nogil:
    """The first start at or after ``now_ms`` on ``target_ms`` modulo ``period_ms``:
    ``now + pause_to(target, now, period)``."""
    return now_ms + pause_to(target_ms, now_ms, period_ms)


cdef inline double ring_get(const double* buf, i64 size, i64 n, i64 pos, i64 k) noexcept nogil:
    """The k-th oldest of the n entries of a ring of ``size`` whose next write is at pos."""
    cdef i64 idx = (pos - n + k) % size
    if idx < 0:
        idx += size
    return buf[idx]


cdef inline void sort_values(double* v, i64 n) noexcept nogil:
    cdef i64 i, m
    cdef double x
    for i in range(1, n):
        x = v[i]
        m = i
        while m > 0 and v[m - 1] > x:
            v[m] = v[m - 1]
            m -= 1
        v[m] = x


cdef inline double quantile(const double* v, i64 n, double q) noexcept nogil:
    """Linear interpolation on sorted ``v`` (numpy's default method)."""
    cdef double pos = q * (n - 1)
    cdef i64 lo = <i64>floor(pos)
    cdef i64 hi = lo + 1 if lo + 1 < n - 1 else n - 1
    cdef double a = v[lo], b = v[hi]
    return a + (b - a) * (pos - lo)


cdef inline double median(const double* v, i64 n) noexcept nogil:
    """Median of sorted ``v``: the middle value, or the mean of the two middle ones."""
    cdef i64 mid = n // 2
    if n % 2:
        return v[mid]
    return (v[mid - 1] + v[mid]) / 2.0


cdef inline i64 with_report(const double* ring, i64 size, i64 n, i64 pos, double value,
                            double* out) noexcept nogil:
    """A ring's entries oldest first as they stand once ``value`` is pushed (a full
    ring drops its oldest) into ``out``; returns their count."""
    cdef i64 k, m = 0
    cdef i64 start = 1 if n == size else 0
    for k in range(start, n):
        out[m] = ring_get(ring, size, n, pos, k)
        m += 1
    out[m] = value
    return m + 1


cdef inline i64 uncontended(Watch* x, const i64* rules, double d, double o,
                            double* scratch, bint comm) noexcept nogil:
    """The history's uncontended iterations with the report ``(d, o)`` pushed (a full
    history drops its oldest): those at or below ``SLOW`` (``A_T`` x the baseline).
    Writes their iteration times (``comm`` False) or communication times (iteration
    time less own part, ``comm`` True) into ``scratch``, oldest first; returns how
    many."""
    cdef i64 h = rules[HORIZON]
    cdef i64 n = x.c[H_N], pos = x.c[H_POS]
    cdef i64 k, m = 0
    cdef i64 start = 1 if n == h else 0
    cdef double dk, ok
    for k in range(start, n + 1):
        if k < n:
            dk = ring_get(x.hist, h, n, pos, k)
            ok = ring_get(x.hown, h, n, pos, k)
        else:
            dk = d
            ok = o
        if dk <= x.lim[SLOW]:
            scratch[m] = dk - ok if comm else dk
            m += 1
    return m


cdef inline double remeasured_period(Watch* x, const i64* rules, bint drift, double d,
                                     double o, double* scratch) noexcept nogil:
    """The period re-measured from the histories with this report pushed
    (Monitor._update_pattern), as the paper profiles a pod, "in an environment
    without contention" (spec §7, revised 2026-11-28): after a drift, and after
    repeated readjustments when no iteration of the history was uncontended, the
    median own part less the idle plus the pattern's comm time; after repeated
    readjustments, the median of the uncontended iterations (at or below ``SLOW``)
    less the idle.  Never a contended iteration; the injected idle is always taken
    off, so it is never mistaken for the pod's own time."""
    cdef i64 h = rules[HORIZON]
    cdef i64 m = 0
    if not drift:
        m = uncontended(x, rules, d, o, scratch, False)
    if m == 0:
        m = with_report(x.hown, h, x.c[H_N], x.c[H_POS], o, scratch)
        sort_values(scratch, m)
        return median(scratch, m) - x.lim[IDLE] + x.lim[COMM]
    sort_values(scratch, m)
    return median(scratch, m) - x.lim[IDLE]


cdef inline double remeasured_comm(Watch* x, const i64* rules, double d, double o,
                                   double* scratch) noexcept nogil:
    """The communication time re-measured after repeated readjustments: the median
    of iteration time less own part over the history's uncontended iterations
    (:c:func:`uncontended`) with this report pushed; the pattern's comm time when
    none was uncontended (a contended comm phase is never taken for the pod's)."""
    cdef i64 m = uncontended(x, rules, d, o, scratch, True)
    if m == 0:
        return x.lim[COMM]
    sort_values(scratch, m)
    return median(scratch, m)


cdef inline bint stands(Watch* x, double period) noexcept nogil:
    """A re-measured period within ``TOL_MS`` of the pattern's (or not positive)
    changes nothing."""
    return fabs(period - x.lim[PERIOD]) <= x.lim[TOL_MS] or period <= 0.0


cdef inline i64 slow_count(Watch* x, const i64* rules, double d, double* scratch) noexcept nogil:
    """Slow iterations (longer than ``SLOW``) in the window once ``d`` joins it."""
    cdef i64 k, slow = 0
    cdef i64 m = with_report(x.win, rules[WINDOW], x.c[W_N], x.c[W_POS], d, scratch)
    for k in range(m):
        if scratch[k] > x.lim[SLOW]:
            slow += 1
    return slow


cdef inline int decide(Watch* x, const i64* rules, double d, double o, bint high,
                       double* scratch) noexcept nogil:
    """What the report ``(d, o)`` (iteration time, own part) leads to; changes nothing.

    Monitor.report_iteration's rule: the report joins the window of iteration
    times and of own parts (a full window drops its oldest); more than ``O_T`` slow
    iterations (``> SLOW``) pause a pod that is not ``high``, and ``LIMIT``
    readjustments within ``HORIZON`` reports make it re-measure its pattern;
    otherwise a full window of own parts whose p25 lies above ``OWN_HI`` or whose
    p75 below ``OWN_LO`` makes it re-measure.  A re-measured period that
    :c:func:`stands` is ``*_KEEP``, any other ``*_UPDATE``.
    """
    cdef i64 w = rules[WINDOW]
    cdef i64 no = x.c[O_N], k, m, above = 0, below = 0
    cdef i64 lo25, lo75, reports, kept
    cdef double v, p25, p75
    if slow_count(x, rules, d, scratch) <= rules[O_T] or high:
        if no + 1 < w:
            return QUIET
        m = with_report(x.own, w, no, x.c[O_POS], o, scratch)
        for k in range(m):
            v = scratch[k]
            above += v > x.lim[OWN_HI]
            below += v < x.lim[OWN_LO]
        # p25 > y needs sorted[lo25 + 1] > y, i.e. at least w - lo25 - 1 entries
        # above y; p75 < y needs at least lo75 + 1 entries below y: else no sort.
        lo25 = <i64>floor(0.25 * (w - 1))
        lo75 = <i64>floor(0.75 * (w - 1))
        if above < w - lo25 - 1 and below < lo75 + 1:
            return QUIET
        sort_values(scratch, m)
        p25 = quantile(scratch, m, 0.25)
        p75 = quantile(scratch, m, 0.75)
        if p25 > x.lim[OWN_HI] or p75 < x.lim[OWN_LO]:
            if stands(x, remeasured_period(x, rules, True, d, o, scratch)):
                return QUIET_KEEP
            return DRIFT_UPDATE
        return QUIET
    # a pause: do the readjustments now repeat too often?
    reports = x.c[REPORTS] + 1
    kept = 0
    for k in range(x.c[MARKS_N]):
        if reports - x.marks[k] < rules[HORIZON]:
            kept += 1
    if kept + 1 >= rules[LIMIT]:
        if stands(x, remeasured_period(x, rules, False, d, o, scratch)):
            return PAUSE_KEEP
        return PAUSE_UPDATE
    return PAUSE


cdef inline void clear_windows(Watch* x, bint own_only) noexcept nogil:
    if not own_only:
        x.c[W_N] = 0
        x.c[W_POS] = 0
    x.c[O_N] = 0
    x.c[O_POS] = 0


cdef inline void push(double* ring, i64 size, i64* n, i64* pos, double value) noexcept nogil:
    ring[pos[0]] = value
    pos[0] = (pos[0] + 1) % size
    if n[0] < size:
        n[0] += 1


cdef inline void take(Watch* x, const i64* rules, double d, double o, int outcome) noexcept nogil:
    """Record the report ``(d, o)`` whose :c:func:`decide` gave ``outcome``: it joins
    the windows and histories; marks older than ``HORIZON`` reports are forgotten;
    a drifted window that stood is consumed; a pause clears both windows and leaves
    a mark (a repeated pause that stood consumes the marks instead)."""
    cdef i64 w = rules[WINDOW], h = rules[HORIZON]
    cdef i64 reports, n, drop, k, hn
    push(x.win, w, &x.c[W_N], &x.c[W_POS], d)
    push(x.own, w, &x.c[O_N], &x.c[O_POS], o)
    hn = x.c[H_N]
    push(x.hist, h, &hn, &x.c[H_POS], d)
    x.hown[(x.c[H_POS] - 1 + h) % h] = o
    x.c[H_N] = hn
    reports = x.c[REPORTS] + 1
    x.c[REPORTS] = reports
    n = x.c[MARKS_N]
    drop = 0
    while drop < n and reports - x.marks[drop] >= h:
        drop += 1
    if drop:
        for k in range(n - drop):
            x.marks[k] = x.marks[k + drop]
        x.c[MARKS_N] = n - drop
    if outcome == QUIET_KEEP or outcome == DRIFT_UPDATE:
        if outcome == QUIET_KEEP:
            clear_windows(x, True)
        return
    if outcome == PAUSE or outcome == PAUSE_KEEP or outcome == PAUSE_UPDATE:
        clear_windows(x, False)
        if outcome == PAUSE_KEEP:
            x.c[MARKS_N] = 0
        else:
            x.marks[x.c[MARKS_N]] = reports
            x.c[MARKS_N] += 1


cdef inline bint quiet_bounds(Watch* x, const i64* rules, bint high, double* own_lo,
                              double* own_hi, double* longest) noexcept nogil:
    """Bounds under which every further report is ``QUIET`` whatever its order: an
    own part in ``[own_lo, own_hi]`` and an iteration time at most ``longest``
    (infinite for a ``high`` pod), given what the windows hold now.  False when
    the windows themselves rule that out (an own part outside the band, or more
    than ``O_T`` slow iterations in the window).

    Why it holds: with every own part in the band neither p25 nor p75 can leave
    it, and with no new slow iteration the slow count only falls."""
    cdef i64 w = rules[WINDOW], k, slow = 0
    cdef double v
    for k in range(x.c[O_N]):
        v = ring_get(x.own, w, x.c[O_N], x.c[O_POS], k)
        if not (x.lim[OWN_LO] <= v <= x.lim[OWN_HI]):
            return False
    own_lo[0] = x.lim[OWN_LO]
    own_hi[0] = x.lim[OWN_HI]
    if high:
        longest[0] = INFINITY
        return True
    for k in range(x.c[W_N]):
        if ring_get(x.win, w, x.c[W_N], x.c[W_POS], k) > x.lim[SLOW]:
            slow += 1
    if slow > rules[O_T]:
        return False
    longest[0] = x.lim[SLOW]
    return True
