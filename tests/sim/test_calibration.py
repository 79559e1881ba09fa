"""The contention efficiency and its calibration on the paper (``tdmcore calibrate``)."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from tdmcore.app.cli import cli
from tdmcore.sim.calibration import BASELINES, baseline_slowdowns, calibrate
from tdmcore.sim.cluster import run_cluster
from tdmcore.sim.engine.network import CONTENTION_EFFICIENCY
from tdmcore.sim.fidelity import PAPER_TABLE_V, paper_slowdown
from tdmcore.sim.scenarios import metronome_snapshots


def test_paper_slowdown_reads_table_v_as_times() -> None:
    # S2: Metronome's utilization 23.10 % above default's and 1.88 % below ideal's:
    # T_default / T_ideal = 1.2310 / 0.9812 = 1.2546
    assert paper_slowdown("S2", "default") == pytest.approx(1.2310 / 0.9812)
    # S5 Diktyo: 1.0530 / 0.9612
    assert paper_slowdown("S5", "diktyo") == pytest.approx(1.0530 / 0.9612)
    # every snapshot: the baselines are slower than ideal in the paper
    assert all(paper_slowdown(s, p) > 1.0 for s in PAPER_TABLE_V for p in BASELINES)


def test_slowdowns_grow_as_the_efficiency_falls() -> None:
    # S1 (60 s windows, seed 0): three VGG19 jobs on a ring of three links
    mild = baseline_slowdowns(1.0, ["S1"], seeds=(0,), window_s=60.0)
    harsh = baseline_slowdowns(0.5, ["S1"], seeds=(0,), window_s=60.0)
    for policy in BASELINES:
        assert mild[("S1", policy)] >= 1.0
        assert harsh[("S1", policy)] > mild[("S1", policy)]


def test_ideal_never_contends() -> None:
    sc = metronome_snapshots(60.0)["S2"]
    a = run_cluster(sc.sim, sc.jobs, "ideal", seed=0, contention_efficiency=0.3)
    b = run_cluster(sc.sim, sc.jobs, "ideal", seed=0, contention_efficiency=1.0)
    assert {n: j.per_1000_s for n, j in a.jobs.items()} == \
        {n: j.per_1000_s for n, j in b.jobs.items()}


def test_calibrate_keeps_the_grid_point_with_the_smallest_error() -> None:
    result = calibrate(["S3"], ["S4"], grid=[0.5, 1.0], seeds=(0,), window_s=60.0)
    errors = dict(result.curve)
    assert set(errors) == {0.5, 1.0}
    assert errors[result.eta] == min(errors.values())
    fitted = [r for r in result.rows if r.fitted]
    held = [r for r in result.rows if not r.fitted]
    assert {r.snapshot for r in fitted} == {"S3"} and {r.snapshot for r in held} == {"S4"}
    # the fitted figures' RMS is the curve's value at the kept eta
    assert result.rms(True) == pytest.approx(errors[result.eta], rel=1e-12)
    for row in result.rows:
        assert row.paper == paper_slowdown(row.snapshot, row.policy)
        assert row.error == pytest.approx(math.log(row.ours / row.paper))


@pytest.mark.parametrize("kwargs, name", [
    (dict(fit=["S9"]), "fit"),
    (dict(fit=[]), "fit"),
    (dict(check=["S0"]), "check"),
    (dict(fit=["S1"], check=["S1"]), "check"),
    (dict(grid=[0.0]), "grid"),
    (dict(grid=[1.2]), "grid"),
    (dict(grid=[]), "grid"),
    (dict(seeds=(-1,)), "seeds"),
    (dict(window_s=0.0), "window_s"),
])
def test_bad_calibrations_name_the_argument(kwargs, name) -> None:
    with pytest.raises(ValueError, match=f"^{name}"):
        calibrate(**kwargs)


@pytest.mark.parametrize("value", [0.0, -0.1, 1.01, math.nan, "high"])
def test_run_cluster_refuses_a_bad_efficiency(value) -> None:
    sc = metronome_snapshots(60.0)["S2"]
    with pytest.raises(ValueError, match="^contention_efficiency"):
        run_cluster(sc.sim, sc.jobs, "default", contention_efficiency=value)


def test_calibrate_command_writes_the_figures_and_the_curve(tmp_path) -> None:
    result = CliRunner().invoke(cli, ["calibrate", "--fit", "S3", "--check", "S4",
                                      "--seeds", "0", "--window", "60",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "held out" in result.output
    rows = json.loads((tmp_path / "calibrate.json").read_text())
    assert [(r["snapshot"], r["role"]) for r in rows] == [
        ("S3", "fitted"), ("S3", "fitted"), ("S4", "held out"), ("S4", "held out")]
    curve = (tmp_path / "calibrate-curve.csv").read_text().splitlines()
    assert curve[0] == "eta,rms_log_error" and len(curve) == 72  # 0.30 .. 1.00


def test_calibrate_command_refuses_an_unknown_snapshot(tmp_path) -> None:
    result = CliRunner().invoke(cli, ["calibrate", "--fit", "S7", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].startswith("Error: --fit: unknown snapshot")


@pytest.mark.slow
def test_the_shipped_efficiency_is_the_calibrated_one() -> None:
    # `tdmcore calibrate` with its defaults (S1-S3 fitted, S4-S5 held out, seeds
    # 0-2, 600 s): about a minute on 2 cores
    assert calibrate().eta == CONTENTION_EFFICIENCY
