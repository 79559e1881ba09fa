"""The simulator's one registry of scenarios, traces and policies (tdmcore.sim.registry):
the command line, its listings and help, and sweeps read it, so a scenario is one
entry; ``ideal`` is a network, not a pseudo-policy."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tdmcore.app.cli import cli
from tdmcore.model import Cluster, Node
from tdmcore.sim import registry, sweep
from tdmcore.sim.cluster import SimCluster, SimJob, run_cluster
from tdmcore.sim.models import model_pattern
from tdmcore.sim.registry import SCENARIOS, ScenarioEntry, ScenarioSource
from tdmcore.sim.scenario_parts import Scenario
from tdmcore.sim.scenarios import metronome_snapshots


def tiny(n_jobs: int = 2, n_nodes: int = 2, seed: int = 0) -> Scenario:
    """A scenario of someone's own: ``n_jobs`` two-worker VGG19 jobs on ``n_nodes``."""
    nodes = [Node(f"n{i}", cpu=32, mem_gib=256, gpu=4, link_gbps=25.0)
             for i in range(n_nodes)]
    sim = SimCluster(Cluster(nodes), np.zeros(n_nodes), np.full((n_nodes, n_nodes), 0.05))
    pattern = model_pattern("VGG19", 2).pattern
    rng = np.random.default_rng(seed)
    jobs = tuple(SimJob(f"j{k}", "VGG19", pattern, 2, int(rng.integers(50, 100)),
                        arrival_s=float(k), spread=True) for k in range(n_jobs))
    return Scenario("tiny", f"{n_jobs} VGG19 jobs", sim, jobs)


