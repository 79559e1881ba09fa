"""A thin JSON layer over the official Kubernetes client.

The bridge reads and writes plain JSON dicts (what :mod:`k8s_bridge.convert`
takes) for any resource -- core, our CRDs, the networkaware and coscheduling CRDs,
Kubeflow jobs and Leases -- through one ``request`` method.  The official client
supplies configuration (in-cluster or kubeconfig), authentication, TLS and
connection pooling; nothing here re-implements them.

Errors follow one map from HTTP status to exception (:func:`error_for`):
:class:`Gone` (410: re-list), :class:`Conflict` (409: re-read and retry),
:class:`NotFound` (404); :attr:`ApiError.retryable` tells a transient failure
(429, 5xx, a dropped connection) from a permanent one.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import kubernetes
import urllib3

__all__ = [
    "ApiError",
    "Conflict",
    "Gone",
    "Kube",
    "NotFound",
    "RESOURCES",
    "Resource",
    "error_for",
]


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None,
             sub: str | None = None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [root]
        # names are quoted whole: a name is never a path (callers check names where
        # they come from a request, api.object_name; this is the second line)
        if self.namespaced and namespace is not None:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name is not None:
            parts.append(quote(name, safe=""))
            if sub is not None:
                parts.append(sub)
        return "/".join(parts)


RESOURCES: dict[str, Resource] = {r.kind: r for r in (
    Resource("Node", "", "v1", "nodes", False),
    Resource("Pod", "", "v1", "pods", True),
    Resource("Event", "", "v1", "events", True),
    Resource("NodeBandwidth", "tdmcore.io", "v1alpha1", "nodebandwidths", False),
    Resource("PodBandwidth", "tdmcore.io", "v1alpha1", "podbandwidths", True),
    Resource("NetworkTopology", "networktopology.diktyo.x-k8s.io", "v1alpha1",
             "networktopologies", True),
    Resource("AppGroup", "appgroup.diktyo.x-k8s.io", "v1alpha1", "appgroups", True),
    Resource("PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups", True),
    Resource("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs", True),
    Resource("TFJob", "kubeflow.org", "v1", "tfjobs", True),
    Resource("Lease", "coordination.k8s.io", "v1", "leases", True),
    Resource("TokenReview", "authentication.k8s.io", "v1", "tokenreviews", False),
)}


class ApiError(Exception):
    """A failed API call: HTTP ``status`` (0 for a connection failure)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def retryable(self) -> bool:
        return self.status in (0, 429, 500, 502, 503, 504)


class Gone(ApiError):
    """410: the resourceVersion is too old; re-list."""


class Conflict(ApiError):
    """409: the object changed (or exists); re-read and retry."""


class NotFound(ApiError):
    """404."""


_BY_STATUS: dict[int, type[ApiError]] = {404: NotFound, 409: Conflict, 410: Gone}


def connection_failure(exc: BaseException) -> str:
    """What went wrong reaching the API server, without urllib3's wrapping: the
    innermost reason of a retry error (``[Errno 111] Connection refused``, a TLS
    verification failure) minus the connection object's repr, one line."""
    while isinstance(getattr(exc, "reason", None), BaseException) \
            and exc.reason is not exc:  # type: ignore[attr-defined]
        exc = exc.reason  # type: ignore[attr-defined]
    text = str(exc)
    conn = getattr(exc, "conn", None)
    if conn is not None:  # urllib3's NewConnectionError: "<conn>: <message>"
        text = text.removeprefix(f"{conn}: ")
    return " ".join(text.split()) or type(exc).__name__


def error_for(status: int, body: bytes | str | Mapping[str, Any] | None) -> ApiError:
    """The exception for an HTTP status and a Kubernetes Status body (one map)."""
    reason, message = "", ""
    data: Any = body
    if isinstance(body, bytes | str):
        try:
            data = json.loads(body)
        except ValueError:
            data = None
            message = body[:200].decode("utf-8", "replace") if isinstance(body, bytes) \
                else body[:200]
    if isinstance(data, Mapping):
        reason = str(data.get("reason", ""))
        message = str(data.get("message", ""))
        status = int(data.get("code", status)) if isinstance(data.get("code"), int) else status
    # a text body ends with a newline ("404 page not found\n"): one line in the logs
    return _BY_STATUS.get(status, ApiError)(status, reason, " ".join(message.split()))


