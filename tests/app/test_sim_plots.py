"""The simulation figures: iteration boxes, link utilisation, shared-link circles."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tdmcore.app.circle_plot import plot_traffic_circle  # noqa: E402
from tdmcore.app.plots import (  # noqa: E402
    plot_iteration_boxes,
    plot_link_utilization,
    plot_shared_links,
)
from tdmcore.metronome.link import LinkPlan  # noqa: E402
from tdmcore.sim.cluster import RunResult, run_cluster  # noqa: E402
from tdmcore.sim.scenarios import metronome_snapshots  # noqa: E402

POLICIES = ("default", "metronome", "ideal")
MIN_BYTES = 10_000

Runs = dict[str, dict[str, RunResult]]


@pytest.fixture(scope="module")
def runs() -> Runs:
    scenarios = metronome_snapshots(window_s=20)
    return {sid: {p: run_cluster(scenarios[sid].sim, scenarios[sid].jobs, p)
                  for p in POLICIES} for sid in ("S1", "S4")}


@pytest.fixture
def no_leak() -> Iterator[None]:
    """The plotting call leaves pyplot's figure count as it found it."""
    before = len(plt.get_fignums())
    yield
    assert len(plt.get_fignums()) == before


def _png(path: Path | None) -> Path:
    assert path is not None
    assert path.is_file()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > MIN_BYTES
    return path


def test_runs_record_the_link_plans(runs: Runs) -> None:
    s1 = runs["S1"]["metronome"]
    assert s1.controller is not None and not s1.controller.links  # all jobs have left
    assert set(s1.link_plans) <= set(s1.link_names)
    assert s1.link_plans and all(isinstance(p, LinkPlan) for p in s1.link_plans.values())
    assert max(len(p.jobs) for p in s1.link_plans.values()) >= 2  # a shared link
    for sid in runs:
        assert runs[sid]["default"].link_plans == {}
        assert runs[sid]["ideal"].link_plans == {}


def test_iteration_boxes(runs: Runs, tmp_path: Path, no_leak: None) -> None:
    out = plot_iteration_boxes(runs, tmp_path / "sub" / "fig7.png")
    assert out == tmp_path / "sub" / "fig7.png"
    _png(out)


def test_iteration_boxes_skip_jobs_without_iterations(runs: Runs, tmp_path: Path,
                                                      no_leak: None) -> None:
    def emptied(run: RunResult, keep: Callable[[str], bool]) -> RunResult:
        jobs = {name: job if keep(name) else dataclasses.replace(job, durations_ms=np.zeros(0))
                for name, job in run.jobs.items()}
        return dataclasses.replace(run, jobs=jobs)

    first = next(iter(runs["S1"]["default"].jobs))
    partial = {"S1": {p: emptied(r, lambda n: n != first) for p, r in runs["S1"].items()},
               "S4": {p: emptied(r, lambda n: False) for p, r in runs["S4"].items()}}
    _png(plot_iteration_boxes(partial, tmp_path / "partial.png"))
    # a policy missing from one snapshot is fine too
    uneven = {"S1": runs["S1"], "S4": {"default": runs["S4"]["default"]}}
    _png(plot_iteration_boxes(uneven, str(tmp_path / "uneven.png")))


@pytest.mark.parametrize("sid", ["S1", "S4"])
def test_link_utilization(runs: Runs, sid: str, tmp_path: Path, no_leak: None) -> None:
    out = plot_link_utilization(runs[sid], tmp_path / f"util-{sid}.png", title=sid)
    assert out == tmp_path / f"util-{sid}.png"
    _png(out)


def test_link_utilization_single_policy_no_title(runs: Runs, tmp_path: Path,
                                                 no_leak: None) -> None:
    _png(plot_link_utilization({"metronome": runs["S4"]["metronome"]}, tmp_path / "u.png"))


@pytest.mark.parametrize("sid", ["S1", "S4"])
def test_shared_links_of_metronome(runs: Runs, sid: str, tmp_path: Path,
                                   no_leak: None) -> None:
    out = plot_shared_links(runs[sid]["metronome"], tmp_path / f"shared-{sid}.png")
    assert out == tmp_path / f"shared-{sid}.png"
    _png(out)


