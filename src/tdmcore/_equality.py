"""Value equality for the dataclasses that hold NumPy arrays.

A dataclass's generated ``__eq__`` compares its fields as a tuple, and ``==`` of two
arrays is an array, so comparing two results (two runs with one seed, say) raised
"The truth value of an array ... is ambiguous".  :class:`ValueEquality` is the one
rule: fields equal one by one (those declared ``field(compare=False)``, such as
wall-clock timings, left out), arrays by shape and values, containers element by
element, and NaN equal to NaN (a run that leaves a job unfinished reports NaN, and
two runs of it are still equal).  Other objects compare with their own ``==`` (for
most, identity).  Classes that take it are declared ``@dataclass(eq=False)`` so
that the dataclass does not generate its own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["ValueEquality", "values_equal"]


def _arrays_equal(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> bool:
    if x.shape != y.shape:
        return False
    if x.dtype.kind in "fc" and y.dtype.kind in "fc":
        return bool(np.array_equal(x, y, equal_nan=True))
    if x.dtype.kind == "O" or y.dtype.kind == "O":
        return all(values_equal(a, b) for a, b in zip(x.ravel(), y.ravel(), strict=True))
    return bool(np.array_equal(x, y))


def values_equal(x: Any, y: Any) -> bool:
    """Whether ``x`` and ``y`` are equal values (the module's rule)."""
    if x is y:
        return True
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return isinstance(x, np.ndarray) and isinstance(y, np.ndarray) \
            and _arrays_equal(x, y)
    if isinstance(x, tuple | list) and isinstance(y, tuple | list):
        return type(x) is type(y) and len(x) == len(y) \
            and all(values_equal(a, b) for a, b in zip(x, y, strict=True))
    if isinstance(x, Mapping) and isinstance(y, Mapping):
        return x.keys() == y.keys() and all(values_equal(x[k], y[k]) for k in x)
    if isinstance(x, float | np.floating) and isinstance(y, float | np.floating) \
            and math.isnan(x) and math.isnan(y):
        return True
    return bool(x == y)


class ValueEquality:
    """``==`` by value for a dataclass with array fields (:func:`values_equal` on
    each field but those declared ``field(compare=False)``); instances of different
    classes are never equal.  Such objects are unhashable, as a mutable or
    array-holding value should be."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(values_equal(getattr(self, f.name), getattr(other, f.name))
                   for f in dataclasses.fields(self)  # type: ignore[arg-type]
                   if f.compare)

    __hash__ = None  # type: ignore[assignment]
