"""``tdmcore calibrate``: fit the contention efficiency on the Metronome paper's baselines."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..._click import FiniteFloat
from ..._validation import MAX_SEED
from ...sim.scenarios import MAX_WINDOW_S, MIN_WINDOW_S
from ..common import (
    OutDir,
    announce,
    csv_list,
    option_error,
    progress,
    report_dir,
    write_rows,
)

__all__ = ["calibrate_cmd"]


@click.command("calibrate")
@click.option("--fit", default="S1,S2,S3", show_default=True,
              help="Snapshots the contention efficiency is fitted on.")
@click.option("--check", default="S4,S5", show_default=True,
              help="Held-out snapshots, run at the fitted value.")
@click.option("--seeds", default="0,1,2", show_default=True,
              help="Compute noise seeds averaged (the paper ran each experiment 3 times).")
@click.option("--window", "window_s", type=FiniteFloat(min=MIN_WINDOW_S, max=MAX_WINDOW_S),
              default=600.0,
              show_default=True, help="Seconds each snapshot job trains at its ideal speed.")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
def calibrate_cmd(fit: str, check: str, seeds: str, window_s: float, out_dir: Path) -> None:
    """Fit the contention efficiency on the Metronome paper's baselines.

    For every efficiency from 0.30 to 1.00 (step 0.01), runs default and diktyo
    on the --fit snapshots and compares each one's slowdown against ideal with the
    paper's (its Table V); keeps the efficiency with the smallest RMS error and
    reports the --check snapshots at it.  Writes calibrate.csv/.json (the figures)
    and calibrate-curve.csv (the error of every efficiency) to --out.
    """
    from ...sim.calibration import calibrate

    fit_ids = [x.strip() for x in fit.split(",") if x.strip()]
    check_ids = [x.strip() for x in check.split(",") if x.strip()]
    seed_list = csv_list(seeds, int, "--seeds", low=0, high=MAX_SEED)
    if not seed_list:
        raise click.BadParameter("expected at least one seed", param_hint="--seeds")
    console = Console()
    with report_dir(out_dir, "calibrate") as report:
        try:
            from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

            with progress(TextColumn("{task.description}"), BarColumn(),
                           TimeElapsedColumn()) as bar:
                task = bar.add_task("fitting the contention efficiency", total=None)

                def tick(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                result = calibrate(fit_ids, check_ids, seeds=seed_list, window_s=window_s,
                                   progress=tick)
        except ValueError as exc:
            raise option_error(exc) from None
        table = Table(title=f"contention efficiency eta = {result.eta:.2f} (fitted on "
                            f"{', '.join(fit_ids)}; seeds {', '.join(map(str, seed_list))})")
        for column in ("snapshot", "scheduler", "paper", "ours", "error", "role"):
            table.add_column(column, justify="right" if column in (
                "paper", "ours", "error") else "left")
        records = []
        for row in result.rows:
            role = "fitted" if row.fitted else "held out"
            table.add_row(row.snapshot, row.policy, f"{row.paper:.3f}", f"{row.ours:.3f}",
                          f"{100 * row.error:+.1f} %", role)
            records.append({"snapshot": row.snapshot, "scheduler": row.policy,
                            "paper_slowdown": row.paper, "our_slowdown": row.ours,
                            "log_error": row.error, "role": role, "eta": result.eta})
        write_rows(report, "calibrate", records)
        with report.path("calibrate-curve.csv").open("w", encoding="utf-8") as fh:
            fh.write("eta,rms_log_error\n")
            fh.writelines(f"{e:.2f},{r:.6f}\n" for e, r in result.curve)
        console.print(table)
        console.print(f"RMS error: fitted {100 * result.rms(True):.1f} %, held out "
                      f"{100 * result.rms(False):.1f} %")
    announce(console, report)
