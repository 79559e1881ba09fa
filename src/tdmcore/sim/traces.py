"""Job traces from CSV files: your own, or the shipped Philly trace as one preset.

A trace is a CSV file with a header row and one job per row.  Its columns, by the
name tdmcore gives them (``--column FIELD=HEADER`` maps them to your headers):

========== ======== ==============================================================
field      required what it holds
========== ======== ==============================================================
submit     yes      submit time: a number (any origin) or an ISO-8601 timestamp
workers    yes      workers (one per GPU); ``gpus`` is accepted as its name too
duration_s one of   the job's training time alone
iterations one of   or its number of iterations
model      no       one of the 13 models, by any of its names; see below
priority   no       ``high``, ``low`` or an integer (larger is higher); default low
========== ======== ==============================================================

Numeric submit times and durations are in ``time_unit`` (:data:`TIME_UNITS`;
seconds by default: Muri's traces are in ms).  **[decision]** A unit is never
guessed; when the times read in the given unit look like another one (the median
job running for more than a month or less than 10 seconds; without durations,
submit times spanning more than three years), a bound error says so, and a trace
read without error gets a warning naming the unit they look like (:func:`unit_hint`).

Rows are taken in submit order (ties keep the file's order); arrival times are
relative to the first row taken.  Each row becomes a job through
:func:`tdmcore.sim.scenario_parts.trace_job`: a job of two or more workers carries its
model's traffic pattern, a one-worker job is LowComm.

A model name matches whatever its case and separators (``gpt2`` is GPT-2,
:func:`tdmcore.sim.models.model_name`).  **[decision]** A model the trace names but
tdmcore does not know trains :data:`DEFAULT_MODEL`'s pattern, with a warning listing
those names and the ones tdmcore knows; a trace without
a model column draws each job's model uniformly from the 13 with the seed (as
Philly, which names none).  A job asking for more GPUs than the cluster has is
capped at the cluster's GPUs (as Philly's few very large jobs).  The cluster is
Philly's: ``n_nodes`` nodes of :data:`~tdmcore.sim.scenario_parts.PHILLY_NODE`, with
latencies from the Lingjun topology.
"""

from __future__ import annotations

import csv
import logging
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from .. import _validation as v
from ..model import Cluster, Node, priority_value
from .cluster import MAX_ARRIVAL_S, MAX_ITERATIONS, MAX_WORKERS, SimCluster, SimJob
from .models import MODELS, model_name
from .scenario_parts import (
    BASE_LATENCY_MS,
    PHILLY_NODE,
    Scenario,
    lingjun_latency,
    trace_job,
)

__all__ = ["DEFAULT_MODEL", "TIME_UNITS", "TRACE_FIELDS", "TraceRow", "load_trace",
           "read_trace", "trace_scenario", "unit_hint"]

log = logging.getLogger(__name__)

#: The fields of a trace row, in the order the docs list them.
TRACE_FIELDS = ("submit", "workers", "duration_s", "iterations", "model", "priority")
#: Other names a field's header may have without a ``--column`` mapping.
_ALIASES = {"workers": ("gpus",)}
#: The units a trace's numeric submit times and durations may be in, as seconds.
TIME_UNITS: dict[str, float] = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0,
                                "h": 3600.0}
#: **[decision]** Plausible times of a trace, s: a median job of 10 s to 30 days,
#: and, for a trace without durations, submit times spanning at most three years.
PLAUSIBLE_MEDIAN_S = (10.0, 30 * 86400.0)
PLAUSIBLE_SPAN_S = 3 * 365 * 86400.0
#: **[decision]** The pattern of a model the trace names but tdmcore does not know:
#: ResNet50, a mid-sized measured model (Pollux's imagenet profile).
DEFAULT_MODEL = "ResNet50"


@dataclass(frozen=True)
class TraceRow:
    """One job of a trace, checked.  ``submit`` is seconds or a datetime;
    ``duration_s`` is seconds (both converted from the trace's time unit)."""

    line: int
    submit: float | datetime
    workers: int
    duration_s: float | None
    iterations: int | None
    model: str | None
    priority: int


def _fail(where: str, message: str) -> NoReturn:
    raise ValueError(f"{where}: {message}")


