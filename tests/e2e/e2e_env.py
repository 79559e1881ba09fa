"""Helpers of the e2e suite (see ``conftest.py``).

The e2e suite: the bridge against a real control plane (marker ``e2e``).

One control plane per test session (etcd + kube-apiserver + kube-scheduler from
``$KUBEBUILDER_ASSETS``, see :mod:`k8s_bridge.envtest`), with the shipped CRDs and RBAC
applied.  Every component runs as its own process (``python -m k8s_bridge.cli ...``)
with a TokenRequest token of its ServiceAccount.  Tests share the cluster, so each one
works on nodes and pods of its own and :func:`clean` removes them afterwards.

Without ``KUBEBUILDER_ASSETS`` every e2e test is skipped, and the run says once, at its end,
how to get the binaries (``conftest.py``).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from k8s_bridge.envtest import (
    ControlPlane,
    Proc,
    ProcessExited,
    assets_dir,
    free_port,
    wait_until,
)
from k8s_bridge.kube import ApiError, Kube, NotFound

DEPLOY = Path(__file__).resolve().parents[2] / "k8s_bridge" / "deploy"
NS = "tdmcore-system"
SCHEDULER = "tdmcore-scheduler"
GPU = "nvidia.com/gpu"
#: the label a test puts on the nodes it adds, so its pods select only those
TEST = "e2e.tdmcore.io/test"

#: scheduler-plugins' PodGroup CRD, reduced to what the bridge reads (the suite's own:
#: tdmcore does not ship it)
PODGROUP_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
    "spec": {"group": "scheduling.x-k8s.io", "scope": "Namespaced",
             "names": {"kind": "PodGroup", "plural": "podgroups", "singular": "podgroup",
                       "listKind": "PodGroupList"},
             "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {
                               "type": "object",
                               "properties": {
                                   "spec": {"type": "object", "properties": {
                                       "minMember": {"type": "integer", "format": "int32"},
                                       "scheduleTimeoutSeconds": {"type": "integer",
                                                                  "format": "int32"}}},
                                   "status": {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


#: the sub-commands that serve /healthz, /readyz and /metrics on a port of their own
PROBED = ("extender", "controller")


class Component:
    """A bridge sub-command running as its own process, serving on a loopback port (and,
    for the :data:`PROBED` ones, its probes and metrics on another)."""

    def __init__(self, name: str, args: Sequence[str], kubeconfig: Path | None,
                 logs: Path, env: Mapping[str, str] | None = None,
                 port: int | None = None) -> None:
        self.name = name
        self.port = port or free_port()
        #: the probe port (``--probe-port``), or the component's own port
        self.probe_port = free_port() if args and args[0] in PROBED else self.port
        #: ``--host`` (None: the component's default)
        self.host: str | None = "127.0.0.1"
        self.args = list(args)
        self.kubeconfig = kubeconfig
        self.logs = logs
        self.env = {**os.environ, **(env or {})}
        self.proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def probe_url(self) -> str:
        return f"http://127.0.0.1:{self.probe_port}"

    def start(self, *, wait_ready: bool = True, timeout_s: float = 60.0) -> Component:
        argv = [sys.executable, "-m", "k8s_bridge.cli", *self.args,
                "--port", str(self.port), "--log-level",
                os.environ.get("TDMCORE_E2E_LOG_LEVEL", "INFO")]
        if self.host is not None:
            argv += ["--host", self.host]
        if self.probe_port != self.port:
            argv += ["--probe-host", "127.0.0.1", "--probe-port", str(self.probe_port)]
        if self.kubeconfig is not None:
            argv += ["--kubeconfig", str(self.kubeconfig)]
        self.proc = Proc(self.name, argv, self.logs, self.env)
        if wait_ready:
            self.wait_ready(timeout_s)
        return self

    def ready(self) -> bool:
        if self.proc is None or not self.proc.alive():
            raise ProcessExited(f"{self.name} is not running: {self.proc and self.proc.log()}")
        try:
            with urllib.request.urlopen(f"{self.probe_url}/readyz", timeout=2) as resp:
                return int(resp.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        wait_until(self.ready, timeout_s, f"{self.name} /readyz")

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.proc is not None:
            self.proc.stop(timeout_s)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.stop(5.0, signum=9)

    def post(self, path: str, body: Any, timeout_s: float = 10.0) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as resp:
                return int(resp.status), json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            with exc:
                raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, raw.decode(errors="replace")

    def metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """The sum of ``name``'s samples matching ``labels`` on ``/metrics``."""
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(f"{self.probe_url}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        total = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v
                                               for k, v in (labels or {}).items()):
                    total += sample.value
        return total


