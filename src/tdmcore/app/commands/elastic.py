"""``tdmcore elastic``: DRAGON, KOD2 and the weighted scheduler on DRAGON's workloads."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from ..._click import FiniteFloat
from ..._validation import MAX_JOBS, MAX_SEED, did_you_mean
from ...sim.elastic_workloads import MAX_GAP_S
from ..common import (
    OutDir,
    announce,
    csv_list,
    given_flag,
    num,
    option_error,
    progress,
    report_dir,
    write_rows,
)
from ..report_dir import ReportDir

__all__ = ["elastic_cmd"]


@click.command("elastic")
@click.argument("workload", type=click.Choice(["table1", "poisson", "deadlock"]),
                default="table1")
@click.option("--policies", default="dragon,locality,kubeflow,kod2,weighted",
              show_default=True, help="Comma-separated policy names.")
@click.option("--jobs", "n_jobs", type=click.IntRange(1, MAX_JOBS), default=100,
              show_default=True, help="poisson: number of jobs.")
@click.option("--gap", "mean_gap_s", type=FiniteFloat(0, MAX_GAP_S, min_open=True),
              default=200.0, show_default=True, help="poisson: mean inter-arrival gap, s.")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True)
@click.option("--rescale", "rescale_s", type=FiniteFloat(0, 1e9), default=45.0,
              show_default=True, help="Checkpoint-restart time of a rescale, s.")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
def elastic_cmd(workload: str, policies: str, n_jobs: int, mean_gap_s: float, seed: int,
                rescale_s: float, out_dir: Path) -> None:
    """DRAGON, KOD2, the weighted scheduler and the baselines on DRAGON's workloads.

    WORKLOAD: table1 (DRAGON Table 1 on its 2 x 4-GPU testbed), poisson (its
    4 x 8-GPU simulation), deadlock (four 4-worker jobs at once on the testbed).
    Times are means over jobs; a policy that leaves jobs unfinished shows -
    (inf in the CSV, null in the JSON).
    Writes elastic-<workload>.csv/.json to --out.
    """
    from ...elastic import ELASTIC_POLICIES
    from ...sim.elastic_workloads import dragon_poisson, dragon_table1, kubeflow_deadlock

    flag = None if workload == "poisson" else given_flag(
        click.get_current_context(), ("n_jobs", "mean_gap_s", "seed"))
    if flag is not None:
        raise click.UsageError(f"{flag} applies to the poisson workload only, not to "
                               f"{workload}")
    names = csv_list(policies, str, "--policies")
    if not names:
        raise click.ClickException("--policies: name at least one policy")
    for i, name in enumerate(names):
        if name in names[:i]:
            raise click.ClickException(f"--policies: two policies named {name!r}")
        if name not in ELASTIC_POLICIES:
            raise click.ClickException(f"--policies: unknown policy {name!r}"
                                       f"{did_you_mean(name, ELASTIC_POLICIES)}; choose from "
                                       f"{', '.join(ELASTIC_POLICIES)}")
    try:
        if workload == "table1":
            cluster, jobs = dragon_table1()
        elif workload == "poisson":
            cluster, jobs = dragon_poisson(n_jobs, mean_gap_s, seed)
        else:
            cluster, jobs = kubeflow_deadlock()
    except ValueError as exc:
        raise option_error(exc) from None
    with report_dir(out_dir, f"elastic-{workload}") as report:
        _elastic_report(report, workload, names, cluster, jobs, n_jobs, mean_gap_s, seed,
                        rescale_s)
    announce(Console(), report)


def _elastic_report(report: ReportDir, workload: str, names: list[str], cluster: Any,
                    jobs: Any, n_jobs: int, mean_gap_s: float, seed: int,
                    rescale_s: float) -> None:

    from ...elastic import make_elastic_policy
    from ...sim.elastic import run_elastic

    runs = {}
    with progress() as bar:
        task = bar.add_task("policies", total=len(names))
        for name in names:
            try:
                runs[name] = run_elastic(make_elastic_policy(name), cluster, jobs,
                                         rescale_s=rescale_s)
            except ValueError as exc:
                raise click.ClickException(str(exc)) from None
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
        if col == "policy":  # the row labels are never cut; the numbers' columns wrap
            table.add_column(col, no_wrap=True, min_width=max(len(n) for n in runs))
        else:
            table.add_column(col, justify="right")
    for row in rows:
        table.add_row(row["policy"], f"{row['finished']}/{row['jobs']}",
                      num(row["elapsed_s"], 0), num(row["wait_s"], 0),
                      num(row["running_s"], 0), num(row["scaling_s"], 0),
                      num(row["vs_kubeflow"], 2), num(row["gpu_utilization"], 2))
    write_rows(report, f"elastic-{workload}", rows)
    console.print(table)
    for name, run in runs.items():
        if run.deadlocked:
            console.print(f"{name}: {len(run.deadlocked)} job(s) deadlocked, holding pods "
                          f"of partial gangs: {', '.join(run.deadlocked)}")
