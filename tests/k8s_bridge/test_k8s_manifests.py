"""Static checks of the Kubernetes manifests in ``k8s_bridge/deploy/`` (no cluster).

* Every YAML document is loaded; built-in kinds (CRDs included) are validated with
  ``kubernetes-validate`` in strict mode against Kubernetes ``K8S_VERSION``, whose
  schemas ship inside the package (the tests forbid network access while they run).
* NodeBandwidth / PodBandwidth objects are validated with ``jsonschema`` against the
  openAPIV3Schema of *our* CRD files, translated the way the API server reads them
  (``x-kubernetes-int-or-string`` -> integer or string; boolean ``exclusiveMinimum`` as
  in OpenAPI v3.0 / draft 4; unknown fields rejected, as ``kubectl``'s strict field
  validation does), plus cases that must be rejected.
* Kinds no schema covers here (PodGroup, PyTorchJob, KubeSchedulerConfiguration,
  Kustomization, Component) get small hand-written checks; any other kind fails.
* ``kubectl kustomize`` builds the default set and the walkthrough's overlay with each
  option the docs add to it (where ``kubectl`` is installed; a pure-Python check of
  the rule kustomize enforces -- no kustomization includes its own ancestor -- runs
  everywhere).
* Cross-checks tie the files together: ServiceAccounts, RBAC rules against the
  components' needs (least privilege), Lease names, ports, the scheduler profile name,
  the kustomization, the Dockerfile and the walkthrough.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import textwrap
import tomllib
from collections.abc import Iterator
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import ValidationError as K8sValidationError
from kubernetes_validate.utils import all_versions

from k8s_bridge.cli import cli as bridge_cli

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "k8s_bridge" / "deploy"

# The Kubernetes version the manifests are validated against: the minor version of the
# kube-scheduler image in scheduler.yaml (checked below), shipped offline by
# kubernetes-validate.
K8S_VERSION = "1.32.0"
NAMESPACE = "tdmcore-system"
IMAGE = "ghcr.io/tdmcore/tdmcore:0.1.0"
KUBE_SCHEDULER_IMAGE = "registry.k8s.io/kube-scheduler:v1.32.0"
NONROOT_UID = 65532
CONTROLLER_LEASE = "tdmcore-controller"  # the controller's Lease (fixed by the bridge)
STANDALONE_LEASE = "tdmcore-standalone-scheduler"  # `scheduler --leader-elect`'s default

BUILTIN = {
    ("v1", "Namespace"), ("v1", "ServiceAccount"), ("v1", "ConfigMap"), ("v1", "Service"),
    ("apps/v1", "Deployment"), ("apps/v1", "DaemonSet"),
    ("networking.k8s.io/v1", "NetworkPolicy"), ("policy/v1", "PodDisruptionBudget"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
}
OURS = {("tdmcore.io/v1alpha1", "NodeBandwidth"), ("tdmcore.io/v1alpha1", "PodBandwidth")}
HAND_CHECKED = {
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
    ("kubeflow.org/v1", "PyTorchJob"),
    ("kubescheduler.config.k8s.io/v1", "KubeSchedulerConfiguration"),
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
    ("kustomize.config.k8s.io/v1alpha1", "Component"),
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "PriorityClass"}

# tdmcore-bridge's command line (the contract): sub-command -> flags (True: takes a value).
def _flags(command: click.Command) -> dict[str, bool]:
    """Option -> whether it takes a value, read off the real console script."""
    out: dict[str, bool] = {}
    for param in command.params:
        if isinstance(param, click.Option):
            for opt in (*param.opts, *param.secondary_opts):
                out[opt] = not param.is_flag
    return out


#: the sub-commands of ``tdmcore-bridge`` and their options (k8s_bridge/cli.py)
CLI: dict[str, dict[str, bool]] = {name: _flags(cmd) for name, cmd in bridge_cli.commands.items()}


# -- loading ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Doc:
    file: str  # relative to DEPLOY
    index: int
    obj: dict[str, Any]

    @property
    def gvk(self) -> tuple[str, str]:
        return self.obj.get("apiVersion", ""), self.obj.get("kind", "")

    @property
    def name(self) -> str:
        return str(self.obj.get("metadata", {}).get("name", ""))

    @property
    def namespace(self) -> str | None:
        return self.obj.get("metadata", {}).get("namespace")

    def __str__(self) -> str:
        return f"{self.file}#{self.index}:{self.gvk[1]}/{self.name}"


def _load() -> list[Doc]:
    docs = []
    for path in sorted(DEPLOY.rglob("*.y*ml")):
        rel = path.relative_to(DEPLOY).as_posix()
        for i, obj in enumerate(yaml.safe_load_all(path.read_text(encoding="utf-8"))):
            if obj is None:
                continue
            assert isinstance(obj, dict), f"{rel}#{i}: not a mapping"
            docs.append(Doc(rel, i, obj))
    return docs


DOCS = _load()


def _of(kind: str, files: set[str] | None = None) -> list[Doc]:
    return [d for d in DOCS if d.gvk[1] == kind and (files is None or d.file in files)]


def _one(kind: str, name: str | None = None) -> Doc:
    found = [d for d in _of(kind) if name is None or d.name == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[str(d) for d in found]}"
    return found[0]


def _ids(docs: list[Doc]) -> list[str]:
    return [str(d) for d in docs]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may download anything (kubernetes-validate's schemas are local)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


# -- command lines --------------------------------------------------------------------------


def _parse_cli(args: list[str]) -> tuple[str, dict[str, str | bool]]:
    """``[sub, --flag, value, --switch, --flag=value]`` -> (sub, {flag: value or True})."""
    assert args and args[0] in CLI, f"unknown tdmcore-bridge sub-command in {args}"
    sub, known, flags = args[0], CLI[args[0]], {}
    rest = list(args[1:])
    while rest:
        token = rest.pop(0)
        flag, eq, value = token.partition("=")
        assert flag in known, f"{sub}: flag {flag!r} is not in the contract ({sorted(known)})"
        assert flag not in flags, f"{sub}: {flag} given twice"
        if known[flag]:
            if not eq:
                assert rest, f"{sub}: {flag} needs a value"
                value = rest.pop(0)
            flags[flag] = value
        else:
            assert not eq, f"{sub}: {flag} takes no value"
            flags[flag] = True
    return sub, flags


def _pod_spec(doc: Doc) -> dict[str, Any]:
    return doc.obj["spec"]["template"]["spec"]


def _workloads(files: set[str] | None = None) -> list[Doc]:
    return _of("Deployment", files) + _of("DaemonSet", files)


def _bridge_containers() -> Iterator[tuple[Doc, dict[str, Any], str, dict[str, Any]]]:
    """(workload, container, sub-command, flags) of every tdmcore-bridge container."""
    for doc in _workloads():
        for c in _pod_spec(doc)["containers"]:
            if c["image"] == IMAGE:
                sub, flags = _parse_cli(c.get("args", []))
                yield doc, c, sub, flags


def _bridge(sub: str) -> tuple[Doc, dict[str, Any], dict[str, Any]]:
    found = [(d, c, f) for d, c, s, f in _bridge_containers() if s == sub]
    assert len(found) == 1, f"expected one `{sub}` container, found {len(found)}"
    return found[0]


def _port_number(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    named = [p["containerPort"] for p in container.get("ports", []) if p.get("name") == port]
    assert named, f"container {container['name']}: no port named {port!r}"
    return int(named[0])


def _env(container: dict[str, Any]) -> list[dict[str, Any]]:
    return list(container.get("env", []))


# -- every document: known kind, right place, schema-valid -------------------------------------


def test_deploy_tree_has_the_expected_files() -> None:
    expected = {
        "namespace.yaml", "rbac.yaml", "scheduler-config.yaml", "scheduler.yaml",
        "standalone-scheduler.yaml", "controller.yaml", "agent.yaml", "kustomization.yaml",
        "crds/nodebandwidths.yaml", "crds/podbandwidths.yaml",
        "examples/nodebandwidth.yaml", "examples/podbandwidth.yaml", "examples/podgroup.yaml",
        "examples/pytorchjob.yaml", "networkpolicy.yaml", "requeue.yaml",
        "elastic/kustomization.yaml", "elastic/rbac.yaml", "availability.yaml",
    }
    assert expected <= {d.file for d in DOCS}
    assert _walkthrough().startswith(WALKTHROUGH_HEADING)


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_document_has_a_known_kind_in_the_right_file(doc: Doc) -> None:
    assert doc.gvk in BUILTIN | OURS | HAND_CHECKED, f"{doc}: unknown kind {doc.gvk}"
    assert doc.name or doc.gvk[1] in {"KubeSchedulerConfiguration", "Kustomization",
                                      "Component"}
    in_examples = doc.file.startswith("examples/")
    assert in_examples == (doc.gvk in OURS or doc.gvk[1] in {"PodGroup", "PyTorchJob"}), doc
    if doc.gvk[1] == "KubeSchedulerConfiguration":
        assert doc.file == "scheduler-config.yaml"
    if doc.gvk[1] == "Kustomization":
        assert doc.file == "kustomization.yaml"
    if doc.gvk[1] == "Component":
        assert doc.file == "elastic/kustomization.yaml"
    if doc.gvk[1] == "CustomResourceDefinition":
        assert doc.file.startswith("crds/")


BUILTIN_DOCS = [d for d in DOCS if d.gvk in BUILTIN]


@pytest.mark.parametrize("doc", BUILTIN_DOCS, ids=_ids(BUILTIN_DOCS))
def test_builtin_kinds_validate_strictly(doc: Doc) -> None:
    assert kubernetes_validate.validate(doc.obj, K8S_VERSION, strict=True) == "1.32"


def test_kubernetes_validate_ships_the_version_offline_and_is_strict() -> None:
    assert K8S_VERSION in all_versions()
    local = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    assert (local / f"v{K8S_VERSION}-local-strict" / "daemonset-apps-v1.json").is_file()
    agent = deepcopy(_one("DaemonSet").obj)
    agent["spec"]["template"]["spec"]["containers"][0]["hostPorts"] = [9471]  # a typo
    with pytest.raises(K8sValidationError):
        kubernetes_validate.validate(agent, K8S_VERSION, strict=True)
    controller = deepcopy(_one("Deployment", "tdmcore-controller").obj)
    controller["spec"]["replicas"] = "2"
    with pytest.raises(K8sValidationError):
        kubernetes_validate.validate(controller, K8S_VERSION, strict=True)


def test_namespaces() -> None:
    assert _one("Namespace").name == NAMESPACE
    for doc in DOCS:
        if doc.gvk not in BUILTIN:
            continue
        if doc.gvk[1] in CLUSTER_SCOPED:
            assert doc.namespace is None, doc
        elif doc.gvk[1] == "RoleBinding" and doc.namespace == "kube-system":
            assert doc.obj["roleRef"]["name"] == "extension-apiserver-authentication-reader"
        elif doc.file == "requeue.yaml":  # a training namespace's (the walkthrough's)
            assert (doc.namespace, doc.obj["roleRef"]["name"]) == ("default",
                                                                   "tdmcore-requeue")
        else:
            assert doc.namespace == NAMESPACE, doc


# -- our CRDs ---------------------------------------------------------------------------------


CRD_FILES = {"NodeBandwidth": "crds/nodebandwidths.yaml", "PodBandwidth": "crds/podbandwidths.yaml"}
JSON_SCHEMA_PROPS = set(json.loads(
    (Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
     / f"v{K8S_VERSION}-local-strict" / "_definitions.json").read_text()
)["$defs"]["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"][
    "properties"])


def _crd(kind: str) -> dict[str, Any]:
    docs = [d for d in _of("CustomResourceDefinition") if d.obj["spec"]["names"]["kind"] == kind]
    assert len(docs) == 1 and docs[0].file == CRD_FILES[kind]
    return docs[0].obj


def _version(kind: str) -> dict[str, Any]:
    (version,) = _crd(kind)["spec"]["versions"]
    return version


def _schema(kind: str) -> dict[str, Any]:
    return _version(kind)["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize(("kind", "plural", "short", "scope"), [
    ("NodeBandwidth", "nodebandwidths", "nbw", "Cluster"),
    ("PodBandwidth", "podbandwidths", "pbw", "Namespaced"),
])
def test_crd_identity(kind: str, plural: str, short: str, scope: str) -> None:
    crd = _crd(kind)
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{plural}.tdmcore.io"
    assert spec["group"] == "tdmcore.io" and spec["scope"] == scope
    assert spec["names"]["plural"] == plural and short in spec["names"]["shortNames"]
    version = _version(kind)
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    assert version["additionalPrinterColumns"]
    root = _schema(kind)
    assert root["type"] == "object"
    assert {"spec", "status"} <= set(root["properties"])
    # Only name/generateName of metadata may be constrained; we do not.
    assert root["properties"]["metadata"] == {"type": "object"}


def _at(schema: dict[str, Any], json_path: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    for part in json_path.strip(".").split("."):
        node = (node or {}).get("properties", {}).get(part)
    return node


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_printer_columns_point_into_the_schema(kind: str) -> None:
    types = {"integer", "number", "string", "boolean", "date"}
    for column in _version(kind)["additionalPrinterColumns"]:
        assert column["type"] in types
        if column["jsonPath"] == ".metadata.creationTimestamp":
            continue
        node = _at(_schema(kind), column["jsonPath"])
        assert node is not None, f"{kind}: column {column['name']} -> {column['jsonPath']}"
        if node.get("type") in ("integer", "number"):
            assert column["type"] in ("integer", "number")


def _walk(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any], str]]:
    """Every schema node: (path, node, role) with role 'field' or 'junctor'."""
    for name, sub in node.get("properties", {}).items():
        yield f"{path}.{name}", sub, "field"
        yield from _walk(sub, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield f"{path}[{key}]", node[key], "field"
            yield from _walk(node[key], f"{path}[{key}]")
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(node.get(key, [])):
            yield f"{path}.{key}[{i}]", sub, "junctor"
            yield from _walk(sub, f"{path}.{key}[{i}]")
    if isinstance(node.get("not"), dict):
        yield f"{path}.not", node["not"], "junctor"
        yield from _walk(node["not"], f"{path}.not")


INT_OR_STRING_ANYOF = [{"type": "integer"}, {"type": "string"}]


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_crd_schema_is_structural(kind: str) -> None:
    """The rules the API server enforces on a structural schema, checked by hand."""
    root = _schema(kind)
    problems = []
    nodes = [("$", root, "field"), *_walk(root, "$")]
    for path, node, role in nodes:
        unknown = set(node) - JSON_SCHEMA_PROPS
        if unknown:
            problems.append(f"{path}: unknown keywords {sorted(unknown)}")
        int_or_string = node.get("x-kubernetes-int-or-string") is True
        if role == "field":
            if "type" not in node and not int_or_string:
                problems.append(f"{path}: no type")
            if int_or_string and ("type" in node or node.get("anyOf", INT_OR_STRING_ANYOF)
                                  != INT_OR_STRING_ANYOF):
                problems.append(f"{path}: int-or-string must have no type, anyOf int|string")
            if node.get("type") == "array" and "items" not in node:
                problems.append(f"{path}: array without items")
            for junctor in ("anyOf", "oneOf", "allOf"):
                for sub in node.get(junctor, []):
                    if int_or_string and junctor == "anyOf":
                        continue
                    # Fields named in a junctor must be declared outside it too.
                    for field in set(sub.get("properties", {})) | set(sub.get("required", [])):
                        if field not in node.get("properties", {}):
                            problems.append(f"{path}.{junctor}: {field} not in properties")
        elif not (path.endswith(("anyOf[0]", "anyOf[1]")) and node in INT_OR_STRING_ANYOF):
            for key in ("type", "description", "default", "additionalProperties", "nullable"):
                if key in node:
                    problems.append(f"{path}: {key} inside a junctor")
        for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if bound in node and (not isinstance(node[bound], bool) or limit not in node):
                problems.append(f"{path}: {bound} must be a boolean next to {limit}")
        if node.get("x-kubernetes-list-type") == "map":
            keys = node.get("x-kubernetes-list-map-keys", [])
            required = set(node.get("items", {}).get("required", []))
            if not keys or not set(keys) <= required:
                problems.append(f"{path}: list-map keys {keys} must be required in items")
    assert not problems, "\n".join(problems)


def _to_jsonschema(node: dict[str, Any]) -> dict[str, Any]:
    """An openAPIV3Schema node as a draft-4 JSON Schema that accepts what the API server
    (with kubectl's strict field validation) accepts."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in ("description", "format", "example"):
            continue
        if key == "properties":
            out[key] = {name: _to_jsonschema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _to_jsonschema(value)
        elif key in ("anyOf", "oneOf", "allOf"):
            out[key] = [_to_jsonschema(sub) for sub in value]
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if (node.get("type") == "object" and "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False  # unknown fields: an error, as with kubectl
    return out


def _validator(kind: str) -> jsonschema.Draft4Validator:
    schema = _to_jsonschema(_schema(kind))
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def _errors(obj: dict[str, Any]) -> list[str]:
    return [e.message for e in _validator(obj["kind"]).iter_errors(obj)]


EXAMPLES = [d for d in DOCS if d.gvk in OURS]


def test_examples_cover_both_kinds() -> None:
    assert {d.gvk[1] for d in EXAMPLES} == {"NodeBandwidth", "PodBandwidth"}


@pytest.mark.parametrize("doc", EXAMPLES, ids=_ids(EXAMPLES))
def test_examples_match_our_crds(doc: Doc) -> None:
    assert not _errors(doc.obj)


def _nbw(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "tdmcore.io/v1alpha1", "kind": "NodeBandwidth",
            "metadata": {"name": "gpu-node-1"}, "spec": spec}


def _pbw(**spec: Any) -> dict[str, Any]:
    base = {"period": 200, "duty_cycle": 0.4, "bandwidth": 20, "podName": "p-0"}
    base.update(spec)
    return {"apiVersion": "tdmcore.io/v1alpha1", "kind": "PodBandwidth",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {k: v for k, v in base.items() if v is not None}}


FULL_STATUS = {
    "basePeriodMs": 200.0, "observedGeneration": 3, "recalculate": True,
    "pods": [{"namespace": "default", "name": "resnet50-worker-0", "uid": "1234",
              "job": "default/resnet50", "priority": 1, "lowComm": False, "periodMs": 200.0,
              "dutyCycle": 0.4, "bandwidthGbps": 20.0, "rotation": 2, "shiftMs": -12.5,
              "order": 0}],
    "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 3,
                    "lastTransitionTime": "2025-01-01T00:00:00Z", "reason": "Scheduled",
                    "message": ""}],
}
SELECTOR = {"matchLabels": {"app": "x"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}

VALID = {
    "nbw quantity 25Gi": _nbw(bandwidth="25Gi"),
    "nbw quantity 12500M": _nbw(bandwidth="12500M"),
    "nbw integer Gbps": _nbw(bandwidth=100),
    "nbw no bandwidth": _nbw(),
    "nbw full status": {**_nbw(bandwidth="25G"), "status": FULL_STATUS},
    "pbw podName": _pbw(),
    "pbw selector": _pbw(podName=None, selector=SELECTOR),
    "pbw duty 0 and 1": _pbw(duty_cycle=1),
    "pbw status": {**_pbw(), "status": {"observedPeriodMs": 180.5, "observedDutyCycle": 0.3,
                                        "matchedPods": 4}},
}
INVALID = {
    "pbw no spec": {k: v for k, v in _pbw().items() if k != "spec"},
    "pbw duty_cycle 1.5": _pbw(duty_cycle=1.5),
    "pbw duty_cycle < 0": _pbw(duty_cycle=-0.1),
    "pbw missing period": _pbw(period=None),
    "pbw missing duty_cycle": _pbw(duty_cycle=None),
    "pbw missing bandwidth": _pbw(bandwidth=None),
    "pbw period 0": _pbw(period=0),
    "pbw period as string": _pbw(period="200"),
    "pbw negative bandwidth": _pbw(bandwidth=-1),
    "pbw podName and selector": _pbw(selector=SELECTOR),
    "pbw neither podName nor selector": _pbw(podName=None),
    "pbw camelCase typo dutyCycle": _pbw(dutyCycle=0.4),
    "pbw bad selector operator": _pbw(podName=None, selector={"matchExpressions": [
        {"key": "a", "operator": "Equals"}]}),
    "pbw status duty > 1": {**_pbw(), "status": {"observedDutyCycle": 2}},
    "nbw bandwidth 0": _nbw(bandwidth=0),
    "nbw negative bandwidth": _nbw(bandwidth=-25),
    "nbw fractional number": _nbw(bandwidth=12.5),
    "nbw not a quantity": _nbw(bandwidth="fast"),
    "nbw quantity with a space": _nbw(bandwidth="25 G"),
    "nbw zero quantity": _nbw(bandwidth="0"),
    "nbw negative quantity": _nbw(bandwidth="-25G"),
    "nbw unknown spec field": _nbw(bandwidth=25, speed=25),
    "nbw pod without job": {**_nbw(), "status": {"pods": [{"namespace": "a", "name": "b"}]}},
    "nbw pod dutyCycle 2": {**_nbw(), "status": {"pods": [
        {"namespace": "a", "name": "b", "job": "a/j", "dutyCycle": 2}]}},
    "nbw pod period 0": {**_nbw(), "status": {"pods": [
        {"namespace": "a", "name": "b", "job": "a/j", "periodMs": 0}]}},
    "nbw condition status": {**_nbw(), "status": {"conditions": [
        {**FULL_STATUS["conditions"][0], "status": "Yes"}]}},
}


@pytest.mark.parametrize("case", sorted(VALID))
def test_crd_schema_accepts(case: str) -> None:
    assert not _errors(VALID[case])


@pytest.mark.parametrize("case", sorted(INVALID))
def test_crd_schema_rejects(case: str) -> None:
    assert _errors(INVALID[case]), f"{case} was accepted"


# -- the scheduler: KubeSchedulerConfiguration, its ConfigMap, the extender -------------------


KSC_KEYS = {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection",
            "debuggingConfiguration", "percentageOfNodesToScore", "podInitialBackoffSeconds",
            "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive"}
LEADER_KEYS = {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
               "resourceName", "resourceNamespace"}
PROFILE_KEYS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
EXTENDER_KEYS = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight",
                 "bindVerb", "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable",
                 "managedResources", "ignorable"}


def _ksc() -> dict[str, Any]:
    return _one("KubeSchedulerConfiguration").obj


def _profile_name() -> str:
    (profile,) = _ksc()["profiles"]
    return str(profile["schedulerName"])


def test_kube_scheduler_configuration() -> None:
    ksc = _ksc()
    assert set(ksc) <= KSC_KEYS
    leader = ksc["leaderElection"]
    assert set(leader) <= LEADER_KEYS
    assert leader["leaderElect"] is True and leader.get("resourceLock", "leases") == "leases"
    assert (leader["resourceName"], leader["resourceNamespace"]) == ("tdmcore-scheduler",
                                                                     NAMESPACE)
    (profile,) = ksc["profiles"]
    assert set(profile) <= PROFILE_KEYS and profile["schedulerName"] == "tdmcore-scheduler"
    (extender,) = ksc["extenders"]  # at most one extender may bind
    assert set(extender) <= EXTENDER_KEYS
    # Filter decides (the extender's default): no scoring, kube-scheduler binds the pick
    assert {k: v for k, v in extender.items() if k != "urlPrefix"} == {
        "filterVerb": "filter", "enableHTTPS": False, "httpTimeout": "5s",
        "nodeCacheCapable": True, "ignorable": False,
    }


def test_extender_sidecar_matches_the_configuration() -> None:
    doc, extender, flags = _bridge("extender")
    assert doc.gvk[1] == "Deployment" and doc.name == "tdmcore-scheduler"
    pod = _pod_spec(doc)
    (config,) = _ksc()["extenders"]
    url = urlsplit(config["urlPrefix"])
    assert (url.scheme, url.hostname, url.path) == ("http", "127.0.0.1", "")
    # the verbs on loopback only, kube-scheduler's in the same Pod; the container's one
    # port is the probes' (issue 40: the verbs listened on 0.0.0.0, the probes' port)
    assert flags["--host"] == "127.0.0.1" and url.port == int(flags["--port"])
    assert [p["containerPort"] for p in extender["ports"]] == [int(flags["--probe-port"])]
    assert int(flags["--probe-port"]) != url.port
    assert flags["--policy"] == "metronome"
    assert config["nodeCacheCapable"] is ("--no-node-cache" not in flags)
    # kube-scheduler runs in the same Pod and reads the ConfigMap's copy of the file.
    (kube,) = [c for c in pod["containers"] if c["image"].startswith("registry.k8s.io/")]
    assert kube["image"] == KUBE_SCHEDULER_IMAGE
    assert KUBE_SCHEDULER_IMAGE.rsplit(":v", 1)[1].rsplit(".", 1)[0] == K8S_VERSION.rsplit(
        ".", 1)[0], "validate against the kube-scheduler's minor version"
    (config_arg,) = [a for a in kube["command"] + kube.get("args", [])
                     if a.startswith("--config=")]
    path = Path(config_arg.split("=", 1)[1])
    (mount,) = [m for m in kube["volumeMounts"] if Path(m["mountPath"]) == path.parent]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    configmap = _one("ConfigMap", volume["configMap"]["name"])
    assert configmap.file == "scheduler.yaml" and configmap.namespace == doc.namespace
    embedded = yaml.safe_load(configmap.obj["data"][path.name])
    assert embedded == _ksc(), "scheduler.yaml's ConfigMap differs from scheduler-config.yaml"


def test_kube_scheduler_leader_election_is_allowed() -> None:
    leader = _ksc()["leaderElection"]
    sa = _pod_spec(_one("Deployment", "tdmcore-scheduler"))["serviceAccountName"]
    perms = _permissions(f"{NAMESPACE}/{sa}", DEFAULT_SET)
    ns, name = leader["resourceNamespace"], leader["resourceName"]
    for verb in ("get", "update"):
        assert ("coordination.k8s.io", "leases", verb, name, ns) in perms
    assert ("coordination.k8s.io", "leases", "create", None, ns) in perms


def test_standalone_scheduler_serves_the_same_name() -> None:
    doc, container, flags = _bridge("scheduler")
    assert doc.file == "standalone-scheduler.yaml"
    assert flags["--scheduler-name"] == _profile_name()
    assert flags["--policy"] == "metronome"
    assert int(flags["--port"]) == container["ports"][0]["containerPort"]
    assert doc.obj["spec"]["replicas"] == 1
    if "--leader-elect" not in flags:  # one instance at a time, also during a rollout
        assert doc.obj["spec"]["strategy"]["type"] == "Recreate"


def test_standalone_leader_election_is_allowed_and_its_own() -> None:
    """`scheduler --leader-elect` campaigns for a Lease of its own (not kube-scheduler's,
    which two schedulers would otherwise fight over) that its ServiceAccount may renew."""
    from k8s_bridge.cli import scheduler_cmd

    default = next(p.default for p in scheduler_cmd.params if p.name == "lease_name")
    assert default == STANDALONE_LEASE != _ksc()["leaderElection"]["resourceName"]
    perms = _permissions(f"{NAMESPACE}/tdmcore-standalone-scheduler", STANDALONE_SET)
    for verb in ("get", "update"):
        assert ("coordination.k8s.io", "leases", verb, default, NAMESPACE) in perms
    assert ("coordination.k8s.io", "leases", "create", None, NAMESPACE) in perms


# -- examples: PodGroup, PyTorchJob --------------------------------------------------------------


def _pytorchjob() -> Doc:
    return _one("PyTorchJob")


def _replica_templates() -> dict[str, dict[str, Any]]:
    specs = _pytorchjob().obj["spec"]["pytorchReplicaSpecs"]
    return {rtype: spec["template"] for rtype, spec in specs.items()}


def test_podgroup() -> None:
    pg = _one("PodGroup")
    assert set(pg.obj["spec"]) <= {"minMember", "minResources", "scheduleTimeoutSeconds"}
    min_member = pg.obj["spec"]["minMember"]
    assert isinstance(min_member, int) and not isinstance(min_member, bool) and min_member >= 1
    timeout = pg.obj["spec"].get("scheduleTimeoutSeconds", 1)
    assert isinstance(timeout, int) and timeout >= 1
    # The gang is the whole example job.
    specs = _pytorchjob().obj["spec"]["pytorchReplicaSpecs"]
    assert min_member == sum(s["replicas"] for s in specs.values())


def test_pytorchjob_shape() -> None:
    job = _pytorchjob().obj
    assert set(job["spec"]) <= {"pytorchReplicaSpecs", "runPolicy", "elasticPolicy",
                                "nprocPerNode"}
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Master": 1, "Worker": 3}
    for spec in specs.values():
        assert set(spec) <= {"replicas", "restartPolicy", "template"}
        assert spec["restartPolicy"] in {"Always", "OnFailure", "Never", "ExitCode"}


@pytest.mark.parametrize("rtype", ["Master", "Worker"])
def test_pytorchjob_pods(rtype: str) -> None:
    template = _replica_templates()[rtype]
    # The template is a real Pod as far as Kubernetes is concerned.
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"resnet50-{rtype.lower()}-0", **template["metadata"]},
           "spec": template["spec"]}
    kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
    spec, labels = template["spec"], template["metadata"]["labels"]
    assert spec["schedulerName"] == _profile_name()
    assert labels["tdmcore.io/priority"] in {"high", "low"}
    assert labels["tdmcore.io/priority"] == "high"
    assert labels["scheduling.x-k8s.io/pod-group"] == _one("PodGroup").name
    (container,) = [c for c in spec["containers"] if c["name"] == "pytorch"]
    assert container["image"] == "ghcr.io/tdmcore/examples:resnet50"
    assert container["command"] == ["python", "train.py"]
    gpus = container["resources"]["limits"]["nvidia.com/gpu"]
    assert isinstance(gpus, int) and gpus >= 1
    env = _env(container)
    names = [e["name"] for e in env]
    by_name = {e["name"]: e for e in env}
    field = {n: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for n, e in
             by_name.items()}
    assert field["HOST_IP"] == "status.hostIP"
    assert field["POD_NAME"] == "metadata.name"
    assert field["POD_NAMESPACE"] == "metadata.namespace"
    # $(HOST_IP) expands only if HOST_IP comes earlier in the list.
    assert names.index("HOST_IP") < names.index("TDMCORE_AGENT_URL")
    _, agent, flags = _bridge("agent")
    assert by_name["TDMCORE_AGENT_URL"]["value"] == f"http://$(HOST_IP):{flags['--port']}"
    # issue 40's review: the pod proves who it is with its own projected token, for the
    # controller's audience, which the hook reads from TDMCORE_TOKEN_FILE
    from k8s_bridge.cli import controller_cmd
    from k8s_bridge.hook import ENV_TOKEN_FILE

    path = Path(by_name[ENV_TOKEN_FILE]["value"])
    (mount,) = [m for m in container["volumeMounts"] if Path(m["mountPath"]) == path.parent]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    (source,) = volume["projected"]["sources"]
    token = source["serviceAccountToken"]
    defaults = {p.name: p.default for p in controller_cmd.params}
    assert token["path"] == path.name and mount["readOnly"] is True
    assert token["audience"] == defaults["report_audience"]


