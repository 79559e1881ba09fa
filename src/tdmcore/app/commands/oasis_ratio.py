"""``tdmcore oasis-ratio``: offline optimum over OASiS's utility (the paper's Fig. 6)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..._validation import MAX_SEED
from ...sim.oasis_study import RATIO_MAX, RATIO_MAX_PRIORITY
from ..common import (
    OutDir,
    announce,
    csv_list,
    log,
    progress,
    report_dir,
    write_rows,
)

__all__ = ["oasis_ratio_cmd"]


@click.command("oasis-ratio")
@click.option("--servers", default="4,6,8", show_default=True,
              help="Total servers: servers // 2 worker servers, the rest PS servers.")
@click.option("--priorities", default="10,50,100", show_default=True,
              help="Upper ends of the priority range g1 in [1, high].")
@click.option("--scales", default="0.25,0.5,1,2,4", show_default=True,
              help="Estimates of U and L as fractions of their values.")
@click.option("--seeds", default="0,1,2", show_default=True)
@click.option("--jobs", "n_jobs", type=click.IntRange(1, RATIO_MAX), default=10,
              show_default=True)
@click.option("--slots", "n_slots", type=click.IntRange(1, RATIO_MAX), default=15,
              show_default=True)
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
def oasis_ratio_cmd(servers: str, priorities: str, scales: str, seeds: str, n_jobs: int,
                    n_slots: int, out_dir: Path) -> None:
    """Offline optimum / OASiS utility with estimated U and L (the paper's Fig. 6).

    Writes oasis-ratio.csv/.json (one row per instance and scale) to --out.
    """

    from ...sim.oasis_study import performance_ratio_study

    server_list = csv_list(servers, int, "--servers", low=2, high=RATIO_MAX)
    prio_list = csv_list(priorities, float, "--priorities", low=1, high=RATIO_MAX_PRIORITY)
    scale_list = csv_list(scales, float, "--scales", low=0, low_open=True)
    seed_list = csv_list(seeds, int, "--seeds", low=0, high=MAX_SEED)
    for flag, values in (("--servers", server_list), ("--priorities", prio_list),
                         ("--scales", scale_list), ("--seeds", seed_list)):
        if not values:
            raise click.BadParameter("expected at least one value", param_hint=flag)
    total = len(server_list) * len(prio_list) * len(scale_list) * len(seed_list)
    console = Console()
    with report_dir(out_dir, "oasis-ratio") as report:
        try:
            with progress() as bar:
                task = bar.add_task("instances", total=total)
                rows = performance_ratio_study(server_list, prio_list, scale_list,
                                               seed_list, n_jobs=n_jobs, n_slots=n_slots,
                                               progress=lambda: bar.advance(task))
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        out_rows = [{"servers": r.servers, "priority_high": r.priority_high,
                     "scale": r.scale, "seed": r.seed, "offline": round(r.offline, 6),
                     "online": round(r.online, 6), "ratio": round(r.ratio, 6),
                     "offline_optimal": r.offline_optimal} for r in rows]
        write_rows(report, "oasis-ratio", out_rows)
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
                    ratios = [r.ratio for r in rows if r.servers == srv
                              and r.priority_high == high and r.scale == scale]
                    cells.append(f"{sum(ratios) / len(ratios):.3f}")
                table.add_row(str(srv), f"[1, {high:g}]", *cells)
        console.print(table)
        unproven = sum(not r.offline_optimal for r in rows) // max(1, len(scale_list))
        if unproven:
            log.warning("the MILP hit its time limit on %d instance(s): their ratios are "
                        "lower bounds", unproven)
    announce(console, report)
