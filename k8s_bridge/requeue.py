"""Extender mode: make kube-scheduler retry our waiting pods at once.

kube-scheduler (1.23) puts a pod the extender rejected, or that it could not schedule
because the extender was unreachable, in its unschedulable queue; from there it is
retried on a cluster event or at the queue's periodic flush, up to 60 s later.  Two
situations need a retry sooner:

* a PodGroup member held back by Filter because its gang was incomplete (fewer than
  ``minMember`` pods, or no PodGroup yet) must be retried as soon as the gang is
  complete;
* after the extender (re)starts, the pods kube-scheduler failed to schedule while it
  was away must be retried as soon as it serves again;
* when a gang is admitted (its members' nodes claimed, :mod:`k8s_bridge.gangs`), its
  other members should reach Filter now, not after their back-off (coscheduling
  activates the siblings the same way);
* when a gang's back-off ends, its members are retried once.

The requeuer's loop also releases the gangs' claims not bound in time and writes the
PodGroups' status.

**[decision]** The extender *touches* those pods: a merge patch of the annotation
``tdmcore.io/requeued-at`` (a timestamp).  A pod update that changes more than its
status moves a pod out of kube-scheduler's unschedulable queue (``isPodUpdated``), so
the pod is retried at once (or after its own back-off, 1-10 s, if it failed
recently).  The annotation is the only field ever patched.

**[decision]** Least privilege (issue 40): ``patch`` on pods is not granted cluster-wide
(with it, the extender's token could rewrite any pod, a kube-system one included).
The ClusterRole ``tdmcore-requeue`` is bound per namespace (a RoleBinding in each
namespace of training pods, ``deploy/requeue.yaml``): the permission is the one place
that says where the extender requeues.  A namespace without it answers 403; the
requeuer says so once per namespace (WARNING, with the fix) and leaves that
namespace alone for :data:`DENIED_RETRY_S`, after which a binding added meanwhile is
used.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .convert import gang_key, pod_key
from .gangs import OWN_PHASES
from .kube import ApiError, Kube, NotFound
from .once import Once
from .pipeline import Pipeline

__all__ = ["ANNOTATION", "Requeuer", "stranded"]

log = logging.getLogger(__name__)

ANNOTATION = "tdmcore.io/requeued-at"
#: how long a namespace that refused a requeue (403) is left alone (seconds)
DENIED_RETRY_S = 60.0


def stranded(pod: Mapping[str, Any], scheduler_name: str) -> bool:
    """A pending pod of ours that kube-scheduler tried and failed to schedule."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if spec.get("schedulerName") != scheduler_name or spec.get("nodeName") \
            or meta.get("deletionTimestamp") or status.get("phase", "Pending") != "Pending":
        return False
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in status.get("conditions") or [] if isinstance(c, dict))


