"""``tdmcore link``: interleave the pods sharing one link, by hand.

Runs the scheduler's search (first perfect interval, Score phase) and the
controller's (maximum Psi, phase three) on one link of the link catalog
(:mod:`tdmcore.sim.catalog`), a file or ``--pod`` options, and compares both with
the link left unshifted.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..._click import FiniteFloat
from ..._kernels.node_score import INCOMPATIBLE_MAX_SCORE
from ..._validation import MAX_BINS, MIN_BINS, did_you_mean
from ...metronome.link import LinkPlan, LinkPod, plan_link
from ...metronome.scoring import average_bandwidth_utilization
from ...sim.catalog import link_scenarios, load_link_file, parse_pod
from ..common import OutDir, announce, compiling_kernels, report_dir
from ..report_dir import json_text

__all__ = ["link_cmd"]


@click.command("link")
@click.argument("scenario", required=False)
@click.option("--pod", "pod_specs", multiple=True, metavar="NAME:PERIOD_MS:DUTY:GBPS[:PRIO[:JOB]]",
              help="A pod on the link (repeat); earlier pods count as deployed earlier.")
@click.option("--file", "pod_file", type=click.Path(dir_okay=False, path_type=Path),
              help='JSON or YAML file: {"capacity_gbps": B, "pods": [{"name", '
                   '"period_ms", "duty_cycle", "bandwidth_gbps", "priority", "job"}]}.')
@click.option("--capacity", "capacity_gbps", type=FiniteFloat(min=0, min_open=True),
              default=None,
              help="Link capacity in Gbps (default: the scenario's, or 25 with --pod).")
@click.option("--bins", type=click.IntRange(MIN_BINS, MAX_BINS), default=72,
              show_default=True,
              help=f"Di-Pre: bins on the traffic circle ({MIN_BINS} to {MAX_BINS:,}; "
                   "the search is exact, so its time grows fast with the bins).")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True,
              help="Folder for the PNG and JSON report.")
@click.option("--no-plot", is_flag=True, help="Skip the PNG.")
def link_cmd(scenario: str | None, pod_specs: tuple[str, ...], pod_file: Path | None,
             capacity_gbps: float | None, bins: int, out_dir: Path, no_plot: bool) -> None:
    """Interleave the pods sharing one link (SCENARIO: see `tdmcore list scenarios`).

    Runs the scheduler's search (first perfect interval, Score phase) and the
    controller's (maximum Psi, phase three) and compares both with the
    link left unshifted.
    """
    sources = sum(x is not None and x != () for x in (scenario, pod_file, pod_specs or None))
    if sources != 1:
        raise click.UsageError("give exactly one of SCENARIO, --file or --pod")
    name, title = "custom", "pods given on the command line"
    try:
        if scenario is not None:
            known = link_scenarios()
            if scenario not in known:
                raise click.BadParameter(f"unknown scenario {scenario!r}"
                                         f"{did_you_mean(scenario, known)}; "
                                         f"choose from {', '.join(known)} (`tdmcore list "
                                         "scenarios`)", param_hint="SCENARIO")
            sc = known[scenario]
            name, title, cap, pods = sc.name, sc.title, sc.capacity_gbps, sc.pods
        elif pod_file is not None:
            cap, pods = load_link_file(pod_file)
            name, title = pod_file.stem, str(pod_file)
        else:
            try:
                pods = tuple(parse_pod(text, i) for i, text in enumerate(pod_specs))
            except ValueError as exc:  # a malformed option value: a usage error (2)
                raise click.UsageError(str(exc)) from None
            cap = 25.0
        if capacity_gbps is not None:
            cap = capacity_gbps
        plans = {}
        timings = {}
        with compiling_kernels(Console(stderr=True)):
            plan_link(pods, cap, bins=bins, mode="first")  # load the compiled kernels first
        for mode in ("first", "optimal"):
            start = time.perf_counter()
            plans[mode] = plan_link(pods, cap, bins=bins, mode=mode)
            timings[mode] = (time.perf_counter() - start) * 1e3
    except ValueError as exc:
        raise click.ClickException(_named(str(exc), pod_file)) from None
    console = Console()
    with report_dir(out_dir, f"link-{name}") as report:
        report.path(f"link-{name}.json").write_text(json_text(_report(plans, timings)), "utf-8")
        _print_plans(console, name, title, plans, timings)
        if not no_plot:
            from ..circle_plot import plot_traffic_circle

            plot_traffic_circle(plans["optimal"], report.path(f"link-{name}.png"))
    announce(console, report)


def _named(text: str, pod_file: Path | None) -> str:
    """A library error about the pods or the file, naming the option that gave them
    (``pods:`` is --pod's, or the file's; ``file:`` is --file's)."""
    head, sep, rest = text.partition(": ")
    if sep and head == "file":
        return f"--file: {rest}"
    if sep and head.split("[")[0].split(".")[0] == "pods":
        where = str(pod_file) if pod_file is not None else "--pod"
        return f"{where}{head[len('pods'):]}: {rest}"
    return text


def _fmt_psi(value: float | None) -> str:
    if value is None:
        return "-"
    return "inf" if value == float("inf") else f"{value:.2f}"


def _print_plans(console: Console, name: str, title: str, plans: dict[str, LinkPlan],
                 timings: dict[str, float]) -> None:
    first, optimal = plans["first"], plans["optimal"]
    base = first.base
    console.print(title if title.lower().startswith(name.lower()) else f"{name}: {title}",
                  style="bold", highlight=False)
    idle = ", ".join(f"{p.name} +{i:.2f} ms" for p, i in zip(first.pods, base.idle_ms,
                                                              strict=True) if i > 0)
    status = "compatible" if base.compatible else "INCOMPATIBLE"
    console.print(f"base period T = {base.period_ms:.2f} ms, multiples "
                  f"{base.multiples.tolist()}, {status}"
                  + (f", idle injected: {idle}" if idle else ""))
    pods = Table(title=f"pods on the {first.capacity_gbps:g} Gbps link ({first.bins} bins); "
                       "shift in ms (rotation in bins)")
    for col in ("pod", "job", "prio", "period ms", "duty", "Gbps", "first", "optimal"):
        pods.add_column(col, justify="right" if col not in ("pod", "job") else "left")
    rf, ro = first.job_rotations, optimal.job_rotations
    for p in first.pods:
        pods.add_row(p.name, p.job_name, str(p.priority), f"{p.period_ms:g}",
                     f"{p.duty_cycle:.3f}", f"{p.bandwidth_gbps:g}",
                     f"{first.shifts_ms[p.name]:.2f} ({rf[p.job_name]})",
                     f"{optimal.shifts_ms[p.name]:.2f} ({ro[p.job_name]})")
    console.print(pods)
    summary = Table(title="the link: unshifted vs. the scheduler's and the controller's search")
    for col in ("", "unshifted", "first", "optimal"):
        summary.add_column(col, justify="right")
    compatible = bool(base.compatible)
    summary.add_row("score (Eq. 18)", *(_score_text(x, compatible) for x in (
        first.unshifted_score, first.result.score, optimal.result.score)))
    summary.add_row("perfect", "yes" if compatible and first.unshifted_score == 100.0
                    else "no", "yes" if first.result.perfect else "no",
                    "yes" if optimal.result.perfect else "no")
    summary.add_row("psi, bins (Eq. 9)", "-", "-", _fmt_psi(optimal.result.psi))
    gammas = [_gamma(first, first.unshifted_utilization), _gamma(first, first.utilization),
              _gamma(optimal, optimal.utilization)]
    summary.add_row("link utilization xi", f"{first.unshifted_utilization:.3f}",
                    f"{first.utilization:.3f}", f"{optimal.utilization:.3f}")
    summary.add_row("Gamma (Eq. 5)", *(f"{g:.3f}" for g in gammas))
    summary.add_row("vectors evaluated", "1", str(first.result.evaluated),
                    str(optimal.result.evaluated))
    summary.add_row("time, ms", "-", f"{timings['first']:.2f}", f"{timings['optimal']:.2f}")
    console.print(summary)
    if not compatible:
        console.print("incompatible periods: no rotation makes this link perfect, so its "
                      "scores stay below 100 (docs/traffic-circle.md, step 3)",
                      highlight=False)


def _score_text(value: float, compatible: bool) -> str:
    """A score to two decimals, never rounded up to 100.00 from below (a score
    under 100 is not perfect), and capped for incompatible periods as the
    search's are (the unshifted score is the plain Eq. 18 value)."""
    if not compatible:
        value = min(value, INCOMPATIBLE_MAX_SCORE)
    return f"{math.floor(value * 100.0) / 100.0:.2f}"


def _gamma(plan: LinkPlan, xi: float) -> float:
    return average_bandwidth_utilization([plan.capacity_gbps], [xi])


def _pod_json(p: LinkPod) -> dict[str, Any]:
    return {"name": p.name, "job": p.job_name, "priority": p.priority, "period_ms": p.period_ms,
            "duty_cycle": p.duty_cycle, "bandwidth_gbps": p.bandwidth_gbps}


def _report(plans: dict[str, LinkPlan], timings: dict[str, float]) -> dict[str, Any]:
    first = plans["first"]
    out: dict[str, Any] = {
        "capacity_gbps": first.capacity_gbps,
        "bins": first.bins,
        "base_period_ms": first.base.period_ms,
        "multiples": first.base.multiples.tolist(),
        "idle_ms": first.base.idle_ms.tolist(),
        "compatible": first.base.compatible,
        "pods": [_pod_json(p) for p in first.pods],
        "unshifted": {"score": first.unshifted_score,
                      "link_utilization": first.unshifted_utilization},
    }
    for mode, plan in plans.items():
        out[mode] = {
            "rotations": plan.job_rotations,
            "shifts_ms": plan.shifts_ms,
            "score": plan.result.score,
            "perfect": plan.result.perfect,
            "psi_bins": plan.result.psi if plan.result.psi != float("inf") else "inf",
            "link_utilization": plan.utilization,
            "gamma": _gamma(plan, plan.utilization),
            "evaluated": plan.result.evaluated,
            "time_ms": timings[mode],
        }
    return out
