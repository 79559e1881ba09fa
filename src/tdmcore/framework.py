"""The scheduling framework every policy plugs into (kube-scheduler's shape).

A policy implements the extension points PreFilter, Filter, Score,
NormalizeScore and Reserve over *all nodes at once* (arrays indexed by node, the
cluster's order), so that the kernels behind them see plain arrays.  A status is
a closed enum: "no node fits" is :attr:`Status.UNSCHEDULABLE`, an expected
outcome, never an exception.  Gangs (Eqs. 11-12) are placed all or nothing on a
tentative copy of the state: a rejected gang leaves the state exactly as it was.

What raises and what returns :attr:`Status.ERROR` (one rule for
:meth:`Scheduler.decide`, :meth:`~Scheduler.schedule`, :meth:`~Scheduler.schedule_gang`
and :meth:`~Scheduler.schedule_workload`):

* an argument of the wrong kind (a state that is no
  :class:`~tdmcore.model.ClusterState`, pods that are not :class:`~tdmcore.model.Pod`
  objects) raises :class:`ValueError` naming it: the call cannot be read;
* a call that can be read but not decided returns :attr:`Status.ERROR` with the
  reason and changes nothing: an empty gang, two pods of one name, a gang that
  lacks some of a job's pods (fewer than its ``gang_size``, counting the job's pods
  already placed: all or nothing means all of them), a pod the state cannot take
  (:meth:`~tdmcore.model.ClusterState.check_pod`: placed already, or disagreeing
  with its job);
* no node fits: :attr:`Status.UNSCHEDULABLE`, an expected outcome;
* a policy that is not tdmcore's own and breaks its contract (raises, ``sys.exit``
  included, or returns what its extension point may not) raises
  :class:`PolicyError`, a :class:`ValueError` naming the policy.

The framework knows no policy: Filter answers a :class:`Reason` per node (the
framework owns the codes and their texts, so every front door says the same),
a policy keeps what its extension points share under its name in
:attr:`CycleState.data`, and :meth:`Scheduler.reserve` is the one entry that places
a pod and hands back the policy's :class:`ReserveResult`, whose
:attr:`~ReserveResult.extension` is the policy's own, opaque here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from ._equality import ValueEquality
from .model import ClusterState, Pod
from .snapshot import Snapshot

__all__ = [
    "EXTENSION_POINTS",
    "QUEUES",
    "CycleState",
    "Decision",
    "GangDecision",
    "Policy",
    "PolicyError",
    "REASON_TEXTS",
    "Reason",
    "ReserveResult",
    "Scheduler",
    "Status",
    "UNRESOLVABLE",
    "check_policy",
    "count_reasons",
    "describe",
]

_T = TypeVar("_T")


#: How gangs that cannot be placed wait, in the simulator (``run_cluster(queue=...)``)
#: and the bridge's standalone scheduler (``--queue``): ``"backoff"`` (default), as
#: kube-scheduler with coscheduling does: the gang backs off and is retried when the
#: cluster changes, while the gangs behind it are tried meanwhile; ``"fifo"``: strict
#: head-of-line order, nothing passes a waiting gang.
QUEUES: tuple[str, ...] = ("backoff", "fifo")


class Status(enum.Enum):
    """Outcome of an extension point or of a whole decision."""

    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"
    ERROR = "Error"


class Reason(enum.IntFlag):
    """Why Filter rejects a node: per node, the flags of the first rule the node
    fails (kube-scheduler's order: a rule sees only the nodes the earlier ones
    kept; NodeResourcesFit names every resource short), ``FITS`` (0) when it passes.

    The framework owns the codes and their texts (:data:`REASON_TEXTS`,
    :func:`describe`), so the simulator's message and the Kubernetes bridge's
    per-node reasons say the same.  ``POLICY`` and the bits above it are a policy's
    own rules, named by its optional ``reason_names`` mapping (code -> text).
    """

    FITS = 0
    CPU = 1
    MEMORY = 2
    GPU = 4
    LINK = 8  # the host link is slower than the pod's rate (Eq. 14)
    BANDWIDTH = 16  # the link's free bandwidth is short (bandwidth as a resource)
    ANTI_AFFINITY = 32  # a pod of the job is on the node (required anti-affinity)
    DEPENDENCY_LOOP = 64  # a cycle in the affinity graph (spec §6)
    GANG = 128  # the pod's gang is incomplete or does not fit whole (Eqs. 11-12)
    POLICY = 256  # the policy's own rule (and every higher bit)


#: The text of each framework reason (one owner: :func:`describe` reads it).
REASON_TEXTS: dict[int, str] = {
    Reason.CPU: "Insufficient cpu",
    Reason.MEMORY: "Insufficient memory",
    Reason.GPU: "Insufficient gpu",
    Reason.LINK: "link slower than the pod's bandwidth (Eq. 14)",
    Reason.BANDWIDTH: "Insufficient link bandwidth",
    Reason.ANTI_AFFINITY: "a pod of its job is on the node (anti-affinity)",
    Reason.DEPENDENCY_LOOP: "Dependency loop in the affinity graph",
    Reason.GANG: "gang not placeable whole (Eqs. 11-12)",
    Reason.POLICY: "rejected by the policy's Filter",
}

#: The reasons no eviction can cure (kube-scheduler's FailedAndUnresolvableNodes).
UNRESOLVABLE = Reason.LINK


def _bits(code: int) -> list[int]:
    out, bit, rest = [], 1, int(code)
    while rest:
        if rest & 1:
            out.append(bit)
        rest >>= 1
        bit <<= 1
    return out


def describe(code: int, names: Mapping[int, str] | None = None) -> str:
    """The reasons of one node's ``code`` (:class:`Reason` flags), joined by ", ":
    ``names`` first (a policy's own rules, a front door's words), then
    :data:`REASON_TEXTS`; an unnamed policy bit reads as ``POLICY``'s text with its
    code."""
    names = names or {}
    return ", ".join(names.get(bit) or REASON_TEXTS.get(bit)
                     or f"{REASON_TEXTS[Reason.POLICY]} (reason {bit:#x})"
                     for bit in _bits(code))


def count_reasons(codes: NDArray[np.int64], names: Mapping[int, str] | None = None
                  ) -> dict[str, int]:
    """How many nodes each reason rejected (a node counts under each of its
    flags), in code order: the simulator's "0/4 nodes are available: ..."."""
    values, counts = np.unique(np.asarray(codes, dtype=np.int64), return_counts=True)
    per_bit: dict[int, int] = {}
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        for bit in _bits(value):
            per_bit[bit] = per_bit.get(bit, 0) + count
    return {describe(bit, names): per_bit[bit] for bit in sorted(per_bit)}


