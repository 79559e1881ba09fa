"""Figures of cluster simulations: JCT, iteration times, link utilisation, shared links.

:func:`plot_jct` compares the policies' job completion times (the table's main
metric); :func:`plot_iteration_boxes` is the paper's Fig. 7 (iteration time per job
and policy, each job on its own y-scale); :func:`plot_link_utilization` the
utilisation of each host link over time; :func:`plot_shared_links` the traffic
circles of the links the controller shared (paper Figs. 1c and 6), drawn with
:func:`tdmcore.app.circle_plot.draw_traffic_circle`.

Every ``plot_*`` function writes one file and returns its path; the format follows
the file's suffix (:data:`FORMATS`).  The matching ``figure_*`` function builds the
:class:`matplotlib.figure.Figure` without writing it.  Figures use the Agg canvas,
outside ``pyplot``: no display is needed, the caller's pyplot backend is left alone
and no figure stays registered after the call.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from numpy.typing import NDArray

from ..metronome.link import LinkPlan
from ..sim.cluster import JobResult, RunResult
from .circle_plot import draw_traffic_circle

__all__ = ["FORMATS", "MIN_BOX_POINTS", "figure_iteration_boxes", "figure_jct",
           "figure_link_utilization", "figure_shared_links", "plot_iteration_boxes",
           "plot_jct", "plot_link_utilization", "plot_shared_links", "policy_colours",
           "time_axis"]

_DPI = 110
#: The file formats the figures are written in (by the path's suffix).
FORMATS = ("png", "svg", "pdf")
#: A group with more jobs than this gets one summary panel instead of one per job.
MAX_JOB_PANELS = 8
#: At most this many links are drawn per panel of the utilisation figure.
MAX_LINKS = 8
#: Fewer values than this are drawn as points, not as a box: with two or three
#: values, p5-p95 whiskers and a p25-p75 box are inventions of the interpolation.
MIN_BOX_POINTS = 5
#: Time axes: (unit, seconds per unit, the longest axis, s, drawn in the unit).
_TIME_UNITS = (("s", 1.0, 7200.0), ("h", 3600.0, 4 * 86400.0), ("days", 86400.0, math.inf))


# ---------------------------------------------------------------------- helpers

def _plain_text(make: Callable[..., Any]) -> Callable[..., Any]:
    """Build the figure with mathtext off: scenario, node, job and policy names are
    the user's, and a ``$`` or ``\\`` in them must be drawn, not parsed."""
    @functools.wraps(make)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with matplotlib.rc_context({"text.parse_math": False}):
            return make(*args, **kwargs)
    return wrapped


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


def _target(path: str | Path) -> Path:
    """``path``, checked before any drawing: its suffix names one of :data:`FORMATS`."""
    out = Path(path)
    if out.suffix.lower().lstrip(".") not in FORMATS:
        raise ValueError(f"path: expected a file ending in {', '.join('.' + f for f in FORMATS)}"
                         f", got {str(path)!r}")
    return out


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # PNG at zlib level 1: a few percent larger files, encoded several times faster
    if path.suffix.lower() == ".png":
        fig.savefig(path, dpi=_DPI, pil_kwargs={"compress_level": 1})
    else:
        fig.savefig(path, dpi=_DPI)
    return path


def _groups(runs: Any) -> dict[str, dict[str, RunResult]]:
    """``runs`` as group -> policy -> RunResult, or a ValueError naming the entry."""
    if not isinstance(runs, Mapping):
        raise ValueError("runs: expected a mapping of snapshot -> {policy: RunResult}, "
                         f"got {type(runs).__name__}")
    if not runs:
        raise ValueError("runs: expected at least one snapshot, got none")
    return {str(sid): _check_runs(f"runs[{sid!r}]", by_policy)
            for sid, by_policy in runs.items()}


