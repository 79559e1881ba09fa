"""The shipped CRDs and RBAC on a real kube-apiserver: what the API server itself
accepts and refuses, and what each ServiceAccount may do."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from k8s_bridge.envtest import ControlPlane
from k8s_bridge.kube import ApiError, Kube
from tests.e2e.e2e_env import DEPLOY, NS, SCHEDULER
from tests.k8s_bridge.test_k8s_manifests import DEFAULT_FILES, INVALID, VALID

pytestmark = pytest.mark.e2e


def _dry_run_create(kube: Kube, obj: dict[str, Any]) -> None:
    kube.request("POST", ControlPlane.path_of(obj), query={"dryRun": "All"}, body=obj)


@pytest.mark.parametrize("case", sorted(VALID))
def test_api_server_accepts(plane: ControlPlane, case: str) -> None:
    obj = dict(VALID[case])
    status = obj.pop("status", None)
    _dry_run_create(plane.kube(), obj)
    if status is not None:  # status goes through the status subresource: create, patch
        kube = plane.kube()
        created = kube.request("POST", ControlPlane.path_of(obj), body=obj)
        try:
            kube.request("PATCH", ControlPlane.path_of(obj) + "/" + obj["metadata"]["name"]
                         + "/status", body={"status": status},
                         content_type="application/merge-patch+json")
        finally:
            kube.request("DELETE", ControlPlane.path_of(obj) + "/"
                         + created["metadata"]["name"])


#: the kinds the session's control plane has not applied (conftest.py): dry-run here
WORKLOAD_KINDS = {"ConfigMap", "Deployment", "DaemonSet", "Service", "NetworkPolicy",
                  "PodDisruptionBudget", "PriorityClass"}


def _shipped(kinds: set[str]) -> list[dict[str, Any]]:
    docs = [d for f in DEFAULT_FILES for d in yaml.safe_load_all((DEPLOY / f).read_text())]
    return [d for d in docs if isinstance(d, dict) and d.get("kind") in kinds]


@pytest.mark.parametrize("doc", _shipped(WORKLOAD_KINDS),
                         ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_api_server_accepts_the_shipped_workloads(plane: ControlPlane,
                                                  doc: dict[str, Any]) -> None:
    """The default set's Deployments, DaemonSet, Service, ConfigMap and NetworkPolicies
    as a v1.23 API server takes them (dry run)."""
    _dry_run_create(plane.kube(), doc)


#: refused by the local (strict) schema check; Kubernetes 1.23 has no strict field
#: validation: it prunes unknown fields of a structural schema and stores the rest
PRUNED = {"nbw unknown spec field": "speed", "pbw camelCase typo dutyCycle": "dutyCycle"}


@pytest.mark.parametrize("case", sorted(PRUNED))
def test_api_server_prunes_unknown_fields(plane: ControlPlane, case: str) -> None:
    obj = dict(INVALID[case])
    stored = plane.kube().request("POST", ControlPlane.path_of(obj), query={"dryRun": "All"},
                                  body=obj)
    assert PRUNED[case] in obj["spec"] and PRUNED[case] not in stored["spec"]


@pytest.mark.parametrize("case", sorted(set(INVALID) - set(PRUNED)))
def test_api_server_rejects(plane: ControlPlane, case: str) -> None:
    """Every object the local schema check refuses, the API server refuses too (422),
    through the main resource or, for status, the status subresource."""
    obj = dict(INVALID[case])
    status = obj.pop("status", None)
    kube = plane.kube()
    if status is None:
        with pytest.raises(ApiError) as err:
            _dry_run_create(kube, obj)
        assert err.value.status == 422, err.value
        return
    created = kube.request("POST", ControlPlane.path_of(obj), body=obj)
    try:
        with pytest.raises(ApiError) as err:
            kube.request("PATCH", ControlPlane.path_of(obj) + "/" + obj["metadata"]["name"]
                         + "/status", body={"status": status},
                         content_type="application/merge-patch+json")
        assert err.value.status == 422, err.value
    finally:
        kube.request("DELETE", ControlPlane.path_of(obj) + "/" + created["metadata"]["name"])


def test_no_token_of_ours_can_rewrite_a_kube_system_pod(plane: ControlPlane) -> None:
    """Issue 40: with the extender's token a server-side dry run replaced a kube-system
    pod's image.  Each shipped ServiceAccount's own token now gets 403 for it."""
    admin = plane.kube()
    name = "victim"
    admin.create("Pod", {"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": name, "namespace": "kube-system"},
                         "spec": {"containers": [{"name": "c", "image": "x.invalid/a:1"}]}},
                 "kube-system")
    try:
        for account in (SCHEDULER, "tdmcore-controller", "tdmcore-agent",
                        "tdmcore-standalone-scheduler"):
            kube = Kube.connect(str(plane.service_account_kubeconfig(NS, account)))
            with pytest.raises(ApiError) as err:
                kube.request("PATCH", f"/api/v1/namespaces/kube-system/pods/{name}",
                             query={"dryRun": "All"},
                             body={"spec": {"containers": [{"name": "c",
                                                            "image": "x.invalid/evil:1"}]}},
                             content_type="application/strategic-merge-patch+json")
            assert err.value.status == 403, (account, err.value)
    finally:
        admin.request("DELETE", f"/api/v1/namespaces/kube-system/pods/{name}",
                      query={"gracePeriodSeconds": "0"})


@pytest.mark.parametrize(("account", "verb", "path", "allowed"), [
    (SCHEDULER, "create", "/api/v1/namespaces/default/pods/x/binding", True),
    (SCHEDULER, "patch", "/apis/tdmcore.io/v1alpha1/nodebandwidths/x/status", True),
    (SCHEDULER, "update", "/apis/coordination.k8s.io/v1/namespaces/" + NS
     + "/leases/tdmcore-scheduler", True),
    (SCHEDULER, "patch", "/apis/tdmcore.io/v1alpha1/namespaces/default/podbandwidths/x/status",
     False),
    ("tdmcore-controller", "update", "/apis/coordination.k8s.io/v1/namespaces/" + NS
     + "/leases/tdmcore-controller", True),
    ("tdmcore-controller", "update", "/apis/coordination.k8s.io/v1/namespaces/" + NS
     + "/leases/tdmcore-scheduler", False),
    ("tdmcore-controller", "create", "/api/v1/namespaces/default/pods/x/binding", False),
    ("tdmcore-standalone-scheduler", "create", "/api/v1/namespaces/default/pods/x/binding",
     True),
    # issue 40: patching pods only where requeue.yaml binds it (`default`), never in
    # kube-system; Kubeflow jobs only with the elastic Component; TokenReview and Events
    # for the controller's reports; the agent may do nothing at all
    (SCHEDULER, "patch", "/api/v1/namespaces/default/pods/x", True),
    (SCHEDULER, "patch", "/api/v1/namespaces/kube-system/pods/x", False),
    (SCHEDULER, "patch", "/api/v1/namespaces/other/pods/x", False),
    ("tdmcore-standalone-scheduler", "patch", "/api/v1/namespaces/default/pods/x", False),
    ("tdmcore-controller", "patch", "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/x",
     False),
    ("tdmcore-controller", "list", "/apis/kubeflow.org/v1/namespaces/default/tfjobs", False),
    ("tdmcore-controller", "create", "/apis/authentication.k8s.io/v1/tokenreviews", True),
    ("tdmcore-controller", "create", "/api/v1/namespaces/default/events", True),
    ("tdmcore-controller", "patch", "/api/v1/namespaces/kube-system/pods/x", False),
    ("tdmcore-agent", "create", "/apis/authentication.k8s.io/v1/tokenreviews", False),
    ("tdmcore-agent", "get", "/api/v1/namespaces/default/pods/x", False),
    # the scheduler Pod's account is kube-scheduler's (system:kube-scheduler): it may
    # delete pods, write their status and bind them in every namespace, kube-system
    # included -- kube-scheduler's own role, not least privilege for the extender
    # (rbac.yaml, docs/kubernetes.md's production checklist); the others may not
    (SCHEDULER, "delete", "/api/v1/namespaces/kube-system/pods/x", True),
    (SCHEDULER, "patch", "/api/v1/namespaces/kube-system/pods/x/status", True),
    (SCHEDULER, "create", "/api/v1/namespaces/kube-system/pods/x/binding", True),
    ("tdmcore-standalone-scheduler", "create", "/api/v1/namespaces/kube-system/pods/x/binding",
     True),
    ("tdmcore-standalone-scheduler", "delete", "/api/v1/namespaces/kube-system/pods/x", False),
    ("tdmcore-controller", "delete", "/api/v1/namespaces/kube-system/pods/x", False),
    ("tdmcore-controller", "patch", "/api/v1/namespaces/kube-system/pods/x/status", False),
    # Events: create anywhere (the controller's PatternUpdated), nothing else
    ("tdmcore-controller", "create", "/api/v1/namespaces/kube-system/events", True),
    ("tdmcore-controller", "delete", "/api/v1/namespaces/default/events/x", False),
    ("tdmcore-controller", "list", "/api/v1/namespaces/default/events", False),
])
def test_rbac_as_each_service_account(plane: ControlPlane, account: str, verb: str,
                                      path: str, allowed: bool) -> None:
    """SelfSubjectAccessReview with each ServiceAccount's own token."""
    kube = Kube.connect(str(plane.service_account_kubeconfig(NS, account)))
    parts = path.strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    namespace = rest[1] if rest[0] == "namespaces" else ""
    rest = rest[2:] if rest[0] == "namespaces" else rest
    attrs = {"verb": verb, "group": group, "resource": rest[0], "namespace": namespace,
             "name": rest[1] if len(rest) > 1 else ""}
    if len(rest) > 2:
        attrs["subresource"] = rest[2]
    answer = kube.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                          body={"apiVersion": "authorization.k8s.io/v1",
                                "kind": "SelfSubjectAccessReview",
                                "spec": {"resourceAttributes": attrs}})
    assert answer["status"]["allowed"] is allowed, (account, attrs, answer["status"])
