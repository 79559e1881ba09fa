"""NodeBandwidth status: one way to write it, shared by the extender and the controller.

Two writers (the extender at Reserve, the controller with offsets) and informer
lag make a naive "write the list I know" lose entries.  So every write

* merges: entries of pods the writer does not know as placed are kept while they
  may still be on their way (:func:`merge_entries`);
* is conditional: the merge patch carries the ``resourceVersion`` it was computed
  from, a 409 re-reads the object and recomputes (optimistic concurrency, as
  ``kubectl apply`` does);
* creates the NodeBandwidth if it is missing (an AlreadyExists race re-reads it);
* is registered with the model first (:meth:`ClusterModel.expect`), so its watch
  echo does not force a rebuild.

Lock order, everywhere: a front end's own lock (pipeline, controller) before the
model's; ``write_status`` holds neither while it calls ``compute``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from tdmcore.metronome.base_period import unify_periods
from tdmcore.model import ClusterState, Pod

from . import api
from .cache import ClusterModel, pod_is_placed
from .kube import ApiError, Conflict, Kube, NotFound

__all__ = ["GRACE_S", "LINK_DECLARED", "entry_key", "link_base_period", "merge_entries",
           "node_status", "observed", "observed_is_current", "pod_entry", "write_status"]

log = logging.getLogger(__name__)

#: how long an entry of a pod the writer has not seen bound yet is kept (seconds)
GRACE_S = 120.0

Compute = Callable[[Mapping[str, Any]], dict[str, Any] | None]

#: the condition type that says whether a NodeBandwidth declares its link speed
LINK_DECLARED = "LinkDeclared"


def observed(nbw: Mapping[str, Any], default_link_gbps: float) -> dict[str, Any]:
    """``status.observedGeneration`` and ``status.conditions`` of a NodeBandwidth: the
    generation (``spec``) every write is computed from, and whether the link's speed is
    declared (condition ``LinkDeclared``; ``False``, reason ``DefaultLinkSpeed``: no
    ``spec.bandwidth``, so the bridge's ``--default-link-gbps`` is the link's speed --
    e.g. a misspelt ``spec.bandwith`` the API server pruned).  A condition whose status
    is unchanged keeps its ``lastTransitionTime``."""
    meta = nbw.get("metadata") or {}
    spec = nbw.get("spec") or {}
    generation = meta.get("generation")
    declared = spec.get("bandwidth") is not None
    condition: dict[str, Any] = {
        "type": LINK_DECLARED, "status": "True" if declared else "False",
        "reason": "Declared" if declared else "DefaultLinkSpeed",
        "message": f"spec.bandwidth is {spec.get('bandwidth')!r}" if declared else
        f"spec.bandwidth is not set: the link is taken as {default_link_gbps:g} Gbps "
        f"(the bridge's --default-link-gbps)"}
    if isinstance(generation, int) and not isinstance(generation, bool):
        condition["observedGeneration"] = generation
    before = [c for c in (nbw.get("status") or {}).get("conditions") or []
              if isinstance(c, dict) and c.get("type") == LINK_DECLARED]
    condition["lastTransitionTime"] = before[0].get("lastTransitionTime") \
        if before and before[0].get("status") == condition["status"] \
        and before[0].get("lastTransitionTime") \
        else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out: dict[str, Any] = {"conditions": [condition]}
    if "observedGeneration" in condition:
        out["observedGeneration"] = generation
    return out


def observed_is_current(nbw: Mapping[str, Any], default_link_gbps: float) -> bool:
    """The NodeBandwidth's status already says what :func:`observed` would."""
    status = nbw.get("status") or {}
    want = observed(nbw, default_link_gbps)
    return status.get("observedGeneration") == want.get("observedGeneration") \
        and status.get("conditions") == want["conditions"]


def entry_key(entry: Mapping[str, Any]) -> str:
    return f"{entry.get('namespace') or 'default'}/{entry.get('name')}"


def pod_entry(key: str, pod: Pod, shift_ms: float, order: int, rotation: int
              ) -> dict[str, Any]:
    """One ``status.pods[]`` entry (a traffic pod: ``pod.pattern`` is set)."""
    assert pod.pattern is not None
    namespace, _, name = key.partition("/")
    return {"namespace": namespace, "name": name, "job": pod.job, "priority": pod.priority,
            "lowComm": False, "shiftMs": round(shift_ms, 6), "order": order,
            "periodMs": pod.pattern.period_ms, "dutyCycle": pod.pattern.duty_cycle,
            "bandwidthGbps": pod.pattern.bandwidth_gbps, "rotation": int(rotation)}


def link_base_period(state: ClusterState, node: int, config: Any = None) -> float:
    """The base period (ms) of a node's link: its traffic pods' periods unified
    (``tdmcore.metronome.base_period.unify_periods``); 0.0 when no pod on it communicates.

    **[decision]** Reserve's early exit (a perfect, uncontended fit) and the
    controller (which plans contended links only) leave no base period; the status
    still reports the link's, as the CRD describes ("0 when no pod communicates"), from
    the same unification Metronome uses, with the policy's ``gt_ms`` / ``et_frac`` /
    ``max_multiple`` when ``config`` has them.
    """
    pods = [p for p in state.pods_on(node) if p.pattern is not None]
    if not pods:
        return 0.0
    kw = {k: getattr(config, k) for k in ("gt_ms", "et_frac", "max_multiple")
          if hasattr(config, k)}
    base = unify_periods([p.pattern.period_ms for p in pods if p.pattern is not None],
                         [p.priority for p in pods], **kw)
    return float(base.period_ms)


