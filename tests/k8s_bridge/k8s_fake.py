"""An in-process, HTTP-level fake of the Kubernetes API server for tests.

:class:`FakeApiServer` listens on ``127.0.0.1`` (a free port) and speaks the Kubernetes
REST protocol with real Kubernetes JSON, so the official ``kubernetes`` python client (or
plain ``urllib``) can talk to it unchanged::

    with FakeApiServer() as fake:
        cfg = kubernetes.client.Configuration(host=fake.url)
        v1 = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(cfg))
        fake.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        assert v1.list_node().items[0].metadata.name == "n1"

What is implemented (standard library only):

* the resources of :data:`RESOURCES` (one line each; pass ``resources=`` to add more), at
  ``/api/v1/...`` for the core group and ``/apis/{group}/{version}/...`` otherwise;
* list (label and field selectors), watch (resume from a resourceVersion, bookmarks,
  ``timeoutSeconds``, 410 "Expired" as an ERROR event), get, create (201, 409 AlreadyExists,
  ``generateName``), replace (409 on a stale resourceVersion), patch (merge, strategic
  treated as merge, JSON patch), delete (with DeleteOptions preconditions), the ``status``
  subresource and pod binding;
* errors as ``Status`` objects; fault injection (:meth:`FakeApiServer.fail_next`), history
  compaction (:meth:`~FakeApiServer.compact`), bookmarks (:meth:`~FakeApiServer.bookmark`)
  and abrupt disconnection of watches (:meth:`~FakeApiServer.drop_watches`).

Deliberate simplifications: no authentication, no admission or schema validation, no
``limit``/``continue`` paging, no finalizers or graceful deletion, no server-side apply
(415), no ``dryRun``; a strategic merge patch is applied as a JSON merge patch (lists are
replaced, not merged by key) and any dotted path is accepted in a field selector.

As on a real server, an update or patch through HTTP that changes nothing is not a write:
it returns the stored object without bumping the resourceVersion or emitting an event; and
a create through HTTP drops ``status`` for kinds with a status subresource. The direct
store methods (:meth:`~FakeApiServer.create`, :meth:`~FakeApiServer.update`,
:meth:`~FakeApiServer.delete`) always write; they bypass resourceVersion checks and the
status-subresource rules, which makes them the way to set up state (status included).
They raise :class:`ApiError` (``.code`` 404 or 409) where HTTP would answer an error.

How the official client (37.x) reacts, see ``tests/k8s_bridge/test_k8s_fake.py``:

* ``kubernetes.watch.Watch().stream`` on a dropped watch: the generator raises
  ``urllib3.exceptions.ProtocolError`` ("Response ended prematurely") — it does not retry
  or end quietly, with or without ``timeout_seconds``;
* on a 410 ERROR event it raises ``ApiException`` with ``status == 410``; without
  ``timeout_seconds`` it first re-watches once from the same resourceVersion (a second
  request) and raises on the second 410;
* a pod binding is answered, like the real server does, with a ``Status`` (201, Success),
  which ``create_namespaced_(pod_)binding`` cannot deserialize into a ``V1Binding``
  (pydantic ``ValidationError`` after the pod is bound, kubernetes-client/python#547):
  call it with ``_preload_content=False``;
* ``CustomObjectsApi.patch_*`` sends every body as ``application/merge-patch+json``; a
  JSON patch (a list) needs ``_content_type="application/json-patch+json"`` (else 400).
  ``CoreV1Api.patch_*`` sends a dict as a strategic merge patch and a list as a JSON patch;
* through ``urllib``, iterating over a watch response's lines ends quietly on a dropped
  connection; ``read()``/``read1()`` raise ``http.client.IncompleteRead``.
"""

from __future__ import annotations

import builtins
import copy
import json
import re
import select
import socket
import socketserver
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlsplit

JSON = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

_POLL_SECONDS = 0.2  # how often an idle watch checks whether its client went away


@dataclass(frozen=True)
class ResourceType:
    """One kind the fake serves: where it lives and how it behaves."""

    api_version: str  # "v1" (core) or "group/version"
    kind: str
    plural: str
    namespaced: bool
    status_subresource: bool = False

    @property
    def group(self) -> str:
        """API group ("" for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def prefix(self) -> str:
        """URL prefix: ``/api/v1`` or ``/apis/{group}/{version}``."""
        return f"/apis/{self.api_version}" if self.group else f"/api/{self.api_version}"

    @property
    def qualified(self) -> str:
        """Name used in error messages, e.g. ``pods`` or ``podgroups.scheduling.x-k8s.io``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