@dataclass(eq=False)
class CycleState(ValueEquality):
    """What one scheduling cycle computes and caches between extension points.

    The framework's fields are the same for every policy; what a policy's own
    extension points share (Metronome's latencies and EarlyReturn nodes, say) is
    kept in :attr:`data` under the policy's name (:meth:`data_of`).
    """

    pod: Pod
    snapshot: Snapshot
    codes: NDArray[np.int64] | None = None  # Filter: a Reason per node, 0 = fits
    feasible: NDArray[np.bool_] | None = None  # Filter: codes == 0
    raw_scores: NDArray[np.float64] | None = None  # Score
    scores: NDArray[np.float64] | None = None  # NormalizeScore
    finalists: NDArray[np.bool_] | None = None  # nodes NormalizeScore lets win (None: all)
    data: dict[str, Any] = field(default_factory=dict)  # per policy, by its name

    def data_of(self, owner: str, make: Callable[[], _T]) -> _T:
        """The cycle data of the policy named ``owner``, made by ``make`` on first
        use."""
        value = self.data.get(owner)
        if value is None:
            value = self.data[owner] = make()
        return value


@dataclass(frozen=True)
class ReserveResult:
    """What Reserve hands on (to the controller, the simulator, the bridge's
    records; Alg. 1 lines 30-40).

    Attributes
    ----------
    node : int
        The node the pod was placed on.
    shifts_ms : dict of str to float
        Time shift per pod on the node's link; empty when no rotation was
        computed (EarlyReturn, LowComm).
    skip_phase_three : bool
        ``SkipPhaseThree``: the controller need not re-plan the link in
        ``optimal`` mode.
    link_pods : tuple of str
        The rows of the node's link after the Reserve: one pod per job whose
        traffic crosses it, in deploy order (``state.link_rows[node]``).
    extension : object
        The policy's own result, opaque to the framework (None: nothing more);
        e.g. Metronome's :class:`~tdmcore.metronome.policies.metronome.LinkReservation`
        (the rotations, base period and link plan it computed).  A policy that
        computes rotations or a link plan gives them attributes ``rotations``
        (dict of job to bins), ``base_period_ms`` and ``plan``, read by
        :attr:`rotations`, :attr:`base_period_ms` and :attr:`plan`.  The
        rotations are per *job* on the node's link, keyed by job name: a job is one
        row of the link, whatever pods of it the node holds (``shifts_ms`` is per
        pod: each pod of a job gets its job's shift).
    """

    node: int
    shifts_ms: dict[str, float]
    skip_phase_three: bool
    link_pods: tuple[str, ...]
    extension: Any = None

    @property
    def rotations(self) -> dict[str, int]:
        """The extension's rotation per job (bins); empty when it computed none."""
        return dict(getattr(self.extension, "rotations", None) or {})

    @property
    def base_period_ms(self) -> float:
        """The extension's base period ``T`` of the link (0: none computed)."""
        return float(getattr(self.extension, "base_period_ms", 0.0) or 0.0)

    @property
    def plan(self) -> Any:
        """The extension's link plan (None: none), so that a controller need not
        plan the link again."""
        return getattr(self.extension, "plan", None)