class Env:
    """The session's cluster: the control plane plus helpers the tests share."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.kube: Kube = plane.kube()
        self.logs = plane.logs
        self.kubeconfigs: dict[str, Path] = {}
        self.components: list[Component] = []
        self.scheduler: Proc | None = None
        self.extender: Component | None = None

    # ------------------------------------------------------------ components
    def kubeconfig(self, account: str) -> Path:
        if account not in self.kubeconfigs:
            self.kubeconfigs[account] = self.plane.service_account_kubeconfig(NS, account)
        return self.kubeconfigs[account]

    def component(self, name: str, args: Sequence[str], account: str | None,
                  **kw: Any) -> Component:
        comp = Component(name, args, self.kubeconfig(account) if account else None,
                         self.logs, **kw)
        self.components.append(comp)
        return comp

    def start_kube_scheduler(self, extender_url: str, timeout_s: float = 60.0) -> Proc:
        """kube-scheduler with the shipped configuration, converted to the version 1.23
        reads (``v1beta3``) and pointed at ``extender_url``."""
        config = yaml.safe_load((DEPLOY / "scheduler-config.yaml").read_text())
        config["apiVersion"] = "kubescheduler.config.k8s.io/v1beta3"
        kubeconfig = self.kubeconfig(SCHEDULER)
        config["clientConnection"] = {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400}
        for ext in config["extenders"]:
            ext["urlPrefix"] = extender_url
        path = self.plane.dir / "kube-scheduler.yaml"
        path.write_text(yaml.safe_dump(config))
        port = free_port()
        lease = config["leaderElection"]
        try:  # a restarted kube-scheduler must take the Lease over from its predecessor
            before = (self.kube.get("Lease", lease["resourceName"], lease["resourceNamespace"])
                      .get("spec") or {}).get("holderIdentity") or ""
        except NotFound:
            before = ""
        self.scheduler = Proc("kube-scheduler", [
            str(assets_dir(("kube-scheduler",)) / "kube-scheduler"), "--config", str(path),
            "--authentication-kubeconfig", str(kubeconfig),
            "--authorization-kubeconfig", str(kubeconfig),
            "--bind-address", "127.0.0.1", "--secure-port", str(port),
            "--cert-dir", str(self.plane.dir / "kube-scheduler-certs"), "--v", "1"],
            self.logs)

        def leading() -> bool:
            if not self.scheduler or not self.scheduler.alive():
                log = self.scheduler.log() if self.scheduler else ""
                raise ProcessExited(f"kube-scheduler exited: {log}")
            obj = self.kube.get("Lease", lease["resourceName"], lease["resourceNamespace"])
            holder = str((obj.get("spec") or {}).get("holderIdentity") or "")
            return bool(holder) and holder != before

        wait_until(leading, timeout_s, "kube-scheduler to hold its Lease")
        return self.scheduler

    def ensure_kube_scheduler(self, timeout_s: float = 60.0) -> None:
        """Restart kube-scheduler if it exited (it does when it cannot renew its Lease,
        e.g. across a kube-apiserver restart)."""
        if self.scheduler is not None and not self.scheduler.alive() \
                and self.extender is not None:
            self.scheduler.stop()
            self.start_kube_scheduler(self.extender.url, timeout_s)

    def stop(self) -> None:
        for comp in reversed(self.components):
            comp.stop(5.0)
        if self.scheduler is not None:
            self.scheduler.stop(5.0)

    # ------------------------------------------------------------ objects
    def nodes(self, prefix: str, count: int, gpu: int = 8, start: int = 0) -> list[str]:
        """Nodes ``prefix-start`` ... labelled ``e2e.tdmcore.io/test: prefix``."""
        names = [f"{prefix}-{i}" for i in range(start, start + count)]
        self.plane.add_nodes(names, gpu=gpu, labels={"e2e.tdmcore.io/test": prefix})
        return names

    def namespace(self, name: str) -> str:
        """A namespace of training pods, set up as docs/kubernetes.md's production
        checklist says: the extender may requeue its pods (``deploy/requeue.yaml``'s
        RoleBinding, in this namespace)."""
        binding = yaml.safe_load((DEPLOY / "requeue.yaml").read_text())
        binding["metadata"]["namespace"] = name
        self.plane.apply([{"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": name}}, binding])
        return name

    def pod(self, namespace: str, name: str, *, gpu: int = 1, labels: Mapping[str, str]
            | None = None, node_selector: Mapping[str, str] | None = None,
            scheduler: str = SCHEDULER) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "trainer", "image": "example.invalid/trainer:1",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                          "limits": {GPU: str(gpu)}}}]}
        if node_selector:
            spec["nodeSelector"] = dict(node_selector)
        return self.kube.create("Pod", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
            "spec": spec}, namespace)

    def event_messages(self, namespace: str, pod: str, reason: str) -> list[str]:
        """The messages of the Events with ``reason`` about pod ``namespace/pod``."""
        items = self.kube.list("Event", namespace).get("items") or []
        return [str(e.get("message")) for e in items
                if (e.get("involvedObject") or {}).get("name") == pod
                and e.get("reason") == reason]

    def podbandwidth(self, namespace: str, name: str, *, period: float, duty: float,
                     gbps: float, match: Mapping[str, str]) -> None:
        self.kube.create("PodBandwidth", {
            "apiVersion": "tdmcore.io/v1alpha1", "kind": "PodBandwidth",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"period": period, "duty_cycle": duty, "bandwidth": gbps,
                     "selector": {"matchLabels": dict(match)}}}, namespace)

    def podgroup(self, namespace: str, name: str, min_member: int) -> None:
        self.kube.create("PodGroup", {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": min_member}}, namespace)

    def node_of(self, namespace: str, name: str) -> str | None:
        pod = self.kube.get("Pod", name, namespace)
        return (pod.get("spec") or {}).get("nodeName") or None

    def bound(self, namespace: str) -> dict[str, str]:
        """Pod name -> node of the bound pods of ``namespace``."""
        items = self.kube.list("Pod", namespace)["items"]
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in items
                if (p.get("spec") or {}).get("nodeName")}

    def wait_bound(self, namespace: str, count: int, timeout_s: float) -> dict[str, str]:
        def enough() -> dict[str, str] | None:
            bound = self.bound(namespace)
            return bound if len(bound) >= count else None

        return wait_until(enough, timeout_s, f"{count} bound pods in {namespace}")

    def nodebandwidth(self, node: str) -> dict[str, Any] | None:
        try:
            return self.kube.get("NodeBandwidth", node)
        except NotFound:
            return None

    def clean(self, namespace: str, nodes: Sequence[str]) -> None:
        """Delete the test's pods (grace 0), its nodes and their NodeBandwidths."""
        for pod in self.kube.list("Pod", namespace)["items"]:
            try:
                self.kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/"
                                  f"{pod['metadata']['name']}",
                                  query={"gracePeriodSeconds": "0"})
            except NotFound:
                pass
        for path in ("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups",
                     "/apis/tdmcore.io/v1alpha1/namespaces/{ns}/podbandwidths"):
            try:
                self.kube.request("DELETE", path.format(ns=namespace))
            except ApiError:
                pass
        for node in nodes:
            for kind in ("Node", "NodeBandwidth"):
                try:
                    self.kube.request("DELETE", ("/api/v1/nodes/" if kind == "Node" else
                                                 "/apis/tdmcore.io/v1alpha1/nodebandwidths/")
                                      + node)
                except NotFound:
                    pass
        wait_until(lambda: not self.kube.list("Pod", namespace)["items"], 30,
                   f"pods of {namespace} deleted")


