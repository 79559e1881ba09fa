"""Flow-level network model of periodic training jobs (spec/simulator.md).

A job iterates: compute, then every one of its network pods sends a volume through
its node's host link; the iteration ends when the last of its transfers ends
(synchronous data parallel), plus a fixed latency tail (high-latency node pairs).
A link of capacity ``B`` (minus background traffic) shares bandwidth max-min fairly
among its active transfers, each capped at its own rate ``r_p``.  Rates change only
at events (a phase ends, a transfer ends), so the model is exact between events.

Kernels take plain arrays.  The event loop is resumable: the caller owns every
state array, and :func:`advance` returns when it reaches a time limit, when a job
finishes, when a job's iteration log is full, or when a monitored job has logged
enough slow iterations that the controller must look now.  Between calls the
caller may change anything (add jobs, set a hold, drain logs), which is how the
controller and arrivals act on the model.  Units: ms, Gbit, Gbps (1e-3 Gbit/ms).

Per job, iteration ``i`` uses buffer slot ``i - base[j]`` of ``noise`` (compute
multiplier) and of the logs (start, comm start, end).
"""

from __future__ import annotations

import numpy as np

from .._config import jit

#: A transfer with less than this left (Gbit) is finished (float round-off).
DONE_GBIT = 1e-12

PHASE_WAIT = 0      # not started, or held: the next iteration starts at start_ms
PHASE_COMPUTE = 1
PHASE_COMM = 2
PHASE_DONE = 3
PHASE_READY = 4     # an iteration just ended; the next one has not started
PHASE_TAIL = 5      # transfers done, the latency tail runs until phase_end_ms

#: Why :func:`advance` returned.
STOP_TIME = 0       # reached until_ms
STOP_FINISHED = 1   # a job finished its last iteration (``finished`` holds it)
STOP_DRAIN = 2      # a log is full, or a monitored job logged its slow limit
STOP_IDLE = 3       # every job is done
STOP_SOLO = 4       # a job flagged to leave (``leave[j]``) is between iterations


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
    stretch_ms: np.ndarray, tail_ms: np.ndarray,
    hold_phase: np.ndarray, hold_period: np.ndarray,
    slow_ms: np.ndarray, slow_limit: np.ndarray, slow_count: np.ndarray,
    phase: np.ndarray, phase_end_ms: np.ndarray, iteration: np.ndarray,
    pending: np.ndarray, base: np.ndarray, leave: np.ndarray, noise: np.ndarray,
    log_start: np.ndarray, log_comm: np.ndarray, log_end: np.ndarray,
    # pods
    pod_job: np.ndarray, pod_link: np.ndarray, pod_cap: np.ndarray,
    pod_volume: np.ndarray, pod_left: np.ndarray, pod_sent: np.ndarray,
    # links
    link_capacity: np.ndarray, link_background: np.ndarray, link_ptr: np.ndarray,
    link_pods: np.ndarray, link_sent: np.ndarray,
    # out
    finished: np.ndarray,
) -> tuple[float, int]:
    """Run the event loop from ``t_ms``; return ``(time reached, STOP_* reason)``.

    State arrays are updated in place.  ``stretch_ms[j]`` is added to every compute
    phase (idle injection).  A job in PHASE_READY with a finite ``hold_phase[j]``
    waits until the next time congruent to it modulo ``hold_period[j]`` (a shift
    or a pause), then the hold is cleared.  ``slow_ms[j]``: an iteration longer
    than this counts towards ``slow_count[j]``; at ``slow_limit[j]`` the loop
    stops (STOP_DRAIN) with the job between iterations.  ``finished[0]`` is the
    job that finished on STOP_FINISHED, or the job flagged in ``leave`` that is
    between iterations (no hold pending) on STOP_SOLO.
    """
    n_jobs = compute_ms.shape[0]
    n_links = link_capacity.shape[0]
    n_pods = pod_job.shape[0]
    slots = noise.shape[1]
    rate = np.zeros(n_pods)
    max_link = 1
    for link in range(n_links):
        max_link = max(max_link, link_ptr[link + 1] - link_ptr[link])
    caps = np.empty(max_link)
    sub = np.empty(max_link)
    idx = np.empty(max_link, dtype=np.int64)
    # first pod of each job, pods of a job are contiguous
    t = t_ms
    while True:
        # ---- phase changes due at t (zero-length phases may chain several)
        changed = True
        while changed:
            changed = False
            for j in range(n_jobs):
                ph = phase[j]
                if ph == PHASE_WAIT and start_ms[j] <= t:
                    if iteration[j] >= n_iters[j]:
                        phase[j] = PHASE_DONE
                        finished[0] = j
                        return t, STOP_FINISHED
                    k = iteration[j] - base[j]
                    if k >= slots:
                        return t, STOP_DRAIN
                    phase[j] = PHASE_COMPUTE
                    phase_end_ms[j] = t + compute_ms[j] * noise[j, k] + stretch_ms[j]
                    log_start[j, k] = t
                    changed = True
                elif ph == PHASE_COMPUTE and phase_end_ms[j] <= t:
                    phase[j] = PHASE_COMM
                    pending[j] = 0
                    log_comm[j, iteration[j] - base[j]] = t
                    if not _start_transfers(j, pod_job, pod_link, pod_volume, pod_left,
                                            pending):
                        phase[j] = PHASE_TAIL
                        phase_end_ms[j] = t
                    changed = True
                elif ph == PHASE_COMM and pending[j] == 0:
                    phase[j] = PHASE_TAIL
                    phase_end_ms[j] = t + tail_ms[j]
                    changed = True
                elif ph == PHASE_TAIL and phase_end_ms[j] <= t:
                    i = iteration[j]
                    k = i - base[j]
                    log_end[j, k] = t
                    iteration[j] = i + 1
                    phase[j] = PHASE_READY
                    if t - log_start[j, k] > slow_ms[j]:
                        slow_count[j] += 1
                    changed = True
                    if slow_count[j] >= slow_limit[j]:
                        return t, STOP_DRAIN
                elif ph == PHASE_READY:
                    if iteration[j] >= n_iters[j]:
                        phase[j] = PHASE_DONE
                        finished[0] = j
                        return t, STOP_FINISHED
                    if leave[j] != 0 and hold_phase[j] != hold_phase[j]:
                        finished[0] = j  # the caller takes it out, between iterations
                        return t, STOP_SOLO
                    start = t
                    if hold_phase[j] == hold_phase[j]:  # not NaN
                        start = t + (hold_phase[j] - t) % hold_period[j]
                        hold_phase[j] = np.nan
                    phase[j] = PHASE_WAIT
                    start_ms[j] = start
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
        busy = False
        for j in range(n_jobs):
            ph = phase[j]
            if ph != PHASE_DONE:
                busy = True
            if ph == PHASE_WAIT:
                t_next = min(t_next, start_ms[j])
            elif ph == PHASE_COMPUTE or ph == PHASE_TAIL:
                t_next = min(t_next, phase_end_ms[j])
        for p in range(n_pods):
            if pod_left[p] > 0.0 and rate[p] > 0.0:
                t_next = min(t_next, t + pod_left[p] / (rate[p] * 1e-3))
        if not busy:
            return t, STOP_IDLE
        # ---- advance transfers to t_next
        dt = t_next - t
        for p in range(n_pods):
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
            return t, STOP_TIME


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
