"""list -> watch -> re-list on 410: a local cache of one kind of object.

The loop of client-go's reflector, in Python over :class:`~k8s_bridge.kube.Kube`:
list (remember the list's resourceVersion), watch from it (bookmarks move it
forward without an object), and

* the watch ends (server timeout) or the connection drops -> watch again from the
  last resourceVersion seen, no re-list;
* 410 Gone (the version was compacted) -> re-list, and hand the handler the
  difference between the old cache and the new list as ADDED / MODIFIED / DELETED
  (the old cache includes what the handler holds that the informer never saw --
  ``known`` -- e.g. an object read directly; it is DELETED if the list is newer);
* 5xx / 429 -> back off (exponential, capped), then resume as above;
* anything else (403, 404: the CRD is not installed) -> back off and re-list.

The handler sees every change exactly once per object version, in order.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .kube import RESOURCES, ApiError, Gone, Kube, NotFound

__all__ = ["Handler", "Informer", "object_key"]

log = logging.getLogger(__name__)

#: handler(kind, event type, object): ADDED / MODIFIED / DELETED
Handler = Callable[[str, str, dict[str, Any]], None]


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Informer:
    """Keeps :attr:`store` equal to the API's objects of ``kind``."""

    def __init__(self, kube: Kube, kind: str, handler: Handler | None = None, *,
                 label_selector: str | None = None, field_selector: str | None = None,
                 watch_timeout_s: float = 300.0, backoff_s: tuple[float, float] = (0.2, 10.0),
                 known: Callable[[], Mapping[str, dict[str, Any]]] | None = None) -> None:
        if kind not in RESOURCES:
            raise ValueError(f"kind: unknown kind {kind!r}")
        self.kube = kube
        self.kind = kind
        self.resource = RESOURCES[kind]
        self.handler = handler
        #: the handler's own objects of this kind by key (see the module docstring)
        self.known = known
        self.query: dict[str, str] = {}
        if label_selector:
            self.query["labelSelector"] = label_selector
        if field_selector:
            self.query["fieldSelector"] = field_selector
        self.watch_timeout_s = watch_timeout_s
        self.backoff_s = backoff_s
        self.store: dict[str, dict[str, Any]] = {}
        self.resource_version = ""
        self.synced = threading.Event()
        self.lists = 0
        self.watches = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: Any = None

    # ----------------------------------------------------------------- steps
    def list_once(self) -> None:
        """List, replace the store, and hand the handler the differences."""
        data = self.kube.request("GET", self.resource.path(), query=self.query)
        items = data.get("items") or []
        rv = str((data.get("metadata") or {}).get("resourceVersion", ""))
        new: dict[str, dict[str, Any]] = {}
        for item in items:
            if not isinstance(item, dict):
                continue
            item.setdefault("kind", self.kind)
            item.setdefault("apiVersion", self.resource.api_version)
            new[object_key(item)] = item
        old = self.store
        self.store = new
        self.resource_version = rv
        self.lists += 1
        for key, obj in old.items():
            if key not in new:
                self._emit("DELETED", obj)
        if self.known is not None:
            # objects the handler holds but this informer never saw (read directly,
            # or written by the process): gone unless newer than the list
            for key, obj in self.known().items():
                if key not in new and key not in old and _not_newer(obj, rv):
                    self._emit("DELETED", obj)
        for key, obj in new.items():
            before = old.get(key)
            if before is None:
                self._emit("ADDED", obj)
            elif _rv(before) != _rv(obj):
                self._emit("MODIFIED", obj)
        self.synced.set()

    def watch_once(self) -> None:
        """One watch stream from :attr:`resource_version` until it ends."""
        query = dict(self.query)
        query["resourceVersion"] = self.resource_version
        query["allowWatchBookmarks"] = "true"
        self.watches += 1
        for event in self.kube.watch(self.resource.path(), query, self.watch_timeout_s,
                                     opened=self._opened):
            kind = event.get("type")
            obj = event["object"]
            rv = _rv(obj)
            if kind == "BOOKMARK":
                if rv:
                    self.resource_version = rv
                continue
            if kind not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            obj.setdefault("kind", self.kind)
            obj.setdefault("apiVersion", self.resource.api_version)
            key = object_key(obj)
            if kind == "DELETED":
                self.store.pop(key, None)
            else:
                self.store[key] = obj
            self._emit(kind, obj)
            if rv:  # after the handler: a caught-up version means a handled event
                self.resource_version = rv
            if self._stop.is_set():
                return

    def _opened(self, stream: Any) -> None:
        self._stream = stream
        if self._stop.is_set():
            self._abort()

    def _abort(self) -> None:
        Kube.abort_watch(self._stream)

    def _emit(self, kind: str, obj: dict[str, Any]) -> None:
        if self.handler is None:
            return
        try:
            self.handler(self.kind, kind, obj)
        except Exception:  # a handler's bug must not kill the informer
            log.exception("handler failed on %s %s %s", kind, self.kind, object_key(obj))

    # ------------------------------------------------------------------ loop
    def run(self) -> None:
        """Until :meth:`stop`: list, then watch and recover as the module says."""
        need_list = True
        delay = self.backoff_s[0]
        failures = 0  # in the current outage: only its first failure is a WARNING
        while not self._stop.is_set():
            try:
                if need_list:
                    self.list_once()
                    need_list = False
                    failures = self._recovered(failures)
                self.watch_once()
                failures = self._recovered(failures)
                delay = self.backoff_s[0]
            except Gone:
                log.info("%s: resourceVersion %s expired, re-listing", self.kind,
                         self.resource_version)
                need_list = True
            except ApiError as exc:
                if self._stop.is_set():
                    return
                self.errors += 1
                if not exc.retryable:
                    need_list = True
                failures += 1
                if failures == 1:
                    res = self.resource
                    what = (f"the API server serves no {res.plural}.{res.group} (is its "
                            f"CustomResourceDefinition installed?)"
                            if isinstance(exc, NotFound) and res.group else str(exc))
                    log.warning("%s informer: %s; retrying every %.1f-%.0f s (later "
                                "failures at DEBUG until it is back)", self.kind, what, delay,
                                self.backoff_s[1])
                else:
                    log.debug("%s informer: %s (failure %d); retrying in %.1f s",
                              self.kind, exc, failures, delay)
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2.0, self.backoff_s[1])
            except Exception:  # a bug or an unexpected answer: never end the loop
                if self._stop.is_set():
                    return
                self.errors += 1
                need_list = True
                log.exception("%s informer failed; re-listing in %.1f s", self.kind, delay)
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2.0, self.backoff_s[1])

    def _recovered(self, failures: int) -> int:
        """Say once that an outage is over; the failure count starts again."""
        if failures:
            log.info("%s informer: the API server answers again after %d failed "
                     "attempt(s)", self.kind, failures)
        return 0

    def start(self) -> Informer:
        self._thread = threading.Thread(target=self.run, name=f"informer-{self.kind}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._abort()
        if self._thread is not None:
            self._thread.join(timeout_s)


def _not_newer(obj: Mapping[str, Any], list_rv: str) -> bool:
    """``obj``'s resourceVersion is not after the list's (integers, as etcd's)."""
    a = _rv(obj)
    return a.isdigit() and list_rv.isdigit() and int(a) <= int(list_rv)


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
