"""The bridge's wire and CRD types: what crosses a process boundary, and its checks.

One place for every shape the bridge reads from or writes to another program:

* **our CRDs and the labels we read**: :data:`GROUP` / :data:`VERSION` of NodeBandwidth
  and PodBandwidth, and the pod labels (job identity, priority, LowComm, PodGroup,
  AppGroup) and the GPU resource name;
* **kube-scheduler's extender protocol** (``k8s.io/kube-scheduler/extender/v1``):
  :func:`parse_args` (``ExtenderArgs``) and :func:`parse_binding`
  (``ExtenderBindingArgs``), keys matched case-insensitively as Go's JSON decoder
  does (:func:`field`); a malformed request raises :class:`BadRequest`;
* **the report protocol** between the training hook, the node agent and the
  controller (``POST /v1/report``): :func:`validate_report` is the one check of a
  report, at the agent and again at the controller (which may be called directly),
  and :func:`valid_answer` the one check of the controller's answer; the
  ServiceAccount tokens that go with a report are read by :class:`TokenFile`.

Nothing here imports the rest of the bridge: the training-side hook may use it
without the server's dependencies.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ANSWER_NUMBERS",
    "ANSWER_PERIODS",
    "ANSWER_SLEEPS",
    "GPU_RESOURCE",
    "GROUP",
    "LABEL_APPGROUP",
    "LABEL_JOB",
    "LABEL_KUBEFLOW_JOB",
    "LABEL_LOW_COMM",
    "LABEL_POD_GROUP",
    "LABEL_PRIORITY",
    "LABEL_WORKLOAD",
    "MAX_ITERATIONS",
    "POD_AUTHORIZATION",
    "REPORT_PATH",
    "VERSION",
    "BadRequest",
    "ReportError",
    "TokenFile",
    "field",
    "finite_number",
    "parse_args",
    "parse_binding",
    "valid_answer",
    "validate_report",
]

# ------------------------------------------------------------------ CRDs, labels
GROUP = "tdmcore.io"
VERSION = "v1alpha1"
LABEL_KUBEFLOW_JOB = "training.kubeflow.org/job-name"
LABEL_JOB = "tdmcore.io/job"
LABEL_PRIORITY = "tdmcore.io/priority"
LABEL_LOW_COMM = "low_comm"
LABEL_POD_GROUP = "scheduling.x-k8s.io/pod-group"
LABEL_APPGROUP = "appgroup.diktyo.x-k8s.io"
LABEL_WORKLOAD = "appgroup.diktyo.x-k8s.io.workload"
GPU_RESOURCE = "nvidia.com/gpu"


# Kubernetes object names: a namespace is a DNS-1123 label, a pod a DNS-1123 subdomain.
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAMESPACE_RE = re.compile(rf"{_DNS_LABEL}\Z")
_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*\Z")


# ---------------------------------------------------------- the extender protocol
class BadRequest(ValueError):
    """The caller sent something malformed (HTTP 400); nothing was changed."""


def field(obj: Mapping[str, Any], name: str) -> Any:
    """``obj[name]``, matched case-insensitively like Go's encoding/json."""
    if name in obj:
        return obj[name]
    lower = name.lower()
    for key, value in obj.items():
        if isinstance(key, str) and key.lower() == lower:
            return value
    return None


