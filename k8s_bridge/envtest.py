"""A real Kubernetes control plane on loopback, for end-to-end tests and benchmarks.

The same idea as controller-runtime's *envtest*: the binaries are found only through
the environment variable ``KUBEBUILDER_ASSETS``, a folder holding ``etcd``,
``kube-apiserver`` and (for extender tests) ``kube-scheduler``; get them with
``setup-envtest use 1.23.x`` (``sigs.k8s.io/controller-runtime/tools/setup-envtest``)
and ``export KUBEBUILDER_ASSETS=$(setup-envtest use -p path 1.23.x)``.

:class:`ControlPlane` starts etcd and kube-apiserver with what runs without a kubelet
or a controller-manager: a serving certificate for 127.0.0.1 (made with the
``openssl`` command), an admin token in ``system:masters`` (``--token-auth-file``),
``Node,RBAC`` authorization (so RBAC is real), ServiceAccount signing keys (the
TokenRequest API gives every component its own token), no ServiceAccount /
TaintNodesByCondition admission, no endpoint reconciler and a front-proxy CA (so that
kube-scheduler's delegated authentication finds a complete ConfigMap).  Nodes are plain
objects whose status is patched Ready; bound pods stay Pending.

**[decision]** Every process is started by :class:`Proc`: its own process group,
``PR_SET_PDEATHSIG`` (Linux) so that it dies with the process that started it even
when that one is killed, output to a log file, and :meth:`Proc.stop` (SIGTERM, then
SIGKILL after a deadline) registered with :mod:`atexit`.  Every wait has a deadline.
Servers listen on 127.0.0.1 only.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from .kube import Conflict, Kube

__all__ = ["ASSETS_ENV", "ControlPlane", "EnvtestUnavailable", "Proc", "ProcessExited",
           "assets_dir",
           "free_port", "wait_until"]

ASSETS_ENV = "KUBEBUILDER_ASSETS"
HOW_TO = (f"set {ASSETS_ENV} to a folder holding etcd, kube-apiserver and kube-scheduler "
          "(Kubernetes 1.23), e.g. `go install sigs.k8s.io/controller-runtime/tools/"
          "setup-envtest@latest && export "
          f"{ASSETS_ENV}=$(setup-envtest use -p path 1.23.x)`; kube-scheduler is not in "
          "that download: copy the one of the same release beside them")

T = TypeVar("T")


class ProcessExited(RuntimeError):
    """A process a wait depends on has exited: :func:`wait_until` gives up at once."""


class EnvtestUnavailable(RuntimeError):
    """The binaries (or ``openssl``) are missing: the e2e tests skip with this."""


def assets_dir(binaries: Sequence[str] = ("etcd", "kube-apiserver", "kube-scheduler")
               ) -> Path:
    """``$KUBEBUILDER_ASSETS``, checked to hold executable ``binaries``."""
    value = os.environ.get(ASSETS_ENV)
    if not value:
        raise EnvtestUnavailable(f"{ASSETS_ENV} is not set: {HOW_TO}")
    folder = Path(value)
    missing = [b for b in binaries if not os.access(folder / b, os.X_OK)]
    if missing:
        raise EnvtestUnavailable(f"{ASSETS_ENV}={value} lacks executable "
                                 f"{', '.join(missing)}: {HOW_TO}")
    return folder


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Callable[[], T], timeout_s: float, what: str,
               interval_s: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something true; TimeoutError at the deadline.

    Exceptions of ``predicate`` count as "not yet" (the last one is reported), except
    :class:`ProcessExited`, which ends the wait at once."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except ProcessExited:
            raise
        except Exception as exc:  # not up yet
            last = exc
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what}"
                               + (f" (last error: {last})" if last else ""))
        time.sleep(interval_s)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    os.setsid()
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


_LIVE: set[Proc] = set()


@atexit.register
def _stop_all() -> None:
    for proc in list(_LIVE):
        proc.stop(2.0)


class Proc:
    """One child process with its log file; stopped by :meth:`stop` or at exit.

    Start it from a long-lived thread: on Linux the child gets SIGKILL when the
    thread that started it ends (``PR_SET_PDEATHSIG``)."""

    def __init__(self, name: str, argv: Sequence[str], log_dir: Path,
                 env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                      stderr=subprocess.STDOUT, env=dict(env or os.environ),
                                      preexec_fn=_die_with_parent, close_fds=True)
        _LIVE.add(self)

    @property
    def pid(self) -> int:
        return int(self.popen.pid)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self, tail: int = 4000) -> str:
        """The last ``tail`` characters of the process's output."""
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def send(self, signum: int) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signum)

    def stop(self, timeout_s: float = 10.0, signum: int = signal.SIGTERM) -> int | None:
        """SIGTERM (or ``signum``) to its process group, SIGKILL after ``timeout_s``."""
        try:
            if self.alive():
                self.send(signum)
                try:
                    self.popen.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    self.send(signal.SIGKILL)
                    self.popen.wait(10.0)
            return self.popen.returncode
        finally:
            # the group may hold grandchildren
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            _LIVE.discard(self)
            self._log.close()