def test_podbandwidth_example_describes_the_job() -> None:
    (pbw,) = [d for d in EXAMPLES if d.gvk[1] == "PodBandwidth"]
    selector = pbw.obj["spec"]["selector"]
    assert set(selector) == {"matchLabels"}
    job = _pytorchjob()
    for template in _replica_templates().values():
        # The training-operator adds training.kubeflow.org/job-name to the job's pods.
        labels = {**template["metadata"]["labels"], "training.kubeflow.org/job-name": job.name}
        assert selector["matchLabels"].items() <= labels.items()


# -- the kustomization -------------------------------------------------------------------------


DEFAULT_FILES = ["namespace.yaml", "crds/nodebandwidths.yaml", "crds/podbandwidths.yaml",
                 "rbac.yaml", "requeue.yaml", "scheduler.yaml", "controller.yaml", "agent.yaml",
                 "networkpolicy.yaml", "availability.yaml"]
DEFAULT_SET = set(DEFAULT_FILES)
STANDALONE_SET = (DEFAULT_SET - {"scheduler.yaml"}) | {"standalone-scheduler.yaml"}


def _selects(policy: Doc, doc: Doc) -> bool:
    labels = doc.obj["spec"]["template"]["metadata"]["labels"]
    return bool(policy.obj["spec"]["podSelector"]["matchLabels"].items() <= labels.items())