def _object(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise BadRequest(f"{name}: expected an object, got "
                         f"{'null' if value is None else type(value).__name__}")
    return value


def object_name(value: Any, where: str, *, namespace: bool = False) -> str:
    """``value`` as a Kubernetes object name (a DNS-1123 subdomain, <= 253 characters;
    a namespace: a DNS-1123 label, <= 63), or :class:`BadRequest` naming ``where``.
    Names go into API paths, so nothing else may pass."""
    pattern, limit = (_NAMESPACE_RE, 63) if namespace else (_SUBDOMAIN_RE, 253)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{where}: expected a non-empty string, got {value!r:.60}")
    if len(value) > limit or not pattern.match(value):
        raise BadRequest(f"{where}: {value!r:.60} is not a valid Kubernetes name "
                         f"(DNS-1123, <= {limit} characters)")
    return value


def parse_args(body: Any) -> tuple[Mapping[str, Any], list[str], Mapping[str, Any] | None]:
    """``ExtenderArgs`` -> (pod, node names, the NodeList if one was sent)."""
    args = _object(body, "ExtenderArgs")
    pod = _object(field(args, "Pod"), "Pod")
    meta = _object(pod.get("metadata"), "Pod.metadata")
    _object(pod.get("spec"), "Pod.spec")
    object_name(meta.get("name"), "Pod.metadata.name")
    if meta.get("namespace") is not None:
        object_name(meta.get("namespace"), "Pod.metadata.namespace", namespace=True)
    if meta.get("uid") is not None and not isinstance(meta.get("uid"), str):
        raise BadRequest(f"Pod.metadata.uid: expected a string, got {meta.get('uid')!r:.60}")
    for key in ("labels", "annotations"):  # the pipeline reads both before converting
        value = meta.get(key)
        if value is not None and not (isinstance(value, Mapping) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
            raise BadRequest(f"Pod.metadata.{key}: expected a map of strings to strings, "
                             f"got {value!r:.60}")
    names = field(args, "NodeNames")
    nodes = field(args, "Nodes")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise BadRequest("NodeNames: expected a list of node names")
        return pod, names, None
    if nodes is None:
        raise BadRequest("NodeNames: either NodeNames or Nodes is required")
    node_list = _object(nodes, "Nodes")
    items = node_list.get("items")
    if not isinstance(items, list):
        raise BadRequest("Nodes.items: expected a list of v1 Node objects")
    out = []
    for i, item in enumerate(items):
        meta = _object(_object(item, f"Nodes.items[{i}]").get("metadata"),
                       f"Nodes.items[{i}].metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise BadRequest(f"Nodes.items[{i}].metadata.name: expected a node name")
        out.append(name)
    return pod, out, node_list


def parse_binding(body: Any) -> tuple[str, str, str | None, str]:
    """``ExtenderBindingArgs`` -> (namespace, name, uid, node)."""
    args = _object(body, "ExtenderBindingArgs")
    out = [object_name(field(args, key), key, namespace=key == "PodNamespace")
           for key in ("PodNamespace", "PodName", "Node")]
    uid = field(args, "PodUID")
    if uid is not None and not isinstance(uid, str):
        raise BadRequest(f"PodUID: expected a string, got {uid!r:.60}")
    return out[0], out[1], uid or None, out[2]


# ------------------------------------------------------------ the report protocol
#: where the agent and the controller take reports
REPORT_PATH = "/v1/report"
#: the header in which the agent passes on the training pod's own token (the hook
#: sends it to the agent as ``Authorization``; the agent's own goes to the controller
#: as ``Authorization``)
POD_AUTHORIZATION = "X-Tdmcore-Pod-Authorization"
#: most iterations one report may carry
MAX_ITERATIONS = 1024



class ReportError(ValueError):
    """A report that does not follow the schema; ``str(exc)`` is ``"<field>: <problem>"``.

    Parameters
    ----------
    field : str
        Path of the offending field, e.g. ``"iterations[3].duration_ms"``.
    problem : str
        What is wrong with it.
    """

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _number(value: object, where: str) -> float:
    # bool is an int subclass, but true is not a duration.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReportError(where, f"must be a number, got {_type_name(value)}")
    number = finite_number(value)
    if number is None:
        raise ReportError(where, "must be finite")
    return number


def _name(body: dict[str, Any], where: str, pattern: re.Pattern[str], max_len: int) -> str:
    if where not in body:
        raise ReportError(where, "missing")
    value = body[where]
    if not isinstance(value, str):
        raise ReportError(where, f"must be a string, got {_type_name(value)}")
    if not value:
        raise ReportError(where, "must not be empty")
    if len(value) > max_len or not pattern.match(value):
        raise ReportError(where, f"not a valid Kubernetes name (DNS-1123, <= {max_len} chars)")
    return value


#: the largest ``start_ms`` a report may carry (epoch ms, about the year 33658)
MAX_START_MS = 1e15
#: the longest iteration a report may carry, ms (about 11.6 days)
MAX_DURATION_MS = 1e9


def validate_report(body: object, max_iterations: int = MAX_ITERATIONS) -> dict[str, Any]:
    """Check a decoded report and return it rebuilt from the known fields only.

    Parameters
    ----------
    body : object
        The decoded JSON body of ``POST /v1/report``.
    max_iterations : int
        Largest accepted number of iterations.

    Returns
    -------
    dict
        ``{"namespace", "pod", ["node"], "iterations": [{"start_ms", "duration_ms",
        "comm_ms"}]}`` with floats (``comm_ms`` may be ``None``).

    Raises
    ------
    ReportError
        Naming the first bad field: missing, wrong type, NaN/inf, ``duration_ms <= 0``
        or above :data:`MAX_DURATION_MS`, ``start_ms`` negative or above
        :data:`MAX_START_MS` (so that sums of times stay finite), ``comm_ms``
        outside ``[0, duration_ms]``, no or too many iterations, a namespace or pod
        that is no Kubernetes name.
    """
    if not isinstance(body, dict):
        raise ReportError("body", f"must be a JSON object, got {_type_name(body)}")
    report: dict[str, Any] = {
        "namespace": _name(body, "namespace", _NAMESPACE_RE, 63),
        "pod": _name(body, "pod", _SUBDOMAIN_RE, 253),
    }
    node = body.get("node")
    if node is not None:
        if not isinstance(node, str):
            raise ReportError("node", f"must be a string or null, got {_type_name(node)}")
        if not node or len(node) > 253:
            raise ReportError("node", "must be 1..253 characters")
        report["node"] = node
    if "iterations" not in body:
        raise ReportError("iterations", "missing")
    raw = body["iterations"]
    if not isinstance(raw, list):
        raise ReportError("iterations", f"must be a list, got {_type_name(raw)}")
    if not raw:
        raise ReportError("iterations", "must not be empty")
    if len(raw) > max_iterations:
        raise ReportError("iterations", f"at most {max_iterations} items, got {len(raw)}")
    iterations = []
    for i, item in enumerate(raw):
        where = f"iterations[{i}]"
        if not isinstance(item, dict):
            raise ReportError(where, f"must be an object, got {_type_name(item)}")
        for key in ("start_ms", "duration_ms"):
            if key not in item:
                raise ReportError(f"{where}.{key}", "missing")
        start_ms = _number(item["start_ms"], f"{where}.start_ms")
        if not 0.0 <= start_ms <= MAX_START_MS:
            raise ReportError(f"{where}.start_ms",
                              f"must lie in [0, {MAX_START_MS:g}] (epoch milliseconds)")
        duration_ms = _number(item["duration_ms"], f"{where}.duration_ms")
        if not 0.0 < duration_ms <= MAX_DURATION_MS:
            raise ReportError(f"{where}.duration_ms",
                              f"must be > 0 and at most {MAX_DURATION_MS:g}")
        comm = item.get("comm_ms")
        comm_ms = None if comm is None else _number(comm, f"{where}.comm_ms")
        if comm_ms is not None and not 0.0 <= comm_ms <= duration_ms:
            raise ReportError(f"{where}.comm_ms", "must lie in [0, duration_ms] or be null")
        iterations.append({"start_ms": start_ms, "duration_ms": duration_ms, "comm_ms": comm_ms})
    report["iterations"] = iterations
    return report


#: the controller's answer fields that are periods: a start time is taken modulo
#: them, so a value <= 0 is not one
ANSWER_PERIODS = frozenset({"period_ms", "phase_period_ms"})


#: the controller's answer fields that are times a pod sleeps: a value < 0 is not one
ANSWER_SLEEPS = frozenset({"pause_ms", "idle_ms"})
#: the answer's numbers besides ``pause_ms`` (each a finite number or null)
ANSWER_NUMBERS = ("shift_ms", "idle_ms", "period_ms", "phase_period_ms", "target_phase_ms")


def valid_answer(raw: bytes) -> bool:
    """Whether a controller's 200 body is an answer a hook can use: an object with a
    finite ``pause_ms >= 0`` and finite numbers or nulls for ``shift_ms``,
    ``idle_ms`` (>= 0), ``period_ms``, ``phase_period_ms`` and ``target_phase_ms``,
    the periods > 0."""
    try:
        answer = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    if not isinstance(answer, dict):
        return False
    pause = finite_number(answer.get("pause_ms"))
    if pause is None or pause < 0.0:
        return False
    for key in ANSWER_NUMBERS:
        value = answer.get(key)
        if value is None:
            continue
        number = finite_number(value)
        if number is None or (key in ANSWER_PERIODS and number <= 0.0) \
                or (key in ANSWER_SLEEPS and number < 0.0):
            return False
    return True


def finite_number(value: object) -> float | None:
    """``value`` as a finite float, or None: not a number (a bool is not one), NaN or
    infinite, or an integer too large for a double (JSON allows ``1`` followed by 400
    zeros; ``float()`` and ``math.isfinite`` raise on it).  The one reading of a
    number in the report protocol, for the agent, the controller and the hook."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


class TokenFile:
    """A projected ServiceAccount token the kubelet keeps in a file, as sent with a
    report (``Authorization: Bearer``).

    The kubelet renews a projected token before it expires by swapping the file (a
    new inode, a new mtime), so :meth:`read` re-reads it whenever ``os.stat`` says it
    changed and otherwise answers from memory.  A file that cannot be read (missing,
    no permission, empty) gives ``None`` and is said once at WARNING -- again only
    when the problem changes -- and its recovery once at INFO; a token is never
    logged.  Thread-safe.

    Parameters
    ----------
    path : str
        The token file (``agent.yaml``: ``/var/run/secrets/tdmcore/token``).
    logger : logging.Logger
        Where the problems are said.
    what : str
        Whose token it is, for the log lines (``"the agent's token"``).
    """

    def __init__(self, path: str, logger: logging.Logger, what: str = "the token") -> None:
        self.path = path
        self.log = logger
        self.what = what
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None  # (inode, mtime ns, size)
        self._token: str | None = None
        self._problem: str | None = None  # the last problem said (None: readable)

    def read(self) -> str | None:
        """The token, or None when the file cannot be read (logged once)."""
        with self._lock:
            try:
                st = os.stat(self.path)
                stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
                if stamp == self._stamp:
                    return self._token
                with open(self.path, encoding="utf-8") as f:
                    token = f.read().strip()
                if not token:
                    raise OSError("the file is empty")
            except (OSError, UnicodeDecodeError) as exc:
                problem = getattr(exc, "strerror", None) or str(exc)
                if problem != self._problem:
                    self._problem = problem
                    self.log.warning("cannot read %s from %s (reports go without it "
                                     "until it can be read): %s", self.what, self.path,
                                     problem)
                self._stamp, self._token = None, None
                return None
            if self._problem is not None:
                self._problem = None
                self.log.info("%s is readable again from %s", self.what, self.path)
            elif self._token is not None and token != self._token:
                self.log.debug("%s was renewed (%s)", self.what, self.path)
            self._stamp, self._token = stamp, token
            return token
