"""What the shipped scenarios and a trace's jobs are made of.

The :class:`Scenario` record :func:`tdmcore.sim.cluster.run_cluster` takes, the job a
trace's row becomes (:func:`trace_job`), and the cluster Philly's slice and a trace
replay on: Philly's node shape and the latencies of the real Lingjun topology.
:mod:`tdmcore.sim.scenarios` (the shipped scenarios) and :mod:`tdmcore.sim.traces`
(CSV traces) both build on them; ``tdmcore.sim.scenarios`` re-exports every name.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ..data import open_data
from .cluster import MAX_ITERATIONS, SimCluster, SimJob
from .models import model_pattern

__all__ = [
    "BASE_LATENCY_MS",
    "PHILLY_NODE",
    "TIER_TAU",
    "WORKER_CPU",
    "WORKER_MEM_GIB",
    "Scenario",
    "lingjun_latency",
    "trace_job",
]

#: (**[decision]**: a typical 25 GbE hop, 50 us).
BASE_LATENCY_MS = 0.05
#: Worker pod requests: one MIG GPU, and CPU/memory that fit the T4 node too
#: (**[decision]**; the paper gives none).
WORKER_CPU, WORKER_MEM_GIB = 4.0, 16.0


@dataclass(frozen=True)
class Scenario:
    """Jobs on a cluster, ready for :func:`tdmcore.sim.cluster.run_cluster`."""

    name: str
    title: str
    sim: SimCluster
    jobs: tuple[SimJob, ...]
    notes: dict[str, str] = field(default_factory=dict)


def trace_job(name: str, model: str, workers: int, link_gbps: float, duration_s: float,
              arrival_s: float = 0.0, priority: int = 0,
              iterations: int | None = None) -> SimJob:
    """A trace's job: ``model`` trained by ``workers`` workers for ``duration_s``.

    A job of two or more workers carries :func:`model_pattern`'s traffic pattern
    and trains ``max(1, round(duration_s / period))`` iterations (or
    ``iterations``, when the trace gives them instead).  A one-worker job
    has no gradient to all-reduce, so it is a LowComm job (pattern ``None``, paper
    §III-E: "For LowComm jobs, users do not need to submit the above resources")
    whose iteration is the compute part of that pattern, ``period x (1 - duty)``
    (**[decision]**: schedulers must not reserve link time for a job that sends
    nothing, and the controller has nothing of it to regulate).
    """
    pattern = model_pattern(model, workers, link_gbps).pattern

    def iterations_of(period_ms: float) -> int:
        if iterations is not None:
            return iterations
        count = duration_s * 1e3 / period_ms
        if not count <= MAX_ITERATIONS:  # inf or NaN cannot be rounded: name the field
            raise ValueError(f"duration_s: {duration_s:g} s is {count:.3g} iterations of "
                             f"{period_ms:g} ms, above {MAX_ITERATIONS:,}")
        return max(1, round(count))

    if workers == 1:
        alone = pattern.period_ms * (1.0 - pattern.duty_cycle)
        return SimJob(name, model, None, 1, iterations_of(alone), arrival_s=arrival_s,
                      priority=priority, cpu=WORKER_CPU, mem_gib=WORKER_MEM_GIB,
                      iteration_ms=alone)
    count = iterations_of(pattern.period_ms)
    return SimJob(name, model, pattern, workers, count, arrival_s=arrival_s,
                  priority=priority, cpu=WORKER_CPU, mem_gib=WORKER_MEM_GIB)


#: Philly node shape (**[decision]**: Philly's 8-GPU servers; cores and memory
#: generous enough that GPUs are the binding resource; 25 Gbps as on the testbed).
PHILLY_NODE = {"cpu": 64.0, "mem_gib": 512.0, "gpu": 8.0, "link_gbps": 25.0}
#: ``tau`` by the lowest switch tier two Lingjun hosts share (**[decision]**):
#: the same ASW 2, PSW 4, DSW 6, none 8; one hop is :data:`BASE_LATENCY_MS`.
TIER_TAU = {"ASW": 2.0, "PSW": 4.0, "DSW": 6.0}


def lingjun_latency(n_nodes: int) -> NDArray[np.float64]:
    """``tau`` for ``n_nodes`` hosts of the real Lingjun Clos topology.

    Hosts are taken in file order; beyond its 847 hosts the topology is repeated as
    separate copies that share no switch.
    """
    with open_data("topology/lingjun_topo.csv") as f:
        rows = list(csv.DictReader(f))
    tiers: dict[str, list[str]] = {key: [] for key in ("ASW", "PSW", "DSW")}
    for k in range(n_nodes):
        row, copy = rows[k % len(rows)], k // len(rows)
        for key in tiers:
            # ASW names repeat across PSWs: qualify each tier by the ones above it
            path_name = "/".join(row[t] for t in ("DSW", "PSW", "ASW")[: 3 - list(
                tiers).index(key)])
            tiers[key].append(f"{copy}:{path_name}")
    tau = np.full((n_nodes, n_nodes), 8.0)
    for key in ("DSW", "PSW", "ASW"):  # finest last wins
        ids = np.unique(np.asarray(tiers[key]), return_inverse=True)[1]
        tau[ids[:, None] == ids[None, :]] = TIER_TAU[key]
    np.fill_diagonal(tau, 1.0)
    return tau
