"""Base-period unification of the pods sharing a link (docs/traffic-circle.md).

Metronome paper §III-B: the LCM of real periods is impractical, so periods whose
small multiples agree pairwise within ``G_T`` share their mean as the base period;
failing that, idle time is injected into a low-priority pod whose gap to the
high-priority pods' multiple is above ``G_T`` but within ``E_T``, closing the gap
(it then runs at the high-priority period); failing that, the pods are
incompatible on that link.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .. import _validation as v
from .._equality import ValueEquality
from .._kernels.base_period import STEP_INCOMPATIBLE, unify_kernel
from ..model import priority_value

__all__ = ["BasePeriod", "unify_periods"]

#: The largest ``max_multiple`` (``M``) accepted: :data:`tdmcore._validation.MAX_BINS`,
#: 3,600.  A pod with more comm units per circle than the finest circle has bins
#: would draw units narrower than one bin even at a duty cycle of 1.
MAX_M = v.MAX_BINS


@dataclass(frozen=True, eq=False)
class BasePeriod(ValueEquality):
    """A link's unified base period.

    Attributes
    ----------
    period_ms : float
        The base period ``T`` (the traffic circle's perimeter).
    multiples : ndarray of int (k,)
        ``mul_p``: comm units of pod p per circle.
    idle_ms : ndarray (k,)
        Idle time injected per iteration into each pod's computation phase (0 for
        high-priority pods, always).
    compatible : bool
        False when neither step 1 nor step 2 applies (step 3): then ``T`` is the
        longest period, every ``mul_p`` is 1 and no perfect score is possible by
        construction of the policy (paper §IV-B1, snapshot 0).
    periods_ms : ndarray (k,) or None
        The pods' periods ``t_p`` it was unified for (None when built by hand):
        :func:`tdmcore.discretize_unified` refuses other periods.
    """

    period_ms: float
    multiples: NDArray[np.int64]
    idle_ms: NDArray[np.float64]
    compatible: bool
    periods_ms: NDArray[np.float64] | None = None


def check_settings(gt_ms: Any, et_frac: Any, max_multiple: Any) -> tuple[float, float, int]:
    """``G_T`` (ms, >= 0), ``E_T`` as a fraction (>= 0) and ``M`` (an integer in
    [1, :data:`MAX_M`])."""
    gt = v.real_number("gt_ms", gt_ms)
    if gt < 0:
        raise ValueError(f"gt_ms: must be >= 0, got {gt}")
    et = v.real_number("et_frac", et_frac)
    if et < 0:
        raise ValueError(f"et_frac: must be >= 0, got {et}")
    return gt, et, v.whole("max_multiple", max_multiple, 1, MAX_M)


def check_priorities(priorities: Any, k: int) -> NDArray[np.int64]:
    """``k`` priorities as integers, each read by :func:`tdmcore.model.priority_value`
    (the one rule: ``"high"`` / ``"low"`` in any case and spacing, or an integer in
    [-2^31, 2^31))."""
    if isinstance(priorities, str | bytes) or not isinstance(priorities, Sequence | np.ndarray):
        raise ValueError(f"priorities: expected a sequence of {k} priorities")
    values = [priority_value(p, f"priorities[{i}]") for i, p in enumerate(priorities)]
    if len(values) != k:
        raise ValueError(f"priorities: expected {k} priorities (one per period), got {len(values)}")
    return np.array(values, dtype=np.int64)


def unify_periods(
    periods_ms: Any,
    priorities: Any,
    *,
    gt_ms: float = 5.0,
    et_frac: float = 0.10,
    max_multiple: int = 8,
) -> BasePeriod:
    """Unify the periods of the pods on one link into a base period (docs/traffic-circle.md).

    Parameters
    ----------
    periods_ms : array_like (k,)
        Each pod's iteration period ``t_p`` (ms), > 0 and at most 10^7 (the
        traffic pattern's cap, docs/traffic-circle.md).
    priorities : sequence (k,)
        ``"high"``/``"low"`` or integers (larger = higher).  The pods with the
        largest priority are the high-priority ones; idle is never injected there.
        The scheduler and the controller pass *strict ranks* instead
        (:func:`tdmcore._kernels.circle.strict_ranks`: priority, then deploy order),
        so that on a link only the reference job counts as high and a later job of
        equal priority may get idle (**[decision]**, docs/traffic-circle.md);
        given equal priorities as such, this function gives none of them idle.
    gt_ms : float, default 5.0
        ``G_T``: how far apart any two pods' multiples may be (ms).
    et_frac : float, default 0.10
        ``E_T`` as a fraction of each low-priority pod's own period: the largest gap
        to the high-priority pods' multiple that idle injection may close.
    max_multiple : int, default 8
        ``M``: largest multiple considered **[decision, docs/traffic-circle.md]**;
        1 to :data:`MAX_M` (3,600).

    Returns
    -------
    BasePeriod

    Notes
    -----
    1. The smallest ``T = mean(m_p t_p)`` over multiples ``m_p <= M`` whose
       products are within ``G_T`` of each other, every pair compared
       (``|m_p t_p - m_q t_q| <= G_T``; spec §4, revised 2026-11-28: the paper's
       "the difference between the multiples of any two pod periods"); real
       periods are kept (the gap is drift).
    2. Else, over the high-priority pods' common multiples ``T_high`` (step 1 over
       them alone, smallest first), every low-priority pod either has a multiple
       within ``G_T`` of every high-priority product (no idle), or is the shorter
       one, ``0 < T_high - m t <= E_T``, and gets ``(T_high - m t) / m`` of idle
       per iteration: the idle **closes** the gap, so the pod runs at the
       high-priority period and does not drift against it (spec §4, revised
       2026-11-28).  ``T`` is then the mean of every pod's ``m (t + idle)``.
       **[decision]** How much idle the paper injects is not said; its §IV-D sweep
       ends at "0 ms (serving as the benchmark)", its best case, and ``E_T`` only
       bounds the cost.  This reading was chosen knowing that it restores S2's and
       §IV-D's behaviour (docs/fidelity.md lists it among the choices made knowing
       the outcome).  Two low-priority pods are each fitted to the high-priority
       ones; they are not compared with each other.
    3. Else incompatible: ``T`` = the longest period, every multiple 1, no idle.

    The search is exact: anchored on the first pod's multiple, every other pod's
    product must lie within ``G_T`` of it, and a partial choice is dropped only
    when no completion of it could win (see
    :func:`tdmcore._kernels.base_period.smallest_common_multiple`).  That leaves one
    or two candidates per pod for realistic periods (tens of ms and more); periods
    far shorter than ``G_T`` give up to ``M^k`` candidates, most of them cut off by
    the bound (20 pods of 1-3 ms take well under a millisecond), in ``O(k)`` memory.
    """
    periods = v.as_float_vector("periods_ms", periods_ms)
    k = periods.shape[0]
    if k == 0:
        raise ValueError("periods_ms: at least one period is required")
    if np.any(periods <= 0):
        raise ValueError("periods_ms: every period must be > 0 ms")
    if np.any(periods > v.MAX_PERIOD_MS):  # the traffic pattern's cap, as discretize has it
        i = int(np.flatnonzero(periods > v.MAX_PERIOD_MS)[0])
        raise ValueError(f"periods_ms[{i}]: at most {v.MAX_PERIOD_MS:g}, got {float(periods[i])!r}")
    prio = check_priorities(priorities, k)
    gt, et, m_max = check_settings(gt_ms, et_frac, max_multiple)
    return unify(np.ascontiguousarray(periods), prio, gt, et, m_max)


def unify(periods_ms: NDArray[np.float64], priorities: NDArray[np.int64], gt_ms: float,
          et_frac: float, max_multiple: int) -> BasePeriod:
    """:func:`unify_periods` of arguments already checked (contiguous float64 periods
    > 0, int64 priorities, ``gt_ms``/``et_frac`` >= 0, ``max_multiple`` >= 1): the
    unchecked path of callers that hold valid patterns."""
    k = periods_ms.shape[0]
    multiples = np.empty(k, dtype=np.int64)
    idle = np.empty(k)
    base, step = unify_kernel(periods_ms, priorities, gt_ms, et_frac, max_multiple, multiples,
                              idle)
    return BasePeriod(float(base), multiples, idle, step != STEP_INCOMPATIBLE,
                      periods_ms.copy())