@pytest.mark.parametrize("policy", ["default", "ideal"])
def test_shared_links_none_without_plans(runs: Runs, policy: str, tmp_path: Path,
                                         no_leak: None) -> None:
    assert plot_shared_links(runs["S1"][policy], tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


def test_shared_links_explicit_plans_take_precedence(runs: Runs, tmp_path: Path,
                                                     no_leak: None) -> None:
    run = runs["S1"]["metronome"]
    assert plot_shared_links(run, tmp_path / "empty.png", plans={}) is None
    plans = [*runs["S1"]["metronome"].link_plans.values(),
             *runs["S4"]["metronome"].link_plans.values()]
    by_index = dict(enumerate(plans))  # node indices, as Controller.links
    _png(plot_shared_links(runs["S1"]["default"], tmp_path / "two.png", plans=by_index))


def test_traffic_circle_of_a_recorded_plan(runs: Runs, tmp_path: Path) -> None:
    plan = next(iter(runs["S1"]["metronome"].link_plans.values()))
    _png(plot_traffic_circle(plan, tmp_path / "circle.png"))
    plt.close("all")


@pytest.mark.parametrize(("call", "match"), [
    (lambda r: plot_iteration_boxes({}, "x.png"), r"^runs: .*none"),
    (lambda r: plot_iteration_boxes([r], "x.png"), r"^runs: .*list"),
    (lambda r: plot_iteration_boxes({"S1": {}}, "x.png"), r"^runs\['S1'\]: "),
    (lambda r: plot_iteration_boxes({"S1": {"default": 3}}, "x.png"),
     r"^runs\['S1'\]\['default'\]: expected a RunResult, got int"),
    (lambda r: plot_link_utilization({}, "x.png"), r"^runs: "),
    (lambda r: plot_link_utilization({"default": r.jobs}, "x.png"),
     r"^runs\['default'\]: expected a RunResult, got dict"),
    (lambda r: plot_shared_links("run", "x.png"), r"^run: expected a RunResult, got str"),
    (lambda r: plot_shared_links(r, "x.png", plans=[1]), r"^plans: .*list"),
    (lambda r: plot_shared_links(r, "x.png", plans={0: "plan"}),
     r"^plans\[0\]: expected a LinkPlan"),
])
def test_bad_input(runs: Runs, call: Callable[[RunResult], Any], match: str,
                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leak: None) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=match):
        call(runs["S1"]["metronome"])
    assert not (tmp_path / "x.png").exists()


def test_jct_figure_names_its_scenario(runs: Runs) -> None:
    from tdmcore.app.plots import figure_jct

    titled = figure_jct(runs, "metronome-snapshots")._suptitle  # noqa: SLF001
    plain = figure_jct(runs)._suptitle  # noqa: SLF001
    assert titled is not None and plain is not None
    assert titled.get_text().startswith("metronome-snapshots: job completion time")
    assert plain.get_text().startswith("job completion time")


# -------------------------------------------------------------------- issue 41
def test_a_policy_keeps_its_colour_whatever_the_order_of_policies(runs: Runs) -> None:
    # issue 41: a policy's colour depended on its position in --policies
    from matplotlib.colors import to_hex

    from tdmcore.app.plots import figure_iteration_boxes, policy_colours

    def legend(order: tuple[str, ...]) -> dict[str, str]:
        fig = figure_iteration_boxes({"S1": {p: runs["S1"][p] for p in order}})
        (box,) = fig.legends
        return {t.get_text(): to_hex(h.get_facecolor(), keep_alpha=False)
                for t, h in zip(box.get_texts(), box.legend_handles, strict=True)}

    two, three = legend(("metronome", "default")), legend(("default", "ideal", "metronome"))
    assert two["default"] == three["default"] and two["metronome"] == three["metronome"]
    assert legend(("ideal", "default"))["default"] == legend(("default",))["default"]
    mine = policy_colours(["mine:Policy", "default", "other:Policy"])
    assert mine == policy_colours(["other:Policy", "mine:Policy", "default"])


def test_two_or_three_values_are_dots_not_a_box() -> None:
    # issue 41: boxes (p5-p95 whiskers, p25-p75) were drawn from 2-3 points
    from matplotlib.figure import Figure

    from tdmcore.app.plots import MIN_BOX_POINTS, _draw_boxes

    fig = Figure()
    ax = fig.add_subplot()
    few, many = np.array([1.0, 2.0, 3.0]), np.arange(20, dtype=np.float64)
    _draw_boxes(ax, [few, many], np.arange(2), ["C0", "C1"], width=0.6)
    boxes = [c for c in ax.collections if type(c).__name__ == "PolyCollection"]
    dots = [c for c in ax.collections if type(c).__name__ == "PathCollection"]
    assert MIN_BOX_POINTS == 5 and len(boxes) == 1 and len(boxes[0].get_paths()) == 1
    assert len(dots) == 1 and sorted(dots[0].get_offsets()[:, 1]) == [1.0, 2.0, 3.0]


def test_a_long_run_is_drawn_in_hours_or_days(runs: Runs) -> None:
    # issue 41: a multi-day trace's time axis was in raw seconds
    from tdmcore.app.plots import figure_link_utilization, time_axis

    assert [time_axis(t)[0] for t in (60.0, 7200.0, 7201.0, 3 * 86400, 5 * 86400)] == \
        ["s", "s", "h", "h", "days"]
    run = runs["S1"]["metronome"]
    end_s = float(run.util_t_ms[-1]) / 1e3
    stretched = dataclasses.replace(run, util_t_ms=run.util_t_ms * (2 * 86400 / end_s))
    fig = figure_link_utilization({"metronome": stretched})  # two days
    (ax,) = fig.axes
    assert ax.get_xlabel() == "simulated time (h)"
    assert ax.get_xlim()[1] == pytest.approx(48.0)


def test_the_traffic_circle_has_a_key_for_its_rings_and_shading(runs: Runs) -> None:
    # issue 41: the shading and the rings had no key
    from tdmcore.app.plots import figure_shared_links

    fig = figure_shared_links(runs["S1"]["metronome"])
    assert fig is not None
    texts = [t.get_text() for ax in fig.axes for legend in [ax.get_legend()] if legend
             for t in legend.get_texts()]
    assert any("ring 1 from the centre" in t for t in texts)
    assert any(t.startswith("shade pale") for t in texts)
    assert any(t.startswith("shade solid") for t in texts)
