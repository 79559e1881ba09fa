"""Argument checking shared by the public wrappers.

Every check raises :class:`ValueError` whose message starts with the argument's
name, so a caller (or the HTTP layer) can tell exactly what was wrong.  Nothing is
modified before all checks have passed.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numpy.typing import NDArray

MIN_BINS = 8


def as_float_array(name: str, value: Any, *, ndim: int | None = None) -> NDArray[np.float64]:
    """Coerce ``value`` to a contiguous float64 array; reject NaN/inf and bad shapes."""
    if np.iscomplexobj(value):
        raise ValueError(f"{name}: expected real numbers, got complex values")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected numbers, got {value!r:.80}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: must be finite (no NaN or inf)")
    # ascontiguousarray would turn a 0-d array into 1-d; copy only when needed.
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def as_int_array(name: str, value: Any, *, ndim: int = 1) -> NDArray[np.int64]:
    """Coerce ``value`` to a contiguous int64 array; reject non-integral numbers."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:  # pragma: no cover - numpy accepts nearly all
        raise ValueError(f"{name}: expected integers, got {value!r:.80}") from exc
    if raw.dtype == np.bool_ or not (
        np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)
    ):
        raise ValueError(f"{name}: expected integers, got dtype {raw.dtype}")
    if raw.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got shape {raw.shape}")
    if np.issubdtype(raw.dtype, np.floating):
        if not np.all(np.isfinite(raw)) or not np.all(raw == np.round(raw)):
            raise ValueError(f"{name}: expected integers, got {raw!r:.80}")
    return np.ascontiguousarray(raw.astype(np.int64))


def positive_float(name: str, value: Any) -> float:
    """A finite number > 0."""
    number = real_number(name, value)
    if number <= 0.0:
        raise ValueError(f"{name}: must be > 0, got {number}")
    return number


def real_number(name: str, value: Any) -> float:
    """A finite real scalar (bools are rejected: they are almost always a mistake)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        if isinstance(value, np.ndarray) and value.ndim == 0:
            return real_number(name, value.item())
        raise ValueError(f"{name}: expected a number, got {value!r:.80}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name}: must be finite, got {number}")
    return number


def bins_count(value: Any, name: str = "bins") -> int:
    """The discretization precision Di-Pre: an integer >= 8 (docs/traffic-circle.md)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: expected an integer >= {MIN_BINS}, got {value!r:.80}")
    n = int(value)
    if n < MIN_BINS:
        raise ValueError(f"{name}: expected an integer >= {MIN_BINS}, got {n}")
    return n
