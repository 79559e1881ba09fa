"""``tdmcore fidelity``: every compared figure of the paper, with ours beside it."""

from __future__ import annotations

import json
import math
from functools import cache

import pytest
from click.testing import CliRunner

from tdmcore.app.cli import cli
from tdmcore.sim.fidelity import (
    PAPER_TABLE_V,
    PAPER_TABLE_VI,
    PAPER_TABLE_VII,
    PAPER_TABLE_VIII,
    FidelityRow,
    fidelity_rows,
)


@cache
def rows() -> tuple[FidelityRow, ...]:
    return tuple(fidelity_rows(window_s=60.0, seed=0))


def _find(section: str, metric: str) -> FidelityRow:
    (row,) = [r for r in rows() if r.section == section and r.metric == metric]
    return row


def test_every_table_value_of_the_paper_is_compared() -> None:
    for sid, (low, high) in PAPER_TABLE_VI.items():
        sec = f"{sid} time per 1,000 iterations"
        assert _find(sec, "metronome high").paper == high
        assert _find(sec, "metronome low").paper == low
        for policy in ("default", "diktyo", "ideal"):  # Fig. 8 figures: ours only
            assert math.isnan(_find(sec, f"{policy} high").paper)
        for policy, value in zip(("default", "diktyo", "ideal"), PAPER_TABLE_V[sid],
                                 strict=True):
            assert _find(f"{sid} average bandwidth utilization",
                         f"Gamma vs {policy}").paper == value
        lo7, hi7, g7 = PAPER_TABLE_VII[sid]
        assert _find(f"{sid} ablations", "compact: low time").paper == lo7
        assert _find(f"{sid} ablations", "compact: high time").paper == hi7
        assert _find(f"{sid} ablations", "compact: Gamma down").paper == g7
        assert _find(f"{sid} ablations", "no monitor: Gamma down").paper == \
            PAPER_TABLE_VIII[sid]
    assert _find("S2 acceleration", "high vs default").paper == 19.35
    assert _find("trace TCT", "metronome earlier than default").paper == 30.0
    # every figure of ours is a number
    assert all(math.isfinite(r.ours) for r in rows())


def test_our_figures_are_computed_as_the_paper_reads_them() -> None:
    sec = "S1 time per 1,000 iterations"
    met = _find(sec, "metronome high").ours
    ideal = _find(sec, "ideal high").ours
    assert _find(sec, "metronome high vs ideal").ours == pytest.approx(
        100.0 * (met / ideal - 1.0))
    row = _find(sec, "metronome high")
    assert row.difference == pytest.approx(row.ours - row.paper)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="^seed"):
        fidelity_rows(seed=-1)
    with pytest.raises(ValueError, match="^window_s"):
        fidelity_rows(window_s=0.0)


def test_cli_writes_the_table(tmp_path) -> None:
    result = CliRunner().invoke(cli, ["fidelity", "--window", "30", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    md = (tmp_path / "fidelity.md").read_text("utf-8")
    assert md.startswith("| section | figure | paper | ours | ours - paper |")
    assert "| S2 acceleration | high vs default | 19.35 |" in md
    records = json.loads((tmp_path / "fidelity.json").read_text("utf-8"))
    assert len(records) == len(md.splitlines()) - 2
    assert (tmp_path / "fidelity.csv").read_text("utf-8").startswith("section,figure,")