@pytest.mark.parametrize("doc", _workloads(DEFAULT_SET), ids=_ids(_workloads(DEFAULT_SET)))
def test_network_policy_admits_each_pod_on_its_serving_ports_only(doc: Doc) -> None:
    """Issue 40: no NetworkPolicy shipped.  One policy selects each workload's pods and
    admits the ports its containers serve to others and nothing else; the
    controller's reports only from the agents and the controller replicas."""
    (policy,) = [p for p in _of("NetworkPolicy") if _selects(p, doc)]
    assert policy.namespace == doc.namespace and policy.obj["spec"]["policyTypes"] == [
        "Ingress"]
    admitted = {p["port"]: rule.get("from") for rule in policy.obj["spec"]["ingress"]
                for p in rule["ports"]}
    served: set[int] = set()
    for c in _pod_spec(doc)["containers"]:
        served |= {p["containerPort"] for p in c.get("ports", [])}
    assert set(admitted) == served, (admitted, served)
    if doc.name == "tdmcore-controller":
        sources = admitted[8890]
        assert sources is not None
        components = {s["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
                      for s in sources}
        assert components == {"agent", "controller"}
        assert all("namespaceSelector" not in s for s in sources)


def test_two_replicas_a_disruption_budget_and_a_priority_class() -> None:
    """Issue 40: one extender replica, no PodDisruptionBudget, no priorityClass.  The
    scheduler and the controller run two replicas (one leads, by its Lease), a drain
    keeps one of each, and every tdmcore pod has a shipped PriorityClass; the agents'
    never preempts (on a GPU node the pods it would evict are training pods)."""
    classes = {d.name: d.obj for d in _of("PriorityClass")}
    for priority in classes.values():
        assert priority["globalDefault"] is False and 0 < priority["value"] < 1_000_000_000
    budgets = _of("PodDisruptionBudget")
    for doc in _workloads(DEFAULT_SET):
        name = _pod_spec(doc)["priorityClassName"]
        never = classes[name].get("preemptionPolicy") == "Never"
        assert never == (doc.gvk[1] == "DaemonSet"), doc
        if doc.gvk[1] != "Deployment":
            continue
        assert doc.obj["spec"]["replicas"] == 2, doc
        (budget,) = [b for b in budgets if b.obj["spec"]["selector"]["matchLabels"].items()
                     <= doc.obj["spec"]["template"]["metadata"]["labels"].items()]
        assert budget.namespace == doc.namespace and budget.obj["spec"]["minAvailable"] == 1


def test_kustomization_lists_the_default_set() -> None:
    (kust,) = [d.obj for d in _of("Kustomization") if d.file == "kustomization.yaml"]
    assert set(kust) <= {"apiVersion", "kind", "resources", "images", "labels"}
    # A `namespace:` would move the kube-system RoleBinding; none is set.
    assert "namespace" not in kust
    assert kust["resources"] == DEFAULT_FILES
    for resource in kust["resources"]:
        assert (DEPLOY / resource).is_file(), resource
    api_files = {d.file for d in DOCS if d.gvk in BUILTIN}
    left_out = api_files - DEFAULT_SET
    assert left_out == {"standalone-scheduler.yaml", "elastic/rbac.yaml"}, left_out


# -- RBAC: references resolve, rules name real resources, least privilege -------------------


BUILTIN_ROLES = {("ClusterRole", None, "system:kube-scheduler"),
                 ("ClusterRole", None, "system:volume-scheduler"),
                 ("Role", "kube-system", "extension-apiserver-authentication-reader")}
VERBS = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}