@dataclass(frozen=True, eq=False)
class Decision(ValueEquality):
    """One pod's scheduling decision."""

    status: Status
    pod: str
    node: int | None = None
    node_name: str | None = None
    message: str = ""
    scores: NDArray[np.float64] | None = None
    raw_scores: NDArray[np.float64] | None = None
    reserve: ReserveResult | None = None


@dataclass(frozen=True)
class GangDecision:
    """All-or-nothing placement of a job or workload (Eqs. 11-12)."""

    status: Status
    decisions: tuple[Decision, ...]
    message: str = ""

    @property
    def placements(self) -> dict[str, str]:
        return {d.pod: d.node_name for d in self.decisions if d.node_name is not None}

    @property
    def reserves(self) -> tuple[ReserveResult, ...]:
        """Each pod's Reserve, in order, for a placed gang: what
        :meth:`tdmcore.metronome.controller.Controller.on_reserve_gang` takes.
        Empty when the gang was not placed (nothing was reserved)."""
        if self.status is not Status.SUCCESS:
            return ()
        return tuple(d.reserve for d in self.decisions if d.reserve is not None)


class Policy(Protocol):
    """The extension points a scheduling policy provides.

    ``filter`` answers one :class:`Reason` per node (integers, 0: the node fits).
    **Compatibility rule:** a boolean mask is accepted as before: ``True`` fits,
    ``False`` is :attr:`Reason.POLICY`, "rejected by the policy's Filter" (or the
    policy's ``reason_names[Reason.POLICY]``).  A policy may name its own rules,
    ``Reason.POLICY`` and higher bits, in an optional ``reason_names`` mapping.
    """

    name: str

    def pre_filter(self, state: ClusterState, cycle: CycleState) -> Status: ...

    def filter(self, state: ClusterState, cycle: CycleState
               ) -> NDArray[np.int64] | NDArray[np.bool_]: ...

    def score(self, state: ClusterState, cycle: CycleState) -> NDArray[np.float64]: ...

    def normalize_score(self, state: ClusterState, cycle: CycleState) -> NDArray[np.float64]: ...

    def reserve(self, state: ClusterState, cycle: CycleState, node: int) -> ReserveResult: ...


