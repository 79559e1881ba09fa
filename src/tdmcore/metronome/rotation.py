"""Rotation search on one link: the Score phase and phase three.

docs/traffic-circle.md; Metronome paper §III-B (Score) and §III-C (offline
recalculation, 3rd-stage objective Psi of Eq. 9).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from .. import _validation as v
from .._equality import ValueEquality
from .._kernels.circle import excess_and_carried
from .._kernels.rotation_search import (
    MODE_FIRST,
    MODE_OPTIMAL,
    contending,
    fold_mids,
    pair_distance,
    search_rotations_kernel,
)
from .scoring import PERFECT_RTOL, _score_from_excess, check_demand

__all__ = ["PSI_ATOL_BINS", "RotationResult", "search_rotations"]

#: Two Psi values tie when they differ by at most this many bins (docs/traffic-circle.md).
PSI_ATOL_BINS = 1e-9
#: Peak demands of two rows "contend" when they sum to >= B (1 - CONTEND_RTOL).
CONTEND_RTOL = 1e-9
_MODES = {"first": MODE_FIRST, "optimal": MODE_OPTIMAL}
_INT32_MAX = int(np.iinfo(np.int32).max)
#: what the kernel is given in first mode, which reads neither (search_rotations)
_NO_MIDS = np.zeros(0)
_NO_PAIRS = np.zeros((0, 0), dtype=np.bool_)


@dataclass(frozen=True, eq=False)
class RotationResult(ValueEquality):
    """Outcome of :func:`search_rotations`.

    Attributes
    ----------
    rotations : ndarray of int (k,)
        Rotation of each row in bins; ``rotations[0] == 0`` (Eq. 16).
    score : float
        Eq. (18) score of that vector, in [0, 100].
    perfect : bool
        Whether its excess is within ``1e-9 B`` (then ``score == 100``).
    psi : float or None
        Psi (Eq. 9) of the vector in bins, ``inf`` when no two rows contend;
        ``None`` when the vector is not perfect, or in ``first`` mode without ``mids``.
    evaluated : int
        Rotation vectors whose excess was computed (at least in part); the naive
        enumeration's count is ``prod(limits[1:])``.
    """

    rotations: NDArray[np.int64]
    score: float
    perfect: bool
    psi: float | None
    evaluated: int


def _check_limits(limits: Any, k: int, n_bins: int) -> NDArray[np.int64]:
    if type(limits) is np.ndarray and limits.dtype == np.int64 and limits.shape == (k,):
        lim = limits  # the common case: already what as_int_vector makes
    else:
        lim = v.as_int_vector("limits", limits)
    if lim.shape != (k,):
        raise ValueError(f"limits: expected {k} values (one per row), got {lim.shape[0]}")
    # k is small: plain Python comparisons cost less than numpy reductions here
    values = lim.tolist()
    if any(abs(x) > _INT32_MAX for x in values):
        raise ValueError("limits: values out of range")
    if any(x < 1 or x > n_bins for x in values):
        raise ValueError(f"limits: allowed rotations per row must lie in [1, {n_bins}] "
                         f"(the reference row's too, though it never rotates)")
    lim = lim.copy()
    lim[0] = 1  # the reference row never rotates (Eq. 16)
    return lim


def _check_mids(mids: Any, k: int) -> tuple[NDArray[np.float64], list[int]]:
    """The midpoints, flat and finite, and each row's count (:func:`_fold_mids`
    places them on the circle)."""
    if isinstance(mids, Sequence | np.ndarray) and not isinstance(mids, str | bytes):
        rows = list(mids)
    else:
        raise ValueError(f"mids: expected a sequence of {k} 1-D arrays, got {type(mids).__name__}")
    if len(rows) != k:
        raise ValueError(f"mids: expected {k} arrays (one per row), got {len(rows)}")
    if all(type(row) is np.ndarray and row.ndim == 1 and row.dtype.kind in "fiu"
           for row in rows):
        # the common case, real 1-D arrays: checked once, all rows together
        flat = np.concatenate(rows).astype(np.float64, copy=False) if rows else np.zeros(0)
        if np.isfinite(flat).all():
            return flat, [row.size for row in rows]
    arrays = []
    for i, row in enumerate(rows):
        arr = np.atleast_1d(v.as_float_array(f"mids[{i}]", row))
        if arr.ndim != 1:
            raise ValueError(f"mids[{i}]: expected a 1-D array, got shape {arr.shape}")
        arrays.append(arr)
    flat = np.concatenate(arrays) if arrays else np.zeros(0)
    return flat, [a.size for a in arrays]


def _fold_mids(flat: NDArray[np.float64], sizes: list[int], n_bins: int
               ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Midpoints folded into ``[0, n_bins)`` (:func:`fold_mids`), flat, with each
    row's offsets."""
    offsets = np.array([0, *itertools.accumulate(sizes)], dtype=np.int64)
    return fold_mids(np.ascontiguousarray(flat), n_bins), offsets


def contending_pairs(demand: NDArray[np.float64], capacity_gbps: float) -> NDArray[np.bool_]:
    """Rows i != j whose peak demands sum to >= B (1 - 1e-9) (Eq. 9's contending tasks,
    :func:`~tdmcore._kernels.rotation_search.contending`)."""
    pairs: NDArray[np.bool_] = contending(demand, capacity_gbps, CONTEND_RTOL)
    return pairs


