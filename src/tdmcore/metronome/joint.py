"""Links whose cycles must agree, planned as one (spec §6, revised 2026-11-28).

The paper's loop filter (§III-B) refuses a cycle of the affinity graph because the
global offsets of §III-C could not be assigned consistently around it: each link
of the cycle fixes the relative shift of the jobs on it, and two paths between two
jobs may disagree (its example: a and b contend on e, b and c on f, c and a on g).
A cycle whose links all carry the same set of contending jobs has no such problem
when one rotation vector is perfect on every link of it: the same job offsets
satisfy all of them.  Such links are planned jointly: searched on one, checked on
the others.

All cycles through a set of links lie in one *block* (a biconnected component,
:func:`tdmcore.metronome.affinity.cyclic_blocks`), so a block is the unit: it is
*consistent* when every link of it carries every job of it and one rotation vector
is perfect on every link.  **[decision]** "The same set of contending jobs" is read
over the block, the jobs its cycles run through: a job that hangs off one link of
the block (it has no other edge in the block) is on no cycle of it, so it does not
make that link's set differ, though its row counts for the link's perfection.
*Why:* a gang's pods are placed one at a time, so a job joining two links that
carry the same two jobs passes through a state where one link also carries its
first pod; the cycle through the two links still runs through the same two jobs,
and its offsets agree exactly when they did.  The paper's triangle, whose links
carry three different pairs, stays refused.

The common plan: the lead's own rotations (the link of the smallest capacity,
then node order), carried to the jobs it lacks along the other links, checked on
every link ("search on one, check on the others"); when they fail, the joint
``first`` search (:mod:`tdmcore._kernels.joint_search`) looks for any vector
perfect on all of them; when there is none the block has no common plan, and the
Filter refuses the placement that would form it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from .._kernels.joint_search import joint_first_kernel
from .affinity import Block
from .link import LinkPlan
from .rotation import RotationResult
from .scoring import PERFECT_RTOL, _score_from_excess, excess, link_utilization
from .traffic import rotations_to_shifts

__all__ = ["common_rotations", "plan_blocks", "with_rotations"]


def _unified_alike(plans: Sequence[LinkPlan]) -> dict[str, int] | None:
    """Each job's multiple when every plan unified the jobs alike: compatible, the
    same circle (bins, base period ``T``), and every job the same multiple and
    injected idle wherever it appears; else None (a rotation in bins would then
    not be the same shift in ms on every link, and one offset per job could not
    hold)."""
    lead = plans[0]
    multiple: dict[str, int] = {}
    idle: dict[str, float] = {}
    for plan in plans:
        if not plan.base.compatible or plan.bins != lead.bins or not math.isclose(
                plan.base.period_ms, lead.base.period_ms, rel_tol=1e-9):
            return None
        for pod, m, extra in zip(plan.pods, plan.base.multiples, plan.base.idle_ms,
                                 strict=True):
            job = pod.job_name
            if multiple.setdefault(job, int(m)) != int(m) \
                    or abs(idle.setdefault(job, float(extra)) - float(extra)) > 1e-9:
                return None
    return multiple


def _rows(plan: LinkPlan, jobs: Sequence[str]) -> NDArray[np.float64]:
    """The plan's demand with one row per job of ``jobs`` (0 where it is absent)."""
    out = np.zeros((len(jobs), plan.bins))
    at = {job: i for i, job in enumerate(jobs)}
    for row, job in zip(plan.demand, plan.jobs, strict=True):
        out[at[job]] = row
    return out


def _carried(plans: Sequence[LinkPlan], jobs: Sequence[str]) -> dict[str, int] | None:
    """Rotations for ``jobs`` from the plans' own: the first job at 0, then over the
    plans in order, each plan's rotations carried to its jobs not yet placed,
    relative to its highest-ranked placed job (a breadth-first walk, as the global
    offsets are assigned); None when some job is never reached."""
    bins = plans[0].bins
    rank = {job: i for i, job in enumerate(jobs)}
    rot: dict[str, int] = {jobs[0]: 0}
    progress = True
    while progress and len(rot) < len(jobs):
        progress = False
        for plan in plans:
            own = plan.job_rotations
            anchors = sorted((j for j in own if j in rot), key=rank.__getitem__)
            if not anchors:
                continue
            a = anchors[0]
            for job, r in own.items():
                if job not in rot:
                    rot[job] = (rot[a] + r - own[a]) % bins
                    progress = True
    return rot if len(rot) == len(jobs) else None


