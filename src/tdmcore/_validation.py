"""Argument checking shared by the public wrappers.

Every check raises :class:`ValueError` whose message starts with the argument's
name, so a caller (or the HTTP layer) can tell exactly what was wrong.  Nothing is
modified before all checks have passed.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: The discretization precision Di-Pre (bins on a traffic circle): at least 8
#: (docs/traffic-circle.md) ...
MIN_BINS = 8
#: ... and at most 3,600, 0.1-degree bins.  The rotation search is exact and compiled
#: (it cannot be interrupted) and its time grows fast with the bins: a million bins
#: ran for minutes and gigabytes.  ``tdmcore link --bins`` takes the same range.
MAX_BINS = 3600


def _dtype_of(value: Any) -> np.dtype[Any]:
    """The dtype numpy gives ``value`` (a number or a sequence), without converting."""
    if isinstance(value, numbers.Real):
        return np.dtype(np.float64)
    try:
        return np.asarray(value).dtype
    except (TypeError, ValueError):
        return np.dtype(object)  # ragged and the like: the conversion below says why


def as_float_array(name: str, value: Any, *, ndim: int | None = None) -> NDArray[np.float64]:
    """Coerce ``value`` to a contiguous float64 array; reject NaN/inf and bad shapes."""
    if value is None:  # NumPy would make it NaN, and the message blame NaN
        raise ValueError(f"{name}: expected numbers, got None")
    try:
        complex_values = np.iscomplexobj(value)
    except (TypeError, ValueError) as exc:  # ragged: numpy's message names no argument
        raise ValueError(f"{name}: expected numbers of one shape, got {value!r:.80}") from exc
    if complex_values:
        raise ValueError(f"{name}: expected real numbers, got complex values")
    if (value.dtype if isinstance(value, np.ndarray) else _dtype_of(value)).kind in "USV":
        raise ValueError(f"{name}: expected numbers, got text {value!r:.80}")
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
        if raw.size and not (np.all(raw >= -2.0**63) and np.all(raw < 2.0**63)):
            raise ValueError(f"{name}: expected integers within int64, got {raw!r:.80}")
    return np.ascontiguousarray(raw.astype(np.int64))


def as_float_vector(name: str, value: Any) -> NDArray[np.float64]:
    """:func:`as_float_array` of a number or a 1-D sequence, as a 1-D array."""
    arr = np.atleast_1d(as_float_array(name, value))
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array, got shape {arr.shape}")
    return arr


def as_int_vector(name: str, value: Any) -> NDArray[np.int64]:
    """:func:`as_int_array` of an integer or a 1-D sequence, as a 1-D array."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged
        raise ValueError(f"{name}: expected integers of one shape, got {value!r:.80}") \
            from exc
    return as_int_array(name, np.atleast_1d(raw))


def capacity(name: str, value: Any) -> float:
    """A link capacity (Gbps): a finite number > 0 and at most :data:`MAX_GBPS`, the
    one rule of every capacity argument (nodes, links, the flow engine)."""
    cap = positive_float(name, value)
    if cap > MAX_GBPS:
        raise ValueError(f"{name}: at most {MAX_GBPS:g} Gbps, got {cap:g}")
    return cap


def capacities(name: str, value: Any) -> NDArray[np.float64]:
    """:func:`capacity` for a non-empty 1-D array of them (the first bad one named)."""
    caps = as_float_array(name, value, ndim=1)
    if caps.size == 0:
        raise ValueError(f"{name}: expected at least one capacity")
    bad = np.flatnonzero((caps <= 0) | (caps > MAX_GBPS))
    if bad.size:
        capacity(f"{name}[{int(bad[0])}]", float(caps[bad[0]]))
    return caps


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


def boolean(name: str, value: Any) -> bool:
    """``value`` if it is a ``bool``; a string (``"off"``) or a number (``0``) is
    refused rather than read by its truth, which would take ``"off"`` as true."""
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected a bool, got {value!r:.80}")
    return value