def service_account_token(env: Env, account: str, audiences: list[str] | None = None,
                          pod: Mapping[str, Any] | None = None) -> str:
    """A TokenRequest token of ServiceAccount ``tdmcore-system/account`` (bound to
    ``pod`` when given, as the kubelet's projected tokens are)."""
    spec: dict[str, Any] = {"expirationSeconds": 3600}
    if audiences:
        spec["audiences"] = audiences
    if pod is not None:
        spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod",
                                  "name": pod["metadata"]["name"],
                                  "uid": pod["metadata"]["uid"]}
    answer = env.kube.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/{account}/token",
                              body={"apiVersion": "authentication.k8s.io/v1",
                                    "kind": "TokenRequest", "spec": spec})
    return str(answer["status"]["token"])


def wait_known(extender: Component, nodes: Sequence[str], timeout_s: float = 30.0) -> None:
    """Until the extender's cache has ``nodes`` Ready with their GPUs (its filter keeps
    them all for a one-GPU pod, or with ``--decide-in-filter`` one of them and fails
    none)."""
    probe = {"Pod": {"metadata": {"name": "probe", "namespace": "default", "uid": "probe"},
                     "spec": {"containers": [{"name": "c", "resources": {
                         "limits": {GPU: "1"}}}]}},
             "NodeNames": list(nodes)}

    def known() -> bool:
        status, answer = extender.post("/filter", probe)
        if status != 200:
            return False
        kept = answer.get("NodeNames") or []
        return bool(kept) and not answer.get("FailedNodes") \
            and not answer.get("FailedAndUnresolvableNodes") and set(kept) <= set(nodes)

    wait_until(known, timeout_s, f"the extender to know nodes {nodes[:3]}...")




def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0
