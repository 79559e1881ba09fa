"""The Core intake of a job's pods (:func:`tdmcore.model.gang_pods`), which the
simulator and the Kubernetes bridge both build their pods with."""

from __future__ import annotations

import pytest

from tdmcore.model import Pod, TrafficPattern, gang_pods
from tdmcore.sim.cluster import SimJob

PATTERN = TrafficPattern(100.0, 0.3, 20.0)


def test_a_jobs_pods_share_what_the_job_is() -> None:
    pods = gang_pods("j", ["j-0", "j-1"], gang_size=3, cpu=2, mem_gib=4, gpu=1,
                     pattern=PATTERN, priority="high", workload="w", spread=True)
    assert [p.name for p in pods] == ["j-0", "j-1"]
    for p in pods:
        assert (p.job, p.cpu, p.mem_gib, p.gpu, p.pattern, p.priority, p.workload,
                p.gang_size, p.spread) == ("j", 2.0, 4.0, 1.0, PATTERN, 1, "w", 3, True)


def test_the_simulators_workers_come_through_the_intake() -> None:
    job = SimJob("s3-wrn-l1", "WideResNet101", PATTERN, workers=2, iterations=10,
                 priority=0, cpu=4, mem_gib=16, gpu=1, workload="s3", spread=True)
    assert job.pods() == gang_pods("s3-wrn-l1", ["s3-wrn-l1-w0", "s3-wrn-l1-w1"],
                                   gang_size=2, cpu=4, mem_gib=16, gpu=1, pattern=PATTERN,
                                   priority=0, workload="s3", spread=True)


@pytest.mark.parametrize("kw, needle", [
    (dict(names=[]), "names"),
    (dict(names="j-0"), "names"),
    (dict(names=["j-0", "j-0"]), "names"),
    (dict(names=["j-0", "j-1"], gang_size=1), "gang_size"),
    (dict(gang_size=0), "gang_size"),
    (dict(gang_size=True), "gang_size"),
    (dict(gang_size=1.5), "gang_size"),
    (dict(spread="yes"), "spread"),
    (dict(priority="urgent"), "priority"),
    (dict(cpu=-1), "cpu"),
])
def test_bad_input_is_a_value_error_naming_the_argument(kw, needle) -> None:
    args = {"names": ["j-0"], "gang_size": None, **kw}
    with pytest.raises(ValueError, match=f"^{needle}"):
        gang_pods("j", **args)


def test_an_unknown_gang_size_is_none() -> None:
    (pod,) = gang_pods("j", ["j-0"], gang_size=None)
    assert pod == Pod("j-0", "j")
