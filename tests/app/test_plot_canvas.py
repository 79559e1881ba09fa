"""Every figure of every shipped scenario stays inside its canvas: no cropped title or
legend, no tick labels drawn over each other."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.text import Text

from tdmcore.app.common import example_path as _example_path
from tdmcore.app.plots import (
    figure_iteration_boxes,
    figure_jct,
    figure_link_utilization,
    figure_shared_links,
)
from tdmcore.sim.cluster import CLUSTER_POLICIES, run_cluster
from tdmcore.sim.scenario_file import load_scenario_file
from tdmcore.sim.scenarios import metronome_snapshots, metronome_trace, philly

TOLERANCE_PX = 1.0


def _scenarios() -> Iterator[tuple[str, dict[str, Any]]]:
    yield "metronome-snapshots", dict(metronome_snapshots(window_s=20))
    yield "metronome-trace", {"metronome-trace": metronome_trace(0, hours=1.0)}
    yield "philly", {"philly": philly(40, 8, 1300, 0, max_duration_s=900.0)}
    example = load_scenario_file(_example_path())
    yield "example", {example.name: example}


@pytest.fixture(scope="module")
def all_runs() -> dict[str, dict[str, dict[str, Any]]]:
    out = {}
    for stem, groups in _scenarios():
        out[stem] = {g: {p: run_cluster(sc.sim, sc.jobs, p, seed=0) for p in CLUSTER_POLICIES}
                     for g, sc in groups.items()}
    return out


def _figures(stem: str, runs: dict[str, dict[str, Any]]) -> Iterator[tuple[str, Figure]]:
    yield "jct", figure_jct(runs, stem)
    yield "iterations", figure_iteration_boxes(runs)
    for group, by_policy in runs.items():
        title = stem if len(runs) == 1 else f"{stem} {group}"
        yield f"{group}-links", figure_link_utilization(by_policy, title)
        for run in by_policy.values():
            fig = figure_shared_links(run, title=title)
            if fig is not None:
                yield f"{group}-{run.policy}-circle", fig


def _in_view(ax: Any, axis: str, labels: list[Text]) -> list[Text]:
    """The tick labels matplotlib draws: those of ticks inside the view limits."""
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    ticks = ax.get_xticks() if axis == "x" else ax.get_yticks()
    return [t for t, v in zip(labels, ticks, strict=False)
            if lo - 1e-9 <= v <= hi + 1e-9 and t.get_visible() and t.get_text()]


def _drawn_texts(fig: Figure) -> list[Text]:
    """Every text the figure draws: titles, labels, in-view tick labels, legends."""
    texts = [t for t in fig.texts if t.get_visible() and t.get_text()]
    if fig._suptitle is not None:  # noqa: SLF001 - matplotlib keeps it here
        texts.append(fig._suptitle)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        texts += [ax.title, ax._left_title, ax._right_title,  # noqa: SLF001
                  ax.xaxis.label, ax.yaxis.label, *ax.texts]
        if not ax.axison:  # an axes used as a legend box draws no ticks
            pass
        elif ax.name != "polar":
            texts += _in_view(ax, "x", ax.get_xticklabels())
            texts += _in_view(ax, "y", ax.get_yticklabels())
        else:
            texts += [t for t in ax.get_xticklabels() if t.get_text()]
    for legend in fig.findobj(Legend):
        texts += [legend.get_title(), *legend.get_texts()]
    return [t for t in texts if t.get_visible() and t.get_text().strip()]


def _problems(fig: Figure) -> list[str]:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    canvas = fig.bbox
    found = []

    def outside(box: Any) -> bool:
        return (box.x0 < canvas.x0 - TOLERANCE_PX or box.y0 < canvas.y0 - TOLERANCE_PX
                or box.x1 > canvas.x1 + TOLERANCE_PX or box.y1 > canvas.y1 + TOLERANCE_PX)

    for text in _drawn_texts(fig):
        if outside(text.get_window_extent(renderer)):
            found.append(f"text {text.get_text()!r} leaves the canvas")
    for legend in fig.findobj(Legend):
        if outside(legend.get_window_extent(renderer)):
            found.append("a legend leaves the canvas")
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison or ax.name == "polar":
            continue
        for shown in (_in_view(ax, "x", ax.get_xticklabels()),
                      _in_view(ax, "y", ax.get_yticklabels())):
            boxes = [t.get_window_extent(renderer) for t in shown]
            for i, a in enumerate(boxes):
                for b, tb in zip(boxes[i + 1:], shown[i + 1:], strict=True):
                    if a.overlaps(b):
                        found.append(f"tick labels {shown[i].get_text()!r} and "
                                     f"{tb.get_text()!r} overlap")
    return found


@pytest.mark.parametrize("stem", ["metronome-snapshots", "metronome-trace", "philly",
                                  "example"])
def test_every_figure_stays_inside_its_canvas(stem: str, all_runs) -> None:
    drawn = 0
    for name, fig in _figures(stem, all_runs[stem]):
        assert not _problems(fig), (stem, name, _problems(fig))
        drawn += 1
    assert drawn >= 3


def test_a_trace_summarises_its_jobs_in_one_panel(all_runs) -> None:
    fig = figure_iteration_boxes(all_runs["philly"])
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 1 and "median iteration / ideal" in visible[0].get_title()


def test_circles_skip_unshared_links_and_say_incompatible(all_runs) -> None:
    for runs in all_runs.values():
        for by_policy in runs.values():
            for run in by_policy.values():
                fig = figure_shared_links(run)
                if fig is None:
                    assert all(len(p.jobs) < 2 for p in run.link_plans.values())
                    continue
                titles = [ax.get_title() for ax in fig.axes if ax.name == "polar"]
                plans = [p for p in run.link_plans.values() if len(p.jobs) >= 2]
                assert len(titles) == len(plans)
                for plan, title in zip(plans, titles, strict=True):
                    assert ("INCOMPATIBLE" in title) == (not plan.base.compatible)
                    assert ("score" in title) == plan.base.compatible
                legend = [t.get_text() for t in fig.findobj(Text)]
                over = any("over capacity" in t for t in legend)
                assert over == any(_over(p) for p in plans)


def _over(plan: Any) -> bool:
    import numpy as np

    total = sum(np.roll(plan.demand[r], int(s)) for r, s in enumerate(plan.result.rotations))
    return bool((total - plan.capacity_gbps > 1e-9 * plan.capacity_gbps).any())