# apiVersion, kind, plural, namespaced, status subresource: add a kind with one line.
RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("v1", "Node", "nodes", False, True),
    ResourceType("v1", "Pod", "pods", True, True),
    ResourceType("v1", "ConfigMap", "configmaps", True),
    ResourceType("v1", "Event", "events", True),
    ResourceType("coordination.k8s.io/v1", "Lease", "leases", True),
    ResourceType("tdmcore.io/v1alpha1", "NodeBandwidth", "nodebandwidths", False, True),
    ResourceType("tdmcore.io/v1alpha1", "PodBandwidth", "podbandwidths", True, True),
    ResourceType(
        "networktopology.diktyo.x-k8s.io/v1alpha1", "NetworkTopology", "networktopologies", True
    ),
    ResourceType("appgroup.diktyo.x-k8s.io/v1alpha1", "AppGroup", "appgroups", True),
    ResourceType("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups", True, True),
    ResourceType("kubeflow.org/v1", "PyTorchJob", "pytorchjobs", True, True),
    ResourceType("kubeflow.org/v1", "TFJob", "tfjobs", True, True),
)

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """A request failure, rendered over HTTP as a Kubernetes ``Status`` with the same code."""

    def __init__(
        self, code: int, message: str, reason: str | None = None, details: JSON | None = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code) or HTTPStatus(code).phrase.replace(" ", "")
        self.details = details

    def status(self) -> JSON:
        """The ``Status`` object for this error."""
        body: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(rt: ResourceType, name: str) -> JSON:
    details: JSON = {"name": name, "kind": rt.plural}
    if rt.group:
        details["group"] = rt.group
    return details


def _not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, f'{rt.qualified} "{name}" not found', details=_details(rt, name))


def _conflict(rt: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {rt.qualified} "{name}": {why}',
        details=_details(rt, name),
    )


_MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: JSON) -> JSON:
    """``obj["metadata"]``, created if missing; a non-object metadata is a 400."""
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise ApiError(400, "metadata must be an object")
    return meta


# --------------------------------------------------------------------------- selectors


