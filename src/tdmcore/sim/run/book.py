"""What a run knows about its jobs (docs/simulator.md).

The scenario's jobs by name, their noise keys and sampling steps, their results so
far, and for a networked job its :class:`~tdmcore.sim.engine.network.EngineJob`,
the nodes it sends from and the links it shares; which jobs run in the event
engine, in which slot.  Putting a job into the engine and taking it out is here:
what it did in the engine goes to its results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from ..engine.network import EngineJob, FlowEngine

if TYPE_CHECKING:
    from ..cluster import JobResult, SimJob

#: **[decision]** A job keeps a systematic sample of at most about this many
#: iteration times for its percentiles (iteration ``i`` when ``i % step == 0``,
#: ``step = ceil(iterations / KEEP_DURATIONS)``); its mean and end are exact.
#: (Philly jobs run up to 10^8 iterations.)
KEEP_DURATIONS = 10_000


class Book:
    """The jobs of one run and the engine they run in."""

    def __init__(self, jobs: Sequence[SimJob], results: dict[str, JobResult],
                 engine: FlowEngine, n_nodes: int, seed: int, sigma: float) -> None:
        self.jobs = tuple(jobs)
        self.by_name = {j.name: j for j in jobs}
        #: a job's noise key: its index in the scenario
        self.index = {j.name: i for i, j in enumerate(jobs)}
        self.step = {j.name: max(1, -(-j.iterations // KEEP_DURATIONS)) for j in jobs}
        self.results = results
        self.durations: dict[str, list[NDArray[np.float64]]] = {j.name: [] for j in jobs}
        self.engine = engine
        self.seed, self.sigma = seed, sigma
        #: engine slot of each job in the engine, and back
        self.slot: dict[str, int] = {}
        self.name_of: dict[int, str] = {}
        #: networked jobs: how the engine runs them, the nodes they send from, and
        #: the jobs on each link
        self.params: dict[str, EngineJob] = {}
        self.networked: set[str] = set()
        self.pod_node_links: dict[str, NDArray[np.int64]] = {}
        self.link_jobs: dict[int, set[str]] = {}
        #: what the jobs that left the engine (or ran in closed form) sent, per node
        self.sent_by_node = np.zeros(n_nodes)
        #: the controller's view of a job entering and leaving the engine
        self.on_enter: Callable[[str, int], None] | None = None
        self.on_leave: Callable[[str, int], None] | None = None

    def add_networked(self, name: str, params: EngineJob, nodes: list[int]) -> None:
        self.params[name] = params
        self.pod_node_links[name] = np.asarray(list(dict.fromkeys(nodes)), dtype=np.int64)
        self.networked.add(name)
        for link in set(params.links):
            self.link_jobs.setdefault(link, set()).add(name)

    def leave_links(self, name: str) -> set[str]:
        """``name`` is off its links; returns the jobs that shared one with it."""
        touched: set[str] = set()
        for link in set(self.params[name].links):
            self.link_jobs[link].discard(name)
            touched |= self.link_jobs[link]
        return touched

    def alone(self, name: str) -> bool:
        """No other job on any of the job's links."""
        return all(self.link_jobs.get(link, set()) <= {name}
                   for link in self.params[name].links if link >= 0)

    def enter(self, name: str, done: int, start: float, idle: float) -> int:
        """Put a networked job in the engine, its next iteration ``done`` due at
        ``start``; returns its slot."""
        job = self.by_name[name]
        j = self.params[name].add_to(self.engine, key=self.index[name],
                                     iterations=job.iterations, start_ms=start,
                                     idle_ms=idle, done=done, step=self.step[name],
                                     job_period_ms=job.period_ms)
        self.slot[name] = j
        self.name_of[j] = name
        if self.on_enter is not None:
            self.on_enter(name, j)
        return j

    def leave(self, name: str) -> int:
        """Take a job out of the engine: its counts, samples and sent volume go to
        the results; returns its slot."""
        j = self.slot.pop(name)
        del self.name_of[j]
        eng = self.engine
        res = self.results[name]
        done, busy, readjustments, pause = eng.totals(j)
        res.done += done
        res.busy_ms += busy
        res.readjustments += readjustments
        res.pause_ms += pause
        self.durations[name].append(eng.take_samples(j))
        np.add.at(self.sent_by_node, self.pod_node_links[name], eng.pod_sent(j))
        if self.on_leave is not None:
            self.on_leave(name, j)
        eng.remove(j)
        return j

    def take_samples(self, j: int) -> None:
        """Slot ``j``'s buffer of sampled iteration times is full: keep them."""
        self.durations[self.name_of[j]].append(self.engine.take_samples(j))

    def close(self) -> None:
        """Every job's sampled iteration times, in one array each."""
        for name, chunks in self.durations.items():
            if chunks:
                self.results[name].durations_ms = np.concatenate(chunks)
