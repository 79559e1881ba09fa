"""Elastic training jobs: parameter servers, a worker range and a scaling curve.

docs/elastic.md, "Common model".  A job has ``n_ps`` PS tasks and ``w`` workers with
``min_workers <= w <= max_workers``, per-task requests, and a training amount in
steps whose speed grows sub-linearly with ``w``.

Speed (**[decision]**): DRAGON's Figure 2 measured images/s of InceptionV3,
ResNet-50 and AlexNet with 1-4 workers (TensorFlow, parameter servers).  A step is
one mini-batch of :data:`BATCH_IMAGES` images of one worker (TensorFlow's global
step in between-graph replication), so a job needs ``steps x BATCH_IMAGES`` images
and trains at the curve's images/s.  Beyond 4 workers the curve continues with the
speed-up model ``S(w) = w / (1 + sigma (w - 1))`` fitted (least squares) to the
four measured points and scaled to meet the measured value at 4.

Placement matters (DRAGON §4.2: Kubeflow's spread placement ran 1.2-6.3x slower over
1 GbE): workers not on a node with one of the job's PSs push and pull the gradient
through that PS node's link every step, so a step round of ``w`` workers takes
``w B / imgs(w) + 2 G r / link`` seconds (``G`` gradient gigabits, ``r`` remote
workers, ``link`` the PS node's Gbps).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import _validation as v
from ..model import Pod

__all__ = ["BATCH_IMAGES", "DRAGON_FIG2", "ElasticJob", "ScalingCurve", "TaskRequest",
           "GRADIENT_GBIT"]

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?")

#: **[decision]** Images per worker per step.
BATCH_IMAGES = 64

#: DRAGON Figure 2: images/s with 1, 2, 3, 4 workers.
DRAGON_FIG2: dict[str, tuple[float, ...]] = {
    "InceptionV3": (92.12, 154.14, 192.01, 280.79),
    "ResNet50": (115.06, 176.65, 277.37, 346.51),
    "AlexNet": (38.09, 59.1, 77.76, 97.69),
}

#: fp32 gradient per step, gigabits: AlexNet and ResNet50 from
#: ``models.csv`` of :mod:`tdmcore.data` (244 MB, 102 MB); InceptionV3 from torchvision's
#: ``inception_v3`` weights metadata (27,161,264 parameters x 4 bytes = 108.6 MB).
GRADIENT_GBIT: dict[str, float] = {
    "AlexNet": 244 * 8 / 1000,
    "ResNet50": 102 * 8 / 1000,
    "InceptionV3": 27_161_264 * 4 * 8 / 1e9,
}


@dataclass(frozen=True)
class ScalingCurve:
    """Images/s by worker count: measured points, then the fitted speed-up model."""

    measured: tuple[float, ...]
    sigma: float = field(init=False)

    def __post_init__(self) -> None:
        arr = v.as_float_array("measured", self.measured, ndim=1)
        if arr.size == 0 or np.any(arr <= 0):
            raise ValueError("measured: expected images/s > 0 for 1, 2, ... workers")
        object.__setattr__(self, "measured", tuple(float(x) for x in arr))
        # least squares of S(w) = w / (1 + sigma (w - 1)) <=> w / S - 1 = sigma (w - 1)
        w = np.arange(1, arr.size + 1, dtype=np.float64)
        speedup = arr / arr[0]
        x, y = w - 1, w / speedup - 1
        sigma = float((x @ y) / (x @ x)) if arr.size > 1 else 0.0
        object.__setattr__(self, "sigma", min(max(sigma, 0.0), 1.0))

    def images_per_s(self, workers: int) -> float:
        if workers <= 0:
            return 0.0
        n = len(self.measured)
        if workers <= n:
            return self.measured[workers - 1]
        model = self._speedup(workers) / self._speedup(n)
        return self.measured[-1] * model

    def _speedup(self, w: int) -> float:
        return w / (1.0 + self.sigma * (w - 1))


@dataclass(frozen=True)
class TaskRequest:
    """What one task asks for: cores, GiB, GPUs."""

    cpu: float = 0.0
    mem_gib: float = 0.0
    gpu: float = 0.0

    def __post_init__(self) -> None:
        for key in ("cpu", "mem_gib", "gpu"):
            value = v.real_number(key, getattr(self, key))
            if value < 0:
                raise ValueError(f"{key}: must be >= 0, got {value}")
            object.__setattr__(self, key, value)


#: Bounds of an :class:`ElasticJob`: the steps it trains (far beyond them the images
#: overflow a float and the job "finishes" at once) and its workers or PSs.
MAX_STEPS = 1e12
MAX_TASKS = 10_000


@dataclass(frozen=True)
class ElasticJob:
    """A job of the elastic policies (DRAGON, KOD2, weighted).

    ``workers`` is the count the user asked for (DRAGON Table 1 "Num. Workers"): the
    fixed size of the non-elastic baselines and the size AFCFS launches with when it
    fits.  ``utility``: the sigmoid ``(g1, g2, g3)`` of the weighted scheduler
    (priority, decay per second, target completion delay in seconds).
    """

    name: str
    model: str
    arrival_s: float
    steps: float
    min_workers: int
    max_workers: int
    workers: int
    worker: TaskRequest = TaskRequest(cpu=2.0, mem_gib=8.0, gpu=1.0)
    ps: TaskRequest = TaskRequest(cpu=1.0, mem_gib=4.0, gpu=0.0)
    n_ps: int = 1
    utility: tuple[float, float, float] = (1.0, 0.0, 0.0)

    # **[decision]** default requests: a worker 1 GPU, 2 cores, 8 GiB; a PS 1 core, 4 GiB.

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError("name: expected a DNS-1123 label (lower-case letters, digits, "
                             f"'-'), got {self.name!r}")
        if self.model not in DRAGON_FIG2:
            raise ValueError(f"model: expected one of {', '.join(DRAGON_FIG2)}, got "
                             f"{self.model!r}")
        if v.real_number("arrival_s", self.arrival_s) < 0:
            raise ValueError(f"arrival_s: must be >= 0, got {self.arrival_s}")
        if v.positive_float("steps", self.steps) > MAX_STEPS:
            raise ValueError(f"steps: at most {MAX_STEPS:g}, got {self.steps:g}")
        for key in ("min_workers", "max_workers", "workers", "n_ps"):
            object.__setattr__(self, key, v.whole(key, getattr(self, key), 1, MAX_TASKS))
        if not self.min_workers <= self.workers <= self.max_workers:
            raise ValueError(f"workers: expected min_workers <= workers <= max_workers, got "
                             f"{self.min_workers} <= {self.workers} <= {self.max_workers}")
        for key in ("worker", "ps"):
            if not isinstance(getattr(self, key), TaskRequest):
                raise ValueError(f"{key}: expected a TaskRequest")
        if not isinstance(self.utility, tuple | list) or len(self.utility) != 3:
            raise ValueError("utility: expected (g1, g2, g3)")
        g = tuple(v.real_number(f"utility[{i}]", x) for i, x in enumerate(self.utility))
        if min(g) < 0:
            raise ValueError("utility: g1, g2 and g3 must be >= 0")
        object.__setattr__(self, "utility", g)

    @property
    def curve(self) -> ScalingCurve:
        return _CURVES[self.model]

    @property
    def images(self) -> float:
        """Images to train: ``steps x BATCH_IMAGES``."""
        return float(self.steps) * BATCH_IMAGES

    def rate(self, workers: int, remote_workers: int = 0, link_gbps: float = math.inf) -> float:
        """Images/s with ``workers``, of which ``remote_workers`` are off the PS nodes
        (``link_gbps``: the PS nodes' link, > 0; ``inf``: no network cost)."""
        workers = v.whole("workers", workers, None)
        remote_workers = v.whole("remote_workers", remote_workers, 0, max(workers, 0))
        link = v.real_number("link_gbps", link_gbps) if link_gbps != math.inf else math.inf
        if not link > 0:
            raise ValueError(f"link_gbps: must be > 0, got {link_gbps!r}")
        if workers <= 0:
            return 0.0
        compute = workers * BATCH_IMAGES / self.curve.images_per_s(workers)
        comm = 2.0 * GRADIENT_GBIT[self.model] * remote_workers / link
        return workers * BATCH_IMAGES / (compute + comm)

    def ps_pod(self, k: int) -> Pod:
        k = v.whole("k", k, 0)
        return Pod(f"{self.name}-ps-{k}", self.name, cpu=self.ps.cpu, mem_gib=self.ps.mem_gib,
                   gpu=self.ps.gpu)

    def worker_pod(self, k: int) -> Pod:
        k = v.whole("k", k, 0)
        return Pod(f"{self.name}-worker-{k}", self.name, cpu=self.worker.cpu,
                   mem_gib=self.worker.mem_gib, gpu=self.worker.gpu)

    def is_worker(self, pod_name: str) -> bool:
        return pod_name.startswith(f"{self.name}-worker-")

    def gang(self, workers: int) -> list[Pod]:
        """The PS pods then ``workers`` worker pods."""
        return [self.ps_pod(k) for k in range(self.n_ps)] + [self.worker_pod(k)
                                                             for k in range(workers)]


_CURVES = {name: ScalingCurve(points) for name, points in DRAGON_FIG2.items()}


def total_request(job: ElasticJob, workers: int) -> tuple[float, float, float]:
    """(GPUs, cores, GiB) of the PSs and ``workers`` workers."""
    return (job.n_ps * job.ps.gpu + workers * job.worker.gpu,
            job.n_ps * job.ps.cpu + workers * job.worker.cpu,
            job.n_ps * job.ps.mem_gib + workers * job.worker.mem_gib)


def check_jobs(jobs: Sequence[ElasticJob]) -> dict[str, ElasticJob]:
    out: dict[str, ElasticJob] = {}
    for i, job in enumerate(jobs):
        if not isinstance(job, ElasticJob):
            raise ValueError(f"jobs[{i}]: expected an ElasticJob, got {type(job).__name__}")
        if job.name in out:
            raise ValueError(f"jobs[{i}]: duplicate job name {job.name!r}")
        out[job.name] = job
    if not out:
        raise ValueError("jobs: expected at least one job")
    return out