#: The largest seed: the engine's counter-based noise draws take it as an int64.
MAX_SEED = (1 << 63) - 1
#: The most jobs a workload builder draws (``dragon_poisson``, ``oasis_jobs``): beyond
#: it the list alone is gigabytes, a mistake rather than a workload.
MAX_JOBS = 1_000_000


def is_integer(value: Any) -> bool:
    """Whether ``value`` is a Python or NumPy integer and not a bool: the one test
    behind every integer argument (:func:`whole`, :func:`seed`, :func:`bins_count`)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def _integer_range(low: int | None, high: int | None) -> str:
    if low is None and high is None:
        return "an integer"
    if high is None:
        return f"an integer >= {low:,}"
    if low is None:
        return f"an integer <= {high:,}"
    return f"an integer in [{low:,}, {high:,}]"


def whole(name: str, value: Any, low: int | None = 1, high: int | None = None) -> int:
    """``value`` as an ``int`` in ``[low, high]`` (a Python or NumPy integer, not a
    bool); ``None`` leaves that side open.

    The message names the range: ``n: expected an integer >= 1, got 0``, ``n:
    expected an integer in [1, 3,600], got 5000``.
    """
    if not is_integer(value) or (low is not None and value < low) \
            or (high is not None and value > high):
        raise ValueError(f"{name}: expected {_integer_range(low, high)}, got {value!r:.80}")
    return int(value)


def whole_pair(name: str, value: Any, low: int = 1) -> tuple[int, int]:
    """A ``(low, high)`` range of integers, a tuple or list of two, with
    ``low <= value[0] <= value[1]``."""
    if not isinstance(value, tuple | list) or len(value) != 2 \
            or not all(is_integer(x) for x in value) or not low <= value[0] <= value[1]:
        raise ValueError(f"{name}: expected a (low, high) pair of integers with "
                         f"{low} <= low <= high, got {value!r:.60}")
    return int(value[0]), int(value[1])


def seed(value: Any, name: str = "seed") -> int:
    """A random seed: an integer in ``[0, MAX_SEED]``."""
    if not is_integer(value) or not 0 <= int(value) <= MAX_SEED:
        raise ValueError(f"{name}: expected an integer in [0, 2^63 - 1], got {value!r}")
    return int(value)


def bins_count(value: Any, name: str = "bins") -> int:
    """The discretization precision Di-Pre: an integer in [:data:`MIN_BINS`,
    :data:`MAX_BINS`] = [8, 3,600] (docs/traffic-circle.md)."""
    return whole(name, value, MIN_BINS, MAX_BINS)


#: The longest iteration period (ms, about 2.8 hours) and the largest rate or link
#: capacity (Gbps) anything takes: far beyond them the circle's arithmetic (a base
#: period, a unified multiple) overflows.
MAX_PERIOD_MS = 1e7
MAX_GBPS = 1e6


#: The traffic-pattern rule (docs/traffic-circle.md): each field's lower bound,
#: whether it is strict, and its upper bound.
PATTERN_BOUNDS: tuple[tuple[str, float, bool, float | None], ...] = (
    ("period_ms", 0.0, True, None),
    ("duty_cycle", 0.0, False, 1.0),
    ("bandwidth_gbps", 0.0, False, None),
)
#: Caps far above any real value, no part of the rule: beyond them the circle's
#: arithmetic overflows.
PATTERN_CAPS = {"period_ms": MAX_PERIOD_MS, "bandwidth_gbps": MAX_GBPS}


def _pattern_value(name: str, value: Any, low: float, strict: bool, high: float | None) -> float:
    """One field of a pattern, or a ValueError in the rule's words."""
    want = f"a number in [{low:g}, {high:g}]" if high is not None \
        else f"a number {'>' if strict else '>='} {low:g}"
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: expected {want}, got {value!r:.80}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name}: expected a finite {want[2:]}, got {value!r}")
    if x < low or (strict and x == low) or (high is not None and x > high):
        raise ValueError(f"{name}: expected {want}, got {value!r}")
    cap = PATTERN_CAPS.get(name.partition("[")[0])
    if cap is not None and x > cap:
        raise ValueError(f"{name}: at most {cap:g}, got {value!r}")
    return x


