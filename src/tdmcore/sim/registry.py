"""One registry of what the simulator runs by name: scenarios, traces and policies.

The command line (``tdmcore simulate``, ``tdmcore link``, ``tdmcore list``, each
command's ``--help``) and sweep specs read the names they take here, so adding a
scenario is one entry of :data:`SCENARIOS`: a name, a title, its kind and the
function that builds it.  Its keyword arguments are its parameters: ``tdmcore
simulate`` sets those it has an option for, a sweep takes each as ``scenario.NAME``
(a builder's ``seed`` is the seed axis).

Kinds (:data:`KINDS` says which commands run each):

* ``cluster``: a shipped scenario of the cluster simulator
  (:func:`~tdmcore.sim.cluster.run_cluster`); ``sweep`` is one that only a sweep
  runs;
* ``trace``: a CSV trace of your own (:mod:`tdmcore.sim.traces`), read from a file
  with its columns and time unit (:func:`trace_source`);
* ``file``: a scenario file (:mod:`tdmcore.sim.scenario_file`, :func:`file_source`);
* ``elastic``, ``oasis``: the workloads of the other simulators, which ``tdmcore
  simulate`` hands to their commands;
* ``link``: one shared link of the link catalog (:mod:`tdmcore.sim.catalog`,
  ``tdmcore link``).

Policies: :data:`~tdmcore.sim.policies.NAMED_POLICIES` (re-exported here).

A run's scenario is a :class:`ScenarioSource`: an entry's name, or a file with its
content's digest (and a trace's reading), so that a sweep's task, which a Dask
worker builds again, carries everything that decides its scenario.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

from .. import _validation as v
from . import scenarios as sc
from .policies import CLUSTER_POLICIES, NAMED_POLICIES, NETWORKS, NamedPolicy
from .scenario_parts import Scenario
from .traces import load_trace

__all__ = [
    "CLUSTER_POLICIES",
    "KINDS",
    "NAMED_POLICIES",
    "NETWORKS",
    "SCENARIOS",
    "SCENARIO_FILE_SUFFIXES",
    "NamedPolicy",
    "ScenarioEntry",
    "ScenarioSource",
    "file_source",
    "link_entries",
    "named_source",
    "scenario_source",
    "trace_source",
]

#: What runs each kind of scenario: the commands that take it by name.
KINDS: dict[str, tuple[str, ...]] = {
    "cluster": ("simulate", "sweep"),
    "sweep": ("sweep",),
    "trace": ("simulate", "sweep"),
    "file": ("simulate", "sweep"),
    "elastic": ("simulate", "elastic"),
    "oasis": ("simulate", "oasis"),
    "link": ("link",),
}
#: The suffixes of a scenario file.
SCENARIO_FILE_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class ScenarioEntry:
    """A scenario the simulator knows by name.

    ``build(**parameters)`` returns the scenario, or its groups by name (the
    snapshots S0-S5); ``source`` names the keyword arguments that say where a
    scenario is read from (a trace's file, columns and time unit) rather than
    parameters to set or sweep.  ``build`` is None for the kinds another command
    runs (``elastic``, ``oasis``, ``link``).
    """

    name: str
    title: str
    kind: str
    build: Callable[..., Any] | None = None
    source: tuple[str, ...] = ()

    @property
    def commands(self) -> tuple[str, ...]:
        """The commands that run it."""
        return KINDS[self.kind]

    def parameters(self) -> tuple[str, ...]:
        """The builder's keyword arguments, but its ``seed`` and its source."""
        if self.build is None:
            return ()
        return tuple(p.name for p in inspect.signature(self.build).parameters.values()
                     if p.name not in (*self.source, "seed")
                     and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))

    def defaults(self) -> dict[str, Any]:
        """Each parameter's default (the builder's)."""
        if self.build is None:
            return {}
        signature = inspect.signature(self.build).parameters
        return {name: signature[name].default for name in self.parameters()
                if signature[name].default is not inspect.Parameter.empty}

    def takes_seed(self) -> bool:
        """Whether the builder draws with the run's seed (the seed axis builds it
        once per seed)."""
        return self.build is not None and "seed" in inspect.signature(self.build).parameters


