"""Placing gangs and starting jobs (docs/simulator.md).

Every arriving job's pods are placed all or nothing through
:class:`tdmcore.framework.Scheduler`; one that does not fit waits and is retried
whenever a job leaves (kube-scheduler's back-off queue, or strict head-of-line
FIFO).  A placed job starts on its target phase (the controller's offsets) and
runs in closed form or in the event engine.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from ..._kernels import regulation as R
from ...framework import Scheduler, Status
from ...metronome.controller import Controller
from ...metronome.link import LinkPlan
from ...model import ClusterState, Pod
from ..engine.network import EngineJob
from .book import Book
from .mirror import ControllerMirror
from .skip_ahead import SkipAhead

if TYPE_CHECKING:
    from ..cluster import SimCluster, SimJob


class Placement:
    """The scheduler, the waiting queue's retries, and starting placed jobs."""

    def __init__(self, book: Book, sim: SimCluster, scheduler: Scheduler,
                 state: ClusterState, controller: Controller | None,
                 mirror: ControllerMirror | None, skip: SkipAhead, *, ideal: bool,
                 strict_fifo: bool) -> None:
        self.book, self.sim, self.cluster = book, sim, sim.cluster
        self.scheduler, self.state = scheduler, state
        self.controller, self.mirror, self.skip = controller, mirror, skip
        self.ideal, self.strict_fifo = ideal, strict_fifo
        self.decision_s: list[float] = []
        self.fits: dict[str, bool] = {}
        #: node name -> the latest link plan the controller made for it
        self.link_plans: dict[str, LinkPlan] = {}
        #: ``ideal``: the next private link
        self.private_next = len(self.cluster)
        #: each job's pods (immutable: built once, not at every retry of its gang)
        self.pods: dict[str, list[Pod]] = {}
        #: pod-sized holes in the cluster by pod shape, while the cluster's free
        #: resources stay as they are (:meth:`changed` forgets them)
        self.holes: dict[tuple[float, float, float, bool], float] = {}

    # ------------------------------------------------------------ may it fit?
    def fits_empty(self, job: SimJob) -> bool:
        """Could the job run on the empty cluster?  Feasibility there depends only
        on the pods' requests and rate (resources, Eq. 14, the loop filter), so the
        answer is shared by jobs of the same shape."""
        rate = None if job.pattern is None else job.pattern.bandwidth_gbps
        key = f"{job.workers}|{job.gpu}|{job.cpu}|{job.mem_gib}|{rate}|{job.spread}"
        if key not in self.fits:
            trial = ClusterState(self.cluster)
            decision = self.scheduler.schedule_gang(trial, self.pods_of(job))
            self.fits[key] = decision.status is Status.SUCCESS
        return self.fits[key]

    def pods_of(self, job: SimJob) -> list[Pod]:
        """The job's pods (:meth:`SimJob.pods`), made once."""
        pods = self.pods.get(job.name)
        if pods is None:
            pods = self.pods[job.name] = job.pods()
        return pods

    def changed(self) -> None:
        """The cluster's free resources changed (a gang placed, a job gone)."""
        self.holes.clear()

    def room_for(self, job: SimJob) -> bool:
        """A necessary condition for placing the job's gang under any policy (all of
        them filter on resources): enough pod-sized holes, node by node."""
        shape = (job.gpu, job.cpu, job.mem_gib, job.spread)
        total = self.holes.get(shape)
        if total is None:
            state = self.state
            holes = np.full(len(self.cluster), np.inf)
            for free, need in ((state.free_gpu, job.gpu), (state.free_cpu, job.cpu),
                               (state.free_mem, job.mem_gib)):
                if need > 0:
                    holes = np.minimum(holes, np.floor((free + 1e-9) / need))
            if job.spread:  # one worker per node at most
                holes = np.minimum(holes, 1.0)
            total = self.holes[shape] = float(holes.sum())
        return bool(total >= job.workers)

    def retry(self, queue: list[SimJob], t: float) -> list[SimJob]:
        """Retry the waiting jobs in arrival order after the cluster changed.

        Strict FIFO: the head blocks the rest.  Back-off (default): every waiting
        gang is tried, in arrival order, each against the cluster as the ones
        before it left it.  A gang without room for its pods is not even tried
        (the decision could only fail): exact, and it keeps long queues cheap.
        """
        if not queue:
            return queue
        if self.strict_fifo:
            if not self.room_for(queue[0]):
                return queue
            still: list[SimJob] = []
            for job in queue:
                if still or not self.try_place(job, t):
                    still.append(job)
            return still
        return [job for job in queue
                if not (self.room_for(job) and self.try_place(job, t))]

    # ------------------------------------------------------------ placing
    def try_place(self, job: SimJob, t: float) -> bool:
        """Schedule the job's gang at ``t``; on success the controller takes the
        Reserves and the job starts."""
        ctrl, mirror = self.controller, self.mirror
        if mirror is not None:
            mirror.sync_anchors()  # the controller knows every iteration up to now
        before = dict(ctrl.offsets_ms) if ctrl is not None else {}
        tic = time.perf_counter()
        decision = self.scheduler.schedule_gang(self.state, self.pods_of(job))
        shifts: dict[str, float] = {}
        aside = 0.0
        if decision.status is Status.SUCCESS and ctrl is not None:
            reserves = [d.reserve for d in decision.decisions if d.reserve is not None]
            if reserves:
                aside = self.unsolo_neighbours(job, t)
                shifts = ctrl.on_reserve_gang(reserves)
        self.decision_s.append(time.perf_counter() - tic - aside)
        if decision.status is not Status.SUCCESS:
            return False
        self.changed()
        nodes = [self.state.placed[p.name].node for p in self.pods_of(job)]
        self.start(job, nodes, t)
        if ctrl is not None and mirror is not None:
            if shifts:
                mirror.apply_offsets(t, before, exclude=job.name)
            mirror.update_idle(t)
            mirror.refresh_params()
            for node, plan in ctrl.links.items():  # kept: links empty later
                self.link_plans[self.cluster.nodes[node].name] = plan
        return True

    def unsolo_neighbours(self, job: SimJob, t: float) -> float:
        """Before the controller re-plans for ``job``'s Reserve: the skipped-ahead
        jobs on the links ``job`` will use go back to the engine at ``t``, so their
        iterations up to ``t`` reach the controller under the plans (and thus the
        thresholds and injected idle) they ran under.  Returns the time it took,
        which is the simulator's bookkeeping, not the scheduler's decision.
        """
        if self.ideal or job.pattern is None:
            return 0.0  # private links / no traffic: nobody shares with this job
        tic = time.perf_counter()
        nodes = list(dict.fromkeys(self.state.placed[p.name].node for p in self.pods_of(job)))
        if len(nodes) > 1:
            for link in nodes:
                for other in list(self.book.link_jobs.get(link, ())):
                    if other in self.skip.stretches:
                        self.skip.to_engine(other, t)
        return time.perf_counter() - tic

    def links_of(self, job: SimJob, nodes: list[int]) -> list[int]:
        """The host links the job's transfers cross: one per node it occupies.

        **[decision, docs/simulator.md]** Each node holding
        some of a multi-node job's pods sends ``r_p t_p d_p`` per iteration through
        its link (one ring segment per node, however many of the job's pods it
        holds); a job wholly on one node sends nothing (``[-1]``).  Under
        ``ideal`` each of those transfers gets a private link of rate ``r_p``.
        """
        spread = list(dict.fromkeys(nodes))  # distinct nodes, in pod order
        if len(spread) == 1 or job.pattern is None:
            return [-1]  # all on one node: local, no host-link traffic
        if not self.ideal:
            return spread
        out = []
        for _ in spread:
            out.append(self.private_next)
            self.book.engine.set_capacity(self.private_next, job.pattern.bandwidth_gbps)
            self.private_next += 1
        return out

    def tail_ms(self, job: SimJob, nodes: list[int]) -> float:
        """**[decision]** A job spanning nodes pays ``2 (n - 1)`` times its worst pair
        latency per iteration (ring all-reduce: ``2 (n - 1)`` sequential steps);
        none under ``ideal``."""
        if self.ideal:
            return 0.0
        spread = sorted(set(nodes))
        worst = max(self.sim.latency_ms[a, b] for a in spread for b in spread)
        return 2.0 * (job.workers - 1) * float(worst)

    def start(self, job: SimJob, nodes: list[int], t: float) -> None:
        """The job's pods are on ``nodes``: it starts at ``t``, or on its target phase."""
        book, ctrl, skip = self.book, self.controller, self.skip
        pattern = job.pattern
        links = self.links_of(job, nodes)
        networked = any(link >= 0 for link in links)
        for link in set(links) if networked else ():
            for other in list(book.link_jobs.get(link, ())):
                if other in skip.stretches:  # it shares a link from now on: back to the engine
                    skip.to_engine(other, t)
                elif other in book.slot:  # no longer alone: stays in the engine
                    book.engine.set_leave(book.slot[other], False)
        period = job.period_ms
        params = EngineJob.of(period, pattern.duty_cycle if pattern is not None else 0.0,
                              pattern.bandwidth_gbps if pattern is not None else 0.0, links,
                              self.tail_ms(job, nodes) if networked else 0.0)
        start = t
        res = book.results[job.name]
        res.start_ms = t
        res.nodes = tuple(self.cluster.nodes[n].name for n in nodes)
        if ctrl is not None and self.mirror is not None:
            self.mirror.refresh_anchor(job.name, t)
            target = ctrl.target_phase(job.name)
            if target is not None:
                start = R.next_start_ms(target, t, ctrl.phase_period_ms(job.name))
            ctrl.advance_anchor(job.name, start, first=True)  # phase before 1st report
        if not networked:
            skip.start_local(job, start)
            return
        book.add_networked(job.name, params, nodes)
        idle = self.mirror.idle_map().get(job.name, 0.0) if self.mirror is not None else 0.0
        if skip.enabled and book.alone(job.name) and skip.begin(job.name, 0, start, idle):
            return
        book.enter(job.name, 0, start, idle)
