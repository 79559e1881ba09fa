"""Traffic circles: discretizing periodic comm patterns and converting rotations.

Metronome paper Eqs. (1)-(4); docs/traffic-circle.md (ConversionToDelay).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from .. import _validation as v
from .._equality import ValueEquality
from .._kernels.circle import discretize_rows, draw_circle

if TYPE_CHECKING:
    from .base_period import BasePeriod

__all__ = [
    "CircleRows",
    "comm_midpoints",
    "discretize",
    "discretize_unified",
    "rotations_to_shifts",
]

#: Relative tolerance for "base period is a multiple of the pod's period".
MULTIPLE_RTOL = 1e-6
#: More comm units than this on one circle is certainly a unit mistake.
MAX_MULTIPLE = 100_000


def _rows(
    multiples: NDArray[np.float64],
    duty: NDArray[np.float64],
    bandwidth: NDArray[np.float64],
    bins: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    """Demand rows, flat midpoints and their offsets, for already-valid inputs."""
    k = multiples.shape[0]
    offsets = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(multiples.astype(np.int64), out=offsets[1:])
    demand = np.zeros((k, bins), dtype=np.float64)
    mids = np.empty(int(offsets[-1]), dtype=np.float64)
    discretize_rows(
        np.ascontiguousarray(multiples, dtype=np.int64),
        np.ascontiguousarray(duty, dtype=np.float64),
        np.ascontiguousarray(bandwidth, dtype=np.float64),
        demand,
        mids,
        offsets,
    )
    return demand, mids, offsets


def discretize(
    period_ms: Any,
    duty_cycle: Any,
    bandwidth_gbps: Any,
    base_period_ms: float,
    bins: int = 72,
) -> NDArray[np.float64]:
    """Demand per bin of each pod's traffic circle at rotation 0 (Eqs. 1-4).

    Parameters
    ----------
    period_ms, duty_cycle, bandwidth_gbps : float or array_like (k,)
        Iteration period ``t_p`` (ms), communication duty cycle ``d_p`` in [0, 1]
        and bandwidth ``r_p`` (Gbps) while communicating.  A scalar or a
        length-1 array applies to every pod (NumPy broadcasting); arrays of two
        other lengths are refused.
    base_period_ms : float
        The circle's perimeter ``T``; must be an integer multiple of every period
        within a relative tolerance of 1e-6.
    bins : int, default 72
        Di-Pre, the number of bins (8 to 3,600: :data:`tdmcore._validation.MAX_BINS`).

    Returns
    -------
    ndarray
        ``(bins,)`` for scalar inputs, ``(k, bins)`` otherwise.  Bin ``b`` of pod
        ``p`` holds ``r_p`` times the fraction of ``[b, b + 1)`` covered by
        ``Comm_p`` (Eq. 2) **[decision, docs/traffic-circle.md]**: an exact overlap,
        so the row sums to ``r_p d_p N``.

    Raises
    ------
    ValueError
        Naming the argument: NaN/inf, period <= 0, duty cycle outside [0, 1],
        negative bandwidth, bins outside [8, 3,600], or a base period that is not a
        multiple.
    """
    periods, duty, bandwidth, scalar = v.pattern(period_ms, duty_cycle, bandwidth_gbps)
    base = v.positive_float("base_period_ms", base_period_ms)
    n_bins = v.bins_count(bins)
    ratio = base / periods
    if np.any(ratio > MAX_MULTIPLE):
        raise ValueError(f"base_period_ms: more than {MAX_MULTIPLE} comm units of one pod "
                         "on the circle; the base period is far too long for these periods")
    multiples = np.round(ratio)
    bad = (multiples < 1) | (np.abs(multiples * periods - base) > MULTIPLE_RTOL * base)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"base_period_ms: {base} is not a multiple of period_ms[{i}] = {periods[i]} "
            f"(ratio {ratio[i]:.6g}); unify the periods first (tdmcore.unify_periods)"
        )
    demand, _, _ = _rows(multiples, duty, bandwidth, n_bins)
    return demand[0] if scalar else demand


@dataclass(frozen=True, eq=False)
class CircleRows(ValueEquality):
    """Per-pod rows of a link's traffic circle on a unified base period.

    Attributes
    ----------
    demand : ndarray (k, bins)
        Demand per bin at rotation 0.
    midpoints : tuple of ndarray
        Per pod, the midpoints (bins, rotation 0) of its comm units, as
        :func:`tdmcore.search_rotations` takes them in ``mids``.
    limits : ndarray of int (k,)
        Allowed rotations ``ceil(N / mul_p)`` (Eq. 15).
    circle_duty : ndarray (k,)
        Duty cycle actually drawn on the circle (after idle injection or
        truncation to one unit).
    """

    demand: NDArray[np.float64]
    midpoints: tuple[NDArray[np.float64], ...]
    limits: NDArray[np.int64]
    circle_duty: NDArray[np.float64]


def discretize_unified(
    base: BasePeriod,
    period_ms: Any,
    duty_cycle: Any,
    bandwidth_gbps: Any,
    bins: int = 72,
) -> CircleRows:
    """Draw the pods on the circle of a :class:`~tdmcore.BasePeriod` (docs/traffic-circle.md).

    * compatible, no idle: ``mul_p`` units of arc ``2 pi d_p / mul_p`` (Eq. 1); the
      small gap ``|mul_p t_p - T| <= G_T`` is drift for the controller;
    * idle injected: the pod's period becomes ``t_p + idle_p`` with its comm time
      unchanged, so its duty cycle on the circle is ``d_p t_p / (t_p + idle_p)``;
    * incompatible: one unit per pod on ``T`` = the longest period, arc
      ``2 pi d_p t_p / T`` (the pattern truncated to one unit).

    Parameters
    ----------
    base : BasePeriod
        From :func:`tdmcore.unify_periods` for these pods' periods.
    period_ms, duty_cycle, bandwidth_gbps : float or array_like (k,)
        Each pod's traffic pattern ``t_p`` (ms), ``d_p`` and ``r_p`` (Gbps), as
        :func:`tdmcore.discretize` takes them (a number stands for every pod).
    bins : int, default 72
        Di-Pre, the circle's bins, 8 to 3,600.

    Returns
    -------
    CircleRows
        Each pod's demand per bin, its comm units' midpoints, its duty cycle on
        the circle and its rotation limit.

    Raises
    ------
    ValueError
        A bad pattern or ``bins``; a ``base`` that is not a valid BasePeriod, or
        describes another number of pods, or was unified for other periods.
    """
    periods, duty, bandwidth, _ = v.pattern(period_ms, duty_cycle, bandwidth_gbps)
    n_bins = v.bins_count(bins)
    k = periods.shape[0]
    from .base_period import BasePeriod

    if not isinstance(base, BasePeriod):
        raise ValueError("base: expected a BasePeriod from tdmcore.unify_periods")
    mult, idle = base.multiples, base.idle_ms
    # a hand-made one is checked as unify_periods makes it: whole multiples in
    # [1, MAX_MULTIPLE], finite idle >= 0, a finite period > 0 (NaN idle drew empty
    # rows and fractional multiples were truncated)
    if not (isinstance(mult, np.ndarray) and mult.dtype.kind in "iu"
            and isinstance(idle, np.ndarray) and idle.dtype.kind == "f"):
        raise ValueError("base: multiples must be an integer array and idle_ms a float "
                         "array, as tdmcore.unify_periods makes them")
    if np.any(mult < 1) or np.any(mult > MAX_MULTIPLE) \
            or not np.all(np.isfinite(idle)) or np.any(idle < 0) \
            or isinstance(base.period_ms, bool) \
            or not isinstance(base.period_ms, int | float | np.integer | np.floating) \
            or not (math.isfinite(base.period_ms) and base.period_ms > 0) \
            or not isinstance(base.compatible, bool | np.bool_):
        raise ValueError(f"base: expected multiples in [1, {MAX_MULTIPLE}], finite idle "
                         ">= 0, a finite period > 0 and a bool compatible, as "
                         "tdmcore.unify_periods makes them")
    if base.multiples.shape != (k,) or base.idle_ms.shape != (k,):
        raise ValueError(
            f"base: describes {base.multiples.shape[0]} pods but {k} patterns were given"
        )
    if base.periods_ms is not None:
        try:
            made_for = np.asarray(base.periods_ms, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("base: periods_ms must be the periods it was unified for, "
                             "as tdmcore.unify_periods makes them") from None
        if made_for.shape != (k,) or not np.allclose(made_for, periods, rtol=1e-12, atol=0):
            raise ValueError(f"period_ms: base was unified for periods {made_for.tolist()} "
                             f"ms, got {periods.tolist()}")
    return draw(base, periods, duty, bandwidth, n_bins)


def draw(base: BasePeriod, periods: NDArray[np.float64], duty: NDArray[np.float64],
         bandwidth: NDArray[np.float64], n_bins: int) -> CircleRows:
    """:func:`discretize_unified` of arguments already checked (a valid ``base`` for
    these pods, patterns by :func:`tdmcore._validation.pattern`, ``n_bins >= 8``):
    the unchecked path of callers that hold valid patterns."""
    k = periods.shape[0]
    multiples = base.multiples.astype(np.int64) if base.compatible \
        else np.ones(k, dtype=np.int64)
    offsets = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(multiples, out=offsets[1:])
    demand = np.zeros((k, n_bins))
    mids = np.empty(int(offsets[-1]))
    circle_duty = np.empty(k)
    limits = np.empty(k, dtype=np.int64)
    draw_circle(periods, duty, bandwidth, multiples,
                np.ascontiguousarray(base.idle_ms, dtype=np.float64), float(base.period_ms),
                bool(base.compatible), demand, mids, offsets, circle_duty, limits)
    midpoints = tuple(mids[offsets[i]:offsets[i + 1]].copy() for i in range(k))
    return CircleRows(demand, midpoints, limits, circle_duty)


def comm_midpoints(multiple: int, duty_cycle: float, bins: int = 72) -> NDArray[np.float64]:
    """Midpoints (bins, rotation 0) of the ``multiple`` comm units of one pod (Eq. 3).

    Parameters
    ----------
    multiple : int
        ``mul_p``, the pod's comm units per circle, 1 to 3,600.
    duty_cycle : float
        ``d_p`` in [0, 1].
    bins : int, default 72
        Di-Pre, the circle's bins, 8 to 3,600.

    Returns
    -------
    ndarray (multiple,)
        Each unit's midpoint in bins, as :func:`tdmcore.search_rotations` takes
        them in ``mids``.

    Raises
    ------
    ValueError
        Naming the argument out of range.
    """
    mul = int(v.as_int_array("multiple", [multiple])[0])
    if not 1 <= mul <= MAX_MULTIPLE:
        raise ValueError(f"multiple: must lie in [1, {MAX_MULTIPLE}], got {mul}")
    duty = v.real_number("duty_cycle", duty_cycle)
    if not 0.0 <= duty <= 1.0:
        raise ValueError(f"duty_cycle: must lie in [0, 1], got {duty}")
    n_bins = v.bins_count(bins)
    _, mids, _ = _rows(np.array([float(mul)]), np.array([duty]), np.zeros(1), n_bins)
    return mids


def rotations_to_shifts(
    rotations: Any, base_period_ms: float, bins: int = 72
) -> NDArray[np.float64]:
    """ConversionToDelay: ``shift_ms = rotation / N * T`` per row (Alg. 1 line 40).

    Applied literally: a rotation of N bins or more gives a shift of T or more.
    """
    rot = v.as_int_vector("rotations", rotations)
    base = v.positive_float("base_period_ms", base_period_ms)
    n_bins = v.bins_count(bins)
    if np.any(rot < 0):
        raise ValueError("rotations: must be >= 0 bins")
    return rot.astype(np.float64) / n_bins * base
