"""The controller over the API: global offsets, recalculation, regulation.

It runs :class:`tdmcore.metronome.controller.Controller` -- the simulator's controller, not
a second implementation -- on the ClusterState that
:class:`~k8s_bridge.cache.ClusterModel` rebuilds from the API, and writes what it
decides back into the API:

* **offsets** (§III-C "Global offset") and **rotations**: each link's plan is
  restored from its NodeBandwidth status (``status.recalculate`` -> the offline
  recalculation, ``optimal`` mode; else ``first``, what Reserve computed), then
  :meth:`Controller.update_offsets` gives every pod its global shift, written to
  ``status.pods[].shiftMs`` / ``rotation`` of its node's NodeBandwidth;
* **regulation**: agents POST iteration times to ``/v1/report``; a low-priority
  pod with more than ``o_t`` slow iterations in its window is told to pause so
  that its next iteration starts on its target phase; every answer carries the
  idle the link plans inject into the pod's compute phase (``idle_ms``,
  :meth:`Controller.idle_ms`), which the hook sleeps once per iteration;
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
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from werkzeug.wrappers import Request

from tdmcore.metronome.controller import Controller, PatternUpdate, Readjustment
from tdmcore.metronome.link import LinkPlan
from tdmcore.metronome.policies import make_policy
from tdmcore.metronome.policies.metronome import link_pods
from tdmcore.model import ClusterState

from . import convert
from .api import POD_AUTHORIZATION, REPORT_PATH, ReportError, validate_report
from .auth import Caller, ReportAuth
from .cache import ClusterModel
from .events import EventSender, pod_event
from .kube import ApiError, Kube
from .metrics import ControllerMetrics
from .once import Once
from .records import entry_key, node_status, observed_is_current, write_status
from .web import HttpError, JsonApp, read_json

__all__ = ["ControllerService", "LeaderForwarder"]

log = logging.getLogger(__name__)

_TOL = 1e-6

#: how far ahead of the controller's clock an iteration may start (ms): a node whose
#: clock jumped ahead would otherwise pin its job's phase anchor (the latest start)
#: in the future until real time caught up
MAX_CLOCK_AHEAD_MS = 60_000.0


class ControllerService:
    """Reconciles links and offsets into the API and regulates on reports."""

    def __init__(self, model: ClusterModel, kube: Kube | None, policy: str = "metronome",
                 *, leader: threading.Event | None = None,
                 auth: ReportAuth | None = None) -> None:
        self.model = model
        self.kube = kube
        #: who may report (None: anyone -- ``--report-auth none``, tests)
        self.auth = auth
        #: posts the PatternUpdated Events in the background: never under :attr:`lock`
        self.events = EventSender(kube) if kube is not None else None
        self._refusals = Once()  # refused reporters logged, by address and reason
        self.policy = make_policy(policy)
        self.lock = threading.RLock()
        self.controller: Controller | None = None
        # (cluster, link capacities) the controller was planned on
        self._links: tuple[Any, list[float]] | None = None
        self._flags: dict[int, bool] = {}
        #: set while this replica may act (always set without leader election)
        self.leading = leader if leader is not None else threading.Event()
        if leader is None:
            self.leading.set()
        self.app = JsonApp("tdmcore_controller")
        #: the controller's metrics (:mod:`k8s_bridge.metrics`)
        self.metrics = ControllerMetrics(
            self.app.registry, leading=lambda: 1.0 if self.leading.is_set() else 0.0)
        if kube is not None and kube.on_error is None:
            kube.on_error = self.metrics.error
        #: set on a standby replica: relays a report body (and the agent's and the
        #: pod's token headers, which the leader checks again) to the leader
        self.forward: Callable[[Any, Mapping[str, str]], tuple[int, Any]] | None = None
        self.app.route(REPORT_PATH, self.handle_report)

    # ------------------------------------------------------------ controller
    def current(self) -> Controller:
        """The Controller over the model's current state (rebuilt with it).

        Each link's plan is restored in the mode its NodeBandwidth records
        (``status.recalculate``: ``optimal``) when the recorded pods are the link's
        pods; a link whose pods changed since it was recorded is planned ``optimal``,
        as the simulator's controller replans a stale link (``update_offsets``).
        """
        with self.model.lock:
            state = self.model.state()
            recorded = self._recorded(state)
        old = self.controller
        # a Node or link change is applied to the same state in place: the
        # controller's plans hold only for the cluster and capacities they were made on
        links = (state.cluster, state.cluster.link_gbps.tolist())
        if old is not None and old.state is state and self._links == links:
            return old
        new = Controller.for_policy(state, self.policy)
        flags: dict[int, bool] = {}
        plans: dict[int, LinkPlan | bool] = {}
        for node in range(len(state.cluster)):
            traffic = link_pods(state, node)
            if len(traffic) < 2:
                continue
            flag, keys = recorded.get(node, (True, frozenset()))
            if keys != frozenset(p.name for p in traffic):
                flag = True  # changed since recorded: the offline recalculation
            flags[node] = flag
            plan = None if old is None else old.links.get(node)
            if plan is not None and tuple(plan.pods) == tuple(traffic) \
                    and self._flags.get(node) == flag \
                    and plan.capacity_gbps == state.cluster.link_gbps[node]:
                plans[node] = plan  # same pods, capacity and mode: same plan
            else:
                plans[node] = flag
                if flag:
                    self.metrics.recalculations.inc()
        # iteration windows and anchors survive a rebuild of the state
        new.restore(plans, watches=None if old is None else old.export_watches(),
                    anchors_ms=None if old is None else old.anchors_ms)
        self._flags = flags
        self._links = links
        self.controller = new
        return new

    def _recorded(self, state: ClusterState) -> dict[int, tuple[bool, frozenset[str]]]:
        """Per node: the recorded ``recalculate`` flag and the recorded pods."""
        out = {}
        for name, nbw in self.model.objects["NodeBandwidth"].items():
            node = state.cluster.node_index.get(name)
            if node is None:
                continue
            status = nbw.get("status") or {}
            keys = frozenset(entry_key(e) for e in status.get("pods") or []
                             if isinstance(e, dict) and not e.get("lowComm"))
            out[node] = (bool(status.get("recalculate", False)), keys)
        return out

    # ------------------------------------------------------------- reconcile
    def desired_status(self, ctrl: Controller, node: int,
                       current: Mapping[str, Any]) -> dict[str, Any]:
        """The node's NodeBandwidth status as the controller would write it
        (:func:`records.node_status <k8s_bridge.records.node_status>`): its link
        plan's rotations and base period, a new entry ordered by bind time
        (:meth:`_bind_order`)."""
        plan = ctrl.links.get(node)
        return node_status(
            ctrl.state, node, current, rotations=plan.job_rotations if plan is not None else {},
            base_period_ms=plan.base.period_ms if plan is not None else None,
            order_of=self._bind_order, pods=self.model.objects["Pod"],
            deleted=self.model.deleted_pods,
            recalculate=self._flags.get(node, bool(current.get("recalculate", False))),
            config=getattr(self.policy, "config", None))

    def _bind_order(self, key: str) -> int:
        """The order of an entry this controller records first
        (:func:`convert.bind_order <k8s_bridge.convert.bind_order>`)."""
        return convert.bind_order(self.model.objects["Pod"].get(key) or {})

    def reconcile(self) -> int:
        """One pass (timed: ``tdmcore_controller_reconcile_seconds``); see
        :meth:`_reconcile`."""
        with self.metrics.reconcile_seconds.time():
            return self._reconcile()

    def _reconcile(self) -> int:
        """One pass; returns the number of objects written (0 when in sync).

        The controller is brought up to date under :attr:`lock`; the writes go out
        without it (each ``compute`` takes the locks and gives up when the
        controller moved on meanwhile), so reports are not held up by API calls.
        """
        if not self.leading.is_set():
            return 0
        with self.lock:
            try:
                ctrl = self.current()
            except LookupError:
                return 0
            self.metrics.reconciles.inc()
            state = ctrl.state
            todo: list[tuple[int, str]] = []
            for node, n in enumerate(state.cluster.nodes):
                with self.model.lock:
                    nbw = self.model.objects["NodeBandwidth"].get(n.name)
                current = (nbw or {}).get("status") or {}
                traffic = any(state.placed[k].pod.pattern is not None
                              for k in state.node_pods[node])
                # nodes without traffic pods and without a record: nothing to write,
                # unless their NodeBandwidth has not said what generation it observed
                if traffic or current.get("pods") or (
                        nbw is not None
                        and not observed_is_current(nbw, self.model.default_link_gbps)):
                    todo.append((node, n.name))
        writes = 0
        for node, name in todo:

            def compute(cur: Mapping[str, Any], node: int = node,
                        name: str = name) -> dict[str, Any] | None:
                with self.lock, self.model.lock:
                    if self.controller is not ctrl:
                        return None  # the state moved on: the next pass recomputes
                    desired = self.desired_status(ctrl, node, cur)
                    nbw = self.model.objects["NodeBandwidth"].get(name) or {}
                    current = observed_is_current(nbw, self.model.default_link_gbps)
                return None if current and _same(cur, desired) else desired

            if write_status(self.kube, self.model, name, compute):
                self.metrics.writes.labels("NodeBandwidth").inc()
                writes += 1
        return writes + self._reconcile_matches()

    def _reconcile_matches(self) -> int:
        """``status.matchedPods`` of every PodBandwidth: the live pods it describes."""
        if self.kube is None:
            return 0
        with self.model.lock:
            pbw_objects = dict(self.model.objects["PodBandwidth"])
            pod_objects = list(self.model.objects["Pod"].values())
        counts: dict[str, int] = {key: 0 for key in pbw_objects}
        pbws = list(pbw_objects.values())
        for pod in pod_objects:
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
            pbw = pbw_objects.get(key)
            if pbw is None or (pbw.get("status") or {}).get("matchedPods") == count:
                continue
            namespace, _, name = key.partition("/")
            try:
                obj = self.kube.merge_patch("PodBandwidth", name, {
                    "status": {"matchedPods": count}}, namespace=namespace, sub="status")
            except ApiError as exc:
                log.warning("writing PodBandwidth %s failed (retried next pass): %s", key, exc)
                continue
            self.metrics.writes.labels("PodBandwidth").inc()
            # matchedPods does not change any pattern: no rebuild needed
            self.model.on_event("PodBandwidth", "MODIFIED", obj, reflected=True)
            writes += 1
        return writes

    # --------------------------------------------------------------- reports
    def report(self, key: str, starts: list[float], durations: list[float],
               comms: list[float] | None, caller: Caller | None = None,
               sender: Caller | None = None) -> dict[str, Any]:
        """Feed iterations to the Controller; the agent's answer.  Who reported -- the
        pod that sent it (``sender``) through the agent that relayed it (``caller``) --
        is named in the log line and the Event of a pattern change."""
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
                actions = ctrl.report_iterations(key, starts, durations, comms, batch=True)
            except ValueError as exc:
                raise HttpError(400, str(exc)) from exc
            self.metrics.reports.inc(len(starts))
            pattern = entry.pod.pattern
            job = entry.pod.job
            pause = 0.0
            events: list[dict[str, Any]] = []  # sent once the lock is released
            updates = [a for _, a in actions if isinstance(a, PatternUpdate)]
            if any(isinstance(a, Readjustment) for _, a in actions) and pattern is not None:
                # The batch's one readjustment (report_iterations(batch=True)) is
                # computed from the end of the last reported iteration, as the pod
                # applies it after the batch.
                pause = ctrl.pause_ms(job, starts[-1] + durations[-1])
                self.metrics.actions.labels("pause").inc()
                self.metrics.pause_seconds.observe(pause / 1000.0)
            for update in updates:
                self.metrics.actions.labels("pattern_update").inc()
                if not self._write_pattern(update, _reporter(caller, sender), events):
                    # applied to the controller's state but not in the API: rebuild
                    # from the API (the update is dropped; later reports re-detect it)
                    self.model.invalidate()
            period = pattern.period_ms if pattern is not None else None
            # High-priority jobs are never moved (spec: they run as if alone).
            target = None if ctrl.is_high(job) else ctrl.target_phase(job)
            ref = ctrl.reference(job)
            lattice = ctrl.phase_period_ms(job)
            align = None
            if target is not None and period is not None and ref is not None:
                offset = (ctrl.offsets_ms.get(job, 0.0) - ctrl.offsets_ms.get(ref, 0.0)) \
                    % lattice
                align = f"{ref}@{offset:.3f}"  # changes when the assignment does
            # Idle injected into the job's compute phase (base period unification,
            # step 2): part of the instruction, slept by the hook every iteration
            # (spec §7, "Idle reaches the training loop"), as the simulator's engine
            # stretches the compute phase by it.
            idle = ctrl.idle_ms(job) if pattern is not None else 0.0
            answer = {"pause_ms": float(pause), "shift_ms": float(entry.shift_ms),
                      "idle_ms": float(idle), "period_ms": period,
                      "phase_period_ms": None if period is None else float(lattice),
                      "target_phase_ms": None if target is None or period is None
                      else float(target % lattice),
                      "align": align}
        if self.events is not None:
            for event in events:
                self.events.send(event)
        if updates:
            self.reconcile()
        return answer

    def _write_pattern(self, update: PatternUpdate, by: str = "an unauthenticated reporter",
                       events: list[dict[str, Any]] | None = None) -> bool:
        """Write ``update`` to its PodBandwidth's status; False if it is not there.

        Every change of a scheduling input is said: one INFO line, and a Normal Event
        ``PatternUpdated`` on each pod of the job the controller knows, appended to
        ``events`` for the caller to send once it has released :attr:`lock` (best
        effort: :class:`~k8s_bridge.events.EventSender`; a failed Event is logged,
        the update stands)."""
        message = (f"traffic pattern of job {update.job} re-measured from iteration reports "
                   f"by {by}: period {update.old.period_ms:g} -> {update.new.period_ms:g} ms, "
                   f"duty cycle {update.old.duty_cycle:.3g} -> {update.new.duty_cycle:.3g} "
                   f"({update.reason})")
        if self.kube is None:
            log.info("%s", message)
            return True  # no API (tests): the controller's own state is the truth
        with self.model.lock:
            pod_json = self.model.objects["Pod"].get(update.pods[0]) if update.pods else None
            pbws = list(self.model.objects["PodBandwidth"].values())
        pbw = None if pod_json is None else convert.podbandwidth_for(pod_json, pbws)
        if pbw is None:
            return False
        meta = pbw.get("metadata") or {}
        status = {"observedPeriodMs": update.new.period_ms,
                  "observedDutyCycle": update.new.duty_cycle}
        try:
            obj = self.kube.merge_patch("PodBandwidth", str(meta.get("name")),
                                        {"status": status}, namespace=meta.get("namespace"),
                                        sub="status")
        except ApiError as exc:
            log.warning("writing the pattern update of %s failed (dropped): %s", update.job,
                        exc)
            return False
        self.metrics.writes.labels("PodBandwidth").inc()
        self.model.on_event("PodBandwidth", "MODIFIED", obj)
        log.info("%s; written to PodBandwidth %s/%s", message, meta.get("namespace"),
                 meta.get("name"))
        if events is not None:
            with self.model.lock:
                pods = [self.model.objects["Pod"].get(key) or {"metadata": {
                    "namespace": key.partition("/")[0], "name": key.partition("/")[2]}}
                    for key in update.pods]
            events += [pod_event(pod, "Normal", "PatternUpdated", message,
                                 "tdmcore-controller") for pod in pods]
        return True

    def handle_report(self, request: Request) -> Any:
        try:
            return self._handle_report(request)
        except HttpError as exc:
            if exc.status in (400, 401, 403):
                self.metrics.refused_reports.labels(str(exc.status)).inc()
            if exc.status in (401, 403):
                source = request.remote_addr or "?"
                # once per source and reason: one agent relays for every pod of its
                # node, whose reasons differ (keyed by the source alone, pods reporting
                # in turn were each logged every time)
                if self._refusals.first((source, exc.message), ""):
                    log.warning("refused a report from %s: %s", source, exc.message)
            raise

    def _handle_report(self, request: Request) -> Any:
        tokens = {name: value for name in ("Authorization", POD_AUTHORIZATION)
                  if (value := request.headers.get(name))}
        caller = self.auth.check(tokens.get("Authorization")) \
            if self.auth is not None else None
        body = read_json(request, 1 << 20)
        try:  # the agent checked it already; the controller may be called directly
            report = validate_report(body)
        except ReportError as exc:
            raise HttpError(400, str(exc)) from exc
        iterations = report["iterations"]
        key = f"{report['namespace']}/{report['pod']}"
        starts = [it["start_ms"] for it in iterations]
        durations = [it["duration_ms"] for it in iterations]
        comms = [it["comm_ms"] for it in iterations]
        with self.model.lock:
            pod = self.model.objects["Pod"].get(key) or {}
        # the training pod itself, by its own token: the agent relays whatever reaches
        # its port, so its token alone does not say which pod sent the report
        sender = self.auth.check_pod(tokens.get(POD_AUTHORIZATION), report["namespace"],
                                     report["pod"], (pod.get("metadata") or {}).get("uid")) \
            if self.auth is not None else None
        if not self.leading.is_set() and self.forward is not None:
            # a standby relays to the leader, with both tokens
            status, answer = self.forward(body, tokens)
            if status != 200:
                raise HttpError(status, str((answer or {}).get("Error", "leader failed")),
                                answer if isinstance(answer, dict) else None)
            return answer
        ahead = max(starts) - time.time() * 1000.0
        if ahead > MAX_CLOCK_AHEAD_MS:
            raise HttpError(400, f"start_ms: {ahead / 1000.0:.0f} s ahead of the "
                                 f"controller's clock (more than "
                                 f"{MAX_CLOCK_AHEAD_MS / 1000.0:.0f} s; is the node's "
                                 f"clock synchronised?)")
        node = report.get("node")
        bound = (pod.get("spec") or {}).get("nodeName")
        if caller is not None and caller.pod is not None:
            # a pod-bound token speaks for its own pod's node, whatever the body says
            with self.model.lock:
                own = ReportAuth.node_of(caller, self.model.objects["Pod"])
            if own is None:
                raise HttpError(403, f"the reporting pod {caller.pod!r} is not known to "
                                     f"the controller (yet)")
            if node and node != own:
                raise HttpError(403, f"node: {caller.pod!r} runs on {own!r} and may "
                                     f"report for that node only, not {node!r}")
            node = own
        if node and bound and node != bound:
            # the agent fills in its own node: a report from elsewhere is refused
            raise HttpError(403, f"node: pod {key!r} runs on {bound!r}, not {node!r}")
        return self.report(key, starts, durations,
                           None if any(c is None for c in comms) else comms, caller, sender)

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


def _reporter(caller: Caller | None, sender: Caller | None) -> str:
    """Who reported, for the log line and the Event of a pattern change."""
    if sender is not None:
        return f"pod {sender.pod} ({sender.user})" + (f" through the agent {caller}"
                                                      if caller is not None else "")
    return str(caller) if caller is not None else "an unauthenticated reporter"


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


class LeaderForwarder:
    """Relays a report to the replica holding the Lease (its pod IP, from the Lease's
    holder -- the pod name -- and the Pod), so that every replica can stay Ready
    behind the Service while only the leader decides."""

    def __init__(self, kube: Kube, lease_name: str, lease_namespace: str, port: int,
                 timeout_s: float = 1.0) -> None:
        self.kube = kube
        self.lease_name = lease_name
        self.namespace = lease_namespace
        self.port = port
        self.timeout_s = timeout_s
        self._cached: tuple[float, str] | None = None

    def _leader_url(self) -> str:
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < 5.0:
            return self._cached[1]
        lease = self.kube.get("Lease", self.lease_name, self.namespace)
        holder = (lease.get("spec") or {}).get("holderIdentity")
        if not holder:
            raise ApiError(503, "NoLeader", "the lease has no holder")
        pod = self.kube.get("Pod", str(holder), self.namespace)
        ip = (pod.get("status") or {}).get("podIP")
        if not ip:
            raise ApiError(503, "NoLeader", f"the leader {holder!r} has no pod IP")
        url = f"http://{ip}:{self.port}/v1/report"
        self._cached = (now, url)
        return url

    def __call__(self, body: Any, tokens: Mapping[str, str] | None = None
                 ) -> tuple[int, Any]:
        """POST ``body`` to the leader with the token headers ``tokens``."""
        import json
        import urllib.error
        import urllib.request

        try:
            url = self._leader_url()
            headers = {"Content-Type": "application/json", **(tokens or {})}
            req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                         headers=headers)
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return int(resp.status), json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            try:
                return int(exc.code), json.loads(exc.read())
            except ValueError:
                return int(exc.code), {"Error": "the leader answered non-JSON"}
        except (ApiError, OSError, ValueError) as exc:
            self._cached = None
            return 503, {"Error": f"no leader reachable: {exc}"}