def _crd_resources() -> set[str]:
    out = set()
    for kind in CRD_FILES:
        plural = _crd(kind)["spec"]["names"]["plural"]
        out.add(plural)
        if "status" in _version(kind).get("subresources", {}):
            out.add(f"{plural}/status")
    return out


KNOWN_RESOURCES: dict[str, set[str]] = {
    "": {"nodes", "pods", "pods/binding", "events"},
    "authentication.k8s.io": {"tokenreviews"},
    "events.k8s.io": {"events"},
    "coordination.k8s.io": {"leases"},
    "kubeflow.org": {"pytorchjobs", "tfjobs"},
    "networktopology.diktyo.x-k8s.io": {"networktopologies"},
    "appgroup.diktyo.x-k8s.io": {"appgroups"},
    "scheduling.x-k8s.io": {"podgroups", "podgroups/status"},
}


def test_rbac_rules_name_real_resources() -> None:
    known = {**KNOWN_RESOURCES, "tdmcore.io": _crd_resources()}
    for doc in _of("ClusterRole") + _of("Role"):
        for rule in doc.obj["rules"]:
            assert "*" not in rule["verbs"] and set(rule["verbs"]) <= VERBS, doc
            for group in rule["apiGroups"]:
                assert group in known, f"{doc}: API group {group!r}"
                assert set(rule["resources"]) <= known[group], f"{doc}: {rule['resources']}"
            if "resourceNames" in rule:
                assert "create" not in rule["verbs"], "create cannot be limited by name"


