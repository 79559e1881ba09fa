"""The kube-scheduler HTTP extender (``k8s.io/kube-scheduler/extender/v1``).

kube-scheduler POSTs ``ExtenderArgs`` to ``{prefix}/filter`` and
``{prefix}/prioritize`` and ``ExtenderBindingArgs`` to ``{prefix}/bind``; keys are
the Go field names (``Pod``, ``Nodes``, ``NodeNames``; ``PodName``,
``PodNamespace``, ``PodUID``, ``Node``), matched case-insensitively as Go's JSON
decoder does.  Answers:

* filter -> ``ExtenderFilterResult`` (``NodeNames`` when the request carried
  names -- ``nodeCacheCapable: true`` -- else ``Nodes``, the request's NodeList
  with the rejected nodes removed; ``FailedNodes``, ``FailedAndUnresolvableNodes``,
  ``Error``);
* prioritize -> ``HostPriorityList`` (``[{"Host", "Score"}]``, 0..10; see
  :func:`k8s_bridge.pipeline.extender_score`);
* bind -> ``ExtenderBindingResult`` (``Error`` empty on success).

Malformed requests get HTTP 400 with ``Error`` set, and change nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

from prometheus_client import Counter, Gauge
from werkzeug.wrappers import Request

from .pipeline import BadRequest, BindError, Pipeline
from .web import DEFAULT_MAX_BODY, HttpError, JsonApp, RawJson, field, read_json

__all__ = ["Extender", "parse_args", "parse_binding"]


def _object(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise BadRequest(f"{name}: expected an object, got "
                         f"{'null' if value is None else type(value).__name__}")
    return value


def parse_args(body: Any) -> tuple[Mapping[str, Any], list[str], Mapping[str, Any] | None]:
    """``ExtenderArgs`` -> (pod, node names, the NodeList if one was sent)."""
    args = _object(body, "ExtenderArgs")
    pod = _object(field(args, "Pod"), "Pod")
    _object(pod.get("metadata"), "Pod.metadata")
    names = field(args, "NodeNames")
    nodes = field(args, "Nodes")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise BadRequest("NodeNames: expected a list of node names")
        return pod, list(names), None
    if nodes is None:
        raise BadRequest("NodeNames: either NodeNames or Nodes is required")
    node_list = _object(nodes, "Nodes")
    items = node_list.get("items")
    if not isinstance(items, list):
        raise BadRequest("Nodes.items: expected a list of v1 Node objects")
    out = []
    for i, item in enumerate(items):
        meta = _object(_object(item, f"Nodes.items[{i}]").get("metadata"),
                       f"Nodes.items[{i}].metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise BadRequest(f"Nodes.items[{i}].metadata.name: expected a node name")
        out.append(name)
    return pod, out, node_list


def parse_binding(body: Any) -> tuple[str, str, str | None, str]:
    """``ExtenderBindingArgs`` -> (namespace, name, uid, node)."""
    args = _object(body, "ExtenderBindingArgs")
    out = []
    for key in ("PodNamespace", "PodName", "Node"):
        value = field(args, key)
        if not isinstance(value, str) or not value:
            raise BadRequest(f"{key}: expected a non-empty string, got {value!r:.60}")
        out.append(value)
    uid = field(args, "PodUID")
    if uid is not None and not isinstance(uid, str):
        raise BadRequest(f"PodUID: expected a string, got {uid!r:.60}")
    return out[0], out[1], uid or None, out[2]


class Extender:
    """The extender's HTTP application over a :class:`~k8s_bridge.pipeline.Pipeline`."""

    def __init__(self, pipeline: Pipeline, *, prefix: str = "",
                 ready: Callable[[], bool] | None = None,
                 max_body: int = DEFAULT_MAX_BODY) -> None:
        self.pipeline = pipeline
        self.app = JsonApp("tdmcore_extender", ready=ready, max_body=max_body)
        registry = self.app.registry
        self.outcomes = Counter("tdmcore_extender_decisions", "Decisions by verb and outcome",
                                ["verb", "outcome"], registry=registry)
        self.rejections = Counter("tdmcore_extender_rejected_nodes",
                                  "Nodes rejected by Filter", ["kind"], registry=registry)
        rebuilds = Gauge("tdmcore_model_rebuilds", "ClusterState rebuilds from the cache",
                         registry=registry)
        rebuilds.set_function(lambda: float(pipeline.model.rebuilds))
        updates = Gauge("tdmcore_model_node_updates",
                        "Node changes applied to the cluster state in place (no rebuild)",
                        registry=registry)
        updates.set_function(lambda: float(pipeline.model.node_updates))
        prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        self.app.route(f"{prefix}/filter", self.filter)
        self.app.route(f"{prefix}/prioritize", self.prioritize)
        self.app.route(f"{prefix}/bind", self.bind)

    def _body(self, request: Request, verb: str) -> Any:
        try:
            return read_json(request, self.app.max_body)
        except HttpError:
            self.outcomes.labels(verb, "bad_request").inc()
            raise

    def filter(self, request: Request) -> dict[str, Any]:
        body = self._body(request, "filter")
        try:
            pod, names, node_list = parse_args(body)
            outcome = self.pipeline.filter(pod, names)
        except BindError as exc:  # not the caller's fault (e.g. no Node cached yet)
            self.outcomes.labels("filter", "error").inc()
            return {"Nodes": None, "NodeNames": None, "FailedNodes": {},
                    "FailedAndUnresolvableNodes": {}, "Error": str(exc)}
        except BadRequest as exc:
            self.outcomes.labels("filter", "bad_request").inc()
            raise HttpError(400, str(exc), {"Nodes": None, "NodeNames": None, "FailedNodes": {},
                                            "FailedAndUnresolvableNodes": {},
                                            "Error": str(exc)}) from exc
        self.outcomes.labels("filter", "error" if outcome.error else "ok").inc()
        self.rejections.labels("failed").inc(len(outcome.failed))
        self.rejections.labels("unresolvable").inc(len(outcome.unresolvable))
        result: dict[str, Any] = {"FailedNodes": outcome.failed,
                                  "FailedAndUnresolvableNodes": outcome.unresolvable,
                                  "Error": outcome.error}
        if node_list is None:
            result["Nodes"] = None
            result["NodeNames"] = outcome.nodes
        else:
            keep = set(outcome.nodes)
            filtered = dict(node_list)
            filtered["items"] = [n for n in node_list["items"]
                                 if n["metadata"]["name"] in keep]
            result["Nodes"] = filtered
            result["NodeNames"] = None
        return result

    def prioritize(self, request: Request) -> RawJson:
        body = self._body(request, "prioritize")
        try:
            pod, names, _ = parse_args(body)
            scores = self.pipeline.prioritize(pod, names)
        except BindError as exc:
            self.outcomes.labels("prioritize", "error").inc()
            raise HttpError(503, str(exc)) from exc
        except BadRequest as exc:
            self.outcomes.labels("prioritize", "bad_request").inc()
            raise HttpError(400, str(exc)) from exc
        self.outcomes.labels("prioritize", "ok").inc()
        # the HostPriorityList written directly: json.dumps of a list of dicts took
        # as long as the decision itself on 1,000 nodes (scores are ints 0..10)
        return RawJson("[" + ",".join([f'{{"Host":{encode_basestring_ascii(host)},'
                                       f'"Score":{score:d}}}' for host, score in scores])
                       + "]")

    def bind(self, request: Request) -> dict[str, Any]:
        body = self._body(request, "bind")
        try:
            namespace, name, uid, node = parse_binding(body)
            self.pipeline.bind(namespace, name, uid, node)
        except BadRequest as exc:
            self.outcomes.labels("bind", "bad_request").inc()
            raise HttpError(400, str(exc)) from exc
        except BindError as exc:
            self.outcomes.labels("bind", "refused").inc()
            return {"Error": str(exc)}
        self.outcomes.labels("bind", "ok").inc()
        return {"Error": ""}
