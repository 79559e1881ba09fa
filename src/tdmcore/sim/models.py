"""Traffic patterns of the Metronome paper's 13 models, derived from the shipped data.

The Metronome paper (Table III) trains 13 models but publishes no table of their
traffic patterns.  Each pattern here is derived from the data shipped in
:mod:`tdmcore.data` (its ``README.md`` gives each file's source), and every number
names its source:

* **period** ``t_p``: a measured iteration time.  In order of preference: the
  paper's own Table VI (0.5 h, per snapshot role; also in ``models.csv``), Muri's
  measured ``iteration_time`` at the job's worker count, Pollux's ``step_time`` for
  the job's placement, Gavel's single-GPU ``1000 / steps_per_s``.
* **duty cycle** ``d_p``: the measured communication share (Muri
  ``resource_time_2 / iteration_time`` at the worker count, Pollux
  ``sync_time / step_time``) where the model is measured, or where its twin is
  (:data:`DUTY_TWIN`); otherwise from the
  gradient volume: ring all-reduce moves ``2 (n - 1) / n x gradient`` per worker per
  iteration, ``comm_ms = that x 8 / link_Gbps``.
* **rate** ``r_p``: the host link's rate (bulk all-reduce runs at the NIC's rate).

**[decision]** Four models have no measured iteration time anywhere in the data
(AlexNet, VGG11, GoogLeNet, DenseNet201).  Each takes the single-GPU compute time
of its closest measured relative (:data:`PROXY`), and its period is that compute time
plus the all-reduce time from its own gradient size; the proxy is reported with the
pattern (:attr:`ModelPattern.sources`).  A period measured on one GPU (Gavel) is
compute only, so the formula's comm time is added to it; a period measured on the
distributed testbed (Table VI, Muri, Pollux) already contains its communication,
so the formula's duty cycle is capped at :func:`max_duty` (the largest share
measured at the same GPU count) instead.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import cache

from .. import _validation as v
from ..data import data_files, open_data
from ..model import TrafficPattern

__all__ = [
    "DUTY_TWIN",
    "MODELS",
    "PROXY",
    "ModelPattern",
    "known_names",
    "max_duty",
    "model_name",
    "model_pattern",
]


#: Model -> (fp32 gradient MB, Table VI / models.csv period ms or None).
#: ``grad_fp32_MB`` and ``metronome_ms_per_iter`` columns of ``models.csv``.
MODELS: dict[str, tuple[float, float | None]] = {
    "AlexNet": (244.0, None),
    "VGG11": (531.0, None),
    "VGG16": (553.0, 88.0),
    "VGG19": (575.0, 422.0),
    "ResNet18": (47.0, None),
    "ResNet50": (102.0, None),
    "ResNet152": (241.0, 112.0),
    "WideResNet101": (508.0, 124.0),
    "GoogLeNet": (26.0, None),
    "DenseNet201": (80.0, None),
    "GPT-1": (466.0, 430.0),
    "GPT-2": (498.0, None),
    "BERT": (440.0, 534.0),
}

#: Muri profile name of the models Muri measured (``profiles/muri/*.csv``).
MURI_NAME = {"VGG16": "vgg16", "VGG19": "vgg19", "BERT": "bert", "GPT-2": "gpt2",
             "ResNet18": "resnet18"}
#: Other names of a model, beyond its own written any way (``model_name``): the
#: names other sources give it.
ALIASES: dict[str, tuple[str, ...]] = {
    "WideResNet101": ("wide_resnet101_2",),  # torchvision's name
}
#: Pollux app of the models Pollux measured (``profiles/pollux/<app>_placements.csv``).
POLLUX_APP = {"ResNet50": "imagenet"}
#: Gavel job type (V100, batch 64, one GPU) for single-GPU compute times.
GAVEL_NAME = {"ResNet18": "('ResNet-18 (batch size 64)', 1)",
              "ResNet50": "('ResNet-50 (batch size 64)', 1)"}
#: **[decision]** the measured relative whose single-GPU compute time an unmeasured
#: model borrows: the same family where there is one (VGG11 -> VGG16's Muri
#: single-GPU time), else the ResNet of similar depth and compute.
PROXY = {"VGG11": "VGG16", "AlexNet": "ResNet18", "GoogLeNet": "ResNet18",
         "DenseNet201": "ResNet50"}
#: **[decision]** a model without a measured communication share that has a measured
#: twin of the same architecture takes the twin's Muri share at its worker count:
#: GPT-1 and GPT-2 small are the same decoder stack (12 layers, d_model 768; 117 M
#: against 124 M parameters) and the Metronome paper trains both with DeepSpeed.
#: The fp32 ring all-reduce formula gives GPT-1 0.35 at 2 workers on 25 Gbps, four
#: times the 0.086 Muri measured for GPT-2 (mixed-precision gradients, overlapped
#: with the backward pass), and made the paper's S5 impossible to interleave.
DUTY_TWIN = {"GPT-1": "GPT-2"}
#: Pollux's local batch nearest to this is used (DRAGON's 64 images per step).
POLLUX_BATCH = 64


def _key(text: str) -> str:
    """A model name as :func:`model_name` compares it: letters and digits only, in
    lower case (``GPT-2``, ``gpt2`` and ``Gpt_2`` are one key)."""
    return "".join(c for c in text.casefold() if c.isalnum())


@cache
def _names_by_key() -> dict[str, str]:
    out: dict[str, str] = {}
    for model in MODELS:
        for name in (model, MURI_NAME.get(model, model), *ALIASES.get(model, ())):
            out[_key(name)] = model
    return out


def model_name(text: str) -> str | None:
    """The model of :data:`MODELS` that ``text`` names, or None.

    **[decision]** Names match whatever their case and separators: ``gpt2``,
    ``GPT-2`` and ``gpt_2`` are GPT-2, as Muri's traces and profiles write it
    (:data:`MURI_NAME`); so are a model's other names (:data:`ALIASES`,
    ``wide_resnet101_2``).  Letters and digits are compared, nothing else, so a
    name never matches a model whose letters or digits differ (``resnet-18`` is
    ResNet18, ``resnet1`` is no model).
    """
    if not isinstance(text, str):
        return None
    return _names_by_key().get(_key(text))


def known_names() -> dict[str, tuple[str, ...]]:
    """Every model with the other names :func:`model_name` takes for it (its Muri
    profile name and :data:`ALIASES`, where they differ from its own spelling):
    what ``tdmcore list models`` shows."""
    out: dict[str, tuple[str, ...]] = {}
    for model in MODELS:
        others = [MURI_NAME.get(model, model), *ALIASES.get(model, ())]
        out[model] = tuple(dict.fromkeys(n for n in others if n != model))
    return out


@dataclass(frozen=True)
class ModelPattern:
    """A model's traffic pattern at ``workers`` workers on a ``link_gbps`` link."""

    model: str
    workers: int
    pattern: TrafficPattern
    sources: dict[str, str]


