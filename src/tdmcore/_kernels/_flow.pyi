"""Type stub of the Cython event engine (:mod:`tdmcore._kernels._flow`)."""


from typing import Any

import numpy as np
from numpy.typing import NDArray

DONE_GBIT: float

PHASE_WAIT: int
PHASE_COMPUTE: int
PHASE_COMM: int
PHASE_DONE: int
PHASE_READY: int
PHASE_TAIL: int
PHASE_FREE: int
STOP_TIME: int
STOP_FINISHED: int
STOP_SAMPLES: int
STOP_IDLE: int
STOP_SOLO: int
STOP_REPORT: int
REPORT_QUIET: int
REPORT_PAUSE: int
REPORT_CONTROLLER: int
REPORT_QUIET_KEEP: int
REPORT_PAUSE_KEEP: int
F_T: int
F_ISTART: int
F_COMPUTE: int
F_STRETCH: int
F_TAIL: int
F_HOLD_PHASE: int
F_HOLD_PERIOD: int
F_BUSY: int
F_ANCHOR: int
F_SLOW: int
F_OLO: int
F_OHI: int
F_PPAT: int
F_TFIX: int
F_PAUSE_MS: int
F_LAST_DUR: int
F_LAST_START: int
F_JOB_PERIOD: int
F_T_CR: int
F_T_OJ: int
F_T_OR: int
F_T_CJ: int
F_CSTART: int
F_LAST_OWN: int
F_IDLE: int
F_CPAT: int
F_TOL_MS: int
N_JF: int
I_PHASE: int
I_ITER: int
I_NITERS: int
I_PENDING: int
I_POD0: int
I_NPOD: int
I_LEAVE: int
I_KEY: int
I_DONE: int
I_STEP: int
I_NSAMP: int
I_MON: int
I_HIGH: int
I_ROOT: int
I_WIN_N: int
I_WIN_POS: int
I_HIST_N: int
I_HIST_POS: int
I_REPORTS: int
I_READJ_N: int
I_READJ: int
I_REPORTED: int
I_SLOWN: int
I_ABOVE: int
I_BELOW: int
I_OWN_N: int
I_OWN_POS: int
N_JI: int
P_CAP: int
P_VOLUME: int
P_LEFT: int
P_RATE: int
P_SENT: int
N_PF: int
P_JOB: int
P_LINK: int
P_ACTIVE: int
N_PI: int
L_CAP: int
L_BG: int
L_T: int
L_SENT: int
L_MARK: int
L_ETA: int
N_LF: int
C_WINDOW: int
C_OT: int
C_HORIZON: int
C_LIMIT: int
C_SEED: int
C_MARK: int
N_CFG: int

def noise_normal(seed: int, key: int, i: int) -> float: ...
def noise_factor(seed: int, key: int, i: int, sigma: float) -> float: ...
#: the engine's 22 arrays, in the order of tdmcore.sim.network.FlowEngine._state
State = tuple[NDArray[Any], ...]

def advance(t: float, until: float, sigma: float, state: State,
            out: NDArray[np.int64]) -> float: ...
def schedule(ent: int, t: float, ev_t: NDArray[np.float64], ev_s: NDArray[np.int64],
    ht: NDArray[np.float64], hid: NDArray[np.int64], hst: NDArray[np.int64],
    hsize: NDArray[np.int64], n_slots: int, n_links: int) -> None: ...
def rebuild_heap(ev_t: NDArray[np.float64], ev_s: NDArray[np.int64], ht: NDArray[np.float64],
    hid: NDArray[np.int64], hst: NDArray[np.int64], hsize: NDArray[np.int64],
    n_slots: int, n_links: int) -> None: ...
def flush_links(t: float, sigma: float, state: State) -> None: ...
def relink(lk: int, sigma: float, state: State) -> None: ...
def monitor_outcome(j: int, sigma: float, state: State) -> int: ...
def monitor_apply(j: int, t: float, outcome: int, sigma: float, state: State) -> None: ...
def stretch_summary(seed: int, key: int, sigma: float, i0: int, n: int, compute: float,
    const: float) -> tuple[float, float, float]: ...
def stretch_locate(seed: int, key: int, sigma: float, i0: int, n: int, compute: float,
    const: float, s0: float, t: float) -> tuple[int, float, float]: ...
def stretch_commit(seed: int, key: int, sigma: float, i0: int, n: int, compute: float,
    const: float, s0: float, step: int, samples: NDArray[np.float64],
    last_d: NDArray[np.float64], last_s: NDArray[np.float64]) -> tuple[float, int, int]: ...
