"""``tdmcore sweep``: a grid of simulations on Dask (docs/sweeps.md)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..._validation import read_error
from ..common import (
    OutDir,
    announce,
    log,
    num,
    option_error,
    progress,
    report_dir,
    write_rows,
)

__all__ = ["sweep_cmd"]


@click.command("sweep")
@click.argument("spec_file", metavar="SPEC.yaml", required=False,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("--example", "example_name", metavar="NAME",
              help="Run a shipped spec: fig14, monitor-window, period-gap or "
                   "scheduler-time.")
@click.option("--show", is_flag=True, help="Print the spec instead of running it.")
@click.option("--scheduler", metavar="tcp://HOST:PORT",
              help="Run on this Dask cluster (default: a local one on 127.0.0.1).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes of the local cluster (default: every core).")
@click.option("--serial", is_flag=True, help="Run the tasks here, one after the other.")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Finished tasks are kept here "
                                 "(default: ~/.cache/tdmcore/sweeps).")
@click.option("--no-cache", is_flag=True, help="Run every task, keep nothing.")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
@click.option("--no-plots", "--no-plot", "no_plots", is_flag=True, help="Skip the plots.")
@click.option("--plot-format", type=click.Choice(["png", "svg", "pdf"]), default="png",
              show_default=True)
def sweep_cmd(spec_file: Path | None, example_name: str | None, show: bool,
              scheduler: str | None, workers: int | None, serial: bool,
              cache_dir: Path | None, no_cache: bool, out_dir: Path, no_plots: bool,
              plot_format: str) -> None:
    """Run a grid of simulations (scenario x policy x seed x parameters) on Dask.

    SPEC.yaml names the scenario, policies, seeds, fixed and swept parameters and
    metrics (docs/sweeps.md).  Each task runs once: finished ones come from the
    cache; a failed one is reported and retried once.  Writes sweep-<name>.csv/.json
    (one row per task) and a plot per metric and swept parameter to --out; exits 1
    if a task failed twice.
    """
    from ...sim import sweep
    from ..sweep_plots import plot_sweep

    if (spec_file is None) == (example_name is None):
        raise click.UsageError("give exactly one of SPEC.yaml or --example NAME")
    if serial and (scheduler or workers):
        raise click.UsageError("--serial runs here: drop --scheduler/--workers")
    if scheduler and workers:
        raise click.UsageError("--workers sizes the local cluster: drop it with --scheduler")
    try:
        path = Path(sweep.example_path(example_name)) if example_name else spec_file
    except ValueError as exc:
        raise click.BadParameter(str(exc).partition(": ")[2],
                                 param_hint="'--example'") from None
    assert path is not None
    try:
        if show:
            click.echo(path.read_text("utf-8"), nl=False)
            return
        spec = sweep.load_spec(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(read_error(path, exc)) from None
    except ValueError as exc:
        text = str(exc).removeprefix("file: ")  # a read error names the file already
        raise click.ClickException(text if path.name in text
                                   else f"{path.name}: {text}") from None
    if not serial:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise click.ClickException("sweep needs dask.distributed: pip install "
                                       "'tdmcore[sweep]' (or run with --serial)") from None
    cache = None if no_cache else sweep.ResultCache(cache_dir or sweep.default_cache_dir())
    console = Console()
    counts = {"cached": 0, "retried": 0}

    def retry(task: Any, error: str) -> None:
        counts["retried"] += 1
        log.warning("task failed, retrying once: %s: %s", task.describe(), error)

    with report_dir(out_dir, f"sweep-{spec.name}") as report:
        from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

        with progress(TextColumn("{task.description}"), BarColumn(),
                       TextColumn("{task.completed}/{task.total}"),
                       TimeElapsedColumn()) as bar:
            task_bar = bar.add_task(f"sweep {spec.name}", total=len(spec.tasks))

            def done(outcome: Any) -> None:
                counts["cached"] += outcome.cached
                bar.advance(task_bar)

            try:
                outcomes = sweep.run_tasks(spec.tasks, cache=cache, serial=serial,
                                           scheduler=scheduler, workers=workers,
                                           on_done=done, on_retry=retry)
            except ValueError as exc:
                raise option_error(exc) from None
        rows = sweep.result_rows(spec, outcomes)
        write_rows(report, f"sweep-{spec.name}", rows)
        _sweep_table(console, spec, sweep.summary_rows(spec, rows))
        if not no_plots:
            plot_sweep(spec, rows, report.path, plot_format)
    failed = [o for o in outcomes if not o.ok]
    console.print(f"{len(outcomes)} tasks: {counts['cached']} from the cache, "
                  f"{len(outcomes) - counts['cached']} run ({counts['retried']} retried), "
                  f"{len(failed)} failed", highlight=False)
    announce(console, report)
    if failed:
        for outcome in failed:
            log.error("task failed twice: %s: %s", outcome.task.describe(), outcome.error)
        raise click.ClickException(f"{len(failed)} of {len(outcomes)} tasks failed twice "
                                   f"(status and error in sweep-{spec.name}.csv)")


def _sweep_table(console: Console, spec: Any, rows: list[dict[str, Any]]) -> None:
    """The sweep's means over seeds: the swept parameters and the spec's metrics
    (the fixed parameters are in the CSV and the run record)."""
    from rich import box

    if not rows:
        return
    keys = [k for k in rows[0] if k not in spec.fixed
            and not (k == "group" and len(spec.groups) < 2)]
    table = Table(title=spec.title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for key in keys:
        table.add_column(key.rpartition(".")[2], no_wrap=True,
                         justify="left" if key in ("group", "policy") else "right")
    for row in rows:
        table.add_row(*("" if row[k] is None else num(row[k], 3)
                        if isinstance(row[k], float) else str(row[k]) for k in keys))
    # Printed at its natural width, whatever the terminal's: a metric's name has no
    # space to wrap at and a number must never be split, so a narrow terminal wraps
    # whole lines rather than rich cutting headers and values into pieces.
    natural = Console(width=100_000, file=io.StringIO()).measure(table).maximum
    wide = Console(width=max(natural, 80), height=console.height, file=console.file,
                   force_terminal=console.is_terminal, no_color=console.no_color,
                   color_system=console.color_system)  # type: ignore[arg-type]
    wide.print(table)
