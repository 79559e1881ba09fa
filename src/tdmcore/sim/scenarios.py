"""The shipped cluster scenarios: the Metronome testbed's snapshots and trace, Philly.

spec/simulator.md "Scenarios shipped".  Every traffic pattern comes from
:func:`tdmcore.sim.models.model_pattern` (sources in its docstring); every other
number is either the paper's or marked **[decision]** here.

The testbed (paper §IV-A): three worker nodes with 32 cores, 1 TB of memory, an
A30 split into 4 MIG GPUs and a 25 Gbps link; one with 20 cores, 32 GB, a T4 and a
10 Gbps link; all on one switch.  **[decision]** The "congested node with a
high-latency link" (iPerf3) is ``a30-1``, the first node in the cluster's order,
where a tie-breaking scheduler puts its first pod (the paper: the default
scheduler lands on it "randomly"): it carries :data:`CONGESTED_BACKGROUND_GBPS`
of background traffic and :data:`CONGESTED_LATENCY_MS` to every other node,
against :data:`BASE_LATENCY_MS` elsewhere.  The scheduler's latency matrix ``tau``
is the physical latency over the base latency (``tau[x, x] = 1``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model import Cluster, Node, Workload
from .cluster import SimCluster, SimJob
from .models import model_pattern

__all__ = [
    "BASE_LATENCY_MS",
    "CONGESTED_BACKGROUND_GBPS",
    "CONGESTED_LATENCY_MS",
    "SNAPSHOTS",
    "Scenario",
    "metronome_snapshots",
    "testbed",
]

#: One-way latency between two uncongested nodes on the testbed's switch
#: (**[decision]**: a typical 25 GbE hop, 50 us).
BASE_LATENCY_MS = 0.05
#: The congested node's latency to every other node (**[decision]**: 20x the base,
#: the order iPerf3 saturation queues add).
CONGESTED_LATENCY_MS = 1.0
#: Background traffic on the congested node's link (**[decision]**: half of 25 Gbps).
CONGESTED_BACKGROUND_GBPS = 12.5
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


def testbed(congested: bool = False) -> SimCluster:
    """The paper's 4-worker testbed (§IV-A), optionally with its congested node."""
    nodes = [Node(f"a30-{k}", cpu=32, mem_gib=1024, gpu=4, link_gbps=25.0)
             for k in (1, 2, 3)]
    nodes.append(Node("t4-1", cpu=20, mem_gib=32, gpu=1, link_gbps=10.0))
    k = len(nodes)
    lat = np.full((k, k), BASE_LATENCY_MS)
    bg = np.zeros(k)
    if congested:
        lat[0, :] = lat[:, 0] = CONGESTED_LATENCY_MS
        bg[0] = CONGESTED_BACKGROUND_GBPS
    np.fill_diagonal(lat, BASE_LATENCY_MS)
    return SimCluster(Cluster(nodes, latency=lat / BASE_LATENCY_MS), bg, lat)


#: Table IV of the paper: (jobs as (model, Table VI period ms, role), congested link).
#: Roles: "H" high priority, "L" low; the jobs deploy in this order (earlier =
#: higher priority, Table IV's note).  Periods: Table VI at 0.5 h, by role.
SNAPSHOTS: dict[str, tuple[str, tuple[tuple[str, float | None, str], ...], bool]] = {
    "S0": ("GPT-2 + GoogLeNet: incompatible patterns (paper §IV-B1)",
           (("GPT-2", None, "H"), ("GoogLeNet", None, "L")), False),
    "S1": ("Pre-VGG19 x 3, DP HPO jobs",
           (("VGG19", 422.26, "H"), ("VGG19", 422.26, "L"), ("VGG19", 422.26, "L")), False),
    "S2": ("FT-VGG19 + FT-VGG16, DP jobs",
           (("VGG19", 98.68, "H"), ("VGG16", 87.92, "L")), False),
    "S3": ("FT-VGG19 + FT-WideResNet101, DP jobs (idle injection)",
           (("VGG19", 102.76, "H"), ("WideResNet101", 124.25, "L")), False),
    "S4": ("Pre-BERT x 2, DP HPO jobs, congested link",
           (("BERT", 533.53, "H"), ("BERT", 533.53, "L")), True),
    "S5": ("Pre-GPT-1 + FT-ResNet152, DP and MP jobs, congested link",
           (("GPT-1", 429.88, "H"), ("ResNet152", 112.41, "L")), True),
}


def metronome_snapshots(window_s: float = 600.0, workers: int = 2
                        ) -> dict[str, Scenario]:
    """S0-S5 (Table IV) on the testbed, each job training ``window_s`` worth of
    iterations at its ideal speed (the paper observes 0.5 h; **[decision]** 10 min
    by default keeps the main command quick, the metrics are per iteration).

    **[decision]** ``workers`` workers per job (Table IV gives none; 2 makes the
    HPO jobs span two nodes, as the shared links of its Fig. 6 require).  The
    VGG19 fine-tuning period (S2, S3) is Table VI's high-priority value; the
    pre-training one (S1) its own.  Which S2 job is high priority is not
    recoverable (models.csv); the deploy order here makes VGG19 high.  S0's
    models have no Table VI row: their patterns come from the data as for any job.
    HPO jobs (same model, same snapshot) form one workload (AppGroup).
    """
    out = {}
    for sid, (title, members, congested) in SNAPSHOTS.items():
        sim = testbed(congested)
        jobs = []
        models = [m for m, _, _ in members]
        hpo = len(set(models)) == 1
        workload = f"{sid.lower()}-hpo" if hpo else None
        notes = {}
        for k, (model, period, role) in enumerate(members):
            mp = model_pattern(model, workers, 25.0, period_ms=period,
                               period_source=f"Metronome Table VI, {sid} "
                               f"{'high' if role == 'H' else 'low'}-priority job, 0.5 h"
                               if period is not None else None)
            name = f"{sid.lower()}-{model.lower()}-{role.lower()}{k}"
            iterations = max(1, round(window_s * 1e3 / mp.pattern.period_ms))
            jobs.append(SimJob(name, model, mp.pattern, workers, iterations,
                               arrival_s=float(k), priority=1 if role == "H" else 0,
                               cpu=WORKER_CPU, mem_gib=WORKER_MEM_GIB, workload=workload))
            for key, src in mp.sources.items():
                notes[f"{name}.{key}"] = src
        if workload is not None:
            names = [j.name for j in jobs]
            deps = tuple((a, b) for i, a in enumerate(names) for b in names[i + 1:])
            sim = SimCluster(Cluster(sim.cluster.nodes, latency=sim.cluster.latency,
                                     workloads=[Workload(workload, tuple(names), deps)]),
                             sim.background_gbps, sim.latency_ms)
        out[sid] = Scenario(f"metronome-snapshots/{sid}", f"{sid}: {title}", sim,
                            tuple(jobs), notes)
    return out
