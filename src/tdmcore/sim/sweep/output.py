"""A sweep's results: one tidy table, a summary over seeds, and the plots.

:func:`result_rows` gives one row per task (its group, policy, seed, every
parameter of the spec, its status and every metric); :func:`summary_rows` the mean
over seeds of the spec's metrics; :func:`plot_sweep` one figure per (metric, swept
parameter): the metric against the parameter, a panel per group, one line per
policy (and per value of the other swept parameters), the mean over seeds with
their spread (min to max) shaded.  A policy that does not take the parameter is
drawn as a dashed level line: its runs do not depend on it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..plots import _fixed_grid, _grid, _save, _target
from .execute import Outcome
from .spec import SweepSpec, compared_name

__all__ = ["plot_sweep", "result_rows", "summary_rows"]

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
    group and seed with the same values of the parameters it takes.
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


def _compare(rows: list[dict[str, Any]], outcomes: Sequence[Outcome], ref: str,
             metrics: list[str]) -> None:
    """Add ``<metric>_vs_<ref>_pct`` to every row (NaN where no reference ran)."""
    refs: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row, outcome in zip(rows, outcomes, strict=True):
        if outcome.task.policy == ref and outcome.ok:
            refs[(outcome.task.group, outcome.task.seed, outcome.task.params)] = row
    numeric = [m for m in metrics if all(_number(r.get(m)) is not None for r in rows)]
    for row, outcome in zip(rows, outcomes, strict=True):
        task = outcome.task
        match = None
        for (group, seed, params), ref_row in refs.items():
            if group == task.group and seed == task.seed and \
                    all(dict(task.params).get(k) == v for k, v in params):
                match = ref_row
                break
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


def _x_positions(values: list[Any]) -> tuple[dict[str, float], list[str] | None]:
    """Numeric parameter values map to themselves; others to 0, 1, ... (ticks)."""
    if all(_number(v) is not None and not isinstance(v, bool) for v in values):
        return {repr(v): float(v) for v in values}, None
    labels = [str(v) for v in values]
    return {repr(v): float(i) for i, v in enumerate(values)}, labels


def plot_sweep(spec: SweepSpec, rows: Sequence[dict[str, Any]],
               folder: str | Path | Callable[[str], Path], fmt: str = "png") -> list[Path]:
    """Draw every (metric, swept parameter) figure.

    ``folder`` is where the files go, or a function from a file name to its path
    (a report folder's staging, :class:`tdmcore.report_dir.ReportDir.path`).
    Returns the files written, ``sweep-<name>-<metric>-vs-<parameter>.<fmt>``; none
    when no parameter takes more than one value.  Label metrics (a node name) are
    not drawn.
    """
    where = folder if callable(folder) else (lambda name: Path(folder) / name)
    out = []
    ok = [r for r in rows if r["status"] == "ok"]
    for metric in spec.metrics:
        if not ok or any(_number(r.get(metric)) is None for r in ok):
            continue
        for param in spec.swept:
            path = _target(where(f"sweep-{spec.name}-{metric}-vs-"
                                 f"{param.replace('.', '-')}.{fmt}"))
            out.append(_plot_one(spec, ok, metric, param, path))
    return out


def _plot_one(spec: SweepSpec, rows: list[dict[str, Any]], metric: str, param: str,
              path: Path) -> Path:
    groups = list(dict.fromkeys(r.get("group", "") for r in rows))
    xs, tick_labels = _x_positions(list(spec.grid[param]))
    lines: dict[tuple[Any, ...], dict[str, list[float]]] = {}
    labels: dict[tuple[Any, ...], str] = {}
    others = [p for p in spec.swept if p != param]
    for row in rows:
        key = _line_key(spec, row, skip=param)
        lines.setdefault(key, {}).setdefault(repr(row[param]), []).append(
            float(row[metric]))
        extra = ", ".join(f"{p.partition('.')[2]}={row[p]}" for p in others
                          if row[p] is not None)
        labels[key] = row["policy"] + (f", {extra}" if extra else "")
    legend_w = 0.3 + 0.075 * max(len(t) for t in labels.values())
    n_rows, n_cols = _grid(len(groups))
    fig, axes = _fixed_grid(n_rows, n_cols, 3.2, 2.4, left=0.75, right=legend_w + 0.2,
                            top=0.85, bottom=0.6, wgap=0.6, hgap=0.75)
    colours: dict[str, str] = {}
    x_lo, x_hi = min(xs.values()), max(xs.values())
    for idx, group in enumerate(groups):
        ax = axes[idx // n_cols][idx % n_cols]
        for key, by_x in lines.items():
            if key[0] != group:
                continue
            label = labels[key]
            colour = colours.setdefault(label, f"C{len(colours) % 10}")
            if list(by_x) == [repr(None)]:  # the policy does not take the parameter
                values = np.asarray(by_x[repr(None)])
                if np.isfinite(values).any():
                    ax.hlines(np.nanmean(values), x_lo, x_hi, colors=colour,
                              linestyles="--", label=label)
                continue
            points = sorted((xs[k], np.asarray(v)) for k, v in by_x.items()
                            if k in xs and np.isfinite(v).any())
            if not points:  # the policy does not report the metric (NaN)
                continue
            x = np.array([p[0] for p in points])
            mean = np.array([np.nanmean(p[1]) for p in points])
            ax.plot(x, mean, marker="o", ms=3.5, color=colour, label=label)
            if max(len(p[1]) for p in points) > 1:
                lo = np.array([np.nanmin(p[1]) for p in points])
                hi = np.array([np.nanmax(p[1]) for p in points])
                ax.fill_between(x, lo, hi, color=colour, alpha=0.18, linewidth=0)
        if len(groups) > 1:
            ax.set_title(str(group), fontsize=9)
        ax.set_xlabel(param, fontsize=8)
        ax.set_ylabel(metric, fontsize=8)
        ax.tick_params(labelsize=7)
        if tick_labels is not None:
            ax.set_xticks(sorted(xs.values()), tick_labels)
        ax.grid(alpha=0.3)
    for idx in range(len(groups), n_rows * n_cols):
        axes[idx // n_cols][idx % n_cols].set_visible(False)
    handles, names = [], []
    for ax_row in axes:
        for ax in ax_row:
            for h, n in zip(*ax.get_legend_handles_labels(), strict=True):
                if n not in names:
                    handles.append(h)
                    names.append(n)
    width = fig.get_figwidth()
    fig.legend(handles, names, loc="upper left", fontsize=7, frameon=False,
               bbox_to_anchor=(1 - (legend_w + 0.1) / width, 1 - 0.85 / fig.get_figheight()))
    seeds = len(spec.seeds)
    fig.suptitle(f"{spec.title}\n{metric} vs {param}\n"
                 + (f"mean over {seeds} seeds, min-max shaded" if seeds > 1 else
                    f"seed {spec.seeds[0]}"), fontsize=8.5)
    return _save(fig, path)
