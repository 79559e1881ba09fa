"""The controller over the API: global offsets, recalculation, regulation.

It runs :class:`tdmcore.controller.Controller` -- the simulator's controller, not
a second implementation -- on the ClusterState that
:class:`~k8s_bridge.model.ClusterModel` rebuilds from the API, and writes what it
decides back into the API:

* **offsets** (§III-C "Global offset") and **rotations**: each link's plan is
  restored from its NodeBandwidth status (``status.recalculate`` -> the offline
  recalculation, ``optimal`` mode; else ``first``, what Reserve computed), then
  :meth:`Controller.update_offsets` gives every pod its global shift, written to
  ``status.pods[].shiftMs`` / ``rotation`` of its node's NodeBandwidth;
* **regulation**: agents POST iteration times to ``/v1/report``; a low-priority
  pod with more than ``o_t`` slow iterations in its window is told to pause so
  that its next iteration starts on its target phase;
* **pattern updates**: a changed pattern is written to the PodBandwidth's
  ``status.observedPeriodMs`` / ``observedDutyCycle`` (which then override the
  spec everywhere) and the links are recomputed.

Idempotent: a reconcile that finds the API as it would write it writes nothing.
Restart-safe: everything it needs is in the API (pods, NodeBandwidth and
PodBandwidth objects); the iteration windows start empty after a restart, as
they do for a newly placed pod.  With ``--leader-elect`` only the holder of the
Lease reconciles and answers reports (others answer 503; agents fail open).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter, Gauge
from werkzeug.wrappers import Request

from tdmcore.controller import Controller, PatternUpdate, Readjustment
from tdmcore.model import ClusterState
from tdmcore.policies import make_policy
from tdmcore.policies.metronome import link_pods

from . import convert
from .kube import ApiError, Kube, NotFound
from .model import ClusterModel
from .web import HttpError, JsonApp, read_json

__all__ = ["ControllerService", "MAX_REPORT", "parse_report"]

log = logging.getLogger(__name__)

#: Most iterations one report may carry.
MAX_REPORT = 1024
_TOL = 1e-6


def _finite(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(float(value)):
        raise HttpError(400, f"{name}: expected a finite number, got {value!r:.40}")
    return float(value)


def parse_report(body: Any) -> tuple[str, list[float], list[float], list[float] | None]:
    """A ``/v1/report`` body -> (pod key, starts, durations, comm times or None)."""
    if not isinstance(body, dict):
        raise HttpError(400, "body: expected a JSON object")
    names = []
    for key in ("namespace", "pod"):
        value = body.get(key)
        if not isinstance(value, str) or not value:
            raise HttpError(400, f"{key}: expected a non-empty string")
        names.append(value)
    iterations = body.get("iterations")
    if not isinstance(iterations, list) or not 1 <= len(iterations) <= MAX_REPORT:
        raise HttpError(400, f"iterations: expected a list of 1..{MAX_REPORT} objects")
    starts, durations, comms = [], [], []
    for i, it in enumerate(iterations):
        if not isinstance(it, dict):
            raise HttpError(400, f"iterations[{i}]: expected an object")
        starts.append(_finite(it.get("start_ms"), f"iterations[{i}].start_ms"))
        d = _finite(it.get("duration_ms"), f"iterations[{i}].duration_ms")
        if d <= 0:
            raise HttpError(400, f"iterations[{i}].duration_ms: must be > 0")
        durations.append(d)
        c = it.get("comm_ms")
        if c is not None:
            c = _finite(c, f"iterations[{i}].comm_ms")
            if not 0 <= c <= d:
                raise HttpError(400, f"iterations[{i}].comm_ms: must lie in [0, duration_ms]")
        comms.append(c)
    all_comm = None if any(c is None for c in comms) else [float(c or 0.0) for c in comms]
    return f"{names[0]}/{names[1]}", starts, durations, all_comm


class ControllerService:
    """Reconciles links and offsets into the API and regulates on reports."""

    def __init__(self, model: ClusterModel, kube: Kube | None, policy: str = "metronome",
                 *, leader: threading.Event | None = None) -> None:
        self.model = model
        self.kube = kube
        self.policy = make_policy(policy)
        self.lock = threading.RLock()
        self.controller: Controller | None = None
        self._flags: dict[int, bool] = {}
        #: set while this replica may act (always set without leader election)
        self.leading = leader if leader is not None else threading.Event()
        if leader is None:
            self.leading.set()
        self.app = JsonApp("tdmcore_controller")
        reg = self.app.registry
        self.m_reconciles = Counter("tdmcore_controller_reconciles", "Reconcile passes",
                                    registry=reg)
        self.m_writes = Counter("tdmcore_controller_writes", "Status writes", ["kind"],
                                registry=reg)
        self.m_actions = Counter("tdmcore_controller_actions", "Regulation actions", ["kind"],
                                 registry=reg)
        self.m_reports = Counter("tdmcore_controller_reported_iterations",
                                 "Iterations reported by agents", registry=reg)
        leader_gauge = Gauge("tdmcore_controller_leader", "1 while this replica leads",
                             registry=reg)
        leader_gauge.set_function(lambda: 1.0 if self.leading.is_set() else 0.0)
        self.app.route("/v1/report", self.handle_report)

    # ------------------------------------------------------------ controller
    def current(self) -> Controller:
        """The Controller over the model's current state (rebuilt with it)."""
        state = self.model.state()
        old = self.controller
        if old is not None and old.state is state:
            return old
        new = Controller.for_policy(state, self.policy)
        flags = self._recorded_flags(state)
        for node in range(len(state.cluster)):
            traffic = link_pods(state, node)
            if len(traffic) < 2:
                continue
            flag = flags.get(node, False)
            plan = None if old is None else old.links.get(node)
            if plan is not None and tuple(plan.pods) == tuple(traffic) \
                    and self._flags.get(node) == flag \
                    and old is not None and old.state.cluster is state.cluster:
                new.links[node] = plan  # same pods, same request: same plan
            else:
                new.plan_link(node, optimal=flag)
        if old is not None:
            # iteration windows and anchors survive a rebuild of the state
            new._watch.update({p: w for p, w in old._watch.items() if p in state.placed})
            new.anchors_ms.update({j: a for j, a in old.anchors_ms.items()
                                   if j in state.job_members})
        new.update_offsets()
        self._flags = flags
        self.controller = new
        return new

    def _recorded_flags(self, state: ClusterState) -> dict[int, bool]:
        out = {}
        for name, nbw in self.model.objects["NodeBandwidth"].items():
            node = state.cluster.node_index.get(name)
            if node is not None:
                out[node] = bool((nbw.get("status") or {}).get("recalculate", False))
        return out

    # ------------------------------------------------------------- reconcile
    def desired_status(self, ctrl: Controller, node: int) -> dict[str, Any]:
        state = ctrl.state
        name = state.cluster.nodes[node].name
        nbw = self.model.objects["NodeBandwidth"].get(name) or {}
        current = nbw.get("status") or {}
        recorded = {f"{e.get('namespace') or 'default'}/{e.get('name')}": e
                    for e in current.get("pods") or [] if isinstance(e, dict)}
        plan = ctrl.links.get(node)
        rotations = plan.job_rotations if plan is not None else {}
        pods = []
        for key in state.node_pods[node]:
            placed = state.placed[key]
            pod = placed.pod
            namespace, _, short = key.partition("/")
            order = recorded.get(key, {}).get("order")
            if not isinstance(order, int) or isinstance(order, bool):
                order = self._creation_order(key)
            entry: dict[str, Any] = {"namespace": namespace, "name": short, "job": pod.job,
                                     "priority": pod.priority, "lowComm": pod.low_comm,
                                     "shiftMs": round(placed.shift_ms, 6), "order": order}
            if pod.pattern is not None:
                entry.update(periodMs=pod.pattern.period_ms,
                             dutyCycle=pod.pattern.duty_cycle,
                             bandwidthGbps=pod.pattern.bandwidth_gbps,
                             rotation=int(rotations.get(pod.job, 0)))
            pods.append(entry)
        return {"pods": pods,
                "basePeriodMs": plan.base.period_ms if plan is not None else 0.0,
                "recalculate": bool(current.get("recalculate", False))}

    def _creation_order(self, key: str) -> int:
        pod = self.model.objects["Pod"].get(key) or {}
        stamp = str((pod.get("metadata") or {}).get("creationTimestamp", ""))
        try:
            t = time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        except ValueError:
            t = 0.0
        return int(t * 1e6)

    def reconcile(self) -> int:
        """One pass; returns the number of objects written (0 when in sync)."""
        if not self.leading.is_set():
            return 0
        with self.lock:
            try:
                ctrl = self.current()
            except LookupError:
                return 0
            self.m_reconciles.inc()
            writes = 0
            state = ctrl.state
            for node, n in enumerate(state.cluster.nodes):
                nbw = self.model.objects["NodeBandwidth"].get(n.name)
                current = (nbw or {}).get("status") or {}
                if not state.node_pods[node] and not current.get("pods"):
                    continue
                desired = self.desired_status(ctrl, node)
                if _same(current, desired):
                    continue
                if self._write_nbw(n.name, desired):
                    writes += 1
            return writes + self._reconcile_matches()

    def _reconcile_matches(self) -> int:
        """``status.matchedPods`` of every PodBandwidth: the live pods it describes."""
        if self.kube is None:
            return 0
        counts: dict[str, int] = {key: 0 for key in self.model.objects["PodBandwidth"]}
        pbws = list(self.model.objects["PodBandwidth"].values())
        for pod in self.model.objects["Pod"].values():
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            try:
                pbw = convert.podbandwidth_for(pod, pbws)
            except ValueError:
                continue
            if pbw is not None:
                meta = pbw.get("metadata") or {}
                key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
                counts[key] = counts.get(key, 0) + 1
        writes = 0
        for key, count in counts.items():
            pbw = self.model.objects["PodBandwidth"].get(key)
            if pbw is None or (pbw.get("status") or {}).get("matchedPods") == count:
                continue
            namespace, _, name = key.partition("/")
            try:
                obj = self.kube.merge_patch("PodBandwidth", name, {
                    "status": {"matchedPods": count}}, namespace=namespace, sub="status")
            except ApiError as exc:
                log.warning("writing PodBandwidth %s failed (retried next pass): %s", key, exc)
                continue
            self.m_writes.labels("PodBandwidth").inc()
            # matchedPods does not change any pattern: no rebuild needed
            self.model.on_event("PodBandwidth", "MODIFIED", obj, reflected=True)
            writes += 1
        return writes

    def _write_nbw(self, node: str, status: dict[str, Any]) -> bool:
        if self.kube is None:
            return False
        self.model.expect("NodeBandwidth", node, status)
        try:
            try:
                obj = self.kube.merge_patch("NodeBandwidth", node, {"status": status},
                                            sub="status")
            except NotFound:
                self.kube.create("NodeBandwidth", {
                    "apiVersion": f"{convert.GROUP}/{convert.VERSION}",
                    "kind": "NodeBandwidth", "metadata": {"name": node}, "spec": {}})
                obj = self.kube.merge_patch("NodeBandwidth", node, {"status": status},
                                            sub="status")
        except ApiError as exc:
            log.warning("writing NodeBandwidth %s failed (retried next pass): %s", node, exc)
            return False
        self.m_writes.labels("NodeBandwidth").inc()
        # Our own write: the state and the controller's plans are what we wrote.
        self.model.on_event("NodeBandwidth", "MODIFIED", obj, reflected=True)
        return True

    # --------------------------------------------------------------- reports
    def report(self, key: str, starts: list[float], durations: list[float],
               comms: list[float] | None) -> dict[str, Any]:
        """Feed iterations to the Controller; the agent's answer."""
        if not self.leading.is_set():
            raise HttpError(503, "not the leader; try again later")
        with self.lock:
            try:
                ctrl = self.current()
            except LookupError as exc:
                raise HttpError(503, str(exc)) from exc
            entry = ctrl.state.placed.get(key)
            if entry is None:
                raise HttpError(404, f"pod: {key!r} is not placed (unknown to the controller)")
            try:
                actions = ctrl.report_iterations(key, starts, durations, comms)
            except ValueError as exc:
                raise HttpError(400, str(exc)) from exc
            self.m_reports.inc(len(starts))
            pattern = entry.pod.pattern
            job = entry.pod.job
            pause = 0.0
            updates = [a for _, a in actions if isinstance(a, PatternUpdate)]
            if any(isinstance(a, Readjustment) for _, a in actions) and pattern is not None:
                # Readjustments of earlier iterations in this batch are stale: the pause
                # is computed from the end of the last reported iteration.
                target = ctrl.target_phase(job)
                if target is None:
                    target = ctrl.offsets_ms.get(job, 0.0)
                end = starts[-1] + durations[-1]
                pause = (target - end) % pattern.period_ms
                self.m_actions.labels("pause").inc()
            for update in updates:
                self.m_actions.labels("pattern_update").inc()
                self._write_pattern(update)
            target = ctrl.target_phase(job)
            period = pattern.period_ms if pattern is not None else None
            answer = {"pause_ms": float(pause), "shift_ms": float(entry.shift_ms),
                      "period_ms": period,
                      "target_phase_ms": None if target is None or period is None
                      else float(target % period)}
        if updates:
            self.reconcile()
        return answer

    def _write_pattern(self, update: PatternUpdate) -> None:
        if self.kube is None:
            return
        pod_json = self.model.objects["Pod"].get(update.pods[0]) if update.pods else None
        pbw = None if pod_json is None else convert.podbandwidth_for(
            pod_json, self.model.objects["PodBandwidth"].values())
        if pbw is None:
            return
        meta = pbw.get("metadata") or {}
        status = {"observedPeriodMs": update.new.period_ms,
                  "observedDutyCycle": update.new.duty_cycle}
        try:
            obj = self.kube.merge_patch("PodBandwidth", str(meta.get("name")),
                                        {"status": status}, namespace=meta.get("namespace"),
                                        sub="status")
        except ApiError as exc:
            log.warning("writing the pattern update of %s failed: %s", update.job, exc)
            return
        self.m_writes.labels("PodBandwidth").inc()
        self.model.on_event("PodBandwidth", "MODIFIED", obj)

    def handle_report(self, request: Request) -> dict[str, Any]:
        key, starts, durations, comms = parse_report(read_json(request, 1 << 20))
        return self.report(key, starts, durations, comms)

    # ------------------------------------------------------------------ loop
    def run(self, stop: threading.Event, interval_s: float = 2.0) -> None:
        """Reconcile whenever the model changed, and every ``interval_s``."""
        seen = -1
        last = 0.0
        while not stop.is_set():
            now = time.monotonic()
            if self.model.changes != seen or now - last >= interval_s:
                try:
                    self.reconcile()
                except Exception:  # keep the loop alive; the next pass retries
                    log.exception("reconcile failed")
                seen = self.model.changes
                last = now
            stop.wait(0.2)


def _same(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Equal statuses, numbers within 1e-6."""
    if abs(float(current.get("basePeriodMs") or 0.0) - float(desired["basePeriodMs"])) > _TOL:
        return False
    if bool(current.get("recalculate", False)) != bool(desired["recalculate"]):
        return False
    a, b = current.get("pods") or [], desired["pods"]
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if not isinstance(x, dict) or set(x) != set(y):
            return False
        for k, v in y.items():
            w = x[k]
            if isinstance(v, float) or isinstance(w, float):
                if not isinstance(w, int | float) or abs(float(w) - float(v)) > _TOL:
                    return False
            elif w != v:
                return False
    return True
