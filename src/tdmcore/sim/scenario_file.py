"""User scenario files: a cluster and its jobs in YAML or JSON, checked field by field.

:func:`load_scenario_file` reads a ``.yaml``/``.yml`` (PyYAML's ``safe_load``) or
``.json`` file and returns a :class:`tdmcore.sim.scenarios.Scenario` ready for
:func:`tdmcore.sim.cluster.run_cluster`.  The shape (``tdmcore example`` prints
``examples/scenario.yaml``, a complete example shipped in the package)::

    name: my-cluster                  # optional, default: the file's stem
    title: "..."                      # optional, default: the name
    cluster:
      nodes:                          # required, non-empty
        - {name: a, cpu: 32, mem_gib: 256, gpu: 4, link_gbps: 25,
           background_gbps: 12.5}     # background optional (default 0), < link_gbps
        - {name: b, cpu: 32, mem_gib: 256, gpu: 4, link_gbps: 25,
           count: 3}                  # expands to b-1, b-2, b-3
      latency_ms:                     # optional: a square matrix (node order, after
        default: 0.05                 # count expansion) or this mapping form
        pairs: [{a: a, b: b-1, ms: 1.0}]   # symmetric overrides
      workloads:                      # optional
        - {name: hpo, jobs: [j1, j2], dependencies: [[j1, j2]]}
    jobs:                             # required, non-empty
      - name: j1
        model: VGG19                  # or pattern: {period_ms, duty_cycle,
        workers: 2                    #   bandwidth_gbps}; pattern: null = LowComm
        iterations: 1000              # or duration_s
        arrival_s: 0                  # optional fields: arrival_s, priority
        priority: high                #   (high/low/int), gpu, cpu, mem_gib,
        workload: hpo                 #   workload, period_ms (with model only),
                                      #   iteration_ms (with pattern: null only)

Every problem raises :class:`ValueError` whose message starts with the path of
the offending field (``jobs[2].workers: expected an integer >= 1, got 0``), or
with ``file:`` for the file itself (unreadable, not YAML/JSON, duplicate keys,
top level not a mapping).  The loader checks everything before it builds
anything, and it returns a complete scenario or raises.

Semantics (**[decision]** where the format had to choose):

* Unknown keys are errors at every level.  ``null`` is a value, not "absent": it
  is accepted only as ``pattern: null`` (a LowComm job); omit a key to get its
  default.  Booleans are never numbers, integers are never strings (``"2"``) and
  integer fields do not take floats (``2.0``).  NaN and infinities are rejected.
* ``count: n`` names the copies ``<name>-1`` .. ``<name>-n`` (also for ``n = 1``).
  A cluster has at most :data:`MAX_NODES` nodes after expansion.
* ``latency_ms`` is the physical one-way latency: a matrix must be symmetric with
  a zero diagonal; the mapping form needs ``default`` and may override pairs
  (each unordered pair at most once).  The scheduler's ``tau`` is ``latency_ms``
  over its smallest off-diagonal entry (1.0 when there is none or it is 0), with
  ``tau[x, x] = 1``.  Without ``latency_ms`` the network is flat: physical
  latency 0 and ``tau`` all ones.
* A ``model`` job's pattern is :func:`tdmcore.sim.models.model_pattern` at its
  worker count on the fastest link of the cluster (``period_ms`` overrides the
  period); its :attr:`SimJob.model` is the model's name.  A ``pattern`` job's
  model label is ``"custom"``, a LowComm job's ``"LowComm"``.
* ``duration_s`` becomes ``max(1, round(duration_s * 1000 / period_ms))``
  iterations (LowComm jobs: their ``iteration_ms``, 1,000 ms when not given, as
  :attr:`SimJob.period_ms`).
* A job listed in a workload belongs to it; its own ``workload:`` key is optional
  and, when given, must name that workload.  A job is in at most one workload,
  and every job a workload lists must exist.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from numpy.typing import NDArray

from .. import _validation as v
from ..model import Cluster, Node, TrafficPattern, Workload, priority_value
from .cluster import MAX_ITERATIONS, MAX_LATENCY_MS, SimCluster, SimJob
from .models import MODELS, model_pattern
from .scenarios import Scenario

__all__ = ["MAX_NODES", "load_scenario_file", "parse_document"]

#: Upper bound on the nodes of a scenario file after ``count`` expansion (the
#: latency matrices are dense; a typo like ``count: 1000000`` should not exhaust
#: memory).
MAX_NODES = 4096

#: SimJob model labels of jobs without a ``model``.
CUSTOM_MODEL, LOWCOMM_MODEL = "custom", "LowComm"
#: Period of a LowComm job, for ``duration_s`` (:attr:`SimJob.period_ms`).
LOWCOMM_PERIOD_MS = 1000.0

_SUFFIXES = {".yaml": "YAML", ".yml": "YAML", ".json": "JSON"}
_TOP = (("cluster", "jobs"), ("name", "title"))
_CLUSTER = (("nodes",), ("latency_ms", "workloads"))
_NODE = (("name", "cpu", "mem_gib", "gpu", "link_gbps"), ("background_gbps", "count"))
_LATENCY = (("default",), ("pairs",))
_PAIR = (("a", "b", "ms"), ())
_WORKLOAD = (("name", "jobs"), ("dependencies",))
_JOB = (("name", "workers"),
        ("model", "pattern", "iterations", "duration_s", "arrival_s", "priority",
         "gpu", "cpu", "mem_gib", "workload", "period_ms", "iteration_ms"))
_PATTERN = (("period_ms", "duty_cycle", "bandwidth_gbps"), ())


# --------------------------------------------------------------------------- helpers
#: A field's name in an error, or a cell of it (``latency_ms[2][1]``).
_FIELD = re.compile(r"[A-Za-z_]\w*(\[\d+\])*")


def _fail(path: str, message: str) -> NoReturn:
    raise ValueError(f"{path or 'file'}: {message}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: object) -> str:
    """A value as the user wrote it: YAML/JSON spellings for null and booleans."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    return _show(value)


