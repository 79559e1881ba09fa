# cython: language_level=3
"""Exact interval-overlap discretization of traffic circles (spec/metronome.md §2).

Cython rather than Numba: it is called once per pod per decision with tiny inputs,
so an ahead-of-time compiled loop with no JIT warm-up serves it best.
"""

from libc.math cimport floor, ceil


def discretize_rows(const double[::1] multiples,
                    const double[::1] duty_cycles,
                    const double[::1] bandwidths,
                    double[:, ::1] out,
                    double[::1] midpoints,
                    const long long[::1] mid_offsets):
    """Fill ``out[i]`` with pod i's demand per bin at rotation 0 (Eqs. 1-4).

    Pod i has ``multiples[i]`` comm units on the circle; unit u covers the arc
    ``[u N / mul, (u + d) N / mul)`` in bin units.  Bin k gets ``r`` times the
    length of its overlap with ``[k, k + 1)`` **[decision]**, so the circle's total
    demand is ``r d N``.  ``midpoints[mid_offsets[i] + u]`` receives the middle of
    unit u, ``(u + d / 2) N / mul``.  ``out`` must be zeroed by the caller.
    """
    cdef Py_ssize_t n_rows = out.shape[0]
    cdef Py_ssize_t n_bins = out.shape[1]
    cdef Py_ssize_t i, u, k, k_lo, k_hi, mul
    cdef double unit, comm, start, stop, lo, hi, rate
    for i in range(n_rows):
        mul = <Py_ssize_t> multiples[i]
        unit = <double> n_bins / <double> mul
        comm = duty_cycles[i] * unit
        rate = bandwidths[i]
        for u in range(mul):
            start = u * unit
            stop = start + comm
            if stop > n_bins:
                stop = n_bins
            midpoints[mid_offsets[i] + u] = start + 0.5 * comm
            if stop <= start:
                continue
            k_lo = <Py_ssize_t> floor(start)
            k_hi = <Py_ssize_t> ceil(stop)
            if k_hi > n_bins:
                k_hi = n_bins
            for k in range(k_lo, k_hi):
                lo = start if start > k else <double> k
                hi = stop if stop < k + 1 else <double> (k + 1)
                if hi > lo:
                    out[i, k] += rate * (hi - lo)
