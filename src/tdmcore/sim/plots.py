"""Figures of cluster simulations: iteration times, link utilisation, shared links.

:func:`plot_iteration_boxes` is the paper's Fig. 7 (iteration time per job and
policy, one panel per snapshot); :func:`plot_link_utilization` the utilisation of
each host link over time; :func:`plot_shared_links` the traffic circles of the
links the controller planned (paper Figs. 1c and 6), drawn with
:func:`tdmcore.plots.draw_traffic_circle`.

Every function writes one PNG and returns its path.  Figures are built on
:class:`matplotlib.figure.Figure` with the Agg canvas, outside ``pyplot``: no
display is needed, the caller's pyplot backend is left alone and no figure stays
registered after the call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..link import LinkPlan
from ..plots import draw_traffic_circle
from .cluster import JobResult, RunResult

__all__ = ["plot_iteration_boxes", "plot_link_utilization", "plot_shared_links"]

_DPI = 110


# ---------------------------------------------------------------------- helpers
def _check_runs(name: str, runs: Any) -> dict[str, RunResult]:
    """``runs`` as a dict policy -> RunResult, or a ValueError naming ``name``."""
    if not isinstance(runs, Mapping):
        raise ValueError(f"{name}: expected a mapping of policy -> RunResult, "
                         f"got {type(runs).__name__}")
    if not runs:
        raise ValueError(f"{name}: expected at least one policy -> RunResult, got none")
    out: dict[str, RunResult] = {}
    for key, run in runs.items():
        if not isinstance(run, RunResult):
            raise ValueError(f"{name}[{key!r}]: expected a RunResult, "
                             f"got {type(run).__name__}")
        out[str(key)] = run
    return out


def _new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=_DPI)
    return out


def _grid(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols)
    return math.ceil(n / cols), cols


def _job_labels(jobs: Mapping[str, JobResult]) -> dict[str, str]:
    """``H``/``L`` (priority > 0 is high) and the model; repeats get ``#k``."""
    base = {name: f"{'H' if job.priority > 0 else 'L'} {job.model}"
            for name, job in jobs.items()}
    counts: dict[str, int] = {}
    for label in base.values():
        counts[label] = counts.get(label, 0) + 1
    seen: dict[str, int] = {}
    out = {}
    for name, label in base.items():
        if counts[label] > 1:
            seen[label] = seen.get(label, 0) + 1
            label = f"{label} #{seen[label]}"
        out[name] = label
    return out