def _entries() -> dict[str, ScenarioEntry]:
    entries = [
        ScenarioEntry("metronome-snapshots", "S0-S5 on the Metronome paper's 4-node "
                      "testbed (Table IV)", "cluster", sc.metronome_snapshots),
        ScenarioEntry("metronome-trace", "a Gavel-style trace on the testbed (--hours, "
                      "--load, --seed)", "cluster", sc.metronome_trace),
        ScenarioEntry("philly", "a slice of the real Philly trace (--jobs, --nodes, "
                      "--start)", "cluster", sc.philly),
        ScenarioEntry("trace", "your own CSV trace: `simulate trace TRACE.csv` (--column, "
                      "--time-unit, --jobs, --nodes); a sweep's scenario: {trace: FILE}",
                      "trace", load_trace, source=("path", "columns", "time_unit")),
        ScenarioEntry("period-gap", "S3 with WideResNet101's period a given gap below "
                      "twice VGG19's (scenario.gap_ms; the shipped period-gap sweep)",
                      "sweep", sc.period_gap),
        ScenarioEntry("dragon-testbed", "DRAGON's Table 1 and Poisson workloads (elastic "
                      "policies)", "elastic"),
        ScenarioEntry("oasis", "the OASiS paper's simulation setting (admission policies)",
                      "oasis"),
    ]
    return {e.name: e for e in entries}


#: The scenarios the simulator knows by name (the link catalog's are
#: :func:`link_entries`).  One entry each: the command line and sweeps read them here.
SCENARIOS: dict[str, ScenarioEntry] = _entries()


@cache
def link_entries() -> dict[str, ScenarioEntry]:
    """The links of the link catalog (``data/snapshots.json``), as entries of kind
    ``link`` (read once)."""
    from .catalog import link_scenarios

    return {name: ScenarioEntry(name, link.title, "link")
            for name, link in link_scenarios().items()}


