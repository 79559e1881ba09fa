"""Door parity: one scenario through the simulator and through the Kubernetes bridge.

The simulator and the bridge are two front doors to the same policies and controller
(docs/architecture.md).  This module runs a shipped scenario through both and says,
event by event and pod by pod, where they disagree:

1. **The simulator's door.**  :func:`simulate` runs :func:`tdmcore.sim.cluster.run_cluster`
   as it is, with spies on the three places where the cluster changes (a gang placed,
   a job finished, a pattern updated by the controller): after each, the spy reads
   every placed pod's node, the rotation of its job on its link's plan, its shift
   and its job's injected idle (:class:`PodView`).  The spies only read.
2. **The scenario as Kubernetes objects.**  :func:`cluster_objects` and
   :func:`job_objects`: Nodes with the scenario's allocatable, NodeBandwidths with
   its links, a NetworkTopology with its latencies, AppGroups with its workloads, and
   per job a PodGroup (``minMember``: its workers), a PodBandwidth (its pattern) and
   its pods (requests, priority label, a required anti-affinity on the job's label
   when it is ``spread``).
3. **The bridge's door.**  :func:`replay` applies the simulator's events in order to a
   :class:`BridgeDoor` -- a job placed: its objects are created and the bridge's
   standalone scheduler places them; a job finished: its objects are deleted; a
   pattern updated: its PodBandwidth's status says so -- and reads the same view back
   from the API (pods' nodes, NodeBandwidth status rotations and shifts) and from the
   controller's answers through the node agent (shift, idle).

Both doors' outputs are live (nothing is written down here), so the comparison keeps
holding as the policies' semantics evolve.  What is compared is the decision each
door makes on the same cluster state, not queueing: a job is created on the bridge's
side when the simulator placed it.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from k8s_bridge.kube import RESOURCES, Kube, NotFound
from tdmcore.metronome.controller import Controller
from tdmcore.model import ClusterState, TrafficPattern
from tdmcore.sim.cluster import RunResult, SimJob, run_cluster
from tdmcore.sim.run.loop import Run
from tdmcore.sim.run.mirror import ControllerMirror
from tdmcore.sim.run.placement import Placement
from tdmcore.sim.scenarios import Scenario

#: The namespace every job of a replayed scenario lives in.
NAMESPACE = "parity"
#: The schedulerName of the replayed pods (the bridge's standalone scheduler's).
SCHEDULER = "tdmcore-parity"
#: The ServiceAccount of the replayed pods (its pod-bound tokens sign their reports).
TRAINER = "trainer"
#: Labels of the replayed objects.
LABEL_JOB = "tdmcore.io/job"
LABEL_GROUP = "scheduling.x-k8s.io/pod-group"
LABEL_PRIORITY = "tdmcore.io/priority"
LABEL_APPGROUP = "appgroup.diktyo.x-k8s.io"
LABEL_WORKLOAD = "appgroup.diktyo.x-k8s.io.workload"
#: Shifts and idle agree to this (NodeBandwidth status rounds shifts to 1e-6 ms).
TOLERANCE_MS = 1e-6


@dataclass(frozen=True)
class PodView:
    """What a door says about one placed pod: its node, its job's rotation on the
    node's link (None for a LowComm pod, which has no place on a circle; 0 on a link
    that is not planned), its shift and its job's injected idle (ms)."""

    node: str
    rotation: int | None
    shift_ms: float
    idle_ms: float


@dataclass
class Event:
    """A change of the simulated cluster and the simulator's view right after it."""

    kind: str  # "place", "finish" or "pattern"
    job: str
    t_ms: float
    view: dict[str, PodView]
    #: ``pattern``: the job's new pattern
    pattern: TrafficPattern | None = None


@dataclass
class Simulated:
    """The simulator's run and what it saw at every event."""

    result: RunResult
    events: list[Event] = field(default_factory=list)