@cache
def _muri() -> dict[tuple[str, int], tuple[float, float]]:
    """(model_name, num_gpu) -> (iteration_time ms, resource_time_2 ms), first row seen."""
    out: dict[tuple[str, int], tuple[float, float]] = {}
    for path in data_files("profiles/muri", ".csv"):
        with open_data(path) as f:
            for row in csv.DictReader(f):
                key = (row["model_name"], int(row["num_gpu"]))
                out.setdefault(key, (float(row["iteration_time"]),
                                     float(row["resource_time_2"])))
    return out


@cache
def _pollux(app: str, placement: str) -> tuple[float, float, int]:
    """(step_time ms, sync_time ms, local batch) at the batch nearest POLLUX_BATCH."""
    with open_data(f"profiles/pollux/{app}_placements.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["placement"] == placement]
    if not rows:
        raise ValueError(f"workers: Pollux has no {app} placement {placement!r}")
    best = min(rows, key=lambda r: (abs(int(r["local_bsz"]) - POLLUX_BATCH),
                                    int(r["local_bsz"])))
    return (float(best["step_time"]) * 1e3, float(best["sync_time"]) * 1e3,
            int(best["local_bsz"]))


@cache
def _gavel_ms(model: str) -> float:
    with open_data("throughputs/gavel_simulation_throughputs.json") as f:
        data = json.load(f)
    return 1000.0 / float(data["v100"][GAVEL_NAME[model]]["null"])


def _muri_at(name: str, workers: int) -> tuple[int, float, float]:
    """Muri's row at the smallest measured GPU count >= workers (2..32)."""
    counts = sorted(n for (m, n) in _muri() if m == name and n >= 2)
    n = next((c for c in counts if c >= workers), counts[-1])
    it, comm = _muri()[(name, n)]
    return n, it, comm


def _muri_count(workers: int) -> int:
    """The smallest GPU count Muri measured that is >= ``workers`` (2..32)."""
    counts = sorted({n for (_, n) in _muri() if n >= 2})
    return next((c for c in counts if c >= workers), counts[-1])


@cache
def max_duty(workers: int = 2) -> float:
    """The largest communication share Muri measured at ``workers`` GPUs
    (``resource_time_2 / iteration_time`` over every model's row at the smallest
    measured count >= ``workers``): the cap on formula-derived duty cycles.

    **[decision]** A period measured on the distributed testbed already contains
    its communication; when fp32 ring all-reduce would take longer than that share
    allows, the measured run moved less (fine-tuning freezes layers; mixed
    precision), so the formula is capped at the largest share measured at the same
    GPU count (0.209 at 2, 0.344 at 4, 0.512 at 32).  The share grows with the GPU
    count, so the cap of 32 GPUs (BERT's 0.512) would let a 2-worker job
    communicate for more than twice the share any 2-GPU job was measured at.
    """
    count = _muri_count(max(2, int(workers)))
    return max(comm / it for (_, n), (it, comm) in _muri().items() if n == count)


def _allreduce_ms(grad_mb: float, workers: int, link_gbps: float) -> float:
    """Ring all-reduce: ``2 (n-1)/n x gradient`` bytes per worker at the link rate."""
    return 2.0 * (workers - 1) / workers * grad_mb * 8.0 / link_gbps


def model_pattern(model: str, workers: int, link_gbps: float = 25.0,
                  period_ms: float | None = None, period_source: str | None = None
                  ) -> ModelPattern:
    """The traffic pattern of ``model`` trained by ``workers`` workers on ``link_gbps``.

    ``period_ms`` overrides the period (a snapshot's Table VI value), with
    ``period_source`` saying where it comes from.  ``workers = 1`` still returns
    a pattern (the one a second worker would give), since placement decides
    whether the job's traffic crosses a host link.
    """
    if not isinstance(model, str) or model not in MODELS:
        raise ValueError(f"model: unknown model {model!r}{v.did_you_mean(model, MODELS)}; "
                         f"choose from {', '.join(MODELS)}")
    workers = v.whole("workers", workers)
    link = v.positive_float("link_gbps", link_gbps)
    n = max(workers, 2)
    grad_mb, table6 = MODELS[model]
    sources: dict[str, str] = {}
    duty: float | None = None
    period: float
    if model in PROXY:
        relative = PROXY[model]
        if relative in GAVEL_NAME:
            compute = _gavel_ms(relative)
            where = f"Gavel V100 {GAVEL_NAME[relative]} ({compute:.1f} ms)"
        else:
            compute, _ = _muri()[(MURI_NAME[relative], 1)]
            where = f"Muri {MURI_NAME[relative]} on 1 GPU ({compute:g} ms)"
        comm = _allreduce_ms(grad_mb, n, link)
        period = compute + comm
        duty = comm / period
        sources["period_ms"] = (f"[decision] no measurement of {model} in the data: "
                                f"compute time of {relative}, {where}, plus all-reduce")
        sources["duty_cycle"] = (f"ring all-reduce of {grad_mb:g} MB (models.csv) by {n} "
                                 f"workers at {link:g} Gbps: {comm:.1f} ms")
    elif table6 is not None:
        period = table6
        sources["period_ms"] = "Metronome Table VI, 0.5 h (models.csv metronome_ms_per_iter)"
    elif model in MURI_NAME:
        m, it, _ = _muri_at(MURI_NAME[model], n)
        period = it
        sources["period_ms"] = f"Muri {MURI_NAME[model]} iteration_time on {m} GPUs"
    else:  # Pollux
        step, _, bsz = _pollux(POLLUX_APP[model], "1" * min(n, 4))
        period = step
        sources["period_ms"] = (f"Pollux {POLLUX_APP[model]} step_time, placement "
                                f"{'1' * min(n, 4)}, local batch {bsz}")
    if period_ms is not None:
        period = v.positive_float("period_ms", period_ms)
        sources["period_ms"] = period_source or "given"
    if duty is None:
        measured = DUTY_TWIN.get(model, model)
        if measured in MURI_NAME:
            m, it, comm_ms = _muri_at(MURI_NAME[measured], n)
            duty = comm_ms / it
            twin = "" if measured == model else (f"[decision] {model}'s twin {measured} "
                                                  "(same architecture), ")
            sources["duty_cycle"] = (f"{twin}Muri {MURI_NAME[measured]} on {m} GPUs: "
                                     f"resource_time_2 / iteration_time = {comm_ms:g} / "
                                     f"{it:g}")
        elif model in POLLUX_APP:
            step, sync, bsz = _pollux(POLLUX_APP[model], "1" * min(n, 4))
            duty = sync / step
            sources["duty_cycle"] = (f"Pollux {POLLUX_APP[model]} sync_time / step_time, "
                                     f"local batch {bsz}")
        else:
            comm = _allreduce_ms(grad_mb, n, link)
            cap = max_duty(n)
            duty = min(comm / period, cap)
            sources["duty_cycle"] = (f"ring all-reduce of {grad_mb:g} MB (models.csv) by {n} "
                                     f"workers at {link:g} Gbps: {comm:.1f} ms of "
                                     f"{period:g} ms, capped at {cap:.3f} (the largest "
                                     f"share Muri measured on {_muri_count(n)} GPUs)")
    sources["bandwidth_gbps"] = f"the host link's rate ({link:g} Gbps)"
    return ModelPattern(model, workers, TrafficPattern(period, duty, link), sources)
