"""One place that hands a row-wise integer program to scipy's HiGHS.

Rows are ``(coefficients by column, lower, upper)``; every variable is integer.
Used by the offline optimum of OASiS (problem (1)) and by the Dorm baseline.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._quiet import quiet_stdout

Row = tuple[dict[int, float], float, float]


def solve_integer_program(cost: NDArray[np.float64], rows: list[Row], lower: Any, upper: Any,
                          time_limit_s: float) -> Any:
    """Minimize ``cost @ x`` subject to the rows and bounds, x integer; scipy's result."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_matrix

    data: list[float] = []
    cols: list[int] = []
    ptr = [0]
    lo, hi = np.empty(len(rows)), np.empty(len(rows))
    for row, (coeffs, low, high) in enumerate(rows):
        cols.extend(coeffs.keys())
        data.extend(coeffs.values())
        ptr.append(len(cols))
        lo[row], hi[row] = low, high
    matrix = csr_matrix((np.array(data, dtype=np.float64), np.array(cols, dtype=np.int64),
                         np.array(ptr, dtype=np.int64)), shape=(len(rows), cost.shape[0]))
    with quiet_stdout():
        return milp(cost, constraints=LinearConstraint(matrix, lo, hi),
                    integrality=np.ones(cost.shape[0]), bounds=Bounds(lower, upper),
                    options={"time_limit": time_limit_s})