# ----------------------------------------------------------------- iteration times
def plot_iteration_boxes(runs: Mapping[str, Mapping[str, RunResult]],
                         path: str | Path) -> Path:
    """Write a PNG of iteration-time boxes per job and policy (paper Fig. 7).

    Parameters
    ----------
    runs : mapping
        Snapshot (e.g. ``"S1"``) -> policy -> :class:`RunResult`.  One panel per
        snapshot; in it one group per job (in the runs' job order), labelled
        ``H``/``L`` (priority > 0 is high) and the model, with one box per policy
        side by side.
    path : str or Path
        The PNG to write (parent directories are created).

    Returns
    -------
    Path
        ``path``.

    Notes
    -----
    Boxes span p25..p75 with the median; whiskers reach p5 and p95; outliers are
    not drawn.  A policy keeps its colour in every panel.  Jobs without iterations
    (never started) are left out.

    Raises
    ------
    ValueError
        If ``runs`` is empty, not a mapping, or holds something other than
        mappings of :class:`RunResult`.
    """
    if not isinstance(runs, Mapping):
        raise ValueError("runs: expected a mapping of snapshot -> {policy: RunResult}, "
                         f"got {type(runs).__name__}")
    if not runs:
        raise ValueError("runs: expected at least one snapshot, got none")
    snapshots = {str(sid): _check_runs(f"runs[{sid!r}]", by_policy)
                 for sid, by_policy in runs.items()}
    policies: list[str] = []
    for by_policy in snapshots.values():
        policies.extend(p for p in by_policy if p not in policies)
    colour = {p: f"C{i % 10}" for i, p in enumerate(policies)}

    rows, cols = _grid(len(snapshots))
    fig = _new_figure(max(4.5, 4.2 * cols), 3.6 * rows + 0.6)
    axes = fig.subplots(rows, cols, squeeze=False)
    width = 0.8 / len(policies)
    for idx, (sid, by_policy) in enumerate(snapshots.items()):
        ax = axes[idx // cols][idx % cols]
        jobs: dict[str, JobResult] = {}
        for run in by_policy.values():
            for name, job in run.jobs.items():
                jobs.setdefault(name, job)
        labels = _job_labels(jobs)
        ticks: list[float] = []
        tick_labels: list[str] = []
        group = 0
        for name in jobs:
            present = [(k, p) for k, p in enumerate(policies) if p in by_policy
                       and name in by_policy[p].jobs
                       and by_policy[p].jobs[name].durations_ms.size]
            if not present:
                continue
            for k, p in present:
                pos = group + (k - (len(policies) - 1) / 2) * width
                ax.boxplot([by_policy[p].jobs[name].durations_ms], positions=[pos],
                           widths=width * 0.85, whis=(5, 95), showfliers=False,
                           patch_artist=True, manage_ticks=False,
                           boxprops={"facecolor": colour[p], "alpha": 0.75},
                           medianprops={"color": "black"})
            ticks.append(group)
            tick_labels.append(labels[name])
            group += 1
        if ticks:
            ax.set_xticks(ticks, tick_labels, fontsize=8)
            ax.set_xlim(-0.6, group - 0.4)
        else:
            ax.set_xticks([])
            ax.text(0.5, 0.5, "no iterations", transform=ax.transAxes, ha="center",
                    va="center", color="grey")
        ax.set_title(sid, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        if idx % cols == 0:
            ax.set_ylabel("iteration time (ms)")
    for idx in range(len(snapshots), rows * cols):
        axes[idx // cols][idx % cols].set_visible(False)
    fig.legend(handles=[Patch(facecolor=colour[p], alpha=0.75, label=p) for p in policies],
               loc="outside upper center", ncols=len(policies), fontsize=9,
               title="policy (box p25-p75, whiskers p5-p95)", title_fontsize=8)
    return _save(fig, path)


# ------------------------------------------------------------------ link utilisation
def plot_link_utilization(runs: Mapping[str, RunResult], path: str | Path,
                          title: str = "") -> Path:
    """Write a PNG of each host link's utilisation over time, one panel per policy.

    Parameters
    ----------
    runs : mapping
        Policy -> :class:`RunResult` (normally of one scenario).
    path : str or Path
        The PNG to write (parent directories are created).
    title : str, optional
        The figure's title (default: "link utilisation").

    Returns
    -------
    Path
        ``path``.

    Notes
    -----
    Each sample ``util_gbps[i, k]`` is link k's mean rate since the previous
    sample; it is drawn as a step over that interval, divided by the link's
    capacity (0..1), against simulated time in seconds.  Only links that carried
    traffic in that run are drawn; a link keeps its colour in every panel.

    Raises
    ------
    ValueError
        If ``runs`` is empty, not a mapping, or holds something other than
        :class:`RunResult`.
    """
    checked = _check_runs("runs", runs)
    fig = _new_figure(10.0, 1.0 + 2.3 * len(checked))
    axes = fig.subplots(len(checked), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    handles: dict[str, Any] = {}
    for ax, (policy, run) in zip(axes, checked.items(), strict=True):
        used = np.flatnonzero(np.asarray(run.link_sent_gbit) > 0)
        samples = np.asarray(run.util_gbps, dtype=np.float64)
        if samples.ndim == 2 and samples.shape[0] and used.size:
            t_s = np.concatenate(([0.0], np.asarray(run.util_t_ms, dtype=np.float64))) / 1e3
            for k in used:
                share = samples[:, k] / float(run.link_capacity_gbps[k])
                name = run.link_names[k] if k < len(run.link_names) else f"link {k}"
                (line,) = ax.step(t_s, np.concatenate(([share[0]], share)), where="pre",
                                  color=f"C{k % 10}", linewidth=1.4, label=name)
                handles.setdefault(name, line)
        else:
            ax.text(0.5, 0.5, "no link traffic", transform=ax.transAxes, ha="center",
                    va="center", color="grey")
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        ax.set_ylim(0.0, 1.08)
        ax.set_ylabel("utilisation")
        ax.set_title(f"{policy}  (gamma {run.gamma:.3f})", fontsize=10, loc="left")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("simulated time (s)")
    if handles:
        fig.legend(handles=list(handles.values()), loc="outside right upper",
                   title="link", fontsize=9)
    fig.suptitle(title or "link utilisation")
    return _save(fig, path)


# ------------------------------------------------------------------ shared links
def plot_shared_links(run: RunResult, path: str | Path, *,
                      plans: Mapping[int, LinkPlan] | Mapping[str, LinkPlan] | None = None
                      ) -> Path | None:
    """Write a PNG of the traffic circle of every link the controller planned.

    Parameters
    ----------
    run : RunResult
        The run whose shared links to draw.
    path : str or Path
        The PNG to write (parent directories are created).
    plans : mapping, optional
        Link -> :class:`LinkPlan` to draw instead of the run's own, keyed by node
        index (as :attr:`Controller.links`) or by link name.  Takes precedence.
        Without it: the controller's current links if it still has any, otherwise
        the latest plan per link recorded during the run (``run.link_plans``; a
        finished run's controller has none left, its jobs having left).

    Returns
    -------
    Path or None
        ``path``, or None (nothing written) when there is no plan to draw, e.g.
        for a policy without a controller.

    Notes
    -----
    One circle per link (paper Figs. 1c and 6): a ring per job with its comm arcs
    at the chosen rotation, and a red ring where the summed demand exceeds the
    link's capacity.

    Raises
    ------
    ValueError
        If ``run`` is not a :class:`RunResult` or ``plans`` is not a mapping of
        :class:`LinkPlan`.
    """
    if not isinstance(run, RunResult):
        raise ValueError(f"run: expected a RunResult, got {type(run).__name__}")
    source: Mapping[Any, LinkPlan]
    if plans is not None:
        if not isinstance(plans, Mapping):
            raise ValueError(f"plans: expected a mapping of link -> LinkPlan, "
                             f"got {type(plans).__name__}")
        source = plans
    elif run.controller is not None and run.controller.links:
        source = run.controller.links
    else:
        source = run.link_plans
    named: dict[str, LinkPlan] = {}
    for key, plan in source.items():
        if not isinstance(plan, LinkPlan):
            raise ValueError(f"plans[{key!r}]: expected a LinkPlan, got {type(plan).__name__}")
        if isinstance(key, int | np.integer) and 0 <= int(key) < len(run.link_names):
            named[run.link_names[int(key)]] = plan
        else:
            named[str(key)] = plan
    if not named:
        return None

    rows, cols = _grid(len(named))
    legend_in = 0.25 * (max(len(p.jobs) for p in named.values()) + 1) + 0.2
    fig = _new_figure(5.2 * cols, (5.4 + legend_in) * rows + 0.5)
    grid = fig.add_gridspec(2 * rows, cols, height_ratios=[5.4, legend_in] * rows)
    for idx, (name, plan) in enumerate(named.items()):
        row, col = divmod(idx, cols)
        ax = fig.add_subplot(grid[2 * row, col], projection="polar")
        draw_traffic_circle(
            ax, plan, plan.result.rotations,
            f"{name}: {plan.capacity_gbps:g} Gbps, T = {plan.base.period_ms:.1f} ms\n"
            f"score {plan.result.score:.1f}, xi {plan.utilization:.3f} "
            f"(unshifted {plan.unshifted_score:.1f}, {plan.unshifted_utilization:.3f})")
        box = fig.add_subplot(grid[2 * row + 1, col])  # the circle's legend, below it
        box.axis("off")
        box.legend(*ax.get_legend_handles_labels(), loc="upper center", fontsize=8,
                   frameon=False)
    fig.suptitle(f"{run.policy}: traffic circles of the shared links")
    return _save(fig, path)