def _openssl(*args: str, cwd: Path) -> None:
    try:
        subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True,
                       timeout=60)
    except FileNotFoundError as exc:
        raise EnvtestUnavailable("the openssl command is needed to make the test "
                                 "certificates") from exc
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"openssl {' '.join(args)}: {exc.stderr.decode(errors='replace')}"
                           ) from exc


def make_pki(folder: Path) -> None:
    """CA + serving cert for 127.0.0.1, ServiceAccount keys, front-proxy CA + client."""
    folder.mkdir(parents=True, exist_ok=True)
    leaf = ("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,"
            "keyEncipherment\nsubjectKeyIdentifier=hash\n"
            "authorityKeyIdentifier=keyid,issuer\n")
    (folder / "server.ext").write_text(leaf + "extendedKeyUsage=serverAuth\n"
                                       "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    (folder / "client.ext").write_text(leaf + "extendedKeyUsage=clientAuth\n")
    ca_ext = ["-addext", "basicConstraints=critical,CA:TRUE",
              "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"]
    for ca in ("ca", "front-proxy-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key",
                 "-out", f"{ca}.crt", "-days", "7", "-subj", f"/CN=tdmcore-envtest-{ca}",
                 *ca_ext, cwd=folder)
    for name, ca, ext, cn in (("server", "ca", "server.ext", "127.0.0.1"),
                              ("front-proxy-client", "front-proxy-ca", "client.ext",
                               "front-proxy-client")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                 f"{name}.csr", "-subj", f"/CN={cn}", cwd=folder)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey",
                 f"{ca}.key", "-CAcreateserial", "-out", f"{name}.crt", "-days", "7",
                 "-extfile", ext, cwd=folder)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=folder)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=folder)


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


