"""Scenario files (YAML/JSON): what a valid file builds, and every bad field named."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import tdmcore.sim.scenario_file as sf
from tdmcore.sim.cluster import SimJob, run_cluster
from tdmcore.sim.models import MODELS, model_pattern
from tdmcore.sim.scenario_file import load_scenario_file
from tdmcore.sim.scenarios import Scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tdmcore" / "examples" / "scenario.yaml"


def base() -> dict[str, Any]:
    """A valid scenario touching every feature; the bad inputs below edit a copy."""
    return {
        "name": "t",
        "title": "T",
        "cluster": {
            "nodes": [
                {"name": "a", "cpu": 32, "mem_gib": 256, "gpu": 4, "link_gbps": 25,
                 "background_gbps": 5},
                {"name": "b", "cpu": 16, "mem_gib": 128, "gpu": 2, "link_gbps": 25,
                 "count": 2},
                {"name": "c", "cpu": 20, "mem_gib": 32, "gpu": 1, "link_gbps": 10},
            ],
            "latency_ms": {"default": 0.05, "pairs": [{"a": "a", "b": "b-1", "ms": 1.0}]},
            "workloads": [{"name": "hpo", "jobs": ["j1", "j2"],
                           "dependencies": [["j1", "j2"]]}],
        },
        "jobs": [
            {"name": "j1", "model": "VGG19", "workers": 2, "iterations": 50,
             "priority": "high", "workload": "hpo"},
            {"name": "j2", "model": "VGG16", "workers": 2, "duration_s": 10,
             "period_ms": 98.68, "arrival_s": 1.5, "priority": "low"},
            {"name": "j3", "pattern": {"period_ms": 100, "duty_cycle": 0.3,
                                       "bandwidth_gbps": 10},
             "workers": 3, "iterations": 20, "gpu": 0.5, "cpu": 2, "mem_gib": 8,
             "priority": 3},
            {"name": "j4", "pattern": None, "workers": 1, "duration_s": 3.4},
        ],
    }


def write(tmp_path: Path, data: Any, suffix: str = ".yaml", stem: str = "sc") -> Path:
    path = tmp_path / f"{stem}{suffix}"
    if isinstance(data, str):
        path.write_text(data)
    elif suffix == ".json":
        path.write_text(json.dumps(data, indent=1))
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def load(tmp_path: Path, data: Any, suffix: str = ".yaml") -> Scenario:
    return load_scenario_file(write(tmp_path, data, suffix))


def summary(sc: Scenario) -> tuple[Any, ...]:
    """Everything a scenario holds except its notes (the file path)."""
    c = sc.sim.cluster
    return (sc.name, sc.title, c.nodes, c.latency.tolist(), c.workloads,
            sc.sim.background_gbps.tolist(), sc.sim.latency_ms.tolist(), sc.jobs)


# ---------------------------------------------------------------------- valid files
def test_base_scenario(tmp_path: Path) -> None:
    path = write(tmp_path, base())
    sc = load_scenario_file(path)
    assert (sc.name, sc.title, sc.notes) == ("t", "T", {"file": str(path)})
    assert [n.name for n in sc.sim.cluster.nodes] == ["a", "b-1", "b-2", "c"]
    assert sc.sim.background_gbps.tolist() == [5.0, 0.0, 0.0, 0.0]
    j1, j2, j3, j4 = sc.jobs
    # model patterns at the fastest link of the cluster (25, not c's 10)
    assert j1.pattern == model_pattern("VGG19", 2, 25.0).pattern
    assert j1.model == "VGG19" and j1.iterations == 50 and j1.priority == 1
    assert j2.pattern == model_pattern("VGG16", 2, 25.0, period_ms=98.68).pattern
    assert j2.arrival_s == 1.5 and j2.priority == 0
    assert (j3.gpu, j3.cpu, j3.mem_gib, j3.priority) == (0.5, 2.0, 8.0, 3)
    # SimJob's defaults where the file gives none
    assert (j1.gpu, j1.cpu, j1.mem_gib, j1.arrival_s) == (1.0, 4.0, 16.0, 0.0)
    # j2 is listed in the workload without naming it: it belongs to it
    assert [j.workload for j in sc.jobs] == ["hpo", "hpo", None, None]
    w = sc.sim.cluster.workloads["hpo"]
    assert w.jobs == ("j1", "j2") and w.dependencies == (("j1", "j2"),)


def test_yaml_and_json_give_equal_scenarios(tmp_path: Path) -> None:
    a = load_scenario_file(write(tmp_path, base(), ".yaml"))
    b = load_scenario_file(write(tmp_path, base(), ".json"))
    c = load_scenario_file(write(tmp_path, base(), ".yml", stem="other"))
    assert summary(a) == summary(b) == summary(c)
    assert a.notes["file"].endswith("sc.yaml") and b.notes["file"].endswith("sc.json")


def test_name_and_title_default_to_file_stem(tmp_path: Path) -> None:
    data = base()
    del data["name"], data["title"]
    sc = load_scenario_file(write(tmp_path, data, stem="my-cluster"))
    assert (sc.name, sc.title) == ("my-cluster", "my-cluster")


def test_accepts_str_and_path(tmp_path: Path) -> None:
    path = write(tmp_path, base())
    assert summary(load_scenario_file(str(path))) == summary(load_scenario_file(path))


def test_count_expansion(tmp_path: Path) -> None:
    data = base()
    data["cluster"]["nodes"][1]["count"] = 3
    data["cluster"]["nodes"][1]["background_gbps"] = 2.5
    data["cluster"]["nodes"][2]["count"] = 1
    sc = load(tmp_path, data)
    nodes = sc.sim.cluster.nodes
    assert [n.name for n in nodes] == ["a", "b-1", "b-2", "b-3", "c-1"]
    assert all((n.cpu, n.mem_gib, n.gpu, n.link_gbps) == (16, 128, 2, 25) for n in nodes[1:4])
    assert sc.sim.background_gbps.tolist() == [5.0, 2.5, 2.5, 2.5, 0.0]
    assert sc.sim.latency_ms.shape == (5, 5)


def test_latency_mapping_form(tmp_path: Path) -> None:
    sc = load(tmp_path, base())
    lat = np.full((4, 4), 0.05)
    lat[0, 1] = lat[1, 0] = 1.0
    np.fill_diagonal(lat, 0.0)
    np.testing.assert_array_equal(sc.sim.latency_ms, lat)
    tau = lat / 0.05
    np.fill_diagonal(tau, 1.0)
    np.testing.assert_allclose(sc.sim.cluster.latency, tau)
    assert sc.sim.cluster.latency[0, 1] == pytest.approx(20.0)
    assert np.all(np.diag(sc.sim.cluster.latency) == 1.0)


def test_latency_matrix_form_matches_mapping_form(tmp_path: Path) -> None:
    mapping = load(tmp_path, base())
    data = base()
    data["cluster"]["latency_ms"] = [[0, 1.0, 0.05, 0.05],
                                     [1.0, 0, 0.05, 0.05],
                                     [0.05, 0.05, 0, 0.05],
                                     [0.05, 0.05, 0.05, 0]]
    matrix = load(tmp_path, data, ".json")
    np.testing.assert_array_equal(matrix.sim.latency_ms, mapping.sim.latency_ms)
    np.testing.assert_array_equal(matrix.sim.cluster.latency, mapping.sim.cluster.latency)


def test_latency_scale_falls_back_to_one(tmp_path: Path) -> None:
    data = base()  # a zero off-diagonal latency: tau is latency_ms / 1.0
    data["cluster"]["latency_ms"] = {"default": 0.5, "pairs": [{"a": "c", "b": "b-2", "ms": 0}]}
    sc = load(tmp_path, data)
    expected = np.full((4, 4), 0.5)
    expected[3, 2] = expected[2, 3] = 0.0
    np.fill_diagonal(expected, 1.0)
    np.testing.assert_array_equal(sc.sim.cluster.latency, expected)
    data = base()  # one node: no off-diagonal entry
    data["cluster"]["nodes"] = [data["cluster"]["nodes"][0]]
    data["cluster"]["latency_ms"] = [[0]]
    sc = load(tmp_path, data)
    assert sc.sim.cluster.latency.tolist() == [[1.0]]
    assert sc.sim.latency_ms.tolist() == [[0.0]]


def test_no_latency_is_a_flat_network(tmp_path: Path) -> None:
    data = base()
    del data["cluster"]["latency_ms"], data["cluster"]["workloads"], data["jobs"][0]["workload"]
    sc = load(tmp_path, data)
    assert np.all(sc.sim.cluster.latency == 1.0)
    assert np.all(sc.sim.latency_ms == 0.0)
    assert sc.sim.cluster.workloads == {}
    assert all(j.workload is None for j in sc.jobs)


def test_duration_s_becomes_iterations(tmp_path: Path) -> None:
    data = base()
    data["jobs"][2]["duration_s"] = 0.01  # 10 ms of a 100 ms period: at least 1
    del data["jobs"][2]["iterations"]
    sc = load(tmp_path, data)
    j2, j3, j4 = sc.jobs[1:]
    assert j2.iterations == round(10_000 / 98.68) == 101
    assert j3.iterations == 1
    assert j4.iterations == 3  # LowComm: 1,000 ms per iteration, 3.4 s
    assert j4.period_ms == 1000.0
    data["jobs"][3]["iteration_ms"] = 200.0  # declared: 3.4 s is 17 iterations
    j4 = load(tmp_path, data).jobs[3]
    assert (j4.iterations, j4.period_ms, j4.iteration_ms) == (17, 200.0, 200.0)


def test_pattern_and_lowcomm_jobs(tmp_path: Path) -> None:
    sc = load(tmp_path, base())
    j3, j4 = sc.jobs[2:]
    assert j3.model == "custom"
    assert j3.pattern is not None
    assert (j3.pattern.period_ms, j3.pattern.duty_cycle, j3.pattern.bandwidth_gbps) == \
        (100.0, 0.3, 10.0)
    assert j4.model == "LowComm" and j4.pattern is None
    assert all(p.low_comm for p in j4.pods())


def test_every_model_loads(tmp_path: Path) -> None:
    data = base()
    data["cluster"]["workloads"] = []
    data["jobs"] = [{"name": f"m{k}", "model": m, "workers": 2, "iterations": 1}
                    for k, m in enumerate(MODELS)]
    sc = load(tmp_path, data)
    assert [j.model for j in sc.jobs] == list(MODELS)


def test_yaml_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    text = """
cluster:
  nodes:
    - &n {name: a, cpu: 8, mem_gib: 64, gpu: 2, link_gbps: 25}
    - {<<: *n, name: b}