def pattern(period_ms: Any, duty_cycle: Any, bandwidth_gbps: Any
            ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], bool]:
    """The one check of a traffic pattern: period ``t_p > 0`` ms, duty cycle ``d_p``
    in [0, 1], bandwidth ``r_p >= 0`` Gbps, all finite (:data:`PATTERN_BOUNDS`).

    Each of the three is a number or a 1-D array_like; arrays must have one length
    (a number stands for every pod).  Returns the three as float64 arrays of that
    length (copies) and whether all three were numbers.  The first bad value
    raises, named ``period_ms`` (or ``period_ms[i]`` in an array).
    """
    values = (period_ms, duty_cycle, bandwidth_gbps)
    arrays = []
    for (name, low, strict, high), value in zip(PATTERN_BOUNDS, values, strict=True):
        try:
            ndim = np.ndim(value)
        except (TypeError, ValueError):  # ragged: numpy's message names no argument
            raise ValueError(f"{name}: expected numbers of one shape, got {value!r:.80}") \
                from None
        if ndim == 0:  # a number (or not one: the rule says what it wants)
            arrays.append(np.array([_pattern_value(name, value, low, strict, high)]))
            continue
        kind = _dtype_of(value).kind
        if kind in "USVcb":  # text, complex and bools: refused as they are as numbers
            raise ValueError(f"{name}: expected numbers, got {value!r:.80}")
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected numbers, got {value!r:.80}") from None
        if arr.ndim > 1:
            raise ValueError(f"{name}: expected a scalar or a 1-D array, got shape {arr.shape}")
        ok = np.isfinite(arr) & (arr > low if strict else arr >= low)
        if high is not None:
            ok &= arr <= high
        if name in PATTERN_CAPS:
            ok &= arr <= PATTERN_CAPS[name]
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            _pattern_value(f"{name}[{i}]", float(arr[i]), low, strict, high)
        arrays.append(arr)
    scalar = all(np.ndim(x) == 0 for x in values)
    lengths = {a.shape[0] for a in arrays} - {1} if not scalar else set()
    if len(lengths) > 1 or any(a.shape[0] == 0 for a in arrays):
        if any(a.shape[0] == 0 for a in arrays):
            raise ValueError("period_ms: at least one pod is required")
        raise ValueError(
            "period_ms: period_ms, duty_cycle and bandwidth_gbps must have the same length "
            f"(got {np.shape(period_ms)}, {np.shape(duty_cycle)}, {np.shape(bandwidth_gbps)})")
    periods, duty, bandwidth = (a.copy() for a in np.broadcast_arrays(*arrays))
    return periods, duty, bandwidth, scalar


def read_error(path: object, exc: OSError | UnicodeDecodeError) -> str:
    """Why ``path`` could not be read, in a few words: ``cannot read PATH: No such file
    or directory`` (the OS's reason, no errno or repeated path), or ``PATH is not UTF-8
    text``."""
    if isinstance(exc, UnicodeDecodeError):
        return f"{path} is not UTF-8 text"
    return f"cannot read {path}: {exc.strerror or exc}"


def closest(value: object, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The choice a mistyped ``value`` most likely meant, or None.

    Case is ignored (``vgg19`` finds ``VGG19``); otherwise :func:`difflib.
    get_close_matches` with ``cutoff`` decides.  The one rule behind every "did you
    mean" of tdmcore's messages (:func:`did_you_mean`).
    """
    text = str(value)
    folded: dict[str, str] = {}
    for choice in choices:
        folded.setdefault(choice.casefold(), choice)
    if text.casefold() in folded:
        return folded[text.casefold()]
    close = difflib.get_close_matches(text.casefold(), list(folded), n=1, cutoff=cutoff)
    return folded[close[0]] if close else None


def did_you_mean(value: object, choices: Iterable[str], cutoff: float = 0.6) -> str:
    """`` (did you mean 'X'?)`` for the :func:`closest` choice, or an empty string."""
    found = closest(value, choices, cutoff)
    return f" (did you mean {found!r}?)" if found is not None else ""