def _headers(source: str, header: list[str], columns: Mapping[str, str]) -> dict[str, str]:
    """Field -> the header that holds it, checking the mapping against the file."""
    unknown = sorted(set(columns) - set(TRACE_FIELDS))
    if unknown:
        _fail("columns", f"unknown field(s) {unknown}; the fields are "
                         f"{', '.join(TRACE_FIELDS)}")
    found: dict[str, str] = {}
    for field in TRACE_FIELDS:
        if field in columns:
            if columns[field] not in header:
                _fail(source, f"no column {columns[field]!r} (mapped to {field}); the "
                              f"header has {', '.join(repr(h) for h in header)}")
            found[field] = columns[field]
            continue
        for name in (field, *_ALIASES.get(field, ())):
            if name in header:
                found[field] = name
                break
    for field in ("submit", "workers"):
        if field not in found:
            _fail(source, f"no {field} column: the header has "
                          f"{', '.join(repr(h) for h in header)}; map one with "
                          f"--column {field}=HEADER")
    mapped = [f for f in ("duration_s", "iterations") if f in columns]
    if len(mapped) == 1:  # the one the mapping names wins over a header of the other
        found.pop("iterations" if mapped == ["duration_s"] else "duration_s", None)
    if ("duration_s" in found) == ("iterations" in found):
        which = "both" if "duration_s" in found else "neither"
        _fail(source, f"give exactly one of a duration_s or an iterations column, got "
                      f"{which} (map one with --column duration_s=HEADER)")
    return found


def _number(where: str, text: str, *, integer: bool = False, low: float = 0.0,
            high: float = math.inf) -> float:
    try:
        value = float(text)
    except ValueError:
        _fail(where, f"expected a number, got {text!r}")
    if not math.isfinite(value) or not low <= value <= high \
            or (integer and value != int(value)):
        kind = "an integer" if integer else "a number"
        bound = f">= {low:g}" if math.isinf(high) else f"in {low:g}..{high:g}"
        _fail(where, f"expected {kind} {bound}, got {_short(text)}")
    return value


def _short(text: str) -> str:
    """``text`` quoted, cut to 40 characters (a cell of 300 digits stays readable)."""
    return repr(text) if len(text) <= 40 else repr(text[:37] + "...")


def _submit(where: str, text: str) -> float | datetime:
    try:
        value = float(text)
    except ValueError:
        try:
            return datetime.fromisoformat(text.strip())
        except ValueError:
            _fail(where, f"expected seconds or an ISO-8601 timestamp, got {text!r}")
    if not math.isfinite(value):
        _fail(where, f"expected seconds or an ISO-8601 timestamp, got {text!r}")
    return value


def read_trace(path: str | Path, columns: Mapping[str, str] | None = None,
               *, time_unit: str = "s", text: Iterable[str] | None = None
               ) -> list[TraceRow]:
    """Read and check every row of a trace CSV file.

    Parameters
    ----------
    path : str or Path
        The file (named in errors; read unless ``text`` is given).
    columns : mapping, optional
        Field -> header, for headers that differ from the field names
        (``{"submit": "timestamp", "workers": "num_gpus"}``).
    time_unit : str
        The unit of numeric submit times and durations, a key of
        :data:`TIME_UNITS` (``"ms"`` for Muri's traces).  Times that look like
        another unit get a warning, or a hint in the error they cause
        (:func:`unit_hint`).
    text : iterable of str, optional
        The file's lines, already open (for compressed or shipped files).

    Returns
    -------
    list of TraceRow
        In file order.

    Raises
    ------
    ValueError
        Naming the file, the row's line and the column:
        ``trace.csv: line 13, column 'num_gpus': expected a number, got 'x'``;
        ``time_unit`` for an unknown unit; ``file`` for a file that cannot be read.
    """
    rows = _read(path, columns, time_unit, text)
    hint = unit_hint(rows, time_unit)
    if hint:
        log.warning("%s: %s", path, hint)
    return rows


def _read(path: str | Path, columns: Mapping[str, str] | None, time_unit: str,
          text: Iterable[str] | None = None) -> list[TraceRow]:
    if time_unit not in TIME_UNITS:
        raise ValueError(f"time_unit: expected one of {', '.join(TIME_UNITS)}, got "
                         f"{time_unit!r}{v.did_you_mean(time_unit, TIME_UNITS)}")
    source = str(path)
    mapping = dict(columns or {})
    if text is None:
        try:
            with Path(path).open(newline="", encoding="utf-8-sig") as fh:
                rows = _rows(source, fh, mapping, time_unit)
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"file: {v.read_error(source, exc)}") from exc
    else:
        rows = _rows(source, text, mapping, time_unit)
    return rows