Perm = tuple[str, str, str, str | None, str | None]  # group, resource, verb, name, namespace


def _permissions(subject: str, files: set[str]) -> set[Perm]:
    """What our own Roles/ClusterRoles give ``namespace/serviceaccount`` (built-in roles
    bound to it are not expanded)."""
    roles = {(d.gvk[1], d.namespace, d.name): d.obj for d in
             _of("ClusterRole", files) + _of("Role", files)}
    perms: set[Perm] = set()
    for binding in _of("ClusterRoleBinding", files) + _of("RoleBinding", files):
        subjects = {f"{s['namespace']}/{s['name']}" for s in binding.obj["subjects"]
                    if s["kind"] == "ServiceAccount"}
        if subject not in subjects:
            continue
        ref = binding.obj["roleRef"]
        scope = binding.namespace  # a RoleBinding grants in its namespace only
        role = roles.get((ref["kind"], None if ref["kind"] == "ClusterRole" else scope,
                          ref["name"]))
        if role is None:
            continue
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames", [None]):
                            perms.add((group, resource, verb, name, scope))
    return perms


def _grant(groups_resources: dict[str, list[str]], verbs: str, name: str | None = None,
           namespace: str | None = None) -> set[Perm]:
    return {(g, r, v, name, namespace) for g, rs in groups_resources.items() for r in rs
            for v in verbs.split()}