# ---------------------------------------------------------------- the simulator's door
def sim_view(state: ClusterState, ctrl: Controller | None) -> dict[str, PodView]:
    """Every placed pod of the simulator's state, as :class:`PodView`."""
    out = {}
    for name, entry in state.placed.items():
        pod = entry.pod
        plan = ctrl.links.get(entry.node) if ctrl is not None else None
        rotation = None if pod.pattern is None else (
            plan.job_rotations.get(pod.job, 0) if plan is not None else 0)
        idle = ctrl.idle_ms(pod.job) if ctrl is not None and pod.pattern is not None else 0.0
        out[name] = PodView(state.cluster.nodes[entry.node].name, rotation,
                            float(entry.shift_ms), float(idle))
    return out


def simulate(scenario: Scenario, policy: str = "metronome", **run_kw: Any) -> Simulated:
    """Run ``scenario`` under ``policy`` in the simulator and record its events."""
    out: list[Event] = []
    place, finish, report = Placement.try_place, Run.finish, ControllerMirror.report

    def placed(self: Placement, job: SimJob, t: float) -> bool:
        ok = place(self, job, t)
        if ok:
            out.append(Event("place", job.name, t, sim_view(self.state, self.controller)))
        return ok

    def finished(self: Run, name: str, t: float) -> None:
        finish(self, name, t)
        out.append(Event("finish", name, t, sim_view(self.state, self.controller)))

    def reported(self: ControllerMirror, j: int, t: float) -> None:
        before = {job: self.state.placed[pods[0]].pod.pattern
                  for job, pods in self.state.job_members.items()}
        report(self, j, t)
        for job, pods in self.state.job_members.items():
            pattern = self.state.placed[pods[0]].pod.pattern
            if job in before and pattern != before[job]:
                out.append(Event("pattern", job, t, sim_view(self.state, self.controller),
                                 pattern))

    with mock.patch.object(Placement, "try_place", placed), \
            mock.patch.object(Run, "finish", finished), \
            mock.patch.object(ControllerMirror, "report", reported):
        result = run_cluster(scenario.sim, scenario.jobs, policy, **run_kw)
    return Simulated(result, out)


# ---------------------------------------------------------------- Kubernetes objects
def _cpu(cores: float) -> str:
    milli = round(cores * 1000)
    if not math.isclose(milli, cores * 1000, abs_tol=1e-9):
        raise ValueError(f"cpu: {cores} cores is no whole number of millicores")
    return f"{milli}m"


def _memory(gib: float) -> str:
    kib = round(gib * 2**20)
    if kib != gib * 2**20:
        raise ValueError(f"memory: {gib} GiB is no whole number of KiB")
    return f"{kib}Ki"


def _gpus(count: float) -> str:
    if count != int(count):
        raise ValueError(f"gpu: {count} is not a whole number of GPUs")
    return str(int(count))


def _link(gbps: float) -> int | str:
    """NodeBandwidth ``spec.bandwidth``: an integer (Gbps) or a quantity in bit/s."""
    if gbps == int(gbps):
        return int(gbps)
    bits = round(gbps * 1e9)
    if bits / 1e9 != gbps:
        raise ValueError(f"link: {gbps} Gbps is no whole number of bit/s")
    return str(bits)