#: The extension points every policy provides, in the order the scheduler calls them.
EXTENSION_POINTS = ("pre_filter", "filter", "score", "normalize_score", "reserve")


def check_policy(policy: object, name: str = "policy") -> Policy:
    """``policy`` if it implements :class:`Policy`, else a ValueError naming ``name``.

    A policy needs a string ``name`` and a callable for each of
    :data:`EXTENSION_POINTS`; what a user's policy returns is checked where the
    scheduler calls it (:class:`Scheduler`, :class:`PolicyError`).
    """
    if isinstance(policy, type):
        raise ValueError(f"{name}: expected a policy object, got the class "
                         f"{policy.__name__} (pass an instance: {policy.__name__}())")
    missing = [point for point in EXTENSION_POINTS
               if not callable(getattr(policy, point, None))]
    label = getattr(policy, "name", None)
    if missing or not isinstance(label, str) or not label:
        what = f"no {', '.join(missing)}" if missing else "no non-empty string name"
        raise ValueError(f"{name}: expected a policy (tdmcore.framework.Policy: a name and "
                         f"{', '.join(EXTENSION_POINTS)}), got {type(policy).__name__} "
                         f"with {what}")
    reason_names(policy, name)
    return policy  # type: ignore[return-value]


def reason_names(policy: object, name: str = "policy") -> dict[int, str]:
    """The policy's names of its own rules (``reason_names``: a single bit from
    :attr:`Reason.POLICY` up -> a non-empty text), or a ValueError naming ``name``."""
    given = getattr(policy, "reason_names", None)
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise ValueError(f"{name}.reason_names: expected a mapping of reason code to text, "
                         f"got {type(given).__name__}")
    out = {}
    for code, text in given.items():
        if isinstance(code, bool) or not isinstance(code, int) or code < Reason.POLICY \
                or code & (code - 1):
            raise ValueError(f"{name}.reason_names: {code!r} is not a policy's own reason "
                             f"(one bit, {int(Reason.POLICY)} or higher)")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{name}.reason_names[{code}]: expected a non-empty string")
        out[int(code)] = text
    return out


class PolicyError(ValueError):
    """A policy broke its contract: the policy's mistake, named, not an error of
    tdmcore's.

    The one such error of tdmcore, raised wherever a policy is an argument: a
    scheduling policy that is not tdmcore's own raised, or returned what its
    extension point may not (the wrong shape, NaN scores; :class:`Scheduler`); an
    elastic policy's plan that cannot be applied
    (:func:`tdmcore.sim.elastic.run_elastic`); an admission policy's allocation
    that breaks the slotted model's constraints
    (:func:`tdmcore.sim.slotted.run_slotted`).  A :class:`ValueError`, as every bad
    argument is.
    """


def _user_policy(policy: object) -> bool:
    return not type(policy).__module__.startswith("tdmcore.")


def pick_node(scores: NDArray[np.float64], feasible: NDArray[np.bool_]) -> int:
    """Highest normalized score among feasible nodes; ties: first in node order.

    Only a node of ``feasible`` is ever returned, even when every one of them
    scores ``-inf`` (an ``argmax`` over the masked scores would then return node 0,
    feasible or not); ``feasible`` must hold at least one node.
    """
    candidates = np.flatnonzero(feasible)
    # argmax returns the first maximum; candidates are in node order
    return int(candidates[np.argmax(scores[candidates])])


def _incomplete_job(state: ClusterState, pods: Sequence[Pod]) -> str:
    """Why the gang lacks some of a job's pods ('' when none does): with its pods
    already placed, a job of known ``gang_size`` must have them all."""
    given: dict[str, int] = {}
    for pod in pods:
        given[pod.job] = given.get(pod.job, 0) + 1
    for pod in pods:
        size = pod.gang_size
        if size is None:
            continue
        placed = len(state.job_members.get(pod.job, ()))
        if given[pod.job] + placed < size:
            return (f"pods: job {pod.job!r} has gang_size {size}, the gang holds "
                    f"{given[pod.job]} of its pods and {placed} are placed: a gang is "
                    "placed all or nothing, so give all its pods")
    return ""


