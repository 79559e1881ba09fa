"""Sweep specifications: a grid of independent runs, checked before any of them runs.

A spec is a YAML or JSON mapping (docs/sweeps.md; ``tdmcore sweep --example NAME``
prints a shipped one)::

    name: fig14                        # optional, default: the file's stem
    title: "..."                       # optional
    run: simulate                      # simulate (default) or scheduler-time
    scenario: metronome-snapshots      # simulate: a scenario name, a scenario file, or
                                       #   {trace: FILE.csv, columns: {...}, time_unit: ms}
    groups: [S1, S2, S3, S4, S5]       # optional: some of the scenario's groups
    policies: [metronome]              # required
    seeds: [0, 1, 2]                   # optional, default [0]
    set: {scenario.window_s: 300}      # optional: parameters fixed for every task
    grid:                              # optional: parameter -> the values to sweep
      controller.o_t: [3, 5]
      controller.a_t: [1.05, 1.10, 1.15]
    metrics: [per_1000_low_s, readjustments]   # shown and plotted (the table has all)
    compare: [ideal]                   # optional: each metric also as % vs these policies

A parameter is ``NAMESPACE.NAME``, and each namespace is read off the code that
takes it, so a new option there is sweepable as soon as it exists:

* ``scenario.*``: the parameters of the scenario's entry in the registry
  (:meth:`tdmcore.sim.registry.ScenarioEntry.parameters`: ``window_s`` of
  :func:`~tdmcore.sim.scenarios.metronome_snapshots`, ``load`` of
  :func:`~tdmcore.sim.scenarios.metronome_trace`, ``n_nodes`` of a trace, ...); for
  ``scheduler-time``, those of :func:`~tdmcore.sim.scheduler_time.scheduler_time`
  (``jobs``, ``repeat``).  A builder's ``seed`` is the seed axis.  A scenario file
  takes none.
* ``cluster.*``: fields of :class:`~tdmcore.sim.cluster.SimCluster` (the network),
  each a number: the same on every host link (``background_gbps``) or between
  every pair of nodes (``latency_ms``).
* ``run.*``: keyword-only options of :func:`~tdmcore.sim.cluster.run_cluster`
  (``noise_sigma``, ``queue``, ``network``, ...).
* ``metronome.*``: fields of :class:`~tdmcore.metronome.policies.MetronomeConfig` (``gt_ms``,
  ``et_frac``, ``bins``, ...); they apply to the built-in Metronome policies only.
* ``controller.*``: fields of :class:`~tdmcore.metronome.controller.ControllerConfig`
  (``o_t``, ``a_t``, ``window``, ...); they apply to policies that run the
  controller.

A task is one (group, policy, seed, parameter values) combination; a policy that
takes none of a parameter is run once for all its values, and its rows leave that
column empty.  Every problem is a :class:`ValueError` whose message starts with the
offending field's path (``grid.controller.o_tt: unknown parameter ...``), raised
before any task runs: names, types, the policies, the groups, the seeds, the name
(part of file names), a value listed twice, each config built from the values, the
``run.*`` values (:func:`~tdmcore.sim.cluster.check_run_options`), and each
distinct scenario built once.  A scenario file or a trace is kept as its absolute
path with the digest of its content (:class:`~tdmcore.sim.registry.ScenarioSource`).
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ... import _validation as v
from ...framework import check_policy
from ...metronome.controller import ControllerConfig
from ...metronome.policies import POLICIES, MetronomeConfig
from ..cluster import SimCluster, check_run_options, run_cluster
from ..policies import (
    CLUSTER_POLICIES,
    build_policy,
    cluster_policy,
    controller_config,
    import_policy,
)
from ..registry import ScenarioSource, scenario_source
from ..report import run_metric_names
from ..scenario_file import _fail, _fields, _kind, _show, parse_document
from ..scenario_parts import Scenario
from ..scheduler_time import SCHEDULER_TIME_METRICS, scheduler_time

__all__ = [
    "NAMESPACES",
    "RUNS",
    "SweepSpec",
    "Task",
    "compared_name",
    "load_spec",
    "parse_spec",
    "task_scenario",
]

#: What a task runs: the cluster simulator, or one pod's scheduling timed.
RUNS: tuple[str, ...] = ("simulate", "scheduler-time")
#: Parameter namespaces, in the order a task's parameters are listed.
NAMESPACES: tuple[str, ...] = ("scenario", "cluster", "run", "metronome", "controller")
#: ``run_cluster`` options a sweep sets itself (the seed axis, the controller namespace).
_RUN_OWN = ("seed", "progress", "controller")
_TOP = ((), ("name", "title", "run", "scenario", "groups", "policies", "seeds", "set",
             "grid", "metrics", "compare"))
#: Scalars a parameter may take (a value is one of these or a list of them).
_SCALARS = (bool, int, float, str)


@dataclass(frozen=True)
class Task:
    """One run of a sweep: everything that determines its result.

    ``params`` holds the parameters that apply to ``policy``, sorted by name;
    ``scenario`` says where the scenario comes from, with the sha256 of a file's
    content, so that an edited file is a different task (empty for
    ``scheduler-time``, which builds its own).
    """

    run: str
    scenario: ScenarioSource
    group: str
    policy: str
    seed: int
    params: tuple[tuple[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        """The task as JSON-ready data (the cache's key is made from it)."""
        return {"run": self.run, "scenario": self.scenario.as_dict(), "group": self.group,
                "policy": self.policy, "seed": self.seed,
                "params": [[k, v] for k, v in self.params]}

    def namespace(self, name: str) -> dict[str, Any]:
        """The task's ``name.*`` parameters, without the prefix."""
        prefix = f"{name}."
        return {k[len(prefix):]: v for k, v in self.params if k.startswith(prefix)}

    def describe(self) -> str:
        """One line for messages: where, which policy and seed, which values."""
        where = self.group or self.scenario.describe() or self.run
        values = ", ".join(f"{k}={_show(v)}" for k, v in self.params)
        return f"{where} / {self.policy} / seed {self.seed}" + (f" / {values}" if values
                                                                 else "")


@dataclass(frozen=True)
class SweepSpec:
    """A checked sweep specification (:func:`load_spec`, :func:`parse_spec`)."""

    name: str
    title: str
    run: str
    scenario: ScenarioSource
    groups: tuple[str, ...]
    policies: tuple[str, ...]
    seeds: tuple[int, ...]
    fixed: dict[str, Any]
    grid: dict[str, tuple[Any, ...]]
    metrics: tuple[str, ...]
    compare: tuple[str, ...] = ()
    tasks: tuple[Task, ...] = field(default=(), repr=False)

    @property
    def swept(self) -> tuple[str, ...]:
        """The parameters that take more than one value."""
        return tuple(k for k, values in self.grid.items() if len(values) > 1)

    @property
    def parameters(self) -> tuple[str, ...]:
        """Every parameter the spec sets (fixed ones first), in the table's order."""
        return (*self.fixed, *(k for k in self.grid if k not in self.fixed))


# ----------------------------------------------------------------------- the namespaces
def _keyword_names(fn: Callable[..., Any], skip: tuple[str, ...] = (),
                   keyword_only: bool = False) -> tuple[str, ...]:
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.name in skip or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if keyword_only and p.kind is not p.KEYWORD_ONLY:
            continue
        out.append(p.name)
    return tuple(out)


def _accepted(run: str, scenario: ScenarioSource) -> dict[str, tuple[str, ...]]:
    """Namespace -> the names it accepts, for this run and scenario."""
    metronome = tuple(f.name for f in dataclasses.fields(MetronomeConfig))
    if run == "scheduler-time":
        return {"scenario": _keyword_names(scheduler_time, ("policy", "seed")),
                "metronome": metronome}
    return {
        "scenario": scenario.parameters(),
        "cluster": tuple(f.name for f in dataclasses.fields(SimCluster)
                         if f.name != "cluster"),
        "run": _keyword_names(run_cluster, _RUN_OWN, keyword_only=True),
        "metronome": metronome,
        "controller": tuple(f.name for f in dataclasses.fields(ControllerConfig)
                            if f.name != "scheduler"),
    }


def _check_name(where: str, name: Any, accepted: Mapping[str, tuple[str, ...]],
                scenario: ScenarioSource) -> str:
    if not isinstance(name, str):
        _fail(where, f"expected a parameter name NAMESPACE.NAME, got {_show(name)}")
    path = f"{where}.{name}"
    space, dot, key = name.partition(".")
    if not dot:
        owners = [f"{s}.{name}" for s, names in accepted.items() if name in names]
        hint = f" (did you mean {' or '.join(owners)}?)" if owners else ""
        _fail(path, f"a parameter is NAMESPACE.NAME, namespaces: "
                    f"{', '.join(accepted)}{hint}")
    if space not in accepted:
        near = v.closest(space, accepted)
        hint = f" (did you mean {near}.{key}?)" if near is not None else ""
        _fail(path, f"unknown namespace {space!r}{hint}; this run takes "
                    f"{', '.join(accepted)}")
    names = accepted[space]
    if key not in names:
        if not names:
            what = (f"scenario file {scenario.describe()} takes no parameters"
                    if space == "scenario" else f"{space} takes no parameters here")
            _fail(path, f"unknown parameter: {what}")
        close = v.closest(key, names)
        hint = f" (did you mean {space}.{close}?)" if close is not None else ""
        _fail(path, f"unknown parameter{hint}; {space} takes {', '.join(names)}")
    return name


def _check_value(path: str, value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        _fail(path, f"expected a finite number, got {_show(value)}")
    if value is not None and not isinstance(value, _SCALARS):
        _fail(path, f"expected a number, string or boolean, got {_kind(value)}")
    return value


def _same_value(a: Any, b: Any) -> bool:
    """Whether two parameter values are the same value: ``30`` and ``30.0`` are,
    a bool and a number are not (``true`` is not ``1``)."""
    return isinstance(a, bool) == isinstance(b, bool) and bool(a == b)


# -------------------------------------------------------------------------- policies
def _policy_namespaces(run: str, name: str) -> tuple[str, ...]:
    """The namespaces whose parameters apply to policy ``name``."""
    common = ("scenario",) if run == "scheduler-time" else ("scenario", "cluster", "run")
    if ":" in name:
        obj = check_policy(import_policy(name)(), f"policies: {name}()")
        takes = isinstance(getattr(obj, "config", None), MetronomeConfig) \
            and run == "simulate"
        return (*common, "controller") if takes else common
    placement, network = cluster_policy(name)
    if network != "shared":  # no controller, and no config of its own to change
        return common
    if isinstance(getattr(placement, "config", None), MetronomeConfig):
        extra = ("metronome", "controller") if run == "simulate" else ("metronome",)
        return (*common, *extra)
    return common


def _check_policies(raw: Any, run: str) -> tuple[str, ...]:
    items = _list("policies", raw)
    known = CLUSTER_POLICIES if run == "simulate" else tuple(POLICIES)
    out: list[str] = []
    for i, name in enumerate(items):
        path = f"policies[{i}]"
        if not isinstance(name, str) or not name:
            _fail(path, f"expected a policy name, got {_show(name)}")
        if ":" in name:
            if run != "simulate":
                _fail(path, "policies of your own (MODULE:CALLABLE) are for simulate runs")
            try:
                check_policy(import_policy(name)(), "policy")
            except Exception as exc:  # a user's module: any failure is its error
                _fail(path, f"{name}: {exc}")
        elif name not in known:
            hint = v.did_you_mean(name, known)
            _fail(path, f"unknown policy {name!r}{hint}; choose from {', '.join(known)}"
                        + (", or MODULE:CALLABLE" if run == "simulate" else ""))
        if name in out:
            _fail(path, f"policy {name!r} is listed twice")
        out.append(name)
    return tuple(out)


# ------------------------------------------------------------------------- scenarios
def _network(sim: SimCluster, values: Mapping[str, Any]) -> SimCluster:
    """``sim`` with ``cluster.*`` values (names without the prefix): a number fills
    its field, the same on every host link (``background_gbps``) or between every
    pair of nodes (``latency_ms``).  ValueError naming the field otherwise."""
    if not values:
        return sim
    filled: dict[str, Any] = {
        name: np.full(np.shape(getattr(sim, name)), v.real_number(name, value))
        for name, value in values.items()}
    return dataclasses.replace(sim, **filled)


def task_scenario(task: Task) -> Scenario:
    """The scenario a ``simulate`` task runs, with its ``cluster.*`` parameters."""
    groups = task.scenario.build(task.seed, **task.namespace("scenario"))
    scenario = groups[task.group]
    network = task.namespace("cluster")
    if network:
        scenario = dataclasses.replace(scenario, sim=_network(scenario.sim, network))
    return scenario


def _scenario_source(raw: Any, run: str, base: Path | None) -> ScenarioSource:
    """The scenario's source (:func:`tdmcore.sim.registry.scenario_source`)."""
    if run == "scheduler-time":
        if raw is not None:
            _fail("scenario", "scheduler-time builds its own cluster (sweep its jobs with "
                              "scenario.jobs); remove the field")
        return ScenarioSource("")
    if raw is None:
        _fail("scenario", "required field missing (a scenario name, a scenario file or "
                          "{trace: FILE})")
    return scenario_source(raw, base=base, commands=("sweep",))


# --------------------------------------------------------------------------- metrics
def metric_names(run: str) -> tuple[str, ...]:
    """Every metric a task of ``run`` reports (the columns of its rows)."""
    if run == "scheduler-time":
        return SCHEDULER_TIME_METRICS
    return run_metric_names()


#: Shown when a spec names no metrics.
DEFAULT_METRICS = {"simulate": ("jct_s", "per_1000_high_s", "per_1000_low_s", "gamma"),
                   "scheduler-time": ("scheduler_ms", "controller_ms")}


def compared_name(metric: str, policy: str) -> str:
    """The column of ``metric`` relative to ``policy``'s run, in %."""
    return f"{metric}_vs_{policy}_pct"


def _distinct_subset(field: str, raw: Any, known: tuple[str, ...], kind: str,
                     unknown: str) -> tuple[str, ...]:
    """``raw``, a list of distinct members of ``known``; ``unknown`` (formatted with
    the shown value and the known ones) says what is wrong with another value."""
    out: list[str] = []
    for i, value in enumerate(_list(field, raw)):
        if value not in known:
            _fail(f"{field}[{i}]", unknown.format(shown=_show(value), known=", ".join(known)))
        if value in out:
            _fail(f"{field}[{i}]", f"{kind} {value!r} is listed twice")
        out.append(value)
    return tuple(out)


def _check_compare(raw: Any, policies: tuple[str, ...]) -> tuple[str, ...]:
    if raw is None:
        return ()
    return _distinct_subset("compare", raw, policies, "policy",
                            "{shown} is not one of the sweep's policies ({known})")


def _check_metrics(raw: Any, run: str, compare: tuple[str, ...] = ()) -> tuple[str, ...]:
    if raw is None:
        return DEFAULT_METRICS[run]
    base = metric_names(run)
    known = (*base, *(compared_name(m, p) for p in compare for m in base))
    out = []
    for i, name in enumerate(_list("metrics", raw)):
        if not isinstance(name, str) or name not in known:
            hint = v.did_you_mean(name, known)
            _fail(f"metrics[{i}]", f"unknown metric {_show(name)}{hint}; a {run} task "
                                   f"reports {', '.join(base)}" + (
                                       f", and each as <metric>_vs_<policy>_pct for "
                                       f"{', '.join(compare)}" if compare else ""))
        out.append(name)
    return tuple(out)


# ------------------------------------------------------------------------------ load
def _list(path: str, value: Any) -> list[Any]:
    if not isinstance(value, list) or not value:
        _fail(path, f"expected a non-empty list, got {_kind(value)}")
    return value


def _seeds(raw: Any) -> tuple[int, ...]:
    if raw is None:
        return (0,)
    out = []
    for i, seed in enumerate(_list("seeds", raw)):
        v.seed(seed, f"seeds[{i}]")  # the simulator's range, checked before any task
        if seed in out:
            _fail(f"seeds[{i}]", f"seed {seed} is listed twice")
        out.append(seed)
    return tuple(out)


def _text(path: str, raw: Any, default: str) -> str:
    if raw is None:
        return default
    if not isinstance(raw, str) or not raw.strip():
        _fail(path, f"expected a non-empty string, got {_show(raw)}")
    return raw


#: Characters a sweep's name may not hold, besides control characters: it names
#: the report's files (``sweep-<name>.csv``), on any system.
_UNSAFE_IN_NAME = '/\\:*?"<>|'


def _file_name(path: str, name: str) -> str:
    """``name`` if it can be part of a file name: no path separator, none of
    :data:`_UNSAFE_IN_NAME`, no control character, not ``.`` or ``..``."""
    bad = sorted({c for c in name if c in _UNSAFE_IN_NAME or not c.isprintable()})
    if bad or name.strip() in (".", ".."):
        what = f"holds {', '.join(map(repr, bad))}" if bad else "is not a file name"
        _fail(path, f"{_show(name)} {what}; the name is part of the report's file names "
                    f"(sweep-<name>.csv): use none of {' '.join(_UNSAFE_IN_NAME)} or "
                    "control characters")
    return name


def _mapping(path: str, raw: Any) -> dict[Any, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        _fail(path, f"expected a mapping of NAMESPACE.NAME to values, got {_kind(raw)}")
    return raw


def _reraise_param(where: Mapping[str, str], space: str, exc: Exception) -> None:
    """A config constructor's ``"field: ..."`` error under the spec field that set it."""
    text = str(exc)
    head, sep, rest = text.partition(": ")
    key = f"{space}.{head}"
    if sep and key in where:
        raise ValueError(f"{where[key]}: {rest}") from exc
    raise ValueError(f"{'/'.join(sorted(set(where.values()))) or space}: {text}") from exc


def parse_spec(data: Any, *, default_name: str = "sweep", base: Path | None = None
               ) -> SweepSpec:
    """Check a spec given as data (the mapping a YAML/JSON file holds).

    Parameters
    ----------
    data : mapping
        The spec (module docstring).
    default_name : str
        Its name when it gives none.
    base : pathlib.Path, optional
        The folder a relative scenario file path is read from.

    Returns
    -------
    SweepSpec
        With its tasks expanded, in grid order (group, policy, parameter values,
        seed).

    Raises
    ------
    ValueError
        Starting with the offending field's path, before any task runs.
    """
    if not isinstance(data, dict):
        got = "an empty document" if data is None else _kind(data)
        _fail("file", f"the top level must be a mapping (a sweep spec), got {got}")
    _fields("", data, _TOP)
    run = data.get("run", "simulate")
    if run not in RUNS:
        _fail("run", f"expected one of {', '.join(RUNS)}, got {_show(run)}")
    scenario = _scenario_source(data.get("scenario"), run, base)
    policies = _check_policies(data.get("policies"), run)
    seeds = _seeds(data.get("seeds"))
    accepted = _accepted(run, scenario)
    where: dict[str, str] = {}  # parameter -> the spec field that sets it
    fixed: dict[str, Any] = {}
    for name, value in _mapping("set", data.get("set")).items():
        key = _check_name("set", name, accepted, scenario)
        fixed[key] = _check_value(f"set.{key}", value)
        where[key] = f"set.{key}"
    grid: dict[str, tuple[Any, ...]] = {}
    for name, values in _mapping("grid", data.get("grid")).items():
        key = _check_name("grid", name, accepted, scenario)
        if key in fixed:
            _fail(f"grid.{key}", "also in set: give a parameter in one of them")
        items = _list(f"grid.{key}", values)
        checked = tuple(_check_value(f"grid.{key}[{i}]", v) for i, v in enumerate(items))
        for i, value in enumerate(checked):
            for earlier in checked[:i]:
                if _same_value(value, earlier):
                    spelt = "" if _show(value) == _show(earlier) else f" (as {_show(earlier)})"
                    _fail(f"grid.{key}[{i}]", f"{_show(value)} is listed twice{spelt}")
        grid[key] = checked
        where[key] = f"grid.{key}"
    applies = {name: _policy_namespaces(run, name) for name in policies}
    for key, path in where.items():
        space = key.partition(".")[0]
        if not any(space in spaces for spaces in applies.values()):
            _fail(path, f"no policy of the sweep takes {space}.* parameters "
                        f"({', '.join(policies)})")
    compare = _check_compare(data.get("compare"), policies)
    metrics = _check_metrics(data.get("metrics"), run, compare)
    name = _file_name("name", _text("name", data.get("name"), default_name))
    title = _text("title", data.get("title"), name)
    all_groups = _groups_of(run, scenario, seeds, fixed, grid, where)
    groups = _check_groups(data.get("groups"), all_groups)
    spec = SweepSpec(name, title, run, scenario, groups, policies, seeds, fixed, grid,
                     metrics, compare)
    tasks = _expand(spec, applies, where)
    return dataclasses.replace(spec, tasks=tasks)


def _groups_of(run: str, scenario: ScenarioSource, seeds: tuple[int, ...],
               fixed: dict[str, Any],
               grid: dict[str, tuple[Any, ...]], where: dict[str, str]) -> tuple[str, ...]:
    """Build every distinct scenario the tasks will build (checking the values of
    ``scenario.*`` and ``cluster.*``) and return the groups they have."""
    if run == "scheduler-time":
        return ("",)
    seeded = scenario.takes_seed()
    scen_keys = [k for k in grid if k.startswith("scenario.")]
    net_keys = [k for k in grid if k.startswith("cluster.")]
    base = {k: v for k, v in fixed.items() if k.startswith("scenario.")}
    net_base = {k: v for k, v in fixed.items() if k.startswith("cluster.")}
    groups: tuple[str, ...] | None = None
    for values in itertools.product(*(grid[k] for k in scen_keys)):
        params = {**base, **dict(zip(scen_keys, values, strict=True))}
        for seed in seeds if seeded else seeds[:1]:
            kwargs = {k.partition(".")[2]: v for k, v in params.items()}
            try:
                built = scenario.build(seed, **kwargs)
            except (ValueError, TypeError) as exc:
                text = str(exc)
                if scenario.path and text.partition(": ")[0] not in scenario.parameters():
                    text = text.removeprefix(f"{scenario.path}: ")  # named just below
                    raise ValueError(f"scenario: {scenario.describe()}: {text}") from exc
                _reraise_param(where, "scenario", exc)
            names = tuple(built)
            if groups is not None and names != groups:
                _fail("grid", f"the scenario's groups change with its parameters "
                              f"({', '.join(groups)} vs {', '.join(names)})")
            groups = names
            for net_values in itertools.product(*(grid[k] for k in net_keys)):
                net = {**net_base, **dict(zip(net_keys, net_values, strict=True))}
                if not net:
                    break
                kwargs_net = {k.partition(".")[2]: v for k, v in net.items()}
                for one in built.values():
                    try:
                        _network(one.sim, kwargs_net)
                    except (ValueError, TypeError) as exc:
                        _reraise_param(where, "cluster", exc)
    assert groups is not None
    return groups


def _check_groups(raw: Any, known: tuple[str, ...]) -> tuple[str, ...]:
    if raw is None:
        return known
    return _distinct_subset("groups", raw, known, "group",
                            "unknown group {shown}; the scenario has {known}")


def _expand(spec: SweepSpec, applies: Mapping[str, tuple[str, ...]],
            where: Mapping[str, str]) -> tuple[Task, ...]:
    """Every task, once: a policy's grid is over the parameters it takes; each
    policy config and controller config is built here to check the values."""
    tasks: list[Task] = []
    seen: set[Task] = set()
    for group in spec.groups:
        for policy in spec.policies:
            spaces = applies[policy]
            mine = [k for k in spec.grid if k.partition(".")[0] in spaces]
            fixed = {k: v for k, v in spec.fixed.items() if k.partition(".")[0] in spaces}
            for values in itertools.product(*(spec.grid[k] for k in mine)):
                params = {**fixed, **dict(zip(mine, values, strict=True))}
                task_params = tuple(sorted(params.items()))
                _check_configs(policy, task_params, where)
                for seed in spec.seeds:
                    task = Task(spec.run, spec.scenario, group, policy, seed, task_params)
                    if task not in seen:
                        seen.add(task)
                        tasks.append(task)
    return tuple(tasks)


def _check_configs(policy: str, params: tuple[tuple[str, Any], ...],
                   where: Mapping[str, str]) -> None:
    """Refuse the values ``run_cluster`` (:func:`~tdmcore.sim.cluster.check_run_options`),
    the policy's ``MetronomeConfig`` and the ``ControllerConfig`` refuse."""
    probe = Task("", ScenarioSource(""), "", policy, 0, params)
    checked = _keyword_names(check_run_options)
    run = {k: value for k, value in probe.namespace("run").items() if k in checked}
    try:
        check_run_options(**run)
    except (ValueError, TypeError) as exc:
        _reraise_param(where, "run", exc)
    metronome, controller = probe.namespace("metronome"), probe.namespace("controller")
    if not metronome and not controller:
        return
    try:
        built = build_policy(policy, metronome)
    except (ValueError, TypeError) as exc:
        _reraise_param(where, "metronome", exc)
    try:
        controller_config(built, controller)
    except (ValueError, TypeError) as exc:
        _reraise_param(where, "controller", exc)


def load_spec(path: str | Path) -> SweepSpec:
    """Read and check a sweep spec from a ``.yaml``/``.yml`` or ``.json`` file.

    A relative scenario file path in it is read from the spec's folder.  Raises
    :class:`ValueError` starting with the offending field's path (``file:`` for
    the file itself); see :func:`parse_spec`.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        _fail("file", f"unsupported file type {p.suffix or '(no suffix)'!r} of {p}; "
                      "expected .yaml, .yml or .json")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        _fail("file", v.read_error(p, exc))
    data = parse_document(text, suffix != ".json")
    return parse_spec(data, default_name=p.stem, base=p.parent)


def canonical(value: Any) -> str:
    """Stable JSON text of ``value`` (sorted keys), for hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True)
