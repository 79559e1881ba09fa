"""Brute-force peer and oracle of the flow-level network model (docs/simulator.md).

Written independently of ``tdmcore.sim.engine._flow``: max-min fairness by the textbook
iteration (saturate every transfer whose cap is below the equal share, repeat), and
a plain event loop over dictionaries.  Slow and obvious on purpose.  A job spanning
nodes waits its ``tail_ms`` (the ring's latency steps) after its last transfer, even
when it has nothing to send (docs/simulator.md).
"""

from __future__ import annotations

import math

import numpy as np


def maxmin(caps: list[float], capacity: float, efficiency: float = 1.0) -> list[float]:
    """Max-min fair rates; two or more transfers asking for more than ``capacity``
    together share only ``efficiency`` of it (docs/simulator.md, "Contention")."""
    rates = [0.0] * len(caps)
    free = set(range(len(caps)))
    left = max(capacity, 0.0)
    if len(caps) >= 2 and sum(caps) > left:
        left *= efficiency
    while free:
        share = left / len(free)
        small = [i for i in free if caps[i] <= share]
        if not small:
            for i in free:
                rates[i] = share
            break
        for i in small:
            rates[i] = caps[i]
            left -= caps[i]
            free.discard(i)
    return rates


MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix(x: int) -> int:
    """SplitMix64's finaliser on Python integers."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def noise_normal(seed: int, key: int, i: int) -> float:
    """The documented counter-based normal of iteration ``i`` of job ``key``."""
    base = mix((mix((seed + GOLDEN) & MASK) + key * GOLDEN) & MASK)
    h1 = mix((base + (2 * i + 1) * GOLDEN) & MASK)
    h2 = mix((base + (2 * i + 2) * GOLDEN) & MASK)
    u1 = ((h1 >> 11) + 1) / 2.0**53
    u2 = (h2 >> 11) / 2.0**53
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def simulate(jobs, capacity, background=None, sigma=0.0, seed=0, until=math.inf,
             efficiency=1.0):
    """Iteration end times per job (lists), and Gbit sent per pod."""
    n = len(jobs)
    max_iter = max(1, max(j.iterations for j in jobs))
    noise = np.ones((n, max_iter))
    if sigma:
        for i in range(n):
            for k in range(max_iter):
                noise[i, k] = math.exp(sigma * noise_normal(seed, i, k) - sigma * sigma / 2)
    background = background or [0.0] * len(capacity)
    pods = [(i, link) for i, j in enumerate(jobs) for link in j.links]
    sent = [0.0] * len(pods)
    left = [0.0] * len(pods)
    ends: list[list[float]] = [[] for _ in jobs]
    state = ["wait"] * n
    compute_end = [0.0] * n
    tail_end = [0.0] * n
    t = 0.0

    def compute_time(i: int) -> float:
        j = jobs[i]
        base = j.period_ms * (1 - j.duty_cycle) if any(x is not None for x in j.links) \
            else j.period_ms
        return base * noise[i, len(ends[i])] + j.idle_ms

    def tail_of(i: int) -> float:
        # the ring's latency steps (docs/simulator.md): paid by a job spanning nodes,
        # even with nothing to send; a job on one node pays none
        j = jobs[i]
        return j.tail_ms if any(x is not None for x in j.links) else 0.0

    while True:
        progress = True
        while progress:
            progress = False
            for i, j in enumerate(jobs):
                if state[i] == "wait" and j.start_ms <= t:
                    if j.iterations == 0:
                        state[i] = "done"
                    else:
                        state[i] = "compute"
                        compute_end[i] = t + compute_time(i)
                    progress = True
                elif state[i] == "compute" and compute_end[i] <= t:
                    state[i] = "comm"
                    started = False
                    for p, (owner, link) in enumerate(pods):
                        volume = j.bandwidth_gbps * j.period_ms * j.duty_cycle * 1e-3
                        if owner == i and link is not None and volume > 0:
                            left[p] = volume
                            started = True
                    if not started:
                        state[i] = "tail"
                        tail_end[i] = t + tail_of(i)
                    progress = True
                elif state[i] == "comm" and all(left[p] <= 0 for p, (o, _) in
                                                 enumerate(pods) if o == i):
                    state[i] = "tail"
                    tail_end[i] = t + tail_of(i)
                    progress = True
                if state[i] == "tail" and tail_end[i] <= t:
                    state[i] = "end"
                if state[i] == "end":
                    ends[i].append(t)
                    if len(ends[i]) >= j.iterations:
                        state[i] = "done"
                    else:
                        state[i] = "compute"
                        compute_end[i] = t + compute_time(i)
                    progress = True
        if all(s == "done" for s in state):
            return ends, sent, t
        rates = [0.0] * len(pods)
        for link in range(len(capacity)):
            active = [p for p, (o, lk) in enumerate(pods) if lk == link and left[p] > 0]
            got = maxmin([jobs[pods[p][0]].bandwidth_gbps for p in active],
                         capacity[link] - background[link], efficiency)
            for p, r in zip(active, got, strict=True):
                rates[p] = r
        events = [until]
        for i, j in enumerate(jobs):
            if state[i] == "wait":
                events.append(j.start_ms)
            elif state[i] == "compute":
                events.append(compute_end[i])
            elif state[i] == "tail":
                events.append(tail_end[i])
        for p in range(len(pods)):
            if left[p] > 0 and rates[p] > 0:
                events.append(t + left[p] / (rates[p] / 1000))
        t_next = min(events)
        if t_next == math.inf:  # only transfers stalled at rate 0 are left: they never end
            return ends, sent, t
        for p in range(len(pods)):
            if left[p] > 0:
                done_at = t + left[p] / (rates[p] / 1000) if rates[p] > 0 else math.inf
                moved = left[p] if done_at <= t_next else rates[p] / 1000 * (t_next - t)
                left[p] -= moved
                sent[p] += moved
                if left[p] < 1e-12:
                    sent[p] += left[p]
                    left[p] = 0.0
        t = t_next
        if t >= until:
            return ends, sent, t