def _split_terms(text: str) -> list[str]:
    """Split a selector on the commas that are not inside parentheses."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t.strip() for t in terms if t.strip()]


_SET_TERM = re.compile(r"^(?P<key>[^\s!=(),]+)\s+(?P<op>in|notin)\s+\((?P<values>[^()]*)\)$")
_KEY = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_./]*$")


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector: ``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``, ``a in (x,y)``,
    ``a notin (x)``, comma-separated (all must hold)."""

    terms: tuple[tuple[str, str, frozenset[str]], ...]  # (key, op, values)

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Parse ``text``; a malformed selector is a 400."""
        terms: list[tuple[str, str, frozenset[str]]] = []
        for term in _split_terms(text):
            if m := _SET_TERM.match(term):
                values = frozenset(v.strip() for v in m["values"].split(",") if v.strip())
                key, op = m["key"], m["op"]
            elif term.startswith("!"):
                key, op, values = term[1:].strip(), "!exists", frozenset()
            elif (op_ := next((o for o in ("!=", "==", "=") if o in term), None)) is not None:
                key, value = (s.strip() for s in term.split(op_, 1))
                op, values = ("!=" if op_ == "!=" else "="), frozenset({value})
            else:
                key, op, values = term, "exists", frozenset()
            if not _KEY.match(key):
                raise ApiError(400, f"unable to parse requirement: invalid label key {key!r}")
            terms.append((key, op, values))
        return cls(tuple(terms))

    def matches(self, obj: JSON) -> bool:
        """Whether ``obj``'s labels satisfy every term."""
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for key, op, values in self.terms:
            present, value = key in labels, labels.get(key)
            ok = {
                "=": present and value in values,
                "in": present and value in values,
                "!=": not present or value not in values,
                "notin": not present or value not in values,
                "exists": present,
                "!exists": not present,
            }[op]
            if not ok:
                return False
        return True


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector: ``path=v``, ``path==v``, ``path!=v`` comma-separated, where
    ``path`` is a dotted path such as ``spec.nodeName`` (a missing field reads as "")."""

    terms: tuple[tuple[str, bool, str], ...]  # (dotted path, equal?, value)

    @classmethod
    def parse(cls, text: str) -> FieldSelector:
        """Parse ``text``; a malformed selector is a 400."""
        terms: list[tuple[str, bool, str]] = []
        for term in _split_terms(text):
            op = next((o for o in ("!=", "==", "=") if o in term), None)
            if op is None:
                raise ApiError(400, f"invalid field selector: {term!r}: no operator")
            path, value = (s.strip() for s in term.split(op, 1))
            if not path:
                raise ApiError(400, f"invalid field selector: {term!r}: no field")
            terms.append((path, op != "!=", value))
        return cls(tuple(terms))

    @staticmethod
    def lookup(obj: JSON, path: str) -> str:
        """The value at a dotted path as the API server renders it ("" when missing)."""
        value: Any = obj
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    def matches(self, obj: JSON) -> bool:
        """Whether every term holds for ``obj``."""
        return all((self.lookup(obj, path) == value) == eq for path, eq, value in self.terms)


# --------------------------------------------------------------------------- patches


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch, returning a new document."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise ApiError(422, f"invalid JSON pointer: {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]


def _index(container: list[Any], token: str, *, insert: bool) -> int:
    if insert and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise ApiError(422, f"invalid array index: {token!r}")
    index, limit = int(token), len(container) + (1 if insert else 0)
    if index >= limit:
        raise ApiError(422, f"array index out of range: {index}")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    for token in tokens[:-1]:
        if isinstance(doc, dict) and token in doc:
            doc = doc[token]
        elif isinstance(doc, list):
            doc = doc[_index(doc, token, insert=False)]
        else:
            raise ApiError(422, f"path not found: /{'/'.join(tokens)}")
    return doc


def _get_at(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, insert=False)]
    raise ApiError(422, f"path not found: /{'/'.join(tokens)}")


def _add_at(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, insert=True), value)
    else:
        raise ApiError(422, f"path not found: /{'/'.join(tokens)}")
    return doc


def _remove_at(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise ApiError(422, "cannot remove the whole document")
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, insert=False)]
    else:
        raise ApiError(422, f"path not found: /{'/'.join(tokens)}")
    return doc


def _replace_at(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        parent[last] = value
    elif isinstance(parent, list):
        parent[_index(parent, last, insert=False)] = value
    else:
        raise ApiError(422, f"path not found: /{'/'.join(tokens)}")
    return doc


def json_patch(doc: Any, operations: list[Any]) -> Any:
    """Apply an RFC 6902 JSON patch (add, remove, replace, move, copy, test) to a copy of
    ``doc``; any failure, a failing ``test`` included, is a 422 Invalid."""
    doc = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op:
            raise ApiError(422, f"invalid JSON patch operation: {op!r}")
        kind, tokens = op["op"], _pointer(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise ApiError(422, f"{kind} operation without a value: {op!r}")
        if kind == "add":
            doc = _add_at(doc, tokens, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc = _remove_at(doc, tokens)
        elif kind == "replace":
            doc = _replace_at(doc, tokens, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from"))
            value = copy.deepcopy(_get_at(doc, source))
            if kind == "move":
                doc = _remove_at(doc, source)
            doc = _add_at(doc, tokens, value)
        elif kind == "test":
            if _get_at(doc, tokens) != op["value"]:
                raise ApiError(
                    422, f"testing value {op.get('path')} failed: expected {op['value']!r}"
                )
        else:
            raise ApiError(422, f"unknown JSON patch operation: {kind!r}")
    return doc


# --------------------------------------------------------------------------- watches


@dataclass(frozen=True)
class _Event:
    """One write: the state after it (``obj``) and before it (``old``, None on ADDED)."""

    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    rtype: ResourceType
    obj: JSON
    old: JSON | None


@dataclass(frozen=True)
class _WatchSpec:
    """A parsed watch request."""

    rtype: ResourceType
    namespace: str | None  # None: all namespaces (or cluster-scoped)
    labels: LabelSelector
    fields: FieldSelector
    since: int | None  # None: send the current objects as ADDED first
    bookmarks: bool
    timeout: float | None


@dataclass(eq=False)
class _Watcher:
    """An open watch: its filter, its socket and the items waiting to be sent."""

    spec: _WatchSpec
    sock: socket.socket
    queue: deque[tuple[str, Any]] = field(default_factory=deque)  # (event|bookmark|error, x)
    dropped: bool = False

    def _matches(self, obj: JSON) -> bool:
        ns = self.spec.namespace
        return (
            (ns is None or (obj.get("metadata") or {}).get("namespace") == ns)
            and self.spec.labels.matches(obj)
            and self.spec.fields.matches(obj)
        )

    def render(self, kind: str, item: Any) -> JSON | None:
        """The watch event to send for a queued item, or None if it is filtered out.

        An object modified into (out of) the selection is ADDED (DELETED), like the real
        server does."""
        if kind == "error":
            return {"type": "ERROR", "object": item}
        if kind == "bookmark":
            rt = self.spec.rtype
            meta = {"resourceVersion": str(item)}
            return {
                "type": "BOOKMARK",
                "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
            }
        event = cast(_Event, item)
        now = self._matches(event.obj)
        sent: str | None = event.type if now else None
        if event.type == "MODIFIED":
            before = event.old is not None and self._matches(event.old)
            sent = {(True, True): "MODIFIED", (True, False): "DELETED", (False, True): "ADDED"}.get(
                (before, now)
            )
        return None if sent is None else {"type": sent, "object": event.obj}


def _peer_closed(sock: socket.socket) -> bool:
    """Whether the client closed its end of an idle connection."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


