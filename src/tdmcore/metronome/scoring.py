"""Node score (Eq. 18), link utilization (Eq. 6) and average utilization (Eq. 5)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from .. import _validation as v
from .._kernels.circle import excess_and_carried

__all__ = [
    "PERFECT_RTOL",
    "average_bandwidth_utilization",
    "excess",
    "link_utilization",
    "score",
    "score_from_excess",
]

#: Perfect-score tolerance relative to the capacity (docs/traffic-circle.md).
PERFECT_RTOL = 1e-9


def check_demand(demand: Any, name: str = "demand") -> NDArray[np.float64]:
    """A (k, bins) array of finite demands in [0, 10^6] Gbps (the rates' cap,
    :data:`tdmcore._validation.MAX_GBPS`) with k >= 1 and 8 <= bins <= 3,600
    (:data:`tdmcore._validation.MIN_BINS`, ``MAX_BINS``)."""
    if (type(demand) is np.ndarray and demand.dtype == np.float64 and demand.ndim == 2
            and demand.flags.c_contiguous and demand.shape[0] >= 1
            and v.MIN_BINS <= demand.shape[1] <= v.MAX_BINS
            and demand.min() >= 0.0 and demand.max() <= v.MAX_GBPS):
        # The common case, for two reductions (a NaN fails both comparisons, an
        # infinity one); anything else goes the long way below, which names the fault.
        return demand
    arr = v.as_float_array(name, demand)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected shape (k, bins), got {arr.shape}")
    if arr.shape[0] < 1:
        raise ValueError(f"{name}: needs at least one row")
    if not v.MIN_BINS <= arr.shape[1] <= v.MAX_BINS:
        raise ValueError(f"{name}: needs {v.MIN_BINS:,} to {v.MAX_BINS:,} bins, "
                         f"got {arr.shape[1]:,}")
    if np.any(arr < 0):
        raise ValueError(f"{name}: demands must be >= 0")
    if np.any(arr > v.MAX_GBPS):  # a row's rate is capped so; beyond it sums overflow
        raise ValueError(f"{name}: demands must be at most {v.MAX_GBPS:g} Gbps, got "
                         f"{float(arr.max())!r}")
    return np.ascontiguousarray(arr)


def _check_rotations(rotations: Any, k: int) -> NDArray[np.int64]:
    rot = v.as_int_vector("rotations", rotations)
    if rot.shape != (k,):
        raise ValueError(f"rotations: expected {k} rotations (one per row), got {rot.shape[0]}")
    return rot


def excess(demand: Any, rotations: Any, capacity_gbps: float) -> float:
    """``Excess = sum_b max(0, S[b] - B)`` with rows rolled by ``rotations`` (Eq. 18).

    Parameters
    ----------
    demand : array_like (k, bins) or (bins,)
        Each pod's demand per bin at rotation 0 (Gbps; :func:`tdmcore.discretize`),
        finite, in [0, 10^6], with 8 to 3,600 bins.
    rotations : array_like of int (k,)
        Each row's rotation in bins (taken modulo the number of bins).
    capacity_gbps : float
        The link's capacity ``B`` (Gbps, > 0, at most 10^6).

    Returns
    -------
    float
        The demand above the capacity, summed over the bins (Gbps x bins).

    Raises
    ------
    ValueError
        Naming the argument that is malformed.
    """
    arr = check_demand(demand)
    rot = _check_rotations(rotations, arr.shape[0])
    cap = v.capacity("capacity_gbps", capacity_gbps)
    exc, _ = excess_and_carried(arr, rot, cap)
    return float(exc)


def score_from_excess(excess_gbps: float, capacity_gbps: float, bins: int) -> float:
    """``100 (1 - Excess / (B N))`` clipped to [0, 100] (Eq. 18).

    **[decision, docs/traffic-circle.md]** The printed formula lacks the factor 100.
    An excess within the perfect tolerance (``1e-9 B``) scores exactly 100, so
    ``score == 100`` and "perfect" always agree.

    Parameters
    ----------
    excess_gbps : float
        ``Excess = sum_b max(0, S[b] - B)``, finite and >= 0.
    capacity_gbps : float
        Link capacity ``B`` > 0 (at most :data:`tdmcore._validation.MAX_GBPS`).
    bins : int
        Di-Pre ``N``, 8 to 3,600 (docs/traffic-circle.md).
    """
    exc = v.real_number("excess_gbps", excess_gbps)
    if exc < 0.0:
        raise ValueError(f"excess_gbps: must be >= 0, got {exc}")
    return _score_from_excess(exc, v.capacity("capacity_gbps", capacity_gbps),
                              v.bins_count(bins))


def _score_from_excess(excess_gbps: float, capacity_gbps: float, bins: int) -> float:
    """:func:`score_from_excess` on arguments already checked."""
    if excess_gbps <= PERFECT_RTOL * capacity_gbps:
        return 100.0
    return float(min(100.0, max(0.0, 100.0 * (1.0 - excess_gbps / (capacity_gbps * bins)))))


def score(demand: Any, rotations: Any, capacity_gbps: float) -> float:
    """Bandwidth score of a link for one rotation vector, in [0, 100] (Eq. 18).

    Parameters
    ----------
    demand : array_like (k, bins)
        One row per pod or job, at rotation 0.
    rotations : array_like of int (k,)
        Rotation of each row in bins (``D'[b] = D[(b - s) mod N]``).
    capacity_gbps : float
        Link capacity ``B`` > 0.
    """
    arr = check_demand(demand)
    rot = _check_rotations(rotations, arr.shape[0])
    cap = v.capacity("capacity_gbps", capacity_gbps)
    exc, _ = excess_and_carried(arr, rot, cap)
    return _score_from_excess(float(exc), cap, arr.shape[1])


def link_utilization(demand: Any, rotations: Any, capacity_gbps: float) -> float:
    """``xi = sum_b min(S[b], B) / (B N)``, in [0, 1] (Eq. 6, discretized).

    Parameters
    ----------
    demand, rotations, capacity_gbps
        As :func:`excess` takes them (the same checks, the same ``ValueError``).

    Returns
    -------
    float
        The share of the link's capacity the rotated rows use, in [0, 1].
    """
    arr = check_demand(demand)
    rot = _check_rotations(rotations, arr.shape[0])
    cap = v.capacity("capacity_gbps", capacity_gbps)
    _, carried = excess_and_carried(arr, rot, cap)
    return float(min(1.0, carried / (cap * arr.shape[1])))


def average_bandwidth_utilization(capacities_gbps: Any, utilizations: Any) -> float:
    """``Gamma = mean_l B_l xi_l / B_max`` over the links (Eq. 5).

    Parameters
    ----------
    capacities_gbps : array_like (L,)
        Capacity of each link, > 0.
    utilizations : array_like (L,)
        Link utilization ``xi_l`` in [0, 1] of each link.
    """
    caps = v.as_float_vector("capacities_gbps", capacities_gbps)
    xi = v.as_float_vector("utilizations", utilizations)
    if caps.size == 0:
        raise ValueError("capacities_gbps: at least one link is required")
    if caps.shape != xi.shape:
        raise ValueError(
            f"utilizations: expected {caps.shape[0]} values (one per link), got {xi.shape[0]}"
        )
    if np.any(caps <= 0):
        raise ValueError("capacities_gbps: every capacity must be > 0")
    if np.any((xi < 0) | (xi > 1)):
        raise ValueError("utilizations: every utilization must lie in [0, 1]")
    return float(np.mean(caps * xi / caps.max()))
