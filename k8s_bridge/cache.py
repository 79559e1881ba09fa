"""The cluster as the bridge sees it: cached API objects -> a tdmcore ClusterState.

Informers (or tests) feed :meth:`ClusterModel.on_event`; :meth:`ClusterModel.state`
returns the :class:`~tdmcore.model.ClusterState` the policies work on, rebuilt
lazily when something that matters for scheduling changed (a pod's node, phase,
requests, labels or pattern; a node added or deleted; a NodeBandwidth's status; the
topology or AppGroups).  A change of an existing Node or of its link is applied in
place instead (:meth:`ClusterModel._update_nodes`).  Pod status churn (conditions,
container states) and Node heartbeats change nothing.

Placement order (the "deploy order" Metronome breaks ties with) is what the
NodeBandwidth status recorded at Reserve (``status.pods[].order``), else the pod's
bind time as the API has it (:func:`convert.bind_order`); shifts come from the same
status, where the controller writes them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tdmcore.model import Cluster, ClusterState, Node, Pod

from . import convert
from .informer import object_key

__all__ = ["WATCHED_KINDS", "ClusterModel"]

log = logging.getLogger(__name__)

WATCHED_KINDS = ("Node", "Pod", "NodeBandwidth", "PodBandwidth", "NetworkTopology",
                 "AppGroup", "PodGroup")
_CLUSTER_KINDS = {"Node", "NetworkTopology", "AppGroup"}
_TERMINAL = {"Succeeded", "Failed"}


def pod_is_placed(pod: Mapping[str, Any]) -> bool:
    """Bound to a node and still holding its resources."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    return bool(spec.get("nodeName")) and status.get("phase") not in _TERMINAL