# --------------------------------------------------------------------------- routing


@dataclass(frozen=True)
class _Route:
    """What a URL path names."""

    rtype: ResourceType | None  # None only for the pod ``bindings`` collection
    namespace: str | None
    name: str | None = None
    subresource: str | None = None


@dataclass
class _Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    remaining: int


def _flag(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


class FakeApiServer:
    """A fake Kubernetes API server on ``127.0.0.1`` for the official python client.

    ``history`` is how many write events are kept for resuming watches; a watch from an
    older resourceVersion gets a 410 Expired ERROR event. ``resources`` overrides
    :data:`RESOURCES`. All methods are thread-safe.
    """

    def __init__(
        self, *, history: int = 1000, resources: tuple[ResourceType, ...] = RESOURCES
    ) -> None:
        if history < 0:
            raise ValueError("history must be >= 0")
        self._history_size = history
        self._by_kind = {(rt.api_version, rt.kind): rt for rt in resources}
        self._by_path = {(rt.prefix, rt.plural): rt for rt in resources}
        self._objects: dict[ResourceType, dict[tuple[str, str], JSON]] = {
            rt: {} for rt in resources
        }
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._rv = 1
        self._history: deque[_Event] = deque()
        self._floor = 1  # the oldest resourceVersion a watch can resume from
        self._watchers: set[_Watcher] = set()
        self._connections: set[socket.socket] = set()
        self._faults: list[_Fault] = []
        self._stopping = False
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[tuple[str, str]] = []

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``; valid after :meth:`start`."""
        if self._server is None:
            raise RuntimeError("FakeApiServer is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeApiServer:
        """Start serving on a daemon thread; returns ``self``."""
        if self._server is not None:
            raise RuntimeError("FakeApiServer already started")
        self._stopping = False
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": _POLL_SECONDS / 4},  # how quickly stop() returns
            name="k8s-fake",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: open watches are cut off and every connection is closed."""
        server, thread = self._server, self._thread
        if server is None:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            connections = list(self._connections)
        for sock in connections:
            _shutdown(sock)
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FakeApiServer:
        return self if self._server is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ direct store access

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion counter."""
        with self._lock:
            return self._rv

    def create(self, obj: JSON) -> JSON:
        """Store a new object (status included); :class:`ApiError` 409 if it exists."""
        rt = self._kind(obj.get("apiVersion"), obj.get("kind"))
        namespace = (obj.get("metadata") or {}).get("namespace")
        return self._create(rt, self._namespace(rt, namespace), obj, keep_status=True)

    def update(self, obj: JSON) -> JSON:
        """Replace a stored object unconditionally (status included, no resourceVersion
        check); always writes. :class:`ApiError` 404 if absent."""
        rt = self._kind(obj.get("apiVersion"), obj.get("kind"))
        meta = obj.get("metadata") or {}
        key = (self._namespace(rt, meta.get("namespace")), str(meta.get("name") or ""))
        with self._cond:
            old = self._objects[rt].get(key)
            if old is None:
                raise _not_found(rt, key[1])
            new = self._normalize(rt, key, copy.deepcopy(obj), old)
            return self._commit(rt, key, new, "MODIFIED", old)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """Delete a stored object; :class:`ApiError` 404 if absent."""
        rt = self._kind(api_version, kind)
        self._delete(rt, self._namespace(rt, namespace), name, None)

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> JSON | None:
        """A deep copy of a stored object, or None."""
        rt = self._kind(api_version, kind)
        with self._lock:
            obj = self._objects[rt].get((self._namespace(rt, namespace), name))
            return copy.deepcopy(obj)

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[JSON]:
        """Deep copies of the stored objects of a kind (all namespaces if None)."""
        rt = self._kind(api_version, kind)
        namespace = namespace if rt.namespaced else None
        return self._select(rt, namespace, LabelSelector(()), FieldSelector(()))[1]

    # ------------------------------------------------------------------ fault injection

    def fail_next(self, method: str, path_regex: str, status: int = 500, count: int = 1) -> None:
        """Answer the next ``count`` requests with ``method`` (``"*"``: any) whose path,
        with or without its query string, matches ``re.search(path_regex, ...)`` with a
        ``Status`` error of code ``status``."""
        with self._lock:
            self._faults.append(_Fault(method.upper(), re.compile(path_regex), status, count))

    def compact(self) -> None:
        """Forget the event history: a watch from an older resourceVersion gets 410."""
        with self._lock:
            self._history.clear()
            self._floor = self._rv

    def bookmark(self) -> None:
        """Send a BOOKMARK at the current resourceVersion to every open watch that asked
        for bookmarks (``allowWatchBookmarks=true``)."""
        with self._cond:
            for watcher in self._watchers:
                if watcher.spec.bookmarks:
                    watcher.queue.append(("bookmark", self._rv))
            self._cond.notify_all()

    def drop_watches(self) -> None:
        """Close every open watch connection abruptly (no terminating chunk)."""
        with self._cond:
            watchers = list(self._watchers)
            for watcher in watchers:
                watcher.dropped = True
            self._watchers.clear()  # gone at once: watch_count counts only new watches
            self._cond.notify_all()
        for watcher in watchers:
            _shutdown(watcher.sock)

    @property
    def watch_count(self) -> int:
        """How many watches are open."""
        with self._lock:
            return len(self._watchers)

    # ------------------------------------------------------------------ store internals

    def _kind(self, api_version: Any, kind: Any) -> ResourceType:
        rt = self._by_kind.get((api_version, kind))
        if rt is None:
            raise ValueError(f"unknown resource {api_version}/{kind}")
        return rt

    @staticmethod
    def _namespace(rt: ResourceType, namespace: str | None) -> str:
        return (namespace or "default") if rt.namespaced else ""

    def _normalize(
        self, rt: ResourceType, key: tuple[str, str], obj: JSON, old: JSON | None
    ) -> JSON:
        """Fill in kind, apiVersion and the server-owned metadata of a new state of ``key``
        (``old`` is the stored state, None on create). Called with the lock held."""
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        meta = _meta(obj)
        meta["name"] = key[1]
        if rt.namespaced:
            meta["namespace"] = key[0]
        else:
            meta.pop("namespace", None)
        if old is None:
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now()
            meta["generation"] = 1
        else:
            old_meta = old["metadata"]
            meta["uid"] = old_meta["uid"]
            meta["creationTimestamp"] = old_meta["creationTimestamp"]
            changed = _spec(obj) != _spec(old)
            meta["generation"] = old_meta["generation"] + (1 if changed else 0)
            meta["resourceVersion"] = old_meta["resourceVersion"]
        return obj

    def _commit(
        self, rt: ResourceType, key: tuple[str, str], obj: JSON, kind: str, old: JSON | None
    ) -> JSON:
        """Write ``obj`` (remove it if ``kind`` is DELETED): bump the resourceVersion,
        record the event and wake the watches. Called with the lock held."""
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        if kind == "DELETED":
            del self._objects[rt][key]
        else:
            self._objects[rt][key] = obj
        event = _Event(self._rv, kind, rt, copy.deepcopy(obj), old)
        self._history.append(event)
        while len(self._history) > self._history_size:
            self._floor = self._history.popleft().rv
        if self._history_size == 0:
            self._floor = self._rv
        for watcher in self._watchers:
            if watcher.spec.rtype is rt:
                watcher.queue.append(("event", event))
        self._cond.notify_all()
        return copy.deepcopy(obj)

    def _create(self, rt: ResourceType, namespace: str, body: Any, *, keep_status: bool) -> JSON:
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        obj = copy.deepcopy(body)
        for attr, expected in (("apiVersion", rt.api_version), ("kind", rt.kind)):
            if obj.get(attr) not in (None, "", expected):
                raise ApiError(400, f"{attr} {obj[attr]!r} does not match {expected!r}")
        meta = _meta(obj)
        if rt.namespaced and meta.get("namespace") not in (None, "", namespace):
            raise ApiError(
                400,
                "the namespace of the provided object does not match the namespace sent on "
                "the request",
            )
        if not keep_status and rt.status_subresource:
            obj.pop("status", None)
        with self._cond:
            name = meta.get("name")
            if not name and meta.get("generateName"):
                while not name or (namespace, name) in self._objects[rt]:
                    name = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
            if not name or not isinstance(name, str):
                raise ApiError(
                    422,
                    f"{rt.kind}: metadata.name: Required value: name or generateName is required",
                )
            key = (namespace, name)
            if key in self._objects[rt]:
                raise ApiError(
                    409,
                    f'{rt.qualified} "{name}" already exists',
                    "AlreadyExists",
                    _details(rt, name),
                )
            return self._commit(rt, key, self._normalize(rt, key, obj, None), "ADDED", None)

    def _write(
        self, rt: ResourceType, key: tuple[str, str], old: JSON, result: JSON, sub: str | None
    ) -> JSON:
        """Store ``result`` as the new state of ``key`` (an update or patch through HTTP):
        409 on a stale resourceVersion, status-subresource rules, no-op detection."""
        if not isinstance(result, dict):
            raise ApiError(400, "the object must be a JSON object")
        meta = _meta(result)
        if meta.get("name") not in (None, "", key[1]):
            raise ApiError(
                400,
                f"the name of the object ({meta['name']}) does not match the "
                f"name on the URL ({key[1]})",
            )
        sent_rv = meta.get("resourceVersion")
        if sent_rv not in (None, "") and str(sent_rv) != old["metadata"]["resourceVersion"]:
            raise _conflict(rt, key[1], _MODIFIED)
        if sub == "status":
            new = copy.deepcopy(old)
            _set_or_drop(new, "status", result.get("status"))
        else:
            new = copy.deepcopy(result)
            if rt.status_subresource:
                _set_or_drop(new, "status", copy.deepcopy(old.get("status")))
        new = self._normalize(rt, key, new, old)
        if new == old:
            return copy.deepcopy(old)
        return self._commit(rt, key, new, "MODIFIED", old)

    def _replace(
        self, rt: ResourceType, namespace: str, name: str, body: Any, sub: str | None
    ) -> JSON:
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        with self._cond:
            old = self._objects[rt].get((namespace, name))
            if old is None:
                raise _not_found(rt, name)
            return self._write(rt, (namespace, name), old, copy.deepcopy(body), sub)

    def _patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        patch: Any,
        sub: str | None,
    ) -> JSON:
        media = content_type.split(";")[0].strip().lower()
        if media in (MERGE_PATCH, STRATEGIC_MERGE_PATCH):
            if not isinstance(patch, dict):
                raise ApiError(
                    400,
                    f"a {media} body must be a JSON object (a JSON patch, a list of "
                    f"operations, needs Content-Type {JSON_PATCH})",
                )
        elif media == JSON_PATCH:
            if not isinstance(patch, list):
                raise ApiError(400, "a JSON patch must be a JSON array of operations")
        else:
            raise ApiError(
                415,
                f"the body of the request was in an unknown format - accepted "
                f"media types include: {JSON_PATCH}, {MERGE_PATCH}, "
                f"{STRATEGIC_MERGE_PATCH}",
            )
        with self._cond:
            old = self._objects[rt].get((namespace, name))
            if old is None:
                raise _not_found(rt, name)
            if media == JSON_PATCH:
                result = json_patch(old, patch)
            else:
                result = merge_patch(old, patch)
            return self._write(rt, (namespace, name), old, result, sub)

    def _delete(self, rt: ResourceType, namespace: str, name: str, options: Any) -> JSON:
        preconditions = (options or {}).get("preconditions") or {}
        with self._cond:
            old = self._objects[rt].get((namespace, name))
            if old is None:
                raise _not_found(rt, name)
            for attr in ("uid", "resourceVersion"):
                wanted = preconditions.get(attr)
                if wanted and wanted != old["metadata"].get(attr):
                    raise _conflict(
                        rt,
                        name,
                        f"Precondition failed: {attr} in precondition: "
                        f"{wanted}, {attr} in object meta: {old['metadata'][attr]}",
                    )
            return self._commit(rt, (namespace, name), copy.deepcopy(old), "DELETED", old)

    def _bind(self, namespace: str, name: str | None, body: Any) -> JSON:
        """Bind a pod to a node (``pods/{name}/binding`` or the ``bindings`` collection)."""
        rt = self._kind("v1", "Pod")
        if not isinstance(body, dict) or not isinstance(body.get("target"), dict):
            raise ApiError(400, "a Binding with a target is required")
        body_name = (body.get("metadata") or {}).get("name")
        if name is None:
            name = body_name
        elif body_name not in (None, "", name):
            raise ApiError(
                400,
                f"the name of the binding ({body_name}) does not match the pod "
                f"name on the URL ({name})",
            )
        node = body["target"].get("name")
        if not name or not node:
            raise ApiError(422, "Binding: metadata.name and target.name are required")
        with self._cond:
            old = self._objects[rt].get((namespace, name))
            if old is None:
                raise _not_found(rt, name)
            current = (old.get("spec") or {}).get("nodeName")
            if current:
                raise ApiError(
                    409,
                    f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} '
                    f'is already assigned to node "{current}"',
                    details=_details(rt, name),
                )
            new = copy.deepcopy(old)
            new.setdefault("spec", {})["nodeName"] = node
            conditions = [
                c
                for c in new.setdefault("status", {}).get("conditions") or []
                if c.get("type") != "PodScheduled"
            ]
            conditions.append(
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()}
            )
            new["status"]["conditions"] = conditions
            new = self._normalize(rt, (namespace, name), new, old)
            self._commit(rt, (namespace, name), new, "MODIFIED", old)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    def _select(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> tuple[int, builtins.list[JSON]]:
        """(current resourceVersion, matching objects sorted by namespace and name)."""
        with self._lock:
            items = [
                copy.deepcopy(obj)
                for (ns, _), obj in sorted(self._objects[rt].items())
                if (namespace is None or ns == namespace)
                and labels.matches(obj)
                and fields.matches(obj)
            ]
            return self._rv, items

    # ------------------------------------------------------------------ HTTP internals

    def _log_request(self, method: str, path: str) -> None:
        with self._lock:
            self.requests.append((method, path))

    def _take_fault(self, method: str, path: str) -> ApiError | None:
        bare = path.split("?", 1)[0]
        with self._lock:
            for fault in self._faults:
                if fault.method in ("*", method) and (
                    fault.pattern.search(bare) or fault.pattern.search(path)
                ):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return ApiError(fault.status, f"injected failure for {method} {path}")
        return None

    def _route(self, path: str) -> _Route:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[:1] == ["api"] and len(parts) >= 2:
            prefix, rest = f"/api/{parts[1]}", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            prefix, rest = f"/apis/{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise ApiError(404, "the server could not find the requested resource")
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, plural = rest[1], rest[2]
            if prefix == "/api/v1" and plural == "bindings" and len(rest) == 3:
                return _Route(None, namespace)
            rt = self._by_path.get((prefix, plural))
            if rt is not None and rt.namespaced and len(rest) <= 5:
                return _Route(rt, namespace, *rest[3:])
        rt = self._by_path.get((prefix, rest[0])) if rest else None
        if rt is not None and (len(rest) == 1 or (not rt.namespaced and len(rest) <= 3)):
            return _Route(rt, None, *rest[1:])
        raise ApiError(404, "the server could not find the requested resource")

    def _handle(
        self, method: str, target: str, content_type: str, raw_body: bytes
    ) -> tuple[int, JSON] | _WatchSpec:
        """Serve one request: (HTTP code, JSON body), or a watch to stream."""
        if (fault := self._take_fault(method, target)) is not None:
            raise fault
        split = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        route = self._route(split.path)
        body = _parse_body(raw_body)
        rt, ns, name, sub = route.rtype, route.namespace, route.name, route.subresource
        if rt is None:  # POST /api/v1/namespaces/{ns}/bindings
            if method != "POST":
                raise ApiError(405, f"method {method} not allowed on bindings")
            return 201, self._bind(cast(str, ns), None, body)
        if sub not in (None, "status", "binding") or (
            (sub == "status" and not rt.status_subresource)
            or (sub == "binding" and rt.kind != "Pod")
        ):
            raise ApiError(404, "the server could not find the requested resource")
        if name is None:
            if method == "GET":
                labels = LabelSelector.parse(query.get("labelSelector", ""))
                fields = FieldSelector.parse(query.get("fieldSelector", ""))
                if _flag(query.get("watch")):
                    return _watch_spec(rt, ns, labels, fields, query)
                rv, items = self._select(rt, ns, labels, fields)
                return 200, {
                    "kind": f"{rt.kind}List",
                    "apiVersion": rt.api_version,
                    "metadata": {"resourceVersion": str(rv)},
                    "items": items,
                }
            if method == "POST" and (ns is not None or not rt.namespaced):
                return 201, self._create(rt, ns or "", body, keep_status=False)
            raise ApiError(405, f"method {method} not allowed on {rt.qualified}")
        ns = ns or ""
        if sub == "binding":
            if method != "POST":
                raise ApiError(405, f"method {method} not allowed on pods/binding")
            return 201, self._bind(ns, name, body)
        if method == "GET":
            if _flag(query.get("watch")):
                fields = FieldSelector.parse(query.get("fieldSelector", ""))
                fields = FieldSelector((*fields.terms, ("metadata.name", True, name)))
                labels = LabelSelector.parse(query.get("labelSelector", ""))
                return _watch_spec(rt, ns or None, labels, fields, query)
            with self._lock:
                obj = self._objects[rt].get((ns, name))
                if obj is None:
                    raise _not_found(rt, name)
                return 200, copy.deepcopy(obj)
        if method == "PUT":
            return 200, self._replace(rt, ns, name, body, sub)
        if method == "PATCH":
            return 200, self._patch(rt, ns, name, content_type, body, sub)
        if method == "DELETE" and sub is None:
            return 200, self._delete(rt, ns, name, body)
        raise ApiError(405, f"method {method} not allowed on {rt.qualified}")

    def _open_watch(self, spec: _WatchSpec, sock: socket.socket) -> _Watcher:
        """Register a watch; its queue starts with the replayed or initial events (or with
        a 410 ERROR if ``spec.since`` is older than the retained history)."""
        watcher = _Watcher(spec, sock)
        rt = spec.rtype
        with self._cond:
            if spec.since is None:
                for _, obj in sorted(self._objects[rt].items()):
                    rv = int(obj["metadata"]["resourceVersion"])
                    event = _Event(rv, "ADDED", rt, copy.deepcopy(obj), None)
                    watcher.queue.append(("event", event))
            elif spec.since < self._floor:
                error = ApiError(
                    410, f"too old resource version: {spec.since} ({self._floor})", "Expired"
                )
                watcher.queue.append(("error", error.status()))
                return watcher
            else:
                for event in self._history:
                    if event.rv > spec.since and event.rtype is rt:
                        watcher.queue.append(("event", event))
            self._watchers.add(watcher)
        return watcher

    def _close_watch(self, watcher: _Watcher) -> None:
        with self._lock:
            self._watchers.discard(watcher)

    def _next_items(
        self, watcher: _Watcher, deadline: float | None
    ) -> tuple[builtins.list[tuple[str, Any]], str | None]:
        """Wait for queued items; returns (items, None) or ([], why the watch ends), why
        being "dropped", "timeout" or "gone" (the client went away)."""
        while True:
            with self._cond:
                if watcher.dropped or self._stopping:
                    return [], "dropped"
                if watcher.queue:
                    items = list(watcher.queue)
                    watcher.queue.clear()
                    return items, None
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return [], "timeout"
                self._cond.wait(
                    _POLL_SECONDS if remaining is None else min(remaining, _POLL_SECONDS)
                )
                if watcher.queue or watcher.dropped or self._stopping:
                    continue
            if _peer_closed(watcher.sock):
                return [], "gone"

    def _track(self, sock: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(sock)
            else:
                self._connections.discard(sock)


def _spec(obj: JSON) -> JSON:
    """Everything but metadata and status: what bumps metadata.generation."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _set_or_drop(obj: JSON, key: str, value: Any) -> None:
    if value is None:
        obj.pop(key, None)
    else:
        obj[key] = value


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _parse_body(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ApiError(400, f"the request body is not valid JSON: {err}", "BadRequest") from err


def _watch_spec(
    rt: ResourceType,
    namespace: str | None,
    labels: LabelSelector,
    fields: FieldSelector,
    query: dict[str, str],
) -> _WatchSpec:
    since_text = query.get("resourceVersion", "")
    timeout_text = query.get("timeoutSeconds", "")
    try:
        since = None if since_text in ("", "0") else int(since_text)
        timeout = float(timeout_text) if timeout_text else None
    except ValueError as err:
        raise ApiError(400, f"invalid watch parameter: {err}") from err
    bookmarks = _flag(query.get("allowWatchBookmarks"))
    return _WatchSpec(rt, namespace, labels, fields, since, bookmarks, timeout)


# --------------------------------------------------------------------------- HTTP layer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # keep-alive connections of the client must not block stop()

    def __init__(self, fake: FakeApiServer) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup of the address."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", self.server_address[1]


class _Handler(BaseHTTPRequestHandler):
    """Translates HTTP to :meth:`FakeApiServer._handle` and streams watches (chunked)."""

    protocol_version = "HTTP/1.1"

    @property
    def fake(self) -> FakeApiServer:
        return cast(_Server, self.server).fake

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's
        # algorithm and the client's delayed ACK add ~40 ms to every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.fake._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log on stderr."""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while size := int(self.rfile.readline(65537).split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _serve(self, method: str) -> None:
        fake = self.fake
        try:
            raw = self._read_body()
        except (OSError, ValueError):
            self.close_connection = True
            return
        fake._log_request(method, self.path)
        try:
            result = fake._handle(method, self.path, self.headers.get("Content-Type", ""), raw)
        except ApiError as err:
            self._send_json(err.code, err.status())
            return
        if isinstance(result, _WatchSpec):
            self._stream(result)
        else:
            self._send_json(*result)

    def _send_json(self, code: int, body: JSON) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _stream(self, spec: _WatchSpec) -> None:
        """Stream a watch as chunked JSON lines until timeout, drop, stop or disconnect."""
        fake = self.fake
        watcher = fake._open_watch(spec, self.connection)
        deadline = None if spec.timeout is None else time.monotonic() + spec.timeout
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache, private")
            self.end_headers()
            while True:
                items, why = fake._next_items(watcher, deadline)
                if why in ("dropped", "gone"):
                    self.close_connection = True  # cut off: no terminating chunk
                    return
                if why == "timeout":
                    break
                ended = False
                for kind, item in items:
                    event = watcher.render(kind, item)
                    if event is not None:
                        self._chunk(json.dumps(event).encode() + b"\n")
                    ended = ended or kind == "error"
                if ended:
                    break
            fake._close_watch(watcher)  # closed for watch_count before the client sees the end
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True
        finally:
            fake._close_watch(watcher)