_READ = "get list watch"
_SCHEDULER_RULES = (
    _grant({"": ["nodes", "pods"], "tdmcore.io": ["nodebandwidths", "podbandwidths"],
            "networktopology.diktyo.x-k8s.io": ["networktopologies"],
            "appgroup.diktyo.x-k8s.io": ["appgroups"], "scheduling.x-k8s.io": ["podgroups"]},
           _READ)
    | _grant({"": ["pods/binding"]}, "create")
    | _grant({"tdmcore.io": ["nodebandwidths"]}, "create")
    | _grant({"tdmcore.io": ["nodebandwidths/status"]}, "patch")
    | _grant({"scheduling.x-k8s.io": ["podgroups/status"]}, "patch")  # gangs' status
)
EXPECTED_PERMISSIONS: dict[str, set[Perm]] = {
    "tdmcore-scheduler": _SCHEDULER_RULES
    # the requeuer's annotation, in the namespaces bound (requeue.yaml: `default`) only
    | _grant({"": ["pods"]}, "patch", namespace="default")
    | _grant({"coordination.k8s.io": ["leases"]}, "create", namespace=NAMESPACE)
    | _grant({"coordination.k8s.io": ["leases"]}, "get update", "tdmcore-scheduler", NAMESPACE),
    # --leader-elect: the Lease tdmcore-standalone-scheduler (not kube-scheduler's)
    "tdmcore-standalone-scheduler": _SCHEDULER_RULES
    | _grant({"coordination.k8s.io": ["leases"]}, "create", namespace=NAMESPACE)
    | _grant({"coordination.k8s.io": ["leases"]}, "get update", STANDALONE_LEASE, NAMESPACE)
    # kube-scheduler records the Events in extender mode; standalone, tdmcore does
    | _grant({"": ["events"]}, "create"),
    "tdmcore-controller": (
        _grant({"": ["nodes", "pods"], "tdmcore.io": ["nodebandwidths", "podbandwidths"],
                "networktopology.diktyo.x-k8s.io": ["networktopologies"],
                "appgroup.diktyo.x-k8s.io": ["appgroups"], "scheduling.x-k8s.io": ["podgroups"]},
               _READ)
        | _grant({"tdmcore.io": ["nodebandwidths"]}, "create")
        # The controller also writes PodBandwidth status (observedPeriodMs, ...).
        | _grant({"tdmcore.io": ["nodebandwidths/status", "podbandwidths/status"]},
                 "patch")
        # /v1/report: the agents' tokens (TokenReview); pattern changes as Events
        | _grant({"authentication.k8s.io": ["tokenreviews"]}, "create")
        | _grant({"": ["events"]}, "create")
        | _grant({"coordination.k8s.io": ["leases"]}, "create", namespace=NAMESPACE)
        | _grant({"coordination.k8s.io": ["leases"]}, "get update", CONTROLLER_LEASE,
                 NAMESPACE)),
    "tdmcore-agent": set(),
}


ELASTIC_SET = DEFAULT_SET | {"elastic/rbac.yaml"}


def test_elastic_rbac_only_in_the_elastic_component() -> None:
    """Issue 40: the controller could patch every PyTorchJob and TFJob though
    ``--elastic`` was off.  The Component ``elastic/`` adds the elastic ClusterRole and
    sets the flag (``TDMCORE_ELASTIC``, the option's variable); the default set alone
    grants nothing on Kubeflow jobs."""
    from k8s_bridge.cli import controller_cmd

    (component,) = [d.obj for d in _of("Component") if d.file == "elastic/kustomization.yaml"]
    assert component["resources"] == ["rbac.yaml"]
    (patch,) = component["patches"]
    target = yaml.safe_load(patch["patch"])
    doc, _, flags = _bridge("controller")
    assert (target["kind"], target["metadata"]["name"], target["metadata"]["namespace"]) \
        == (doc.gvk[1], doc.name, doc.namespace)
    (container,) = target["spec"]["template"]["spec"]["containers"]
    assert container["name"] == _pod_spec(doc)["containers"][0]["name"] == "controller"
    (env,) = container["env"]
    (option,) = [p for p in controller_cmd.params if p.name == "elastic"]
    assert env["name"] == option.envvar and env["value"] in {"dragon", "kod2", "weighted"}
    assert "--elastic" not in flags
    assert option.envvar not in {e["name"] for e in _env(_pod_spec(doc)["containers"][0])}
    account = f"{NAMESPACE}/tdmcore-controller"
    kubeflow = {p for p in _permissions(account, ELASTIC_SET) if p[0] == "kubeflow.org"}
    assert kubeflow == _grant({"kubeflow.org": ["pytorchjobs", "tfjobs"]}, f"{_READ} patch")
    assert not any(p[0] == "kubeflow.org" for p in _permissions(account, DEFAULT_SET))
    assert not any(p[0] == "kubeflow.org" for d in ("tdmcore-scheduler", "tdmcore-agent")
                   for p in _permissions(f"{NAMESPACE}/{d}", ELASTIC_SET))


def test_no_kustomization_includes_its_own_ancestor() -> None:
    """Issue 40's review: ``kubectl kustomize k8s_bridge/deploy/elastic`` failed with
    "cycle detected": the overlay listed its parent folder, which contains it, as a
    resource.  kustomize refuses any root that contains one it is building from; this
    checks that rule without kustomize, for every kustomization under deploy/, and that
    a Component is only ever listed under ``components:``."""
    kinds = {(DEPLOY / d.file).parent: d.gvk[1]
             for d in _of("Kustomization") + _of("Component")}
    for folder in kinds:
        obj = yaml.safe_load((folder / "kustomization.yaml").read_text())
        for key in ("resources", "components"):
            for entry in obj.get(key) or []:
                target = (folder / entry).resolve()
                if target.is_file():
                    assert key == "resources", (folder, entry)
                    continue
                assert target.is_dir(), f"{folder}: {entry} does not exist"
                assert target != folder and target not in folder.parents, \
                    f"{folder}: {key} {entry!r} is an ancestor (kustomize: cycle detected)"
                wanted = "Component" if key == "components" else "Kustomization"
                assert kinds.get(target) == wanted, (folder, entry)


#: the overlay the walkthrough makes, and what the docs append to it for each option
_OVERLAY_DOCS = ROOT / "docs" / "kubernetes.md"


