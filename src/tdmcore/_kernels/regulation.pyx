# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The regulation rule (``regulation.pxd``) for Python callers: one pod's watch at a time.

A watch is six arrays that the caller owns: ``win`` and ``own`` (``window`` doubles:
iteration times and own parts), ``hist`` and ``hown`` (``horizon`` doubles: their
histories), ``marks`` (``horizon + 1`` report indices) and ``counters``
(``N_COUNTERS`` integers, zero for an empty watch); ``limits`` holds the pod's
``N_LIMITS`` thresholds and ``rules`` the ``N_RULES`` settings, in the orders of
the enums below.  Nothing is validated here: the controller's monitor
(:mod:`tdmcore.metronome.control.monitor`) builds these arrays itself.
"""

from libc.math cimport NAN
from libc.stdlib cimport free, malloc


cdef inline Watch _watch(double[::1] win, double[::1] own, double[::1] hist,
                         double[::1] hown, i64[::1] marks, i64[::1] counters,
                         const double[::1] limits):
    cdef Watch x
    x.win = &win[0]
    x.own = &own[0]
    x.hist = &hist[0]
    x.hown = &hown[0]
    x.marks = &marks[0]
    x.c = &counters[0]
    x.lim = &limits[0]
    return x


cdef double* _scratch(const i64[::1] rules) except NULL:
    cdef i64 n = rules[WINDOW] if rules[WINDOW] > rules[HORIZON] + 1 else rules[HORIZON] + 1
    cdef double* s = <double*>malloc(n * sizeof(double))
    if s == NULL:
        raise MemoryError()
    return s


def report(double[::1] win, double[::1] own, double[::1] hist, double[::1] hown,
           i64[::1] marks, i64[::1] counters, const double[::1] limits,
           const i64[::1] rules, double d, double o, bint high):
    """Decide and take one report (iteration time ``d``, own part ``o``).

    Returns ``(outcome, period, comm, slow)``: the outcome of :c:func:`decide`; for
    ``DRIFT_UPDATE`` / ``PAUSE_UPDATE`` the re-measured period and communication
    time of the new pattern (NaN otherwise); the slow iterations in the window
    with this report (before a pause clears it).
    """
    cdef Watch x = _watch(win, own, hist, hown, marks, counters, limits)
    cdef double* scratch = _scratch(rules)
    cdef int outcome
    cdef i64 slow
    cdef double period = NAN, comm = NAN
    try:
        slow = slow_count(&x, &rules[0], d, scratch)
        outcome = decide(&x, &rules[0], d, o, high, scratch)
        if outcome == DRIFT_UPDATE:
            period = remeasured_period(&x, &rules[0], True, d, o, scratch)
            comm = limits[COMM]
        elif outcome == PAUSE_UPDATE:
            period = remeasured_period(&x, &rules[0], False, d, o, scratch)
            comm = remeasured_comm(&x, &rules[0], d, o, scratch)
        take(&x, &rules[0], d, o, outcome)
    finally:
        free(scratch)
    return outcome, period, comm, slow


def take_quiet(double[::1] win, double[::1] own, double[::1] hist, double[::1] hown,
               i64[::1] marks, i64[::1] counters, const double[::1] limits,
               const i64[::1] rules, const double[::1] d, const double[::1] o, bint high):
    """Take the reports ``(d[k], o[k])`` in order while each leads to nothing
    (``QUIET`` or ``QUIET_KEEP``); returns how many were taken (the next one, if
    any, is left for :func:`report`)."""
    cdef Watch x = _watch(win, own, hist, hown, marks, counters, limits)
    cdef double* scratch = _scratch(rules)
    cdef i64 k = 0, n = d.shape[0]
    cdef int outcome
    try:
        with nogil:
            while k < n:
                outcome = decide(&x, &rules[0], d[k], o[k], high, scratch)
                if outcome != QUIET and outcome != QUIET_KEEP:
                    break
                take(&x, &rules[0], d[k], o[k], outcome)
                k += 1
    finally:
        free(scratch)
    return k


def bounds(double[::1] win, double[::1] own, double[::1] hist, double[::1] hown,
           i64[::1] marks, i64[::1] counters, const double[::1] limits,
           const i64[::1] rules, bint high):
    """``(own_lo, own_hi, longest)`` of :c:func:`quiet_bounds`, or None."""
    cdef Watch x = _watch(win, own, hist, hown, marks, counters, limits)
    cdef double lo, hi, longest
    if not quiet_bounds(&x, &rules[0], high, &lo, &hi, &longest):
        return None
    return lo, hi, longest


def target_phase_ms(double anchor_ref, double compute_ref, double offset_job,
                    double offset_ref, double compute_job):
    """:c:func:`target_phase`: where a job's iterations should start."""
    return target_phase(anchor_ref, compute_ref, offset_job, offset_ref, compute_job)


def pause_ms(double target_ms, double now_ms, double period_ms):
    """:c:func:`pause_to`: the pause that moves a pod's next start from ``now_ms``
    onto ``target_ms`` modulo ``period_ms``: ``(target - now) mod period``."""
    return pause_to(target_ms, now_ms, period_ms)


def next_start_ms(double target_ms, double now_ms, double period_ms):
    """:c:func:`next_start`: the first start at or after ``now_ms`` on
    ``target_ms`` modulo ``period_ms``."""
    return next_start(target_ms, now_ms, period_ms)
