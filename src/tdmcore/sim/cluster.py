"""The cluster simulator: a placement policy and its controller over the flow model.

docs/simulator.md.  Jobs arrive; the policy places each job's pods all or nothing
through :class:`tdmcore.framework.Scheduler` (a job that does not fit waits and is
retried whenever a job leaves); the flow-level kernel
(:mod:`tdmcore._kernels._flow`) runs their iterations on the nodes' host
links; for the Metronome policies the stop-and-wait :class:`tdmcore.controller.
Controller` receives every iteration report the moment the iteration ends, and
its shifts, pauses, idle injections and pattern updates act on the running model
(the engine takes the quiet reports and the pauses itself, with the controller's
rules, and hands every other report to the controller).  The same objects run
behind the Kubernetes bridge: domain objects -> snapshot -> kernels -> decision.

Queue: waiting gangs are retried kube-scheduler style (back-off, default) or in
strict head-of-line order (``queue="fifo"``), see :func:`run_cluster`.

Policies: the placement policies of :data:`tdmcore.policies.POLICIES` and
``ideal``.  **[decision]** ``ideal`` places like ``metronome`` and then gives every
pod a private, uncongested link of exactly its rate ``r_p``: every job runs as if
alone, which is the reference the paper's "ideal time" means.

Time shifts: the controller's global offsets are relative to the reference job of
each affinity component (offset 0); a job starts, and a pause or an offset change
moves its next iteration, to the time congruent to "the reference job's latest
iteration start + its offset" modulo its period (:meth:`Controller.target_phase`).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from .. import _validation as v
from .._kernels import flow as K
from .._kernels.flow import (
    DONE_GBIT,
    noise_factor,
    stretch_commit,
    stretch_locate,
    stretch_summary,
)
from ..controller import Controller, ControllerConfig, PatternUpdate, Readjustment
from ..framework import Policy, Scheduler, Status, check_policy
from ..link import LinkPlan
from ..model import Cluster, ClusterState, Pod, TrafficPattern
from ..policies import POLICIES, MetronomeConfig, make_policy
from .network import CONTENTION_EFFICIENCY, FlowEngine, MonitorConfig, check_efficiency

__all__ = [
    "CLUSTER_POLICIES",
    "gamma_over_time",
    "JobResult",
    "RunResult",
    "SimCluster",
    "SimJob",
    "run_cluster",
]

#: Placement policies the cluster simulator runs (``ideal`` is simulator-only).
CLUSTER_POLICIES: tuple[str, ...] = (*POLICIES, "ideal")
#: **[decision]** A job keeps a systematic sample of at most about this many
#: iteration times for its percentiles (iteration ``i`` when ``i % step == 0``,
#: ``step = ceil(iterations / KEEP_DURATIONS)``); its mean and end are exact.
#: (Philly jobs run up to 10^8 iterations.)
KEEP_DURATIONS = 10_000
#: Scheduling queue disciplines of :func:`run_cluster` (``queue``).
QUEUES: tuple[str, ...] = ("backoff", "fifo")
#: Sampled iteration times buffered per job in the engine between two hand-overs.
SAMPLE_BUFFER = 1024


@dataclass(frozen=True)
class SimJob:
    """A training job of a scenario.

    ``workers`` pods, each requesting ``gpu``/``cpu``/``mem_gib`` and carrying
    ``pattern`` (``None``: a LowComm job, which iterates every ``iteration_ms``,
    1,000 ms when not given).  It arrives at ``arrival_s`` and trains
    ``iterations`` iterations.  ``workload`` groups HPO jobs (AppGroup).
    ``spread``: at most one worker per node (required pod anti-affinity).
    """

    name: str
    model: str
    pattern: TrafficPattern | None
    workers: int
    iterations: int
    arrival_s: float = 0.0
    priority: int = 0
    gpu: float = 1.0
    cpu: float = 4.0
    mem_gib: float = 16.0
    workload: str | None = None
    iteration_ms: float | None = None
    spread: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name: expected a non-empty string, got {self.name!r}")
        if self.iteration_ms is not None:
            if self.pattern is not None:
                raise ValueError("iteration_ms: only for a LowComm job (pattern None); a "
                                 "pattern carries its own period_ms")
            v.positive_float("iteration_ms", self.iteration_ms)
        for key in ("workers", "iterations"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key}: expected an integer >= 1, got {value!r}")
        if v.real_number("arrival_s", self.arrival_s) < 0:
            raise ValueError(f"arrival_s: must be >= 0, got {self.arrival_s}")
        if self.pattern is not None and not isinstance(self.pattern, TrafficPattern):
            raise ValueError("pattern: expected a TrafficPattern or None")

    def pods(self) -> list[Pod]:
        """The job's worker pods; ``gang_size`` tells the scheduler how many there
        are, so a job placed wholly on one node is recognised as local."""
        return [Pod(f"{self.name}-w{k}", self.name, cpu=self.cpu, mem_gib=self.mem_gib,
                    gpu=self.gpu, pattern=self.pattern, priority=self.priority,
                    workload=self.workload, gang_size=self.workers, spread=self.spread)
                for k in range(self.workers)]

    @property
    def period_ms(self) -> float:
        """The iteration time alone (LowComm jobs: ``iteration_ms``, else 1 s)."""
        if self.pattern is not None:
            return self.pattern.period_ms
        return float(self.iteration_ms) if self.iteration_ms is not None else 1000.0


@dataclass(frozen=True)
class SimCluster:
    """Nodes (with their latency matrix and workloads) and the network's congestion.

    ``background_gbps[n]``: steady background traffic on node n's host link (the
    paper's iPerf3).  ``latency_ms[x, y]``: one-way latency between nodes; a job
    spanning nodes pays ``2 (n - 1)`` times its worst pair latency per iteration
    (ring all-reduce has ``2 (n - 1)`` sequential steps; **[decision]**).
    """

    cluster: Cluster
    background_gbps: NDArray[np.float64]
    latency_ms: NDArray[np.float64]

    def __post_init__(self) -> None:
        k = len(self.cluster)
        bg = v.as_float_array("background_gbps", self.background_gbps, ndim=1)
        if bg.shape != (k,) or np.any(bg < 0):
            raise ValueError(f"background_gbps: expected {k} values >= 0")
        if np.any(bg >= self.cluster.link_gbps):
            raise ValueError("background_gbps: must stay below each link's capacity")
        lat = v.as_float_array("latency_ms", self.latency_ms, ndim=2)
        if lat.shape != (k, k) or np.any(lat < 0):
            raise ValueError(f"latency_ms: expected a ({k}, {k}) matrix of values >= 0")
        object.__setattr__(self, "background_gbps", bg)
        object.__setattr__(self, "latency_ms", lat)


@dataclass
class JobResult:
    """What one job did: placement, times (ms) and its iteration durations."""

    name: str
    model: str
    priority: int
    arrival_ms: float
    iterations: int
    nodes: tuple[str, ...] = ()
    start_ms: float | None = None
    end_ms: float | None = None
    durations_ms: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    readjustments: int = 0
    pause_ms: float = 0.0
    accepted_on_arrival: bool = False
    #: iterations done and their total time (exact even when ``durations_ms`` is a
    #: sample, see :data:`KEEP_DURATIONS`)
    done: int = 0
    busy_ms: float = 0.0

    @property
    def jct_ms(self) -> float | None:
        return None if self.end_ms is None else self.end_ms - self.arrival_ms

    @property
    def wait_ms(self) -> float | None:
        return None if self.start_ms is None else self.start_ms - self.arrival_ms

    @property
    def per_1000_s(self) -> float:
        """Average time per 1,000 iterations (s), the paper's user-side metric."""
        return self.busy_ms / self.done if self.done else math.nan

    def percentiles(self) -> NDArray[np.float64]:
        """Iteration time p5, p25, p50, p75, p95 (ms)."""
        d = self.durations_ms
        if not d.size:
            return np.full(5, np.nan)
        return np.asarray(np.percentile(d, [5, 25, 50, 75, 95]), dtype=np.float64)


