"""Type stub of the regulation rule for Python callers (:mod:`tdmcore._kernels.regulation`)."""

import numpy as np
from numpy.typing import NDArray

QUIET: int
PAUSE: int
QUIET_KEEP: int
PAUSE_KEEP: int
DRIFT_UPDATE: int
PAUSE_UPDATE: int
W_N: int
W_POS: int
O_N: int
O_POS: int
H_N: int
H_POS: int
REPORTS: int
MARKS_N: int
N_COUNTERS: int
SLOW: int
OWN_LO: int
OWN_HI: int
IDLE: int
COMM: int
PERIOD: int
TOL_MS: int
N_LIMITS: int
WINDOW: int
O_T: int
HORIZON: int
LIMIT: int
N_RULES: int

def report(win: NDArray[np.float64], own: NDArray[np.float64], hist: NDArray[np.float64],
           hown: NDArray[np.float64], marks: NDArray[np.int64], counters: NDArray[np.int64],
           limits: NDArray[np.float64], rules: NDArray[np.int64], d: float, o: float,
           high: bool) -> tuple[int, float, float, int]: ...
def take_quiet(win: NDArray[np.float64], own: NDArray[np.float64], hist: NDArray[np.float64],
               hown: NDArray[np.float64], marks: NDArray[np.int64],
               counters: NDArray[np.int64], limits: NDArray[np.float64],
               rules: NDArray[np.int64], d: NDArray[np.float64], o: NDArray[np.float64],
               high: bool) -> int: ...
def bounds(win: NDArray[np.float64], own: NDArray[np.float64], hist: NDArray[np.float64],
           hown: NDArray[np.float64], marks: NDArray[np.int64], counters: NDArray[np.int64],
           limits: NDArray[np.float64], rules: NDArray[np.int64], high: bool
           ) -> tuple[float, float, float] | None: ...
def target_phase_ms(anchor_ref: float, compute_ref: float, offset_job: float,
                    offset_ref: float, compute_job: float) -> float: ...
def pause_ms(target_ms: float, now_ms: float, period_ms: float) -> float: ...
def next_start_ms(target_ms: float, now_ms: float, period_ms: float) -> float: ...
