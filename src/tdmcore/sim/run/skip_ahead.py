"""Closed-form stretches: jobs whose iterations nobody affects (docs/simulator.md).

A job on one node iterates ``t_p x noise`` whatever the others do: its whole run is
computed when it starts.  A networked job alone on all its links (**skip-ahead**)
iterates ``compute x noise + idle + comm + tail`` with a fixed ``comm``: while the
controller would take every report of it quietly
(:meth:`~tdmcore.metronome.controller.Controller.quiet_bounds`), a stretch of its
iterations is walked in closed form by the engine's noise
(``tdmcore.sim.engine._flow.stretch_*``), and it goes back to the engine,
mid-iteration if need be, the moment it stops being alone or the controller moves
it.  Exact: the test suite runs every iteration through the engine
(``skip_ahead=False``) and compares.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...metronome.controller import Controller, Watch
from ...model import ClusterState
from ..engine._flow import DONE_GBIT, noise_factor, stretch_commit, stretch_locate, stretch_summary
from .book import Book

if TYPE_CHECKING:
    from ..cluster import SimJob


@dataclass
class Stretch:
    """A networked job alone on all its links, computed in closed form.

    Iteration ``i`` (from ``i0``, which starts at ``s0``) lasts
    ``compute x noise_i + idle + comm + tail`` with ``comm`` fixed (its transfers
    share no link with anyone): exactly what the engine would compute.
    """

    i0: int
    s0: float
    comm: float
    idle: float
    end: float
    version: int


class SkipAhead:
    """The run's closed-form stretches and the ends they are due at."""

    def __init__(self, book: Book, controller: Controller | None, state: ClusterState,
                 enabled: bool) -> None:
        self.book, self.controller, self.state = book, controller, state
        self.enabled = enabled
        self.stretches: dict[str, Stretch] = {}
        #: heap of (end, version, job): closed-form ends (local jobs and stretches)
        self.ends: list[tuple[float, int, str]] = []
        self.versions = 0

    # ------------------------------------------------------------ terms
    def _terms(self, name: str, stretch: Stretch) -> tuple[int, float, float]:
        """``(noise key, compute, const)``: iteration i lasts compute x noise_i + const."""
        params = self.book.params[name]
        return (self.book.index[name], params.compute_ms,
                stretch.idle + stretch.comm + params.tail_ms)

    def _left(self, name: str, stretch: Stretch) -> int:
        return self.book.by_name[name].iterations - stretch.i0

    def comm_alone(self, name: str) -> float:
        """The comm phase of a job alone on its links: per link its k pods share
        ``B - background`` max-min fairly at rate ``min(r, (B - bg) / k)``."""
        params = self.book.params[name]
        rate, volume, links = params.rate_gbps, params.volume_gbit, list(params.links)
        if volume <= 0.0:  # nothing to send (a pattern of 0 Gbps): as the engine, no comm
            return 0.0
        comm = 0.0
        for link in set(links):
            k = links.count(link)
            free = self.book.engine.free_gbps(link)
            per_pod = rate if rate <= free / k else free / k
            comm = max(comm, volume / (per_pod * 1e-3))
        return comm

    def quiet_bounds(self, name: str) -> tuple[float, float, float] | None:
        """:meth:`Controller.quiet_bounds` of the job's windows, wherever they are
        (in the engine, or with the controller); unbounded without a controller."""
        if self.controller is None:
            return -np.inf, np.inf, np.inf
        if name in self.book.slot:
            watch: Watch | None = Watch(*self.book.engine.watch(self.book.slot[name]))
        else:
            watch = self.controller.watch_state(self.state.job_members[name][0])
        return self.controller.quiet_bounds(name, watch)

    def _quiet_total(self, name: str, stretch: Stretch,
                     bounds: tuple[float, float, float]) -> float | None:
        """The stretch's total time if every iteration of it is quiet, else None."""
        key, compute, const = self._terms(name, stretch)
        total, lo, hi = stretch_summary(self.book.seed, key, self.book.sigma, stretch.i0,
                                        self._left(name, stretch), compute, const)
        talk = const - stretch.idle  # comm + tail: the part that is not the job's own
        if lo - talk < bounds[0] or hi - talk > bounds[1] or hi > bounds[2]:
            return None
        return float(total)

    # ------------------------------------------------------------ in and out
    def begin(self, name: str, i0: int, s0: float, idle: float) -> bool:
        """Take the job out of the event loop from iteration ``i0`` at ``s0``, if
        that is exact: it is alone on its links and none of its iterations could
        make the controller act."""
        bounds = self.quiet_bounds(name)
        if bounds is None:
            return False
        stretch = Stretch(i0, s0, self.comm_alone(name), idle, s0, self.versions + 1)
        total = self._quiet_total(name, stretch, bounds)
        if total is None:
            return False
        self.versions += 1
        stretch.end = s0 + total
        self.stretches[name] = stretch
        heapq.heappush(self.ends, (stretch.end, stretch.version, name))
        return True

    def commit(self, name: str, stretch: Stretch, count: int) -> float:
        """Record ``count`` iterations of the stretch in one pass; return the start
        of the next one."""
        book = self.book
        res = book.results[name]
        key, compute, const = self._terms(name, stretch)
        step = book.step[name]
        keep = 0 if self.controller is None else self.controller.config.readjust_horizon
        samples = np.empty(count // step + 2)
        last_d, last_s = np.empty(keep), np.empty(keep)
        total, written, kept = stretch_commit(book.seed, key, book.sigma, stretch.i0, count,
                                              compute, const, stretch.s0, step, samples,
                                              last_d, last_s)
        res.busy_ms += total
        res.done += count
        book.durations[name].append(samples[:written])
        volume = book.params[name].volume_gbit
        np.add.at(book.sent_by_node, book.pod_node_links[name], volume * count)
        if self.controller is not None and count:
            # the controller's view after these reports: the last ones fill its window
            # and history, and give the anchor (none of them can trigger anything)
            m = min(kept, keep)
            order = (np.arange(m) + (kept - m)) % max(keep, 1)
            pod = self.state.job_members[name][0]
            talk = const - stretch.idle  # measured comm phase: transfers and the tail
            self.controller.absorb_quiet(pod, count, last_s[order], last_d[order],
                                         np.minimum(talk, last_d[order]))
        return stretch.s0 + total

    def finish(self, name: str) -> None:
        """The job's stretch ran to its last iteration."""
        stretch = self.stretches.pop(name)
        self.commit(name, stretch, self._left(name, stretch))

    def to_engine(self, name: str, t: float) -> None:
        """The job stops being alone (or is moved) at ``t``: rebuild its engine
        state there, mid-iteration if need be."""
        book = self.book
        stretch = self.stretches.pop(name)
        params = book.params[name]
        key, compute, const = self._terms(name, stretch)
        n = self._left(name, stretch)
        k, s_k, _ = stretch_locate(book.seed, key, book.sigma, stretch.i0, n, compute, const,
                                   stretch.s0, t)
        k = min(k, n - 1)  # the stretch's end is its job's finish: handled elsewhere
        self.commit(name, stretch, k)
        i = stretch.i0 + k
        j = book.enter(name, i, s_k, stretch.idle)
        eng = book.engine
        c_k = compute * noise_factor(book.seed, key, i, book.sigma) + stretch.idle
        u = t - s_k
        if u <= 0.0:
            # iteration i has not begun (it starts at s_k >= t): it waits for its
            # start, as a job in the engine does, so a shift now moves that start;
            # after an iteration, the wait a shift adds is held time, as in the engine
            if i > 0:
                eng.mark_paused(j, t)
            return
        if u < c_k:
            eng.rejoin_computing(j, s_k, s_k + c_k)
            return
        elapsed = u - c_k
        links = list(params.links)
        rate, volume = params.rate_gbps, params.volume_gbit
        pod_rates = np.empty(len(links))
        for q, link in enumerate(links):
            free = eng.free_gbps(link)
            m = links.count(link)
            pod_rates[q] = rate if rate <= free / m else free / m
        left = np.maximum(volume - pod_rates * 1e-3 * elapsed, 0.0)
        left[left <= DONE_GBIT] = 0.0
        sent = volume - left
        if (left > 0).any():
            eng.rejoin_communicating(j, s_k, s_k + c_k, t, left, sent)
        else:
            eng.rejoin_in_tail(j, s_k, s_k + c_k, sent,
                               s_k + c_k + stretch.comm + params.tail_ms)

    def from_engine(self, name: str, t: float) -> None:
        """An engine job flagged as alone is between iterations at ``t``: take it
        out (or leave it in, when skipping ahead would not be exact)."""
        book = self.book
        j = book.slot[name]
        eng = book.engine
        eng.set_leave(j, False)
        if not book.alone(name):
            return
        bounds = self.quiet_bounds(name)
        if bounds is None:
            return
        i0 = eng.iteration(j)
        idle = eng.idle_ms(j)
        trial = Stretch(i0, t, self.comm_alone(name), idle, t, 0)
        if self._quiet_total(name, trial, bounds) is None:
            return
        book.leave(name)
        ok = self.begin(name, i0, t, idle)
        assert ok

    def start_local(self, job: SimJob, start: float) -> None:
        """A job on one node iterates ``t_p x noise`` regardless of anyone else: its
        whole run is computed now, exactly, and it finishes at a known time."""
        book = self.book
        n, step = job.iterations, book.step[job.name]
        res = book.results[job.name]
        samples = np.empty(n // step + 2)
        total, written, _ = stretch_commit(book.seed, book.index[job.name], book.sigma, 0, n,
                                           job.period_ms, 0.0, start, step, samples,
                                           np.empty(0), np.empty(0))
        res.done, res.busy_ms = n, total
        book.durations[job.name].append(samples[:written])
        self.versions += 1
        heapq.heappush(self.ends, (start + total, self.versions, job.name))

    # ------------------------------------------------------------ the controller's view
    def last_start(self, name: str, t: float) -> float | None:
        """The start of the latest iteration job ``name``'s stretch finished by ``t``
        (None: it runs no stretch, or none finished yet)."""
        stretch = self.stretches.get(name)
        if stretch is None:
            return None
        key, compute, const = self._terms(name, stretch)
        k, _, last = stretch_locate(self.book.seed, key, self.book.sigma, stretch.i0,
                                    self._left(name, stretch), compute, const, stretch.s0, t)
        return float(last) if k > 0 else None

    # ------------------------------------------------------------ ends
    def stale(self, name: str, version: int) -> bool:
        """An end of a stretch that went back to the engine early."""
        return name in self.book.networked and (
            name not in self.stretches or self.stretches[name].version != version)

    def drop_stale_ends(self) -> None:
        """Closed-form ends of stretches that went back to the engine."""
        while self.ends and self.stale(self.ends[0][2], self.ends[0][1]):
            heapq.heappop(self.ends)

    def next_end(self) -> float:
        return self.ends[0][0] if self.ends else np.inf

    def sent_by_node(self, out: np.ndarray, t: float) -> None:
        """Add what the stretches sent by ``t``, spread evenly over each."""
        book = self.book
        for name, stretch in self.stretches.items():
            if stretch.end <= stretch.s0:
                continue
            share = min(max((t - stretch.s0) / (stretch.end - stretch.s0), 0.0), 1.0)
            n = self._left(name, stretch)
            np.add.at(out, book.pod_node_links[name], book.params[name].volume_gbit * n * share)