@dataclass
class RunResult:
    """One policy on one scenario."""

    policy: str
    jobs: dict[str, JobResult]
    tct_ms: float
    gamma: float
    link_names: tuple[str, ...]
    link_capacity_gbps: NDArray[np.float64]
    link_sent_gbit: NDArray[np.float64]
    util_t_ms: NDArray[np.float64]  # sample times
    util_gbps: NDArray[np.float64]  # (samples, links): mean rate since the previous sample
    decision_s: NDArray[np.float64]
    recalculations: int
    pattern_updates: int
    wall_s: float
    controller: Controller | None = None
    #: node name -> the latest link plan the controller made for it during the run
    link_plans: dict[str, LinkPlan] = field(default_factory=dict)

    @property
    def acceptance(self) -> float:
        """Share of jobs placed the moment they arrived."""
        if not self.jobs:
            return math.nan
        return sum(j.accepted_on_arrival for j in self.jobs.values()) / len(self.jobs)

    @property
    def readjustments(self) -> int:
        return sum(j.readjustments for j in self.jobs.values())

    def mean_jct_s(self) -> float:
        jct = [j.jct_ms for j in self.jobs.values() if j.jct_ms is not None]
        return float(np.mean(jct)) / 1e3 if jct else math.nan


def load_monitor_params(engine: FlowEngine, j: int, ctrl: Controller, name: str,
                        high: set[str], slot_of: dict[str, int], *, monitor: bool,
                        idle: dict[str, float] | None = None) -> None:
    """Give engine slot ``j`` (job ``name``) the controller's current view of it:
    its regulation thresholds (:meth:`Controller.thresholds`; ``idle`` is
    :meth:`Controller.idle_map` when the caller has it), whether it is high
    priority (``high``: :meth:`Controller.high_jobs`), and the terms of its target
    phase (:meth:`Controller.target_phase`: the reference job's slot in ``slot_of``
    and the offsets; a reference outside the engine leaves the pause to the
    controller).
    """
    jf, ji = engine.jf, engine.ji
    limits = ctrl.thresholds(name, None if idle is None else idle.get(name, 0.0))
    ji[K.I_MON, j] = int(monitor and limits is not None)
    if limits is not None:
        jf[K.F_SLOW, j] = limits.slow
        jf[K.F_OLO, j] = limits.own_lo
        jf[K.F_OHI, j] = limits.own_hi
        jf[K.F_PPAT, j] = limits.period
        jf[K.F_IDLE, j] = limits.idle
        jf[K.F_CPAT, j] = limits.comm
        jf[K.F_TOL_MS, j] = limits.tol_ms
    ji[K.I_HIGH, j] = int(name in high)
    # target_phase: anchor(root) + compute(root) + off(job) - off(root) - compute(job)
    root = ctrl.roots.get(name)
    off = ctrl.offsets_ms
    jf[K.F_TFIX, j] = off.get(name, 0.0)  # target_phase None: the offset itself
    jf[K.F_JOB_PERIOD, j] = ctrl.phase_period_ms(name)  # pauses land on the target
    if root is None or root == name:
        ji[K.I_ROOT, j] = -1
    elif root in slot_of:
        ji[K.I_ROOT, j] = slot_of[root]
        jf[K.F_T_CR, j] = ctrl._compute_ms(root)
        jf[K.F_T_OJ, j] = off.get(name, 0.0)
        jf[K.F_T_OR, j] = off.get(root, 0.0)
        jf[K.F_T_CJ, j] = ctrl._compute_ms(name)
    else:  # the reference runs outside the engine: the controller computes the target
        ji[K.I_ROOT, j] = -2


@dataclass
class _Solo:
    """A networked job alone on all its links, computed in closed form.

    Iteration ``i`` (from ``i0``, which starts at ``s0``) lasts
    ``compute x noise_i + stretch + comm + tail`` with ``comm`` fixed (its transfers
    share no link with anyone): exactly what the engine would compute.
    """

    i0: int
    s0: float
    comm: float
    stretch: float
    end: float
    version: int