class ControlPlane:
    """etcd + kube-apiserver (+ kube-scheduler on request) in ``workdir``.

    Parameters
    ----------
    workdir : Path, optional
        Certificates, etcd data, kubeconfigs and logs (a new temporary folder by
        default, removed by :meth:`stop` unless ``keep``).
    keep : bool
        Keep ``workdir`` after :meth:`stop` (for debugging).
    profiling : bool
        Serve kube-apiserver's Go profiles (``/debug/pprof/``, to the admin token).
        Off by default here (kube-apiserver's own default is on); the e2e suite
        and ``benchmarks.k8s_bind --apiserver-profile`` turn it on.
    """

    ADMIN_TOKEN = "tdmcore-envtest-admin"

    def __init__(self, workdir: Path | None = None, *, keep: bool = False,
                 profiling: bool = False) -> None:
        self.assets = assets_dir(("etcd", "kube-apiserver"))
        self._tmp = None if workdir is not None else tempfile.TemporaryDirectory(
            prefix="tdmcore-envtest-")
        self.dir = workdir if workdir is not None else Path(self._tmp.name)  # type: ignore[union-attr]
        self.keep = keep
        self.profiling = profiling
        self.pki = self.dir / "pki"
        self.logs = self.dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.etcd: Proc | None = None
        self.apiserver: Proc | None = None
        self.port = 0
        self.etcd_port = 0
        self._stopped = False

    # ---------------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> ControlPlane:
        """PKI, etcd, kube-apiserver; returns once ``/readyz`` answers 200."""
        make_pki(self.pki)
        (self.pki / "tokens.csv").write_text(
            f'{self.ADMIN_TOKEN},envtest-admin,envtest-admin,"system:masters"\n')
        self.etcd_port = free_port()
        self.start_etcd(timeout_s)
        self.port = free_port()
        self.start_apiserver(timeout_s)
        self.write_kubeconfig("admin", self.ADMIN_TOKEN)
        return self

    def start_etcd(self, timeout_s: float = 30.0) -> None:
        peer = free_port()
        client = f"http://127.0.0.1:{self.etcd_port}"
        self.etcd = Proc("etcd", [
            str(self.assets / "etcd"), "--name", "envtest", "--data-dir",
            str(self.dir / "etcd"), "--listen-client-urls", client,
            "--advertise-client-urls", client,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"envtest=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync", "--log-level", "warn", "--logger", "zap"], self.logs)

        def healthy() -> bool:
            self._check("etcd", self.etcd)
            with urllib.request.urlopen(f"{client}/health", timeout=2) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")

        wait_until(healthy, timeout_s, "etcd to be healthy")

    def start_apiserver(self, timeout_s: float = 60.0) -> None:
        """(Re)start kube-apiserver on :attr:`port` over the running etcd."""
        p = self.pki
        self.apiserver = Proc("kube-apiserver", [
            str(self.assets / "kube-apiserver"),
            "--etcd-servers", f"http://127.0.0.1:{self.etcd_port}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.port), "--cert-dir", str(p),
            "--tls-cert-file", str(p / "server.crt"),
            "--tls-private-key-file", str(p / "server.key"),
            "--client-ca-file", str(p / "ca.crt"),
            "--token-auth-file", str(p / "tokens.csv"),
            "--authorization-mode", "Node,RBAC",
            "--service-account-key-file", str(p / "sa.pub"),
            "--service-account-signing-key-file", str(p / "sa.key"),
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-cluster-ip-range", "10.96.0.0/16",
            "--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition",
            "--endpoint-reconciler-type", "none",
            "--requestheader-client-ca-file", str(p / "front-proxy-ca.crt"),
            "--requestheader-allowed-names", "front-proxy-client",
            "--requestheader-username-headers", "X-Remote-User",
            "--requestheader-group-headers", "X-Remote-Group",
            "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
            "--proxy-client-cert-file", str(p / "front-proxy-client.crt"),
            "--proxy-client-key-file", str(p / "front-proxy-client.key"),
            f"--profiling={str(self.profiling).lower()}", "--v", "0"], self.logs)
        wait_until(self.ready, timeout_s, "kube-apiserver /readyz")

    def _check(self, what: str, proc: Proc | None) -> None:
        if proc is not None and not proc.alive():
            raise ProcessExited(f"{what} exited ({proc.popen.returncode}): {proc.log()}")

    def ready(self) -> bool:
        """kube-apiserver answers ``/readyz`` with 200 (raises if it exited)."""
        self._check("kube-apiserver", self.apiserver)
        request = urllib.request.Request(
            f"{self.url}/readyz", headers={"Authorization": f"Bearer {self.ADMIN_TOKEN}"})
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        try:
            with urllib.request.urlopen(request, timeout=2, context=context) as resp:
                return int(resp.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop_apiserver(self) -> None:
        if self.apiserver is not None:
            self.apiserver.stop(15.0)

    def stop(self) -> None:
        """Stop every process this control plane started; remove its folder."""
        if self._stopped:
            return
        self._stopped = True
        for proc in (self.apiserver, self.etcd):
            if proc is not None:
                proc.stop(10.0)
        if self._tmp is not None and not self.keep:
            self._tmp.cleanup()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- clients
    def write_kubeconfig(self, name: str, token: str) -> Path:
        """A kubeconfig for ``token`` (``<dir>/<name>.kubeconfig``)."""
        path = self.dir / f"{name}.kubeconfig"
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "envtest",
            "clusters": [{"name": "envtest", "cluster": {
                "server": self.url, "certificate-authority": str(self.pki / "ca.crt")}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": name}}],
        }
        path.write_text(json.dumps(config))
        return path

    def kube(self, name: str = "admin") -> Kube:
        """A client with the credentials of ``<dir>/<name>.kubeconfig``."""
        return Kube.connect(str(self.dir / f"{name}.kubeconfig"))

    def service_account_kubeconfig(self, namespace: str, name: str,
                                   seconds: int = 7200) -> Path:
        """A kubeconfig with a TokenRequest token of ServiceAccount ``namespace/name``."""
        answer = self.kube().request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "spec": {"expirationSeconds": seconds}})
        return self.write_kubeconfig(f"sa-{namespace}-{name}", answer["status"]["token"])

    # ---------------------------------------------------------------- objects
    def apply(self, docs: Iterable[Mapping[str, Any]]) -> None:
        """Create each object (replace it if it exists), as ``kubectl apply`` would."""
        kube = self.kube()
        for doc in docs:
            path = self.path_of(doc)
            try:
                kube.request("POST", path, body=dict(doc))
            except Conflict:
                name = doc["metadata"]["name"]
                current = kube.request("GET", f"{path}/{name}")
                body = dict(doc)
                body["metadata"] = dict(doc["metadata"])
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                kube.request("PUT", f"{path}/{name}", body=body)

    def apply_files(self, paths: Iterable[Path]) -> list[dict[str, Any]]:
        docs = [d for p in paths for d in _docs(p)]
        self.apply(docs)
        crds = [d["metadata"]["name"] for d in docs
                if d.get("kind") == "CustomResourceDefinition"]
        if crds:
            self.wait_established(crds)
        return docs

    def wait_established(self, names: Iterable[str], timeout_s: float = 30.0) -> None:
        kube = self.kube()
        for name in names:
            def established(name: str = name) -> bool:
                crd = kube.request(
                    "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                return any(c.get("type") == "Established" and c.get("status") == "True"
                           for c in (crd.get("status") or {}).get("conditions") or [])
            wait_until(established, timeout_s, f"CRD {name} established")

    @staticmethod
    def path_of(doc: Mapping[str, Any]) -> str:
        """The collection URL of ``doc`` (a few built-in kinds and any CRD group)."""
        api_version = str(doc["apiVersion"])
        kind = str(doc["kind"])
        plural = _PLURALS.get(kind, kind.lower() + "s")
        root = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        namespace = (doc.get("metadata") or {}).get("namespace")
        if kind in _CLUSTER_SCOPED or namespace is None and kind not in _NAMESPACED:
            return f"{root}/{plural}"
        return f"{root}/namespaces/{namespace or 'default'}/{plural}"

    # ---------------------------------------------------------------- nodes
    def add_nodes(self, names: Iterable[str], *, gpu: int = 8, cpu: int = 64,
                  memory_gi: int = 512, labels: Mapping[str, str] | None = None) -> None:
        """Nodes as plain objects, their status patched Ready (no kubelet)."""
        kube = self.kube()
        capacity = {"cpu": str(cpu), "memory": f"{memory_gi}Gi", "pods": "110",
                    "nvidia.com/gpu": str(gpu)}
        for name in names:
            kube.create("Node", {"apiVersion": "v1", "kind": "Node",
                                 "metadata": {"name": name, "labels": {
                                     "kubernetes.io/hostname": name, **(labels or {})}}})
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            kube.merge_patch("Node", name, {"status": {
                "capacity": capacity, "allocatable": capacity,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "envtest", "lastHeartbeatTime": now,
                                "lastTransitionTime": now}]}}, sub="status")


_PLURALS = {"CustomResourceDefinition": "customresourcedefinitions",
            "NodeBandwidth": "nodebandwidths", "PodBandwidth": "podbandwidths",
            "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
            "Role": "roles", "RoleBinding": "rolebindings", "Namespace": "namespaces",
            "ServiceAccount": "serviceaccounts", "PodGroup": "podgroups",
            "Lease": "leases", "ConfigMap": "configmaps", "NetworkPolicy": "networkpolicies",
            "PodDisruptionBudget": "poddisruptionbudgets", "PriorityClass": "priorityclasses"}
_CLUSTER_SCOPED = {"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                   "Namespace", "Node", "NodeBandwidth", "PriorityClass"}
_NAMESPACED = {"Role", "RoleBinding", "ServiceAccount", "Pod", "PodBandwidth", "PodGroup",
               "ConfigMap", "Lease", "Deployment", "Service", "DaemonSet", "NetworkPolicy",
               "PodDisruptionBudget"}
