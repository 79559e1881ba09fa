"""The scheduling front end the extender and the standalone scheduler share.

Both call the same :class:`tdmcore.framework.Scheduler` over the same policy
objects the simulator uses (``tdmcore.metronome.policies.make_policy``) on the
:class:`~tdmcore.model.ClusterState` that :class:`~k8s_bridge.cache.ClusterModel`
builds from the API: nothing here decides anything a policy does not.

* :meth:`Pipeline.filter` / :meth:`Pipeline.prioritize` run PreFilter -> Filter ->
  Score -> NormalizeScore once per (pod, cluster version) and answer for the
  nodes kube-scheduler asks about.
* :meth:`Pipeline.bind` re-checks the chosen node, binds the pod (pods/binding),
  runs Reserve, and records the link in the node's NodeBandwidth status, where
  the controller picks the shifts up (``status.recalculate``: the offline
  recalculation is wanted, ``SkipPhaseThree = 0``, Alg. 1 line 37).
* :meth:`Pipeline.schedule_gang` places a PodGroup all or nothing (Eqs. 11-12).

**[decision]** Extender scores (spec/kubernetes.md): the extender answers 0..10
(MaxExtenderPriority); a node's score is ``round(s / 10)`` (halves up) of the
policy's normalized 0..100 score ``s``.  When the policy lets only some nodes win
(Metronome's NormalizeScore keeps the nodes at the maximum raw score), the others
get 0 and the finalists at least 1, so no excluded node can outrank a finalist
on our score.  Infeasible nodes get 0 (they were filtered anyway).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tdmcore.framework import (
    UNRESOLVABLE,
    CycleState,
    Decision,
    GangDecision,
    Reason,
    ReserveResult,
    Scheduler,
    Status,
    pick_node,
)
from tdmcore.metronome.policies import make_policy
from tdmcore.model import ClusterState, Pod

from . import api
from .api import BadRequest
from .cache import ClusterModel, pod_is_placed
from .convert import PodConfigError, gang_key, min_member, pod_identity
from .gangs import Claim, GangBook
from .kube import ApiError, Kube, NotFound
from .once import Once
from .records import node_status, write_status

__all__ = ["BindError", "FilterOutcome", "Pipeline", "PodRefused", "extender_score"]

log = logging.getLogger(__name__)

#: The bridge's words for the framework's reasons (Kubernetes' resource names).
_WORDS: dict[int, str] = {Reason.GPU: f"Insufficient {api.GPU_RESOURCE}"}
#: Rules about the pod's job, whose rejections say where its pods are.
_ABOUT_THE_JOB = Reason.DEPENDENCY_LOOP | Reason.ANTI_AFFINITY


class BindError(RuntimeError):
    """Binding was refused or failed; nothing was recorded.  ``reason`` is the
    refusal's kind (a metrics label: ``tdmcore_extender_bind_refusals_total``)."""

    def __init__(self, message: str, reason: str = "other") -> None:
        super().__init__(message)
        self.reason = reason


class PodRefused(Exception):
    """A well-formed pod tdmcore cannot read (:class:`~k8s_bridge.convert.PodConfigError`:
    its priority label, its PodBandwidth): unschedulable by tdmcore until it changes.
    Filter answers it with every node unresolvable and this reason, so that it reaches
    the pod's ``FailedScheduling`` event; bind refuses it with the reason."""


@dataclass(frozen=True)
class FilterOutcome:
    nodes: list[str]
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    error: str = ""


def _key_of(pod_json: Mapping[str, Any]) -> str:
    meta = pod_json.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def extender_score(score: float, finalist: bool | None) -> int:
    """0..100 -> 0..10, see the module docstring (``finalist=None``: no restriction)."""
    value = int(np.floor(float(score) / 10.0 + 0.5))
    value = min(max(value, 0), 10)
    if finalist is None:
        return value
    return max(value, 1) if finalist else 0


