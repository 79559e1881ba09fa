"""Every API call a component really makes is allowed by its RBAC in deploy/rbac.yaml.

Each component runs against the fake API server; the requests it recorded are
turned into (group, resource, verb, name, namespace) and checked against what our
Roles and ClusterRoles grant its ServiceAccount.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from k8s_bridge.elastic import ElasticController
from k8s_bridge.informer import Informer
from k8s_bridge.kube import Kube
from k8s_bridge.leader import start_election
from k8s_bridge.pipeline import Pipeline
from k8s_bridge.reconciler import ControllerService
from k8s_bridge.standalone import StandaloneScheduler
from tests.k8s_bridge import k8s_objects as K
from tests.k8s_bridge.k8s_env import cluster, synced_to
from tests.k8s_bridge.test_k8s_controller import objects as controller_objects
from tests.k8s_bridge.test_k8s_elastic import job_pod, pytorchjob
from tests.k8s_bridge.test_k8s_manifests import DEFAULT_SET, NAMESPACE, STANDALONE_SET, _permissions

_PATH = re.compile(r"^/(?:api/(?P<cv>v1)|apis/(?P<g>[^/]+)/(?P<v>[^/]+))"
                   r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<res>[^/]+)(?:/(?P<name>[^/]+))?"
                   r"(?:/(?P<sub>[^/]+))?$")
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def needed(requests: list[tuple[str, str]]) -> set[tuple[str, str, str, str | None, str | None]]:
    out = set()
    for method, target in requests:
        url = urlsplit(target)
        m = _PATH.match(url.path)
        assert m is not None, target
        group = m["g"] or ""
        resource = m["res"] + (f"/{m['sub']}" if m["sub"] else "")
        if method == "GET":
            verb = "get" if m["name"] else (
                "watch" if parse_qs(url.query).get("watch") else "list")
        else:
            verb = _VERBS[method]
        out.add((group, resource, verb, m["name"], m["ns"]))
    return out


def allowed(perm: tuple[str, str, str, str | None, str | None],
            grants: set[tuple[str, str, str, str | None, str | None]]) -> bool:
    group, resource, verb, name, namespace = perm
    # the binding of a new object has no name yet in RBAC's eyes for create
    names = {None} if verb in ("create", "list", "watch") else {None, name}
    return any((group, resource, verb, n, ns) in grants
               for n in names for ns in {None, namespace})


def check(requests: list[tuple[str, str]], account: str, files: set[str]) -> None:
    grants = _permissions(f"{NAMESPACE}/{account}", files)
    calls = needed(requests)
    missing = sorted((p for p in calls if not allowed(p, grants)), key=str)
    assert not missing, f"{account} calls what its RBAC does not allow: {missing}"
    assert calls  # the scenario did reach the API


def test_extender_calls_are_allowed():
    objs = [K.node("n0"), K.node("n1"),
            K.podbandwidth("b", period=100, duty=0.5, gbps=20,
                           match={"training.kubeflow.org/job-name": "b"}),
            K.pod("b-0", labels=K.job_labels("b"))]
    with cluster(objs) as (fake, kube, model, _):
        pipeline = Pipeline(model, "metronome", kube, scheduler_name=K.SCHEDULER)
        pod = fake.get("v1", "Pod", "b-0", "default")
        pipeline.filter(pod, ["n0", "n1"])
        pipeline.bind("default", "b-0", pod["metadata"]["uid"], "n0")
        check(fake.requests, "tdmcore-scheduler", DEFAULT_SET)


def test_standalone_calls_are_allowed():
    objs = [K.node("n0"), K.podgroup("g", 2),
            K.pod("g-0", labels={"scheduling.x-k8s.io/pod-group": "g"}),
            K.pod("g-1", labels={"scheduling.x-k8s.io/pod-group": "g"})]
    with cluster(objs) as (fake, kube, model, _):
        StandaloneScheduler(Pipeline(model, "metronome", kube), K.SCHEDULER).run_once()
        assert fake.get("v1", "Pod", "g-0", "default")["spec"].get("nodeName")
        check(fake.requests, "tdmcore-standalone-scheduler", STANDALONE_SET)


def test_controller_calls_are_allowed():
    """Without --elastic the default set suffices (reconcile, a pattern update and its
    Event, leader election); with it, the elastic overlay's RBAC too."""
    objs = controller_objects() + [pytorchjob("resnet", 2, 1, 4),
                                   job_pod("resnet", "master", 0, "n2"),
                                   job_pod("resnet", "worker", 0, "n2")]
    with cluster(objs) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        assert service.reconcile() > 0  # creates NodeBandwidths, writes statuses
        report = [{"start_ms": 1e6 + i * 150, "duration_ms": 150.0} for i in range(10)]
        service.report("default/a-1", [r["start_ms"] for r in report],
                       [r["duration_ms"] for r in report], None)  # a pattern update
        assert service.events is not None and service.events.flush(10.0)  # posted off-thread
        assert any(m == "POST" and "/events" in p for m, p in fake.requests)
        check(fake.requests, "tdmcore-controller", DEFAULT_SET)
        scaler = ElasticController(model, kube, "dragon")
        infs = [Informer(kube, k, scaler.on_event, watch_timeout_s=5).start()
                for k in ("PyTorchJob", "TFJob")]
        election = start_election(Kube.connect(host=fake.url), "tdmcore-controller",
                                  NAMESPACE, "replica-1", lease_s=4, renew_deadline_s=3,
                                  retry_s=1)
        try:
            for inf in infs:
                assert inf.synced.wait(5)
            assert not scaler.step(1e9)  # the run starts: scale-up waits 60 s
            assert scaler.step(1e9 + 60.0)  # patches the PyTorchJob
            synced_to(fake, informers)
            assert election.leading.wait(10)
        finally:
            election.stop()
            for inf in infs:
                inf.stop()
        check(fake.requests, "tdmcore-controller", DEFAULT_SET | {"elastic/rbac.yaml"})
