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


def jit_inline(func: Any) -> Any:
    """:func:`jit`, and inlined into every kernel that calls it.

    For small helpers called inside a search's innermost loops.  Numba compiles a
    call between two jitted functions as a real call through its own calling
    convention (every array argument passed as a struct, a status code checked on
    return), which costs more than the helper's body; ``inline="always"`` merges the
    helper into its caller's Numba IR before compilation instead.  Arithmetic and its
    order are unchanged, so results stay bit for bit the same.
    """
    return njit(inline="always", **JIT_OPTIONS)(func)
