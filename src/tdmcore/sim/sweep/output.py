"""A sweep's results: one tidy table and a summary over seeds.

:func:`result_rows` gives one row per task (its group, policy, seed, every
parameter of the spec, its status and every metric); :func:`summary_rows` the mean
over seeds of the spec's metrics.  The plots are the command line's
(:func:`tdmcore.app.sweep_plots.plot_sweep`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .execute import Outcome
from .spec import SweepSpec, Task, compared_name

__all__ = ["result_rows", "summary_rows"]

#: Identifying columns of a row, before the parameters.
_KEYS = ("group", "policy", "seed")


def _number(value: Any) -> float | None:
    """A metric as a float, or None for a label (a node name)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return None


def result_rows(spec: SweepSpec, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """One row per task, in the spec's task order.

    Columns: ``group`` (left out when the run has none), ``policy``, ``seed``,
    every parameter of the spec (None where the policy does not take it),
    ``status`` (``ok`` or ``failed``), ``error`` (the last attempt's, empty when
    ok), ``attempts``, then every metric (NaN in a failed row), then for each
    policy of ``spec.compare`` each numeric metric's change against that policy's
    run in % (``<metric>_vs_<policy>_pct``, negative = lower): its run of the same
    group and seed with the same values of the parameters both policies take
    (:func:`_reference`).
    """
    metrics: list[str] = []
    for outcome in outcomes:
        if outcome.metrics is not None:
            metrics.extend(k for k in outcome.metrics if k not in metrics)
    grouped = any(o.task.group for o in outcomes)
    rows = []
    for outcome in outcomes:
        task = outcome.task
        params = dict(task.params)
        row: dict[str, Any] = {"group": task.group} if grouped else {}
        row.update({"policy": task.policy, "seed": task.seed})
        row.update({name: params.get(name) for name in spec.parameters})
        row.update({"status": "ok" if outcome.ok else "failed", "error": outcome.error or "",
                    "attempts": outcome.attempts})
        got = outcome.metrics or {}
        row.update({name: got.get(name, math.nan) for name in metrics})
        rows.append(row)
    for ref in spec.compare:
        _compare(rows, outcomes, ref, metrics)
    return rows


def _change(value: Any, ref: Any) -> float:
    a, b = _number(value), _number(ref)
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)) or b == 0:
        return math.nan
    return round(100.0 * (a - b) / b, 3) + 0.0  # + 0.0: never -0.0


def _reference(task: Task, refs: Sequence[tuple[Task, dict[str, Any]]]
               ) -> dict[str, Any] | None:
    """The row of the reference run ``task`` is compared with, or None.

    The reference policy's run of the same group and seed whose values agree with
    ``task``'s on every parameter both take (a parameter only one of them takes,
    such as a fixed ``metronome.gt_ms`` against ``default``, does not count).  None
    when no such run finished, or when several did: the reference sweeps a
    parameter that ``task``'s policy does not take, so no one run is its reference.
    """
    mine = dict(task.params)
    found = [row for other, row in refs
             if other.group == task.group and other.seed == task.seed
             and all(mine[k] == value for k, value in other.params if k in mine)]
    return found[0] if len(found) == 1 else None


def _compare(rows: list[dict[str, Any]], outcomes: Sequence[Outcome], ref: str,
             metrics: list[str]) -> None:
    """Add ``<metric>_vs_<ref>_pct`` to every row (NaN without one reference run,
    :func:`_reference`)."""
    refs = [(outcome.task, row) for row, outcome in zip(rows, outcomes, strict=True)
            if outcome.task.policy == ref and outcome.ok]
    numeric = [m for m in metrics if all(_number(r.get(m)) is not None for r in rows)]
    for row, outcome in zip(rows, outcomes, strict=True):
        match = _reference(outcome.task, refs)
        for metric in numeric:
            row[compared_name(metric, ref)] = (
                _change(row[metric], match[metric]) if match is not None else math.nan)


def _line_key(spec: SweepSpec, row: dict[str, Any], skip: str | None = None
              ) -> tuple[Any, ...]:
    return (row.get("group", ""), row["policy"],
            *(repr(row[p]) for p in spec.parameters if p != skip))


def summary_rows(spec: SweepSpec, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spec's metrics averaged over seeds: one row per (group, policy,
    parameters), with ``seeds`` (how many finished) and each metric's mean (for a
    label, the value when every seed agrees, else ``*``)."""
    order: list[tuple[Any, ...]] = []
    members: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        key = _line_key(spec, row)
        if key not in members:
            order.append(key)
            members[key] = []
        if row["status"] == "ok":
            members[key].append(row)
    out = []
    for key in order:
        group = members[key]
        first = next(r for r in rows if _line_key(spec, r) == key)
        row = {k: first[k] for k in ("group", "policy") if k in first}
        row.update({p: first[p] for p in spec.parameters})
        row["seeds"] = len(group)
        for metric in spec.metrics:
            values = [r.get(metric) for r in group]
            numbers = [_number(v) for v in values]
            if values and all(n is not None for n in numbers):
                finite = [n for n in numbers if n is not None and math.isfinite(n)]
                row[metric] = float(np.mean(finite)) if finite else math.nan
            else:
                labels = {str(v) for v in values}
                row[metric] = labels.pop() if len(labels) == 1 else ("*" if labels else "")
        out.append(row)
    return out
