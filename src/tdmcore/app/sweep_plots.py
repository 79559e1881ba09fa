"""A sweep's plots (docs/sweeps.md).

:func:`plot_sweep` draws one figure per (metric, swept parameter): the metric
against the parameter, a panel per group, one line per policy (and per value of the
other swept parameters), the mean over seeds with their spread (min to max) shaded.
A policy that does not take the parameter is drawn as a dashed level line: its
runs do not depend on it.  The rows are :func:`tdmcore.sim.sweep.result_rows`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..sim.sweep.output import _line_key, _number
from ..sim.sweep.spec import SweepSpec
from .plots import _fixed_grid, _grid, _save, _target, policy_colours

#: The dashes of one policy's lines for the other swept parameters' values.
_STYLES = ("-", "--", "-.", ":")

__all__ = ["plot_sweep"]


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
    (a report folder's staging, :class:`tdmcore.app.report_dir.ReportDir.path`).
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
    policy_of: dict[tuple[Any, ...], str] = {}
    others = [p for p in spec.swept if p != param]
    for row in rows:
        key = _line_key(spec, row, skip=param)
        lines.setdefault(key, {}).setdefault(repr(row[param]), []).append(
            float(row[metric]))
        extra = ", ".join(f"{p.partition('.')[2]}={row[p]}" for p in others
                          if row[p] is not None)
        labels[key] = row["policy"] + (f", {extra}" if extra else "")
        policy_of[key] = row["policy"]
    legend_w = 0.3 + 0.075 * max(len(t) for t in labels.values())
    n_rows, n_cols = _grid(len(groups))
    fig, axes = _fixed_grid(n_rows, n_cols, 3.2, 2.4, left=0.75, right=legend_w + 0.2,
                            top=0.85, bottom=0.6, wgap=0.6, hgap=0.75)
    # a policy's colour is its own in every figure; its lines for other values of
    # the other swept parameters differ by their dashes
    palette = policy_colours(policy_of.values())
    dashes: dict[str, list[str]] = {}
    for key in lines:
        dashes.setdefault(policy_of[key], [])
        if labels[key] not in dashes[policy_of[key]]:
            dashes[policy_of[key]].append(labels[key])
    x_lo, x_hi = min(xs.values()), max(xs.values())
    for idx, group in enumerate(groups):
        ax = axes[idx // n_cols][idx % n_cols]
        for key, by_x in lines.items():
            if key[0] != group:
                continue
            label = labels[key]
            colour = palette[policy_of[key]]
            style = _STYLES[dashes[policy_of[key]].index(label) % len(_STYLES)]
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
            ax.plot(x, mean, marker="o", ms=3.5, color=colour, linestyle=style, label=label)
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
