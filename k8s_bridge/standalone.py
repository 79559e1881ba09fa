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

from prometheus_client import Counter

from tdmcore.framework import QUEUES, GangDecision, Status

from . import api, convert
from .api import BadRequest
from .cache import pod_is_placed
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
        self.app = JsonApp("tdmcore_scheduler", ready=ready)
        self.m_gangs = Counter("tdmcore_scheduler_gangs", "Gang decisions by outcome",
                               ["outcome"], registry=self.app.registry)

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
                    need = (pg.get("spec") or {}).get("minMember", 1)
                    if not isinstance(need, int) or isinstance(need, bool):
                        need = 1
                    if len(members) + bound.get(gkey, 0) < need:
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
        for gang in self.gangs():
            until, seen = self._backoff.get(gang.key, (0.0, -1))
            if now < until and seen == self.model.changes:
                if self.queue == "fifo":
                    break  # the head waits, and blocks the rest
                continue  # it backs off; the gangs behind it are tried
            try:
                decision = self.pipeline.schedule_gang(gang.pods)
            except BadRequest as exc:
                log.warning("gang %s cannot be scheduled: %s", gang.key, exc)
                decision = GangDecision(Status.ERROR, (), str(exc))
            out.append((gang, decision))
            self.m_gangs.labels(decision.status.value).inc()
            if decision.status is Status.SUCCESS:
                self._backoff.pop(gang.key, None)
                log.info("gang %s placed: %s", gang.key, decision.placements)
            elif decision.status is Status.ERROR and not decision.decisions:
                log.warning("gang %s skipped: %s", gang.key, decision.message)
            else:
                self._backoff[gang.key] = (now + self.retry_s, self.model.changes)
                log.info("gang %s not placed: %s", gang.key, decision.message)
                if self.queue == "fifo":
                    break  # head-of-line blocking
        return out

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