def search_rotations(
    demand: Any,
    capacity_gbps: float,
    limits: Any,
    *,
    mode: Literal["first", "optimal"] = "first",
    mids: Sequence[Any] | None = None,
) -> RotationResult:
    """Find the rotation of every row that interleaves the link's traffic.

    Parameters
    ----------
    demand : array_like (k, bins)
        One row per job on the link (one pod's demand: a job crosses a link once
        however many of its pods the node holds, docs/traffic-circle.md); row 0 is
        the reference (highest-priority job, earliest deployed) and stays at 0
        (Eq. 16).
    capacity_gbps : float
        Link capacity ``B`` > 0.
    limits : array_like of int (k,)
        Allowed rotations per row, ``ceil(N / mul)`` (Eq. 15), each in ``[1, N]``;
        ``limits[0]`` must be an integer >= 1 like the others, and is not used (the
        reference row never rotates).
    mode : {"first", "optimal"}
        ``first`` (Score phase): the middle of the first perfect-score interval met
        in enumeration order.  ``optimal`` (phase three): among the
        middles of all perfect intervals, the one maximizing Psi (Eq. 9).
    mids : sequence of k 1-D arrays, optional
        Midpoints (bins, rotation 0) of each row's comm units; required for
        ``optimal``.  In ``first`` mode, given mids make the result carry Psi.

    Returns
    -------
    RotationResult

    Notes
    -----
    Enumeration order is lexicographic over rows 1..k-1, last row fastest.  A
    perfect-score interval is a maximal circular run of perfect rotations of the
    last row with the others fixed; its middle is ``(start + (len - 1) // 2) mod L``.
    With no perfect vector, both modes return the highest score, ties first in
    enumeration order.  Excess ties within ``1e-9 B`` and Psi ties within 1e-9
    bins (docs/traffic-circle.md).  The answer is exactly the brute force's; the
    speed comes from pruning and incremental sums (see
    :mod:`tdmcore._kernels.rotation_search`).

    Raises
    ------
    ValueError
        Naming the argument; a 1-D ``demand`` is refused as ``demand`` (the rows
        are what ``limits`` and ``mids`` are counted against: one row is
        ``demand[None, :]``).
    """
    try:
        one_row = np.ndim(demand) == 1
    except (TypeError, ValueError):  # ragged: check_demand names it
        one_row = False
    if one_row:  # read as one row, the limits would take the blame
        raise ValueError(f"demand: expected shape (k, bins), one row per job, got a 1-D "
                         f"array of {np.shape(demand)[0]} values (one row: demand[None, :])")
    arr = check_demand(demand)
    k, n_bins = arr.shape
    cap = v.capacity("capacity_gbps", capacity_gbps)
    lim = _check_limits(limits, k, n_bins)
    if not isinstance(mode, str) or mode not in _MODES:
        raise ValueError(f"mode: expected 'first' or 'optimal', got {mode!r}")
    if mode == "optimal" and mids is None:
        raise ValueError("mids: required for mode='optimal' (midpoints of each row's comm units)")
    checked_mids = _check_mids(mids, k) if mids is not None else None
    # First mode reads the midpoints and the contending pairs only for a perfect
    # vector's Psi, after the search: placed on the circle then, if at all.
    if mode == "optimal" and checked_mids is not None:
        flat_mids, mid_offsets = _fold_mids(*checked_mids, n_bins)
        contend = contending_pairs(arr, cap)
    else:
        flat_mids, mid_offsets, contend = _NO_MIDS, np.zeros(k + 1, dtype=np.int64), _NO_PAIRS
    tol_excess = PERFECT_RTOL * cap
    # Rounding allowance for the pruning bounds: far above float error, far below
    # any excess difference the tie rules can see.
    margin = 1e-12 * (float(arr.sum()) + cap * n_bins)
    rotations = np.zeros(k, dtype=np.int64)
    perfect, psi, evaluated = search_rotations_kernel(
        arr, cap, lim, _MODES[mode], flat_mids, mid_offsets, contend,
        tol_excess, PSI_ATOL_BINS, margin, rotations, False,
    )
    exc, _ = excess_and_carried(arr, rotations, cap)
    result_psi: float | None = None
    if perfect:
        if mode == "optimal":
            result_psi = float(psi)
        elif checked_mids is not None:
            flat_mids, mid_offsets = _fold_mids(*checked_mids, n_bins)
            result_psi = psi_of(rotations, flat_mids, mid_offsets, contending_pairs(arr, cap),
                                n_bins)
    return RotationResult(
        rotations=rotations,
        score=_score_from_excess(float(exc), cap, n_bins),
        perfect=bool(perfect),
        psi=result_psi,
        evaluated=int(evaluated),
    )


def psi_of(
    rotations: NDArray[np.int64],
    flat_mids: NDArray[np.float64],
    mid_offsets: NDArray[np.int64],
    contend: NDArray[np.bool_],
    n_bins: int,
) -> float:
    """Psi (Eq. 9) of one rotation vector, in bins; inf when no pair contends."""
    psi = float("inf")
    k = rotations.shape[0]
    rot = rotations % n_bins
    for i in range(k):
        for j in range(i + 1, k):
            if contend[i, j]:
                psi = min(psi, float(pair_distance(flat_mids, mid_offsets, i, rot[i], j, rot[j],
                                                   n_bins)))
    return psi
