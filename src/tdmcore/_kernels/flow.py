"""Flow-level network model of periodic training jobs (spec/simulator.md).

A job iterates: compute, then every one of its network pods sends a volume through
its node's host link; the iteration ends when the last of its transfers ends
(synchronous data parallel).  A link of capacity ``B`` (minus background traffic)
shares bandwidth max-min fairly among its active transfers, each capped at its own
rate ``r_p``.  Rates change only at events (a compute phase ends, a transfer ends),
so the model is exact between events.

Kernels take plain arrays; the event loop runs until a time limit and can be
resumed (the caller owns the state arrays), so a controller can act between calls.
Units: milliseconds, gigabits, Gbps (1 Gbps = 1e-3 Gbit per ms).
"""

from __future__ import annotations

import numpy as np

from .._config import jit

#: A transfer with less than this left (Gbit) is finished (float round-off).
DONE_GBIT = 1e-12

PHASE_WAIT = 0      # before its start time
PHASE_COMPUTE = 1
PHASE_COMM = 2
PHASE_DONE = 3


@jit
def waterfill(caps: np.ndarray, capacity: float, out: np.ndarray) -> None:
    """Max-min fair rates of transfers with rate caps ``caps`` sharing ``capacity``.

    Progressive filling: the smallest caps are met in full while they are below the
    equal share of what is left; the rest split the remainder equally.
    """
    k = caps.shape[0]
    if k == 0:
        return
    order = np.argsort(caps, kind="mergesort")
    left = max(capacity, 0.0)
    for i in range(k):
        share = left / (k - i)
        c = caps[order[i]]
        if c <= share:
            out[order[i]] = c
            left -= c
        else:
            for j in range(i, k):
                out[order[j]] = share
            return


@jit
def advance(
    t_ms: float, until_ms: float,
    # jobs
    compute_ms: np.ndarray, start_ms: np.ndarray, n_iters: np.ndarray,
    stretch_ms: np.ndarray, noise: np.ndarray,
    phase: np.ndarray, phase_end_ms: np.ndarray, iteration: np.ndarray,
    iter_end_ms: np.ndarray, pending: np.ndarray,
    # pods
    pod_job: np.ndarray, pod_link: np.ndarray, pod_cap: np.ndarray,
    pod_volume: np.ndarray, pod_left: np.ndarray, pod_sent: np.ndarray,
    # links
    link_capacity: np.ndarray, link_background: np.ndarray, link_ptr: np.ndarray,
    link_pods: np.ndarray, link_sent: np.ndarray,
) -> float:
    """Run the event loop from ``t_ms`` until ``until_ms`` (or until every job is
    done); return the time reached.  State arrays are updated in place.

    ``noise[j, i]`` multiplies job j's compute time in iteration i;
    ``stretch_ms[j]`` is added to every compute phase (idle injection).
    ``pending[j]``: transfers of job j still running in its current comm phase.
    ``iter_end_ms[j, i]``: when iteration i of job j ended (NaN until then).
    """
    n_jobs = compute_ms.shape[0]
    n_links = link_capacity.shape[0]
    rate = np.zeros(pod_job.shape[0])
    max_link = 0
    for link in range(n_links):
        max_link = max(max_link, link_ptr[link + 1] - link_ptr[link])
    caps = np.empty(max_link)
    sub = np.empty(max_link)
    idx = np.empty(max_link, dtype=np.int64)
    t = t_ms
    while True:
        # ---- phase changes due at t (a zero-length phase may chain several)
        changed = True
        while changed:
            changed = False
            for j in range(n_jobs):
                if phase[j] == PHASE_WAIT and start_ms[j] <= t:
                    if n_iters[j] <= 0:
                        phase[j] = PHASE_DONE
                    else:
                        phase[j] = PHASE_COMPUTE
                        phase_end_ms[j] = t + compute_ms[j] * noise[j, 0] + stretch_ms[j]
                    changed = True
                elif phase[j] == PHASE_COMPUTE and phase_end_ms[j] <= t:
                    phase[j] = PHASE_COMM
                    pending[j] = 0
                    changed = True
                elif phase[j] == PHASE_COMM and pending[j] == 0:
                    # comm phase starting now, or all transfers just ended
                    if phase_end_ms[j] <= t and _start_transfers(j, pod_job, pod_link,
                                                                 pod_volume, pod_left,
                                                                 pending):
                        phase_end_ms[j] = np.inf  # transfers running
                        continue
                    i = iteration[j]
                    iter_end_ms[j, i] = t
                    iteration[j] = i + 1
                    if i + 1 >= n_iters[j]:
                        phase[j] = PHASE_DONE
                    else:
                        phase[j] = PHASE_COMPUTE
                        phase_end_ms[j] = (t + compute_ms[j] * noise[j, i + 1]
                                           + stretch_ms[j])
                    changed = True
        # ---- rates: per link, max-min fair among active transfers
        for link in range(n_links):
            k = 0
            for q in range(link_ptr[link], link_ptr[link + 1]):
                p = link_pods[q]
                if pod_left[p] > 0.0:
                    caps[k] = pod_cap[p]
                    idx[k] = p
                    k += 1
            if k > 0:
                waterfill(caps[:k], link_capacity[link] - link_background[link], sub[:k])
                for m in range(k):
                    rate[idx[m]] = sub[m]
        # ---- next event
        t_next = until_ms
        for j in range(n_jobs):
            if phase[j] == PHASE_WAIT:
                t_next = min(t_next, start_ms[j])
            elif phase[j] == PHASE_COMPUTE:
                t_next = min(t_next, phase_end_ms[j])
        for p in range(pod_job.shape[0]):
            if pod_left[p] > 0.0 and rate[p] > 0.0:
                t_next = min(t_next, t + pod_left[p] / (rate[p] * 1e-3))
        busy = False
        for j in range(n_jobs):
            if phase[j] != PHASE_DONE:
                busy = True
        if not busy:
            return t
        # ---- advance transfers to t_next
        dt = t_next - t
        for p in range(pod_job.shape[0]):
            if pod_left[p] > 0.0:
                finish = t + pod_left[p] / (rate[p] * 1e-3) if rate[p] > 0.0 else np.inf
                if finish <= t_next or pod_left[p] - rate[p] * 1e-3 * dt <= DONE_GBIT:
                    moved = pod_left[p]  # this transfer ends at t_next
                else:
                    moved = rate[p] * 1e-3 * dt
                pod_left[p] -= moved
                pod_sent[p] += moved
                link_sent[pod_link[p]] += moved
                if pod_left[p] == 0.0:
                    pending[pod_job[p]] -= 1
                rate[p] = 0.0
        t = t_next
        if t >= until_ms:
            return t


@jit
def _start_transfers(j: int, pod_job: np.ndarray, pod_link: np.ndarray,
                     pod_volume: np.ndarray, pod_left: np.ndarray,
                     pending: np.ndarray) -> bool:
    """Start job j's transfers; False if it has none (all its pods on one node)."""
    any_started = False
    for p in range(pod_job.shape[0]):
        if pod_job[p] == j and pod_link[p] >= 0 and pod_volume[p] > 0.0:
            pod_left[p] = pod_volume[p]
            pending[j] += 1
            any_started = True
    return any_started