def _rows(source: str, lines: Iterable[str], columns: Mapping[str, str],
          time_unit: str = "s") -> list[TraceRow]:
    unit = TIME_UNITS[time_unit]
    too_long: list[tuple[str, str]] = []  # (where, cell): checked once the hint is known
    reader = csv.reader(lines)
    header = next(reader, None)
    if not header:
        _fail(source, "empty file: expected a header row and one job per row")
    header = [h.strip() for h in header]
    found = _headers(source, header, columns)
    repeated = sorted({h for h in found.values() if header.count(h) > 1})
    if repeated:  # which of the two columns would be the field? neither: refuse
        _fail(source, f"the header repeats {', '.join(repr(h) for h in repeated)}")
    index = {field: header.index(name) for field, name in found.items()}
    rows: list[TraceRow] = []
    for cells in reader:
        line = reader.line_num
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            _fail(f"{source}: line {line}", f"{len(cells)} cells, the header has "
                                            f"{len(header)}")

        def cell(field: str, line: int = line, cells: list[str] = cells) -> tuple[str, str]:
            """(where, text) of ``field`` in this row: errors name line and column."""
            return f"{source}: line {line}, column {found[field]!r}", cells[index[field]]

        submit = _submit(*cell("submit"))
        if not isinstance(submit, datetime):
            submit = _seconds(submit, unit)
        workers = int(_number(*cell("workers"), integer=True, low=1, high=MAX_WORKERS))
        duration = iterations = None
        if "duration_s" in found:
            where, raw = cell("duration_s")
            duration = _seconds(_number(where, raw), unit)
            if duration > MAX_ARRIVAL_S:
                too_long.append((where, raw))
        else:
            iterations = int(_number(*cell("iterations"), integer=True, low=1,
                                     high=MAX_ITERATIONS))
        model = None
        if "model" in found:
            model = cell("model")[1].strip() or None
        priority = 0
        if "priority" in found:
            where, raw = cell("priority")
            if raw.strip():
                try:
                    priority = priority_value(int(raw) if raw.strip().lstrip("-").isdigit()
                                              else raw.strip().lower(), name="priority")
                except ValueError:
                    _fail(where, f"expected high, low or an integer, got {raw!r}")
        rows.append(TraceRow(line, submit, workers, duration, iterations, model, priority))
    if not rows:
        _fail(source, "no jobs: expected one job per row after the header")
    kinds = {isinstance(r.submit, datetime) for r in rows}
    if len(kinds) > 1:
        _fail(f"{source}: column {found['submit']!r}", "mixes seconds and timestamps")
    zones = {r.submit.tzinfo is not None for r in rows if isinstance(r.submit, datetime)}
    if len(zones) > 1:
        _fail(f"{source}: column {found['submit']!r}",
              "mixes timestamps with and without a time zone (they cannot be ordered)")
    if too_long:
        where, raw = too_long[0]
        hint = unit_hint(rows, time_unit)
        _fail(where, f"expected a duration of at most {MAX_ARRIVAL_S:g} s, got "
                     f"{_short(raw)} {time_unit}" + (f"; {hint}" if hint else ""))
    return rows


def _seconds(value: float, unit: float) -> float:
    """``value`` in a unit of ``unit`` seconds, in seconds: a sub-second unit
    divides by its count per second, so that 109689 ms is exactly 109.689 s."""
    return value / round(1.0 / unit) if unit < 1.0 else value * unit


def _typical(rows: Sequence[TraceRow]) -> tuple[str, float, tuple[float, float]] | None:
    """What says how a trace's times scale: (what it is, its value in s, its
    plausible range), from the durations, else the span of numeric submit times."""
    durations = [r.duration_s for r in rows if r.duration_s is not None]
    if durations:
        return "the median job runs", statistics.median(durations), PLAUSIBLE_MEDIAN_S
    submits = [r.submit for r in rows if not isinstance(r.submit, datetime)]
    if len(submits) > 1:
        return "the submit times span", max(submits) - min(submits), (0.0, PLAUSIBLE_SPAN_S)
    return None


