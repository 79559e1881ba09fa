"""Events about pods, as ``kubectl describe pod`` shows them.

:func:`pod_event` is the one shape of an Event the bridge writes (the standalone
scheduler's ``Scheduled`` / ``FailedScheduling``, the controller's ``PatternUpdated``).
:class:`EventSender` posts Events from a thread of its own, so that the caller -- the
controller, with its global lock held while it decides -- never waits for the API
server: **[decision]** an Event is best effort; it waits in a bounded queue
(``capacity``, 256) and one that finds the queue full is dropped and counted (said
once per run of drops), as kube-scheduler's event broadcaster drops Events it cannot
queue.  A refused or timed-out POST is logged and not retried.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

from .kube import ApiError, Kube

__all__ = ["EventSender", "pod_event"]

log = logging.getLogger(__name__)


def pod_event(pod: Mapping[str, Any], kind: str, reason: str, message: str,
              component: str) -> dict[str, Any]:
    """A v1 Event of type ``kind`` (Normal, Warning) about ``pod`` (its JSON, at least
    ``metadata.name``, ``namespace`` and ``uid``), from ``component``."""
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name')}.", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace,
                           "name": meta.get("name"), "uid": meta.get("uid")},
        "type": kind, "reason": reason, "message": message[:1024],
        "source": {"component": component}, "reportingComponent": component,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }


class EventSender:
    """Posts Events in the background (module docstring).

    Parameters
    ----------
    kube : Kube
        The API client; each POST times out after ``timeout_s``.
    capacity : int
        Events that may wait; more are dropped.
    timeout_s : float
        Timeout of each POST, seconds.
    """

    def __init__(self, kube: Kube, *, capacity: int = 256, timeout_s: float = 5.0) -> None:
        if capacity < 1:
            raise ValueError(f"capacity: expected at least 1, got {capacity}")
        self.kube = kube.with_timeout(timeout_s)
        #: Events dropped because the queue was full
        self.dropped = 0
        #: Events posted (accepted by the API server)
        self.sent = 0
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(capacity)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._dropping = False

    def send(self, event: dict[str, Any]) -> bool:
        """Queue ``event`` (never blocks); False when it was dropped."""
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            with self._lock:
                self.dropped += 1
                first, self._dropping = not self._dropping, True
            if first:
                log.warning("Event queue full (%d waiting): dropping Events until the API "
                            "server takes them", self._queue.maxsize)
            return False
        with self._lock:
            self._dropping = False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="events", daemon=True)
                self._thread.start()
        return True

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every queued Event was posted (or failed); False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0:
                return True
            time.sleep(0.01)
        return self._queue.unfinished_tasks == 0

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            try:
                meta = event["metadata"]
                self.kube.create("Event", event, meta["namespace"])
                self.sent += 1
            except ApiError as exc:
                obj = event.get("involvedObject") or {}
                log.warning("Event %s on pod %s/%s not recorded: %s", event.get("reason"),
                            obj.get("namespace"), obj.get("name"), exc)
            except Exception:  # a bug: keep the worker alive for the next Event
                log.exception("sending an Event failed")
            finally:
                self._queue.task_done()