jobs:
  - {name: j, pattern: null, workers: 1, iterations: 1}
"""
    sc = load(tmp_path, text)
    assert [n.name for n in sc.sim.cluster.nodes] == ["a", "b"]


def test_example_file_loads_and_runs() -> None:
    sc = load_scenario_file(EXAMPLE)
    assert len(sc.sim.cluster) == 4 and len(sc.jobs) == 3
    assert np.count_nonzero(sc.sim.background_gbps) == 1
    assert len(sc.sim.cluster.workloads) == 1
    result = run_cluster(sc.sim, sc.jobs, "default")
    assert set(result.jobs) == {j.name for j in sc.jobs}
    assert all(r.end_ms is not None for r in result.jobs.values())


# ------------------------------------------------------------------------ bad inputs
Edit = Callable[[dict[str, Any]], None]


def put(*keys_value: Any) -> Edit:
    """Set ``data[k0][k1]...[kn] = value`` (a list index one past the end appends)."""
    *keys, value = keys_value

    def edit(data: dict[str, Any]) -> None:
        target: Any = data
        for k in keys[:-1]:
            target = target[k]
        if isinstance(target, list) and keys[-1] == len(target):
            target.append(value)
        else:
            target[keys[-1]] = value
    return edit


def drop(*keys: Any) -> Edit:
    """Delete ``data[k0][k1]...[kn]``."""
    def edit(data: dict[str, Any]) -> None:
        target: Any = data
        for k in keys[:-1]:
            target = target[k]
        del target[keys[-1]]
    return edit


def both(*edits: Edit) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        for e in edits:
            e(data)
    return edit


J, N, C = "jobs", ("cluster", "nodes"), "cluster"
MATRIX = [[0, 1, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]]

#: (id, edit of base(), the message's expected start).  Each runs as YAML and JSON.
BAD_DATA: list[tuple[str, Edit, str]] = [
    # top level
    ("top-unknown", put("noise_sigma", 0.01), "file: unknown field(s) ['noise_sigma']"),
    ("no-cluster", drop("cluster"), "cluster: required field missing"),
    ("no-jobs", drop("jobs"), "jobs: required field missing"),
    ("jobs-empty", put("jobs", []), "jobs: expected a non-empty list, got an empty list"),
    ("jobs-mapping", put("jobs", {"j1": {}}), "jobs: expected a non-empty list, got a mapping"),
    ("name-int", put("name", 5), "name: expected a non-empty string, got 5"),
    ("title-empty", put("title", ""), "title: expected a non-empty string, got ''"),
    ("cluster-list", put("cluster", []), "cluster: expected a mapping, got an empty list"),
    ("cluster-unknown", put(C, "switches", 1), "cluster: unknown field(s) ['switches']"),
    # nodes
    ("nodes-empty", put(*N, []), "cluster.nodes: expected a non-empty list"),
    ("node-not-mapping", put(*N, 1, "b"), "cluster.nodes[1]: expected a mapping, got 'b'"),
    ("node-unknown", put(*N, 1, "gpus", 2), "cluster.nodes[1]: unknown field(s) ['gpus']"),
    ("node-no-name", drop(*N, 0, "name"), "cluster.nodes[0].name: required field missing"),
    ("node-name-bool", put(*N, 0, "name", False),
     "cluster.nodes[0].name: expected a non-empty string, got false"),
    ("link-string", put(*N, 1, "link_gbps", "fast"),
     "cluster.nodes[1].link_gbps: expected a number > 0, got 'fast'"),
    ("link-zero", put(*N, 2, "link_gbps", 0), "cluster.nodes[2].link_gbps: expected a number > 0"),
    ("link-inf", put(*N, 0, "link_gbps", float("inf")),
     "cluster.nodes[0].link_gbps: expected a finite number > 0, got inf"),
    ("cpu-bool", put(*N, 0, "cpu", True), "cluster.nodes[0].cpu: expected a number >= 0, got true"),
    ("mem-negative", put(*N, 0, "mem_gib", -1),
     "cluster.nodes[0].mem_gib: expected a number >= 0, got -1"),
    ("gpu-nan", put(*N, 2, "gpu", float("nan")),
     "cluster.nodes[2].gpu: expected a finite number >= 0, got nan"),
    ("background-too-big", put(*N, 0, "background_gbps", 25),
     "cluster.nodes[0].background_gbps: must stay below link_gbps (25)"),
    ("background-negative", put(*N, 2, "background_gbps", -0.5),
     "cluster.nodes[2].background_gbps: expected a number >= 0"),
    ("count-zero", put(*N, 1, "count", 0),
     "cluster.nodes[1].count: expected an integer >= 1, got 0"),
    ("count-float", put(*N, 1, "count", 2.0), "cluster.nodes[1].count: expected an integer >= 1"),
    ("count-huge", put(*N, 1, "count", 10**6), "cluster.nodes[1].count: 1000000 copies take"),
    ("node-duplicate", put(*N, 2, "name", "a"),
     "cluster.nodes[2].name: duplicate node name 'a' (also cluster.nodes[0])"),
    ("node-duplicate-expanded", put(*N, 2, "name", "b-2"),
     "cluster.nodes[2].name: duplicate node name 'b-2' (also cluster.nodes[1])"),
    # latency
    ("latency-string", put(C, "latency_ms", "low"),
     "cluster.latency_ms: expected a square matrix (a list of rows) or a mapping"),
    ("matrix-rows", put(C, "latency_ms", MATRIX[:3]),
     "cluster.latency_ms: expected a 4x4 matrix (one row per node, after count expansion), "
     "got 3 row(s)"),
    ("matrix-row-length", put(C, "latency_ms", [*MATRIX[:2], [1, 1, 0], MATRIX[3]]),
     "cluster.latency_ms[2]: expected a row of 4 numbers, got 3 entries"),
    ("matrix-row-scalar", put(C, "latency_ms", [*MATRIX[:3], 1]),
     "cluster.latency_ms[3]: expected a row of 4 numbers, got 1"),
    ("matrix-diagonal", put(C, "latency_ms", [MATRIX[0], [1, 0.05, 1, 1], *MATRIX[2:]]),
     "cluster.latency_ms[1][1]: expected 0 on the diagonal"),
    ("matrix-asymmetric", put(C, "latency_ms", [MATRIX[0], MATRIX[1], [1, 2, 0, 1], MATRIX[3]]),
     "cluster.latency_ms[2][1]: expected a symmetric matrix"),
    ("matrix-negative", put(C, "latency_ms", [MATRIX[0], [1, 0, -1, 1], *MATRIX[2:]]),
     "cluster.latency_ms[1][2]: expected a number >= 0, got -1"),
    ("matrix-bool", put(C, "latency_ms", [[0, True, 1, 1], *MATRIX[1:]]),
     "cluster.latency_ms[0][1]: expected a number >= 0, got true"),
    ("latency-no-default", drop(C, "latency_ms", "default"),
     "cluster.latency_ms.default: required field missing"),
    ("latency-unknown", put(C, "latency_ms", "defualt", 1),
     "cluster.latency_ms: unknown field(s) ['defualt'] (did you mean 'default' for 'defualt'?)"),
    ("latency-default-nan", put(C, "latency_ms", "default", float("nan")),
     "cluster.latency_ms.default: expected a finite number >= 0"),
    ("pair-unknown-node", put(C, "latency_ms", "pairs", 0, "b", "b"),
     "cluster.latency_ms.pairs[0].b: unknown node 'b'"),
    ("pair-same-node", put(C, "latency_ms", "pairs", 0, "b", "a"),
     "cluster.latency_ms.pairs[0]: a and b are the same node 'a'"),
    ("pair-repeated", put(C, "latency_ms", "pairs", 1, {"a": "b-1", "b": "a", "ms": 2}),
     "cluster.latency_ms.pairs[1]: the pair ('b-1', 'a') is already given by "
     "cluster.latency_ms.pairs[0]"),
    ("pair-ms-negative", put(C, "latency_ms", "pairs", 0, "ms", -1),
     "cluster.latency_ms.pairs[0].ms: expected a number >= 0"),
    ("pair-no-ms", drop(C, "latency_ms", "pairs", 0, "ms"),
     "cluster.latency_ms.pairs[0].ms: required field missing"),
    ("pairs-mapping", put(C, "latency_ms", "pairs", {"a": "a"}),
     "cluster.latency_ms.pairs: expected a list, got a mapping"),
    # workloads
    ("workloads-mapping", put(C, "workloads", {"hpo": ["j1"]}),
     "cluster.workloads: expected a list, got a mapping"),
    ("workload-unknown-field", put(C, "workloads", 0, "deps", []),
     "cluster.workloads[0]: unknown field(s) ['deps']"),
    ("workload-no-jobs", drop(C, "workloads", 0, "jobs"),
     "cluster.workloads[0].jobs: required field missing"),
    ("workload-unknown-job", put(C, "workloads", 0, "jobs", ["j1", "j2", "j9"]),
     "cluster.workloads[0].jobs[2]: unknown job 'j9'"),
    ("workload-job-twice", put(C, "workloads", 0, "jobs", ["j1", "j2", "j1"]),
     "cluster.workloads[0].jobs[2]: job 'j1' is listed twice"),
    ("workload-duplicate", put(C, "workloads", 1, {"name": "hpo", "jobs": ["j3"]}),
     "cluster.workloads[1].name: duplicate workload name 'hpo' (also cluster.workloads[0])"),
    ("job-in-two-workloads", put(C, "workloads", 1, {"name": "w2", "jobs": ["j3", "j2"]}),
     "cluster.workloads[1].jobs[1]: job 'j2' is already in workload 'hpo'"),
    ("dependency-outside", put(C, "workloads", 0, "dependencies", [["j1", "j3"]]),
     "cluster.workloads[0].dependencies[0][1]: 'j3' is not a job of workload 'hpo'"),
    ("dependency-not-pair", put(C, "workloads", 0, "dependencies", [["j1", "j2", "j1"]]),
     "cluster.workloads[0].dependencies[0]: expected a pair [job, job], got 3 entries"),
    ("dependency-string", put(C, "workloads", 0, "dependencies", ["j1-j2"]),
     "cluster.workloads[0].dependencies[0]: expected a pair [job, job], got 'j1-j2'"),
    ("dependency-self", put(C, "workloads", 0, "dependencies", [["j1", "j1"]]),
     "cluster.workloads[0].dependencies[0]: a job cannot depend on itself ('j1')"),
    # jobs
    ("job-not-mapping", put(J, 1, "j2"), "jobs[1]: expected a mapping, got 'j2'"),
    ("job-unknown", put(J, 0, "wrokers", 2),
     "jobs[0]: unknown field(s) ['wrokers'] (did you mean 'workers' for 'wrokers'?)"),
    ("job-no-name", drop(J, 2, "name"), "jobs[2].name: required field missing"),
    ("job-no-workers", drop(J, 2, "workers"), "jobs[2].workers: required field missing"),
    ("workers-zero", put(J, 2, "workers", 0), "jobs[2].workers: expected an integer >= 1, got 0"),
    ("workers-bool", put(J, 0, "workers", True),
     "jobs[0].workers: expected an integer >= 1, got true"),
    ("workers-string", put(J, 0, "workers", "2"),
     "jobs[0].workers: expected an integer >= 1, got '2'"),
    ("job-duplicate", put(J, 3, "name", "j1"),
     "jobs[3].name: duplicate job name 'j1' (also jobs[0])"),
    ("model-unknown", put(J, 0, "model", "VGG-19"),
     "jobs[0].model: unknown model 'VGG-19' (did you mean 'VGG19'?); choose from AlexNet, "),
    ("model-null", put(J, 0, "model", None), "jobs[0].model: unknown model null"),
    ("model-and-pattern", put(J, 0, "pattern", None),
     "jobs[0]: give exactly one of 'model' or 'pattern', got both"),
    ("no-model-no-pattern", drop(J, 2, "pattern"),
     "jobs[2]: give exactly one of 'model' or 'pattern', got neither"),
    ("iterations-and-duration", put(J, 0, "duration_s", 10),
     "jobs[0]: give exactly one of 'iterations' or 'duration_s', got both"),
    ("no-iterations-no-duration", drop(J, 0, "iterations"),
     "jobs[0]: give exactly one of 'iterations' or 'duration_s', got neither"),
    ("iterations-float", put(J, 0, "iterations", 10.5),
     "jobs[0].iterations: expected an integer >= 1, got 10.5"),
    ("duration-zero", put(J, 1, "duration_s", 0), "jobs[1].duration_s: expected a number > 0"),
    ("duration-inf", put(J, 3, "duration_s", float("inf")),
     "jobs[3].duration_s: expected a finite number > 0, got inf"),
    ("arrival-negative", put(J, 0, "arrival_s", -1),
     "jobs[0].arrival_s: expected a number >= 0, got -1"),
    ("priority-word", put(J, 0, "priority", "medium"),
     "jobs[0].priority: expected 'high', 'low' or an integer, got 'medium'"),
    ("priority-bool", put(J, 0, "priority", True),
     "jobs[0].priority: expected 'high', 'low' or an integer, got true"),
    ("priority-float", put(J, 0, "priority", 1.5),
     "jobs[0].priority: expected 'high', 'low' or an integer"),
    ("gpu-negative", put(J, 0, "gpu", -1), "jobs[0].gpu: expected a number >= 0, got -1"),
    ("cpu-string", put(J, 0, "cpu", "4"), "jobs[0].cpu: expected a number >= 0, got '4'"),
    ("period-negative", put(J, 1, "period_ms", -5), "jobs[1].period_ms: expected a number > 0"),
    ("period-with-pattern", put(J, 2, "period_ms", 50),
     "jobs[2].period_ms: only allowed with 'model'"),
    ("period-with-lowcomm", put(J, 3, "period_ms", 50),
     "jobs[3].period_ms: only allowed with 'model'"),
    ("iteration-with-model", put(J, 1, "iteration_ms", 50),
     "jobs[1].iteration_ms: only allowed with 'pattern: null'"),
    ("iteration-with-pattern", put(J, 2, "iteration_ms", 50),
     "jobs[2].iteration_ms: only allowed with 'pattern: null'"),
    ("iteration-zero", put(J, 3, "iteration_ms", 0),
     "jobs[3].iteration_ms: expected a number > 0, got 0"),
    ("pattern-list", put(J, 2, "pattern", [100, 0.3, 10]),
     "jobs[2].pattern: expected a mapping {period_ms, duty_cycle, bandwidth_gbps} or null"),
    ("pattern-unknown", put(J, 2, "pattern", "rate", 10),
     "jobs[2].pattern: unknown field(s) ['rate']"),
    ("pattern-no-rate", drop(J, 2, "pattern", "bandwidth_gbps"),
     "jobs[2].pattern.bandwidth_gbps: required field missing"),
    ("pattern-duty", put(J, 2, "pattern", "duty_cycle", 1.5),
     "jobs[2].pattern.duty_cycle: expected a number in [0, 1], got 1.5"),
    ("pattern-period-zero", put(J, 2, "pattern", "period_ms", 0),
     "jobs[2].pattern.period_ms: expected a number > 0, got 0"),
    ("pattern-rate-nan", put(J, 2, "pattern", "bandwidth_gbps", float("nan")),
     "jobs[2].pattern.bandwidth_gbps: expected a finite number >= 0, got nan"),
    ("workload-undefined", put(J, 0, "workload", "grid"),
     "jobs[0].workload: unknown workload 'grid'; defined: 'hpo'"),
    ("workload-none-defined", both(drop(C, "workloads"), put(J, 0, "workload", "hpo")),
     "jobs[0].workload: unknown workload 'hpo'; cluster.workloads defines none"),
    ("workload-not-listing", put(J, 2, "workload", "hpo"),
     "jobs[2].workload: workload 'hpo' (cluster.workloads[0].jobs) does not list job 'j3'"),
    ("workload-null", put(J, 0, "workload", None),
     "jobs[0].workload: expected a non-empty string, got null"),
]


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize(("edit", "message"), [pytest.param(e, m, id=i) for i, e, m in BAD_DATA])
def test_bad_field_names_its_path(tmp_path: Path, suffix: str, edit: Edit,
                                  message: str) -> None:
    load(tmp_path, base(), suffix)  # the base is valid: the edit alone breaks it
    data = base()
    edit(data)
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        load(tmp_path, data, suffix)


def test_bad_data_cases_are_distinct() -> None:
    assert len(BAD_DATA) >= 30
    assert len({i for i, _, _ in BAD_DATA}) == len(BAD_DATA)


GOOD_YAML = yaml.safe_dump(base(), sort_keys=False)

#: (id, file name, file text or None for no file, the message's expected start).
BAD_FILES: list[tuple[str, str, str | None, str]] = [
    ("missing", "nope.yaml", None, "file: cannot read "),
    ("suffix", "sc.txt", GOOD_YAML, "file: unsupported file type '.txt'"),
    ("no-suffix", "sc", GOOD_YAML, "file: unsupported file type '(no suffix)'"),
    ("yaml-syntax", "sc.yaml", "cluster:\n  nodes: [\n  - a\njobs: 1\n",
     "file: invalid YAML at line 3, column 3: expected the node content"),
    ("yaml-tab", "sc.yaml", "cluster:\n\tnodes: []\n", "file: invalid YAML at line 2, column 1"),
    ("yaml-two-documents", "sc.yaml", "a: 1\n---\nb: 2\n", "file: invalid YAML at line 2"),
    ("yaml-duplicate-key", "sc.yaml", GOOD_YAML.replace("  workers: 3\n",
                                                        "  workers: 3\n  workers: 4\n"),
     "file: invalid YAML at line "),
    ("json-syntax", "sc.json", '{"cluster": {},\n "jobs": [,]}', "file: invalid JSON at line 2"),
    ("json-duplicate-key", "sc.json", '{"jobs": [], "jobs": []}',
     "file: invalid JSON: duplicate key 'jobs' in an object"),
    ("yaml-empty", "sc.yaml", "", "file: the top level must be a mapping with 'cluster' and "
                                  "'jobs', got an empty document"),
    ("yaml-list", "sc.yml", "- a\n- b\n", "file: the top level must be a mapping"),
    ("json-scalar", "sc.json", "3", "file: the top level must be a mapping with 'cluster' "
                                    "and 'jobs', got 3"),
    ("not-utf8", "sc.yaml", None, "file: {path} is not UTF-8 text"),
    ("missing", "none.yaml", None, "file: cannot read {path}: No such file or directory"),
]


@pytest.mark.parametrize(("name", "text", "message"),
                         [pytest.param(n, t, m, id=i) for i, n, t, m in BAD_FILES])
def test_bad_file(tmp_path: Path, name: str, text: str | None, message: str) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    elif name == "sc.yaml":  # not-utf8
        path.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(ValueError, match="^" + re.escape(message.format(path=path))):
        load_scenario_file(path)


def test_duplicate_yaml_key_names_the_key_and_line(tmp_path: Path) -> None:
    text = "cluster:\n  nodes: []\njobs: []\ncluster: {}\n"
    with pytest.raises(ValueError, match=re.escape(
            "file: invalid YAML at line 4, column 1: duplicate key 'cluster'")):
        load(tmp_path, text)


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").mkdir()
    with pytest.raises(ValueError, match="^" + re.escape("file: cannot read ")):
        load_scenario_file(tmp_path / "d.yaml")


def test_unknown_model_lists_the_valid_ones(tmp_path: Path) -> None:
    data = base()
    data["jobs"][0]["model"] = "Transformer"
    with pytest.raises(ValueError) as info:
        load(tmp_path, data)
    assert all(m in str(info.value) for m in MODELS)


def _raising(message: str) -> Callable[..., Any]:
    def build(*args: Any, **kwargs: Any) -> Any:
        raise ValueError(message)
    return build


#: (module attribute replaced, its error, the message the loader must raise).
CONSTRUCTORS = [
    ("Node", "link_gbps: boom", "cluster.nodes[0].link_gbps: boom"),
    ("TrafficPattern", "duty_cycle: boom", "jobs[2].pattern.duty_cycle: boom"),
    ("SimJob", "iterations: boom", "jobs[0].iterations: boom"),
    ("Workload", "dependencies: boom", "cluster.workloads[0].dependencies: boom"),
    ("SimCluster", "background_gbps: boom", "cluster.background_gbps: boom"),
    ("model_pattern", "data: no data",
     "jobs[0].model: cannot derive the traffic pattern of 'VGG19': data: no data"),
]


@pytest.mark.parametrize(("target", "message", "expected"),
                         [pytest.param(*c, id=c[0]) for c in CONSTRUCTORS])
def test_constructor_errors_get_the_field_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               target: str, message: str, expected: str) -> None:
    path = write(tmp_path, base())
    monkeypatch.setattr(sf, target, _raising(message))
    with pytest.raises(ValueError, match="^" + re.escape(expected)):
        load_scenario_file(path)


def test_simjob_is_what_the_loader_builds(tmp_path: Path) -> None:
    assert all(isinstance(j, SimJob) for j in load(tmp_path, base()).jobs)


@pytest.mark.parametrize(("edit", "message"), [
    # duration_s x 1000 / period_ms overflows to inf: was an OverflowError from round()
    (both(drop("jobs", 2, "iterations"), put("jobs", 2, "duration_s", 1e306)),
     r"^jobs\[2\]\.duration_s: "),
    # a tiny request makes a node's room infinite: was an OverflowError from floor()
    (both(put("jobs", 2, "gpu", 1e-320), put("jobs", 2, "cpu", 0), put("jobs", 2, "mem_gib", 0)),
     None),
    # finite values whose times overflow: was a run whose job "never finished"
    (put("jobs", 2, "pattern", "period_ms", 1e300),
     r"^jobs\[2\]\.pattern\.period_ms: at most 1e\+07"),
    (put("cluster", "latency_ms", "default", 1e308), r"^cluster\.latency_ms\.default: "),
])
def test_huge_and_tiny_numbers_are_value_errors_or_load(tmp_path: Path, edit: Edit,
                                                        message: str | None) -> None:
    data = base()
    edit(data)
    if message is None:
        sc = load(tmp_path, data, ".json")
        assert run_cluster(sc.sim, sc.jobs, "default", seed=0).jobs["j3"].end_ms is not None
    else:
        with pytest.raises(ValueError, match=message):
            load(tmp_path, data, ".json")