def _reraise(path: str, exc: Exception) -> NoReturn:
    """Re-raise a constructor's ``"field: ..."`` error under ``path``."""
    text = str(exc)
    head, sep, _ = text.partition(": ")
    if sep and _FIELD.fullmatch(head):  # a field, or a cell of one: latency_ms[2][1]
        raise ValueError(f"{path}.{text}") from exc
    raise ValueError(f"{path}: {text}") from exc


def _fields(path: str, value: Any, spec: tuple[tuple[str, ...], tuple[str, ...]]
            ) -> dict[str, Any]:
    """``value`` as a mapping with the required keys and no others."""
    required, optional = spec
    if not isinstance(value, dict):
        _fail(path, f"expected a mapping, got {_kind(value)}")
    allowed = (*required, *optional)
    unknown = sorted((k for k in value if k not in allowed), key=repr)
    if unknown:
        hints = []
        for key in unknown:
            close = v.closest(key, allowed)
            if close is not None:
                hints.append(f"{close!r} for {key!r}")
        hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
        _fail(path, f"unknown field(s) {unknown!r}{hint}; allowed: {', '.join(allowed)}")
    for key in required:
        if key not in value:
            _fail(_join(path, key), "required field missing")
    return value


def _list(path: str, value: Any, *, nonempty: bool = True) -> list[Any]:
    if not isinstance(value, list) or (nonempty and not value):
        what = "a non-empty list" if nonempty else "a list"
        _fail(path, f"expected {what}, got {_kind(value)}")
    return value