def test_adding_a_scenario_is_one_entry(tmp_path: Path, monkeypatch) -> None:
    entry = ScenarioEntry("tiny", "two-worker VGG19 jobs (--jobs, --nodes)", "cluster", tiny)
    monkeypatch.setitem(SCENARIOS, "tiny", entry)
    runner = CliRunner()
    listing = runner.invoke(cli, ["list", "scenarios"])
    assert "tiny" in listing.output and "two-worker VGG19 jobs" in listing.output
    assert "tiny" in runner.invoke(cli, ["simulate", "--help"]).output
    # its parameters are the options of the same name; others are refused
    done = runner.invoke(cli, ["simulate", "tiny", "--jobs", "3", "--policies",
                               "default,ideal", "--no-plots", "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    rows = json.loads((tmp_path / "simulate-tiny.json").read_text())
    assert [(r["policy"], r["jobs"]) for r in rows] == [("default", 3), ("ideal", 3)]
    refused = runner.invoke(cli, ["simulate", "tiny", "--hours", "2", "--out", str(tmp_path)])
    assert refused.exit_code == 2 and "--hours applies to metronome-trace only" in \
        refused.output
    # and a sweep takes it by name, its parameters as scenario.*, the seed as its axis
    spec = sweep.parse_spec({"scenario": "tiny", "policies": ["default"], "seeds": [0, 1],
                             "grid": {"scenario.n_jobs": [1, 2]}})
    assert len(spec.tasks) == 4 and spec.groups == ("tiny",)
    assert {len(sweep.spec.task_scenario(t).jobs) for t in spec.tasks} == {1, 2}
    with pytest.raises(ValueError, match=r"^grid\.scenario\.n_job: unknown parameter "
                                         r"\(did you mean scenario\.n_jobs\?\)"):
        sweep.parse_spec({"scenario": "tiny", "policies": ["default"],
                          "grid": {"scenario.n_job": [1]}})


def test_every_name_a_command_takes_comes_from_the_registry() -> None:
    runner = CliRunner()
    listing = runner.invoke(cli, ["list", "scenarios"]).output
    assert all(name in listing for name in (*SCENARIOS, *registry.link_entries()))
    policies = runner.invoke(cli, ["list", "policies"]).output
    assert all(name in policies for name in registry.NAMED_POLICIES)
    help_text = runner.invoke(cli, ["simulate", "--help"]).output
    assert all(e.name in help_text for e in SCENARIOS.values() if "simulate" in e.commands)
    assert "period-gap" not in help_text.split("Scenarios:")[1]  # a sweep's only
    for name, entry in SCENARIOS.items():
        if "sweep" in entry.commands and entry.kind != "trace":
            assert registry.scenario_source(name).entry is entry


def test_ideal_is_a_network_of_a_run() -> None:
    s1 = metronome_snapshots(window_s=30)["S1"]
    named = run_cluster(s1.sim, s1.jobs, "ideal", seed=3)
    as_network = run_cluster(s1.sim, s1.jobs, "metronome", seed=3, network="ideal")
    assert (named.policy, as_network.policy) == ("ideal", "metronome")
    assert dataclasses.replace(as_network, policy="ideal") == named
    # a baseline on the ideal network: every job alone, nothing slower than alone
    default = run_cluster(s1.sim, s1.jobs, "default", seed=3, network="ideal")
    shared = run_cluster(s1.sim, s1.jobs, "default", seed=3)
    for name, job in default.jobs.items():
        assert job.per_1000_s <= shared.jobs[name].per_1000_s + 1e-9
    with pytest.raises(ValueError, match="^network: 'ideal' runs on the ideal network"):
        run_cluster(s1.sim, s1.jobs, "ideal", network="shared")
    with pytest.raises(ValueError, match="^network: expected one of shared, ideal"):
        run_cluster(s1.sim, s1.jobs, "default", network="private")
    # a sweep sweeps it like any run option
    spec = sweep.parse_spec({"scenario": "metronome-snapshots", "groups": ["S1"],
                             "policies": ["default"], "set": {"scenario.window_s": 30},
                             "grid": {"run.network": ["shared", "ideal"]}})
    assert [t.namespace("run") for t in spec.tasks] == [{"network": "shared"},
                                                        {"network": "ideal"}]


def test_ideal_is_said_to_bound_iteration_time_not_jct() -> None:
    # its JCT can be worse than Metronome's (S1's third job waits for a loop-free
    # placement under both), so it is not "the bound"
    listing = CliRunner().invoke(cli, ["list", "policies"]).output
    assert "the bound" not in listing
    summary = registry.NAMED_POLICIES["ideal"].summary
    assert "bounds each job's time per iteration, not its JCT" in summary


def test_a_source_carries_what_decides_its_scenario(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("submit,workers,duration_s\n0,2,60\n")
    one = registry.trace_source(trace, {"submit": "submit"}, "ms")
    assert one.as_dict() == {"name": "trace", "path": str(trace.resolve()),
                             "digest": one.digest, "columns": [["submit", "submit"]],
                             "time_unit": "ms"}
    trace.write_text("submit,workers,duration_s\n0,2,61\n")
    assert registry.trace_source(trace, {"submit": "submit"}, "ms").digest != one.digest
    assert ScenarioSource("philly").parameters() == ("n_jobs", "n_nodes", "start",
                                                     "max_duration_s")
    assert one.parameters() == ("n_nodes", "start", "n_jobs", "max_duration_s")
    for raw, message in [
            ({"trace": str(tmp_path / "no.csv")}, r"^scenario\.trace: cannot read"),
            ({"trace": str(trace), "columns": {"sumbit": "x"}},
             r"^scenario\.columns: unknown field 'sumbit' \(did you mean 'submit'\?\)"),
            ({"trace": str(trace), "time_unit": "sec"}, r"^scenario\.time_unit: expected"),
            ({"trace": str(trace), "unit": "ms"}, r"^scenario: unknown field\(s\) \['unit'\]"),
            ("trace", r"^scenario: a trace is a mapping"),
            ("oasis", r"^scenario: 'oasis' is a scenario of tdmcore simulate and tdmcore "
                      r"oasis, not here")]:
        with pytest.raises(ValueError, match=message):
            registry.scenario_source(raw)