class Scheduler:
    """Runs a policy's extension points for a pod, a job or a workload."""

    def __init__(self, policy: Policy) -> None:
        self.policy = check_policy(policy)
        self._user = _user_policy(policy)
        #: the policy's names of its own rules (:func:`describe` reads them first)
        self.reason_names = reason_names(policy)

    def describe(self, code: int, names: Mapping[int, str] | None = None) -> str:
        """One node's reasons in words (:func:`describe`): ``names`` (a front door's
        words), then the policy's own, then the framework's."""
        return describe(code, {**self.reason_names, **(names or {})})

    def _codes(self, value: Any, n: int) -> NDArray[np.int64]:
        """Filter's answer as one :class:`Reason` per node: integers as they are, a
        boolean mask by the compatibility rule (False: ``Reason.POLICY``); a
        :class:`PolicyError` for a user's policy that answers anything else."""
        arr = np.asarray(value) if isinstance(value, np.ndarray | list | tuple) else None
        if arr is not None and arr.shape == (n,):
            if arr.dtype == np.bool_:
                return np.where(arr, 0, int(Reason.POLICY)).astype(np.int64)
            if arr.dtype.kind in "iu" and (not self._user or not (arr < 0).any()):
                return arr.astype(np.int64, copy=False)
        what = f"shape {arr.shape}, dtype {arr.dtype}" if arr is not None \
            else type(value).__name__
        raise PolicyError(f"policy {self.policy.name!r}: filter must return {n} reason "
                          f"codes (one non-negative integer per node, 0: fits) or {n} "
                          f"booleans, got {what}")

    def _call(self, point: str, *args: Any) -> Any:
        """``policy.point(*args)``; what a policy not of tdmcore's own raises becomes a
        :class:`PolicyError` naming the policy and the extension point."""
        if not self._user:
            return getattr(self.policy, point)(*args)
        try:
            return getattr(self.policy, point)(*args)
        except (Exception, SystemExit) as exc:  # sys.exit in a policy ends no program
            raise PolicyError(f"policy {self.policy.name!r}: {point} raised "
                              f"{type(exc).__name__}: {exc}") from exc

    def _per_node(self, point: str, value: Any, n: int) -> Any:
        """``value`` as ``point``'s one number per node, or a :class:`PolicyError`
        (checked for a user's policy only: tdmcore's own are held to it by tests)."""
        if not self._user:
            return value
        arr = np.asarray(value) if isinstance(value, np.ndarray | list | tuple) else None
        if arr is None or arr.shape != (n,) or arr.dtype.kind not in "fiu":
            what = f"shape {arr.shape}, dtype {arr.dtype}" if arr is not None \
                else type(value).__name__
            raise PolicyError(f"policy {self.policy.name!r}: {point} must return {n} "
                              f"numbers (one per node), got {what}")
        return arr.astype(np.float64, copy=False)

    def _check_reserve(self, state: ClusterState, pod: Pod, node: int, result: Any) -> None:
        """A user's ``reserve`` must place the pod on ``node`` (``state.place``) and
        return a :class:`ReserveResult` for that node, or a :class:`PolicyError`."""
        where = f"policy {self.policy.name!r}: reserve"
        placed = state.placed.get(pod.name)
        if placed is None or placed.node != node:
            got = "did not place it" if placed is None else f"placed it on node {placed.node}"
            raise PolicyError(f"{where} must place pod {pod.name!r} on node {node} "
                              f"(state.place), but {got}")
        if not isinstance(result, ReserveResult) or result.node != node:
            got = (f"node {result.node}" if isinstance(result, ReserveResult)
                   else type(result).__name__)
            raise PolicyError(f"{where} must return a tdmcore.framework.ReserveResult for "
                              f"node {node}, got {got}")

    def decide(self, state: ClusterState, pod: Pod, snapshot: Snapshot | None = None
               ) -> tuple[Decision, CycleState]:
        """PreFilter -> Filter -> Score -> NormalizeScore; nothing is changed."""
        if not isinstance(state, ClusterState):
            raise ValueError(f"state: expected a tdmcore.model.ClusterState, got "
                             f"{type(state).__name__}")
        if not isinstance(pod, Pod):
            raise ValueError(f"pod: expected a tdmcore.model.Pod, got {type(pod).__name__}")
        if snapshot is not None and not isinstance(snapshot, Snapshot):
            raise ValueError(f"snapshot: expected a tdmcore.snapshot.Snapshot or None, got "
                             f"{type(snapshot).__name__}")
        snap = snapshot if snapshot is not None and snapshot.matches(state) \
            else Snapshot.of(state)
        try:
            state.check_pod(pod)
        except ValueError as exc:
            return Decision(Status.ERROR, pod.name, message=str(exc)), CycleState(pod, snap)
        cycle = CycleState(pod=pod, snapshot=snap)
        n = len(state.cluster.nodes)
        status = self._call("pre_filter", state, cycle)
        if status is not Status.SUCCESS:
            if not isinstance(status, Status):
                raise PolicyError(f"policy {self.policy.name!r}: pre_filter must return a "
                                  f"tdmcore.framework.Status, got {type(status).__name__}")
            return Decision(status, pod.name, message="PreFilter rejected the pod"), cycle
        codes = self._codes(self._call("filter", state, cycle), n)
        feasible = codes == 0
        cycle.codes, cycle.feasible = codes, feasible
        if not feasible.any():
            why = ", ".join(f"{count} {reason}" for reason, count
                            in count_reasons(codes, self.reason_names).items())
            return Decision(Status.UNSCHEDULABLE, pod.name,
                            message=f"0/{len(feasible)} nodes are available: {why}"), cycle
        cycle.raw_scores = self._per_node("score", self._call("score", state, cycle), n)
        scores = self._per_node("normalize_score", self._call("normalize_score", state, cycle),
                                n)
        if self._user and np.isnan(scores[feasible]).any():
            raise PolicyError(f"policy {self.policy.name!r}: normalize_score gave a "
                              "feasible node a NaN score")
        cycle.scores = scores
        finalists = feasible
        if cycle.finalists is not None:
            chosen = np.asarray(cycle.finalists)
            if self._user and (chosen.shape != (n,) or chosen.dtype != np.bool_):
                raise PolicyError(f"policy {self.policy.name!r}: cycle.finalists must be {n} "
                                  f"booleans (one per node), got shape {chosen.shape}, "
                                  f"dtype {chosen.dtype}")
            finalists = feasible & chosen
            if not finalists.any():
                raise PolicyError(f"policy {self.policy.name!r}: normalize_score left no "
                                  "feasible node among cycle.finalists")
        node = pick_node(cycle.scores, finalists)
        return Decision(Status.SUCCESS, pod.name, node=node,
                        node_name=state.cluster.nodes[node].name, scores=cycle.scores,
                        raw_scores=cycle.raw_scores), cycle

    def schedule(self, state: ClusterState, pod: Pod) -> Decision:
        """Decide and, on success, Reserve: the pod is recorded on its node.  A user
        policy's Reserve that fails (or answers wrongly) leaves ``state`` as it was."""
        return self._schedule(state, pod, rollback=self._user)

    def reserve(self, state: ClusterState, cycle: CycleState, node: int) -> ReserveResult:
        """Reserve: place ``cycle``'s pod on ``node`` in ``state`` and return the
        policy's :class:`ReserveResult` (its extension included).  The one entry
        every front door uses (the simulator through :meth:`schedule`, the
        Kubernetes bridge at bind and for a claim).

        ``cycle`` is :meth:`decide`'s for ``state`` as it is now, and ``node`` a node
        its Filter passed; else a ValueError naming the argument, and nothing
        changes.  A user's policy whose Reserve fails (or answers wrongly) leaves
        ``state`` as it was and raises :class:`PolicyError`.
        """
        return self._reserve(state, cycle, node, rollback=self._user)

    def _reserve(self, state: ClusterState, cycle: CycleState, node: int,
                 rollback: bool) -> ReserveResult:
        if not isinstance(cycle, CycleState):
            raise ValueError(f"cycle: expected a tdmcore.framework.CycleState, got "
                             f"{type(cycle).__name__}")
        if not cycle.snapshot.matches(state):
            raise ValueError("cycle: decided on another state, or on this one before it "
                             "changed (decide again)")
        if cycle.feasible is None or isinstance(node, bool) \
                or not isinstance(node, int | np.integer) \
                or not 0 <= node < len(cycle.feasible) or not cycle.feasible[node]:
            raise ValueError(f"node: {node!r} is not a node Filter passed for pod "
                             f"{cycle.pod.name!r} in this cycle")
        node = int(node)
        # a user's reserve that fails after changing the state leaves it as it was:
        # the gang path's rule (a copy); a gang's trial copy is already one
        saved = state.copy() if rollback else None
        try:
            result: ReserveResult = self._call("reserve", state, cycle, node)
            if self._user:
                self._check_reserve(state, cycle.pod, node, result)
        except Exception:
            if saved is not None:
                state.restore_from(saved)
            raise
        return result

    def _schedule(self, state: ClusterState, pod: Pod, rollback: bool) -> Decision:
        decision, cycle = self.decide(state, pod)
        if decision.status is not Status.SUCCESS or decision.node is None:
            return decision
        reserve = self._reserve(state, cycle, decision.node, rollback)
        return Decision(Status.SUCCESS, pod.name, node=decision.node,
                        node_name=decision.node_name, scores=decision.scores,
                        raw_scores=decision.raw_scores, reserve=reserve)

    def schedule_gang(self, state: ClusterState, pods: Sequence[Pod]) -> GangDecision:
        """Place every pod of a job (or workload) or none of them (Eqs. 11-12).

        Pods are scheduled one by one on a copy of ``state``; the copy replaces
        the state only if all succeed, so a rejected gang leaves nothing behind.
        A job whose pods carry a ``gang_size`` must be whole: its pods here and
        those already placed number ``gang_size`` (the module's rule says what
        raises and what returns :attr:`Status.ERROR`).
        """
        if not isinstance(state, ClusterState):
            raise ValueError(f"state: expected a tdmcore.model.ClusterState, got "
                             f"{type(state).__name__}")
        if isinstance(pods, Pod) or not isinstance(pods, Sequence):
            raise ValueError(f"pods: expected a sequence of tdmcore.model.Pod, got "
                             f"{type(pods).__name__}")
        if not pods:
            return GangDecision(Status.ERROR, (), "pods: a gang needs at least one pod")
        for p in pods:
            if not isinstance(p, Pod):
                raise ValueError(f"pods: expected tdmcore.model.Pod items, got "
                                 f"{type(p).__name__}")
        names = [p.name for p in pods]
        if len(set(names)) != len(names):
            return GangDecision(Status.ERROR, (), "pods: pod names in a gang must be unique")
        incomplete = _incomplete_job(state, pods)
        if incomplete:
            return GangDecision(Status.ERROR, (), incomplete)
        trial = state.copy()
        decisions = []
        for pod in pods:
            decision = self._schedule(trial, pod, rollback=False)  # trial: a copy
            decisions.append(decision)
            if decision.status is not Status.SUCCESS:
                return GangDecision(decision.status, tuple(decisions),
                                    f"gang rejected at {pod.name}: {decision.message}")
        state.restore_from(trial)
        return GangDecision(Status.SUCCESS, tuple(decisions))

    def schedule_workload(self, state: ClusterState, jobs: Sequence[Sequence[Pod]]
                          ) -> GangDecision:
        """A workload is deployed only if all its jobs are (Eq. 11)."""
        return self.schedule_gang(state, [pod for job in jobs for pod in job])
