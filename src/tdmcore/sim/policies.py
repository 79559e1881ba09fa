"""The policies the simulators take by name, and a policy of your own.

The policy half of the simulator's registry (:mod:`tdmcore.sim.registry` lists
scenarios and traces beside it): :data:`NAMED_POLICIES` has one entry per name a
command, a sweep spec or :func:`tdmcore.sim.cluster.run_cluster` takes, with what it
is and what runs it.  The command line's ``--policies``, ``tdmcore list policies``,
``simulate --help`` and sweep specs all read it; a built-in placement policy added
to :data:`tdmcore.metronome.policies.POLICIES` appears here with its summary.

A cluster run is a placement policy on a network (:data:`NETWORKS`): ``shared``, the
flow model of the host links, or ``ideal``, where every pod gets a private,
uncongested link of exactly its rate ``r_p``.  **[decision]** The name ``ideal`` is
the run ``metronome`` placement on the ``ideal`` network: every job runs as if alone
on the network, on Metronome's placements, which is what the Metronome paper's
"ideal time" means.  It bounds each job's time per iteration from below (no
transfer ever shares a link), not its completion time: a job still waits for a
placement as under ``metronome`` (S1's third job waits for a loop-free one), and a
policy that places sooner can finish sooner.

``MODULE:CALLABLE`` names a policy of your own (docs/custom-policy.md):
:func:`import_policy` reads it, the same for ``tdmcore simulate --policies`` and
sweep specs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _validation as v
from ..framework import Policy, check_policy
from ..metronome.controller import ControllerConfig
from ..metronome.policies import POLICIES, SUMMARIES, MetronomeConfig, MetronomePolicy

__all__ = [
    "CLUSTER_POLICIES",
    "NAMED_POLICIES",
    "NETWORKS",
    "NamedPolicy",
    "build_policy",
    "cluster_policy",
    "controller_config",
    "import_policy",
    "policy_source",
]

#: The networks a cluster run can have: the flow model of the host links
#: (``shared``), or a private link per pod at its rate (``ideal``).
NETWORKS: tuple[str, ...] = ("shared", "ideal")


@dataclass(frozen=True)
class NamedPolicy:
    """A name a simulator takes for a policy.

    ``kind``: ``cluster`` (the cluster simulator: ``tdmcore simulate``, sweeps,
    :func:`~tdmcore.sim.cluster.run_cluster`), ``elastic`` (DRAGON's workloads,
    :mod:`tdmcore.sim.elastic`) or ``admission`` (the OASiS setting,
    :mod:`tdmcore.sim.slotted`).  A cluster entry runs the placement policy
    ``placement`` (a name of :data:`tdmcore.metronome.policies.POLICIES`) on
    ``network``.
    """

    name: str
    kind: str
    summary: str
    placement: str | None = None
    network: str = "shared"


def _first_line(make: Any) -> str:
    """The first line of a policy class's docstring, for listings."""
    lines = (make.__doc__ or "").strip().splitlines()
    return lines[0].replace("``", "") if lines else ""


def _named_policies() -> dict[str, NamedPolicy]:
    from ..elastic import ELASTIC_POLICIES
    from ..oasis.admission import ADMISSION_POLICIES

    out = {name: NamedPolicy(name, "cluster", SUMMARIES[name], placement=name)
           for name in POLICIES}
    out["ideal"] = NamedPolicy(
        "ideal", "cluster", "Metronome's placement on the ideal network (a private link "
        "per pod): bounds each job's time per iteration, not its JCT.",
        placement="metronome", network="ideal")
    out.update((name, NamedPolicy(name, "elastic", f"Elastic gangs. {_first_line(make)}"))
               for name, make in ELASTIC_POLICIES.items())
    out.update((name, NamedPolicy(name, "admission", f"Admission. {_first_line(make)}"))
               for name, make in ADMISSION_POLICIES.items())
    return out


