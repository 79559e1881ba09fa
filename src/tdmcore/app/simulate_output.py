"""What ``tdmcore simulate`` shows and writes: its table, its per-job rows, its
figures (drawn in a :class:`~tdmcore.app.plot_pool.PlotPool` as each group's runs
are done) and the warning about jobs that never finished."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from rich.console import Console
from rich.table import Table

from .common import log, num, progress, write_rows
from .plot_pool import PlotPool
from .report_dir import ReportDir

__all__ = ["FigurePlan", "finish_plots", "print_and_write"]


def print_and_write(console: Console, runs: dict[str, dict[str, Any]],
                     groups: dict[str, Any], stem: str, report: ReportDir,
                     wide: bool) -> None:
    from ..sim.report import job_rows, summary_rows

    rows = summary_rows(runs)
    jobs = job_rows(runs)
    write_rows(report, f"simulate-{stem}", rows)
    write_rows(report, f"simulate-{stem}-jobs", jobs)
    _simulate_table(console, rows, stem, wide)
    for scenario in groups.values():
        console.print(scenario.title, style="dim", highlight=False, markup=False)
    _warn_unfinished(rows, jobs)


def _warn_unfinished(rows: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> None:
    """Say which jobs never finished: their JCT is missing from the table's means."""
    for row in rows:
        if row["finished"] < row["jobs"]:
            names = [j["job"] for j in jobs if j["group"] == row["group"]
                     and j["policy"] == row["policy"] and j["jct_s"] != j["jct_s"]]
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5
                                            else "")
            log.warning("%s / %s: %d of %d job(s) never finished (%s): the cluster never "
                        "had room for them, or the run ended first; their JCT is not in "
                        "the means", row["group"], row["policy"],
                        row["jobs"] - row["finished"], row["jobs"], shown)


def _simulate_table(console: Console, rows: list[dict[str, Any]], stem: str,
                    wide: bool) -> None:
    """The comparison table: 80 columns by default, every column with ``wide``.

    JCTs are in hours when the longest is over two hours; every header names its
    unit; ``±`` columns are the change in % (negative = faster).
    """
    from rich import box

    if not console.is_terminal:  # piped or CI: a known width
        console = Console(width=160 if wide else 80, file=console.file)
    finite = [r["jct_s"] for r in rows if r["jct_s"] == r["jct_s"]]
    hours = bool(finite) and max(finite) > 7200.0
    unit, scale = ("h", 1 / 3600.0) if hours else ("s", 1.0)
    several = len({r["group"] for r in rows}) > 1
    # (header, value of a row, digits, shown by default)
    columns: list[tuple[str, Any, int, bool]] = [
        (f"JCT\n{unit}", lambda r: r["jct_s"] * scale, 2 if hours else 1, True),
        ("JCT\n±def %", lambda r: r.get("jct_vs_default_pct", math.nan), 1, True),
        ("JCT\n±ideal %", lambda r: r.get("jct_vs_ideal_pct", math.nan), 1, False),
        ("high\ns/1k it", lambda r: r["per_1000_high_s"], 1, True),
        ("high\n±ideal %", lambda r: r.get("high_vs_ideal_pct", math.nan), 1, True),
        ("low\ns/1k it", lambda r: r["per_1000_low_s"], 1, False),
        ("low\n±def %", lambda r: r.get("low_vs_default_pct", math.nan), 1, True),
        ("Γ", lambda r: r["gamma"], 3, True),
        ("placed on\narrival", lambda r: r["acceptance"], 2, False),
        ("readj", lambda r: r["readjustments"], 0, False),
    ]
    shown = [c for c in columns if wide or c[3]]
    table = Table(title=f"{stem}: ± = change in % vs default / ideal (negative = faster)",
                  box=box.SIMPLE_HEAD, pad_edge=False,
                  show_edge=False, collapse_padding=True)
    if several:
        table.add_column("", justify="left")
    table.add_column("policy", justify="left", no_wrap=True)
    for header, _, _, _ in shown:
        table.add_column(header, justify="right")
    last_group = None
    for row in rows:
        if last_group is not None and row["group"] != last_group:
            table.add_section()
        last_group = row["group"]
        cells = [num(value(row), digits) if isinstance(value(row), float)
                 else str(value(row)) for _, value, digits, _ in shown]
        table.add_row(*([str(row["group"])] if several else []), str(row["policy"]), *cells)
    console.print(table)


@dataclasses.dataclass(frozen=True)
class FigurePlan:
    """The figures of a ``simulate`` report and their file names: per group, the
    link utilisation and the shared links' circles (drawn as soon as the group's
    runs are done); for the whole run, JCT and iteration times."""

    stem: str
    report: ReportDir
    fmt: str
    several: bool  # more than one group: the group is in the names and titles

    def group(self, pool: PlotPool, group: str, by_policy: dict[str, Any]) -> None:
        tag = f"-{group}" if self.several else ""
        title = f"{self.stem} {group}" if self.several and group != self.stem else self.stem
        pool.submit("plot_link_utilization",
                    (by_policy, self.report.path(f"{self.stem}{tag}-links.{self.fmt}")),
                    {"title": title})
        for name in ("metronome", *by_policy):  # metronome's plans when it ran
            run = by_policy.get(name)
            if run is not None and run.link_plans:
                pool.submit("plot_shared_links",
                            (run, self.report.path(f"{self.stem}{tag}-circle.{self.fmt}")),
                            {"title": title})
                break

    def summary(self, pool: PlotPool, runs: dict[str, dict[str, Any]]) -> None:
        # the slowest figures, drawn before the groups' figures still waiting
        pool.submit("plot_jct", (runs, self.report.path(f"{self.stem}-jct.{self.fmt}")),
                    {"title": self.stem}, first=True)
        pool.submit("plot_iteration_boxes",
                    (runs, self.report.path(f"{self.stem}-iterations.{self.fmt}")),
                    first=True)


def finish_plots(pool: PlotPool) -> None:
    """Wait for the figures, with a progress bar on stderr."""
    with progress() as bar:
        task = bar.add_task("plotting", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        pool.finish(advance)