def _overlay_steps() -> dict[str, str]:
    """The heredocs the docs write into tdmcore-overlay/kustomization.yaml: the
    walkthrough's (``cat >``) and each one appended (``cat >>``), keyed by the line
    that follows the heredoc's first line."""
    text = _OVERLAY_DOCS.read_text(encoding="utf-8")
    # a heredoc inside a list item is indented with it
    found = re.findall(r"^( *)cat (>>?) tdmcore-overlay/kustomization\.yaml <<'EOF'\n"
                       r"(.*?)\n\1EOF$", text, flags=re.S | re.M)
    steps = {"base" if op == ">" else body.splitlines()[0].strip():
             textwrap.dedent(body) + "\n" for _, op, body in found}
    assert "base" in steps and len(steps) == len(found) >= 3, list(steps)
    return steps


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl to run kustomize")
@pytest.mark.parametrize("option", ["base", "components:", "patches:", "requeue"])
def test_kubectl_kustomize_builds_the_docs_overlays(tmp_path: Path, option: str) -> None:
    """``kubectl kustomize`` (the one ``kubectl apply -k`` runs) builds the default
    set, the walkthrough's overlay, and the overlay with each option the docs append
    (the elastic Component, the standalone scheduler's patch), from the docs' own
    text; the Component alone fails rather than giving half of it."""
    steps = _overlay_steps()
    (tmp_path / "k8s_bridge").symlink_to(ROOT / "k8s_bridge")
    (tmp_path / "tdmcore-overlay").mkdir()
    text = steps["base"] + (steps[option] if option in steps else "")
    if option == "requeue":  # the checklist's RoleBinding per training namespace
        requeue = (DEPLOY / "requeue.yaml").read_text()
        (tmp_path / "tdmcore-overlay" / "requeue-team-a.yaml").write_text(
            requeue.replace("namespace: default", "namespace: team-a"))
        text = text.replace("  - ../k8s_bridge/deploy\n",
                            "  - ../k8s_bridge/deploy\n  - requeue-team-a.yaml\n", 1)
    (tmp_path / "tdmcore-overlay" / "kustomization.yaml").write_text(text)

    def build(folder: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "kustomize", str(folder)], capture_output=True,
                              text=True, timeout=120, check=False)

    def objects(out: str) -> dict[tuple[str, str], dict[str, Any]]:
        return {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out) if o}

    def namespaces(out: str, kind: str, name: str) -> set[str]:
        return {o["metadata"].get("namespace") for o in yaml.safe_load_all(out)
                if o and (o["kind"], o["metadata"]["name"]) == (kind, name)}

    default = build(DEPLOY)
    assert default.returncode == 0, default.stderr
    assert set(objects(default.stdout)) == {(d.gvk[1], d.name) for d in DOCS
                                            if d.file in DEFAULT_SET}
    built = build(tmp_path / "tdmcore-overlay")
    assert built.returncode == 0, built.stderr
    got = objects(built.stdout)
    controller = got[("Deployment", "tdmcore-controller")]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in controller["containers"][0].get("env", [])}
    elastic = ("ClusterRole", "tdmcore-controller-elastic") in got
    assert elastic == (option == "components:")
    assert (env.get("TDMCORE_ELASTIC") == "dragon") == elastic
    assert (("Deployment", "tdmcore-scheduler") in got) == (option != "patches:")
    assert namespaces(built.stdout, "RoleBinding", "tdmcore-requeue") == (
        {"default", "team-a"} if option == "requeue" else {"default"})
    images = {c["image"] for o in got.values() if o["kind"] in ("Deployment", "DaemonSet")
              for c in o["spec"]["template"]["spec"]["containers"]}
    assert IMAGE not in images and "registry.example.com/tdmcore/tdmcore:0.1.0" in images
    alone = build(DEPLOY / "elastic")
    assert alone.returncode != 0 and "tdmcore-controller" in alone.stderr


def test_nobody_may_patch_pods_cluster_wide() -> None:
    """Issue 40: with the extender's token a server-side dry run replaced a kube-system
    pod's image (cluster-wide ``patch pods``).  Patching pods is granted by RoleBindings
    in the training namespaces only."""
    for account in EXPECTED_PERMISSIONS:
        files = STANDALONE_SET if "standalone" in account else ELASTIC_SET
        for group, resource, verb, _, namespace in _permissions(f"{NAMESPACE}/{account}",
                                                                 files):
            if (group, resource) == ("", "pods") and verb not in ("get", "list", "watch"):
                assert namespace not in (None, "kube-system"), (account, verb)