def run_cluster(sim: SimCluster, jobs: Sequence[SimJob], policy: str | Policy, *,
                seed: int = 0, noise_sigma: float = 0.01, sample_ms: float | None = None,
                progress: Callable[[float], None] | None = None,
                skip_ahead: bool = True, queue: str = "backoff",
                contention_efficiency: float = CONTENTION_EFFICIENCY,
                controller: ControllerConfig | None = None) -> RunResult:
    """Simulate ``jobs`` on ``sim`` under ``policy`` until every job has finished.

    Parameters
    ----------
    sim : SimCluster
        The cluster: nodes, each link's background traffic, latencies.
    jobs : sequence of SimJob
        The jobs (names unique).
    policy : str or Policy
        One of :data:`CLUSTER_POLICIES`, or a policy object implementing
        :class:`tdmcore.framework.Policy` (its ``name`` labels the result).  An
        object is used as it is for this run: pass a fresh one to each run.  The
        stop-and-wait controller runs for Metronome's policies, and for an object
        that carries a :class:`~tdmcore.policies.MetronomeConfig` as ``config``.
    seed : int
        Compute noise of job ``k`` (its index in ``jobs``) at iteration ``i`` is
        the counter-based draw ``(seed, k, i)`` (:mod:`tdmcore.sim.network`), so
        every policy sees the same noise for the same job and iteration.
    noise_sigma : float
        Lognormal compute noise, mean 1 (1 % by default).
    sample_ms : float, optional
        Link utilisation sampling interval (default: 1/400 of the last arrival
        plus the longest ideal job, at least 1 s).
    progress : callable, optional
        Called with the simulated time (ms) reached, now and then.
    skip_ahead : bool
        Compute a networked job that is alone on all its links in closed form
        while none of its iterations can make the controller act (exact: nothing
        shares its transfers, and every report it would make is quiet; the test
        suite checks it against ``skip_ahead=False``, which runs every iteration
        through the engine).  Link utilisation samples of such a stretch are
        spread evenly over it; totals are exact.
    queue : {"backoff", "fifo"}
        How waiting gangs are retried.  ``"backoff"`` (default), kube-scheduler
        with the coscheduling plugin: gangs are tried in arrival order; one that
        cannot be placed waits and is retried whenever the cluster changes (a job
        leaves), while the jobs behind it — and new arrivals — are tried
        meanwhile, so one unschedulable gang never blocks the cluster.
        ``"fifo"``: strict head-of-line order, nothing passes a waiting gang.
    contention_efficiency : float
        ``eta`` in (0, 1]: two or more transfers that together ask for more than
        a link has left share ``eta`` of it (docs/simulator.md, "Contention").
        The default is the value fitted on the Metronome paper's measurements
        (:data:`tdmcore.sim.network.CONTENTION_EFFICIENCY`); 1 is plain max-min
        fair sharing.  ``ideal`` gives every transfer a private link, so it
        never contends.
    controller : ControllerConfig, optional
        The stop-and-wait controller's thresholds (window, ``O_T``, ``A_T``, drift
        tolerance, re-measuring; paper §III-C) for a policy that runs it.  Default:
        :meth:`ControllerConfig.for_policy` of the policy's ``config``, the paper's
        values with the policy's ablation flags.  Its ``scheduler`` must be the
        policy's :class:`~tdmcore.policies.MetronomeConfig` (the controller plans
        the links with the scheduler's thresholds).

    Returns
    -------
    RunResult

    Raises
    ------
    ValueError
        Naming the argument: an unknown policy name, an object that lacks an
        extension point, jobs that are not unique ``SimJob``s, a bad seed, noise,
        queue or contention efficiency, a ``controller`` for a policy that runs
        none or whose ``scheduler`` is not the policy's config.

    Notes
    -----
    **[decision]** kube-scheduler also retries a gang when its back-off (1 s
    doubling to 10 s) expires and moves it to the back-off queue on a cluster
    event until then; the simulator retries at the cluster event itself.  A retry
    without a change to the cluster is deterministic and fails again, so only the
    up-to-10 s delay of the back-off is not modelled (against jobs of minutes to
    hours).

    A job that cannot be placed on the empty cluster under ``policy`` (it needs
    more than the cluster has) is never started: its ``end_ms`` stays None.
    """
    if not isinstance(sim, SimCluster):
        raise ValueError(f"sim: expected a SimCluster, got {type(sim).__name__}")
    jobs = tuple(jobs)
    if not jobs or not all(isinstance(j, SimJob) for j in jobs):
        raise ValueError("jobs: expected a non-empty sequence of SimJob")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ValueError("jobs: job names must be unique")
    if isinstance(policy, str):
        if policy not in CLUSTER_POLICIES:
            raise ValueError(f"policy: unknown policy {policy!r}; choose from "
                             f"{', '.join(CLUSTER_POLICIES)}, or pass a policy object")
    else:
        check_policy(policy)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, got {seed!r}")
    sigma = v.real_number("noise_sigma", noise_sigma)
    if sigma < 0:
        raise ValueError(f"noise_sigma: must be >= 0, got {sigma}")
    if queue not in QUEUES:
        raise ValueError(f"queue: expected one of {', '.join(QUEUES)}, got {queue!r}")
    eta = check_efficiency(contention_efficiency)
    if controller is not None:
        if not isinstance(controller, ControllerConfig):
            raise ValueError(f"controller: expected a ControllerConfig, got "
                             f"{type(controller).__name__}")
        placement = make_policy(policy) if isinstance(policy, str) and policy != "ideal" \
            else policy
        config = getattr(placement, "config", None)
        if not isinstance(config, MetronomeConfig):
            label = policy if isinstance(policy, str) else policy.name
            raise ValueError(f"controller: policy {label!r} runs no controller")
        if controller.scheduler != config:
            raise ValueError("controller: its scheduler config differs from the policy's "
                             "(build it with ControllerConfig.for_policy(policy.config))")
    return _Run(sim, jobs, policy, seed, sigma, sample_ms, progress,
                bool(skip_ahead), queue, eta, controller).execute()


def gamma_over_time(t_ms: NDArray[np.float64], rates_gbps: NDArray[np.float64],
                    capacity_gbps: NDArray[np.float64]) -> float:
    """Average bandwidth utilization Gamma of a run (Metronome paper Eqs. 5-6).

    Parameters
    ----------
    t_ms : ndarray (K + 1,)
        Sample boundaries, increasing (``t_ms[0]`` the start).
    rates_gbps : ndarray (K, L)
        Mean rate the jobs' transfers carried on each link in each interval.
    capacity_gbps : ndarray (L,)
        Link capacities ``B_l`` > 0.

    Returns
    -------
    float
        In each interval k, Eq. (6) gives each link's utilization
        ``xi_l = min(S_l, B_l) / B_l`` (``S_l``: the traffic on it) and Eq. (5)
        ``Gamma_k = sum_l B_l xi_l / B_max / |L_k|`` over the links in use
        ``L_k`` (those carrying traffic in k); the run's Gamma is the
        time-weighted mean of ``Gamma_k`` over the intervals where some link
        is in use (0 when none ever is).

    Notes
    -----
    **[decision, docs/simulator.md]** "Links in
    use" rather than every link of the cluster: idle links would otherwise
    dilute Gamma by the cluster's size, and the paper's testbed counters cover
    the links its jobs use.  Over time rather than bytes over the makespan: a
    policy whose contention slows its jobs carries the same bytes over a longer
    time, which the paper sees as a lower utilization while the jobs run.
    Background traffic (iPerf3) is not the jobs' and is not counted.
    """
    t = np.asarray(t_ms, dtype=np.float64)
    rates = np.asarray(rates_gbps, dtype=np.float64)
    cap = np.asarray(capacity_gbps, dtype=np.float64)
    if rates.ndim != 2 or rates.shape[1] != cap.shape[0]:
        raise ValueError(f"rates_gbps: expected shape (K, {cap.shape[0]}), got {rates.shape}")
    if t.shape != (rates.shape[0] + 1,):
        raise ValueError(f"t_ms: expected {rates.shape[0] + 1} boundaries, got {t.shape}")
    if np.any(cap <= 0):
        raise ValueError("capacity_gbps: every capacity must be > 0")
    dt = np.diff(t)
    if np.any(dt < 0):
        raise ValueError("t_ms: boundaries must increase")
    used = rates > 1e-12
    n_used = used.sum(axis=1)
    active = (n_used > 0) & (dt > 0)
    if not active.any():
        return 0.0
    carried = np.minimum(rates, cap[None, :]) * used  # B_l xi_l = min(S_l, B_l)
    per_interval = carried.sum(axis=1)[active] / cap.max() / n_used[active]
    return float(np.sum(per_interval * dt[active]) / np.sum(dt[active]))