def policy_colours(names: Iterable[str]) -> dict[str, str]:
    """Each policy's colour, the same in every figure whatever the order of
    ``--policies``: the cluster simulator's policies
    (:data:`tdmcore.sim.registry.CLUSTER_POLICIES`) have their own, in the
    registry's order; any other name (a policy of your own) takes one of the
    rest, in the order of the sorted names."""
    from ..sim.registry import CLUSTER_POLICIES

    names = list(names)
    own = {p: f"C{i}" for i, p in enumerate(CLUSTER_POLICIES)}
    spare = [f"C{i}" for i in range(len(CLUSTER_POLICIES), 10)] or ["C9"]
    others = sorted({n for n in names if n not in own})
    return {n: own[n] if n in own else spare[others.index(n) % len(spare)]
            for n in dict.fromkeys(names)}


def _policy_colours(groups: Mapping[str, Mapping[str, RunResult]]) -> dict[str, str]:
    return policy_colours(p for by_policy in groups.values() for p in by_policy)


def time_axis(t_end_s: float) -> tuple[str, float]:
    """The unit of a time axis that ends at ``t_end_s`` seconds, and the seconds
    per unit: seconds up to two hours, hours up to four days, then days."""
    for unit, size, most in _TIME_UNITS:
        if t_end_s <= most:
            return unit, size
    return _TIME_UNITS[-1][0], _TIME_UNITS[-1][1]


def _fixed_grid(rows: int, cols: int, panel_w: float, panel_h: float, *, left: float,
                right: float, top: float, bottom: float, wgap: float, hgap: float,
                **subplot_kw: Any) -> tuple[Figure, Any]:
    """A figure of ``rows x cols`` panels with margins and gaps fixed in inches.

    **[decision]** A fixed layout, not matplotlib's layout engine: the engine draws
    a figure several times to measure it, which made plotting most of a warm
    simulation; the margins here are sized for the texts the figures hold, and a
    test renders every figure of every shipped scenario to check that nothing
    leaves the canvas.
    """
    width = left + cols * panel_w + (cols - 1) * wgap + right
    height = top + rows * panel_h + (rows - 1) * hgap + bottom
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height,
                        bottom=bottom / height, wspace=wgap / panel_w, hspace=hgap / panel_h)
    return fig, fig.subplots(rows, cols, squeeze=False, subplot_kw=subplot_kw or None)


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


