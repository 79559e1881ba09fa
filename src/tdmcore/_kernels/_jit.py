"""The one place that sets Numba's compilation options for every kernel.

``cache=True`` keeps compiled kernels on disk between runs (CI and the test suite
rely on it to stay fast); ``fastmath`` is off because the rotation search must give
bit-for-bit reproducible sums, and its tie rules compare floats against tolerances
(docs/traffic-circle.md).
"""

from __future__ import annotations

from typing import Any

from numba import njit

JIT_OPTIONS: dict[str, Any] = {
    "cache": True,
    "nogil": True,
    "fastmath": False,
    "boundscheck": False,
    "error_model": "numpy",
}


def jit(func: Any) -> Any:
    """Compile ``func`` with the project's Numba options."""
    return njit(**JIT_OPTIONS)(func)
