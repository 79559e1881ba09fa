"""Where each job's iterations should start: the global offsets and their
reference jobs, as one pure value (paper §III-C, "Global offset"; spec §7).

:func:`align` walks the affinity graph once the link plans are made
(:class:`~tdmcore.metronome.control.planner.Planner`); the :class:`Alignment` it
returns never changes.  Its one table, :meth:`Alignment.target_terms`, holds the
terms of every job's target phase; the controller
(:meth:`tdmcore.metronome.controller.Controller.target_phase`) and the
simulator's event engine (:meth:`tdmcore.sim.engine.network.FlowEngine.set_regulation`,
loaded by :mod:`tdmcore.sim.run.mirror`) both add them up with
``regulation.pxd``'s ``target_phase``, the formula's one owner.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from ..._kernels import regulation as R
from ...model import ClusterState, TrafficPattern
from ..affinity import adjacency, bfs_order
from ..link import LinkPlan
from .config import job_pattern

__all__ = ["Alignment", "TargetTerms", "align", "compute_ms", "lattice_ms"]


class TargetTerms(NamedTuple):
    """The terms of a job's target phase besides its reference's anchor, in
    ``regulation.pxd``'s ``target_phase`` order: what runs before the reference's
    comm phase, the two offsets, and what runs before the job's own."""

    reference: str
    compute_ref_ms: float
    offset_job_ms: float
    offset_ref_ms: float
    compute_job_ms: float


def compute_ms(pattern: TrafficPattern | None, idle_ms: float) -> float:
    """What runs before a job's comm phase in an iteration: its compute time plus
    the idle the link plans inject into it (0 without a pattern)."""
    if pattern is None:
        return 0.0
    return pattern.period_ms - pattern.comm_ms + idle_ms


@dataclass(frozen=True)
class Alignment:
    """The offsets of one walk of the affinity graph (never changed once made).

    ``offsets_ms``: job -> global offset; ``roots``: job -> the reference job of its
    affinity component (offset 0); ``parents``: job -> the job it was reached from,
    whose iterations its target follows; ``idle_ms``: job -> idle injected into its
    compute phase, as of these offsets; ``phase_periods_ms``: job -> the spacing of
    the start times that put it on its offset (jobs with a parent);
    ``compute_ms``: job -> what runs before its comm phase (:func:`compute_ms`),
    for the jobs of :attr:`roots`.
    """

    offsets_ms: dict[str, float] = field(default_factory=dict)
    roots: dict[str, str] = field(default_factory=dict)
    parents: dict[str, str] = field(default_factory=dict)
    idle_ms: dict[str, float] = field(default_factory=dict)
    phase_periods_ms: dict[str, float] = field(default_factory=dict)
    compute_ms: dict[str, float] = field(default_factory=dict)

    def carried(self, jobs: Mapping[str, object]) -> Alignment:
        """The same alignment over ``jobs`` (jobs came or went on no contended
        link): every job keeps its offset, a new one gets 0."""
        offsets = {name: self.offsets_ms.get(name, 0.0) for name in jobs}
        return Alignment(offsets, self.roots, self.parents, self.idle_ms,
                         self.phase_periods_ms, self.compute_ms)

    def target_terms(self, job: str) -> TargetTerms | None:
        """The terms of ``job``'s target phase (None without a reference job):
        the one table the controller and the simulator's engine read."""
        ref = self.parents.get(job)
        if ref is None:
            return None
        return TargetTerms(ref, self.compute_ms[ref], self.offsets_ms.get(job, 0.0),
                           self.offsets_ms.get(ref, 0.0), self.compute_ms[job])

    def target_phase(self, job: str, anchors_ms: Mapping[str, float]) -> float | None:
        """``regulation.pxd``'s ``target_phase`` of :meth:`target_terms`, from the
        reference's latest reported iteration start in ``anchors_ms``; None when
        the job has no reference or the reference has not reported yet (then
        nothing needs aligning).

        **[decision]** The reference is the job's BFS parent, not its component's
        reference job: the phase lattice keeps the job's place beside its parent, and
        a grandchild's target taken from the component's reference would move by
        that job's period from one of its iterations to the next, which is no
        multiple of the lattice (a chain of 100, 200 and 400 ms: the 400 ms job's
        comm phase lands on the 200 ms job's every other time).
        """
        terms = self.target_terms(job)
        if terms is None or terms.reference not in anchors_ms:
            return None
        return float(R.target_phase_ms(anchors_ms[terms.reference], *terms[1:]))