# ----------------------------------------------------------------- job completion
@_plain_text
def figure_jct(runs: Mapping[str, Mapping[str, RunResult]], title: str = "") -> Figure:
    """The policies' job completion times, one panel per group (see :func:`plot_jct`)."""
    groups = _groups(runs)
    colour = _policy_colours(groups)
    finished = [j.jct_ms for g in groups.values() for r in g.values() for j in r.jobs.values()
                if j.jct_ms is not None]
    hours = bool(finished) and max(finished) > 7.2e6
    unit, scale = ("h", 1 / 3.6e6) if hours else ("s", 1e-3)
    rows, cols = _grid(len(groups))
    n_policies = max(len(g) for g in groups.values())
    longest = max(len(p) + (16 if any(j.jct_ms is None for j in r.jobs.values()) else 0)
                  for g in groups.values() for p, r in g.items())
    label_in = 0.2 + 0.065 * longest  # policy names (8 pt) left of each panel
    fig, axes = _fixed_grid(rows, cols, 3.4, 0.3 * n_policies + 0.3, left=label_in,
                            right=0.25, top=0.95, bottom=0.5, wgap=label_in + 0.1,
                            hgap=0.8)
    for idx, (group, by_policy) in enumerate(groups.items()):
        ax = axes[idx // cols][idx % cols]
        names = list(by_policy)
        data, labels = [], []
        for name in names:
            jobs = by_policy[name].jobs.values()
            done = np.array([j.jct_ms * scale for j in jobs if j.jct_ms is not None])
            data.append(done if done.size else np.array([np.nan]))
            missing = len(jobs) - done.size
            labels.append(f"{name} ({missing} unfinished)" if missing else name)
        # horizontal boxes: the policies' names read across, never over each other
        positions = np.arange(len(names))[::-1]
        _draw_boxes(ax, data, positions, [colour[n] for n in names], width=0.6,
                    horizontal=True, means=True)
        ax.set_yticks(positions, labels, fontsize=8)
        ax.set_title(group, fontsize=10, y=1.0)
        ax.set_xlabel(f"JCT ({unit})", fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
        ax.ticklabel_format(axis="x", style="plain", useOffset=False)  # no offset text
        ax.grid(axis="x", alpha=0.3)
    for idx in range(len(groups), rows * cols):
        axes[idx // cols][idx % cols].set_visible(False)
    head = f"{title}: job completion time per policy" if title else \
        "job completion time per policy"
    fig.suptitle(f"{head}\n(box p25-p75, whiskers p5-p95, diamond = mean;\n"
                 f"fewer than {MIN_BOX_POINTS} jobs: a dot each)", fontsize=10,
                 y=1 - 0.08 / fig.get_figheight())
    return fig


def plot_jct(runs: Mapping[str, Mapping[str, RunResult]], path: str | Path,
             title: str = "") -> Path:
    """Write the policies' job completion times, one panel per group.

    Parameters
    ----------
    runs : mapping
        Group (a snapshot, or the scenario) -> policy -> :class:`RunResult`.
    path : str or Path
        The file to write (``.png``, ``.svg`` or ``.pdf``; parents are created).
    title : str, optional
        The scenario, for the figure's title ("<title>: job completion time ...").

    Returns
    -------
    Path
        ``path``.

    Notes
    -----
    One box per policy over its jobs' JCTs (p25-p75, whiskers p5-p95, the mean as
    a diamond), in hours when the longest JCT is over two hours.  Jobs that never
    finished have no JCT; their count is under the policy's name.

    Raises
    ------
    ValueError
        If ``runs`` is empty or malformed, or ``path`` has another suffix.
    """
    target = _target(path)
    return _save(figure_jct(runs, title), target)


# ----------------------------------------------------------------- iteration times
def _job_order(by_policy: Mapping[str, RunResult]) -> dict[str, JobResult]:
    jobs: dict[str, JobResult] = {}
    for run in by_policy.values():
        for name, job in run.jobs.items():
            if any(name in r.jobs and r.jobs[name].durations_ms.size
                   for r in by_policy.values()):
                jobs.setdefault(name, job)
    return jobs


def _draw_boxes(ax: Any, data: list[NDArray[np.float64]], positions: NDArray[np.int64],
                colours: list[str], *, width: float, horizontal: bool = False,
                means: bool = False) -> None:
    """Box plots of ``data`` at ``positions``: box p25-p75, a black median line,
    whiskers and caps at p5 and p95 (no fliers), optionally the mean as a diamond.

    **[decision]** Drawn as three collections per panel (boxes, lines, means)
    rather than with ``Axes.boxplot``, which makes about seven artists per box:
    the statistics are the same (:func:`numpy.percentile`, linear), and the
    figures of a run with many boxes draw several times faster.  An all-NaN
    series draws nothing; fewer than :data:`MIN_BOX_POINTS` values are drawn as
    points (each value), not as a box.
    """
    polys, segs, mean_xy, face = [], [], [], []
    few: list[tuple[float, float, str]] = []  # (position, value, colour)
    half = width / 2
    for pos, values, colour in zip(positions, data, colours, strict=True):
        finite = values[np.isfinite(values)]
        if not finite.size:
            continue
        if finite.size < MIN_BOX_POINTS:
            few.extend((float(pos), float(x), colour) for x in finite)
            continue
        p5, p25, p50, p75, p95 = np.percentile(finite, (5, 25, 50, 75, 95))
        c = float(pos)
        box = [(c - half, p25), (c + half, p25), (c + half, p75), (c - half, p75)]
        lines = [[(c - half, p50), (c + half, p50)],                # median
                 [(c, p25), (c, p5)], [(c, p75), (c, p95)],          # whiskers
                 [(c - half / 2, p5), (c + half / 2, p5)],           # caps
                 [(c - half / 2, p95), (c + half / 2, p95)]]
        if horizontal:  # (position, value) -> (value, position)
            box = [(y, x) for x, y in box]
            lines = [[(y, x) for x, y in seg] for seg in lines]
        polys.append(box)
        segs.extend(lines)
        face.append(colour)
        if means:
            m = float(finite.mean())
            mean_xy.append((m, c) if horizontal else (c, m))
    ax.add_collection(PolyCollection(polys, facecolors=face, edgecolors="black",
                                     linewidths=1.0, alpha=0.75))
    ax.add_collection(LineCollection(segs, colors="black", linewidths=1.0))
    if mean_xy:
        xy = np.array(mean_xy)
        ax.plot(xy[:, 0], xy[:, 1], linestyle="none", marker="D", markersize=4,
                markerfacecolor="white", markeredgecolor="black")
    if few:
        at = np.array([(v, p) if horizontal else (p, v) for p, v, _ in few])
        ax.scatter(at[:, 0], at[:, 1], c=[c for _, _, c in few], s=22, marker="o",
                   edgecolors="black", linewidths=0.6, alpha=0.85, zorder=3)
    if polys or few:
        ax.autoscale_view()
    if len(positions):
        limits = (float(positions.min()) - 0.5, float(positions.max()) + 0.5)
        (ax.set_ylim if horizontal else ax.set_xlim)(*limits)


def _boxes(ax: Any, data: list[NDArray[np.float64]], colours: list[str]) -> None:
    _draw_boxes(ax, data, np.arange(len(data)), colours, width=0.7)
    ax.set_xticks([])
    ax.set_xlim(-0.6, len(data) - 0.4)
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)  # no offset text
    ax.grid(axis="y", alpha=0.3)


@_plain_text
def figure_iteration_boxes(runs: Mapping[str, Mapping[str, RunResult]]) -> Figure:
    """Iteration-time boxes per job and policy (see :func:`plot_iteration_boxes`)."""
    groups = _groups(runs)
    colour = _policy_colours(groups)
    panels: list[tuple[str, Any]] = []  # (title, draw(ax))
    for group, by_policy in groups.items():
        jobs = _job_order(by_policy)
        if not jobs:
            panels.append((f"{group}: no iterations", None))
        elif len(jobs) <= MAX_JOB_PANELS:
            labels = _job_labels(jobs)
            for name in jobs:
                present = [p for p in by_policy if name in by_policy[p].jobs
                           and by_policy[p].jobs[name].durations_ms.size]
                panels.append((f"{group} · {labels[name]}", (
                    [by_policy[p].jobs[name].durations_ms for p in present],
                    [colour[p] for p in present], "iteration time (ms)")))
        else:  # a trace: each job's median iteration time against its reference
            ref_policy = "ideal" if "ideal" in by_policy else None
            data, colours = [], []
            for p, run in by_policy.items():
                ratios = []
                for name, job in run.jobs.items():
                    if not job.durations_ms.size:
                        continue
                    if ref_policy is not None:
                        ref_job = by_policy[ref_policy].jobs.get(name)
                        if ref_job is None or not ref_job.durations_ms.size:
                            continue
                        ref = float(np.median(ref_job.durations_ms))
                    else:
                        ref = min(float(np.median(r.jobs[name].durations_ms))
                                  for r in by_policy.values()
                                  if name in r.jobs and r.jobs[name].durations_ms.size)
                    ratios.append(float(np.median(job.durations_ms)) / ref)
                data.append(np.array(ratios) if ratios else np.array([np.nan]))
                colours.append(colour[p])
            against = "ideal" if ref_policy else "the best policy"
            panels.append((f"{group}: {len(jobs)} jobs, median iteration / {against}",
                           (data, colours, "slowdown (x)")))
    cols = min(4, max(1, max(sum(1 for t, _ in panels if t.startswith(f"{g} ·")) or 1
                             for g in groups)))
    rows = math.ceil(len(panels) / cols)
    entry_in = 0.7 + 0.075 * max(len(p) for p in colour)
    panel_w = max(2.9, (len(colour) / 4 * entry_in + 0.8) / cols if cols < 2 else 2.9)
    width = 0.8 + cols * panel_w + (cols - 1) * 0.55
    ncols = max(1, min(len(colour), 4, int(width / entry_in)))
    legend_in = 0.45 + 0.24 * math.ceil(len(colour) / ncols)
    fig, axes = _fixed_grid(rows, cols, panel_w, 1.9, left=0.65, right=0.15,
                            top=legend_in + 0.35, bottom=0.15, wgap=0.55, hgap=0.45)
    for idx, (title, spec) in enumerate(panels):
        ax = axes[idx // cols][idx % cols]
        ax.set_title(title, fontsize=9, y=1.0)
        if spec is None:
            ax.set_xticks([])
            ax.set_yticks([])
            ax.text(0.5, 0.5, "no iterations", transform=ax.transAxes, ha="center",
                    va="center", color="grey")
            continue
        data, colours, ylabel = spec
        _boxes(ax, data, colours)
        if idx % cols == 0:
            ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
    for idx in range(len(panels), rows * cols):
        axes[idx // cols][idx % cols].set_visible(False)
    fig.legend(handles=[Patch(facecolor=c, alpha=0.75, label=p) for p, c in colour.items()],
               loc="upper center", bbox_to_anchor=(0.5, 1 - 0.08 / fig.get_figheight()),
               ncols=ncols, fontsize=9, title=f"policy (box p25-p75, whiskers p5-p95; "
               f"fewer than {MIN_BOX_POINTS} values: dots)", title_fontsize=8)
    return fig


def plot_iteration_boxes(runs: Mapping[str, Mapping[str, RunResult]],
                         path: str | Path) -> Path:
    """Write iteration-time boxes per job and policy (paper Fig. 7).

    Parameters
    ----------
    runs : mapping
        Snapshot (e.g. ``"S1"``) -> policy -> :class:`RunResult`.  One panel per
        job (labelled with its group, ``H``/``L`` for its priority, and its model),
        each on its own y-scale since jobs of one snapshot can differ tenfold, with
        one box per policy.  A group of more than :data:`MAX_JOB_PANELS` jobs (a
        trace) gets one panel instead: each job's median iteration time over its
        median under ``ideal`` (or under the best policy), one box per policy.
    path : str or Path
        The file to write (``.png``, ``.svg`` or ``.pdf``; parents are created).

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
        mappings of :class:`RunResult`, or ``path`` has another suffix.
    """
    target = _target(path)
    return _save(figure_iteration_boxes(runs), target)


# ------------------------------------------------------------------ link utilisation
_STYLES = ("-", "--", "-.", ":")


#: vertical room of one policy's band in the link-utilisation figure (1 = capacity)
_BAND = 1.4


@_plain_text
def figure_link_utilization(runs: Mapping[str, RunResult], title: str = "") -> Figure:
    """Each host link's utilisation over time (see :func:`plot_link_utilization`)."""
    checked = _check_runs("runs", runs)
    n = len(checked)
    height = 1.4 + 1.25 * n
    # one axes, one band per policy: small multiples at the cost of a single axes
    # (matplotlib's per-axes cost made this figure the bulk of a report's drawing)
    fig = Figure(figsize=(10.0, height))
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=0.075, right=0.76, top=1 - 0.6 / height, bottom=0.55 / height)
    ax = fig.add_subplot()
    handles: dict[str, Any] = {}
    shown_of = 0
    t_end = 0.0
    ticks: list[float] = []
    # the time axis's unit, from the longest run: seconds, hours or days
    unit, size = time_axis(max((float(r.util_t_ms[-1]) / 1e3 for r in checked.values()
                                if np.size(r.util_t_ms)), default=0.0))
    for i, (policy, run) in enumerate(checked.items()):
        y0 = (n - 1 - i) * _BAND
        sent = np.asarray(run.link_sent_gbit, dtype=np.float64)
        used = np.flatnonzero(sent > 0)
        shown_of = max(shown_of, used.size)
        used = used[np.argsort(-sent[used], kind="stable")][:MAX_LINKS]
        samples = np.asarray(run.util_gbps, dtype=np.float64)
        if samples.ndim == 2 and samples.shape[0] and used.size:
            t_s = np.concatenate(([0.0], np.asarray(run.util_t_ms, dtype=np.float64)))
            t_s = t_s / (1e3 * size)  # in the axis's unit
            t_end = max(t_end, float(t_s[-1]))
            for k in sorted(used):
                share = samples[:, k] / float(run.link_capacity_gbps[k])
                name = run.link_names[k] if k < len(run.link_names) else f"link {k}"
                # equal curves stay visible: each link has its own dash and width
                (line,) = ax.step(t_s, y0 + np.concatenate(([share[0]], share)),
                                  where="pre", color=f"C{k % 10}",
                                  linestyle=_STYLES[k % len(_STYLES)],
                                  linewidth=2.2 - 0.3 * (k % 4), alpha=0.85, label=name)
                handles.setdefault(name, line)
        else:
            ax.text(0.5, y0 + 0.5, "no link traffic", transform=ax.get_yaxis_transform(),
                    ha="center", va="center", color="grey")
        ax.axhline(y0, color="black", linewidth=0.6)
        ax.axhline(y0 + 1.0, color="grey", linewidth=0.8, linestyle=":")
        # Γ as the table shows it (the report keeps 4 decimals, the table prints 3)
        ax.text(0.006, y0 + 1.06, f"{policy}  (Γ {round(run.gamma, 4):.3f})", fontsize=10,
                transform=ax.get_yaxis_transform(), ha="left", va="bottom")
        ticks += [y0, y0 + 0.5, y0 + 1.0]
    ax.set_ylim(-0.1, (n - 1) * _BAND + 1.3)
    ax.set_yticks(ticks, ["0", "", "1"] * n)
    ax.set_ylabel("utilisation (0 to 1 per policy)")
    ax.set_xlabel(f"simulated time ({unit})")
    if t_end > 0:
        ax.set_xlim(0.0, t_end)
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)
    ax.grid(alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if handles:
        legend_title = "link" if shown_of <= MAX_LINKS else \
            f"link (top {MAX_LINKS} of {shown_of} by traffic)"
        fig.legend(handles=list(handles.values()), loc="upper left",
                   bbox_to_anchor=(0.775, 1 - 0.6 / height), title=legend_title,
                   fontsize=9, title_fontsize=8)
    fig.suptitle(f"{title}: link utilisation" if title else "link utilisation",
                 y=1 - 0.2 / height)
    return fig


def plot_link_utilization(runs: Mapping[str, RunResult], path: str | Path,
                          title: str = "") -> Path:
    """Write each host link's utilisation over time, one panel per policy.

    Parameters
    ----------
    runs : mapping
        Policy -> :class:`RunResult` (normally of one scenario).
    path : str or Path
        The file to write (``.png``, ``.svg`` or ``.pdf``; parents are created).
    title : str, optional
        The scenario, for the figure's title ("<title>: link utilisation").

    Returns
    -------
    Path
        ``path``.

    Notes
    -----
    Each sample ``util_gbps[i, k]`` is link k's mean rate since the previous
    sample; it is drawn as a step over that interval, divided by the link's
    capacity (0..1), against simulated time (seconds, hours past two hours, days
    past four days: :func:`time_axis`), in the policy's band of
    one shared axes (the bands are stacked, the first policy on top).  Only links that carried
    traffic in that run are drawn, at most :data:`MAX_LINKS` (those that carried
    the most); a link keeps its colour and dash in every panel, so equal curves
    remain distinguishable.

    Raises
    ------
    ValueError
        If ``runs`` is empty, not a mapping, or holds something other than
        :class:`RunResult`, or ``path`` has another suffix.
    """
    target = _target(path)
    return _save(figure_link_utilization(runs, title), target)


# ------------------------------------------------------------------ shared links
def _plans_of(run: Any, plans: Any) -> dict[str, LinkPlan]:
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
    # a link is shared when two or more jobs have a row on it
    return {name: plan for name, plan in named.items() if len(plan.jobs) >= 2}


@_plain_text
def figure_shared_links(run: RunResult, *, plans: Mapping[Any, LinkPlan] | None = None,
                        title: str = "") -> Figure | None:
    """The traffic circles of the shared links (see :func:`plot_shared_links`)."""
    named = _plans_of(run, plans)
    if not named:
        return None
    rows, cols = _grid(len(named))
    # the legend: a line per job, the two shades and the red ring
    legend_in = 0.25 * (max(len(p.jobs) for p in named.values()) + 3) + 0.2
    # a fixed layout (see _fixed_grid): per cell, the panel's two-line title, the
    # circle with its angle labels around it, and its legend below
    cell_w, circle, title_in, top_in = 5.4, 4.2, 0.75, 0.75
    cell_h = title_in + circle + 0.35 + legend_in
    width, height = cols * cell_w, top_in + rows * cell_h
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    for idx, (name, plan) in enumerate(named.items()):
        row, col = divmod(idx, cols)
        x0 = col * cell_w + (cell_w - circle) / 2
        y_top = height - top_in - row * cell_h - title_in
        ax = fig.add_axes((x0 / width, (y_top - circle) / height, circle / width,
                           circle / height), projection="polar")
        if plan.base.compatible:
            state = (f"score {plan.result.score:.1f}, xi {plan.utilization:.3f} "
                     f"(unshifted {plan.unshifted_score:.1f}, "
                     f"{plan.unshifted_utilization:.3f})")
        else:  # no common base period: the circle cannot interleave them
            state = "INCOMPATIBLE periods: no rotation interleaves them"
        draw_traffic_circle(ax, plan, plan.result.rotations,
                            f"{name}: {plan.capacity_gbps:g} Gbps, "
                            f"T = {plan.base.period_ms:.1f} ms\n{state}")
        box = fig.add_axes(((col * cell_w + 0.2) / width,  # the circle's legend, below it
                            (y_top - circle - 0.35 - legend_in) / height,
                            (cell_w - 0.4) / width, legend_in / height))
        box.axis("off")
        box.legend(*ax.get_legend_handles_labels(), loc="upper center", fontsize=8,
                   frameon=False)
    where = f"{title} · " if title else ""
    fig.suptitle(f"{where}{run.policy}\ntraffic circles of the {len(named)} shared "
                 f"link{'s' if len(named) > 1 else ''}", fontsize=11, y=1 - 0.08 / height)
    return fig


def plot_shared_links(run: RunResult, path: str | Path, *,
                      plans: Mapping[int, LinkPlan] | Mapping[str, LinkPlan] | None = None,
                      title: str = "") -> Path | None:
    """Write the traffic circle of every link the controller shared.

    Parameters
    ----------
    run : RunResult
        The run whose shared links to draw.
    path : str or Path
        The file to write (``.png``, ``.svg`` or ``.pdf``; parents are created).
    plans : mapping, optional
        Link -> :class:`LinkPlan` to draw instead of the run's own, keyed by node
        index (as :attr:`Controller.links`) or by link name.  Takes precedence.
        Without it: the controller's current links if it still has any, otherwise
        the latest plan per link recorded during the run (``run.link_plans``; a
        finished run's controller has none left, its jobs having left).
    title : str, optional
        The scenario (and snapshot), for the figure's title.

    Returns
    -------
    Path or None
        ``path``, or None (nothing written) when no link is shared (two or more
        jobs on it), e.g. for a policy without a controller.

    Notes
    -----
    One circle per shared link (paper Figs. 1c and 6): a ring per job with its comm
    arcs at the chosen rotation, and a red ring where the summed demand exceeds the
    link's capacity (with its legend entry only then).  A link whose periods cannot
    be unified is titled INCOMPATIBLE instead of showing a score.

    Raises
    ------
    ValueError
        If ``run`` is not a :class:`RunResult`, ``plans`` is not a mapping of
        :class:`LinkPlan`, or ``path`` has another suffix.
    """
    target = _target(path)
    fig = figure_shared_links(run, plans=plans, title=title)
    return None if fig is None else _save(fig, target)
