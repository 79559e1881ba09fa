"""``tdmcore fidelity``: the Metronome paper's evaluation figures beside the simulator's."""

from __future__ import annotations

import math
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..._click import FiniteFloat
from ..._validation import MAX_SEED
from ...sim.engine.network import MIN_CONTENTION_EFFICIENCY
from ...sim.scenarios import MAX_WINDOW_S, MIN_WINDOW_S
from ..common import (
    OutDir,
    announce,
    num,
    report_dir,
    write_rows,
)

__all__ = ["fidelity_cmd"]


@click.command("fidelity")
@click.option("--window", "window_s", type=FiniteFloat(min=MIN_WINDOW_S, max=MAX_WINDOW_S),
              default=600.0,
              show_default=True, help="Seconds each snapshot job trains at its ideal speed.")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True,
              help="Compute noise and the trace.")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
@click.option("--contention-efficiency", "eta", type=FiniteFloat(MIN_CONTENTION_EFFICIENCY, 1.0),
              default=None, help="Share of a link that contending transfers get together "
              "(default: the calibrated value, `tdmcore calibrate`).")
def fidelity_cmd(window_s: float, seed: int, out_dir: Path, eta: float | None) -> None:
    """The Metronome paper's evaluation figures beside the simulator's.

    Runs the snapshots S1-S5 under default, diktyo, metronome, its ablations and
    ideal, and the 4-hour trace; prints every compared figure with the paper's
    value, ours and the difference, and writes fidelity.csv, fidelity.json and
    fidelity.md (a Markdown table) to --out.
    """
    from ...sim.engine.network import CONTENTION_EFFICIENCY
    from ...sim.fidelity import fidelity_rows

    console = Console()
    with report_dir(out_dir, "fidelity") as report:
        rows = fidelity_rows(window_s, seed,
                             contention_efficiency=CONTENTION_EFFICIENCY if eta is None else eta)
        table = Table(title=f"Metronome paper vs tdmcore (seed {seed}, {window_s:g} s "
                            "windows; sources in fidelity.md)")
        for column in ("section", "figure", "paper", "ours", "ours - paper", "unit"):
            table.add_column(column, justify="right" if column in (
                "paper", "ours", "ours - paper") else "left")
        records = []
        lines = ["| section | figure | paper | ours | ours - paper | unit | source |",
                 "|---|---|---:|---:|---:|---|---|"]
        for row in rows:
            cells = (row.section, row.metric, num(row.paper, 2), num(row.ours, 2),
                     num(row.difference, 2), row.unit, row.source)
            table.add_row(*cells[:-1])
            lines.append("| " + " | ".join(cells) + " |")
            records.append({"section": row.section, "figure": row.metric,
                            "paper": None if math.isnan(row.paper) else row.paper,
                            "ours": None if math.isnan(row.ours) else row.ours,
                            "unit": row.unit, "source": row.source, "note": row.note})
        write_rows(report, "fidelity", records)
        report.path("fidelity.md").write_text("\n".join(lines) + "\n", "utf-8")
        console.print(table)
    announce(console, report)
