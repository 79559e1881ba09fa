"""The ``tdmcore`` command line.

``tdmcore link s1`` interleaves the pods of a shipped snapshot on their shared link
and prints the chosen rotations, shifts, score and utilization, then draws the
traffic circle.  Bad input gets a one-line error and a non-zero exit status.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
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


def _csv_list(text: str, kind: type, name: str) -> list[Any]:
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated {kind.__name__}s, got {text!r}",
                                 param_hint=name) from None


def _check_out(out_dir: Path) -> None:
    """Fail before any work if the report folder cannot be created or written; leave
    no trace (folders it had to create are removed again)."""
    missing = [d for d in (out_dir, *out_dir.parents) if not d.exists()]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".tdmcore-write-test"
        probe.write_text("", "utf-8")
        probe.unlink()
    except OSError as exc:
        raise click.ClickException(f"out: cannot write to {out_dir}: {exc.strerror}") \
            from None
    finally:
        for d in missing:  # deepest first
            with contextlib.suppress(OSError):
                d.rmdir()


def _report_rows(console: Console, out_dir: Path, stem: str,
                 rows: list[dict[str, Any]]) -> None:
    """Write the table as CSV and JSON and say where; a one-line error if it cannot."""
    try:
        paths = _write_rows(out_dir, stem, rows)
    except OSError as exc:
        raise click.ClickException(f"out: cannot write to {out_dir}: {exc.strerror}") from None
    console.print("report: " + ", ".join(str(p) for p in paths))


def _write_rows(out_dir: Path, stem: str, rows: list[dict[str, Any]]) -> list[Path]:
    import csv

    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.json"
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    json_path.write_text(json.dumps(rows, indent=2) + "\n", "utf-8")
    return [csv_path, json_path]


def _num(value: Any, digits: int = 1) -> str:
    if isinstance(value, float):
        return "-" if value != value else f"{value:,.{digits}f}"
    return str(value)


@cli.command("fidelity")
@click.option("--window", "window_s", type=click.FloatRange(min=1.0), default=600.0,
              show_default=True, help="Seconds each snapshot job trains at its ideal speed.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Compute noise and the trace.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("report"), show_default=True)
def fidelity_cmd(window_s: float, seed: int, out_dir: Path) -> None:
    """The Metronome paper's evaluation figures beside the simulator's.

    Runs the snapshots S1-S5 under default, diktyo, metronome, its ablations and
    ideal, and the 4-hour trace; prints every compared figure with the paper's
    value, ours and the difference, and writes fidelity.csv, fidelity.json and
    fidelity.md (a Markdown table) to --out.
    """
    from .sim.fidelity import fidelity_rows

    _check_out(out_dir)
    rows = fidelity_rows(window_s, seed)
    table = Table(title=f"Metronome paper vs tdmcore (seed {seed}, {window_s:g} s windows)")
    for column in ("section", "figure", "paper", "ours", "ours - paper", "unit", "source"):
        table.add_column(column, justify="right" if column in ("paper", "ours",
                                                               "ours - paper") else "left")
    records = []
    lines = ["| section | figure | paper | ours | ours - paper | unit | source |",
             "|---|---|---:|---:|---:|---|---|"]
    for row in rows:
        cells = (row.section, row.metric, _num(row.paper, 2), _num(row.ours, 2),
                 _num(row.difference, 2), row.unit, row.source)
        table.add_row(*cells)
        lines.append("| " + " | ".join(cells) + " |")
        records.append({"section": row.section, "figure": row.metric,
                        "paper": None if math.isnan(row.paper) else row.paper,
                        "ours": None if math.isnan(row.ours) else row.ours,
                        "unit": row.unit, "source": row.source, "note": row.note})
    Console().print(table)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fidelity.json").write_text(json.dumps(records, indent=2) + "\n", "utf-8")
    (out_dir / "fidelity.md").write_text("\n".join(lines) + "\n", "utf-8")
    with (out_dir / "fidelity.csv").open("w", encoding="utf-8") as f:
        f.write("section,figure,paper,ours,unit,source\n")
        for r in records:
            f.write(",".join(json.dumps(r[k]) if isinstance(r[k], str) else
                             ("" if r[k] is None else repr(r[k]))
                             for k in ("section", "figure", "paper", "ours", "unit", "source"))
                    + "\n")
    click.echo(f"report: {out_dir / 'fidelity.md'}")


@cli.command("oasis")
@click.option("--jobs", "n_jobs", type=click.IntRange(min=1), default=250, show_default=True)
@click.option("--worker-servers", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--ps-servers", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--slots", "n_slots", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--policies", default="oasis,fifo,drf,rrh,dorm", show_default=True,
              help="Comma-separated policy names.")
@click.option("--l-quantile", type=click.FloatRange(0.0, 1.0, max_open=True), default=None,
              help="Also run OASiS with L from this quantile of the jobs' values "
                   "(PriceBounds.from_jobs(quantile=...)) as 'oasis-L<q>'.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("report"), show_default=True)
def oasis_cmd(n_jobs: int, worker_servers: int, ps_servers: int, n_slots: int, seed: int,
              policies: str, l_quantile: float | None, out_dir: Path) -> None:
    """OASiS and its baselines on the paper's simulation setting (§V-A, Fig. 4-5).

    Columns: total utility, relative to oasis, share of jobs admitted, jobs done,
    utility of the time-critical jobs, their median completion delay minus target
    (slots), median decision time.  oasis-compare.csv/.json in --out has every class.
    """
    from rich.progress import Progress

    from .admission import AdmissionPolicy, OasisPolicy
    from .sim.oasis_setting import oasis_setting
    from .sim.oasis_study import compare_admission, summarize

    names: list[str | AdmissionPolicy] = list(_csv_list(policies, str, "--policies"))
    if not names:
        raise click.ClickException("policies: name at least one policy")
    _check_out(out_dir)
    try:
        if l_quantile is not None:
            names.append(OasisPolicy(l_quantile=l_quantile, name=f"oasis-L{l_quantile:g}"))
        setting = oasis_setting(n_jobs, worker_servers, ps_servers, n_slots, seed)
        with Progress(transient=True) as bar:
            task = bar.add_task("policies", total=len(names))
            runs = compare_admission(setting, names,
                                     progress=lambda _name: bar.advance(task))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    rows = summarize(runs)
    console = Console()
    table = Table(title=f"OASiS setting: {n_jobs} jobs, {worker_servers}+{ps_servers} "
                        f"servers, {n_slots} slots, seed {seed}")
    for col in ("policy", "utility", "vs oasis", "accepted", "done", "critical",
                "late p50", "ms p50"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for row in rows:
        table.add_row(str(row["policy"]), _num(row["total_utility"]), _num(row["vs_oasis"], 3),
                      _num(row["accepted"], 2), str(row["finished"]),
                      _num(row["utility_critical"]), _num(row["lateness_critical_p50"]),
                      _num(row["decision_ms_p50"], 2))
    console.print(table)
    _report_rows(console, out_dir, "oasis-compare", rows)


@cli.command("oasis-ratio")
@click.option("--servers", default="4,6,8", show_default=True,
              help="Total servers: servers // 2 worker servers, the rest PS servers.")
@click.option("--priorities", default="10,50,100", show_default=True,
              help="Upper ends of the priority range g1 in [1, high].")
@click.option("--scales", default="0.25,0.5,1,2,4", show_default=True,
              help="Estimates of U and L as fractions of their values.")
@click.option("--seeds", default="0,1,2", show_default=True)
@click.option("--jobs", "n_jobs", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--slots", "n_slots", type=click.IntRange(min=1), default=15, show_default=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("report"), show_default=True)
def oasis_ratio_cmd(servers: str, priorities: str, scales: str, seeds: str, n_jobs: int,
                    n_slots: int, out_dir: Path) -> None:
    """Offline optimum / OASiS utility with estimated U and L (the paper's Fig. 6).

    Writes oasis-ratio.csv/.json (one row per instance and scale) to --out.
    """
    from rich.progress import Progress

    from .sim.oasis_study import performance_ratio_study

    server_list = _csv_list(servers, int, "--servers")
    prio_list = _csv_list(priorities, float, "--priorities")
    scale_list = _csv_list(scales, float, "--scales")
    seed_list = _csv_list(seeds, int, "--seeds")
    _check_out(out_dir)
    total = len(server_list) * len(prio_list) * len(scale_list) * len(seed_list)
    try:
        with Progress(transient=True) as bar:
            task = bar.add_task("instances", total=total)
            rows = performance_ratio_study(server_list, prio_list, scale_list, seed_list,
                                           n_jobs=n_jobs, n_slots=n_slots,
                                           progress=lambda: bar.advance(task))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    console = Console()
    table = Table(title=f"offline optimum / OASiS ({n_jobs} jobs, {n_slots} slots, "
                        f"mean over seeds {','.join(map(str, seed_list))})")
    table.add_column("servers", justify="right")
    table.add_column("g1 range", justify="right")
    for scale in scale_list:
        table.add_column(f"U,L x{scale:g}", justify="right")
    for srv in server_list:
        for high in prio_list:
            cells = []
            for scale in scale_list:
                ratios = [r.ratio for r in rows if r.servers == srv and r.priority_high == high
                          and r.scale == scale]
                cells.append(f"{sum(ratios) / len(ratios):.3f}")
            table.add_row(str(srv), f"[1, {high:g}]", *cells)
    console.print(table)
    unproven = sum(not r.offline_optimal for r in rows) // max(1, len(scale_list))
    if unproven:
        console.print(f"warning: the MILP hit its time limit on {unproven} instance(s): "
                      "their ratios are lower bounds")
    out_rows = [{"servers": r.servers, "priority_high": r.priority_high, "scale": r.scale,
                 "seed": r.seed, "offline": round(r.offline, 6), "online": round(r.online, 6),
                 "ratio": round(r.ratio, 6), "offline_optimal": r.offline_optimal}
                for r in rows]
    _report_rows(console, out_dir, "oasis-ratio", out_rows)


@cli.command("elastic")
@click.argument("workload", type=click.Choice(["table1", "poisson", "deadlock"]),
                default="table1")
@click.option("--policies", default="dragon,locality,kubeflow,kod2,weighted",
              show_default=True, help="Comma-separated policy names.")
@click.option("--jobs", "n_jobs", type=click.IntRange(min=1), default=100, show_default=True,
              help="poisson: number of jobs.")
@click.option("--gap", "mean_gap_s", type=click.FloatRange(min=0, min_open=True),
              default=200.0, show_default=True, help="poisson: mean inter-arrival gap, s.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--rescale", "rescale_s", type=click.FloatRange(min=0), default=45.0,
              show_default=True, help="Checkpoint-restart time of a rescale, s.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("report"), show_default=True)
def elastic_cmd(workload: str, policies: str, n_jobs: int, mean_gap_s: float, seed: int,
                rescale_s: float, out_dir: Path) -> None:
    """DRAGON, KOD2, the weighted scheduler and the baselines on DRAGON's workloads.

    WORKLOAD: table1 (DRAGON Table 1 on its 2 x 4-GPU testbed), poisson (its
    4 x 8-GPU simulation), deadlock (four 4-worker jobs at once on the testbed).
    Times are means over jobs; a policy that leaves jobs unfinished shows inf.
    Writes elastic-<workload>.csv/.json to --out.
    """
    import math

    from rich.progress import Progress

    from .elastic import ELASTIC_POLICIES, make_elastic_policy
    from .sim.elastic import run_elastic
    from .sim.elastic_workloads import dragon_poisson, dragon_table1, kubeflow_deadlock

    names = _csv_list(policies, str, "--policies")
    if not names:
        raise click.ClickException("policies: name at least one policy")
    _check_out(out_dir)
    for name in names:
        if name not in ELASTIC_POLICIES:
            raise click.ClickException(f"policies: unknown policy {name!r}; choose from "
                                       f"{', '.join(ELASTIC_POLICIES)}")
    if workload == "table1":
        cluster, jobs = dragon_table1()
    elif workload == "poisson":
        cluster, jobs = dragon_poisson(n_jobs, mean_gap_s, seed)
    else:
        cluster, jobs = kubeflow_deadlock()
    runs = {}
    with Progress(transient=True) as bar:
        task = bar.add_task("policies", total=len(names))
        for name in names:
            runs[name] = run_elastic(make_elastic_policy(name), cluster, jobs,
                                     rescale_s=rescale_s)
            bar.advance(task)
    base = runs["kubeflow"].mean("elapsed_s") if "kubeflow" in runs else math.nan
    rows: list[dict[str, Any]] = []
    for name, run in runs.items():
        elapsed = run.mean("elapsed_s")
        rows.append({
            "policy": name, "jobs": len(run.outcomes), "finished": run.finished,
            "deadlocked": len(run.deadlocked),
            "elapsed_s": round(elapsed, 2), "wait_s": round(run.mean("wait_s"), 2),
            "running_s": round(run.mean("running_s"), 2),
            "scaling_s": round(run.mean("scaling_s"), 2),
            "vs_kubeflow": (round(elapsed / base, 4) if math.isfinite(elapsed)
                            and math.isfinite(base) and base > 0 else math.nan),
            "gpu_utilization": round(run.gpu_utilization, 4),
            "makespan_s": round(run.makespan_s, 2),
            "decision_ms_p50": round(float(np.median(run.decision_s)) * 1e3, 4)
            if run.decision_s.size else math.nan,
        })
    console = Console()
    title = {"table1": "DRAGON Table 1, 2 x 4 GPUs",
             "poisson": f"Poisson, {n_jobs} jobs, mean gap {mean_gap_s:g} s, seed {seed}, "
                        "4 x 8 GPUs",
             "deadlock": "four 4-worker jobs at once, 2 x 4 GPUs"}[workload]
    table = Table(title=title)
    for col in ("policy", "done", "elapsed s", "wait s", "run s", "scaling s",
                "vs kubeflow", "GPU util"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for row in rows:
        table.add_row(row["policy"], f"{row['finished']}/{row['jobs']}",
                      _num(row["elapsed_s"], 0), _num(row["wait_s"], 0),
                      _num(row["running_s"], 0), _num(row["scaling_s"], 0),
                      _num(row["vs_kubeflow"], 2), _num(row["gpu_utilization"], 2))
    console.print(table)
    for name, run in runs.items():
        if run.deadlocked:
            console.print(f"{name}: {len(run.deadlocked)} job(s) deadlocked, holding pods "
                          f"of partial gangs: {', '.join(run.deadlocked)}")
    _report_rows(console, out_dir, f"elastic-{workload}", rows)


CLUSTER_SCENARIOS = ("metronome-snapshots", "metronome-trace", "philly")
OTHER_SCENARIOS = ("dragon-testbed", "oasis")


@cli.command("simulate")
@click.argument("scenario", metavar="SCENARIO|FILE")
@click.option("--policies", default=None,
              help="Comma-separated policy names (default: every applicable policy).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Compute noise and generated workloads.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("report"), show_default=True)
@click.option("--window", "window_s", type=click.FloatRange(min=1.0), default=600.0,
              show_default=True,
              help="metronome-snapshots: seconds each job trains at its ideal speed.")
@click.option("--hours", type=click.FloatRange(0.0, 48.0, min_open=True), default=4.0,
              show_default=True, help="metronome-trace: length of the trace.")
@click.option("--load", type=click.FloatRange(0.0, 1.0, min_open=True), default=0.7,
              show_default=True, help="metronome-trace: expected GPU load.")
@click.option("--jobs", "n_jobs", type=click.IntRange(min=1), default=200, show_default=True,
              help="philly: jobs in the slice.")
@click.option("--nodes", "n_nodes", type=click.IntRange(1, 4096), default=16,
              show_default=True, help="philly: nodes of 8 GPUs.")
@click.option("--start", type=click.IntRange(min=0), default=0, show_default=True,
              help="philly: index of the slice's first job (in submit order).")
@click.option("--max-duration", "max_duration_s",
              type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="philly: truncate jobs to this many seconds.")
@click.option("--no-plots", "--no-plot", "no_plots", is_flag=True,
              help="Skip the plots (tables only).")
@click.option("--queue", type=click.Choice(["backoff", "fifo"]), default="backoff",
              show_default=True,
              help="Waiting gangs: kube-scheduler back-off (the others are tried "
                   "meanwhile) or strict head-of-line FIFO.")
@click.pass_context
def simulate_cmd(ctx: click.Context, scenario: str, policies: str | None, seed: int,
                 out_dir: Path, window_s: float, hours: float, load: float, n_jobs: int,
                 n_nodes: int, start: int, max_duration_s: float | None,
                 no_plots: bool, queue: str) -> None:
    """Run every applicable policy side by side on a scenario and write the report.

    SCENARIO: metronome-snapshots (S0-S5 on the paper's testbed), metronome-trace
    (a Gavel-style 4 h trace), philly (a slice of the real Philly trace),
    dragon-testbed (DRAGON's Table 1 and Poisson workloads), oasis (the OASiS
    setting), or a YAML/JSON scenario file (see examples/scenario.yaml).

    Prints one row per policy with its change relative to default and to ideal
    (negative = faster), and writes simulate-<name>.csv/.json (the table),
    simulate-<name>-jobs.csv/.json (every job) and plots to --out.
    """
    if scenario == "dragon-testbed":
        for workload in ("table1", "poisson"):
            kwargs: dict[str, Any] = {"workload": workload, "seed": seed, "out_dir": out_dir}
            if policies is not None:
                kwargs["policies"] = policies
            ctx.invoke(elastic_cmd, **kwargs)
        return
    if scenario == "oasis":
        kwargs = {"seed": seed, "out_dir": out_dir}
        if policies is not None:
            kwargs["policies"] = policies
        ctx.invoke(oasis_cmd, **kwargs)
        return
    from .sim.cluster import CLUSTER_POLICIES

    names = list(CLUSTER_POLICIES) if policies is None else _csv_list(policies, str,
                                                                       "--policies")
    if not names:
        raise click.ClickException("policies: name at least one policy")
    for name in names:
        if name not in CLUSTER_POLICIES:
            raise click.ClickException(f"policies: unknown policy {name!r} for {scenario}; "
                                       f"choose from {', '.join(CLUSTER_POLICIES)}")
    try:
        groups, stem = _cluster_scenarios(scenario, seed, window_s, hours, load, n_jobs,
                                          n_nodes, start, max_duration_s)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    _check_out(out_dir)
    runs = _run_groups(groups, names, seed, queue)
    _print_and_write(runs, groups, stem, out_dir, no_plots)


def _cluster_scenarios(scenario: str, seed: int, window_s: float, hours: float, load: float,
                       n_jobs: int, n_nodes: int, start: int, max_duration_s: float | None
                       ) -> tuple[dict[str, Any], str]:
    from .sim import scenarios as sc

    if scenario == "metronome-snapshots":
        return dict(sc.metronome_snapshots(window_s)), scenario
    if scenario == "metronome-trace":
        trace = sc.metronome_trace(seed, hours, load)
        return {"trace": trace}, scenario
    if scenario == "philly":
        slice_ = sc.philly(n_jobs, n_nodes, start, seed, max_duration_s)
        return {"philly": slice_}, scenario
    path = Path(scenario)
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        from .sim.scenario_file import load_scenario_file

        loaded = load_scenario_file(path)
        return {loaded.name: loaded}, loaded.name
    raise ValueError(f"scenario: unknown scenario {scenario!r}; choose from "
                     f"{', '.join(CLUSTER_SCENARIOS + OTHER_SCENARIOS)} or give a "
                     ".yaml/.yml/.json file")


def _run_groups(groups: dict[str, Any], names: list[str], seed: int,
                queue: str = "backoff") -> dict[str, dict[str, Any]]:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from .sim.cluster import run_cluster

    runs: dict[str, dict[str, Any]] = {}
    first = next(iter(groups.values()))
    warm = [dataclasses.replace(j, iterations=min(j.iterations, 20)) for j in first.jobs[:2]]
    for name in names:  # compile the kernels first: decision latencies exclude it
        run_cluster(first.sim, warm, name, seed=seed)
    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task("simulating", total=len(groups) * len(names))
        for group, scenario in groups.items():
            runs[group] = {}
            for name in names:
                label = f"{group} / {name}"
                bar.update(task, description=label)

                def tick(t_ms: float, label: str = label) -> None:
                    bar.update(task, description=f"{label}: {t_ms / 3.6e6:.2f} h simulated")

                runs[group][name] = run_cluster(scenario.sim, scenario.jobs, name, seed=seed,
                                                queue=queue,
                                                progress=tick)
                bar.advance(task)
    return runs


def _print_and_write(runs: dict[str, dict[str, Any]], groups: dict[str, Any], stem: str,
                     out_dir: Path, no_plots: bool) -> None:
    from .sim.report import job_rows, summary_rows

    rows = summary_rows(runs)
    console = Console()
    if not console.is_terminal:  # piped or CI: wide enough for the table
        console = Console(width=max(console.width, 120))
    from rich import box

    table = Table(title=f"simulate {stem}: mean JCT, time per 1,000 iterations of high- and "
                        "low-priority jobs; change in % vs default / vs ideal "
                        "(negative = faster)", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("", "policy", "JCT s", "±def", "±ideal", "high s", "±ideal", "low s",
                "±def", "Γ", "acc", "readj"):
        table.add_column(col, justify="left" if col in ("", "policy") else "right")
    last_group = None
    for row in rows:
        if last_group is not None and row["group"] != last_group:
            table.add_section()
        last_group = row["group"]
        table.add_row(str(row["group"]), str(row["policy"]), _num(row["jct_s"], 1),
                      _num(row.get("jct_vs_default_pct", math.nan), 1),
                      _num(row.get("jct_vs_ideal_pct", math.nan), 1),
                      _num(row["per_1000_high_s"], 1),
                      _num(row.get("high_vs_ideal_pct", math.nan), 1),
                      _num(row["per_1000_low_s"], 1),
                      _num(row.get("low_vs_default_pct", math.nan), 1),
                      _num(row["gamma"], 3), _num(row["acceptance"], 2),
                      str(row["readjustments"]))
    console.print(table)
    for scenario in groups.values():
        console.print(f"[dim]{scenario.title}[/dim]")
    _report_rows(console, out_dir, f"simulate-{stem}", rows)
    _report_rows(console, out_dir, f"simulate-{stem}-jobs", job_rows(runs))
    if no_plots:
        return
    from .sim import plots

    written: list[Path] = []
    try:
        written.append(plots.plot_iteration_boxes(runs, out_dir / f"{stem}-iterations.png"))
        for group, by_policy in runs.items():
            tag = f"-{group}" if len(runs) > 1 else ""
            written.append(plots.plot_link_utilization(
                by_policy, out_dir / f"{stem}{tag}-links.png", title=f"{stem} {group}"))
            for name in ("metronome", *by_policy):
                run = by_policy.get(name)
                if run is not None and run.link_plans:
                    path = plots.plot_shared_links(run, out_dir / f"{stem}{tag}-circle.png")
                    if path is not None:
                        written.append(path)
                    break
    except OSError as exc:
        raise click.ClickException(f"out: cannot write to {out_dir}: {exc.strerror}") from None
    console.print("plots: " + ", ".join(str(p) for p in written))


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