def _node_signature(node: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a Node the cluster uses: allocatable, topology labels, schedulability."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    status = node.get("status") or {}
    return (repr(sorted((status.get("allocatable") or {}).items())),
            labels.get("topology.kubernetes.io/zone"),
            labels.get("topology.kubernetes.io/region"),
            convert.node_schedulable(node))


def _pod_signature(pod: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What of a pod matters to the ClusterState; None for a pod not placed (a
    pending pod changes nothing until it is bound)."""
    if not pod_is_placed(pod):
        return None
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    return (spec.get("nodeName"), spec.get("schedulerName"),
            repr(sorted((meta.get("labels") or {}).items())),
            repr([c.get("resources") if isinstance(c, dict) else None for c in containers]))


class ClusterModel:
    """JSON caches of the watched kinds and the ClusterState built from them."""

    def __init__(self, *, default_link_gbps: float = 25.0,
                 topology_weights: str = "UserDefined", incremental_nodes: bool = True) -> None:
        if isinstance(default_link_gbps, bool) or not isinstance(default_link_gbps, int | float) \
                or not 0 < default_link_gbps < float("inf"):
            raise ValueError(f"default_link_gbps: expected a finite number > 0, got "
                             f"{default_link_gbps!r}")
        self.default_link_gbps = float(default_link_gbps)
        self.topology_weights = topology_weights
        self.objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in WATCHED_KINDS}
        self.lock = threading.RLock()
        self._cluster: Cluster | None = None
        self._state: ClusterState | None = None
        self._node_json: list[dict[str, Any]] = []
        # per node (cluster order): its zone and region (convert.topology_keys)
        self._keys: list[tuple[str | None, str | None]] = []
        #: per node (cluster order): Ready and not cordoned
        self.schedulable: list[bool] = []
        # pod key -> (resourceVersion, PodBandwidth generation, gang size, domain Pod)
        self._pods: dict[str, tuple[str, int, int | None, Pod]] = {}
        # PodGroup key -> the keys of its live pods (bound or pending, not finished)
        self._group_pods: dict[str, set[str]] = {}
        #: PodGroup key -> the gang size of its pods (:func:`convert.gang_size`)
        self.gang_sizes: dict[str, int] = {}
        self._pbw_generation = 0
        self._workloads: tuple[Any, ...] = ()
        # node name -> ((Node signature, link Gbps), converted Node)
        self._nodes: dict[str, tuple[tuple[Any, ...], Node]] = {}
        # (kind, key) -> the status this process wrote and the state reflects
        self._expected: dict[tuple[str, str], dict[str, Any]] = {}
        self._signatures: dict[str, tuple[Any, ...]] = {}
        #: pod key -> when its deletion was seen (monotonic s): tombstones
        self.deleted_pods: dict[str, float] = {}
        # pod key -> (node, the API's latest version of the pod): pods this process
        # assumed bound (Reserve ran, the binding is on its way or waits for a gang);
        # the cache keeps them on that node until the API says otherwise
        self._assumed: dict[str, tuple[str, dict[str, Any]]] = {}
        self.rebuilds = 0
        #: a change of an existing Node (or of its link) updates the cluster and
        #: state in place (:meth:`_update_nodes`); False: rebuild both, as before
        self.incremental_nodes = incremental_nodes
        #: Node changes applied in place (no rebuild)
        self.node_updates = 0
        # names of existing nodes changed since the cluster was built or updated
        self._changed_nodes: set[str] = set()
        # whether the cluster's latency came from a NetworkTopology (else flat)
        self._has_topology = False
        #: bumped whenever the state must be rebuilt (loops wait for it to move)
        self.changes = 0
        #: bumped whenever room may have been made: a placed pod gone, ended, moved or
        #: changed, a Node added or changed, a link or a traffic pattern changed, an
        #: assumed pod forgotten (a gang refused for want of room is then retried at
        #: once, :mod:`k8s_bridge.gangs`)
        self.releases = 0
        self.skipped: dict[str, str] = {}  # object key -> why it could not be used

    # ---------------------------------------------------------------- events
    def on_event(self, kind: str, event: str, obj: dict[str, Any], *,
                 reflected: bool = False) -> None:
        """An informer event (ADDED / MODIFIED / DELETED) for one object.

        ``reflected=True``: the current state already reflects this object (the
        bridge just wrote it), so only the cache is updated.
        """
        if kind not in self.objects:
            return
        key = object_key(obj)
        with self.lock:
            store = self.objects[kind]
            before = store.get(key)
            if event != "DELETED" and _older(obj, before):
                return  # the echo of a write we have already applied (reflected)
            if event == "DELETED" and before is not None and _uid(before) and _uid(obj) \
                    and _uid(before) != _uid(obj):
                return  # the deletion of an earlier object of that name
            if kind == "Pod" and key in self._assumed:
                obj = self._assumed_view(key, event, obj)
            if reflected and before is not None and _spec_of(before) == _spec_of(obj):
                store[key] = obj  # only what this process wrote (a status) changed
                self._expected.pop((kind, key), None)  # applied: nothing more to expect
                return
            if event == "DELETED":
                store.pop(key, None)
            else:
                store[key] = obj
            if kind == "Node":
                # heartbeats (condition times, images, ...) change nothing we use
                if event == "DELETED" or before is None:
                    self._cluster = None  # the node set (and every index) changes
                    self._dirty()
                    self.releases += event != "DELETED"
                elif _node_signature(before) != _node_signature(obj):
                    self._node_changed(key)
                    self.releases += 1
            elif kind in _CLUSTER_KINDS:
                self._cluster = None
                self._dirty()
            elif kind == "NodeBandwidth":
                old = before or {}
                gone = event == "DELETED"
                if self._link(before) != (None if gone else self._link(obj)):
                    self._node_changed(key)  # the link's capacity changed
                    self.releases += 1
                if gone or old.get("status") != obj.get("status"):
                    # an expectation serves for the one status change it announced:
                    # our own echo, or (not matching) a newer write by someone else
                    expected = self._expected.pop((kind, key), None)
                    if gone or not _matches(expected, obj):
                        self._dirty()  # recorded orders and shifts
            elif kind == "PodGroup":
                self._regang(key)
            elif kind == "PodBandwidth":
                old = before or {}
                if event == "DELETED" or old.get("spec") != obj.get("spec") \
                        or _observed(old) != _observed(obj):
                    self._pbw_generation += 1
                    self._dirty()
                    self.releases += 1
            elif kind == "Pod":
                sig = None if event == "DELETED" else _pod_signature(obj)
                if event != "DELETED":
                    self.deleted_pods.pop(key, None)  # a new pod of that name
                if event == "DELETED":
                    self._pods.pop(key, None)
                    now = time.monotonic()
                    self.deleted_pods[key] = now
                    if len(self.deleted_pods) > 10_000:  # forget the oldest tombstones
                        oldest = sorted(self.deleted_pods.items(), key=lambda kv: kv[1])
                        for k, _ in oldest[:5_000]:
                            del self.deleted_pods[k]
                self._group_member(key, before, None if event == "DELETED" else obj)
                if self._signatures.get(key) != sig:
                    self._dirty()
                    if self._signatures.get(key) is not None:  # a placed pod changed
                        self.releases += 1
                if sig is None:
                    self._signatures.pop(key, None)
                else:
                    self._signatures[key] = sig

    def _group_member(self, key: str, before: Mapping[str, Any] | None,
                      after: Mapping[str, Any] | None) -> None:
        """Keep the PodGroups' live pods as pod ``key`` changes from ``before`` to
        ``after`` (None: absent, deleted)."""
        old = convert.gang_key(before) if before is not None else None
        new = convert.gang_key(after) if after is not None \
            and (after.get("status") or {}).get("phase") not in _TERMINAL else None
        if old == new and (new is None or key in self._group_pods.get(new, ())):
            return
        if old is not None and old in self._group_pods:
            self._group_pods[old].discard(key)
            if not self._group_pods[old]:
                del self._group_pods[old]
            self._regang(old)
        if new is not None:
            self._group_pods.setdefault(new, set()).add(key)
            self._regang(new)

    def _regang(self, group: str) -> None:
        """Recompute a PodGroup's gang size; its pods are read again when it changed."""
        size = convert.gang_size(self.objects["PodGroup"].get(group),
                                 len(self._group_pods.get(group, ())))
        if size == self.gang_sizes.get(group):
            return
        if size is None:
            del self.gang_sizes[group]
        else:
            self.gang_sizes[group] = size
        self._dirty()

    def snapshot(self, kind: str) -> dict[str, dict[str, Any]]:
        """The cached objects of ``kind`` by key (a copy of the mapping), for an
        informer's re-list (:class:`~k8s_bridge.informer.Informer` ``known``)."""
        with self.lock:
            return dict(self.objects.get(kind, {}))

    def expect(self, kind: str, key: str, status: Mapping[str, Any]) -> None:
        """This process is about to write ``status`` and its state already reflects
        it: the watch echo must not force a rebuild (registered before the write, so
        an echo that overtakes the writer's answer is recognised too)."""
        with self.lock:
            self._expected[(kind, key)] = dict(status)

    # ------------------------------------------------------- assumed pods
    def assume(self, pod_json: Mapping[str, Any], node: str) -> None:
        """Record ``pod_json`` as bound to ``node`` before the API says so (Reserve
        already placed it in the current state, which stays valid).

        Until an event shows the pod bound (or deleted) or :meth:`forget` is called,
        later events of the pod keep it on ``node``: an update that does not bind it
        (a label, an annotation) must not free the node for another pod.
        """
        key = object_key(pod_json)
        with self.lock:
            bound = dict(pod_json)
            bound["spec"] = {**(pod_json.get("spec") or {}), "nodeName": node}
            state = self._state
            self._assumed.pop(key, None)
            self.on_event("Pod", "MODIFIED", bound)
            self._assumed[key] = (node, dict(pod_json))
            self._state = state  # already placed by Reserve

    def assumed_on(self, key: str) -> str | None:
        """The node pod ``key`` is assumed on (:meth:`assume`), or None: not assumed,
        or the API has bound it, ended it or deleted it since."""
        with self.lock:
            hit = self._assumed.get(key)
            return hit[0] if hit is not None else None

    def api_pod(self, key: str) -> dict[str, Any] | None:
        """Pod ``key`` as the API has it (an assumed pod's cached copy says it is on
        its assumed node; this does not)."""
        with self.lock:
            hit = self._assumed.get(key)
            return hit[1] if hit is not None else self.objects["Pod"].get(key)

    def forget(self, pod_json: Mapping[str, Any]) -> None:
        """Undo :meth:`assume`: the API's latest version of the pod is the truth
        again (a pod deleted meanwhile stays deleted)."""
        key = object_key(pod_json)
        with self.lock:
            assumed = self._assumed.pop(key, None)
            if assumed is not None and key in self.objects["Pod"]:
                self.on_event("Pod", "MODIFIED", assumed[1])  # no longer assumed
            self._dirty()
            self.releases += 1

    def _assumed_view(self, key: str, event: str, obj: dict[str, Any]) -> dict[str, Any]:
        """An event of an assumed pod: the assumption ends when the API binds or
        deletes the pod, or ends it; otherwise the pod stays on the assumed node."""
        node, _ = self._assumed[key]
        spec = obj.get("spec") or {}
        phase = (obj.get("status") or {}).get("phase")
        if event == "DELETED" or spec.get("nodeName") or phase in _TERMINAL:
            del self._assumed[key]
            return obj
        self._assumed[key] = (node, obj)
        return {**obj, "spec": {**spec, "nodeName": node}}

    def _link(self, nbw: Mapping[str, Any] | None) -> float | str | None:
        """The capacity a NodeBandwidth sets (None: the default; str: invalid)."""
        if nbw is None or (nbw.get("spec") or {}).get("bandwidth") is None:
            return None
        try:
            return convert.link_gbps(nbw, self.default_link_gbps)
        except ValueError as exc:
            return str(exc)

    def _node_changed(self, name: str) -> None:
        """An existing node (or its link) changed: update it at the next read, or
        rebuild everything when that cannot be done in place."""
        if self.incremental_nodes and self._cluster is not None \
                and name in self._cluster.node_index:
            self._changed_nodes.add(name)
            self.changes += 1
        else:
            self._cluster = None
            self._dirty()

    def invalidate(self) -> None:
        with self.lock:
            self._dirty()

    def _dirty(self) -> None:
        self._state = None
        self.changes += 1

    # ----------------------------------------------------------------- views
    def node_names(self) -> list[str]:
        with self.lock:
            self.cluster()
            return [str(n["metadata"]["name"]) for n in self._node_json]

    def _skip(self, key: str, reason: str) -> None:
        """Record that an object could not be used, and log it once per object and
        reason (the cache re-reads objects on every rebuild)."""
        if self.skipped.get(key) != reason:
            log.warning("%s left out: %s", key, reason)
        self.skipped[key] = reason

    def cluster(self) -> Cluster:
        """Nodes in name order (the order that breaks ties), tau, AppGroups."""
        with self.lock:
            if self._cluster is not None and self._changed_nodes:
                self._update_nodes()
            if self._cluster is not None:
                return self._cluster
            self._changed_nodes.clear()
            nodes, node_json = [], []
            for name in sorted(self.objects["Node"]):
                obj = self.objects["Node"][name]
                try:
                    nodes.append(self._convert_node(name, obj))
                    node_json.append(obj)
                except ValueError as exc:
                    self._skip(f"Node/{name}", str(exc))
            if not nodes:
                raise LookupError("no usable Node in the cache yet")
            for name, nbw in self.objects["NodeBandwidth"].items():
                if name not in self.objects["Node"] \
                        and (nbw.get("spec") or {}).get("bandwidth") is not None:
                    self._skip(f"NodeBandwidth/{name}", "names no Node: its link capacity "
                               "applies to no node (a NodeBandwidth is named after its Node)")
            try:
                latency = self._latency(node_json)
                workloads = convert.workloads_from_appgroups(self.objects["AppGroup"].values())
                cluster = Cluster(nodes, latency=latency, workloads=workloads)
            except ValueError as exc:
                self._skip("NetworkTopology/AppGroup", str(exc))
                cluster = Cluster(nodes)
                self._has_topology = False
            self._cluster = cluster
            self._node_json = node_json
            self._keys = [convert.topology_keys(n) for n in node_json]
            self.schedulable = [bool(self._nodes[n.name][0][0][3]) for n in nodes]
            workload_key = tuple(sorted((w.name, w.jobs, w.dependencies)
                                        for w in cluster.workloads.values()))
            if workload_key != self._workloads:
                self._pods.clear()  # a pod's workload may have changed
                self._workloads = workload_key
            return cluster

    def _convert_node(self, name: str, obj: Mapping[str, Any]) -> Node:
        """The tdmcore Node of a v1 Node (``ValueError`` if unusable), cached by what
        of it the cluster uses."""
        try:
            link = convert.link_gbps(self.objects["NodeBandwidth"].get(name),
                                     self.default_link_gbps)
        except ValueError as exc:
            self._skip(f"NodeBandwidth/{name}", str(exc))
            link = self.default_link_gbps
        sig = (_node_signature(obj), link)
        hit = self._nodes.get(name)
        if hit is not None and hit[0] == sig:
            return hit[1]
        node = convert.node_from_json(obj, link)
        if not convert.node_schedulable(obj):
            # cordoned or NotReady: nothing new may go there (the pods already on it
            # are still recorded, as over-commitment)
            node = replace(node, cpu=0.0, mem_gib=0.0, gpu=0.0)
        self._nodes[name] = (sig, node)
        return node

    def _latency(self, node_json: list[dict[str, Any]]) -> Any:
        latency = convert.latency_matrix(node_json, self.objects["NetworkTopology"].values(),
                                         self.topology_weights)
        self._has_topology = latency is not None
        return latency

    def _update_nodes(self) -> None:
        """Apply the changes of existing nodes to the cluster and, in place, to the
        state: the nodes' capacities and schedulability, their links, and -- when a
        NetworkTopology gives latencies and a zone or region label changed -- tau.

        **[decision]** A Node change (a label, a cordon, a Ready condition, the
        allocatable resources; or a NodeBandwidth's link) used to rebuild the cluster
        and re-place every pod (60 ms on 1,000 nodes, paid by the next request).  The
        node set and its order are the same, so the placed pods, their rows and
        orders stay as they are; only the cluster under the state is replaced (and
        the state's version bumped, so no decision is answered from before).  What
        cannot be updated in place (a node that no longer converts, a topology that
        no longer parses) falls back to the rebuild.  Nodes added or deleted always
        rebuild.
        """
        old = self._cluster
        assert old is not None
        changed, self._changed_nodes = self._changed_nodes, set()
        nodes = list(old.nodes)
        node_json = list(self._node_json)
        keys = list(self._keys)
        schedulable = list(self.schedulable)
        moved: list[int] = []  # nodes whose zone or region label changed
        try:
            for name in sorted(changed):
                i = old.node_index[name]
                obj = self.objects["Node"][name]
                before = node_json[i]
                nodes[i] = self._convert_node(name, obj)
                node_json[i] = obj
                schedulable[i] = convert.node_schedulable(obj)
                keys[i] = convert.topology_keys(obj)
                if keys[i] != convert.topology_keys(before):
                    moved.append(i)
            latency = None
            if self._has_topology:
                latency = old.latency if not moved else convert.latency_update(
                    old.latency, keys, moved, self.objects["NetworkTopology"].values(),
                    self.topology_weights)
            cluster = Cluster(nodes, latency=latency, workloads=old.workloads.values())
        except (KeyError, ValueError):  # not updatable in place: the full rebuild
            self._cluster = None
            self._dirty()
            return
        self._cluster = cluster
        self._node_json = node_json
        self._keys = keys
        self.schedulable = schedulable
        self.node_updates += 1
        state = self._state
        if state is not None:
            state.cluster = cluster
            state.version += 1
            for name in changed:
                state.node_versions[old.node_index[name]] += 1

    def domain_pod(self, pod: Mapping[str, Any]) -> Pod:
        """The tdmcore Pod for a pod JSON object (``ValueError`` if malformed)."""
        with self.lock:
            cluster = self.cluster()
            # kube-scheduler sends the same pod version to filter, prioritize and bind
            return self._domain_cached(convert.pod_key(pod), pod, cluster)

    def _domain_cached(self, key: str, pod: Mapping[str, Any], cluster: Cluster) -> Pod:
        rv = str((pod.get("metadata") or {}).get("resourceVersion", ""))
        group = convert.gang_key(pod)
        size = None if group is None else self.gang_sizes.get(group)
        hit = self._pods.get(key)
        if hit is not None and hit[0] == rv and hit[1] == self._pbw_generation \
                and hit[2] == size and rv:
            return hit[3]
        domain = convert.pod_from_json(pod, self.objects["PodBandwidth"].values(),
                                       cluster.workloads, self.gang_sizes)
        self._pods[key] = (rv, self._pbw_generation, size, domain)
        return domain

    def recorded(self) -> dict[str, dict[str, Any]]:
        """Pod key -> its entry in its node's NodeBandwidth status."""
        out = {}
        with self.lock:
            nbws = list(self.objects["NodeBandwidth"].values())
        for nbw in nbws:
            for entry in (nbw.get("status") or {}).get("pods") or []:
                if isinstance(entry, dict) and entry.get("name"):
                    out[f"{entry.get('namespace') or 'default'}/{entry['name']}"] = entry
        return out

    def state(self) -> ClusterState:
        """The placed pods as a ClusterState (rebuilt only after a relevant change)."""
        with self.lock:
            if self._changed_nodes:
                self.cluster()  # node changes: applied to the state in place
            if self._state is not None:
                return self._state
            cluster = self.cluster()
            state = ClusterState(cluster)
            recorded = self.recorded()
            placed = []
            for key, pod in self.objects["Pod"].items():
                if not pod_is_placed(pod):
                    continue
                node = cluster.node_index.get(str(pod["spec"]["nodeName"]))
                if node is None:
                    continue
                entry = recorded.get(key, {})
                order = entry.get("order")
                order = order if isinstance(order, int) and not isinstance(order, bool) \
                    else convert.bind_order(pod)
                placed.append((order, key, node, pod, entry))
            placed.sort(key=lambda t: (t[0], t[1]))
            shifts: dict[str, float] = {}
            for _, key, node, pod, entry in placed:
                try:
                    domain = self._domain_cached(key, pod, cluster)
                except ValueError as exc:
                    self._skip(f"Pod/{key}", str(exc))
                    continue
                try:
                    # Over-committed nodes (pods placed by others) are still recorded:
                    # the API, not our Filter, is the truth about what runs where.
                    _force_place(state, domain, node)
                except ValueError as exc:
                    self._skip(f"Pod/{key}", str(exc))
                    continue
                shift = entry.get("shiftMs")
                if isinstance(shift, int | float) and not isinstance(shift, bool):
                    shifts[key] = float(shift)
            state.set_shifts(shifts)
            self._state = state
            self.rebuilds += 1
            return state


def _observed(pbw: Mapping[str, Any]) -> tuple[Any, Any]:
    """The part of a PodBandwidth's status that changes its pattern."""
    status = pbw.get("status") or {}
    return status.get("observedPeriodMs"), status.get("observedDutyCycle")


def _uid(obj: Mapping[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("uid")


def _spec_of(obj: Mapping[str, Any]) -> Any:
    """What a status write by this process leaves as it was."""
    meta = obj.get("metadata") or {}
    return obj.get("spec"), meta.get("labels"), meta.get("uid")


def _matches(expected: Mapping[str, Any] | None, obj: Mapping[str, Any]) -> bool:
    """``obj``'s status holds every field of ``expected`` (None: nothing expected)."""
    if expected is None:
        return False
    got = obj.get("status") or {}
    return all(got.get(k) == v for k, v in expected.items())


def _older(obj: Mapping[str, Any], than: Mapping[str, Any] | None) -> bool:
    """``obj`` is an older version than ``than`` (resourceVersions of one object
    grow; they are compared only when both are integers, as etcd's are)."""
    if than is None:
        return False
    a = str((obj.get("metadata") or {}).get("resourceVersion", ""))
    b = str((than.get("metadata") or {}).get("resourceVersion", ""))
    return a.isdigit() and b.isdigit() and int(a) < int(b)


def _force_place(state: ClusterState, pod: Pod, node: int) -> None:
    """Record a pod the API says is bound, even if the node looks full to us."""
    try:
        state.place(pod, node)
    except ValueError:
        state.check_pod(pod)  # a real inconsistency (duplicate, job mismatch): re-raise
        # Resources: count what fits; the API already admitted it (kubelet's view).
        # The pod is recorded without resources, then its resources are added; the
        # node's use is set aside meanwhile, so that a node already over its (maybe
        # cordoned, zeroed) capacity records its next pods too.
        used = (state.used_cpu[node], state.used_mem[node], state.used_gpu[node])
        state.used_cpu[node] = state.used_mem[node] = state.used_gpu[node] = 0.0
        try:
            state.place(replace(pod, cpu=0.0, mem_gib=0.0, gpu=0.0), node)
        finally:
            state.used_cpu[node] = used[0] + (pod.cpu if pod.name in state.placed else 0.0)
            state.used_mem[node] = used[1] + (pod.mem_gib if pod.name in state.placed else 0.0)
            state.used_gpu[node] = used[2] + (pod.gpu if pod.name in state.placed else 0.0)
