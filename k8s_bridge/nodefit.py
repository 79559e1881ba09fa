"""Whether a pod's own node constraints admit a node: its ``nodeSelector``, its required
node affinity, and the node's ``NoSchedule`` / ``NoExecute`` taints it does not tolerate.

The extender's Bind checks these on the pod *as its cache holds it* (the informer's
copy, not a request body) against the cached Node (:class:`k8s_bridge.extender.Extender`):
a caller who reaches the verbs chooses both the pod JSON and the node list of its own
``/filter`` request, and tdmcore's Filter looks at neither rule, so a Filter pass
alone does not show that kube-scheduler's filters kept the node.

The rules are kube-scheduler's, read from its ``NodeAffinity`` and ``TaintToleration``
filter plugins and the helpers they call (``k8s.io/component-helpers/scheduling/
corev1/nodeaffinity`` and ``corev1.Toleration.ToleratesTaint``), which the Kubernetes
Python client does not carry:

* ``nodeSelector``: every key present on the node with that exact value;
* ``requiredDuringSchedulingIgnoredDuringExecution``: the ``nodeSelectorTerms`` are
  ORed, a term's requirements ANDed; a term with no requirement matches no node (nor
  does an empty list of terms); ``matchExpressions`` against the node's labels
  (``In``, ``NotIn`` -- true where the label is absent --, ``Exists``,
  ``DoesNotExist``, ``Gt``, ``Lt`` on integer values), ``matchFields`` against
  ``metadata.name`` (``In``, ``NotIn``); a requirement it cannot read (an unknown
  operator, a field other than ``metadata.name``, a ``Gt`` without one integer)
  matches nothing;
* taints with effect ``NoSchedule`` or ``NoExecute`` (``PreferNoSchedule`` is a
  preference): each must be tolerated by one toleration -- same effect or none, same
  key or none, and ``Exists``, or ``Equal`` (the default) with the same value.

Not checked here (tdmcore's Bind does not re-run them): pod affinity and anti-affinity
to other pods, topology spread, host ports, volumes and the resources tdmcore does not
model.  Those are kube-scheduler's alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["matches_required_affinity", "tolerates", "untolerated_taint", "why_not"]

#: the taint effects that keep a pod off a node (TaintToleration's Filter)
FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


#: what Go's ``strconv.ParseInt(s, 10, 64)`` reads (Python's ``int`` also takes
#: ``1_0``, spaces and non-ASCII digits)
_INT64 = re.compile(r"[+-]?[0-9]+")


def _int(value: Any) -> int | None:
    """An int64 as kube-scheduler parses a ``Gt`` / ``Lt`` value or label, else None."""
    if not isinstance(value, str) or _INT64.fullmatch(value) is None:
        return None
    number = int(value)
    return number if -(1 << 63) <= number < (1 << 63) else None


def _requirement(req: Any, value_of: Mapping[str, str], *, fields: bool) -> bool:
    """One ``matchExpressions`` / ``matchFields`` requirement against ``value_of``
    (the node's labels, or its fields)."""
    if not isinstance(req, Mapping):
        return False
    key, op = req.get("key"), req.get("operator")
    values = req.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        return False
    if fields and (key != "metadata.name" or op not in ("In", "NotIn")):
        return False
    present = key in value_of
    value = value_of.get(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        bound = _int(values[0]) if len(values) == 1 else None
        have = _int(value) if present else None
        if bound is None or have is None:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _term(term: Any, labels: Mapping[str, str], name: str) -> bool:
    if not isinstance(term, Mapping):
        return False
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node
    return all(_requirement(r, labels, fields=False) for r in expressions) \
        and all(_requirement(r, {"metadata.name": name}, fields=True) for r in fields)


def matches_required_affinity(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether ``node`` passes the pod's ``nodeSelector`` and required node affinity
    (kube-scheduler's NodeAffinity Filter)."""
    spec = pod.get("spec") or {}
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    selector = spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is None:
        return True
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    name = str(meta.get("name") or "")
    return any(_term(t, labels, name) for t in terms or [])


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``corev1.Toleration.ToleratesTaint``."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated_taint(tolerations: Sequence[Mapping[str, Any]],
                      taints: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first ``NoSchedule`` / ``NoExecute`` taint no toleration tolerates (None:
    all are), as kube-scheduler's TaintToleration Filter finds it."""
    for taint in taints:
        if not isinstance(taint, Mapping) or taint.get("effect") not in FILTERED_EFFECTS:
            continue
        if not any(isinstance(t, Mapping) and tolerates(t, taint) for t in tolerations):
            return taint
    return None


def why_not(pod: Mapping[str, Any], node: Mapping[str, Any]) -> str | None:
    """Why the pod's own constraints keep it off ``node`` (None: they admit it)."""
    name = (node.get("metadata") or {}).get("name")
    if not matches_required_affinity(pod, node):
        return (f"node {name!r} does not match the pod's nodeSelector or required node "
                f"affinity")
    taint = untolerated_taint((pod.get("spec") or {}).get("tolerations") or [],
                              (node.get("spec") or {}).get("taints") or [])
    if taint is not None:
        value = f"={taint.get('value')}" if taint.get("value") else ""
        return (f"node {name!r} has the taint {taint.get('key')}{value}:"
                f"{taint.get('effect')}, which the pod does not tolerate")
    return None