def node_status(state: ClusterState, node: int, current: Mapping[str, Any], *,
                rotations: Mapping[str, int], base_period_ms: float | None,
                order_of: Callable[[str], int], pods: Mapping[str, Mapping[str, Any]],
                deleted: Collection[str] = (), recalculate: bool | None = None,
                keep_rotations: bool = False, config: Any = None,
                skip: Collection[str] = ()) -> dict[str, Any]:
    """The NodeBandwidth ``status`` of a node's link: the one builder, for the
    extender (after Reserve) and the controller (after its plans and offsets).

    Traffic pods only (LowComm pods have no place on the circle), each with its
    recorded ``order`` (else ``order_of(key)``) and its job's rotation from
    ``rotations`` (else the recorded one with ``keep_rotations``, else 0); then the
    entries of ``current`` that must not be lost (:func:`merge_entries`).
    ``basePeriodMs`` is ``base_period_ms``, else the link's unified period
    (:func:`link_base_period`, 0 with no traffic pod); ``recalculate`` is written
    only when given.  Pods in ``skip`` (reserved, but their binding not accepted
    yet) get no new entry.
    """
    recorded = {entry_key(e): e for e in current.get("pods") or [] if isinstance(e, dict)}
    entries = []
    for key in state.node_pods[node]:
        if key in skip:
            continue
        placed = state.placed[key]
        pod = placed.pod
        if pod.pattern is None:
            continue
        old = recorded.get(key, {})
        order = old.get("order")
        if not isinstance(order, int) or isinstance(order, bool):
            order = order_of(key)
        fallback = (old.get("rotation", 0) or 0) if keep_rotations else 0
        entries.append(pod_entry(key, pod, placed.shift_ms, order,
                                 rotations.get(pod.job, fallback)))
    entries = merge_entries(entries, current.get("pods") or [], state.cluster.nodes[node].name,
                            pods, deleted=deleted)
    status: dict[str, Any] = {
        "pods": entries,
        "basePeriodMs": base_period_ms if base_period_ms is not None
        else link_base_period(state, node, config)}
    if recalculate is not None:
        status["recalculate"] = recalculate
    return status


def merge_entries(desired: Sequence[dict[str, Any]], current: Sequence[Any], node: str,
                  pods: Mapping[str, Mapping[str, Any]], now_s: float | None = None,
                  deleted: Collection[str] = ()) -> list[dict[str, Any]]:
    """``desired`` plus the entries of ``current`` that must not be lost, by order.

    An entry the writer did not produce is kept unless its pod is known to be gone
    from this node (deleted, bound elsewhere, or finished), or it is not bound in the
    writer's cache (unknown, or still pending) and older than :data:`GRACE_S`
    (``order`` is the bind time in µs): a binding on its way arrives within the
    grace, a reservation that was released (its pod stays pending) never does.
    """
    now = time.time() if now_s is None else now_s
    mine = {entry_key(e) for e in desired}
    out = list(desired)
    for e in current:
        if not isinstance(e, dict) or entry_key(e) in mine or entry_key(e) in deleted:
            continue
        pod = pods.get(entry_key(e))
        if pod is not None:
            bound_to = (pod.get("spec") or {}).get("nodeName")
            finished = bool(bound_to) and not pod_is_placed(pod)
            if finished or (bound_to and bound_to != node):
                continue
            if bound_to:
                out.append(e)  # bound here: the writer's state will place it
                continue
            # pending in the writer's cache: the binding may be on its way (the grace)
        order = e.get("order")
        if isinstance(order, int) and not isinstance(order, bool) \
                and now - order / 1e6 <= GRACE_S:
            out.append(e)
    out.sort(key=lambda e: (e.get("order") if isinstance(e.get("order"), int) else 0,
                            entry_key(e)))
    return out


def write_status(kube: Kube | None, model: ClusterModel, node: str, compute: Compute,
                 attempts: int = 4) -> bool:
    """Write ``compute(current status)`` to NodeBandwidth ``node``; False if nothing
    was written (no change, or the API kept failing: logged, retried next time)."""
    if kube is None:
        return False
    for _ in range(attempts):
        with model.lock:
            current = model.objects["NodeBandwidth"].get(node)
        try:
            if current is None:
                try:
                    current = kube.create("NodeBandwidth", {
                        "apiVersion": f"{api.GROUP}/{api.VERSION}",
                        "kind": "NodeBandwidth", "metadata": {"name": node}, "spec": {}})
                except Conflict:  # created meanwhile by the other writer
                    current = kube.get("NodeBandwidth", node)
                model.on_event("NodeBandwidth", "MODIFIED", current)
            # no model lock here: compute takes the locks it needs, in its own order
            status = compute(current.get("status") or {})
            if status is None:
                return False
            status = {**status, **observed(current, model.default_link_gbps)}
            rv = (current.get("metadata") or {}).get("resourceVersion")
            model.expect("NodeBandwidth", node, status)
            patch: dict[str, Any] = {"status": status}
            if rv:
                patch["metadata"] = {"resourceVersion": rv}
            obj = kube.merge_patch("NodeBandwidth", node, patch, sub="status")
        except Conflict:
            try:
                fresh = kube.get("NodeBandwidth", node)
            except ApiError as exc:
                log.warning("re-reading NodeBandwidth %s failed: %s", node, exc)
                return False
            model.on_event("NodeBandwidth", "MODIFIED", fresh)
            continue
        except NotFound:  # deleted meanwhile: forget it as its watch event would
            if current is not None:
                model.on_event("NodeBandwidth", "DELETED", current)
            continue
        except ApiError as exc:
            log.warning("writing NodeBandwidth %s failed (retried later): %s", node, exc)
            return False
        model.on_event("NodeBandwidth", "MODIFIED", obj, reflected=True)
        return True
    log.warning("writing NodeBandwidth %s: still conflicting after %d attempts", node,
                attempts)
    return False