def cluster_objects(scenario: Scenario) -> list[dict[str, Any]]:
    """The scenario's cluster: Nodes, NodeBandwidths, a NetworkTopology (when its
    latencies are not flat) and one AppGroup per workload."""
    cluster = scenario.sim.cluster
    names = [n.name for n in cluster.nodes]
    if names != sorted(names):
        raise ValueError("the bridge orders nodes by name (ties go to the first); the "
                         f"scenario's order {names[:4]}... is another")
    out: list[dict[str, Any]] = []
    for node in cluster.nodes:
        alloc = {"cpu": _cpu(node.cpu), "memory": _memory(node.mem_gib),
                 "nvidia.com/gpu": _gpus(node.gpu), "pods": "1000"}
        out.append({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": node.name, "labels": {
                        "kubernetes.io/hostname": node.name,
                        "topology.kubernetes.io/zone": f"zone-{node.name}"}},
                    "status": {"capacity": dict(alloc), "allocatable": alloc,
                               "conditions": [{"type": "Ready", "status": "True",
                                               "reason": "KubeletReady", "message": "parity"}]}})
        out.append({"apiVersion": "tdmcore.io/v1alpha1", "kind": "NodeBandwidth",
                    "metadata": {"name": node.name},
                    "spec": {"bandwidth": _link(node.link_gbps)}})
    tau = cluster.latency
    if (tau != 1.0).any():
        origins = []
        for i, a in enumerate(names):
            costs = [{"destination": f"zone-{b}", "networkCost": float(tau[i, j] - 1.0)}
                     for j, b in enumerate(names) if j != i and tau[i, j] != 1.0]
            if costs:
                origins.append({"origin": f"zone-{a}", "costList": costs})
        out.append({"apiVersion": "networktopology.diktyo.x-k8s.io/v1alpha1",
                    "kind": "NetworkTopology",
                    "metadata": {"name": "parity", "namespace": NAMESPACE},
                    "spec": {"configmapName": "parity", "weights": [{
                        "name": "UserDefined", "topologyList": [{
                            "topologyKey": "topology.kubernetes.io/zone",
                            "originList": origins}]}]}})
    for wl in cluster.workloads.values():
        deps: dict[str, list[str]] = {job: [] for job in wl.jobs}
        for a, b in wl.dependencies:
            deps[a].append(b)
        out.append({"apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1", "kind": "AppGroup",
                    "metadata": {"name": wl.name, "namespace": NAMESPACE},
                    "spec": {"numMembers": len(wl.jobs), "workloads": [
                        {"workload": {"kind": "PyTorchJob", "name": job, "selector": job,
                                      "apiVersion": "kubeflow.org/v1",
                                      "namespace": NAMESPACE},
                         "dependencies": [{"workload": {"kind": "PyTorchJob", "name": dep,
                                                        "selector": dep,
                                                        "apiVersion": "kubeflow.org/v1",
                                                        "namespace": NAMESPACE}}
                                          for dep in deps[job]]}
                        for job in wl.jobs]}})
    return out


def job_labels(job: SimJob) -> dict[str, str]:
    """The labels of a job's pods: its identity (the AppGroup's two labels for a job of
    a workload, else ``tdmcore.io/job``), its PodGroup and its priority."""
    labels = {LABEL_GROUP: job.name, LABEL_PRIORITY: str(job.priority)}
    if job.workload is not None:
        labels.update({LABEL_APPGROUP: job.workload, LABEL_WORKLOAD: job.name})
    else:
        labels[LABEL_JOB] = job.name
    return labels


def pod_names(job: SimJob) -> list[str]:
    """The job's pods, named as the simulator names its workers."""
    return [p.name for p in job.pods()]


def job_objects(job: SimJob) -> list[dict[str, Any]]:
    """A job's PodGroup, PodBandwidth (none for a LowComm job) and pods."""
    labels = job_labels(job)
    identity = {k: v for k, v in labels.items() if k in (LABEL_JOB, LABEL_APPGROUP,
                                                         LABEL_WORKLOAD)}
    out: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
         "metadata": {"name": job.name, "namespace": NAMESPACE},
         "spec": {"minMember": job.workers}}]
    if job.pattern is not None:
        out.append({"apiVersion": "tdmcore.io/v1alpha1", "kind": "PodBandwidth",
                    "metadata": {"name": job.name, "namespace": NAMESPACE},
                    "spec": {"period": job.pattern.period_ms,
                             "duty_cycle": job.pattern.duty_cycle,
                             "bandwidth": job.pattern.bandwidth_gbps,
                             "selector": {"matchLabels": dict(identity)}}})
    for name in pod_names(job):
        spec: dict[str, Any] = {
            "schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 0,
            # the account whose pod-bound token the pod's hook sends with its reports
            "serviceAccountName": TRAINER,
            "containers": [{"name": "trainer", "image": "example.invalid/trainer:1",
                            "resources": {"requests": {"cpu": _cpu(job.cpu),
                                                       "memory": _memory(job.mem_gib)},
                                          "limits": {"nvidia.com/gpu": _gpus(job.gpu)}}}]}
        if job.spread:
            spec["affinity"] = {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": dict(identity)},
                    "topologyKey": "kubernetes.io/hostname"}]}}
        out.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": NAMESPACE,
                                 "labels": dict(labels)},
                    "spec": spec})
    return out