class Kube:
    """JSON requests against the API server, via the official client's ApiClient."""

    def __init__(self, api_client: kubernetes.client.ApiClient,
                 timeout_s: float = 30.0) -> None:
        self.api_client = api_client
        self.timeout_s = timeout_s
        #: called with (method, status) for every failed call (status 0: not reached);
        #: the servers count them (``tdmcore_api_errors_total``)
        self.on_error: Callable[[str, int], None] | None = None

    @classmethod
    def connect(cls, kubeconfig: str | None = None, *, host: str | None = None) -> Kube:
        """In-cluster configuration if available, else ``kubeconfig``; ``host`` alone
        (no authentication) is for tests and ``kubectl proxy``."""
        if host is not None:
            config = kubernetes.client.Configuration(host=host)
        else:
            config = kubernetes.client.Configuration()
            try:
                kubernetes.config.load_incluster_config(client_configuration=config)
            except kubernetes.config.ConfigException:
                kubernetes.config.load_kube_config(config_file=kubeconfig,
                                                   client_configuration=config)
        return cls(kubernetes.client.ApiClient(config))

    def with_timeout(self, timeout_s: float) -> Kube:
        """A shallow copy (same connection pool) whose requests time out after
        ``timeout_s``."""
        clone = copy.copy(self)
        clone.timeout_s = timeout_s
        return clone

    # ------------------------------------------------------------------ raw
    def _send(self, method: str, path: str, query: Mapping[str, Any] | None,
              body: Any, content_type: str | None, timeout: Any
              ) -> urllib3.BaseHTTPResponse:
        url_path = path + ("?" + urlencode(query) if query else "")
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = self.api_client.param_serialize(
            method=method, resource_path=url_path, header_params=headers,
            body=body, auth_settings=["BearerToken"])
        try:
            resp = self.api_client.call_api(*params, _request_timeout=timeout)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            host = self.api_client.configuration.host
            self._failed(method, 0)
            raise ApiError(0, "ConnectionError",
                           f"{method} {host}{path}: {connection_failure(exc)}") from exc
        except kubernetes.client.ApiException as exc:
            self._failed(method, exc.status or 0)
            raise error_for(exc.status or 0, exc.body) from exc
        raw: urllib3.BaseHTTPResponse = resp.response
        return raw

    def _failed(self, method: str, status: int) -> None:
        if self.on_error is not None:
            self.on_error(method, status)

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, content_type: str | None = None) -> dict[str, Any]:
        """One request; the decoded JSON answer, or the matching :class:`ApiError`."""
        resp = self._send(method, path, query, body, content_type, self.timeout_s)
        try:
            data = resp.data
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self._failed(method, 0)
            raise ApiError(0, "ConnectionError", connection_failure(exc)) from exc
        finally:
            resp.release_conn()
        if not 200 <= resp.status < 300:
            self._failed(method, resp.status)
            raise error_for(resp.status, data)
        try:
            out = json.loads(data) if data else {}
        except ValueError as exc:
            raise ApiError(resp.status, "BadResponse", "the API answered non-JSON") from exc
        if not isinstance(out, dict):
            raise ApiError(resp.status, "BadResponse", "the API answered a non-object")
        return out

    def watch(self, path: str, query: Mapping[str, Any], timeout_s: float,
              opened: Callable[[urllib3.BaseHTTPResponse], None] | None = None
              ) -> Iterator[dict[str, Any]]:
        """Stream watch events (decoded lines) until the server ends the stream.

        A dropped connection raises :class:`ApiError` with status 0; an ERROR event
        is turned into the matching exception (410 -> :class:`Gone`).
        """
        q = dict(query)
        q["watch"] = "true"
        q["timeoutSeconds"] = str(max(1, int(timeout_s)))
        resp = self._send("GET", path, q, None, None, (10.0, timeout_s + 15.0))
        if opened is not None:
            opened(resp)  # lets another thread abort the stream (Informer.stop)
        try:
            if not 200 <= resp.status < 300:
                raise error_for(resp.status, resp.data)
            buffer = b""
            for chunk in resp.stream(65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    event = self._event(line)
                    if event is not None:
                        yield event
            event = self._event(buffer)
            if event is not None:
                yield event
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, "ConnectionError",
                           f"watch dropped: {connection_failure(exc)}") from exc
        finally:
            resp.release_conn()

    @staticmethod
    def abort_watch(stream: urllib3.BaseHTTPResponse | None) -> None:
        """End a watch stream that :meth:`watch` handed to its ``opened`` callback,
        from another thread: the reading thread's :meth:`watch` then raises
        :class:`ApiError` (status 0).  An already closed stream is fine."""
        if stream is None:
            return
        try:
            stream.shutdown()  # unblocks the reading thread
        except Exception:  # noqa: BLE001 - already closed is fine
            pass

    @staticmethod
    def _event(line: bytes) -> dict[str, Any] | None:
        if not line.strip():
            return None
        try:
            event = json.loads(line)
        except ValueError as exc:
            raise ApiError(0, "BadWatchEvent", f"undecodable watch line: {line[:80]!r}") \
                from exc
        if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
            raise ApiError(0, "BadWatchEvent", "a watch event without an object")
        if event.get("type") == "ERROR":
            obj = event["object"]
            code = obj.get("code") if isinstance(obj.get("code"), int) else 500
            raise error_for(code, obj)
        return event

    # ------------------------------------------------------------ conveniences
    def list(self, kind: str, namespace: str | None = None,
             query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.request("GET", RESOURCES[kind].path(namespace), query=query)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self.request("GET", RESOURCES[kind].path(namespace, name))

    def create(self, kind: str, obj: Mapping[str, Any], namespace: str | None = None
               ) -> dict[str, Any]:
        return self.request("POST", RESOURCES[kind].path(namespace), body=dict(obj))

    def replace(self, kind: str, obj: Mapping[str, Any], *, sub: str | None = None
                ) -> dict[str, Any]:
        meta = obj["metadata"]
        return self.request("PUT", RESOURCES[kind].path(meta.get("namespace"), meta["name"], sub),
                            body=dict(obj))

    def merge_patch(self, kind: str, name: str, patch: Mapping[str, Any], *,
                    namespace: str | None = None, sub: str | None = None) -> dict[str, Any]:
        return self.request("PATCH", RESOURCES[kind].path(namespace, name, sub), body=dict(patch),
                            content_type="application/merge-patch+json")

    def bind(self, namespace: str, name: str, uid: str | None, node: str) -> None:
        """POST pods/binding (what kube-scheduler's DefaultBinder does)."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        self.request("POST", RESOURCES["Pod"].path(namespace, name, "binding"), body=body)
