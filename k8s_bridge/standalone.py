"""Standalone mode: the same pipeline as a secondary scheduler.

Pods whose ``spec.schedulerName`` is ours and that have no node yet are
scheduled by :meth:`Pipeline.schedule_gang` and bound through pods/binding.  A
coscheduling PodGroup (label ``scheduling.x-k8s.io/pod-group``) is a gang: its
pending pods are placed together, all or nothing (Eqs. 11-12), once the pending
and the already bound members reach ``spec.minMember``; a group whose PodGroup
object does not exist (yet) waits.  A pod without a group is a gang of one.
Gangs are tried oldest first (the oldest member's creation, then the group's
key); a gang that cannot be placed is retried after ``retry_s`` or when the cluster
changes.  Meanwhile, with ``queue="backoff"`` (the default, as kube-scheduler with
coscheduling and the simulator's default) the gangs behind it are tried; with
``"fifo"`` it blocks them (:data:`tdmcore.framework.QUEUES`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tdmcore.framework import QUEUES, GangDecision, Status

from . import api, convert
from .api import BadRequest
from .cache import pod_is_placed
from .events import pod_event
from .kube import ApiError
from .metrics import StandaloneMetrics
from .once import Once
from .pipeline import Pipeline
from .web import JsonApp

__all__ = ["Gang", "StandaloneScheduler"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Gang:
    key: str
    pods: tuple[dict[str, Any], ...]
    created: str


class StandaloneScheduler:
    """Schedules our pods itself (no kube-scheduler involved)."""

    def __init__(self, pipeline: Pipeline, scheduler_name: str, *, retry_s: float = 5.0,
                 ready: Any = None, queue: str = "backoff") -> None:
        if not isinstance(scheduler_name, str) or not scheduler_name:
            raise ValueError("scheduler_name: expected a non-empty string")
        if queue not in QUEUES:
            raise ValueError(f"queue: expected one of {', '.join(QUEUES)}, got {queue!r}")
        self.queue = queue
        self.pipeline = pipeline
        self.model = pipeline.model
        self.scheduler_name = scheduler_name
        self.retry_s = retry_s
        self._backoff: dict[str, tuple[float, int]] = {}  # gang -> (until, model changes)
        # gang -> what a gang tdmcore cannot read was tried on: not tried again until
        # it or the cluster changes
        self._refused: dict[str, Any] = {}
        self._logged = Once()  # refused gangs' WARNINGs, by gang and message
        self._said = Once()  # FailedScheduling Events, by pod UID and message
        #: a slow API server delays the pass by at most this per Event
        self.event_timeout_s = 5.0
        self.app = JsonApp("tdmcore_scheduler", ready=ready)
        self.metrics = StandaloneMetrics(self.app.registry)

    def _ours(self, pod: Mapping[str, Any]) -> bool:
        spec = pod.get("spec") or {}
        meta = pod.get("metadata") or {}
        return (spec.get("schedulerName") == self.scheduler_name and not spec.get("nodeName")
                and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
                and not meta.get("deletionTimestamp"))

    def gangs(self) -> list[Gang]:
        """The gangs ready to be scheduled now, in scheduling order."""
        with self.model.lock:
            pods = self.model.objects["Pod"]
            groups: dict[str, list[dict[str, Any]]] = {}
            bound: dict[str, int] = {}
            for key, pod in pods.items():
                labels = convert.labels_of(pod)
                group = labels.get(api.LABEL_POD_GROUP)
                gkey = f"{key.split('/', 1)[0]}/{group}" if group else f"pod:{key}"
                if self._ours(pod):
                    groups.setdefault(gkey, []).append(pod)
                elif group and pod_is_placed(pod):
                    bound[gkey] = bound.get(gkey, 0) + 1
            out = []
            for gkey, members in groups.items():
                if not gkey.startswith("pod:"):
                    pg = self.model.objects["PodGroup"].get(gkey)
                    if pg is None:
                        continue  # coscheduling semantics: the group must exist
                    if len(members) + bound.get(gkey, 0) < convert.min_member(pg):
                        continue
                members.sort(key=lambda p: (str(p["metadata"].get("creationTimestamp", "")),
                                            str(p["metadata"].get("name"))))
                created = str(members[0]["metadata"].get("creationTimestamp", ""))
                out.append(Gang(gkey, tuple(members), created))
        out.sort(key=lambda g: (g.created, g.key))
        return out

    def run_once(self) -> list[tuple[Gang, GangDecision]]:
        """Try every ready gang not in back-off; returns what was decided."""
        now = time.monotonic()
        out = []
        gangs = self.gangs()
        live = {gang.key for gang in gangs}
        for key in [k for k in self._refused if k not in live]:
            del self._refused[key]  # scheduled, changed or deleted since
        self._logged.keep_only(live)
        self._said.keep_only(convert.pod_identity(p) for gang in gangs for p in gang.pods)
        for gang in gangs:
            # the cluster's relevant changes (PodBandwidths among them) and the members'
            # versions (a pending pod's labels do not move the cluster)
            tried_on = (self.model.changes,
                        tuple(str((p.get("metadata") or {}).get("resourceVersion"))
                              for p in gang.pods))
            if self._refused.get(gang.key) == tried_on:
                continue  # nothing changed since it was refused: skip it, quietly
            until, seen = self._backoff.get(gang.key, (0.0, -1))
            if now < until and seen == self.model.changes:
                if self.queue == "fifo":
                    break  # the head waits, and blocks the rest
                continue  # it backs off; the gangs behind it are tried
            try:
                decision = self.pipeline.schedule_gang(gang.pods)
            except BadRequest as exc:
                decision = GangDecision(Status.ERROR, (), str(exc))
            out.append((gang, decision))
            self.metrics.gangs.labels(decision.status.value).inc()
            self._record(gang, decision)
            if decision.status is Status.SUCCESS:
                self._backoff.pop(gang.key, None)
                log.info("gang %s placed: %s", gang.key, decision.placements)
            elif decision.status is Status.ERROR and not decision.decisions:
                if self._logged.first(gang.key, decision.message):
                    log.warning("gang %s cannot be scheduled until it changes: %s",
                                gang.key, decision.message)
                self._refused[gang.key] = tried_on
            else:
                self._backoff[gang.key] = (now + self.retry_s, self.model.changes)
                log.info("gang %s not placed: %s", gang.key, decision.message)
                if self.queue == "fifo":
                    break  # head-of-line blocking
        return out

    def _record(self, gang: Gang, decision: GangDecision) -> None:
        """Events, as kube-scheduler writes them for the pods it schedules: ``Scheduled``
        for each member bound, ``FailedScheduling`` with the reason for each member
        left pending, once per member and reason (the pass retries every 0.5 s).
        Which members are bound is the cache's word (the pipeline assumes a bound
        member and forgets the others), not the decision's: a gang that does not fit
        carries its trial placements, and a partly bound one its whole plan.
        Best effort: an Event the API refuses is logged, never fails scheduling."""
        kube = self.pipeline.kube
        if kube is None:
            return
        kube = kube.with_timeout(self.event_timeout_s)
        keys = [convert.pod_key(p) for p in gang.pods]
        bound: dict[str, str] = {}
        if decision.decisions:  # no plan, nothing bound
            with self.model.lock:
                for key in keys:
                    cached = self.model.objects["Pod"].get(key) or {}
                    node = (cached.get("spec") or {}).get("nodeName")
                    if node:
                        bound[key] = str(node)
        message = decision.message or decision.status.value
        for key, pod in zip(keys, gang.pods, strict=True):
            node = bound.get(key)
            if node:
                self._said.forget(convert.pod_identity(pod))
                self._event(kube, pod, "Normal", "Scheduled",
                            f"Successfully assigned {key} to {node}")
            elif self._said.first(convert.pod_identity(pod), message):
                self._event(kube, pod, "Warning", "FailedScheduling", message)

    def _event(self, kube: Any, pod: Mapping[str, Any], kind: str, reason: str,
               message: str) -> None:
        meta = pod.get("metadata") or {}
        event = pod_event(pod, kind, reason, message, self.scheduler_name)
        try:
            kube.create("Event", event, event["metadata"]["namespace"])
        except ApiError as exc:
            log.warning("event %s for pod %s/%s not recorded: %s", reason,
                        event["metadata"]["namespace"], meta.get("name"), exc)

    def run(self, stop: threading.Event, interval_s: float = 0.5,
            may_run: Callable[[], bool] = lambda: True) -> None:
        """A pass every ``interval_s`` while ``may_run()`` (synced; leading), until
        ``stop``; a failing pass is logged and the next one retries."""
        while not stop.is_set():
            if may_run():
                try:
                    self.run_once()
                except Exception:
                    log.exception("scheduling pass failed")
            stop.wait(interval_s)