def _name(path: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        _fail(path, f"expected a non-empty string, got {_show(value)}")
    return value


def _number(path: str, value: Any, *, low: float = 0.0, strict: bool = False,
            high: float | None = None) -> float:
    """A finite number ``> low`` (``strict``) or ``>= low``, and ``<= high``."""
    if high is not None:
        want = f"a number in [{low:g}, {high:g}]"
    else:
        want = f"a number {'>' if strict else '>='} {low:g}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        _fail(path, f"expected {want}, got {_show(value)}")
    try:
        x = float(value)
    except OverflowError:
        _fail(path, f"expected a finite {want[2:]}, got {_show(value)}")
    if not math.isfinite(x):
        _fail(path, f"expected a finite {want[2:]}, got {_show(value)}")
    if x < low or (strict and x == low) or (high is not None and x > high):
        _fail(path, f"expected {want}, got {_show(value)}")
    return x


def _integer(path: str, value: Any, *, low: int = 1) -> int:
    # the library's integer test; the message shows the value as the file spells it
    if not v.is_integer(value) or value < low:
        _fail(path, f"expected an integer >= {low}, got {_show(value)}")
    return int(value)


def _names(names: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _choose_one(path: str, data: dict[str, Any], a: str, b: str) -> str:
    """The one of keys ``a``/``b`` that ``data`` has; both or neither is an error."""
    has_a, has_b = a in data, b in data
    if has_a == has_b:
        _fail(path, f"give exactly one of '{a}' or '{b}', got "
                    f"{'both' if has_a else 'neither'}")
    return a if has_a else b


# ------------------------------------------------------------------------- reading
class _DuplicateKey(Exception):
    def __init__(self, key: object) -> None:
        super().__init__(key)
        self.key = key


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


#: A number in exponent form, with or without a dot or a sign on the exponent
#: (``2e0``, ``1.0e18``, ``-3E-2``): a float, as YAML 1.2 and JSON read it.
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


@cache
def _yaml() -> tuple[Any, Any]:
    """PyYAML and a SafeLoader that rejects duplicate keys (imported on first use)."""
    try:
        import yaml  # type: ignore[import-untyped, unused-ignore]
    except ImportError as exc:  # pragma: no cover - PyYAML is a dependency
        raise ValueError("file: reading YAML needs PyYAML (pip install pyyaml)") from exc

    def construct_mapping(loader: Any, node: Any) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # "<<: *base" then an override is not a duplicate
            key = loader.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # unhashable: construct_mapping reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"duplicate key {_show(key)}", key_node.start_mark)
            seen.add(key)
        return loader.construct_mapping(node, deep=True)

    loader: Any = type("_StrictSafeLoader", (yaml.SafeLoader,), {})
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    # YAML 1.2 numbers in exponent form: YAML 1.1 (PyYAML) reads 2e0 and 1.0e18 as
    # text (its floats need a dot and a signed exponent).  The resolvers' lists are
    # copied first: PyYAML's add_implicit_resolver would append to SafeLoader's own.
    loader.yaml_implicit_resolvers = {
        first: list(resolvers)
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT,
                                 list("-+.0123456789"))
    return yaml, loader


def _parse_yaml(text: str) -> Any:
    yaml, loader = _yaml()
    try:
        return yaml.load(text, Loader=loader)  # a SafeLoader subclass: safe
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = exc.problem or exc.context or "malformed document"
        _fail("file", f"invalid YAML{where}: {what}")
    except yaml.YAMLError as exc:
        _fail("file", f"invalid YAML: {exc}")
    except RecursionError:
        _fail("file", "invalid YAML: nested too deeply")


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_json_object)
    except json.JSONDecodeError as exc:
        _fail("file", f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}")
    except _DuplicateKey as exc:
        _fail("file", f"invalid JSON: duplicate key {_show(exc.key)} in an object")
    except RecursionError:
        _fail("file", "invalid JSON: nested too deeply")
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        _fail("file", f"invalid JSON: {exc}")


def parse_document(text: str, yaml_syntax: bool) -> Any:
    """``text`` as YAML (``yaml_syntax``) or JSON, strictly: duplicate keys and
    malformed input raise ``ValueError("file: ...")`` with the line (NaN and
    infinities are read; each field's check refuses them where numbers must be
    finite).  The one reader of every input file (scenario files, sweep specs, link
    files)."""
    return _parse_yaml(text) if yaml_syntax else _parse_json(text)


def _read(path: Path) -> dict[str, Any]:
    kind = _SUFFIXES.get(path.suffix.lower())
    if kind is None:
        _fail("file", f"unsupported file type {path.suffix or '(no suffix)'!r} of {path}; "
                      "expected .yaml, .yml or .json")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        _fail("file", v.read_error(path, exc))
    data = _parse_json(text) if kind == "JSON" else _parse_yaml(text)
    if not isinstance(data, dict):
        got = "an empty document" if data is None else _kind(data)
        _fail("file", f"the top level must be a mapping with 'cluster' and 'jobs', got {got}")
    return data


# ------------------------------------------------------------------------ building
def _nodes(raw: Any) -> tuple[list[Node], list[float]]:
    nodes: list[Node] = []
    background: list[float] = []
    origin: dict[str, str] = {}
    for i, item in enumerate(_list("cluster.nodes", raw)):
        p = f"cluster.nodes[{i}]"
        d = _fields(p, item, _NODE)
        name = _name(f"{p}.name", d["name"])
        cpu = _number(f"{p}.cpu", d["cpu"])
        mem = _number(f"{p}.mem_gib", d["mem_gib"])
        gpu = _number(f"{p}.gpu", d["gpu"])
        link = _number(f"{p}.link_gbps", d["link_gbps"], strict=True)
        bg = _number(f"{p}.background_gbps", d.get("background_gbps", 0.0))
        if bg >= link:  # as check_background; said here to name the file's field
            _fail(f"{p}.background_gbps",
                  f"must stay below link_gbps ({link:g}), got {_show(d['background_gbps'])}")
        if "count" in d:
            count = _integer(f"{p}.count", d["count"])
            if len(nodes) + count > MAX_NODES:
                _fail(f"{p}.count", f"{count} copies take the cluster past {MAX_NODES} nodes")
            names = [f"{name}-{k}" for k in range(1, count + 1)]
        else:
            if len(nodes) + 1 > MAX_NODES:
                _fail(p, f"the cluster has more than {MAX_NODES} nodes")
            names = [name]
        for n in names:
            if n in origin:
                _fail(f"{p}.name", f"duplicate node name {n!r} (also {origin[n]})")
            origin[n] = p
            try:
                nodes.append(Node(n, cpu, mem, gpu, link))
            except ValueError as exc:
                _reraise(p, exc)
            background.append(bg)
    return nodes, background


def _latency_value(path: str, value: Any) -> float:
    """A one-way latency (ms): a number >= 0, at most :data:`MAX_LATENCY_MS`."""
    x = _number(path, value)
    if x > MAX_LATENCY_MS:
        _fail(path, f"expected at most {MAX_LATENCY_MS:g} ms, got {_show(value)}")
    return x


def _latency(raw: Any, names: list[str]) -> NDArray[np.float64]:
    """The physical one-way latency matrix (ms, zero diagonal)."""
    path = "cluster.latency_ms"
    k = len(names)
    if isinstance(raw, list):
        if len(raw) != k:
            _fail(path, f"expected a {k}x{k} matrix (one row per node, after count "
                        f"expansion), got {len(raw)} row(s)")
        lat = np.zeros((k, k))
        for i, row in enumerate(raw):
            if not isinstance(row, list) or len(row) != k:
                got = f"{len(row)} entries" if isinstance(row, list) else _kind(row)
                _fail(f"{path}[{i}]", f"expected a row of {k} numbers, got {got}")
            for j, value in enumerate(row):
                lat[i, j] = _latency_value(f"{path}[{i}][{j}]", value)
            if lat[i, i] != 0.0:
                _fail(f"{path}[{i}][{i}]",
                      f"expected 0 on the diagonal (a node to itself), got {_show(row[i])}")
        return lat  # symmetric: SimCluster's rule (cluster.latency_ms[i][j]: ...)
    if not isinstance(raw, dict):
        _fail(path, "expected a square matrix (a list of rows) or a mapping with "
                    f"'default' and optional 'pairs', got {_kind(raw)}")
    d = _fields(path, raw, _LATENCY)
    default = _latency_value(f"{path}.default", d["default"])
    lat = np.full((k, k), default)
    np.fill_diagonal(lat, 0.0)
    index = {n: i for i, n in enumerate(names)}
    seen: dict[frozenset[str], str] = {}
    for q, item in enumerate(_list(f"{path}.pairs", d.get("pairs", []), nonempty=False)):
        p = f"{path}.pairs[{q}]"
        pair = _fields(p, item, _PAIR)
        ends = []
        for end in ("a", "b"):
            node = _name(f"{p}.{end}", pair[end])
            if node not in index:
                _fail(f"{p}.{end}", f"unknown node {node!r}; nodes (after count expansion): "
                                    f"{_names(names)}")
            ends.append(node)
        a, b = ends
        if a == b:
            _fail(p, f"a and b are the same node {a!r} (its latency to itself is 0)")
        ms = _latency_value(f"{p}.ms", pair["ms"])
        key = frozenset((a, b))
        if key in seen:
            _fail(p, f"the pair ({a!r}, {b!r}) is already given by {seen[key]}")
        seen[key] = p
        lat[index[a], index[b]] = lat[index[b], index[a]] = ms
    return lat


def _tau(latency_ms: NDArray[np.float64]) -> NDArray[np.float64]:
    """The scheduler's ``tau``: latency over the smallest off-diagonal entry, diagonal 1."""
    k = latency_ms.shape[0]
    off = latency_ms[~np.eye(k, dtype=bool)]
    smallest = float(off.min()) if off.size else 0.0
    tau = latency_ms / (smallest if smallest > 0.0 else 1.0)
    np.fill_diagonal(tau, 1.0)
    return tau


def _workloads(raw: Any) -> tuple[list[Workload], dict[str, int], dict[str, int]]:
    """The workloads, workload name -> index, and job -> index of its workload."""
    out: list[Workload] = []
    by_name: dict[str, int] = {}
    member: dict[str, int] = {}
    for i, item in enumerate(_list("cluster.workloads", raw, nonempty=False)):
        p = f"cluster.workloads[{i}]"
        d = _fields(p, item, _WORKLOAD)
        name = _name(f"{p}.name", d["name"])
        if name in by_name:
            _fail(f"{p}.name", f"duplicate workload name {name!r} "
                               f"(also cluster.workloads[{by_name[name]}])")
        jobs: list[str] = []
        for j, job in enumerate(_list(f"{p}.jobs", d["jobs"])):
            job = _name(f"{p}.jobs[{j}]", job)
            if job in jobs:
                _fail(f"{p}.jobs[{j}]", f"job {job!r} is listed twice")
            if job in member:
                other = out[member[job]].name
                _fail(f"{p}.jobs[{j}]", f"job {job!r} is already in workload {other!r} "
                                        f"(cluster.workloads[{member[job]}])")
            jobs.append(job)
        deps: list[tuple[str, str]] = []
        for q, pair in enumerate(_list(f"{p}.dependencies", d.get("dependencies", []),
                                       nonempty=False)):
            dp = f"{p}.dependencies[{q}]"
            if not isinstance(pair, list) or len(pair) != 2:
                got = f"{len(pair)} entries" if isinstance(pair, list) else _kind(pair)
                _fail(dp, f"expected a pair [job, job], got {got}")
            for e, job in enumerate(pair):
                job = _name(f"{dp}[{e}]", job)
                if job not in jobs:
                    _fail(f"{dp}[{e}]", f"{job!r} is not a job of workload {name!r} "
                                        f"(its jobs: {_names(jobs)})")
            if pair[0] == pair[1]:
                _fail(dp, f"a job cannot depend on itself ({pair[0]!r})")
            deps.append((pair[0], pair[1]))
        try:
            out.append(Workload(name, tuple(jobs), tuple(deps)))
        except ValueError as exc:
            _reraise(p, exc)
        by_name[name] = i
        for job in jobs:
            member[job] = i
    return out, by_name, member


def _pattern(path: str, raw: Any) -> TrafficPattern | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        _fail(path, "expected a mapping {period_ms, duty_cycle, bandwidth_gbps} or null "
                    f"(a LowComm job), got {_kind(raw)}")
    d = _fields(path, raw, _PATTERN)
    try:
        return TrafficPattern(d["period_ms"], d["duty_cycle"], d["bandwidth_gbps"])
    except ValueError as exc:
        _reraise(path, exc)


def _job(i: int, raw: Any, max_link: float, workloads: list[Workload],
         by_name: dict[str, int], member: dict[str, int]) -> SimJob:
    p = f"jobs[{i}]"
    d = _fields(p, raw, _JOB)
    name = _name(f"{p}.name", d["name"])
    workers = _integer(f"{p}.workers", d["workers"])
    source = _choose_one(p, d, "model", "pattern")
    pattern: TrafficPattern | None
    if source == "model":
        model = d["model"]
        if not isinstance(model, str) or model not in MODELS:
            hint = v.did_you_mean(model, MODELS, cutoff=0.5)
            _fail(f"{p}.model", f"unknown model {_show(model)}{hint}; choose from "
                                f"{', '.join(MODELS)}")
        period = (_number(f"{p}.period_ms", d["period_ms"], strict=True)
                  if "period_ms" in d else None)
        try:
            pattern = model_pattern(model, workers, max_link, period_ms=period,
                                    period_source=None if period is None
                                    else f"scenario file, {p}.period_ms").pattern
        except (ValueError, OSError, KeyError) as exc:
            _fail(f"{p}.model", f"cannot derive the traffic pattern of {model!r}: {exc}")
        label = model
    else:
        if "period_ms" in d:
            _fail(f"{p}.period_ms", "only allowed with 'model' (a pattern carries its own "
                                    "period_ms)")
        pattern = _pattern(f"{p}.pattern", d["pattern"])
        if pattern is not None and pattern.bandwidth_gbps > max_link * (1 + 1e-12):
            # a pod sends through its node's link; the bandwidth-aware policies
            # (exclusive, metronome, ideal) would never place such a job
            _fail(f"{p}.pattern.bandwidth_gbps",
                  f"{pattern.bandwidth_gbps:g} Gbps is above every node's link (the "
                  f"fastest is {max_link:g} Gbps): no pod can send that fast, and "
                  f"{name!r} could never be placed by the bandwidth-aware policies")
        label = CUSTOM_MODEL if pattern is not None else LOWCOMM_MODEL
    iteration_ms: float | None = None
    if "iteration_ms" in d:
        if source != "pattern" or pattern is not None:
            _fail(f"{p}.iteration_ms", "only allowed with 'pattern: null' (a LowComm job; "
                                       "a pattern carries its own period_ms)")
        iteration_ms = _number(f"{p}.iteration_ms", d["iteration_ms"], strict=True)
    if _choose_one(p, d, "iterations", "duration_s") == "iterations":
        iterations = _integer(f"{p}.iterations", d["iterations"])
    else:
        duration = _number(f"{p}.duration_s", d["duration_s"], strict=True)
        period_ms = (pattern.period_ms if pattern is not None
                     else iteration_ms or LOWCOMM_PERIOD_MS)
        count = duration * 1e3 / period_ms  # may overflow to inf: checked before round()
        if not count <= MAX_ITERATIONS:
            _fail(f"{p}.duration_s", f"{duration:g} s is {count:.3g} iterations of "
                                     f"{period_ms:g} ms, above {MAX_ITERATIONS:,}")
        iterations = max(1, round(count))
        if iterations > MAX_ITERATIONS:  # count rounded up past the bound
            _fail(f"{p}.duration_s", f"{duration:g} s is {iterations:.3g} iterations of "
                                     f"{period_ms:g} ms, above {MAX_ITERATIONS:,}")
    extra: dict[str, Any] = {}
    if iteration_ms is not None:
        extra["iteration_ms"] = iteration_ms
    if "arrival_s" in d:
        extra["arrival_s"] = _number(f"{p}.arrival_s", d["arrival_s"])
    if "priority" in d:
        if isinstance(d["priority"], bool) or not isinstance(d["priority"], str | int):
            _fail(f"{p}.priority", f"expected 'high', 'low' or an integer, got "
                                   f"{_show(d['priority'])}")
        extra["priority"] = priority_value(d["priority"], name=f"{p}.priority")
    for key in ("gpu", "cpu", "mem_gib"):
        if key in d:
            extra[key] = _number(f"{p}.{key}", d[key])
    workload = workloads[member[name]].name if name in member else None
    if "workload" in d:
        wanted = _name(f"{p}.workload", d["workload"])
        if wanted not in by_name:
            known = (f"defined: {_names(list(by_name))}" if by_name
                     else "cluster.workloads defines none")
            _fail(f"{p}.workload", f"unknown workload {wanted!r}; {known}")
        if workload != wanted:
            _fail(f"{p}.workload", f"workload {wanted!r} (cluster.workloads"
                                   f"[{by_name[wanted]}].jobs) does not list job {name!r}")
    try:
        return SimJob(name, label, pattern, workers, iterations, workload=workload, **extra)
    except ValueError as exc:
        _reraise(p, exc)


#: A scenario's ``name``: it becomes part of the report's file names.
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _check_fits(i: int, job: SimJob, nodes: Sequence[Node]) -> None:
    """A job whose gang could never be placed, even on the empty cluster, is an input
    error (it would wait forever and leave its row without a JCT)."""
    def room(n: Node) -> float:
        return min(n.gpu / job.gpu if job.gpu > 0 else math.inf,
                   n.cpu / job.cpu if job.cpu > 0 else math.inf,
                   n.mem_gib / job.mem_gib if job.mem_gib > 0 else math.inf)

    # capped at the workers before floor(): a tiny request gives room = inf
    slots = [math.floor(min(room(n), job.workers) + 1e-9) for n in nodes]
    if max(slots) < 1:
        _fail(f"jobs[{i}]", f"one worker of {job.name!r} needs {job.gpu:g} GPU, {job.cpu:g} "
                            f"CPU and {job.mem_gib:g} GiB; no node has that much")
    fits = sum(min(k, job.workers) for k in slots)
    if fits < job.workers:
        _fail(f"jobs[{i}].workers", f"{job.workers} workers of {job.name!r} can never be "
                                    f"placed: the empty cluster has room for {fits} "
                                    f"({job.gpu:g} GPU, {job.cpu:g} CPU, {job.mem_gib:g} GiB "
                                    "each)")


def _build(data: dict[str, Any], default_name: str, source: str) -> Scenario:
    d = _fields("", data, _TOP)
    name = _name("name", d["name"]) if "name" in d else default_name
    if "name" in d and not _FILE_NAME.fullmatch(name):
        _fail("name", f"expected letters, digits, '.', '_' or '-' (it names the report's "
                      f"files), got {_show(name)}")
    title = _name("title", d["title"]) if "title" in d else name
    cluster = _fields("cluster", d["cluster"], _CLUSTER)
    nodes, background = _nodes(cluster["nodes"])
    names = [n.name for n in nodes]
    if "latency_ms" in cluster:
        latency_ms = _latency(cluster["latency_ms"], names)
        tau: NDArray[np.float64] | None = _tau(latency_ms)
    else:
        latency_ms, tau = np.zeros((len(nodes), len(nodes))), None
    workloads, by_name, member = _workloads(cluster.get("workloads", []))
    max_link = max(n.link_gbps for n in nodes)
    jobs: list[SimJob] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(_list("jobs", d["jobs"])):
        job = _job(i, raw, max_link, workloads, by_name, member)
        if job.name in seen:
            _fail(f"jobs[{i}].name",
                  f"duplicate job name {job.name!r} (also jobs[{seen[job.name]}])")
        seen[job.name] = i
        _check_fits(i, job, nodes)
        jobs.append(job)
    for i, w in enumerate(workloads):
        for j, job_name in enumerate(w.jobs):
            if job_name not in seen:
                _fail(f"cluster.workloads[{i}].jobs[{j}]",
                      f"unknown job {job_name!r}; jobs: {_names(list(seen))}")
    try:
        sim = SimCluster(Cluster(nodes, latency=tau, workloads=workloads),
                         np.array(background), latency_ms)
    except ValueError as exc:
        _reraise("cluster", exc)
    return Scenario(name, title, sim, tuple(jobs), notes={"file": source})


# -------------------------------------------------------------------------- public
def load_scenario_file(path: str | Path) -> Scenario:
    """Read a scenario (cluster and jobs) from a YAML or JSON file.

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.yaml``/``.yml`` or ``.json`` file of the shape described in
        :mod:`tdmcore.sim.scenario_file`.

    Returns
    -------
    Scenario
        Named after the file's ``name`` (default: the file's stem), with
        ``notes == {"file": str(path)}``; ready for
        :func:`tdmcore.sim.cluster.run_cluster`.

    Raises
    ------
    ValueError
        On any problem, with a message that starts with the offending field's
        path (``cluster.nodes[1].link_gbps: ...``, ``jobs[0]: unknown field(s)
        ['wrokers'] ...``) or with ``file:`` for the file itself.  Nothing is
        returned unless every field is valid.
    """
    if not isinstance(path, str | os.PathLike):
        _fail("file", f"expected a path, got {type(path).__name__}")
    p = Path(path)
    return _build(_read(p), default_name=p.stem, source=str(path))

