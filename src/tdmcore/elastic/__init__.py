"""Elastic gang scheduling: DRAGON, KOD2, the weighted scheduler and two baselines.

Policies decide :class:`~.base.Plan` objects over the domain model's
:class:`~tdmcore.model.ClusterState`; the simulator
(:func:`tdmcore.sim.elastic.run_elastic`) and the Kubernetes bridge apply them.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import _validation as v
from .base import ElasticPolicy, ElasticView, Plan, apply_plan
from .dragon import DragonPolicy, KubeflowPolicy, LocalityPolicy
from .job import BATCH_IMAGES, DRAGON_FIG2, ElasticJob, ScalingCurve, TaskRequest
from .kod2 import Kod2Policy, kod2_weight
from .weighted import WeightedPolicy, expected_utility

__all__ = [
    "BATCH_IMAGES",
    "DRAGON_FIG2",
    "ELASTIC_POLICIES",
    "DragonPolicy",
    "ElasticJob",
    "ElasticPolicy",
    "ElasticView",
    "Kod2Policy",
    "KubeflowPolicy",
    "LocalityPolicy",
    "Plan",
    "ScalingCurve",
    "TaskRequest",
    "WeightedPolicy",
    "apply_plan",
    "expected_utility",
    "kod2_weight",
    "make_elastic_policy",
]

ELASTIC_POLICIES: dict[str, Callable[[], ElasticPolicy]] = {
    "dragon": DragonPolicy,
    "locality": LocalityPolicy,
    "kubeflow": KubeflowPolicy,
    "kod2": Kod2Policy,
    "weighted": WeightedPolicy,
}


def make_elastic_policy(name: str) -> ElasticPolicy:
    """A fresh elastic policy by name (see :data:`ELASTIC_POLICIES`)."""
    if not isinstance(name, str) or name not in ELASTIC_POLICIES:
        raise ValueError(f"name: unknown policy {name!r}{v.did_you_mean(name, ELASTIC_POLICIES)}"
                         "; choose from "
                         f"{', '.join(ELASTIC_POLICIES)}")
    return ELASTIC_POLICIES[name]()
