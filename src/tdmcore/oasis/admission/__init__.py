"""Slotted admission and elastic-allocation policies of the OASiS setting, by name.

``oasis`` is Alg. 1 of Bao et al. (INFOCOM'18); ``fifo``, ``drf``, ``rrh`` and
``dorm`` are the baselines of its §V-A.  Every policy answers one
:class:`~.base.SlotDecision` per slot from a :class:`~.base.SlotView`; the
simulator :func:`tdmcore.sim.slotted.run_slotted` runs them.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import _validation as v
from .base import (
    RESOURCES,
    AdmissionPolicy,
    Allocation,
    SlotDecision,
    SlottedCluster,
    SlotView,
)
from .dorm import DormPolicy
from .drf import DrfPolicy
from .fifo import FifoPolicy
from .oasis import OasisPolicy, scaled_bounds
from .rrh import RrhPolicy

__all__ = [
    "ADMISSION_POLICIES",
    "RESOURCES",
    "AdmissionPolicy",
    "Allocation",
    "DormPolicy",
    "DrfPolicy",
    "FifoPolicy",
    "OasisPolicy",
    "RrhPolicy",
    "SlotDecision",
    "SlotView",
    "SlottedCluster",
    "make_admission_policy",
    "scaled_bounds",
]

ADMISSION_POLICIES: dict[str, Callable[[], AdmissionPolicy]] = {
    "oasis": OasisPolicy,
    "fifo": FifoPolicy,
    "drf": DrfPolicy,
    "rrh": RrhPolicy,
    "dorm": DormPolicy,
}


def make_admission_policy(name: str) -> AdmissionPolicy:
    """A fresh slotted policy by name (see :data:`ADMISSION_POLICIES`)."""
    if not isinstance(name, str) or name not in ADMISSION_POLICIES:
        raise ValueError(f"name: unknown policy {name!r}"
                         f"{v.did_you_mean(name, ADMISSION_POLICIES)}; choose from "
                         f"{', '.join(ADMISSION_POLICIES)}")
    return ADMISSION_POLICIES[name]()
