"""One cluster run's event loop (docs/simulator.md).

Arrivals are placed (:mod:`.placement`), the engine runs until the next arrival,
sample or closed-form end, and stops when a job finishes, a sample buffer fills, a
report needs the controller (:mod:`.mirror`) or a job may go on in closed form
(:mod:`.skip_ahead`); a finished job leaves the cluster and the waiting gangs are
retried.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...framework import Policy, Scheduler
from ...metronome.controller import Controller, ControllerConfig
from ...metronome.policies import MetronomeConfig
from ...model import ClusterState
from ..engine._flow import (
    STOP_FINISHED,
    STOP_IDLE,
    STOP_REPORT,
    STOP_SAMPLES,
    STOP_SOLO,
    FlowEngine,
)
from .book import Book
from .mirror import ControllerMirror
from .placement import Placement
from .sampling import LinkSampler
from .skip_ahead import SkipAhead

if TYPE_CHECKING:
    from ..cluster import JobResult, SimCluster, SimJob

#: Sampled iteration times buffered per job in the engine between two hand-overs.
SAMPLE_BUFFER = 1024


class Run:
    """A placement policy (and its controller, for Metronome's) over the flow model."""

    def __init__(self, sim: SimCluster, jobs: tuple[SimJob, ...], placement: Policy,
                 results: dict[str, JobResult], *, ideal: bool, seed: int, sigma: float,
                 sample_ms: float, progress: Callable[[float], None] | None,
                 skip_ahead: bool, strict_fifo: bool, contention_efficiency: float,
                 controller: ControllerConfig | None = None) -> None:
        cluster = sim.cluster
        self.jobs, self.progress, self.skip_ahead = jobs, progress, skip_ahead
        self.state = ClusterState(cluster)
        # the stop-and-wait controller runs for the Metronome policies only
        self.controller = (Controller(self.state, controller) if controller is not None
                           else Controller.for_policy(self.state, placement)) \
            if not ideal and isinstance(getattr(placement, "config", None),
                                        MetronomeConfig) else None
        k = len(cluster)
        n_private = sum(j.workers for j in jobs) if ideal else 0
        capacity = np.concatenate([cluster.link_gbps, np.zeros(n_private)])
        background = np.concatenate([np.zeros(k) if ideal else sim.background_gbps,
                                     np.zeros(n_private)])
        rules = self.controller.config if self.controller is not None else ControllerConfig()
        engine = FlowEngine(capacity, background, seed=seed, sigma=sigma,
                            window=rules.window, o_t=rules.o_t,
                            horizon=rules.readjust_horizon, limit=rules.readjust_limit,
                            samples_per_job=SAMPLE_BUFFER, jobs_hint=16,
                            contention_efficiency=contention_efficiency, clear=skip_ahead)
        self.book = Book(jobs, results, engine, k, seed, sigma)
        self.mirror = None if self.controller is None else ControllerMirror(
            self.book, self.controller, self.state)
        self.skip = SkipAhead(self.book, self.controller, self.state, skip_ahead)
        if self.mirror is not None:
            self.mirror.skip = self.skip
        self.placement = Placement(self.book, sim, Scheduler(placement), self.state,
                                   self.controller, self.mirror, self.skip, ideal=ideal,
                                   strict_fifo=strict_fifo)
        self.sampler = LinkSampler(self.book, self.skip, k, sample_ms)
        self.end_ms = 0.0
        self.sent = np.zeros(k)

    def finish(self, name: str, t: float) -> None:
        """Job ``name`` did its last iteration at ``t``: it leaves the cluster."""
        book, ctrl = self.book, self.controller
        book.results[name].end_ms = t
        if name in self.skip.stretches:
            self.skip.finish(name)
        elif name in book.slot:
            book.leave(name)
        for pod in list(self.state.job_members.get(name, ())):
            node = self.state.placed[pod].node
            self.state.remove(pod)
            if ctrl is not None:
                ctrl.on_removed(node, name)
        self.placement.changed()
        if name in book.networked:
            touched = book.leave_links(name)
            if self.skip_ahead:
                for other in touched:  # who is alone now leaves the engine between iterations
                    if other in book.slot and book.alone(other):
                        book.engine.set_leave(book.slot[other], True)
        if self.mirror is not None:
            self.mirror.update_idle(t)
            self.mirror.refresh_params()

    def execute(self) -> None:
        """Run until every job has finished (or can never start)."""
        book, skip, place, sampler = self.book, self.skip, self.placement, self.sampler
        index = book.index
        arrivals = sorted(self.jobs, key=lambda j: (j.arrival_s, index[j.name]))
        queue: list[SimJob] = []
        a = 0
        t = 0.0
        while True:
            # admit everything that has arrived (queue first, in arrival order)
            while a < len(arrivals) and arrivals[a].arrival_s * 1e3 <= t:
                job = arrivals[a]
                a += 1
                if not place.fits_empty(job):
                    continue  # can never run here
                if (not queue or (not place.strict_fifo and place.room_for(job))) \
                        and place.try_place(job, t):
                    book.results[job.name].accepted_on_arrival = True
                else:
                    queue.append(job)
            # closed-form ends due by now, after the arrivals of this instant: as
            # for a job in the engine, whose events at an instant come after the
            # placements made at it (the engine runs the events before ``until``)
            while skip.ends and skip.ends[0][0] <= t:
                end, version, name = heapq.heappop(skip.ends)
                if skip.stale(name, version):
                    continue  # a stretch that ended early: the job went back to the engine
                self.finish(name, end)
                queue = place.retry(queue, t)
            skip.drop_stale_ends()
            if not book.slot and not skip.ends and not queue and a >= len(arrivals):
                break
            t_arrival = arrivals[a].arrival_s * 1e3 if a < len(arrivals) else math.inf
            t_local = skip.next_end()
            until = min(t_arrival, sampler.next_ms, t_local)
            if not book.slot:
                if not math.isfinite(min(t_arrival, t_local)):
                    break  # queued jobs that never fit (cannot happen after fits_empty)
                t = max(t, min(t_arrival, t_local))
            else:
                t, reason, j = book.engine.run(t, until)
                if reason == STOP_FINISHED:
                    self.finish(book.name_of[j], t)
                    queue = place.retry(queue, t)
                elif reason == STOP_REPORT:
                    assert self.mirror is not None
                    self.mirror.report(j, t)
                elif reason == STOP_SAMPLES:
                    book.take_samples(j)
                elif reason == STOP_SOLO:
                    skip.from_engine(book.name_of[j], t)
                elif reason == STOP_IDLE:
                    t = until
            if sampler.due(t):
                sampler.sample(t)
                if self.progress is not None:
                    self.progress(t)
        self.sent = sampler.close(t)
        book.close()
        self.end_ms = t
