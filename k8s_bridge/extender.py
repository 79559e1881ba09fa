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

**[decision]** Bind binds only what this extender's Filter passed
(:class:`FilterPasses`): the node must be one Filter kept for that pod -- same
namespace and name, and the UID of the pod as the cache holds it -- in the pod's latest
Filter call, at most :data:`FILTER_PASS_TTL_S` old, and each pass is used by one bind.
A Filter request carries the pod and the node list its caller chose, so a pass alone
does not show that kube-scheduler's filters kept the node: Bind also checks the
*cached* pod's ``nodeSelector``, required node affinity and tolerations against the
cached Node's labels and ``NoSchedule`` / ``NoExecute`` taints
(:mod:`k8s_bridge.nodefit`, kube-scheduler's rules).  Any other bind is refused with
the reason (``Error``), and changes nothing.  A forged ``POST /bind`` of a pod whose
``nodeSelector`` no node matches was bound (issue 40), and then a forged ``/filter``
of that pod without its selector, followed by the bind (a review of issue 40).  What
Bind does not re-check (pod affinity, topology spread, ports, volumes) stays
kube-scheduler's: who may call the verbs at all is the transport's rule, loopback, or
TLS with client certificates.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from json.encoder import encode_basestring_ascii
from typing import Any

from werkzeug.wrappers import Request

from .api import BadRequest, parse_args, parse_binding
from .metrics import ExtenderMetrics
from .nodefit import why_not
from .pipeline import BindError, Pipeline
from .web import DEFAULT_MAX_BODY, HttpError, JsonApp, RawJson, read_json

__all__ = ["FILTER_PASS_TTL_S", "Extender", "FilterPasses"]

#: How long a Filter pass authorizes a bind (seconds).  kube-scheduler calls the
#: extender's bind in the pod's binding cycle, after its PreBind plugins; VolumeBinding's
#: PreBind waits up to ``bindTimeoutSeconds`` (600 s by default) for the pod's
#: WaitForFirstConsumer volumes to be provisioned and bound, so a bind may come ten
#: minutes after the Filter call of its cycle.  **[decision]** 600 s and 30 s more: a
#: pass still serves one bind, of the same pod UID, onto a node the cached pod's own
#: constraints admit, and a pod's next Filter call replaces it, so a long lifetime
#: widens nothing a forger could use.  (It was 30 s, which refused the bind of a pod
#: whose volume took longer.)  A scheduler configured with a longer
#: ``bindTimeoutSeconds`` gets such late binds refused, and kube-scheduler retries the
#: pod.
FILTER_PASS_TTL_S = 630.0


class FilterPasses:
    """The nodes this extender's Filter passed, per pod, for the pod's current cycle.

    Keyed by (namespace, name) as the Filter request carried them, with the request's
    UID, which must be the bound pod's; a pod's new Filter call replaces its previous
    pass, and :meth:`take` uses a pass up (one bind per scheduling cycle).  At most
    ``capacity`` pods are remembered (the oldest pass goes first).
    """

    def __init__(self, ttl_s: float = FILTER_PASS_TTL_S, capacity: int = 10_000) -> None:
        self.ttl_s = ttl_s
        self.capacity = capacity
        self._lock = threading.Lock()
        self._passed: OrderedDict[tuple[str, str],
                                  tuple[float, str | None, frozenset[str]]] = OrderedDict()

    def record(self, pod_json: Mapping[str, Any], nodes: Sequence[str]) -> None:
        """Filter kept ``nodes`` for the pod: its cycle's pass (the previous one goes)."""
        meta = pod_json.get("metadata") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name")))
        with self._lock:
            self._passed.pop(key, None)
            self._passed[key] = (time.monotonic(), meta.get("uid") or None, frozenset(nodes))
            while len(self._passed) > self.capacity:
                self._passed.popitem(last=False)

    def take(self, namespace: str, name: str, uid: str | None, node: str) -> str | None:
        """Use the pod's pass up: None if Filter passed ``node`` for it in its current
        cycle, else why not."""
        pod = f"{namespace}/{name}" + (f" (UID {uid})" if uid else "")
        with self._lock:
            entry = self._passed.pop((namespace, name), None)
        if entry is None:
            return (f"pod {pod} has no Filter pass of this extender (a bind must follow "
                    f"this extender's Filter of the pod in the same scheduling cycle)")
        at, passed_uid, nodes = entry
        if passed_uid != uid:
            return (f"pod {pod}: its Filter pass was for UID {passed_uid}, not the pod "
                    f"this extender knows by that name")
        if time.monotonic() - at > self.ttl_s:
            return (f"pod {pod}: its Filter pass is {time.monotonic() - at:.0f} s old, "
                    f"from an earlier scheduling cycle (more than {self.ttl_s:g} s)")
        if node not in nodes:
            return f"node {node!r} did not pass this extender's Filter for pod {pod}"
        return None


class Extender:
    """The extender's HTTP application over a :class:`~k8s_bridge.pipeline.Pipeline`."""

    def __init__(self, pipeline: Pipeline, *, prefix: str = "",
                 ready: Callable[[], bool] | None = None,
                 max_body: int = DEFAULT_MAX_BODY,
                 passes: FilterPasses | None = None) -> None:
        self.pipeline = pipeline
        #: what Filter passed, per pod: Bind binds nothing else (module docstring)
        self.passes = passes if passes is not None else FilterPasses()
        pipeline.bind_check = self._may_bind
        self.app = JsonApp("tdmcore_extender", ready=ready, max_body=max_body)
        #: the extender's metrics (:mod:`k8s_bridge.metrics`)
        self.metrics = ExtenderMetrics(self.app.registry)
        self.metrics.model_counters(self.app.registry,
                                    rebuilds=lambda: float(pipeline.model.rebuilds),
                                    decisions=lambda: float(pipeline.decisions),
                                    node_updates=lambda: float(pipeline.model.node_updates))
        pipeline.on_gang_settled = self.metrics.gang_settled
        if pipeline.kube is not None and pipeline.kube.on_error is None:
            pipeline.kube.on_error = self.metrics.error
        self.outcomes = self.metrics.decisions
        prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        self.app.route(f"{prefix}/filter", self.filter)
        self.app.route(f"{prefix}/prioritize", self.prioritize)
        self.app.route(f"{prefix}/bind", self.bind)

    def _may_bind(self, pod_json: Mapping[str, Any], node: str) -> str | None:
        """None when Bind may bind the cached pod ``pod_json`` to ``node``, else why
        not (module docstring; the pipeline holds the model's lock)."""
        meta = pod_json.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name"))
        refusal = self.passes.take(namespace, name, meta.get("uid") or None, node)
        if refusal is not None:
            return refusal
        node_json = self.pipeline.model.objects["Node"].get(node)
        if node_json is None:
            return f"node {node!r} is not in this extender's Node cache"
        constraint = why_not(pod_json, node_json)
        return None if constraint is None else f"{constraint} (pod {namespace}/{name})"

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
            with self.metrics.decision_seconds.labels("filter").time():
                outcome = self.pipeline.filter(pod, names)
        except BindError as exc:  # not the caller's fault (e.g. no Node cached yet)
            self.passes.record(pod, [])  # this cycle passed no node
            self.outcomes.labels("filter", "error").inc()
            return {"Nodes": None, "NodeNames": None, "FailedNodes": {},
                    "FailedAndUnresolvableNodes": {}, "Error": str(exc)}
        except BadRequest as exc:
            self.outcomes.labels("filter", "bad_request").inc()
            raise HttpError(400, str(exc), {"Nodes": None, "NodeNames": None, "FailedNodes": {},
                                            "FailedAndUnresolvableNodes": {},
                                            "Error": str(exc)}) from exc
        self.passes.record(pod, outcome.nodes)
        self.outcomes.labels("filter", "error" if outcome.error else "ok").inc()
        self.metrics.rejected_nodes.labels("failed").inc(len(outcome.failed))
        self.metrics.rejected_nodes.labels("unresolvable").inc(len(outcome.unresolvable))
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
            with self.metrics.decision_seconds.labels("prioritize").time():
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
            with self.metrics.decision_seconds.labels("bind").time():
                self.pipeline.bind(namespace, name, uid, node)
        except BadRequest as exc:
            self.outcomes.labels("bind", "bad_request").inc()
            raise HttpError(400, str(exc)) from exc
        except BindError as exc:
            self.outcomes.labels("bind", "refused").inc()
            self.metrics.bind_refusals.labels(exc.reason).inc()
            return {"Error": str(exc)}
        self.outcomes.labels("bind", "ok").inc()
        return {"Error": ""}
