"""``tdmcore oasis``: OASiS and its baselines on the paper's simulation setting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..._click import FiniteFloat
from ..._validation import MAX_JOBS, MAX_SEED
from ...sim.oasis_setting import MAX_SERVERS, MAX_SLOTS
from ..common import (
    OutDir,
    announce,
    csv_list,
    num,
    option_error,
    progress,
    report_dir,
    write_rows,
)

__all__ = ["oasis_cmd"]


@click.command("oasis")
@click.option("--jobs", "n_jobs", type=click.IntRange(1, MAX_JOBS), default=250,
              show_default=True)
@click.option("--worker-servers", type=click.IntRange(1, MAX_SERVERS), default=20,
              show_default=True)
@click.option("--ps-servers", type=click.IntRange(1, MAX_SERVERS), default=20,
              show_default=True)
@click.option("--slots", "n_slots", type=click.IntRange(1, MAX_SLOTS), default=200,
              show_default=True)
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True)
@click.option("--policies", default="oasis,fifo,drf,rrh,dorm", show_default=True,
              help="Comma-separated policy names.")
@click.option("--l-quantile", type=FiniteFloat(0.0, 1.0, max_open=True), default=None,
              help="Also run OASiS with L from this quantile of the jobs' values "
                   "(PriceBounds.from_jobs(quantile=...)) as 'oasis-L<q>'.")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
def oasis_cmd(n_jobs: int, worker_servers: int, ps_servers: int, n_slots: int, seed: int,
              policies: str, l_quantile: float | None, out_dir: Path) -> None:
    """OASiS and its baselines on the paper's simulation setting (§V-A, Fig. 4-5).

    Columns: total utility, relative to oasis, share of jobs admitted, jobs done,
    utility of the time-critical jobs, their median completion delay minus target
    (slots), median decision time.  oasis-compare.csv/.json in --out has every class.
    """

    from ...oasis.admission import AdmissionPolicy, OasisPolicy
    from ...sim.oasis_setting import oasis_setting
    from ...sim.oasis_study import compare_admission, summarize

    names: list[str | AdmissionPolicy] = list(csv_list(policies, str, "--policies"))
    if not names:
        raise click.ClickException("--policies: name at least one policy")
    console = Console()
    with report_dir(out_dir, "oasis-compare") as report:
        try:
            if l_quantile is not None:
                names.append(OasisPolicy(l_quantile=l_quantile,
                                         name=f"oasis-L{l_quantile:g}"))
            setting = oasis_setting(n_jobs, worker_servers, ps_servers, n_slots, seed)
            with progress() as bar:
                task = bar.add_task("policies", total=len(names))
                runs = compare_admission(setting, names,
                                         progress=lambda _name: bar.advance(task))
        except ValueError as exc:
            raise option_error(exc) from None
        rows = summarize(runs)
        write_rows(report, "oasis-compare", rows)
        _oasis_table(console, rows, n_jobs, worker_servers, ps_servers, n_slots, seed)
    announce(console, report)


def _oasis_table(console: Console, rows: list[dict[str, Any]], n_jobs: int,
                 worker_servers: int, ps_servers: int, n_slots: int, seed: int) -> None:
    from rich import box

    table = Table(title=f"OASiS setting: {n_jobs} jobs, {worker_servers}+{ps_servers} "
                        f"servers, {n_slots} slots, seed {seed}", box=box.SIMPLE_HEAD,
                  show_edge=False, collapse_padding=True, pad_edge=False)
    table.add_column("policy", no_wrap=True)
    for col in ("total\nutility", "vs\noasis", "share\nadmitted", "jobs\ndone",
                "critical\nutility", "critical late\np50, slots", "decision\nms p50"):
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(str(row["policy"]), num(row["total_utility"]), num(row["vs_oasis"], 3),
                      num(row["accepted"], 2), str(row["finished"]),
                      num(row["utility_critical"]), num(row["lateness_critical_p50"]),
                      num(row["decision_ms_p50"], 2))
    console.print(table)
