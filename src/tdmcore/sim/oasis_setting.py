"""The OASiS simulation setting (Bao et al., INFOCOM'18, §V-A), shipped as a scenario.

Our copy of the paper lost the numbers of its ranges; the ones below are
**[decision]**, chosen to follow its prose: worker servers sized like EC2 C4
instances (plus GPUs for the workers' GPU demand), PS servers like P2 or G3
instances at random, per-task demands of GPUs, vCPUs, memory, storage and
bandwidth, sigmoid utilities in three classes, and arrivals spread over the first
70 % of the horizon.  Gradient sizes are the fp32 sizes of the 13 models in
``models.csv`` of :mod:`tdmcore.data` (column ``grad_fp32_MB``; the test suite re-reads
them).  A slot is :data:`SLOT_S` seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import _validation as v
from ..oasis.admission.base import SlottedCluster, as_seed
from ..oasis.online import Job, min_completion_slots

__all__ = ["GRADIENT_MB", "SLOT_S", "OasisSetting", "oasis_cluster", "oasis_jobs",
           "oasis_setting"]

#: **[decision]** Length of a slot, in seconds.
SLOT_S = 600.0

#: fp32 gradient size (MB) of each model: ``models.csv`` of :mod:`tdmcore.data`, ``grad_fp32_MB``.
GRADIENT_MB: dict[str, float] = {
    "AlexNet": 244, "VGG11": 531, "VGG16": 553, "VGG19": 575, "ResNet18": 47,
    "ResNet50": 102, "ResNet152": 241, "WideResNet101": 508, "GoogLeNet": 26,
    "DenseNet201": 80, "GPT-1": 466, "GPT-2": 498, "BERT": 440,
}

#: (GPUs, vCPUs, memory GB, storage GB) of the server types; bandwidth is drawn.
#: c4.8xlarge has 36 vCPUs and 60 GB; **[decision]** we add 8 GPUs so that workers
#: that ask for GPUs can run on it.  p2.8xlarge: 8 GPUs, 32 vCPUs, 488 GB;
#: g3.8xlarge: 2 GPUs, 32 vCPUs, 244 GB (AWS instance pages).
WORKER_SERVER = (8.0, 36.0, 60.0, 1000.0)
PS_SERVERS = ((8.0, 32.0, 488.0, 1000.0), (2.0, 32.0, 244.0, 1000.0))
SERVER_BW_GBPS = (20.0, 50.0)

#: Job classes and the sigmoid decay ranges (g2) drawn for them.
DECAY = {"insensitive": (0.0, 0.0), "sensitive": (0.02, 0.2), "critical": (1.0, 3.0)}


#: The most worker (and PS) servers and slots of the OASiS setting.
MAX_SERVERS = 100_000
MAX_SLOTS = 100_000


@dataclass(frozen=True)
class OasisSetting:
    cluster: SlottedCluster
    jobs: tuple[Job, ...]
    models: tuple[str, ...]
    seed: int


def oasis_cluster(n_worker_servers: int = 50, n_ps_servers: int = 50, n_slots: int = 200,
                  seed: int = 0) -> SlottedCluster:
    """Worker servers (C4-like + GPUs) and PS servers (P2 or G3 at random)."""
    n_worker_servers = v.whole("n_worker_servers", n_worker_servers, 1, MAX_SERVERS)
    n_ps_servers = v.whole("n_ps_servers", n_ps_servers, 1, MAX_SERVERS)
    n_slots = v.whole("n_slots", n_slots, 1, MAX_SLOTS)
    rng = np.random.default_rng([as_seed("seed", seed), 1])
    workers = np.array([[*WORKER_SERVER, rng.uniform(*SERVER_BW_GBPS)]
                        for _ in range(n_worker_servers)])
    ps = np.array([[*PS_SERVERS[int(rng.integers(2))], rng.uniform(*SERVER_BW_GBPS)]
                   for _ in range(n_ps_servers)])
    return SlottedCluster(workers, ps, n_slots)


def oasis_jobs(n_jobs: int = 100, n_slots: int = 200, seed: int = 0,
               mix: Sequence[float] = (1 / 3, 1 / 3, 1 / 3),
               priority: tuple[float, float] = (1.0, 100.0),
               epochs: tuple[int, int] = (20, 100),
               chunks: tuple[int, int] = (5, 30),
               slot_s: float = SLOT_S) -> tuple[tuple[Job, ...], tuple[str, ...]]:
    """``n_jobs`` jobs and their model names, arrivals in the first 70 % of the horizon.

    ``mix``: shares of time-insensitive, -sensitive and -critical jobs (docs/oasis.md);
    ``priority``: range of ``g1``; ``epochs``, ``chunks``: ranges of ``E_i``, ``N_i``
    (small ones make instances the offline MILP can solve); ``slot_s``: slot length.
    Units follow :class:`tdmcore.oasis.online.Job`: ``tau`` and ``grad_size / worker_bw`` in
    slots, resources in GPUs, vCPUs, GB, GB and Gbps.
    """
    n_jobs = v.whole("n_jobs", n_jobs, 1, v.MAX_JOBS)
    n_slots = v.whole("n_slots", n_slots, 1, MAX_SLOTS)
    shares = np.asarray(mix, dtype=np.float64)
    if shares.shape != (3,) or np.any(shares < 0) or not np.isfinite(shares).all() \
            or shares.sum() <= 0:
        raise ValueError("mix: expected three shares >= 0 (insensitive, sensitive, "
                         "critical), not all 0")
    if not isinstance(priority, tuple | list) or len(priority) != 2:
        raise ValueError(f"priority: expected a (low, high) pair, got {priority!r:.60}")
    lo, hi = (v.real_number("priority", x) for x in priority)
    if not 0 < lo <= hi:
        raise ValueError(f"priority: expected 0 < low <= high, got {priority!r}")
    epochs, chunks = v.whole_pair("epochs", epochs), v.whole_pair("chunks", chunks)
    slot_s = v.positive_float("slot_s", slot_s)
    rng = np.random.default_rng([as_seed("seed", seed), 2])
    names = list(GRADIENT_MB)
    classes = list(DECAY)
    arrivals = np.sort(rng.integers(0, max(1, int(0.7 * n_slots)), size=n_jobs))
    jobs, models = [], []
    for a in arrivals:
        model = names[int(rng.integers(len(names)))]
        worker_bw = rng.uniform(0.5, 5.0)    # Gbps
        ps_bw = rng.uniform(5.0, 20.0)       # Gbps
        tau_s = rng.uniform(0.1, 1.0)        # compute per mini-batch, s
        grad_gb = GRADIENT_MB[model] * 8 / 1000
        iteration_s = tau_s + 2 * grad_gb / worker_bw
        if iteration_s > slot_s:
            raise ValueError(f"slot_s: {slot_s:g} s is shorter than one iteration of a "
                             f"generated job ({iteration_s:.3g} s: {model}, "
                             f"{worker_bw:.2g} Gbps); use slots of at least 20 s")
        minibatches = int(rng.integers(5, 31))
        minibatches = min(minibatches, int(slot_s // iteration_s))
        n_chunks = int(rng.integers(chunks[0], chunks[1] + 1))
        n_epochs = int(rng.integers(epochs[0], epochs[1] + 1))
        job_class = classes[int(rng.choice(3, p=shares / shares.sum()))]
        g1 = rng.uniform(lo, hi)
        g2 = rng.uniform(*DECAY[job_class]) if job_class != "insensitive" else 0.0
        job = Job(
            arrival=int(a), epochs=n_epochs, chunks=n_chunks, minibatches=minibatches,
            tau=tau_s / slot_s, grad_size=grad_gb / slot_s, worker_bw=worker_bw,
            ps_bw=ps_bw,
            worker_res=(float(rng.integers(1, 5)), float(rng.integers(1, 11)),
                        rng.uniform(2, 32), rng.uniform(5, 10), worker_bw),
            ps_res=(0.0, float(rng.integers(1, 11)), rng.uniform(2, 32), rng.uniform(5, 10),
                    ps_bw),
        )
        g3 = math.ceil(min_completion_slots(job) * rng.uniform(1.0, 3.0))
        jobs.append(Job(**{**job.__dict__, "utility": (g1, g2, float(g3))}))
        models.append(model)
    return tuple(jobs), tuple(models)


def oasis_setting(n_jobs: int = 100, n_worker_servers: int = 50, n_ps_servers: int = 50,
                  n_slots: int = 200, seed: int = 0,
                  mix: Sequence[float] = (1 / 3, 1 / 3, 1 / 3),
                  priority: tuple[float, float] = (1.0, 100.0),
                  epochs: tuple[int, int] = (20, 100),
                  chunks: tuple[int, int] = (5, 30), slot_s: float = SLOT_S) -> OasisSetting:
    """The whole scenario: cluster and jobs from one seed."""
    cluster = oasis_cluster(n_worker_servers, n_ps_servers, n_slots, seed)
    jobs, models = oasis_jobs(n_jobs, n_slots, seed, mix, priority, epochs, chunks, slot_s)
    return OasisSetting(cluster, jobs, models, seed)