class Pipeline:
    """Filter / prioritize / bind / gangs over one policy and one cluster model."""

    def __init__(self, model: ClusterModel, policy: str = "metronome",
                 kube: Kube | None = None, *, scheduler_name: str | None = None,
                 gang_wait_s: float = 0.0) -> None:
        self.model = model
        #: extender mode: how long the nodes claimed for a gang (and, with
        #: :attr:`filter_decides`, for a pod) are held for members not bound yet
        #: (0: no gangs; members are placed one by one)
        self.gang_wait_s = gang_wait_s
        #: claims, back-offs and PodGroup statuses of the gangs (:mod:`k8s_bridge.gangs`)
        self.gangs = GangBook()
        #: gang key -> pods Filter held back because the gang was incomplete (the
        #: extender's requeuer touches them once it is complete)
        self.held_back: dict[str, set[str]] = {}
        # the model's schedulable flags (the list object) and the same as an array
        self._schedulable: tuple[list[bool] | None, NDArray[np.bool_]] = (
            None, np.zeros(0, dtype=bool))
        # nodes whose status claims confirmed on the watch have to write
        self._pending_statuses: list[str] = []
        #: called (with the gang key, no lock held) when a gang is admitted: the
        #: requeuer then has kube-scheduler try its other members now
        self.on_gang_admitted: Callable[[str], None] | None = None
        #: called with ("bound" or "released", seconds since the gang was admitted:
        #: its nodes claimed at Filter) when an admitted gang settles (the extender's
        #: metric)
        self.on_gang_settled: Callable[[str, float], None] | None = None
        #: write NodeBandwidth status from a background thread, after bind answered
        self.async_status = False
        #: the status writer starts a pass once no bind has touched a node for this
        #: long, or once the oldest pending node has waited ``status_max_delay_s``
        self.status_quiet_s = 0.1
        self.status_max_delay_s = 1.0
        self.status_passes = 0
        self._status_flush = threading.Event()
        self._status_lock = threading.Lock()
        self._status_wake = threading.Event()
        self._dirty_nodes: set[str] = set()  # node names
        self._last_touch = 0.0  # when a bind last queued a node (monotonic s)
        self._status_busy = False
        self._status_thread: threading.Thread | None = None
        self._status_closed = False
        #: extender mode: Filter keeps only the policy's pick among the feasible nodes,
        #: so kube-scheduler binds it without a scoring phase (no prioritize call, no
        #: in-tree scores); False: Filter keeps every feasible node and prioritize
        #: ranks them (kube-scheduler adds its in-tree plugins' scores)
        self.filter_decides = False
        #: bind only pods whose ``spec.schedulerName`` is this (None: any)
        self.scheduler_name = scheduler_name
        #: extender mode: ``(the cached pod, node)`` -> None when this bind may go
        #: ahead, else why not (the extender's record of what its Filter passed, and
        #: the pod's own node constraints); called with the locks held
        self.bind_check: Callable[[Mapping[str, Any], str], str | None] | None = None
        self.policy_name = policy
        self.policy = make_policy(policy)
        self.scheduler = Scheduler(self.policy)
        self.kube = kube
        self.lock = threading.RLock()
        # decisions on the current state, by (pod, uid): kube-scheduler's calls for one pod
        # (filter, prioritize, bind) interleave with the next pod's, so one entry is
        # not enough to answer bind from its prioritize when the state has not moved
        self._decided: dict[tuple[Pod, Any], tuple[Decision, CycleState]] = {}
        self._decided_on: tuple[ClusterState | None, int] = (None, -1)
        #: full decisions computed (the others were answered from the above)
        self.decisions = 0
        # (cluster, the nodes filter kept, their indices): prioritize's usual question
        self._last_index: tuple[Any, list[str], list[int | None]] | None = None
        self._order_us = 0
        # node name -> (the cluster, its latest Reserve results): what the status write
        # uses; by name, since a Node added or deleted meanwhile renumbers the indices
        self._reserved: dict[str, tuple[Any, list[ReserveResult]]] = {}
        #: pods reserved (assumed) whose binding the API has not accepted yet: gang
        #: members waiting at bind, bindings in flight.  Status writes leave them out,
        #: so that a released reservation never reaches NodeBandwidth status.
        self._unconfirmed: set[str] = set()
        # the PodRefused reasons logged, by pod UID: one WARNING per pod and reason
        self._refused = Once()

    def warm_up(self) -> None:
        """Compile the policy's kernels on a two-node cluster of our own (Numba's
        cache makes this fast after the first run), so that the first real request
        does not pay for it."""
        from tdmcore.model import Cluster, Node, TrafficPattern

        state = ClusterState(Cluster([Node("a", 8, 32, 8, 25.0), Node("b", 8, 32, 8, 25.0)]))
        for k in range(3):
            pod = Pod(f"w{k}", f"w{k}", cpu=1, gpu=1, priority=1 if k == 0 else 0,
                      pattern=TrafficPattern(100.0 * (1 + k % 2), 0.3, 10.0))
            self.scheduler.schedule(state, pod)

    # ------------------------------------------------------------ decisions
    def _pod(self, pod_json: Any) -> Pod:
        if not isinstance(pod_json, Mapping):
            raise BadRequest(f"Pod: expected a v1 Pod object, got {type(pod_json).__name__}")
        try:
            return self.model.domain_pod(pod_json)
        except LookupError as exc:  # no Node cached yet: not the caller's fault
            raise BindError(str(exc)) from exc
        except PodConfigError as exc:
            raise PodRefused(str(exc)) from exc
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc

    def _warn_refused(self, pod_json: Mapping[str, Any], reason: str) -> None:
        """One WARNING per pod and reason (kube-scheduler retries the pod often)."""
        key = _key_of(pod_json)
        if self._refused.first(pod_identity(pod_json), reason):
            log.warning("pod %s cannot be scheduled by tdmcore until it changes: %s", key,
                        reason)

    def _decide(self, pod_json: Mapping[str, Any]) -> tuple[Pod, ClusterState, Decision,
                                                             CycleState]:
        pod = self._pod(pod_json)
        try:
            state = self.model.state()
        except LookupError as exc:
            raise BindError(str(exc)) from exc
        meta = pod_json.get("metadata") or {}
        key = (pod, meta.get("uid"))
        # the state object itself, not its id(): a rebuilt state may reuse the address
        on, version = self._decided_on
        if on is not state or version != state.version or len(self._decided) >= 64:
            self._decided.clear()
            self._decided_on = (state, state.version)
        hit = self._decided.get(key)
        if hit is not None:
            return pod, state, hit[0], hit[1]
        decision, cycle = self.scheduler.decide(state, pod)
        self.decisions += 1
        self._decided[key] = (decision, cycle)
        return pod, state, decision, cycle

    def _index(self, state: ClusterState, names: Sequence[str]
               ) -> tuple[list[int | None], dict[str, str]]:
        last = self._last_index
        if last is not None and last[0] is state.cluster and last[1] == names:
            out = last[2]  # prioritize asks about the nodes filter just kept
        else:
            out = list(map(state.cluster.node_index.get, names))
        if None not in out:
            return out, {}
        return out, {name: "node unknown to tdmcore (not in its Node cache)"
                     for name, i in zip(names, out, strict=True) if i is None}

    def filter(self, pod_json: Mapping[str, Any], node_names: Sequence[str]) -> FilterOutcome:
        """The nodes among ``node_names`` the policy's Filter keeps.

        In extender mode with gangs (:attr:`gang_wait_s` > 0) a PodGroup member is
        placed with its whole gang and keeps the node claimed for it
        (:mod:`k8s_bridge.gangs`); with :attr:`filter_decides` a pod keeps the
        policy's pick only, claimed for it until its bind.
        """
        if self.gang_wait_s > 0 and self.kube is not None \
                and (self.filter_decides or gang_key(pod_json) is not None):
            self._read_uncached(pod_json)
        outcome, admitted = self._filter(pod_json, node_names)
        if self._pending_statuses:
            self._flush_confirmed()
        if admitted is not None and self.on_gang_admitted is not None:
            self.on_gang_admitted(admitted)
        return outcome

    def _read_uncached(self, pod_json: Mapping[str, Any]) -> None:
        """Read a pod the Pod watch has not delivered yet from the API, as bind does:
        only a cached pod is claimed (:meth:`_cached`), and kube-scheduler's informer
        can hand it a new pod, whose Filter then reaches us, before our own watch
        delivers it.  Unclaimed, such a pod was placed with nothing assumed (another
        pod's Filter could take its GPUs) and, bound by kube-scheduler's binder,
        recorded by nothing.  A failed read leaves the pod unclaimed, as before."""
        meta = pod_json.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            return  # _pod refuses it with its reason
        namespace = str(meta.get("namespace") or "default")
        if f"{namespace}/{name}" in self.model.objects["Pod"]:
            return
        log.debug("Filter of %s/%s before the Pod watch delivered it: read from the API",
                  namespace, name)
        try:
            self._fetch_pod(namespace, name)
        except BindError as exc:
            log.debug("Filter of %s/%s: %s", namespace, name, exc)

    def _filter(self, pod_json: Mapping[str, Any], node_names: Sequence[str]
                ) -> tuple[FilterOutcome, str | None]:
        """:meth:`filter`'s outcome, and the key of the gang it admitted (if any)."""
        # The model's lock too: the state, its cluster and the schedulable flags must
        # be one version while we index into them.
        with self.lock, self.model.lock:
            now = time.monotonic()
            self._expire(now)
            key = _key_of(pod_json)
            claim = self.gangs.claims.get(key)
            if claim is not None:
                kept = self._filter_claimed(pod_json, key, claim, node_names)
                if kept is not None:
                    return kept, None
            try:
                pod, state, decision, cycle = self._decide(pod_json)
            except PodRefused as exc:  # no node can help: the reason goes to the event
                self._warn_refused(pod_json, str(exc))
                reason = f"tdmcore/{self.policy_name}: {exc}"
                return FilterOutcome([], {}, {name: reason for name in node_names}), None
            if decision.status is Status.ERROR:  # the pod disagrees with its job's pods
                # (priority, workload, spread, gang size): no node can help either
                self._warn_refused(pod_json, decision.message)
                reason = f"tdmcore/{self.policy_name}: {decision.message}"
                return FilterOutcome([], {}, {name: reason for name in node_names}), None
            if self._refused:  # only then: Filter is kube-scheduler's hot path
                self._refused.forget(pod_identity(pod_json))  # readable (again)
            idx, unknown = self._index(state, node_names)
            gkey = gang_key(pod_json)
            waiting = self.gang_shortfall(pod_json)
            if waiting:  # coscheduling's PreFilter: the gang is not all there yet
                if gkey is not None:
                    self.held_back.setdefault(gkey, set()).add(key)
                    self._gang_status(gkey, waiting)
                known = [n for n, i in zip(node_names, idx, strict=True) if i is not None]
                why = self._gang_why(waiting)
                return FilterOutcome([], {**unknown, **{n: why for n in known}}), None
            if gkey is not None and self.gang_wait_s > 0 \
                    and self._min_member(gkey) > len(self._members(gkey)):
                return self._admit(gkey, pod_json, state, node_names, idx, unknown, now)
            if self.filter_decides and cycle.scores is not None and cycle.feasible is not None:
                ok = self._asked(idx) & cycle.feasible
                if ok.any():  # the pick, claimed for the pod until bound (no reasons: a
                    # node is kept, so kube-scheduler reads none)
                    node = self._pick_among(cycle, ok)
                    cached = self._cached(key, pod_json)
                    if self.gang_wait_s > 0 and cached is not None:
                        self._claim(key, cached, None, state, cycle, node, now)
                    return FilterOutcome([state.cluster.nodes[node].name]), None
            feasible = cycle.feasible.tolist() if cycle.feasible is not None else None
            failed: dict[str, str] = dict(unknown)
            unresolvable: dict[str, str] = {}
            keep = []
            schedulable = self.model.schedulable
            rejected: list[tuple[str, int]] = []
            for name, i in zip(node_names, idx, strict=True):
                if i is None:
                    continue
                if not schedulable[i]:
                    unresolvable[name] = "node is cordoned or not Ready"
                elif feasible is not None and feasible[i]:
                    keep.append(name)
                else:
                    rejected.append((name, i))
            if rejected:
                for (name, _), (reason, final) in zip(rejected, self._reasons(
                        state, pod, [i for _, i in rejected], decision, cycle), strict=True):
                    (unresolvable if final else failed)[name] = reason
            index = state.cluster.node_index
            at = [index[n] for n in keep]
            indices: list[int | None] = list(at)
            self._last_index = (state.cluster, keep, indices)
            return FilterOutcome(keep, failed, unresolvable), None

    @staticmethod
    def _pick_among(cycle: CycleState, at: Sequence[int] | NDArray[np.bool_]) -> int:
        """The policy's pick among the feasible nodes ``at`` kube-scheduler asked
        about (indices, or a mask): :func:`~tdmcore.framework.pick_node` as
        :meth:`Scheduler.decide <tdmcore.framework.Scheduler.decide>` runs it, over
        those nodes' finalists (over all of them when none is a finalist), so the
        policy's own decision whenever that node was asked about."""
        assert cycle.scores is not None
        if isinstance(at, np.ndarray) and at.dtype == np.bool_:
            asked = at.copy()
        else:
            asked = np.zeros(len(cycle.scores), dtype=bool)
            asked[np.asarray(at, dtype=np.int64)] = True
        if cycle.finalists is not None and (asked & cycle.finalists).any():
            asked &= cycle.finalists
        return pick_node(cycle.scores, asked)

    def _asked(self, idx: Sequence[int | None]) -> NDArray[np.bool_]:
        """The nodes kube-scheduler asked about (``idx``: their indices, None for a
        node tdmcore does not know) that are Ready and not cordoned, as a mask."""
        schedulable = self.model.schedulable
        if self._schedulable[0] is not schedulable:
            self._schedulable = (schedulable, np.asarray(schedulable, dtype=bool))
        asked = np.zeros(len(schedulable), dtype=bool)
        at = [i for i in idx if i is not None]
        asked[at] = True
        return asked & self._schedulable[1]

    # -------------------------------------------------------------- claims
    def _cached(self, key: str, pod_json: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The cached pod a request names (the same object: its UID; of this
        scheduler), or None: only pods the API has are ever claimed or assumed."""
        cached = self.model.objects["Pod"].get(key)
        if cached is None:
            return None
        uid = (pod_json.get("metadata") or {}).get("uid")
        spec = cached.get("spec") or {}
        if (uid and (cached.get("metadata") or {}).get("uid") not in (None, uid)) \
                or spec.get("nodeName") \
                or (self.scheduler_name and spec.get("schedulerName") != self.scheduler_name):
            return None
        return cached

    def _claim(self, key: str, pod_json: Mapping[str, Any], gkey: str | None,
               state: ClusterState, cycle: CycleState, node: int, now: float) -> None:
        """Reserve the pod on ``node`` (Reserve, assume) until its bind (the locks are
        held)."""
        self._hold(key, pod_json, gkey, state, node, self.scheduler.reserve(state, cycle, node),
                   now)

    def _hold(self, key: str, pod_json: Mapping[str, Any], gkey: str | None,
              state: ClusterState, node: int, result: ReserveResult, now: float) -> None:
        """The pod is reserved on ``node`` in ``state``: assume it there and claim the
        node for it until :attr:`gang_wait_s` from now (the locks are held)."""
        self._decided.clear()
        name = state.cluster.nodes[node].name
        self._mark_bound(key, pod_json, name)
        self._unconfirmed.add(key)
        statuses = self._statuses(state, {node: [result]})
        self.gangs.claims[key] = Claim(gkey, name, (pod_json.get("metadata") or {}).get("uid"),
                                       now + self.gang_wait_s, statuses, result)

    def _filter_claimed(self, pod_json: Mapping[str, Any], key: str, claim: Claim,
                        node_names: Sequence[str]) -> FilterOutcome | None:
        """Filter for a pod with a claim: its claimed node, if kube-scheduler offered
        it; else (or for another pod of that name) the claim is released and the pod
        is placed afresh (None)."""
        uid = (pod_json.get("metadata") or {}).get("uid")
        if (not claim.uid or not uid or claim.uid == uid) and claim.node in node_names:
            return FilterOutcome([claim.node])
        # not offered (kube-scheduler's own filters), or a new pod of that name: a
        # gang member is placed again on what its gang's other claims leave
        self._release([key], "")
        return None

    def _admit(self, gkey: str, pod_json: Mapping[str, Any], state: ClusterState,
               node_names: Sequence[str], idx: Sequence[int | None], unknown: dict[str, str],
               now: float) -> tuple[FilterOutcome, str | None]:
        """Place the gang of ``pod_json`` whole and claim its nodes, or refuse it (the
        locks are held; see :mod:`k8s_bridge.gangs`): the pod's outcome, and the gang's
        key if it was admitted."""
        known = [n for n, i in zip(node_names, idx, strict=True) if i is not None]
        blocked = self.gangs.blocked(gkey, self.model.releases, now)
        if blocked is not None:
            return FilterOutcome([], {**unknown, **{n: blocked for n in known}}), None
        allowed = np.zeros(len(state.cluster.nodes), dtype=bool)
        schedulable = self.model.schedulable
        for i in idx:
            if i is not None and schedulable[i]:
                allowed[i] = True
        key = _key_of(pod_json)
        me = self._cached(key, pod_json)
        if me is None or gang_key(me) != gkey:  # the cache (the API's truth) must agree
            why = f"tdmcore: pod {key} is not in tdmcore's cache yet"
            return FilterOutcome([], {**unknown, **{n: why for n in known}}), None
        members = [me] + [p for k, p in sorted(self._pending_members(gkey).items())
                          if k != key]
        need = self._min_member(gkey) - len(self._members(gkey))
        trial = state.copy()
        plan: list[tuple[Mapping[str, Any], int, ReserveResult]] = []
        why = ""
        short = ""  # the member that found no node (named in the log, not the reason:
        # the reason stays the same from one try to the next, so its events aggregate)
        for member in members:
            short = _key_of(member)
            try:
                decision, cycle = self.scheduler.decide(trial, self._pod(member))
            except (PodRefused, BadRequest, BindError) as exc:
                why = str(exc)
                break
            if decision.status is not Status.SUCCESS or cycle.feasible is None:
                why = decision.message
                break
            ok = cycle.feasible & allowed
            if not ok.any():
                why = "no node kube-scheduler offered has room for the next one"
                break
            node = self._pick_among(cycle, ok)
            plan.append((member, node, self.scheduler.reserve(trial, cycle, node)))
        if len(plan) < need:
            reason = self._gang_why(f"gang {gkey} does not fit: {len(plan)} of the {need} "
                                    f"members it needs have a node at once ({why})")
            self._release(self.gangs.gang_claims(gkey), "")
            backoff = self.gangs.refuse(gkey, reason, self.model.releases, now)
            self._gang_status(gkey, reason)
            log.info("%s; %s found none; retried in %g s (or once room is made)", reason,
                     short, backoff.until - now)
            return FilterOutcome([], {**unknown, **{n: reason for n in known}}), None
        # the whole gang fits: the trial becomes the state, each member holds its node
        # (its claim), as schedule_gang commits a gang
        state.restore_from(trial)
        for member, node, result in plan:
            self._hold(_key_of(member), member, gkey, state, node, result, now)
        self.gangs.admit(gkey, key, now)
        self._gang_status(gkey)
        if len(plan) > 1:
            log.info("gang %s admitted: %d members claimed their nodes", gkey, len(plan))
        first = state.cluster.nodes[plan[0][1]].name
        return FilterOutcome([first]), gkey

    def _gang_why(self, detail: str) -> str:
        """A gang's rejection (:attr:`Reason.GANG <tdmcore.framework.Reason.GANG>`)
        in the framework's words, then what about the gang."""
        return f"tdmcore/{self.policy_name}: {self.scheduler.describe(Reason.GANG)}: {detail}"

    def gang_shortfall(self, pod_json: Mapping[str, Any]) -> str:
        """Why a PodGroup member must wait ('' if it need not).

        kube-scheduler places pods one by one, so the extender cannot place a gang
        all or nothing; it does what coscheduling's PreFilter does: no member is
        placed while the group has fewer than ``minMember`` pods (pending or bound)
        or its PodGroup does not exist.  The standalone scheduler places gangs
        whole (:meth:`schedule_gang`).
        """
        meta = pod_json.get("metadata") or {}
        group = (meta.get("labels") or {}).get(api.LABEL_POD_GROUP)
        if not group:
            return ""
        namespace = meta.get("namespace") or "default"
        with self.model.lock:
            pg = self.model.objects["PodGroup"].get(f"{namespace}/{group}")
            if pg is None:
                return f"PodGroup {namespace}/{group} does not exist (yet)"
            need = min_member(pg)
            members = 0
            for pod in self.model.objects["Pod"].values():
                pmeta = pod.get("metadata") or {}
                if (pmeta.get("namespace") or "default") == namespace \
                        and (pmeta.get("labels") or {}).get(api.LABEL_POD_GROUP) == group \
                        and (pod.get("status") or {}).get("phase") not in ("Succeeded",
                                                                          "Failed"):
                    members += 1
        if members < need:
            return (f"PodGroup {namespace}/{group} has {members} of minMember {need} "
                    f"pods")
        return ""

    def _reasons(self, state: ClusterState, pod: Pod, nodes: Sequence[int],
                 decision: Decision, cycle: CycleState) -> list[tuple[str, bool]]:
        """The reason per node of ``nodes`` its Filter gave
        (:class:`~tdmcore.framework.Reason`, in the framework's words but for the
        GPU's resource name); ``True`` when preemption cannot help (link rate,
        :data:`~tdmcore.framework.UNRESOLVABLE`).  A rule about the pod's job (a
        dependency loop, an anti-affinity) says where the job's pods are placed."""
        prefix = f"tdmcore/{self.policy_name}: "
        if cycle.codes is None:  # PreFilter refused the pod: its message, everywhere
            return [(prefix + decision.message, False)] * len(nodes)
        codes = cycle.codes[np.asarray(nodes, dtype=np.int64)].tolist()
        hint = ""
        if any(code & _ABOUT_THE_JOB for code in codes):
            placed = state.job_pods(pod.job)
            if placed:
                on = ", ".join(sorted({state.cluster.nodes[p.node].name for p in placed}))
                hint = (f" (its job {pod.job} has {len(placed)} pod(s) placed, on {on}: a "
                        f"job is placed whole only as a PodGroup)")
        out = []
        for code in codes:
            text = prefix + self.scheduler.describe(code, _WORDS)
            out.append((text + hint if code & _ABOUT_THE_JOB else text,
                        not code & ~UNRESOLVABLE))
        return out

    def prioritize(self, pod_json: Mapping[str, Any], node_names: Sequence[str]
                   ) -> list[tuple[str, int]]:
        """``(node, 0..10)`` for each of ``node_names`` (see :func:`extender_score`)."""
        with self.lock, self.model.lock:
            try:
                _, state, decision, cycle = self._decide(pod_json)
            except PodRefused:  # Filter has rejected it everywhere, with the reason
                return [(name, 0) for name in node_names]
            idx, _ = self._index(state, node_names)
            if decision.status is not Status.SUCCESS or cycle.scores is None \
                    or cycle.feasible is None:
                return [(name, 0) for name in node_names]
            # extender_score for every node at once (the same rounding and finalist rule)
            value = np.clip(np.floor(np.asarray(cycle.scores, dtype=np.float64) / 10.0 + 0.5),
                            0, 10).astype(np.int64)
            if cycle.finalists is not None:
                value = np.where(cycle.finalists, np.maximum(value, 1), 0)
            value = np.where(cycle.feasible, value, 0)
            table = value.tolist()
            return [(name, 0 if i is None else table[i])
                    for name, i in zip(node_names, idx, strict=True)]

    # ----------------------------------------------------------------- bind
    def bind(self, namespace: str, name: str, uid: str | None, node: str) -> ReserveResult:
        """Bind ``namespace/name`` to ``node``, Reserve it and record the link.

        As kube-scheduler does: the pod is *assumed* (Reserve runs and the cache
        marks it bound) under the locks, the binding is POSTed without them, and a
        failed binding is *forgotten* (the model re-reads the API).  A pod Filter
        claimed a node for (a gang member, or any pod when Filter decides) was
        reserved and assumed there at Filter: its bind binds it on that node only.
        Raises :class:`BadRequest` for an unknown pod, UID or node or a pod of another
        scheduler (nothing changes) and :class:`BindError` when the node no longer
        passes Filter (or is not the one claimed for the pod), the pod is a member of
        a gang that holds no claim for it, the API refuses the binding (nothing is
        recorded), or a pod not cached yet cannot be read from the API.
        """
        key = f"{namespace}/{name}"
        if key not in self.model.objects["Pod"] and self.kube is not None:
            self._fetch_pod(namespace, name)  # the informer may lag kube-scheduler's
        with self.lock, self.model.lock:
            self._expire(time.monotonic())
            pod_json = self.model.objects["Pod"].get(key)
            if pod_json is None:
                raise BadRequest(f"PodName: pod {key!r} does not exist")
            meta = pod_json.get("metadata") or {}
            if uid and meta.get("uid") not in (None, uid):
                raise BadRequest(f"PodUID: {uid!r} does not match pod {key!r}")
            spec = pod_json.get("spec") or {}
            if self.scheduler_name and spec.get("schedulerName") != self.scheduler_name:
                raise BadRequest(f"PodName: pod {key!r} is not for scheduler "
                                 f"{self.scheduler_name!r}")
            refusal = self.bind_check(pod_json, node) if self.bind_check is not None else None
            claim = self.gangs.claims.get(key)
            if claim is not None:
                if node != claim.node:
                    if node not in self.model.objects["Node"]:
                        raise BadRequest(f"Node: {node!r} is unknown to tdmcore")
                    raise BindError(f"node {node!r} is not the node tdmcore's Filter placed "
                                    f"{key} on ({claim.node})", "not_claimed")
                if refusal is not None:
                    raise BindError(f"refused: {refusal}", "not_filtered")
                del self.gangs.claims[key]
                statuses, gkey, result = claim.statuses, claim.gang, claim.result
            else:
                if spec.get("nodeName"):
                    raise BadRequest(f"PodName: pod {key!r} is already bound")
                try:
                    pod, state, decision, cycle = self._decide(pod_json)
                except PodRefused as exc:
                    raise BindError(str(exc), "pod_refused") from exc
                index = state.cluster.node_index.get(node)
                if index is None:
                    raise BadRequest(f"Node: {node!r} is unknown to tdmcore")
                if refusal is not None:
                    raise BindError(f"refused: {refusal}", "not_filtered")
                if decision.status is Status.ERROR:
                    raise BindError(decision.message, "pod_refused")
                gkey = gang_key(pod_json) if self.gang_wait_s > 0 else None
                if gkey is not None and self._min_member(gkey) > len(self._members(gkey)):
                    raise BindError(f"gang {gkey} holds no node for {key} (its claims were "
                                    f"released, or its Filter never ran); kube-scheduler "
                                    f"retries it", "not_claimed")
                if cycle.feasible is None or not cycle.feasible[index]:
                    raise BindError(f"node {node!r} no longer passes tdmcore's Filter for "
                                    f"{key}", "no_longer_fits")
                result = self.scheduler.reserve(state, cycle, index)  # assume
                self._decided.clear()
                self._mark_bound(key, pod_json, node)
                self._unconfirmed.add(key)
                statuses = self._statuses(state, {index: [result]})
        try:
            # the cached pod's UID (the one its Filter pass matched) is the Binding's
            # precondition, whether or not the request named it
            self._bind_api(namespace, name, meta.get("uid") or uid, node)
        except BindError:
            with self.lock, self.model.lock:  # forget: the API is the truth again
                self._forget(pod_json)
                if gkey is not None:
                    self._gang_status(gkey)
            raise
        with self.lock, self.model.lock:
            self._unconfirmed.discard(key)
            if gkey is not None:
                self._gang_status(gkey)
        self._write_statuses(statuses)
        assert result is not None
        return result

    # ------------------------------------------------- gangs in extender mode
    def _pending_members(self, gkey: str) -> dict[str, Mapping[str, Any]]:
        """The gang's pods of this scheduler that wait for a node (neither placed nor
        claimed nor being deleted), by key."""
        namespace, _, group = gkey.partition("/")
        out: dict[str, Mapping[str, Any]] = {}
        for k, pod in self.model.objects["Pod"].items():
            meta = pod.get("metadata") or {}
            spec = pod.get("spec") or {}
            if (meta.get("namespace") or "default") == namespace \
                    and (meta.get("labels") or {}).get(api.LABEL_POD_GROUP) == group \
                    and not spec.get("nodeName") and not meta.get("deletionTimestamp") \
                    and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") \
                    and (not self.scheduler_name
                         or spec.get("schedulerName") == self.scheduler_name):
                out[k] = pod
        return out

    def _release(self, keys: Sequence[str], why: str) -> None:
        """Release the claims of ``keys`` (the locks are held): each pod is forgotten
        (the API is the truth again); a gang whose claims are released for ``why``
        (not bound in time) backs off, with its PodGroup status saying so."""
        gangs: dict[str, list[str]] = {}
        for key in keys:
            claim = self.gangs.claims.pop(key, None)
            if claim is None:
                continue
            pod_json = self.model.objects["Pod"].get(key)
            namespace, _, name = key.partition("/")
            self._forget(pod_json if pod_json is not None else
                         {"metadata": {"namespace": namespace, "name": name}})
            if claim.gang is not None:
                gangs.setdefault(claim.gang, []).append(key)
        for gkey, released in gangs.items():
            if not why:
                continue
            rest = self.gangs.gang_claims(gkey)
            self._release(rest, "")  # a gang's claims go together
            reason = (f"tdmcore/{self.policy_name}: gang {gkey}: {len(released + rest)} "
                      f"claimed member(s) {why}; released")
            now = time.monotonic()
            waited = self.gangs.settled(gkey, now)
            if waited is not None and self.on_gang_settled is not None:
                self.on_gang_settled("released", waited)
            self.gangs.refuse(gkey, reason, self.model.releases, now)
            self._gang_status(gkey, reason)
            log.info("%s", reason)

    def _expire(self, now: float) -> None:
        """Settle the claims (the locks are held): the ones kube-scheduler's own
        binder has bound (seen on the watch: the shipped configuration has no bind
        verb) are confirmed, as a bind would confirm them; the ones not bound by their
        deadline are released."""
        if not self.gangs.claims:
            return
        gangs = set()
        for key, claim in list(self.gangs.claims.items()):
            node = self.model.assumed_on(key)
            if node is not None:
                continue  # not bound yet
            del self.gangs.claims[key]  # bound (here or elsewhere), or gone: the API says
            self._unconfirmed.discard(key)
            pod = self.model.objects["Pod"].get(key)
            if pod is not None and (pod.get("spec") or {}).get("nodeName") == claim.node:
                self._pending_statuses.extend(claim.statuses)
            if claim.gang is not None:
                gangs.add(claim.gang)
        for gkey in gangs:
            self._gang_status(gkey)
        expired = self.gangs.expired(now)
        if expired:
            self._release(expired, f"not bound within {self.gang_wait_s:g} s")

    def _flush_confirmed(self) -> None:
        """Write the NodeBandwidth status of the claims confirmed on the watch (no lock
        held: a synchronous write calls the API)."""
        with self.lock:
            nodes, self._pending_statuses = self._pending_statuses, []
        if nodes:
            self._write_statuses(sorted(set(nodes)))

    def expire_claims(self) -> None:
        """Settle the claims (:meth:`_expire`; the requeuer's loop)."""
        with self.lock, self.model.lock:
            self._expire(time.monotonic())
        self._flush_confirmed()

    def claimed_members(self, gkey: str) -> list[str]:
        """Keys of the gang's members holding a claim (not bound yet), but the one
        whose Filter admitted the gang (kube-scheduler is placing it: a touch could
        have it queued a second time)."""
        with self.lock:
            by = self.gangs.admitted_by.get(gkey)
            return [k for k in self.gangs.gang_claims(gkey) if k != by]

    def due_gangs(self) -> dict[str, list[str]]:
        """The gangs whose back-off has just ended, with their pending members' keys
        (the requeuer has kube-scheduler retry them)."""
        with self.lock, self.model.lock:
            return {g: sorted(self._pending_members(g)) for g in
                    self.gangs.due(time.monotonic())}

    def take_podgroup_statuses(self) -> dict[str, dict[str, Any]]:
        """The PodGroup statuses that changed since the last call, by gang key."""
        with self.lock:
            return self.gangs.take_statuses()

    def _gang_status(self, gkey: str, reason: str = "") -> None:
        """Record the gang's PodGroup status now (the locks are held): ``Scheduled``
        once ``minMember`` members are bound, ``Scheduling`` while members hold
        claims, else ``Pending`` for ``reason``."""
        claimed = set(self.gangs.gang_claims(gkey))
        placed = set(self._members(gkey)) - claimed - self._unconfirmed
        need = self._min_member(gkey)
        if len(placed) >= need:
            phase, reason = "Scheduled", ""
            waited = self.gangs.settled(gkey, time.monotonic())
            if waited is not None and self.on_gang_settled is not None:
                self.on_gang_settled("bound", waited)
        elif claimed:
            phase, reason = "Scheduling", ""
        else:
            phase = "Pending"
        self.gangs.set_status(gkey, phase, len(placed), reason)

    def _forget(self, pod_json: Mapping[str, Any]) -> None:
        """Undo an assumed pod (the locks are held): the API is the truth again."""
        self.model.forget(pod_json)
        self._unconfirmed.discard(_key_of(pod_json))
        self._decided.clear()

    def _min_member(self, gkey: str) -> int:
        return min_member(self.model.objects["PodGroup"].get(gkey))

    def _members(self, gkey: str) -> list[str]:
        """Keys of the gang's pods the model has placed (bound or assumed)."""
        namespace, _, group = gkey.partition("/")
        out = []
        for key, pod in self.model.objects["Pod"].items():
            meta = pod.get("metadata") or {}
            if (meta.get("namespace") or "default") == namespace \
                    and (meta.get("labels") or {}).get(api.LABEL_POD_GROUP) == group \
                    and pod_is_placed(pod):
                out.append(key)
        return out

    def _fetch_pod(self, namespace: str, name: str) -> None:
        assert self.kube is not None
        asked = time.monotonic()
        try:
            pod = self.kube.get("Pod", name, namespace)
        except NotFound:
            return  # absent: bind answers as for an unknown pod
        except ApiError as exc:  # unreachable or refusing: not the caller's mistake
            raise BindError(f"pod {namespace}/{name} is not in the cache yet and the API "
                            f"could not be read ({exc})") from exc
        meta = pod.get("metadata") if isinstance(pod, dict) else None
        if not isinstance(meta, dict) or meta.get("name") != name \
                or (meta.get("namespace") or "default") != namespace:
            return  # not the pod asked for: the cache takes only what the watch would
        with self.model.lock:
            key = f"{namespace}/{name}"
            if self.model.deleted_pods.get(key, float("-inf")) >= asked:
                return  # the watch delivered its deletion while we read it: stays deleted
            self.model.on_event("Pod", "ADDED", pod)

    def _bind_api(self, namespace: str, name: str, uid: str | None, node: str) -> None:
        if self.kube is None:
            return
        try:
            self.kube.bind(namespace, name, uid, node)
        except ApiError as exc:
            raise BindError(f"binding {namespace}/{name} to {node} failed: {exc}",
                            "api_error") from exc

    def _mark_bound(self, key: str, pod_json: Mapping[str, Any], node: str) -> None:
        """Assume the pod bound in the cache (:meth:`ClusterModel.assume
        <k8s_bridge.cache.ClusterModel.assume>`), so that the coming watch event needs
        no rebuild and no other update of the pod frees its node meanwhile."""
        self.model.assume(pod_json, node)

    # ---------------------------------------------------------------- gangs
    def schedule_gang(self, pod_jsons: Sequence[Mapping[str, Any]]) -> GangDecision:
        """Place and bind every pod of a gang or none (Eqs. 11-12).

        As :meth:`bind`: the gang is reserved and assumed under the locks, the
        bindings are POSTed without them, and the members whose binding was not
        accepted are forgotten (the bound ones stay: bindings are not transactional).
        """
        with self.lock:
            pods = []
            for p in pod_jsons:
                try:
                    pods.append(self._pod(p))
                except PodRefused as exc:  # which member, since every member hears it
                    return GangDecision(Status.ERROR, (), f"{_key_of(p)}: {exc}")
            try:
                state = self.model.state()
            except LookupError as exc:
                return GangDecision(Status.UNSCHEDULABLE, (), str(exc))
            trial = state.copy()
            gang = self.scheduler.schedule_gang(trial, pods)
            if gang.status is not Status.SUCCESS:
                return gang
            with self.model.lock:  # see bind(): no echo overtakes the bookkeeping
                statuses = self._reserve_gang(state, trial, gang, pod_jsons)
        for k, (d, pod_json) in enumerate(zip(gang.decisions, pod_jsons, strict=True)):
            meta = pod_json.get("metadata") or {}
            ns = meta.get("namespace") or "default"
            try:
                self._bind_api(ns, str(meta.get("name")), meta.get("uid"), str(d.node_name))
            except BindError as exc:
                log.warning("gang partially bound (%d of %d members): %s", k,
                            len(pod_jsons), exc)
                with self.lock, self.model.lock:  # the rest: the API is the truth again
                    for rest in pod_jsons[k:]:
                        self._forget(rest)
                    for done in pod_jsons[:k]:
                        self._unconfirmed.discard(_key_of(done))
                self._write_statuses(statuses)  # the bound members, at write time
                return GangDecision(Status.ERROR, gang.decisions, str(exc))
        with self.lock:
            for pod_json in pod_jsons:
                self._unconfirmed.discard(_key_of(pod_json))
        self._write_statuses(statuses)
        return gang

    def _reserve_gang(self, state: ClusterState, trial: ClusterState, gang: GangDecision,
                      pod_jsons: Sequence[Mapping[str, Any]]) -> list[str]:
        """Under the locks: the trial becomes the state, every member is assumed."""
        state.restore_from(trial)
        self._decided.clear()
        by_node: dict[int, list[ReserveResult]] = {}
        for d, pod_json in zip(gang.decisions, pod_jsons, strict=True):
            self._mark_bound(d.pod, pod_json, str(d.node_name))
            self._unconfirmed.add(_key_of(pod_json))
            if d.reserve is not None:
                by_node.setdefault(d.reserve.node, []).append(d.reserve)
        return self._statuses(state, by_node)

    # -------------------------------------------------------------- records
    def _next_order(self) -> int:
        self._order_us = max(self._order_us + 1, int(time.time() * 1e6))
        return self._order_us

    def _statuses(self, state: ClusterState,
                  reserves: Mapping[int, Sequence[ReserveResult]]) -> list[str]:
        """Remember each touched node's latest Reserve; the names of the nodes to
        write."""
        names = []
        for node, results in reserves.items():
            name = state.cluster.nodes[node].name
            self._reserved[name] = (state.cluster, list(results))
            names.append(name)
        return names

    def _write_statuses(self, nodes: Sequence[str]) -> None:
        """Write the touched links, each computed from the state *at write time* (so
        concurrent binds on one node cannot overwrite each other with older lists):
        now, or -- with :attr:`async_status` -- by the status writer thread.

        **[decision]** In extender mode the write goes behind the bind: kube-scheduler
        waits for ``bind``, and the conditional NodeBandwidth patch (a 409 re-reads and
        recomputes) doubled its latency.  The writer coalesces: the nodes touched while
        it writes are written once, at their latest state, in its next pass.  The write
        stays conditional and merging; an entry not written yet when the extender dies
        is written by the controller's reconcile, which records every placed traffic
        pod.
        """
        if self.async_status:
            with self._status_lock:
                queued = not self._status_closed  # closed: write here, as before
                if queued:
                    # the writer is woken for the first node of a pass only: while it
                    # waits for a lull it reads the time of the latest touch (a wake-up
                    # per bind cost a thread switch each, during the burst)
                    wake = not self._dirty_nodes
                    self._dirty_nodes.update(nodes)
                    self._last_touch = time.monotonic()
                    if self._status_thread is None:
                        self._status_thread = threading.Thread(
                            target=self._status_loop, name="status-writer", daemon=True)
                        self._status_thread.start()
            if queued:
                if wake:
                    self._status_wake.set()
                return
        self._write_now(nodes)

    def _status_loop(self) -> None:
        while True:
            self._status_wake.wait()
            self._status_wake.clear()
            self._wait_for_lull()
            with self._status_lock:
                if self._status_closed and not self._dirty_nodes:
                    self._status_thread = None
                    return
                nodes = sorted(self._dirty_nodes)
                self._dirty_nodes.clear()
                self._status_busy = True
            try:
                self._write_now(nodes)
            except Exception:  # the next bind (or the controller) writes it
                log.exception("writing NodeBandwidth status failed")
            finally:
                with self._status_lock:
                    self._status_busy = False
                    self.status_passes += 1

    def _wait_for_lull(self) -> None:
        """Hold a pass back while binds keep coming: until ``status_quiet_s`` pass
        without one, ``status_max_delay_s`` after the first, or a flush.

        **[decision]** The writer's API calls and their watch echoes cost CPU that,
        during a burst of binds, kube-scheduler's scheduling cycles and the
        extender's own filter/prioritize wait for (on a loaded node more than the
        writes themselves take); written after the burst, each node is written once
        at its latest state (a node touched again while waiting is not written
        twice).  The binds do not wake the writer while it waits: it reads the time
        of the latest one (:attr:`_last_touch`) when its wait ends.
        """
        first = time.monotonic()
        while not self._status_flush.is_set():
            now = time.monotonic()
            with self._status_lock:
                last = self._last_touch
            until = min(last + self.status_quiet_s, first + self.status_max_delay_s)
            if until <= now:
                return
            self._status_flush.wait(until - now)

    def close(self, timeout_s: float = 5.0) -> bool:
        """Write what is pending (as :meth:`flush_statuses`) and stop the status
        writer thread; later binds write their status synchronously.  False if the
        writer had not finished at the deadline."""
        deadline = time.monotonic() + timeout_s
        flushed = self.flush_statuses(timeout_s)
        with self._status_lock:
            self._status_closed = True
            self.async_status = False
            thread = self._status_thread
        self._status_flush.set()
        self._status_wake.set()
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._status_flush.clear()
        return flushed and (thread is None or not thread.is_alive())

    def flush_statuses(self, timeout_s: float = 5.0) -> bool:
        """Write what is pending now and wait until the writer has nothing left
        (False at the deadline)."""
        deadline = time.monotonic() + timeout_s
        self._status_flush.set()
        self._status_wake.set()
        try:
            while time.monotonic() < deadline:
                with self._status_lock:
                    if not self._dirty_nodes and not self._status_busy:
                        return True
                time.sleep(0.01)
            return False
        finally:
            self._status_flush.clear()

    def _write_now(self, nodes: Sequence[str]) -> None:
        for name in nodes:
            with self.lock:
                if name not in self._reserved:
                    continue
            write_status(self.kube, self.model, name, functools.partial(self._compute, name))

    def _compute(self, name: str, current: Mapping[str, Any]) -> dict[str, Any] | None:
        """The node's status after its latest Reserve (:func:`records.node_status
        <k8s_bridge.records.node_status>`): the rotations and base period Reserve
        planned, ``recalculate`` as the node's latest Reserve asked for it (the
        controller's ``on_reserve`` takes the last one too), a new entry ordered by
        bind time."""
        with self.lock, self.model.lock:
            state = self.model.state()
            node = state.cluster.node_index.get(name)
            if node is None:
                return None  # the Node is gone: nothing to record on it
            cluster, results = self._reserved.get(name, (None, []))
            if cluster is not state.cluster:
                results = []  # the cluster changed since: rotations are re-planned
            rotations: dict[str, int] = {}
            base = 0.0
            recalculate = None
            for r in results:
                rotations.update(r.rotations)
                base = r.base_period_ms or base
                if r.shifts_ms:
                    recalculate = not r.skip_phase_three
            return node_status(state, node, current, rotations=rotations,
                               base_period_ms=base or None,
                               order_of=lambda key: self._next_order(),
                               pods=self.model.objects["Pod"], deleted=self.model.deleted_pods,
                               recalculate=recalculate, keep_rotations=True,
                               config=getattr(self.policy, "config", None),
                               skip=self._unconfirmed)