@dataclass(frozen=True)
class ScenarioSource:
    """Where a run's scenario comes from: everything that decides it.

    ``name``: an entry of :data:`SCENARIOS`, ``trace`` or ``file``.  A file's
    ``path`` is absolute and ``digest`` is the sha256 of its content; a trace
    carries its ``columns`` (field -> header) and ``time_unit``.
    """

    name: str
    path: str = ""
    digest: str = ""
    columns: tuple[tuple[str, str], ...] = ()
    time_unit: str = "s"

    @property
    def entry(self) -> ScenarioEntry | None:
        """The registry's entry (None for a scenario file)."""
        return SCENARIOS.get(self.name) if self.name != "file" else None

    def describe(self) -> str:
        """A short name for messages: the entry's name, or the file's name."""
        return Path(self.path).name if self.path else self.name

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready data (part of a sweep task's cache key)."""
        out: dict[str, Any] = {"name": self.name}
        if self.path:
            out.update(path=self.path, digest=self.digest)
        if self.name == "trace":
            out.update(columns=[list(pair) for pair in self.columns],
                       time_unit=self.time_unit)
        return out

    def parameters(self) -> tuple[str, ...]:
        """The parameters it takes (a scenario file takes none)."""
        entry = self.entry
        return entry.parameters() if entry is not None else ()

    def takes_seed(self) -> bool:
        entry = self.entry
        return entry is not None and entry.takes_seed()

    def build(self, seed: int = 0, **parameters: Any) -> dict[str, Scenario]:
        """The scenario's groups by name (one group but for the snapshots).

        Raises
        ------
        ValueError
            As the builder or the file's reader raises; ``scenario`` for a kind
            the cluster simulator does not run.
        """
        if self.name == "file":
            from .scenario_file import load_scenario_file

            loaded = load_scenario_file(self.path)
            return {loaded.name: loaded}
        entry = self.entry
        if entry is None or entry.build is None:
            raise ValueError(f"scenario: {self.name!r} is not a scenario of the cluster "
                             "simulator")
        kwargs = dict(parameters)
        if entry.takes_seed():
            kwargs["seed"] = seed
        if self.name == "trace":
            kwargs.update(path=self.path, columns=dict(self.columns) or None,
                          time_unit=self.time_unit)
        built = entry.build(**kwargs)
        if isinstance(built, dict):
            return dict(built)
        # one group, named so that it stays the same whatever the parameters: the
        # entry's name, or a trace's file
        return {built.name if self.name == "trace" else self.name: built}


def _fail(path: str, message: str) -> NoReturn:
    raise ValueError(f"{path}: {message}")


def _under(where: str, key: str) -> str:
    """``key`` under ``where`` (``scenario.columns``), or ``key`` alone."""
    return f"{where}.{key}" if where else key


def _digest(where: str, path: Path) -> tuple[str, str]:
    """The file's absolute path and the sha256 of its bytes (a worker started
    elsewhere finds it; one cache key per content)."""
    try:
        data = path.read_bytes()
        resolved = path.resolve()
    except OSError as exc:
        _fail(where, v.read_error(path, exc))
    return str(resolved), hashlib.sha256(data).hexdigest()


def named_source(name: str, *, commands: tuple[str, ...] = ("simulate", "sweep"),
                 where: str = "scenario") -> ScenarioSource:
    """An entry of :data:`SCENARIOS` that one of ``commands`` runs, by name.

    Raises
    ------
    ValueError
        Starting with ``where``: an unknown name (with the closest ones and the
        names the commands take), or one another command runs.
    """
    entry = SCENARIOS.get(name) if isinstance(name, str) else None
    if entry is not None and set(entry.commands) & set(commands):
        return ScenarioSource(entry.name)
    takers = [e.name for e in SCENARIOS.values() if set(e.commands) & set(commands)]
    if entry is not None:
        runs = " and ".join(f"tdmcore {c}" for c in entry.commands)
        _fail(where, f"{name!r} is a scenario of {runs} (in a sweep spec: scenario: "
                     f"{name}), not here; this takes {', '.join(takers)}"
              if entry.commands == ("sweep",) else
              f"{name!r} is a scenario of {runs}, not here; this takes {', '.join(takers)}")
    _fail(where, f"unknown scenario {name!r}{v.did_you_mean(name, takers)}; choose from "
                 f"{', '.join(takers)}, or give a .yaml/.yml/.json scenario file")


def file_source(path: str | Path, *, base: Path | None = None,
                where: str = "scenario") -> ScenarioSource:
    """A scenario file (relative to ``base`` when given and ``path`` is relative).

    Raises
    ------
    ValueError
        Starting with ``where``: a file that cannot be read.
    """
    p = Path(path)
    if base is not None and not p.is_absolute():
        p = base / p
    resolved, digest = _digest(where, p)
    return ScenarioSource("file", resolved, digest)


def trace_source(path: str | Path, columns: Mapping[str, str] | None = None,
                 time_unit: str = "s", *, base: Path | None = None,
                 where: str = "scenario") -> ScenarioSource:
    """A CSV trace with its columns (field -> header) and time unit.

    The columns and the unit are checked against the reader's fields and units
    here, the file against them when the scenario is built.

    Raises
    ------
    ValueError
        Starting with ``where``: a file that cannot be read (``where.trace``), an
        unknown field or a header that is not a string (``where.columns``), an
        unknown unit (``where.time_unit``); with ``where`` empty, with the key alone.
    """
    from .traces import TIME_UNITS, TRACE_FIELDS

    p = Path(path)
    if base is not None and not p.is_absolute():
        p = base / p
    resolved, digest = _digest(_under(where, "trace"), p)
    pairs: list[tuple[str, str]] = []
    for field, header in (columns or {}).items():
        if field not in TRACE_FIELDS:
            _fail(_under(where, "columns"), f"unknown field {field!r}"
                  f"{v.did_you_mean(field, TRACE_FIELDS)}; the fields are "
                  f"{', '.join(TRACE_FIELDS)}")
        if not isinstance(header, str) or not header.strip():
            _fail(f"{_under(where, 'columns')}.{field}",
                  f"expected a column header, got {header!r}")
        pairs.append((field, header.strip()))
    if time_unit not in TIME_UNITS:
        _fail(_under(where, "time_unit"), f"expected one of {', '.join(TIME_UNITS)}, got "
              f"{time_unit!r}{v.did_you_mean(time_unit, TIME_UNITS)}")
    return ScenarioSource("trace", resolved, digest, tuple(sorted(pairs)), time_unit)


#: The fields of a sweep spec's ``scenario: {trace: ...}`` mapping.
TRACE_KEYS = ("trace", "columns", "time_unit")


def scenario_source(raw: Any, *, base: Path | None = None,
                    commands: tuple[str, ...] = ("sweep",),
                    where: str = "scenario") -> ScenarioSource:
    """A scenario as an input file gives it: a name, a ``.yaml``/``.yml``/``.json``
    scenario file, or a mapping ``{trace: FILE, columns: {FIELD: HEADER}, time_unit:
    UNIT}`` (relative paths from ``base``).

    Raises
    ------
    ValueError
        Starting with ``where`` or the field under it at fault.
    """
    if isinstance(raw, dict):
        unknown = sorted(str(k) for k in raw if k not in TRACE_KEYS)
        if unknown:
            _fail(where, f"unknown field(s) {unknown}; a trace takes "
                         f"{', '.join(TRACE_KEYS)}")
        trace = raw.get("trace")
        if not isinstance(trace, str) or not trace:
            _fail(f"{where}.trace", f"expected the trace's CSV file, got {trace!r}")
        columns = raw.get("columns") or {}
        if not isinstance(columns, dict):
            _fail(f"{where}.columns", "expected a mapping of field to column header")
        unit = raw.get("time_unit", "s")
        return trace_source(trace, columns, unit, base=base, where=where)
    if not isinstance(raw, str) or not raw:
        _fail(where, f"expected a scenario name, a scenario file or {{trace: FILE}}, got "
                     f"{raw!r}")
    if Path(raw).suffix.lower() in SCENARIO_FILE_SUFFIXES:
        return file_source(raw, base=base, where=where)
    if raw == "trace":
        _fail(where, "a trace is a mapping: {trace: FILE.csv, columns: {FIELD: HEADER}, "
                     "time_unit: s}")
    return named_source(raw, commands=commands, where=where)
