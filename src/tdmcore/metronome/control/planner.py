"""The stop-and-wait controller's link plans (paper §III-B/C, docs/scheduler.md).

:class:`Planner` keeps one plan per contended link: the scheduler's Reserve
output taken as it is, phase three (the ``optimal`` search) when asked for, a
joint plan for the links of a cycle (:func:`tdmcore.metronome.joint.plan_blocks`).
It also answers what the plans say about a job: its rank, whether it is high
priority, the idle they inject.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from ... import _validation as v
from ...framework import ReserveResult
from ...model import ClusterState
from ..affinity import cyclic_blocks
from ..joint import plan_blocks
from ..link import LinkPlan
from ..policies.metronome import link_plan, link_pods
from .config import ControllerConfig, Thresholds, job_pattern

__all__ = ["Planner"]


class Planner:
    """The plans of the contended links and the bookkeeping that tells when the
    offsets they give cannot have moved."""

    def __init__(self, state: ClusterState, config: ControllerConfig) -> None:
        self.state = state
        self.config = config
        self.links: dict[int, LinkPlan] = {}
        self.recalculations = 0
        #: (state version, placed pods, plans, node versions) at the last offset
        #: update: :meth:`placement_keeps_offsets` and :meth:`removal_keeps_offsets`
        #: let the controller carry the offsets over when the only change since is
        #: one that cannot move them
        self.synced: tuple[int, int, dict[int, LinkPlan], NDArray[np.int64]] | None = None

    # ------------------------------------------------------------ planning
    def recalc_mode(self, optimal: bool) -> str:
        """The plan mode of a link: phase three (``optimal``) when
        asked for and enabled, else the scheduler's ``first``;
        without phase three (``metronome-no-phase3``) always ``compact``, the
        paper's ablation (§IV-C: each low-priority comm phase starts where the
        previous one ends, no cushion slots; docs/scheduler.md)."""
        if not self.config.phase_three:
            return "compact"
        return "optimal" if optimal else "first"

    def take_reserve(self, result: ReserveResult) -> None:
        """Plan the link of a Reserve that rotated pods on it (in ``optimal`` mode
        unless it skips phase three)."""
        if result.shifts_ms:
            if not self.state.link_rows[result.node]:
                # A gang's later pods made every job on this link whole on the
                # node (LowComm): the link has no rows left to plan.
                self.links.pop(result.node, None)
                return
            mode = self.recalc_mode(not result.skip_phase_three)
            self.links[result.node] = self.plan(result.node, mode)
        # Without shifts (EarlyReturn, LowComm) the link's rotations stand as they are.

    def plan_link(self, node: int, *, optimal: bool) -> None:
        """(Re)plan ``node``'s link (``optimal``: phase three, when enabled).  A link
        with fewer than two traffic pods has nothing to plan: a ValueError naming
        ``node`` (the unification kernel needs two patterns)."""
        node = v.whole("node", node, 0, len(self.state.cluster) - 1)
        v.boolean("optimal", optimal)
        pods = len(link_pods(self.state, node))
        if pods < 2:
            raise ValueError(f"node: link {node} carries {pods} traffic pod(s); a plan "
                             f"needs at least 2")
        self.links[node] = self.plan(node, self.recalc_mode(optimal))

    def check_restore(self, plans: Mapping[int, LinkPlan | bool]) -> None:
        """A ValueError unless each of ``plans`` (node -> a plan made earlier for
        exactly the link's traffic pods and capacity, or the ``optimal`` flag to plan
        it with, on a link of at least two traffic pods) can be restored."""
        if not isinstance(plans, Mapping):
            raise ValueError(f"plans: expected a mapping node -> LinkPlan or bool, got "
                             f"{type(plans).__name__}")
        for node, plan in plans.items():
            v.whole("node", node, 0, len(self.state.cluster) - 1)
            traffic = tuple(link_pods(self.state, node))
            if isinstance(plan, LinkPlan):
                if tuple(plan.pods) != traffic \
                        or plan.capacity_gbps != self.state.cluster.link_gbps[node]:
                    raise ValueError(f"plans: the plan of node {node} was made for other "
                                     f"pods or another capacity")
            elif not isinstance(plan, bool) or len(traffic) < 2:
                raise ValueError(f"plans: node {node} needs a LinkPlan, or a bool and at "
                                 f"least 2 traffic pods")

    def restore(self, plans: Mapping[int, LinkPlan | bool]) -> None:
        """Take ``plans`` (checked by :meth:`check_restore`): a plan as it is, a flag
        planned by :meth:`plan_link`."""
        for node, plan in plans.items():
            if isinstance(plan, LinkPlan):
                self.links[node] = plan
            else:
                self.plan_link(node, optimal=plan)

    def plan(self, node: int, mode: str) -> LinkPlan:
        """The link's plan in ``mode`` (planned once per link state and mode: the
        plans are shared, :func:`tdmcore.metronome.link.plan_link`'s unchecked path
        keeps them, the Reserve's own among them)."""
        if mode == "optimal":
            self.recalculations += 1
        return link_plan(self.state, node, self.config.scheduler, mode=mode)

    def refresh(self, edges: NDArray[np.int64], names: dict[int, str]) -> None:
        """The plans of exactly the contended links of ``edges`` (the affinity
        graph's (job, link) rows; ``names``: job index -> name): a plan whose link
        is no longer contended or whose pods changed is dropped, a contended link
        without one is planned ``optimal``, and the links of a cycle take one
        common plan (spec §6, revised 2026-11-28), so the offsets agree on every
        path around it."""
        state = self.state
        contended = set(edges[:, 1].tolist())
        for node in list(self.links):
            current = tuple(state.link_rows[node])
            stale = tuple(p.name for p in self.links[node].pods) != current
            if node not in contended or stale:
                del self.links[node]
        for node in contended:
            if node not in self.links:
                self.links[node] = self.plan(node, self.recalc_mode(True))
        blocks = cyclic_blocks(edges)
        if blocks:
            on_links = {p.job_name for b in blocks for n in b.links if n in self.links
                        for p in self.links[n].pods}
            rank = {job: self.rank(job) for job in on_links}
            self.links.update(plan_blocks(self.links, blocks, names, rank))

    # ------------------------------------------------------------ what the plans say
    def rank(self, job: str) -> tuple[int, int]:
        """Priority, then deploy order (earlier ranks higher)."""
        first = self.state.placed[self.state.job_members[job][0]]
        return (first.pod.priority, -first.order)

    def is_high(self, job: str) -> bool:
        """No job sharing a planned link with ``job`` ranks above it (:meth:`rank`).

        **[decision]** Jobs rank by priority, then by deploy order: the paper's
        "unless stated otherwise, jobs deployed earlier have higher priority"
        (§IV-A) and its reference pod, "the one deployed earlier" among equal
        priorities (§III-B).  Without this, jobs of equal priority would all be
        "high" and a collision between them would never be regulated.
        """
        rank = self.rank(job)
        for plan in self.links.values():
            if job in plan.jobs and any(self.rank(j) > rank for j in plan.jobs):
                return False
        return True

    def high_jobs(self) -> set[str]:
        """Every placed job that :meth:`is_high` holds for, in one pass over the
        link plans (``O(pods on planned links)`` instead of per job)."""
        low: set[str] = set()
        for plan in self.links.values():
            ranks = {j: self.rank(j) for j in plan.jobs}
            top = max(ranks.values(), default=(0, 0))
            low.update(j for j, r in ranks.items() if r < top)
        return {job for job in self.state.job_members if job not in low}

    def idle_ms(self, job: str) -> float:
        """Idle injected into ``job``'s compute phase: the most any of its links'
        plans injects (base period unification, docs/traffic-circle.md step 2)."""
        idle = 0.0
        for plan in self.links.values():
            for pod, value in zip(plan.pods, plan.base.idle_ms, strict=True):
                if pod.job == job:
                    idle = max(idle, float(value))
        return idle

    def idle_map(self) -> dict[str, float]:
        """:meth:`idle_ms` of every job that has idle injected, in one pass."""
        out: dict[str, float] = {}
        for plan in self.links.values():
            for pod, value in zip(plan.pods, plan.base.idle_ms, strict=True):
                if pod.job is not None and value > 0:
                    out[pod.job] = max(out.get(pod.job, 0.0), float(value))
        return out

    # ------------------------------------------------------------ carrying offsets over
    def mark_synced(self) -> None:
        """Record the state the offsets were last computed on."""
        state = self.state
        self.synced = (state.version, len(state.placed), dict(self.links),
                       state.node_versions.copy())

    def same_plans(self, links: dict[int, LinkPlan]) -> bool:
        """Whether :attr:`links` holds exactly the plans of ``links``."""
        return len(self.links) == len(links) and all(
            self.links.get(n) is plan for n, plan in links.items())

    def placement_keeps_offsets(self, results: Sequence[ReserveResult],
                                aligned: dict[str, str]) -> bool:
        """Whether the only change since the last offset update is the placement
        of pods that no Reserve rotated and whose jobs have no link rows at all
        (LowComm: wholly on one node) nor were aligned (``aligned``: the jobs of
        the last offset update's affinity components): then the link rows, the
        affinity graph, the plans and every offset are what they were."""
        synced = self.synced
        if synced is None or any(r.shifts_ms for r in results):
            return False
        version, placed, links, _ = synced
        state = self.state
        added = len(state.placed) - placed
        # as many placements as version steps: no removal, no pattern update
        if added <= 0 or state.version != version + added or not self.same_plans(links):
            return False
        new = itertools.islice(reversed(state.placed.values()), added)
        return all(not state.job_links(job) and job not in aligned
                   for job in {entry.pod.job for entry in new})

    def removal_keeps_offsets(self, node: int, job: str, aligned: dict[str, str]) -> bool:
        """Whether the one change since the last offset update is the removal of a
        pod of ``job`` from ``node``, a link without a plan (not contended), with
        ``job`` on no contended link (not in ``aligned``), and ``job`` has no pod
        with traffic left on ``node``: then no edge of the affinity graph, no plan
        and no offset moved.

        The last condition matters: a removal then only *deletes* link rows (the
        job's row on ``node``, or all its rows when it becomes LowComm), and a row
        sum summed in the same order without one term cannot grow, even in floating
        point, so no link becomes contended.  Had another pod of ``job`` on ``node``
        taken over the row, the row would move to the end of the link's rows (a
        sum in another order) and could carry another bandwidth: either can tip a
        link over its capacity."""
        synced = self.synced
        if synced is None:
            return False
        version, placed, links, node_versions = synced
        state = self.state
        if not (state.version == version + 1 and len(state.placed) == placed - 1
                and 0 <= node < node_versions.shape[0]
                and state.node_versions[node] == node_versions[node] + 1
                and node not in self.links and self.same_plans(links)
                and job not in aligned):
            return False
        placed_pods = state.placed
        return not any(placed_pods[m].node == node and placed_pods[m].pod.pattern is not None
                       for m in state.job_members.get(job, ()))

    def thresholds(self, job: str, idle_ms: float | None = None) -> Thresholds | None:
        """The regulation thresholds of ``job``'s pods (None for a LowComm job), with
        :meth:`idle_ms` injected unless ``idle_ms`` is given (:meth:`Thresholds.of
        <tdmcore.metronome.control.config.Thresholds.of>`)."""
        pattern = job_pattern(self.state, job)
        if pattern is None:
            return None
        if idle_ms is not None and v.real_number("idle_ms", idle_ms) < 0:
            raise ValueError(f"idle_ms: must be >= 0, got {idle_ms!r}")
        idle = self.idle_ms(job) if idle_ms is None else float(idle_ms)
        return Thresholds.of(pattern, idle, self.config)