def common_rotations(plans: Sequence[LinkPlan], jobs: Sequence[str],
                     cycle_jobs: Collection[str] = ()) -> dict[str, int] | None:
    """One rotation per job of ``jobs`` perfect on every link of ``plans`` (a block,
    the lead first: :func:`lead_first`), or None when there is none, or when some
    link lacks one of ``cycle_jobs`` (the jobs the block's cycles run through: the
    links then carry different sets, the paper's loop).

    ``jobs``: every job on the links, in rank order (priority, then deploy order);
    the first is the reference (rotation 0, Eq. 16), the others rotate within their
    limits ``ceil(N / multiple)`` (Eq. 15).  First the plans' own rotations carried
    along the block ("search on one, check on the others"); when they are not
    perfect on some link, the joint ``first`` search, every link's demand taken
    with one row per job (0 for a job it does not carry).  None also when the links
    did not unify their jobs alike.
    """
    if any(not set(cycle_jobs) <= set(p.jobs) for p in plans):
        return None
    multiple = _unified_alike(plans)
    if multiple is None or set(multiple) != set(jobs):
        return None
    rows = [_rows(p, jobs) for p in plans]
    caps = [p.capacity_gbps for p in plans]
    carried = _carried(plans, jobs)
    if carried is not None:
        vec = np.array([carried[j] for j in jobs], dtype=np.int64)
        if all(excess(d, vec, c) <= PERFECT_RTOL * c for d, c in zip(rows, caps, strict=True)):
            return carried
    bins = plans[0].bins
    limits = np.array([1] + [-(-bins // multiple[j]) for j in jobs[1:]], dtype=np.int64)
    vec = np.zeros(len(jobs), dtype=np.int64)
    found, _ = joint_first_kernel(np.ascontiguousarray(np.stack(rows)),
                                  np.array(caps, dtype=np.float64), limits, PERFECT_RTOL, vec)
    if not found:
        return None
    return {job: int(r) for job, r in zip(jobs, vec.tolist(), strict=True)}


def with_rotations(plan: LinkPlan, rotations: Mapping[str, int]) -> LinkPlan:
    """``plan`` with each job rotated as ``rotations`` says, relative to its reference
    row (which stays at 0: Eq. 16), its score, utilisation and shifts recomputed;
    ``plan`` itself when nothing moves.  Ψ is not recomputed (None)."""
    rot = np.array([rotations[j] for j in plan.jobs], dtype=np.int64)
    rot = (rot - rot[0]) % plan.bins
    if np.array_equal(rot, plan.result.rotations):
        return plan
    cap = plan.capacity_gbps
    exc = float(excess(plan.demand, rot, cap))
    result = RotationResult(rot, _score_from_excess(exc, cap, plan.bins),
                            exc <= PERFECT_RTOL * cap, None, plan.result.evaluated)
    job_shift = dict(zip(plan.jobs, rotations_to_shifts(rot, plan.base.period_ms, plan.bins),
                         strict=True))
    return replace(plan, result=result,
                   shifts_ms={p.name: float(job_shift[p.job_name]) for p in plan.pods},
                   utilization=link_utilization(plan.demand, rot, cap))


def lead_first(plans: Mapping[int, LinkPlan], links: Sequence[int]) -> list[int]:
    """``links`` with the lead first: by capacity, then node order.  **[decision]**
    With the same rows on every link, rotations perfect on the tightest link are
    perfect on the others, so the lead's plan is usually the common one."""
    return sorted(links, key=lambda n: (plans[n].capacity_gbps, n))


def plan_blocks(plans: Mapping[int, LinkPlan], blocks: Sequence[Block],
                names: Mapping[int, str], rank: Mapping[str, tuple[int, int]]
                ) -> dict[int, LinkPlan]:
    """The plans that change when every block is planned as one.

    ``blocks``: the affinity graph's blocks with a cycle (job ids, links);
    ``names``: job id -> job; ``rank``: job -> (priority, -deploy order), the larger
    the higher, for every job on the blocks' links.  A block with a common plan
    (:func:`common_rotations`) gets it on every link; a block without one keeps its
    links' own plans (the Filter keeps such blocks from forming; a later change of
    the jobs' patterns, or a gang completed on one node, could still leave one, and
    the offsets then follow the links the BFS walks).
    """
    out: dict[int, LinkPlan] = {}
    for block in blocks:
        links = lead_first(plans, [n for n in block.links if n in plans])
        if len(links) < 2:
            continue
        jobs = sorted({j for n in links for j in plans[n].jobs}, key=rank.__getitem__,
                      reverse=True)
        rotations = common_rotations([plans[n] for n in links], jobs,
                                     [names[j] for j in block.jobs])
        if rotations is None:
            continue
        for n in links:
            joint = with_rotations(plans[n], rotations)
            if joint is not plans[n]:
                out[n] = joint
    return out