def _human(seconds: float) -> str:
    for unit, size in (("years", 365 * 86400.0), ("days", 86400.0), ("h", 3600.0),
                       ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:,.3g} {unit}"
    return f"{seconds:.3g} s"


def unit_hint(rows: Sequence[TraceRow], time_unit: str) -> str:
    """A hint when the trace's times, read in ``time_unit``, look like another unit.

    Parameters
    ----------
    rows : sequence of TraceRow
        The trace, as :func:`read_trace` read it in ``time_unit``.
    time_unit : str
        The unit it was read in (a key of :data:`TIME_UNITS`).

    Returns
    -------
    str
        Empty when the median job duration (without durations: the span of the
        numeric submit times) is plausible (:data:`PLAUSIBLE_MEDIAN_S`,
        :data:`PLAUSIBLE_SPAN_S`); otherwise what it would be, and the unit of
        :data:`TIME_UNITS` nearest ``time_unit`` that makes it plausible (a
        smaller one for times too long), or only the former when no unit does.
    """
    typical = _typical(rows)
    if typical is None:
        return ""
    what, value, (low, high) = typical
    if low <= value <= high or value <= 0:
        return ""
    said = f"{what} {_human(value)} with the times in {time_unit}"
    factor = TIME_UNITS[time_unit]
    # the nearest unit that makes it plausible: a smaller one for times too long
    order = sorted(TIME_UNITS, key=TIME_UNITS.__getitem__, reverse=value > high)
    fits = [u for u in order[order.index(time_unit) + 1:]
            if low <= value / factor * TIME_UNITS[u] <= high]
    if not fits:
        return f"{said}: check the time unit"
    unit = fits[0]
    return (f"{said}: they look like {unit} (give the time unit {unit}: "
            f"--time-unit {unit}, or time_unit: {unit} in a sweep spec)")