class _Run:
    def __init__(self, sim: SimCluster, jobs: tuple[SimJob, ...], policy: str | Policy,
                 seed: int, sigma: float, sample_ms: float | None,
                 progress: Callable[[float], None] | None, skip_ahead: bool = True,
                 queue: str = "backoff", efficiency: float = CONTENTION_EFFICIENCY,
                 controller: ControllerConfig | None = None) -> None:
        self.sim, self.jobs = sim, jobs
        self.policy_name = policy if isinstance(policy, str) else str(policy.name)
        self.seed, self.sigma, self.progress = seed, sigma, progress
        self.cluster = sim.cluster
        self.ideal = policy == "ideal"
        placement: Policy
        if isinstance(policy, str):
            placement = make_policy("metronome" if self.ideal else policy)
        else:
            placement = policy
        self.scheduler = Scheduler(placement)
        self.state = ClusterState(self.cluster)
        # the stop-and-wait controller runs for the Metronome policies only
        self.controller = (Controller(self.state, controller) if controller is not None
                           else Controller.for_policy(self.state, placement)) \
            if not self.ideal and isinstance(getattr(placement, "config", None),
                                             MetronomeConfig) else None
        self.monitor = self.controller is not None and self.controller.config.monitor
        k = len(self.cluster)
        n_private = sum(j.workers for j in jobs) if self.ideal else 0
        capacity = np.concatenate([self.cluster.link_gbps, np.zeros(n_private)])
        background = np.concatenate([np.zeros(k) if self.ideal else sim.background_gbps,
                                     np.zeros(n_private)])
        self.private_next = k
        cfg = self.controller.config if self.controller is not None else None
        monitor = MonitorConfig() if cfg is None else MonitorConfig(
            cfg.window, cfg.o_t, cfg.readjust_horizon, cfg.readjust_limit)
        self.engine = FlowEngine(capacity, background, seed=seed, sigma=sigma,
                                 monitor=monitor, samples_per_job=SAMPLE_BUFFER,
                                 jobs_hint=16, contention_efficiency=efficiency)
        self.slot: dict[str, int] = {}
        self.name_of: dict[int, str] = {}
        self.job_by_name = {j.name: j for j in jobs}
        self.index = {j.name: i for i, j in enumerate(jobs)}
        self.step = {j.name: max(1, -(-j.iterations // KEEP_DURATIONS)) for j in jobs}
        self.results = {j.name: JobResult(j.name, j.model, j.priority, j.arrival_s * 1e3,
                                          j.iterations) for j in jobs}
        self.durations: dict[str, list[NDArray[np.float64]]] = {j.name: [] for j in jobs}
        self.pod_node_links: dict[str, NDArray[np.int64]] = {}
        self.sent_by_node = np.zeros(k)
        span = max(j.arrival_s * 1e3 for j in jobs) + max(j.iterations * j.period_ms
                                                          for j in jobs)
        self.sample_ms = sample_ms if sample_ms is not None else max(1000.0, span / 400)
        self.decision_s: list[float] = []
        self.pattern_updates = 0
        self.fits_empty: dict[str, bool] = {}
        self.networked: set[str] = set()
        self.local_ends: list[tuple[float, int, str]] = []  # heap: (end, version, job)
        self.skip_ahead = skip_ahead
        self.strict_fifo = queue == "fifo"
        self.solo: dict[str, _Solo] = {}
        self.link_jobs: dict[int, set[str]] = {}
        self.params: dict[str, tuple[float, float, float, float, list[int]]] = {}
        self.versions = 0
        self.link_plans: dict[str, LinkPlan] = {}

    # ------------------------------------------------------------------ placing
    def _fits_empty(self, job: SimJob) -> bool:
        """Could the job run on the empty cluster?  Feasibility there depends only
        on the pods' requests and rate (resources, Eq. 14, the loop filter), so the
        answer is shared by jobs of the same shape."""
        rate = None if job.pattern is None else job.pattern.bandwidth_gbps
        key = f"{job.workers}|{job.gpu}|{job.cpu}|{job.mem_gib}|{rate}|{job.spread}"
        if key not in self.fits_empty:
            trial = ClusterState(self.cluster)
            decision = self.scheduler.schedule_gang(trial, job.pods())
            self.fits_empty[key] = decision.status is Status.SUCCESS
        return self.fits_empty[key]

    def _try_place(self, job: SimJob, t: float) -> bool:
        self._sync_anchors()  # the controller knows every iteration up to now
        before = dict(self.controller.offsets_ms) if self.controller is not None else {}
        tic = time.perf_counter()
        decision = self.scheduler.schedule_gang(self.state, job.pods())
        shifts: dict[str, float] = {}
        aside = 0.0
        if decision.status is Status.SUCCESS and self.controller is not None:
            reserves = [d.reserve for d in decision.decisions if d.reserve is not None]
            if reserves:
                aside = self._unsolo_neighbours(job, t)
                shifts = self.controller.on_reserve_gang(reserves)
        self.decision_s.append(time.perf_counter() - tic - aside)
        if decision.status is not Status.SUCCESS:
            return False
        nodes = [self.state.placed[p.name].node for p in job.pods()]
        self._start(job, nodes, t)
        if self.controller is not None:
            if shifts:
                self._apply_offsets(t, before, exclude=job.name)
            self._update_stretch(t)
            self._refresh_params()
            for node, plan in self.controller.links.items():  # kept: links empty later
                self.link_plans[self.cluster.nodes[node].name] = plan
        return True

    def _unsolo_neighbours(self, job: SimJob, t: float) -> float:
        """Before the controller re-plans for ``job``'s Reserve: the skipped-ahead
        jobs on the links ``job`` will use go back to the engine at ``t``, so their
        iterations up to ``t`` reach the controller under the plans (and thus the
        thresholds and injected idle) they ran under.  Returns the time it took,
        which is the simulator's bookkeeping, not the scheduler's decision.
        """
        if self.ideal or job.pattern is None:
            return 0.0  # private links / no traffic: nobody shares with this job
        tic = time.perf_counter()
        nodes = list(dict.fromkeys(self.state.placed[p.name].node for p in job.pods()))
        if len(nodes) > 1:
            for link in nodes:
                for other in list(self.link_jobs.get(link, ())):
                    if other in self.solo:
                        self._solo_to_kernel(other, t)
        return time.perf_counter() - tic

    def _links_of(self, job: SimJob, nodes: list[int]) -> list[int]:
        """The host links the job's transfers cross: one per node it occupies.

        **[decision, docs/simulator.md]** Each node holding
        some of a multi-node job's pods sends ``r_p t_p d_p`` per iteration through
        its link (one ring segment per node, however many of the job's pods it
        holds); a job wholly on one node sends nothing (``[-1]``).  Under
        ``ideal`` each of those transfers gets a private link of rate ``r_p``.
        """
        spread = list(dict.fromkeys(nodes))  # distinct nodes, in pod order
        if len(spread) == 1 or job.pattern is None:
            return [-1]  # all on one node: local, no host-link traffic
        if not self.ideal:
            return spread
        out = []
        for _ in spread:
            out.append(self.private_next)
            self.engine.lf[K.L_CAP, self.private_next] = job.pattern.bandwidth_gbps
            self.private_next += 1
        return out

    def _start(self, job: SimJob, nodes: list[int], t: float) -> None:
        pattern = job.pattern
        links = self._links_of(job, nodes)
        networked = any(link >= 0 for link in links)
        for link in set(links) if networked else ():
            for other in list(self.link_jobs.get(link, ())):
                if other in self.solo:  # it shares a link from now on: back to the engine
                    self._solo_to_kernel(other, t)
                elif other in self.slot:  # no longer alone: stays in the engine
                    self.engine.ji[K.I_LEAVE, self.slot[other]] = 0
        period = job.period_ms
        duty = pattern.duty_cycle if pattern is not None else 0.0
        compute = period * (1.0 - duty) if networked else period
        rate = pattern.bandwidth_gbps if pattern is not None else 0.0
        volume = rate * period * duty * 1e-3
        tail = 0.0
        if networked and not self.ideal:
            spread = sorted(set(nodes))
            worst = max(self.sim.latency_ms[a, b] for a in spread for b in spread)
            tail = 2.0 * (job.workers - 1) * float(worst)
        start = t
        res = self.results[job.name]
        res.start_ms = t
        res.nodes = tuple(self.cluster.nodes[n].name for n in nodes)
        if self.controller is not None:
            self._refresh_anchor(job.name, t)
            target = self.controller.target_phase(job.name)
            if target is not None:
                start = t + (target - t) % self.controller.phase_period_ms(job.name)
            self.controller.anchors_ms.setdefault(job.name, start)  # phase before 1st report
        if not networked:
            self._start_local(job, start)
            return
        self.params[job.name] = (compute, tail, rate, volume, list(links))
        self.pod_node_links[job.name] = np.asarray(list(dict.fromkeys(nodes)), dtype=np.int64)
        self.networked.add(job.name)
        for link in set(links):
            self.link_jobs.setdefault(link, set()).add(job.name)
        stretch = self._stretch_map().get(job.name, 0.0)
        if self.skip_ahead and self._alone(job.name) \
                and self._solo_begin(job.name, 0, start, stretch):
            return
        self._enter(job.name, 0, start, stretch)

    def _enter(self, name: str, done: int, start: float, stretch: float) -> int:
        """Put a networked job in the engine, its next iteration ``done`` due at
        ``start``; load the controller's view of it."""
        job = self.job_by_name[name]
        compute, tail, rate, volume, links = self.params[name]
        j = self.engine.add(key=self.index[name], compute_ms=compute,
                            iterations=job.iterations, start_ms=start, links=links,
                            cap_gbps=rate, volume_gbit=volume, tail_ms=tail,
                            stretch_ms=stretch, done=done, step=self.step[name],
                            job_period_ms=job.period_ms)
        self.slot[name] = j
        self.name_of[j] = name
        if self.controller is not None:
            anchor = self.controller.anchors_ms.get(name)
            self.engine.jf[K.F_ANCHOR, j] = -np.inf if anchor is None else anchor
            self._params_of(name, j, self.controller.high_jobs())
            self._load_watch(name)
        return j

    def _leave(self, name: str) -> int:
        """Take a job out of the engine: its counts, samples and sent volume go to
        the results (and its monitor state to the controller); returns its slot."""
        j = self.slot.pop(name)
        del self.name_of[j]
        eng = self.engine
        res = self.results[name]
        res.done += int(eng.ji[K.I_DONE, j])
        res.busy_ms += float(eng.jf[K.F_BUSY, j])
        res.readjustments += int(eng.ji[K.I_READJ, j])
        res.pause_ms += float(eng.jf[K.F_PAUSE_MS, j])
        self.durations[name].append(eng.take_samples(j))
        np.add.at(self.sent_by_node, self.pod_node_links[name],
                  eng.pf[K.P_SENT, eng.pods(j)])
        if self.monitor and self.controller is not None:
            pod = self.state.job_members[name][0]
            self.controller.set_watch_state(pod, *eng.monitor_state(j))
        if self.controller is not None and eng.jf[K.F_ANCHOR, j] > -np.inf:
            self.controller.anchors_ms[name] = max(
                float(eng.jf[K.F_ANCHOR, j]), self.controller.anchors_ms.get(name, -np.inf))
        eng.remove(j)
        return j

    # ------------------------------------------------------------------ controller view
    def _sync_anchors(self) -> None:
        """The controller's anchors from the engine (every reported iteration start)."""
        if self.controller is None:
            return
        anchors = self.controller.anchors_ms
        jf = self.engine.jf
        for name, j in self.slot.items():
            a = float(jf[K.F_ANCHOR, j])
            if a > anchors.get(name, -np.inf):
                anchors[name] = a

    def _load_watch(self, name: str) -> None:
        """The engine takes the controller's monitor state of ``name``."""
        assert self.controller is not None
        j = self.slot[name]
        pod = self.state.job_members[name][0]
        state = self.controller.watch_state(pod)
        if state is None:
            state = ([], [], [], [], 0, [])
        self.engine.set_monitor_state(j, *state)

    def _params_of(self, name: str, j: int, high: set[str],
                   idle: dict[str, float] | None = None) -> None:
        assert self.controller is not None
        load_monitor_params(self.engine, j, self.controller, name, high, self.slot,
                            monitor=self.monitor, idle=idle)

    def _refresh_params(self) -> None:
        if self.controller is None or not self.slot:
            return
        high = self.controller.high_jobs()
        idle = self.controller.idle_map()
        for name, j in self.slot.items():
            self._params_of(name, j, high, idle)

    def _report(self, j: int, t: float) -> None:
        """The engine stopped before job slot ``j``'s report: the controller takes it
        (a changed pattern, repeated readjustments, or a target it must compute)."""
        ctrl = self.controller
        assert ctrl is not None
        name = self.name_of[j]
        pod = self.state.job_members[name][0]
        eng = self.engine
        self._sync_anchors()
        self._refresh_anchor(name, t)
        ctrl.set_watch_state(pod, *eng.monitor_state(j))
        before = dict(ctrl.offsets_ms)
        duration = float(eng.jf[K.F_LAST_DUR, j])
        # the agent measures the comm phase (with the latency tail): what is not its own
        comm = min(max(duration - float(eng.jf[K.F_LAST_OWN, j]), 0.0), duration)
        actions = ctrl.report_iteration(pod, float(eng.jf[K.F_LAST_START, j]), duration,
                                        comm)
        changed = False
        for action in actions:
            if isinstance(action, Readjustment):
                self._pause(name, t, action.pause_ms)
            elif isinstance(action, PatternUpdate):
                self.pattern_updates += 1
                changed = True
        eng.resume(j, t)
        if changed:
            self._update_stretch(t)
            self._apply_offsets(t, before, exclude="")
            self._refresh_params()
        else:
            self._params_of(name, j, ctrl.high_jobs())
        self._load_watch(name)

    def _pause(self, name: str, at_ms: float, pause_ms: float) -> None:
        """The controller paused job ``name`` (between iterations at ``at_ms``)."""
        j = self.slot[name]
        res = self.results[name]
        res.readjustments += 1
        res.pause_ms += pause_ms
        assert self.controller is not None
        period = self.controller.phase_period_ms(name)
        self.engine.jf[K.F_HOLD_PHASE, j] = (at_ms + pause_ms) % period
        self.engine.jf[K.F_HOLD_PERIOD, j] = period

    # ------------------------------------------------------------------ skip-ahead
    def _alone(self, name: str) -> bool:
        links = self.params[name][4]
        return all(self.link_jobs.get(link, set()) <= {name} for link in links if link >= 0)

    def _solo_comm(self, name: str) -> float:
        """The comm phase of a job alone on its links: per link its k pods share
        ``B - background`` max-min fairly at rate ``min(r, (B - bg) / k)``."""
        _, _, rate, volume, links = self.params[name]
        comm = 0.0
        lf = self.engine.lf
        for link in set(links):
            k = links.count(link)
            free = lf[K.L_CAP, link] - lf[K.L_BG, link]
            per_pod = rate if rate <= free / k else free / k
            comm = max(comm, volume / (per_pod * 1e-3))
        return comm

    def _quiet_bounds(self, name: str) -> tuple[float, float, float] | None:
        """``(own_lo, own_hi, longest)``: iterations whose own part (without
        communication) lies in ``[own_lo, own_hi]`` and whose time is at most
        ``longest`` make the controller do nothing, given what its windows already
        hold (no drifted window, no slow count over ``o_t``); None when the
        windows themselves are outside.  Unbounded without a monitor."""
        unbounded = (-np.inf, np.inf, np.inf)
        if not self.monitor:
            return unbounded
        assert self.controller is not None
        limits = self.controller.thresholds(name)
        if limits is None:
            return unbounded
        if name in self.slot:
            durations, own = self.engine.monitor_state(self.slot[name])[:2]
        else:
            state = self.controller.watch_state(self.state.job_members[name][0])
            durations, own = (state[0], state[1]) if state is not None else ([], [])
        if any(not limits.own_lo <= o <= limits.own_hi for o in own):
            return None
        if self.controller.is_high(name):
            return limits.own_lo, limits.own_hi, np.inf
        if sum(d > limits.slow for d in durations) > self.controller.config.o_t:
            return None
        return limits.own_lo, limits.own_hi, limits.slow

    def _quiet_stretch(self, name: str, solo: _Solo, bounds: tuple[float, float, float]
                       ) -> float | None:
        """The stretch's total time if every iteration of it is quiet, else None."""
        key, compute, const = self._solo_terms(name, solo)
        n = self.job_by_name[name].iterations - solo.i0
        total, lo, hi = stretch_summary(self.seed, key, self.sigma, solo.i0, n, compute, const)
        talk = const - solo.stretch  # comm + tail: the part that is not the job's own
        if lo - talk < bounds[0] or hi - talk > bounds[1] or hi > bounds[2]:
            return None
        return float(total)

    def _solo_terms(self, name: str, solo: _Solo) -> tuple[int, float, float]:
        compute, tail = self.params[name][0], self.params[name][1]
        return self.index[name], compute, solo.stretch + solo.comm + tail

    def _solo_begin(self, name: str, i0: int, s0: float, stretch: float) -> bool:
        """Take the job out of the event loop from iteration ``i0`` at ``s0``, if
        that is exact: it is alone on its links and none of its iterations could
        make the controller act."""
        bounds = self._quiet_bounds(name)
        if bounds is None:
            return False
        solo = _Solo(i0, s0, self._solo_comm(name), stretch, s0, self.versions + 1)
        total = self._quiet_stretch(name, solo, bounds)
        if total is None:
            return False
        self.versions += 1
        solo.end = s0 + total
        self.solo[name] = solo
        heapq.heappush(self.local_ends, (solo.end, solo.version, name))
        return True

    def _solo_commit(self, name: str, solo: _Solo, count: int) -> float:
        """Record ``count`` iterations of the stretch in one pass; return the start
        of the next one."""
        res = self.results[name]
        key, compute, const = self._solo_terms(name, solo)
        step = self.step[name]
        keep = 0 if self.controller is None else self.controller.config.readjust_horizon
        samples = np.empty(count // step + 2)
        last_d, last_s = np.empty(keep), np.empty(keep)
        total, written, kept = stretch_commit(self.seed, key, self.sigma, solo.i0, count,
                                              compute, const, solo.s0, step, samples,
                                              last_d, last_s)
        res.busy_ms += total
        res.done += count
        self.durations[name].append(samples[:written])
        volume = self.params[name][3]
        np.add.at(self.sent_by_node, self.pod_node_links[name], volume * count)
        if self.controller is not None and count:
            # the controller's view after these reports: the last ones fill its window
            # and history, and give the anchor (none of them can trigger anything)
            m = min(kept, keep)
            order = (np.arange(m) + (kept - m)) % max(keep, 1)
            pod = self.state.job_members[name][0]
            talk = const - solo.stretch  # measured comm phase: transfers and the tail
            self.controller.absorb_quiet(pod, count, last_s[order], last_d[order],
                                         np.minimum(talk, last_d[order]))
        return solo.s0 + total

    def _solo_to_kernel(self, name: str, t: float) -> None:
        """The job stops being alone at ``t``: rebuild its engine state there."""
        solo = self.solo.pop(name)
        job = self.job_by_name[name]
        compute, tail, rate, volume, links = self.params[name]
        key, _, const = self._solo_terms(name, solo)
        n = job.iterations - solo.i0
        k, s_k, _ = stretch_locate(self.seed, key, self.sigma, solo.i0, n, compute, const,
                                   solo.s0, t)
        k = min(k, n - 1)  # the stretch's end is its job's finish: handled elsewhere
        self._solo_commit(name, solo, k)
        i = solo.i0 + k
        j = self._enter(name, i, s_k, solo.stretch)
        eng = self.engine
        c_k = compute * noise_factor(self.seed, key, i, self.sigma) + solo.stretch
        u = t - s_k
        eng.jf[K.F_ISTART, j] = s_k
        eng.jf[K.F_CSTART, j] = s_k + c_k
        if u < c_k:
            eng.ji[K.I_PHASE, j] = K.PHASE_COMPUTE
            eng.jf[K.F_T, j] = s_k + c_k
            eng.schedule(j, s_k + c_k)
            return
        elapsed = u - c_k
        lf = eng.lf
        pod_rates = np.empty(len(links))
        for q, link in enumerate(links):
            free = lf[K.L_CAP, link] - lf[K.L_BG, link]
            m = links.count(link)
            pod_rates[q] = rate if rate <= free / m else free / m
        left = np.maximum(volume - pod_rates * 1e-3 * elapsed, 0.0)
        left[left <= DONE_GBIT] = 0.0
        sent = volume - left
        if (left > 0).any():
            eng.ji[K.I_PHASE, j] = K.PHASE_COMM
            eng.schedule(j, np.inf)
            eng.set_transfers(j, t, left, sent)
        else:
            eng.pf[K.P_SENT, eng.pods(j)] = sent
            end = s_k + c_k + solo.comm + tail
            eng.ji[K.I_PHASE, j] = K.PHASE_TAIL
            eng.jf[K.F_T, j] = end
            eng.schedule(j, end)

    def _refresh_anchor(self, job: str, t: float) -> None:
        """Before ``job`` is aligned: if its reference job runs in closed form, give
        the controller that job's latest iteration start by ``t`` (what its reports
        would have said)."""
        assert self.controller is not None
        root = self.controller.roots.get(job)
        solo = self.solo.get(root) if root is not None else None
        if root is None or solo is None:
            return
        key, compute, const = self._solo_terms(root, solo)
        n = self.job_by_name[root].iterations - solo.i0
        k, _, last = stretch_locate(self.seed, key, self.sigma, solo.i0, n, compute, const,
                                    solo.s0, t)
        if k > 0:
            self.controller.anchors_ms[root] = max(last, self.controller.anchors_ms.get(
                root, -np.inf))

    def _kernel_to_solo(self, name: str, t: float) -> None:
        """An engine job flagged as alone is between iterations at ``t``: take it
        out (or leave it in, when skipping ahead would not be exact)."""
        j = self.slot[name]
        eng = self.engine
        eng.ji[K.I_LEAVE, j] = 0
        if not self._alone(name):
            return
        bounds = self._quiet_bounds(name)
        if bounds is None:
            return
        i0 = int(eng.ji[K.I_ITER, j])
        stretch = float(eng.jf[K.F_STRETCH, j])
        solo = _Solo(i0, t, self._solo_comm(name), stretch, t, 0)
        if self._quiet_stretch(name, solo, bounds) is None:
            return
        self._leave(name)
        ok = self._solo_begin(name, i0, t, stretch)
        assert ok

    def _start_local(self, job: SimJob, start: float) -> None:
        """A job on one node iterates ``t_p x noise`` regardless of anyone else: its
        whole run is computed now, exactly, and it finishes at a known time."""
        n, step = job.iterations, self.step[job.name]
        res = self.results[job.name]
        samples = np.empty(n // step + 2)
        total, written, _ = stretch_commit(self.seed, self.index[job.name], self.sigma, 0, n,
                                           job.period_ms, 0.0, start, step, samples,
                                           np.empty(0), np.empty(0))
        res.done, res.busy_ms = n, total
        self.durations[job.name].append(samples[:written])
        self.versions += 1
        heapq.heappush(self.local_ends, (start + total, self.versions, job.name))

    # ------------------------------------------------------------------ the controller acts
    def _stretch_map(self) -> dict[str, float]:
        """Idle injection: each job's compute phase grows by the most any link of it
        injects (base period unification, step 2; :meth:`Controller.idle_map`)."""
        return {} if self.controller is None else self.controller.idle_map()

    def _update_stretch(self, t: float) -> None:
        if self.controller is None:
            return
        stretch = self._stretch_map()
        for name, solo in list(self.solo.items()):  # a new stretch ends a closed form
            if stretch.get(name, 0.0) != solo.stretch:
                self._solo_to_kernel(name, t)
        for name, j in self.slot.items():
            self.engine.jf[K.F_STRETCH, j] = stretch.get(name, 0.0)

    def _apply_offsets(self, t: float, before: dict[str, float], exclude: str) -> None:
        """After the offsets changed: move each running low-priority job whose offset
        changed onto its new target phase (high-priority jobs are never moved)."""
        assert self.controller is not None
        after = self.controller.offsets_ms
        moved = [name for name in (*self.slot, *self.solo)
                 if name != exclude and not self.controller.is_high(name)
                 and not (name in before and abs(after.get(name, 0.0) - before[name]) <= 1e-9)]
        for name in moved:
            if name in self.solo:  # a shift ends a closed form
                self._solo_to_kernel(name, t)
        self._sync_anchors()
        eng = self.engine
        for name in moved:
            self._refresh_anchor(name, t)
            target = self.controller.target_phase(name)
            j = self.slot[name]
            if target is None or eng.ji[K.I_PHASE, j] == K.PHASE_DONE:
                continue
            period = self.controller.phase_period_ms(name)
            if eng.ji[K.I_PHASE, j] == K.PHASE_WAIT:  # not started yet: move the start
                now = max(t, float(eng.jf[K.F_T, j]))
                eng.jf[K.F_T, j] = now + (target - now) % period
                eng.schedule(j, float(eng.jf[K.F_T, j]))
            else:
                eng.jf[K.F_HOLD_PHASE, j] = target
                eng.jf[K.F_HOLD_PERIOD, j] = period

    # ------------------------------------------------------------------ finishing
    def _finish(self, name: str, t: float) -> None:
        res = self.results[name]
        res.end_ms = t
        if name in self.solo:
            solo = self.solo.pop(name)
            self._solo_commit(name, solo, self.job_by_name[name].iterations - solo.i0)
        elif name in self.slot:
            self._leave(name)
        for pod in list(self.state.job_members.get(name, ())):
            node = self.state.placed[pod].node
            self.state.remove(pod)
            if self.controller is not None:
                self.controller.on_removed(node)
        if name in self.networked:
            touched = set()
            for link in set(self.params[name][4]):
                self.link_jobs[link].discard(name)
                touched |= self.link_jobs[link]
            if self.skip_ahead:
                for other in touched:  # who is alone now leaves the engine between iterations
                    if other in self.slot and self._alone(other):
                        self.engine.ji[K.I_LEAVE, self.slot[other]] = 1
        if self.controller is not None:
            self._update_stretch(t)
            self._refresh_params()

    def _room_for(self, job: SimJob) -> bool:
        """A necessary condition for placing the job's gang under any policy (all of
        them filter on resources): enough pod-sized holes, node by node."""
        state = self.state
        holes = np.full(len(self.cluster), np.inf)
        for free, need in ((state.free_gpu, job.gpu), (state.free_cpu, job.cpu),
                           (state.free_mem, job.mem_gib)):
            if need > 0:
                holes = np.minimum(holes, np.floor((free + 1e-9) / need))
        if job.spread:  # one worker per node at most
            holes = np.minimum(holes, 1.0)
        return bool(holes.sum() >= job.workers)

    def _retry(self, queue: list[SimJob], t: float) -> list[SimJob]:
        """Retry the waiting jobs in arrival order after the cluster changed.

        Strict FIFO: the head blocks the rest.  Back-off (default): every waiting
        gang is tried, in arrival order, each against the cluster as the ones
        before it left it.  A gang without room for its pods is not even tried
        (the decision could only fail): exact, and it keeps long queues cheap.
        """
        if not queue:
            return queue
        if self.strict_fifo:
            if not self._room_for(queue[0]):
                return queue
            still: list[SimJob] = []
            for job in queue:
                if still or not self._try_place(job, t):
                    still.append(job)
            return still
        return [job for job in queue
                if not (self._room_for(job) and self._try_place(job, t))]

    # ------------------------------------------------------------------ main loop
    def execute(self) -> RunResult:
        wall = time.perf_counter()
        arrivals = sorted(self.jobs, key=lambda j: (j.arrival_s, self.index[j.name]))
        queue: list[SimJob] = []
        a = 0
        t = 0.0
        samples_t: list[float] = [0.0]
        samples: list[NDArray[np.float64]] = []
        last_sent = np.zeros(len(self.cluster))
        next_sample = self.sample_ms
        while True:
            # admit everything that has arrived (queue first, in arrival order)
            while a < len(arrivals) and arrivals[a].arrival_s * 1e3 <= t:
                job = arrivals[a]
                a += 1
                if not self._fits_empty(job):
                    continue  # can never run here
                if (not queue or (not self.strict_fifo and self._room_for(job))) \
                        and self._try_place(job, t):
                    self.results[job.name].accepted_on_arrival = True
                else:
                    queue.append(job)
            self._drop_stale_ends()
            if not self.slot and not self.local_ends and not queue and a >= len(arrivals):
                break
            t_arrival = arrivals[a].arrival_s * 1e3 if a < len(arrivals) else math.inf
            t_local = self.local_ends[0][0] if self.local_ends else math.inf
            until = min(t_arrival, next_sample, t_local)
            if not self.slot:
                if not math.isfinite(min(t_arrival, t_local)):
                    break  # queued jobs that never fit (cannot happen after _fits_empty)
                t = max(t, min(t_arrival, t_local))
            else:
                t, reason, j = self.engine.run(t, until)
                if reason == K.STOP_FINISHED:
                    self._finish(self.name_of[j], t)
                    queue = self._retry(queue, t)
                elif reason == K.STOP_REPORT:
                    self._report(j, t)
                elif reason == K.STOP_SAMPLES:
                    self.durations[self.name_of[j]].append(self.engine.take_samples(j))
                elif reason == K.STOP_SOLO:
                    self._kernel_to_solo(self.name_of[j], t)
                elif reason == K.STOP_IDLE:
                    t = until
            while self.local_ends and self.local_ends[0][0] <= t:
                end, version, name = heapq.heappop(self.local_ends)
                if name in self.networked and (name not in self.solo
                                               or self.solo[name].version != version):
                    continue  # a stretch that ended early: the job went back to the engine
                self._finish(name, end)
                queue = self._retry(queue, t)
            if t >= next_sample:
                sent = self._sent_by_node(t)
                samples.append((sent - last_sent) / ((t - samples_t[-1]) * 1e-3))
                samples_t.append(t)
                last_sent = sent
                next_sample = t + self.sample_ms
                if self.progress is not None:
                    self.progress(t)
        sent = self._sent_by_node()
        if t > samples_t[-1]:
            samples.append((sent - last_sent) / ((t - samples_t[-1]) * 1e-3))
            samples_t.append(t)
        for name, chunks in self.durations.items():
            if chunks:
                self.results[name].durations_ms = np.concatenate(chunks)
        first = min((j.arrival_ms for j in self.results.values()), default=0.0)
        ends = [j.end_ms for j in self.results.values() if j.end_ms is not None]
        tct = (max(ends) - first) if ends else 0.0
        cap = self.cluster.link_gbps
        util_t = np.asarray(samples_t)
        util = np.asarray(samples) if samples else np.zeros((0, len(cap)))
        gamma = gamma_over_time(util_t, util, cap)
        return RunResult(
            policy=self.policy_name, jobs=self.results, tct_ms=tct, gamma=gamma,
            link_names=tuple(n.name for n in self.cluster.nodes),
            link_capacity_gbps=cap.copy(), link_sent_gbit=sent,
            util_t_ms=util_t[1:], util_gbps=util,
            decision_s=np.asarray(self.decision_s),
            recalculations=self.controller.recalculations if self.controller else 0,
            pattern_updates=self.pattern_updates, wall_s=time.perf_counter() - wall,
            controller=self.controller, link_plans=dict(self.link_plans))

    def _drop_stale_ends(self) -> None:
        """Closed-form ends of stretches that went back to the engine."""
        ends = self.local_ends
        while ends and ends[0][2] in self.networked and (
                ends[0][2] not in self.solo or self.solo[ends[0][2]].version != ends[0][1]):
            heapq.heappop(ends)

    def _sent_by_node(self, t: float | None = None) -> NDArray[np.float64]:
        out = self.sent_by_node.copy()
        for name, solo in self.solo.items():  # spread evenly over the stretch
            if t is None or solo.end <= solo.s0:
                continue
            share = min(max((t - solo.s0) / (solo.end - solo.s0), 0.0), 1.0)
            n = self.job_by_name[name].iterations - solo.i0
            np.add.at(out, self.pod_node_links[name], self.params[name][3] * n * share)
        if self.slot:
            eng = self.engine
            if t is not None:
                eng.flush(t)
            for name, j in self.slot.items():
                np.add.at(out, self.pod_node_links[name], eng.pf[K.P_SENT, eng.pods(j)])
        return out