def lattice_ms(plan: LinkPlan, job: str, parent: str, parent_period_ms: float,
               parent_idle_ms: float) -> float:
    """How far apart the start times of ``job`` that keep its place beside
    ``parent`` on ``plan``'s link are: ``P m_parent / lcm(m_parent, m_job)``.

    On the circle (period ``T``) the parent's pattern repeats every
    ``T / m_parent`` and the job's every ``T / m_job``, so shifting the job by
    any sum of the two leaves the pair's arrangement as planned; the smallest
    such shift is ``T / lcm``.  In real time the circle runs at the parent's
    pace (targets follow its reported iterations), ``T = m_parent x P`` with
    ``P`` the parent's period plus its injected idle.

    **[decision]** A job's phase period is this, not its own period: beside a
    reference of another period (S2: 91.94 against 98.68 ms; S3: a WideResNet of
    200.52 ms beside a VGG19 of 102.76 ms, 1:2), the target plus a multiple of the
    job's own period is not where the plan put it.
    """
    mult = {p.job_name: int(m) for p, m in zip(plan.pods, plan.base.multiples,
                                                strict=True)}
    m_up, m_job = mult.get(parent, 1), mult.get(job, 1)
    return (parent_period_ms + parent_idle_ms) * m_up / math.lcm(m_up, m_job)


def align(state: ClusterState, links: Mapping[int, LinkPlan], edges: NDArray[np.int64],
          names: Mapping[int, str], idle: dict[str, float]) -> Alignment:
    """Global offsets by BFS over the affinity graph (§III-C "Global offset").

    ``edges``: the contended (job, link) rows of the affinity graph, ``names``:
    job index -> name, ``links``: the plans of the contended links, ``idle``: the
    idle they inject.  Each connected component starts from its highest-priority
    job (ties: the earliest deployed) at offset 0; a job reached over link l gets
    its parent's offset plus the difference of their shifts on l, reduced modulo
    its phase lattice (:func:`lattice_ms`).  Jobs on no contended link keep 0.

    **[decision]** The spec reduces a global shift modulo the job's own period;
    beside a parent of another period that moves the job off the plan (two
    chained VGG19 beside S2's VGG16 of 91.94 ms: 6.74 ms off).  The lattice is
    the smallest shift that keeps the job's place beside its parent, and equals
    the own period when both periods are equal.
    """
    rel: dict[tuple[int, str], float] = {}
    for node, plan in links.items():
        for job, rot in plan.job_rotations.items():
            rel[(node, job)] = rot / plan.bins * plan.base.period_ms
    members = state.job_members
    offsets: dict[str, float] = {job: 0.0 for job in members}
    roots: dict[str, str] = {}
    parents: dict[str, str] = {}
    phase: dict[str, float] = {}
    done: set[int] = set()
    adjacent = adjacency(edges)

    def rank(j: int) -> tuple[int, int]:
        first = state.placed[members[names[j]][0]]
        return (-first.pod.priority, first.order)

    for root in sorted(set(edges[:, 0].tolist()), key=rank):
        if root in done:
            continue
        for job_id, via, parent in bfs_order(adjacent, root):
            done.add(job_id)
            roots[names[job_id]] = names[root]
            if parent < 0:
                continue
            job, up = names[job_id], names[parent]
            parents[job] = up
            up_pattern = job_pattern(state, up)
            phase[job] = lattice_ms(links[via], job, up,
                                    up_pattern.period_ms if up_pattern is not None else 1.0,
                                    idle.get(up, 0.0))
            offsets[job] = (offsets[up] + rel[(via, job)] - rel[(via, up)]) % phase[job]
    compute = {job: compute_ms(job_pattern(state, job), idle.get(job, 0.0)) for job in roots}
    return Alignment(offsets, roots, parents, idle, phase, compute)
