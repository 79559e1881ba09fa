"""The shipped snapshot numbers re-derived from the shipped data (tdmcore.data)."""

from __future__ import annotations

import csv

import pytest

from tdmcore.app.catalog import link_scenarios
from tdmcore.data import data_files, open_data


def _muri_share(model: str, gpus: int) -> float:
    """resource_time_2 / iteration_time of the Muri rows for (model, num_gpu)."""
    shares = set()
    for path in data_files("profiles/muri", ".csv"):
        with open_data(path) as fh:
            for row in csv.DictReader(fh):
                if row["model_name"] == model and int(row["num_gpu"]) == gpus:
                    shares.add(float(row["resource_time_2"]) / float(row["iteration_time"]))
    assert len(shares) == 1, f"expected one measurement of {model} on {gpus} GPUs: {shares}"
    return shares.pop()


def _models() -> dict[str, dict[str, str]]:
    with open_data("models.csv") as fh:
        return {row["model"]: row for row in csv.DictReader(fh)}


def test_s1_traffic_pattern_from_data() -> None:
    s1 = link_scenarios()["s1"]
    assert round(float(_models()["VGG19"]["metronome_ms_per_iter"])) == 422
    for pod in s1.pods:
        assert round(pod.period_ms) == 422
        assert pod.duty_cycle == pytest.approx(_muri_share("vgg19", 2))
        assert pod.bandwidth_gbps == s1.capacity_gbps == 25.0
    four = link_scenarios()["s1-4w"]
    assert all(p.duty_cycle == pytest.approx(_muri_share("vgg19", 4)) for p in four.pods)


def test_s4_traffic_pattern_from_data() -> None:
    s4 = link_scenarios()["s4"]
    assert round(float(_models()["BERT"]["metronome_ms_per_iter"])) == 534
    for pod in s4.pods:
        assert round(pod.period_ms) == 534
        assert pod.duty_cycle == pytest.approx(_muri_share("bert", 2))


def test_every_scenario_names_its_sources() -> None:
    for sc in link_scenarios().values():
        assert {"period_ms", "duty_cycle", "bandwidth_gbps"} <= set(sc.sources)
        assert sc.pods and sc.capacity_gbps > 0