class Requeuer:
    """Touches held-back gang members once their gang is complete, and the stranded
    pods once after start (see the module docstring)."""

    def __init__(self, pipeline: Pipeline, kube: Kube, scheduler_name: str) -> None:
        self.pipeline = pipeline
        self.kube = kube
        self.scheduler_name = scheduler_name
        self.touched = 0
        self._lock = threading.Lock()
        self._activate: set[str] = set()
        self._activated: dict[str, float] = {}  # gang -> when its siblings were touched
        self._wake = threading.Event()
        self._denied: dict[str, float] = {}  # namespace -> when it refused (monotonic)
        self._said = Once()
        self.statuses_written = 0
        pipeline.on_gang_admitted = self.activate

    def activate(self, gkey: str) -> None:
        """Have the gang's pending members retried (from the requeuer's thread)."""
        with self._lock:
            self._activate.add(gkey)
        self._wake.set()

    def activate_siblings(self) -> int:
        """Touch the members holding a claim (not bound yet) that kube-scheduler failed
        before, of the gangs :meth:`activate` named, each gang at most once a second,
        and the pending members of the gangs whose back-off has ended."""
        with self._lock:
            gangs, self._activate = self._activate, set()
        now = time.monotonic()
        keys: list[str] = []
        for gkey in sorted(gangs):
            if now - self._activated.get(gkey, -1e9) < 1.0:
                continue
            self._activated[gkey] = now
            # the claimed members kube-scheduler failed before (it would retry them
            # only after their back-off); the others are on their way
            model = self.pipeline.model
            keys.extend(k for k in self.pipeline.claimed_members(gkey)
                        if stranded(model.api_pod(k) or {}, self.scheduler_name))
        if len(self._activated) > 10_000:
            self._activated.clear()
        for members in self.pipeline.due_gangs().values():
            keys.extend(members)
        model = self.pipeline.model
        with model.lock:  # only pods of ours that are still there
            keys = [k for k in dict.fromkeys(keys) if k in model.objects["Pod"]
                    and self._ours(model.objects["Pod"][k])
                    and not (model.objects["Pod"][k].get("metadata") or {}).get(
                        "deletionTimestamp")]
        return sum(self.touch(k) for k in sorted(keys))

    def write_podgroup_statuses(self) -> int:
        """Write the PodGroup statuses that changed (phase, scheduled, reason,
        scheduleStartTime); a phase set by someone else after scheduling (Running,
        Finished, Failed) is left as it is."""
        written = 0
        model = self.pipeline.model
        for gkey, status in self.pipeline.take_podgroup_statuses().items():
            namespace, _, name = gkey.partition("/")
            with model.lock:
                current = ((model.objects["PodGroup"].get(gkey) or {}).get("status") or {})
            if current is None or not isinstance(current, dict):
                continue
            patch = dict(status)
            if current.get("phase", "") not in OWN_PHASES:
                del patch["phase"]
            try:
                self.kube.merge_patch("PodGroup", name, {"status": patch},
                                      namespace=namespace, sub="status")
            except NotFound:
                continue
            except ApiError as exc:
                log.warning("could not write the status of PodGroup %s: %s", gkey, exc)
                continue
            written += 1
        self.statuses_written += written
        return written

    def touch(self, key: str) -> bool:
        """Patch the pod's annotation; False if it is gone or the API refused."""
        namespace, _, name = key.partition("/")
        denied = self._denied.get(namespace)
        if denied is not None and time.monotonic() - denied < DENIED_RETRY_S:
            return False
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        try:
            self.kube.merge_patch("Pod", name, {"metadata": {"annotations": {ANNOTATION: now}}},
                                  namespace=namespace)
        except NotFound:
            return False
        except ApiError as exc:
            if exc.status == 403:
                self._denied[namespace] = time.monotonic()
                if self._said.first(namespace, "forbidden"):
                    log.warning("not requeueing pods of namespace %s: the extender may not "
                                "patch pods there (bind the ClusterRole tdmcore-requeue "
                                "with a RoleBinding in %s, as deploy/requeue.yaml does for "
                                "`default`); kube-scheduler retries them at its own pace",
                                namespace, namespace)
                return False
            log.warning("could not requeue pod %s: %s", key, exc)
            return False
        self.touched += 1
        if self._denied.pop(namespace, None) is not None:
            self._said.forget(namespace)
        return True

    def _ours(self, pod: Mapping[str, Any]) -> bool:
        return bool((pod.get("spec") or {}).get("schedulerName") == self.scheduler_name)

    def complete_gangs(self) -> int:
        """Touch the held-back members of every gang that is complete now."""
        ready: list[str] = []
        pipeline = self.pipeline
        with pipeline.lock, pipeline.model.lock:
            for gkey, keys in list(pipeline.held_back.items()):
                # Filter's request named the pods; the cache (the API's truth) must too:
                # only pods of ours that are members of this gang are ever touched
                pods = [pipeline.model.objects["Pod"].get(k) for k in keys]
                live = [p for p in pods if p is not None and self._ours(p)
                        and gang_key(p) == gkey]
                if not live:
                    del pipeline.held_back[gkey]
                    continue
                if pipeline.gang_shortfall(live[0]):
                    continue
                del pipeline.held_back[gkey]
                ready.extend(pod_key(p) for p in live if not (p.get("spec") or {}).get("nodeName"))
        touched = sum(self.touch(k) for k in sorted(ready))
        if touched:
            log.info("requeued %d member(s) of newly complete gangs", touched)
        return touched

    def stranded_pods(self) -> int:
        """Touch every pending pod of ours kube-scheduler failed to schedule."""
        with self.pipeline.model.lock:
            keys = [k for k, p in self.pipeline.model.objects["Pod"].items()
                    if stranded(p, self.scheduler_name)]
        touched = sum(self.touch(k) for k in sorted(keys))
        if touched:
            log.info("requeued %d pod(s) kube-scheduler could not schedule before", touched)
        return touched

    def run(self, stop: threading.Event, ready: Callable[[], bool],
            interval_s: float = 0.2) -> None:
        """Once synced: the stranded pods once, then complete gangs every
        ``interval_s`` until ``stop``; a failing pass is logged, the next retries."""
        while not stop.is_set() and not ready():
            stop.wait(0.1)
        try:
            self.stranded_pods()
        except Exception:
            log.exception("requeueing stranded pods failed")
        while not stop.is_set():
            self._wake.wait(interval_s)
            self._wake.clear()
            try:
                self.pipeline.expire_claims()
                self.activate_siblings()
                self.complete_gangs()
                self.write_podgroup_statuses()
            except Exception:
                log.exception("requeueing gang members failed")