@pytest.mark.parametrize("files", [DEFAULT_SET, STANDALONE_SET], ids=["default", "standalone"])
def test_references_resolve(files: set[str]) -> None:
    accounts = {f"{d.namespace}/{d.name}" for d in _of("ServiceAccount", files)}
    for doc in _workloads(files):
        pod = _pod_spec(doc)
        assert "serviceAccountName" in pod, f"{doc} runs as the default ServiceAccount"
        assert f"{doc.namespace}/{pod['serviceAccountName']}" in accounts, doc
    roles = {(d.gvk[1], d.namespace, d.name) for d in
             _of("ClusterRole", files) + _of("Role", files)} | BUILTIN_ROLES
    for binding in _of("ClusterRoleBinding", files) + _of("RoleBinding", files):
        ref = binding.obj["roleRef"]
        ns = None if ref["kind"] == "ClusterRole" else binding.namespace
        assert (ref["kind"], ns, ref["name"]) in roles, f"{binding}: roleRef {ref}"
        for subject in binding.obj["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            assert f"{subject['namespace']}/{subject['name']}" in accounts, binding


@pytest.mark.parametrize("account", sorted(EXPECTED_PERMISSIONS))
def test_least_privilege(account: str) -> None:
    """tdmcore's own Roles and ClusterRoles grant each account what its component needs
    and nothing more.  The built-in roles bound to tdmcore-scheduler are not expanded
    here: that account is kube-scheduler's too, and holds kube-scheduler's powers
    (:func:`test_the_scheduler_account_holds_kube_schedulers_roles`)."""
    files = STANDALONE_SET if "standalone" in account else DEFAULT_SET
    assert f"{NAMESPACE}/{account}" in {f"{d.namespace}/{d.name}"
                                        for d in _of("ServiceAccount", files)}
    got = _permissions(f"{NAMESPACE}/{account}", files)
    expected = EXPECTED_PERMISSIONS[account]
    assert not got - expected, f"more than needed: {sorted(got - expected, key=str)}"
    assert not expected - got, f"missing: {sorted(expected - got, key=str)}"


def test_the_scheduler_account_holds_kube_schedulers_roles() -> None:
    """kube-scheduler and the extender share the scheduler Pod's ServiceAccount, which
    is bound to kube-scheduler's built-in roles (delete pods, write pod status, bind, in
    every namespace): kube-scheduler's own role, not least privilege for the extender,
    as rbac.yaml and the production checklist say (the e2e suite asks the API server)."""
    bound = {(b.obj["roleRef"]["kind"], b.namespace if b.gvk[1] == "RoleBinding" else None,
              b.obj["roleRef"]["name"])
             for b in _of("ClusterRoleBinding") + _of("RoleBinding")
             if any(s["name"] == "tdmcore-scheduler" for s in b.obj["subjects"])}
    assert BUILTIN_ROLES <= bound
    # said plainly where the RBAC is read, and not claimed away
    header = (DEPLOY / "rbac.yaml").read_text().split("apiVersion:")[0]
    assert "not least privilege for the extender" in header
    assert "may delete any pod" in header and "kube-system" in header
    checklist = (ROOT / "docs" / "kubernetes.md").read_text()
    assert "it is **not** least privilege for the extender" in checklist


def test_agent_has_no_api_access() -> None:
    doc, _, _ = _bridge("agent")
    pod = _pod_spec(doc)
    (sa,) = [d for d in _of("ServiceAccount") if d.name == pod["serviceAccountName"]]
    assert sa.obj["automountServiceAccountToken"] is False
    assert pod["automountServiceAccountToken"] is False
    for binding in _of("ClusterRoleBinding") + _of("RoleBinding"):
        assert all(s["name"] != sa.name for s in binding.obj["subjects"]), binding


def test_agent_token_is_for_the_controller_alone() -> None:
    """Issue 40: /v1/report took reports from anyone.  The agent sends a projected token
    whose audience is the controller's (not the API server's), from the file the agent
    reads, and the controller takes reports from the agent's ServiceAccount only."""
    from k8s_bridge.cli import controller_cmd

    doc, container, flags = _bridge("agent")
    pod = _pod_spec(doc)
    path = Path(str(flags["--token-file"]))
    (mount,) = [m for m in container["volumeMounts"] if Path(m["mountPath"]) == path.parent]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    (source,) = volume["projected"]["sources"]
    token = source["serviceAccountToken"]
    assert token["path"] == path.name and mount["readOnly"] is True
    defaults = {p.name: p.default for p in controller_cmd.params}
    _, _, ctrl_flags = _bridge("controller")
    assert ctrl_flags.get("--report-auth", defaults["report_auth"]) == "tokenreview"
    assert token["audience"] == ctrl_flags.get("--report-audience",
                                               defaults["report_audience"])
    users = ctrl_flags.get("--report-user", defaults["report_users"])
    assert list(users) == [f"system:serviceaccount:{doc.namespace}:"
                           f"{pod['serviceAccountName']}"]


# -- the controller and the agent -------------------------------------------------------------


def test_controller_lease_service_and_agent_url() -> None:
    doc, container, flags = _bridge("controller")
    assert doc.gvk[1] == "Deployment" and doc.obj["spec"]["replicas"] == 2
    assert flags["--leader-elect"] is True
    assert flags["--lease-namespace"] == NAMESPACE == doc.namespace
    if "--elastic" in flags:
        assert flags["--elastic"] in {"dragon", "kod2", "weighted"}
    sa = _pod_spec(doc)["serviceAccountName"]
    perms = _permissions(f"{doc.namespace}/{sa}", DEFAULT_SET)
    lease_names = {p[3] for p in perms if p[1] == "leases" and p[2] == "update"
                   and p[4] == flags["--lease-namespace"]}
    assert lease_names == {CONTROLLER_LEASE}
    port = int(flags["--port"])
    assert port == 8890 == _port_number(container, "http")
    assert int(flags["--probe-port"]) == 9890 == _port_number(container, "probes")
    service = _one("Service", "tdmcore-controller")
    labels = doc.obj["spec"]["template"]["metadata"]["labels"]
    assert service.obj["spec"]["selector"].items() <= labels.items()
    (svc_port,) = service.obj["spec"]["ports"]
    assert svc_port["port"] == port == _port_number(container, svc_port["targetPort"])
    _, _, agent_flags = _bridge("agent")
    assert agent_flags["--controller"] == (
        f"http://{service.name}.{service.namespace}.svc:{svc_port['port']}")


def test_agent_daemonset() -> None:
    doc, container, flags = _bridge("agent")
    assert doc.gvk[1] == "DaemonSet"
    (port,) = container["ports"]
    assert port["hostPort"] == port["containerPort"] == int(flags["--port"]) == 9471
    env = {e["name"]: e for e in _env(container)}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    pod = _pod_spec(doc)
    gpu_selector = any(k.startswith("nvidia.com/gpu") for k in pod.get("nodeSelector", {}))
    gpu_toleration = any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", []))
    assert gpu_selector or gpu_toleration


# -- every workload: hardening, probes, resources, metrics ------------------------------------


WORKLOADS = _workloads()


@pytest.mark.parametrize("doc", WORKLOADS, ids=_ids(WORKLOADS))
def test_workload_hardening(doc: Doc) -> None:
    spec = doc.obj["spec"]
    template_labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= template_labels.items()
    pod = _pod_spec(doc)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == NONROOT_UID
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for c in pod["containers"]:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
        assert sc["runAsNonRoot"] is True and not sc.get("privileged")
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
        for key in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(c["resources"][key]), f"{doc}/{c['name']} {key}"
        for probe in ("livenessProbe", "readinessProbe"):
            assert "httpGet" in c[probe], f"{doc}/{c['name']}: {probe}"
        for mount in c.get("volumeMounts", []):
            assert mount["name"] in volumes
    assert "serviceAccountName" in pod


@pytest.mark.parametrize("doc", WORKLOADS, ids=_ids(WORKLOADS))
def test_bridge_containers_probes_and_metrics(doc: Doc) -> None:
    containers = [(c, s, f) for d, c, s, f in _bridge_containers() if d == doc]
    assert len(containers) == 1, f"{doc}: one tdmcore-bridge container per pod"
    container, _, flags = containers[0]
    port = int(flags.get("--probe-port", flags["--port"]))  # probes apart where they can be
    assert container["image"] == IMAGE
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"),
                        ("startupProbe", "/healthz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path and _port_number(container, get["port"]) == port
    annotations = doc.obj["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {"prometheus.io/scrape": "true", "prometheus.io/port": str(port),
                           "prometheus.io/path": "/metrics"}
    # Read-only root: Numba's cache and temporary files go to an emptyDir at /tmp.
    volumes = {v["name"]: v for v in _pod_spec(doc).get("volumes", [])}
    (tmp,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert "emptyDir" in volumes[tmp["name"]]


# -- the image recipe ----------------------------------------------------------------------------


def test_dockerfile() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    froms = [ln for ln in lines if ln.startswith("FROM ")]
    assert len(froms) == 2 and " AS builder" in froms[0]
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in lines
    assert all("${PYTHON_IMAGE}" in f for f in froms)
    assert "build-essential" in text and re.search(r'pip wheel .*"\.\[k8s\]" -w /wheels', text)
    assert '"tdmcore[k8s]"' in text  # the runtime stage installs the bridge's extra
    assert "--no-index" in text  # the runtime stage installs from the builder's wheels only
    assert f"USER {NONROOT_UID}:{NONROOT_UID}" in lines
    # issue 40: warm kernels compiled at build time for a generic CPU, copied at start
    warm = re.search(r"tdmcore-bridge warm-cache --dir (\S+)", text)
    assert warm and f"TDMCORE_WARM_CACHE={warm.group(1)}" in text
    assert "NUMBA_CPU_NAME=generic" in text and "NUMBA_CACHE_DIR=/tmp/numba-cache" in text
    assert text.index("warm-cache") < text.index(f"USER {NONROOT_UID}")
    (entrypoint,) = [ln for ln in lines if ln.startswith("ENTRYPOINT")]
    (script,) = json.loads(entrypoint.removeprefix("ENTRYPOINT").strip())
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert script == "tdmcore-bridge" and scripts[script] == "k8s_bridge._entry:main"


def test_dockerignore() -> None:
    patterns = {ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")}
    assert {".venv", "build", "report", ".git", "__pycache__", "*.so"} <= patterns
    for needed in ("pyproject.toml", "setup.py", "README.md", "src", "k8s_bridge",
                   "src/tdmcore", "*.pyx", "*.toml", "*.md", "*.py"):
        assert needed not in patterns and f"**/{needed}" not in patterns, needed


# -- the walkthrough -----------------------------------------------------------------------------


# Options the walkthrough may mention: tdmcore-bridge's (CLI) plus these of other tools.
OTHER_TOOLS_FLAGS = {"--gang-scheduler-name",  # the training-operator's
                     "--ignore-not-found"}     # kubectl delete


#: The walkthrough's home: a level-2 section of the Kubernetes docs page, found by heading.
WALKTHROUGH_PAGE = ROOT / "docs" / "kubernetes.md"
WALKTHROUGH_HEADING = "## Walkthrough"


def _walkthrough() -> str:
    """The walkthrough section of docs/kubernetes.md, from its heading up to the next
    heading of level 1 or 2 (lines in fenced code blocks are not headings)."""
    lines = WALKTHROUGH_PAGE.read_text(encoding="utf-8").splitlines()
    in_code, start = False, None
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif in_code:
            continue
        elif start is None and line.startswith(WALKTHROUGH_HEADING):
            start = i
        elif start is not None and re.match(r"#{1,2} ", line):
            return "\n".join(lines[start:i]) + "\n"
    assert start is not None, f"{WALKTHROUGH_PAGE.name}: no {WALKTHROUGH_HEADING!r} heading"
    return "\n".join(lines[start:]) + "\n"


def test_walkthrough() -> None:
    text = _walkthrough()
    assert text.startswith(WALKTHROUGH_HEADING)
    in_code = False
    for line in text.splitlines()[1:]:
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            assert line.startswith("###"), f"heading above level 3 inside the walkthrough: {line}"
    allowed = {f for flags in CLI.values() for f in flags} | OTHER_TOOLS_FLAGS
    used = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))
    assert used <= allowed, f"flags not in the contract: {sorted(used - allowed)}"
    for path in set(re.findall(r"k8s_bridge/deploy/[\w./-]+", text)):
        assert (ROOT / path.rstrip(".")).exists(), path
    for name in re.findall(r"`([\w-]+\.yaml)`", text):
        assert any(d.file.endswith(name) for d in DOCS) or name == "kustomization.yaml", name
    for command in ("docker build", "docker push", "kubectl apply -k", "kubectl get nbw -o yaml",
                    "/metrics", "kubectl delete -k"):
        assert command in text, command