#: Every policy name a simulator takes, with what it is (``tdmcore list policies``).
NAMED_POLICIES: dict[str, NamedPolicy] = _named_policies()
#: The names the cluster simulator takes (``run_cluster``, ``tdmcore simulate``,
#: sweep specs): the placement policies, each on the shared network, and ``ideal``.
CLUSTER_POLICIES: tuple[str, ...] = tuple(n for n, p in NAMED_POLICIES.items()
                                          if p.kind == "cluster")


def cluster_policy(name: str) -> tuple[Policy, str]:
    """A fresh placement policy and the network of the cluster run ``name``.

    Raises
    ------
    ValueError
        Naming ``policy``, for a name not in :data:`CLUSTER_POLICIES`.
    """
    entry = NAMED_POLICIES.get(name) if isinstance(name, str) else None
    if entry is None or entry.kind != "cluster" or entry.placement is None:
        raise ValueError(f"policy: unknown policy {name!r}"
                         f"{v.did_you_mean(name, CLUSTER_POLICIES)}; choose from "
                         f"{', '.join(CLUSTER_POLICIES)}, or pass a policy object")
    return POLICIES[entry.placement](), entry.network


def import_policy(spec: str) -> Callable[[], Policy]:
    """``MODULE:CALLABLE`` -> the callable (the current folder is searched too).

    The one reading of a user's policy entry, for ``tdmcore simulate --policies``
    and sweep specs.  Raises ValueError with a one-line reason when the entry is
    not of that form, the module cannot be imported (whatever its code raises, a
    ``sys.exit`` included), or the name is missing or not callable.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name.strip() or not attr.strip():
        raise ValueError(f"{spec!r} is not MODULE:CALLABLE")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # the user's module: any error is theirs
        raise ValueError(f"cannot import {module_name!r} ({type(exc).__name__}: {exc})"
                         ) from None
    try:
        factory = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{module_name!r} has no {attr!r}") from None
    if not callable(factory):
        raise ValueError(f"{spec} is not callable")
    return factory  # type: ignore[no-any-return]


def policy_source(name: str) -> str | None:
    """sha256 of the file of the module that defines a policy's callable.

    Parameters
    ----------
    name : str
        A sweep's policy entry: a built-in name or ``MODULE:CALLABLE``.

    Returns
    -------
    str or None
        An empty string for a built-in policy (tdmcore's code is
        :func:`~tdmcore.sim.sweep.tasks.code_digest`'s); for ``MODULE:CALLABLE`` the
        digest of the file of the module that defines ``CALLABLE`` (its
        ``__module__``: the module a class or function was written in, which a
        package may re-export); None when that file cannot be found or read (the
        entry does not import, a module without a file, ...).  Edits to other
        modules it imports are not seen.
    """
    if ":" not in name:
        return ""
    try:
        factory = import_policy(name)
    except ValueError:
        return None
    module = inspect.getmodule(factory)
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return None
    try:
        return hashlib.sha256(Path(file).read_bytes()).hexdigest()
    except OSError:
        return None


def build_policy(name: str, metronome: Mapping[str, Any] | None = None) -> Policy | str:
    """A fresh policy for one run: ``MODULE:CALLABLE`` called once; a built-in
    Metronome policy rebuilt with ``metronome`` overrides of its config; any other
    cluster name as it is (``ideal`` among them: :func:`~tdmcore.sim.cluster.run_cluster`
    takes names)."""
    if ":" in name:
        made = import_policy(name)()
        return check_policy(made, f"policies: {name}()")
    if not metronome:
        return name
    policy, network = cluster_policy(name)
    if network != "shared" or not isinstance(policy, MetronomePolicy):
        return name
    return MetronomePolicy(dataclasses.replace(policy.config, **metronome), name=policy.name)


def controller_config(policy: Policy | str, overrides: Mapping[str, Any]
                      ) -> ControllerConfig | None:
    """The controller's thresholds for ``policy`` with ``overrides``, or None for
    the default (no override, or a policy that runs no controller)."""
    if isinstance(policy, str):
        made, network = cluster_policy(policy)
        config = getattr(made, "config", None) if network == "shared" else None
    else:
        config = getattr(policy, "config", None)
    if not overrides or not isinstance(config, MetronomeConfig):
        return None
    return dataclasses.replace(ControllerConfig.for_policy(config), **overrides)