def trace_scenario(rows: list[TraceRow], *, name: str = "trace", title: str | None = None,
                   n_nodes: int = 16, start: int = 0, n_jobs: int | None = None,
                   seed: int = 0, max_duration_s: float | None = None,
                   notes: dict[str, str] | None = None, job_prefix: str = "t",
                   source: str | None = None) -> Scenario:
    """A cluster scenario from trace rows (see the module's docstring for the rules).

    Parameters
    ----------
    rows : list of TraceRow
        From :func:`read_trace`.
    n_nodes : int
        Nodes of :data:`~tdmcore.sim.scenario_parts.PHILLY_NODE` (8 GPUs, 25 Gbps).
    start, n_jobs : int
        The slice of the rows, in submit order, to replay (``n_jobs=None``: all
        from ``start``).
    seed : int
        Draws the models of a trace without a model column.
    max_duration_s : float, optional
        Truncates longer jobs (for quick runs): a row of iterations keeps as many
        as fit in it at its model's period.
    source : str, optional
        The trace's file, named (with the row's line) in the errors of a job the
        rows make (default: ``name``).

    Returns
    -------
    Scenario
    """
    n_nodes = v.whole("n_nodes", n_nodes)
    start, seed = v.whole("start", start, 0), v.whole("seed", seed, 0)
    if n_jobs is not None:
        n_jobs = v.whole("n_jobs", n_jobs)
    if max_duration_s is not None and not float(max_duration_s) > 0:
        raise ValueError(f"max_duration_s: expected a duration > 0, got {max_duration_s!r}")
    ordered = sorted(rows, key=lambda r: r.submit)
    if start >= len(ordered):
        raise ValueError(f"start: the trace has {len(ordered)} jobs; job {start} is beyond "
                         f"its end")
    count = len(ordered) - start if n_jobs is None else n_jobs
    if count < 1 or start + count > len(ordered):
        raise ValueError(f"n_jobs: the trace has {len(ordered)} jobs; {start} + "
                         f"{count} is beyond its end")
    chosen = ordered[start:start + count]
    nodes = [Node(f"philly-{k:04d}", **PHILLY_NODE) for k in range(n_nodes)]
    tau = lingjun_latency(n_nodes)
    sim = SimCluster(Cluster(nodes, latency=tau), np.zeros(n_nodes),
                     np.where(np.eye(n_nodes, dtype=bool), 0.0, tau * BASE_LATENCY_MS))
    rng = np.random.default_rng([seed, 11])
    models = list(MODELS)
    max_gpus = int(PHILLY_NODE["gpu"]) * n_nodes
    t0 = chosen[0].submit
    unknown: list[str] = []
    jobs: list[SimJob] = []
    for k, row in enumerate(chosen):
        workers = max(1, min(row.workers, max_gpus))
        if row.model is None:
            model = models[int(rng.integers(len(models)))]
        else:
            named = model_name(row.model)
            model = DEFAULT_MODEL if named is None else named
            if named is None and row.model not in unknown:
                unknown.append(row.model)
        arrival: Any = row.submit - t0  # type: ignore[operator]
        arrival_s = arrival.total_seconds() if isinstance(row.submit, datetime) \
            else float(arrival)
        job_name = f"{job_prefix}{start + k:05d}-{model.lower()}"
        try:
            if row.duration_s is not None:
                duration = max(1.0, row.duration_s)
                if max_duration_s is not None:
                    duration = min(duration, float(max_duration_s))
                job = trace_job(job_name, model, workers, PHILLY_NODE["link_gbps"],
                                duration, arrival_s=arrival_s, priority=row.priority)
            else:
                job = trace_job(job_name, model, workers, PHILLY_NODE["link_gbps"], 0.0,
                                arrival_s=arrival_s, priority=row.priority,
                                iterations=row.iterations)
                if max_duration_s is not None \
                        and job.iterations * job.period_ms > float(max_duration_s) * 1e3:
                    job = replace(job, iterations=max(1, round(
                        float(max_duration_s) * 1e3 / job.period_ms)))
        except ValueError as exc:  # e.g. a submit time too far after the first
            raise ValueError(f"{source or name}: line {row.line}: {exc}") from None
        if row.model is not None and model_name(row.model) is None:
            # the report keeps the trace's own name beside the pattern it borrowed
            job = replace(job, model=f"{row.model} (as {DEFAULT_MODEL})")
        jobs.append(job)
    if unknown:
        shown = ", ".join(repr(m) for m in unknown[:8]) + (
            f" and {len(unknown) - 8} more" if len(unknown) > 8 else "")
        log.warning("%s: %d model name(s) tdmcore does not know (%s): those jobs train "
                    "%s's traffic pattern; tdmcore knows %s (any case or separators; "
                    "`tdmcore list models`)", name, len(unknown), shown, DEFAULT_MODEL,
                    ", ".join(MODELS))
    nodes_text = f"{n_nodes} node{'s' if n_nodes > 1 else ''}"
    return Scenario(name, title or f"{name}: jobs {start}-{start + count - 1} on "
                    f"{nodes_text} x 8 GPUs, seed {seed}", sim, tuple(jobs),
                    dict(notes or {}))


def load_trace(path: str | Path, columns: Mapping[str, str] | None = None, *,
               time_unit: str = "s", n_nodes: int = 16, start: int = 0,
               n_jobs: int | None = None, seed: int = 0,
               max_duration_s: float | None = None) -> Scenario:
    """A trace file as a scenario: :func:`read_trace`, then :func:`trace_scenario`.

    What ``tdmcore simulate trace FILE`` and a sweep's ``scenario: {trace: FILE}``
    run.  The scenario is named after the file's stem.

    Parameters
    ----------
    path, columns, time_unit
        As :func:`read_trace` takes them.
    n_nodes, start, n_jobs, seed, max_duration_s
        As :func:`trace_scenario` takes them.

    Returns
    -------
    Scenario

    Raises
    ------
    ValueError
        As :func:`read_trace` and :func:`trace_scenario`; an error of a row's job
        (an arrival beyond :data:`~tdmcore.sim.cluster.MAX_ARRIVAL_S`, ...) carries
        :func:`unit_hint`'s hint when the times look like another unit.
    """
    rows = _read(path, columns, time_unit)
    source = str(path)
    hint = unit_hint(rows, time_unit)
    try:
        scenario = trace_scenario(rows, name=Path(path).stem, n_nodes=n_nodes, start=start,
                                  n_jobs=n_jobs, seed=seed, max_duration_s=max_duration_s,
                                  notes={"trace": source, "time_unit": time_unit},
                                  source=source)
    except ValueError as exc:
        if hint and str(exc).startswith(f"{source}: line "):
            raise ValueError(f"{exc}; {hint}") from None
        raise
    if hint:
        log.warning("%s: %s", source, hint)
    return scenario
