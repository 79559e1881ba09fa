"""The ``tdmcore`` command line.

``tdmcore link s1`` interleaves the pods of a shipped snapshot on their shared link
and prints the chosen rotations, shifts, score and utilization, then draws the
traffic circle.  Bad input gets a one-line error and a non-zero exit status.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from .catalog import link_scenarios, load_link_file, parse_pod
from .link import LinkPlan, LinkPod, plan_link
from .scoring import average_bandwidth_utilization

EXIT_INTERNAL = 70


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tdmcore")
def cli() -> None:
    """tdmcore: time-division multiplexing of distributed-training traffic."""


@cli.command("scenarios")
def scenarios_cmd() -> None:
    """List the shipped link scenarios."""
    console = Console()
    table = Table(title="shipped link scenarios")
    table.add_column("name")
    table.add_column("description")
    for name, sc in link_scenarios().items():
        table.add_row(name, sc.title)
    console.print(table)


@cli.command("link")
@click.argument("scenario", required=False)
@click.option("--pod", "pod_specs", multiple=True, metavar="NAME:PERIOD_MS:DUTY:GBPS[:PRIO[:JOB]]",
              help="A pod on the link (repeat); earlier pods count as deployed earlier.")
@click.option("--file", "pod_file", type=click.Path(dir_okay=False, path_type=Path),
              help='JSON file: {"capacity_gbps": B, "pods": [{"name", "period_ms", '
                   '"duty_cycle", "bandwidth_gbps", "priority", "job"}]}.')
@click.option("--capacity", "capacity_gbps", type=float, default=None,
              help="Link capacity in Gbps (default: the scenario's, or 25 with --pod).")
@click.option("--bins", type=int, default=72, show_default=True,
              help="Di-Pre: bins on the traffic circle (>= 8).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("report"), show_default=True,
              help="Folder for the PNG and JSON report.")
@click.option("--no-plot", is_flag=True, help="Skip the PNG.")
def link_cmd(scenario: str | None, pod_specs: tuple[str, ...], pod_file: Path | None,
             capacity_gbps: float | None, bins: int, out_dir: Path, no_plot: bool) -> None:
    """Interleave the pods sharing one link (SCENARIO: see `tdmcore scenarios`).

    Runs the scheduler's search (first perfect interval, Score phase) and the
    controller's (maximum Psi, offline recalculation) and compares both with the
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
                raise click.BadParameter(f"unknown scenario {scenario!r}; "
                                         f"choose from {', '.join(known)}",
                                         param_hint="SCENARIO")
            sc = known[scenario]
            name, title, cap, pods = sc.name, sc.title, sc.capacity_gbps, sc.pods
        elif pod_file is not None:
            cap, pods = load_link_file(pod_file)
            name, title = pod_file.stem, str(pod_file)
        else:
            pods = tuple(parse_pod(text, i) for i, text in enumerate(pod_specs))
            cap = 25.0
        if capacity_gbps is not None:
            cap = capacity_gbps
        plans = {}
        timings = {}
        plan_link(pods, cap, bins=bins, mode="first")  # load the compiled kernels first
        for mode in ("first", "optimal"):
            start = time.perf_counter()
            plans[mode] = plan_link(pods, cap, bins=bins, mode=mode)
            timings[mode] = (time.perf_counter() - start) * 1e3
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    report = out_dir / f"link-{name}.json"
    try:  # fail before printing anything if the report cannot be written
        out_dir.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(_report(plans, timings), indent=2) + "\n", "utf-8")
    except OSError as exc:
        raise click.ClickException(f"out: cannot write {report}: {exc.strerror}") from None

    console = Console()
    _print_plans(console, name, title, plans, timings)
    console.print(f"report: {report}")
    if not no_plot:
        from .plots import plot_traffic_circle

        png = plot_traffic_circle(plans["optimal"], out_dir / f"link-{name}.png")
        console.print(f"traffic circle: {png}")


def _fmt_psi(value: float | None) -> str:
    if value is None:
        return "-"
    return "inf" if value == float("inf") else f"{value:.2f}"


def _print_plans(console: Console, name: str, title: str, plans: dict[str, LinkPlan],
                 timings: dict[str, float]) -> None:
    first, optimal = plans["first"], plans["optimal"]
    base = first.base
    console.print(f"[bold]{name}[/bold]: {title}")
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
    summary.add_row("score (Eq. 18)", f"{first.unshifted_score:.2f}", f"{first.result.score:.2f}",
                    f"{optimal.result.score:.2f}")
    summary.add_row("perfect", "yes" if first.unshifted_score == 100.0 else "no",
                    "yes" if first.result.perfect else "no",
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


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one ``Error: ...`` line for bad input, no traceback."""
    try:
        cli.main(args=argv, standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        print("Error: aborted", file=sys.stderr)
        sys.exit(1)
    except click.UsageError as exc:
        hint = f" (see: {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        print(f"Error: {exc.format_message()}{hint}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        print(f"Error: {exc.format_message()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug: say so in one line, keep the traceback for debugging
        if os.environ.get("TDMCORE_DEBUG"):
            raise
        print(f"tdmcore: internal error: {type(exc).__name__}: {exc} "
              "(set TDMCORE_DEBUG=1 for the traceback)", file=sys.stderr)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