# ---------------------------------------------------------------- the bridge's door
def create(kube: Kube, obj: Mapping[str, Any]) -> dict[str, Any]:
    """Create ``obj`` through the API; a status it carries is written to the status
    subresource after (a create drops it, as a real API server does for Nodes)."""
    meta = obj["metadata"]
    body = {k: v for k, v in obj.items() if k != "status"}
    made = kube.create(obj["kind"], body, meta.get("namespace"))
    if "status" in obj:
        made = kube.merge_patch(obj["kind"], meta["name"], {"status": obj["status"]},
                                namespace=meta.get("namespace"), sub="status")
    return made


def delete(kube: Kube, obj: Mapping[str, Any]) -> None:
    meta = obj["metadata"]
    path = RESOURCES[obj["kind"]].path(meta.get("namespace"), meta["name"])
    with contextlib.suppress(NotFound):
        kube.request("DELETE", path, query={"gracePeriodSeconds": "0"})


class BridgeDoor:
    """The bridge's components over one API server (see :func:`replay`).

    Subclasses start the standalone scheduler, the controller and a node agent, and
    say how to wait for them: :meth:`settle` returns once the scheduler has placed
    what can be placed and the controller has written what it would write.
    """

    kube: Kube
    #: the node agent's ``/v1/report`` URL
    agent_url: str

    def settle(self, bound: Sequence[str]) -> None:
        raise NotImplementedError

    def tokens(self, pod: Mapping[str, Any]) -> dict[str, str]:
        """The headers a report of ``pod`` carries to the agent (its hook's token);
        none where the controller does not check reporters."""
        return {}

    def view(self, iteration: Callable[[str], tuple[float, float | None]]
             ) -> dict[str, PodView]:
        """Every bound pod of :data:`NAMESPACE`: its node (the API), its rotation and
        shift (its NodeBandwidth status entry), its shift and idle (the controller's
        answer to a report through the agent, which must agree with the status).

        Each pod reports one iteration, ``iteration(pod)`` (duration and comm time,
        ms): one the controller finds as planned, so that the reports move nothing
        the views compare (no pause, no pattern update)."""
        import json
        import urllib.request

        pods = {p["metadata"]["name"]: p for p in self.kube.list("Pod", NAMESPACE)["items"]
                if (p.get("spec") or {}).get("nodeName")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")}
        entries: dict[str, dict[str, Any]] = {}
        for nbw in self.kube.list("NodeBandwidth")["items"]:
            for entry in (nbw.get("status") or {}).get("pods") or []:
                if entry.get("namespace") == NAMESPACE:
                    entries[entry["name"]] = entry
        out = {}
        now_ms = time.time() * 1000.0
        for name, pod in sorted(pods.items()):
            duration, comm = iteration(name)
            body = json.dumps({"namespace": NAMESPACE, "pod": name, "iterations": [
                {"start_ms": now_ms - 2.0 * duration, "duration_ms": duration,
                 "comm_ms": comm}]})
            request = urllib.request.Request(self.agent_url, data=body.encode(), method="POST",
                                             headers={"Content-Type": "application/json",
                                                      **self.tokens(pod)})
            with urllib.request.urlopen(request, timeout=10) as resp:
                answer = json.loads(resp.read())
            if answer.get("controller") == "unreachable":
                raise AssertionError(f"the agent failed open for {name}: {answer}")
            entry = entries.get(name)
            shift = float(answer["shift_ms"])
            if entry is not None and abs(float(entry["shiftMs"]) - shift) > TOLERANCE_MS:
                raise AssertionError(f"{name}: NodeBandwidth says shiftMs "
                                     f"{entry['shiftMs']}, the controller's answer {shift}")
            rotation = None if entry is None else int(entry.get("rotation", 0))
            out[name] = PodView(str(pod["spec"]["nodeName"]), rotation, shift,
                                float(answer.get("idle_ms") or 0.0))
        return out


def replay(door: BridgeDoor, scenario: Scenario, events: Sequence[Event]
           ) -> list[dict[str, PodView]]:
    """Apply the simulator's ``events`` to the bridge through ``door``; the bridge's
    view after each."""
    jobs = {j.name: j for j in scenario.jobs}
    job_of = {pod: j.name for j in scenario.jobs for pod in pod_names(j)}
    patterns = {j.name: j.pattern for j in scenario.jobs}
    idle: dict[str, float] = {}

    def iteration(pod: str) -> tuple[float, float | None]:
        """An iteration as planned: the pattern's period and comm time, plus the idle
        the controller asked of the pod last (its thresholds' baseline)."""
        pattern = patterns[job_of[pod]]
        if pattern is None:
            return 1000.0, None
        return pattern.period_ms + idle.get(pod, 0.0), pattern.comm_ms

    views = []
    for event in events:
        job = jobs[event.job]
        if event.kind == "place":
            for obj in job_objects(job):
                create(door.kube, obj)
            door.settle(pod_names(job))
        elif event.kind == "finish":
            for obj in reversed(job_objects(job)):
                delete(door.kube, obj)
            door.settle([])
        else:
            assert event.pattern is not None
            patterns[job.name] = event.pattern
            door.kube.merge_patch("PodBandwidth", job.name, {"status": {
                "observedPeriodMs": event.pattern.period_ms,
                "observedDutyCycle": event.pattern.duty_cycle}},
                namespace=NAMESPACE, sub="status")
            door.settle([])
        view = door.view(iteration)
        idle.update({pod: v.idle_ms for pod, v in view.items()})
        views.append(view)
    return views


def mismatches(events: Sequence[Event], views: Sequence[Mapping[str, PodView]]) -> list[str]:
    """Where the bridge's ``views`` differ from the simulator's, event by event."""
    assert len(views) == len(events)
    return [f"event {index} ({event.kind} {event.job} at {event.t_ms / 1e3:.1f} s): {line}"
            for index, (event, view) in enumerate(zip(events, views, strict=True))
            for line in differences(event.view, view)]


def differences(sim: Mapping[str, PodView], bridge: Mapping[str, PodView]) -> list[str]:
    """What the two views disagree on, one line per pod and field."""
    out = []
    for name in sorted(set(sim) | set(bridge)):
        a, b = sim.get(name), bridge.get(name)
        if a is None or b is None:
            out.append(f"{name}: placed by {'the bridge' if a is None else 'the simulator'} "
                       f"only ({a or b})")
            continue
        if a.node != b.node:
            out.append(f"{name}: node {a.node} (simulator) != {b.node} (bridge)")
        if a.rotation != b.rotation:
            out.append(f"{name}: rotation {a.rotation} (simulator) != {b.rotation} (bridge)")
        for key in ("shift_ms", "idle_ms"):
            x, y = getattr(a, key), getattr(b, key)
            if abs(x - y) > TOLERANCE_MS:
                out.append(f"{name}: {key} {x:.6f} (simulator) != {y:.6f} (bridge)")
    return out

