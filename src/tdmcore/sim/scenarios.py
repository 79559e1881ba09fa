"""The shipped cluster scenarios: the Metronome testbed's snapshots and trace, Philly.

docs/simulator.md.  Every traffic pattern comes from
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

import csv
import math
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from ..data import open_data
from ..model import Cluster, Node, TrafficPattern, Workload
from .cluster import SimCluster, SimJob
from .models import MODELS, model_pattern

__all__ = [
    "BASE_LATENCY_MS",
    "CONGESTED_BACKGROUND_GBPS",
    "CONGESTED_LATENCY_MS",
    "SNAPSHOTS",
    "Scenario",
    "lingjun_latency",
    "metronome_snapshots",
    "metronome_trace",
    "period_gap",
    "philly",
    "testbed",
    "trace_job",
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

    **[decision]** ``workers`` workers per job (Table IV gives none), one per
    node (``spread``: required pod anti-affinity).  Each snapshot "comprises a
    set of jobs competing on links" (§IV-A) and Fig. 6 draws them on shared
    links; once a job's pods on one node are one ring segment
    (docs/traffic-circle.md), a 2-worker job packed onto one 4-GPU node would send nothing
    over any link and the snapshots would show no contention at all, so the
    workers are kept on distinct hosts as in the paper's runs.  The
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
                               cpu=WORKER_CPU, mem_gib=WORKER_MEM_GIB, workload=workload,
                               spread=True))
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


def _gavel_gpu_counts() -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """GPU counts of Philly jobs and their frequencies (Gavel's distribution CSV)."""
    with open_data("traces/philly_gavel_distribution.csv") as f:
        counts = np.array([int(float(r["num_gpus"])) for r in csv.DictReader(f)])
    values, freq = np.unique(counts, return_counts=True)
    return values.astype(np.int64), freq / freq.sum()


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
    if workers == 1:
        alone = pattern.period_ms * (1.0 - pattern.duty_cycle)
        count = iterations if iterations is not None else max(
            1, round(duration_s * 1e3 / alone))
        return SimJob(name, model, None, 1, count, arrival_s=arrival_s, priority=priority,
                      cpu=WORKER_CPU, mem_gib=WORKER_MEM_GIB, iteration_ms=alone)
    count = iterations if iterations is not None else max(
        1, round(duration_s * 1e3 / pattern.period_ms))
    return SimJob(name, model, pattern, workers, count, arrival_s=arrival_s,
                  priority=priority, cpu=WORKER_CPU, mem_gib=WORKER_MEM_GIB)


def metronome_trace(seed: int = 0, hours: float = 4.0, load: float = 0.7,
                    high_share: float = 0.2) -> Scenario:
    """The paper's 4-hour trace on its testbed (§IV-A "Traces"), Gavel-style.

    Poisson arrivals over ``hours``; durations uniform in 0.5-1.5 h and 20 % of the
    jobs high priority (the paper's numbers); GPU counts drawn from the Philly
    distribution Gavel samples (``traces/philly_gavel_distribution.csv``), capped at
    4 (**[decision]**: the testbed's largest node); models uniform over the 13
    (**[decision]**; Table III lists them without frequencies).  The arrival rate is
    set so the expected GPU load is ``load`` (the paper: 60-85 % once warm),
    ``rate = load x GPUs / (E[gpus] x E[duration])``.  Jobs are built by
    :func:`trace_job` (one-worker jobs are LowComm).
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, got {seed!r}")
    if not 0 < float(hours) <= 48:
        raise ValueError(f"hours: expected 0 < hours <= 48, got {hours!r}")
    if not 0 < float(load) <= 1:
        raise ValueError(f"load: expected 0 < load <= 1, got {load!r}")
    if not 0 <= float(high_share) <= 1:
        raise ValueError(f"high_share: expected a share in [0, 1], got {high_share!r}")
    sim = testbed(congested=True)
    rng = np.random.default_rng([seed, 7])
    values, freq = _gavel_gpu_counts()
    capped = np.minimum(values, 4)
    mean_gpus = float((capped * freq).sum())
    gpus_total = float(sim.cluster.gpu.sum())
    rate_per_s = load * gpus_total / (mean_gpus * 3600.0)
    models = list(MODELS)
    jobs: list[SimJob] = []
    t = 0.0
    while True:
        t += float(rng.exponential(1.0 / rate_per_s))
        if t >= hours * 3600.0:
            break
        k = len(jobs)
        workers = int(capped[rng.choice(len(values), p=freq)])
        model = models[int(rng.integers(len(models)))]
        duration_s = float(rng.uniform(0.5, 1.5)) * 3600.0
        high = bool(rng.random() < high_share)
        jobs.append(trace_job(f"j{k:03d}-{model.lower()}", model, workers, 25.0, duration_s,
                              arrival_s=round(t, 3), priority=1 if high else 0))
    if not jobs:
        raise ValueError("hours: too short for any arrival at this load")
    return Scenario("metronome-trace", f"{hours:g} h Gavel-style trace on the Metronome "
                    f"testbed, load {load:.0%}, seed {seed}", sim, tuple(jobs),
                    {"rate_per_h": f"{rate_per_s * 3600:.3f}",
                     "gpu_counts": "traces/philly_gavel_distribution.csv, capped at 4"})


#: The shipped Philly trace and how its columns map to a trace's fields
#: (:mod:`tdmcore.sim.traces`); it names no model (drawn with the seed).
PHILLY_TRACE = "traces/philly_pollux.csv"
PHILLY_COLUMNS = {"submit": "timestamp", "workers": "num_gpus", "duration_s": "duration"}

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


def philly(n_jobs: int = 200, n_nodes: int = 16, start: int = 0, seed: int = 0,
           max_duration_s: float | None = None) -> Scenario:
    """A slice of the real Philly trace (``traces/philly_pollux.csv``) on ``n_nodes``.

    Jobs ``start .. start + n_jobs`` in submit order keep their submit times
    (relative to the first), durations and GPU counts (capped at the cluster's
    GPUs); one worker per GPU, jobs built by :func:`trace_job` (one-worker jobs
    are LowComm).  Models are drawn uniformly from the 13 with
    ``seed`` (the trace names none; **[decision]**).  ``max_duration_s`` optionally
    truncates long jobs (for quick runs).  Latencies come from the Lingjun topology.
    """
    from .traces import read_trace, trace_scenario

    for name, value, lo in (("n_jobs", n_jobs, 1), ("n_nodes", n_nodes, 1),
                            ("start", start, 0), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise ValueError(f"{name}: expected an integer >= {lo}, got {value!r}")
    with open_data(PHILLY_TRACE) as f:
        rows = read_trace(PHILLY_TRACE, PHILLY_COLUMNS, text=f)
    return trace_scenario(rows, name="philly", title=f"Philly jobs {start}-"
                          f"{start + n_jobs - 1} on {n_nodes} nodes x 8 GPUs, seed {seed}",
                          n_nodes=n_nodes, start=start, n_jobs=n_jobs, seed=seed,
                          max_duration_s=max_duration_s, job_prefix="p",
                          notes={"trace": PHILLY_TRACE,
                                 "topology": "topology/lingjun_topo.csv"})


#: Metronome §IV-D: "after we applied the period doubling operation to VGG19, the
#: period of WideResNet is 35 ms shorter than that of VGG19" (S3), in ms.
S3_PERIOD_GAP_MS = 35.0


def period_gap(gap_ms: float = S3_PERIOD_GAP_MS, window_s: float = 600.0) -> Scenario:
    """S3 with the period gap of the paper's G_T / E_T study (§IV-D, Fig. 15).

    The paper doubles VGG19's period (high priority) and finds WideResNet101's
    (low priority) :data:`S3_PERIOD_GAP_MS` shorter; it then injects idle time
    into WideResNet's computation phase to narrow the gap to 30, 20, 10, 5 and
    0 ms, and shares the link on the mean of the two periods.  Here the S3 jobs
    of :func:`metronome_snapshots` keep everything but WideResNet's period, which
    becomes ``2 x VGG19's period - gap_ms``: its communication time (the S3
    pattern's ``period x duty``) is unchanged and the ``35 - gap_ms`` ms added
    are idle in its computation phase, as injected.  Each job trains
    ``window_s`` worth of iterations at its ideal speed.

    **[decision]** The injected idle is part of the job's pattern (the job runs
    it whoever schedules it), so every policy sees the same two jobs; with the
    paper's G_T = 5 ms only gaps up to 10 ms unify without further injection
    (``|m t - T| <= G_T`` around the mean ``T``), so the study runs Metronome
    with ``G_T`` at half the widest gap (17.5 ms), which shares every gap on the
    mean as the paper does.
    """
    gap = float(gap_ms)
    if not (math.isfinite(gap) and 0.0 <= gap <= S3_PERIOD_GAP_MS):
        raise ValueError(f"gap_ms: expected 0 <= gap_ms <= {S3_PERIOD_GAP_MS:g} (idle can "
                         f"only narrow the gap), got {gap_ms!r}")
    s3 = metronome_snapshots(window_s)["S3"]
    high, low = s3.jobs
    assert high.pattern is not None and low.pattern is not None
    comm_ms = low.pattern.period_ms * low.pattern.duty_cycle
    period = 2.0 * high.pattern.period_ms - gap
    pattern = TrafficPattern(period, comm_ms / period, low.pattern.bandwidth_gbps)
    low = replace(low, pattern=pattern,
                  iterations=max(1, round(float(window_s) * 1e3 / period)))
    notes = dict(s3.notes)
    notes[f"{low.name}.period_ms"] = (
        f"2 x {high.pattern.period_ms:g} ms (VGG19 doubled) - {S3_PERIOD_GAP_MS:g} ms "
        f"(Metronome §IV-D) + {S3_PERIOD_GAP_MS - gap:g} ms of injected idle")
    return Scenario(f"period-gap/{gap:g}ms", f"S3 with a {gap:g} ms period gap: VGG19 "
                    f"x 2 = {2 * high.pattern.period_ms:.2f} ms, WideResNet101 "
                    f"{period:.2f} ms", s3.sim, (high, low), notes)
