"""The cluster simulator: a placement policy and its controller over the flow model.

docs/simulator.md.  Jobs arrive; the policy places each job's pods all or nothing
through :class:`tdmcore.framework.Scheduler` (a job that does not fit waits and is
retried whenever a job leaves); the flow-level kernel
(:mod:`tdmcore.sim.engine._flow`) runs their iterations on the nodes' host
links; for the Metronome policies the stop-and-wait :class:`tdmcore.metronome.controller.
Controller` receives every iteration report the moment the iteration ends, and
its shifts, pauses, idle injections and pattern updates act on the running model
(the engine takes the quiet reports and the pauses itself, with the controller's
rules, and hands every other report to the controller).  The same objects run
behind the Kubernetes bridge: domain objects -> snapshot -> kernels -> decision.

Queue: waiting gangs are retried kube-scheduler style (back-off, default) or in
strict head-of-line order (``queue="fifo"``), see :func:`run_cluster`.

Policies and networks: a run is a placement policy (an object, or a name of
:data:`tdmcore.sim.policies.CLUSTER_POLICIES`) on a network, ``shared`` (the flow
model) or ``ideal`` (a private, uncongested link of exactly ``r_p`` per pod: every
job runs as if alone).  The name ``ideal`` is ``metronome`` on the ideal network
(:mod:`tdmcore.sim.policies` says why).

Time shifts: the controller's global offsets are relative to the reference job of
each affinity component (offset 0); a job starts, and a pause or an offset change
moves its next iteration, to the time congruent to "the reference job's latest
iteration start + its offset" modulo its period (:meth:`Controller.target_phase`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import _validation as v
from .._equality import ValueEquality
from ..framework import QUEUES, Policy, check_policy
from ..metronome.controller import Controller, ControllerConfig
from ..metronome.link import LinkPlan
from ..metronome.policies import MetronomeConfig
from ..metronome.scoring import average_bandwidth_utilization
from ..model import Cluster, Pod, TrafficPattern, gang_pods, priority_value
from .engine.network import (
    CONTENTION_EFFICIENCY,
    check_background,
    check_efficiency,
    check_noise_sigma,
)
from .policies import CLUSTER_POLICIES, NETWORKS, cluster_policy
from .run.loop import Run

__all__ = [
    "CLUSTER_POLICIES",
    "MAX_SAMPLE_VALUES",
    "NETWORKS",
    "QUEUES",
    "gamma_of_links",
    "link_use_ms",
    "JobResult",
    "RunResult",
    "SimCluster",
    "SimJob",
    "check_run_options",
    "run_cluster",
    "warm_up",
]

#: The most link-utilisation values a run may sample (samples x links over the jobs'
#: ideal span; 2^25 doubles, 256 MiB): a tiny ``sample_ms`` is refused, not a run that
#: fills the memory.
MAX_SAMPLE_VALUES = 1 << 25

#: Bounds of a job (beyond them times lose their precision, or a run its end): the
#: most iterations, workers, and the latest arrival (about 31.7 years), s.
MAX_ITERATIONS = 10**9
MAX_WORKERS = 100_000
MAX_ARRIVAL_S = 1e9
#: Bounds of times a job or a link brings (ms): a job's ideal span (iterations x
#: period) and a one-way latency.
MAX_SPAN_MS = MAX_ARRIVAL_S * 1e3
MAX_LATENCY_MS = 1e6


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
        for key, most in (("workers", MAX_WORKERS), ("iterations", MAX_ITERATIONS)):
            object.__setattr__(self, key, v.whole(key, getattr(self, key), 1, most))
        if not 0 <= v.real_number("arrival_s", self.arrival_s) <= MAX_ARRIVAL_S:
            raise ValueError(f"arrival_s: must lie in [0, {MAX_ARRIVAL_S:g}], got "
                             f"{self.arrival_s}")
        priority_value(self.priority)  # the rule's bounds (an int64 in the kernels)
        if not self.gpu > 0 and not self.cpu > 0 and not self.mem_gib > 0:
            raise ValueError("gpu: a worker must request some GPU, CPU or memory (all are 0)")
        if self.pattern is not None and not isinstance(self.pattern, TrafficPattern):
            raise ValueError("pattern: expected a TrafficPattern or None")
        if not self.iterations * self.period_ms <= MAX_SPAN_MS:
            raise ValueError(f"iterations: {self.iterations:,} iterations of "
                             f"{self.period_ms:g} ms take more than {MAX_SPAN_MS:g} ms alone "
                             f"(beyond it times lose their precision, or overflow)")

    def pods(self) -> list[Pod]:
        """The job's worker pods ``<name>-w<k>``, through the Core intake
        (:func:`tdmcore.model.gang_pods`, as the Kubernetes bridge reads a pod):
        ``gang_size`` tells the scheduler how many there are, so a job placed wholly
        on one node is recognised as local."""
        return gang_pods(self.name, [f"{self.name}-w{k}" for k in range(self.workers)],
                         gang_size=self.workers, cpu=self.cpu, mem_gib=self.mem_gib,
                         gpu=self.gpu, pattern=self.pattern, priority=self.priority,
                         workload=self.workload, spread=self.spread)

    @property
    def period_ms(self) -> float:
        """The iteration time alone (LowComm jobs: ``iteration_ms``, else 1 s)."""
        if self.pattern is not None:
            return self.pattern.period_ms
        return float(self.iteration_ms) if self.iteration_ms is not None else 1000.0


@dataclass(frozen=True, eq=False)
class SimCluster(ValueEquality):
    """Nodes (with their latency matrix and workloads) and the network's congestion.

    ``background_gbps[n]``: steady background traffic on node n's host link (the
    paper's iPerf3).  ``latency_ms[x, y]``: one-way latency between nodes, a
    symmetric matrix of values >= 0 (the latency between two nodes is one number);
    a job spanning nodes pays ``2 (n - 1)`` times its worst pair latency per
    iteration (ring all-reduce has ``2 (n - 1)`` sequential steps; **[decision]**).
    """

    cluster: Cluster
    background_gbps: NDArray[np.float64]
    latency_ms: NDArray[np.float64]

    def __post_init__(self) -> None:
        k = len(self.cluster)
        bg = check_background(self.background_gbps, self.cluster.link_gbps,
                              [n.name for n in self.cluster.nodes])
        lat = v.as_float_array("latency_ms", self.latency_ms, ndim=2)
        if lat.shape != (k, k) or np.any(lat < 0):
            raise ValueError(f"latency_ms: expected a ({k}, {k}) matrix of values >= 0")
        if np.any(lat > MAX_LATENCY_MS):
            raise ValueError(f"latency_ms: expected values <= {MAX_LATENCY_MS:g} ms, got "
                             f"{float(lat.max()):g}")
        apart = ~np.isclose(lat, lat.T, rtol=1e-9, atol=0.0)
        if apart.any():  # the first pair, below the diagonal, as a file writes it
            i, j = map(int, np.argwhere(np.tril(apart))[0])
            raise ValueError(f"latency_ms[{i}][{j}]: expected a symmetric matrix: "
                             f"{lat[i, j]:g} here but {lat[j, i]:g} at latency_ms[{j}][{i}]")
        object.__setattr__(self, "background_gbps", bg)
        object.__setattr__(self, "latency_ms", lat)


@dataclass(eq=False)
class JobResult(ValueEquality):
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
    #: time the running job was held between iterations: the controller's pauses,
    #: and the wait a shift of its offset adds (a job shifted before its first
    #: iteration starts later instead, which its waiting time counts)
    pause_ms: float = 0.0
    accepted_on_arrival: bool = False
    #: iterations done and their total time (exact even when ``durations_ms`` is a
    #: sample, see :data:`tdmcore.sim.run.book.KEEP_DURATIONS`)
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
        """Average time per 1,000 iterations (s), the paper's user-side metric.

        The iterations' own time plus the time the job was held by pauses and
        shifts (:attr:`pause_ms`): a held job's training takes that long (the
        paper's times include its suspensions, §IV-B and Table VI).  The percentiles
        (:meth:`percentiles`) are of the iterations' own times.
        """
        return (self.busy_ms + self.pause_ms) / self.done if self.done else math.nan

    def percentiles(self) -> NDArray[np.float64]:
        """Iteration time p5, p25, p50, p75, p95 (ms)."""
        d = self.durations_ms
        if not d.size:
            return np.full(5, np.nan)
        return np.asarray(np.percentile(d, [5, 25, 50, 75, 95]), dtype=np.float64)


@dataclass(eq=False)
class RunResult(ValueEquality):
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
    #: wall time of each decision (not compared by ``==``, as ``wall_s``)
    decision_s: NDArray[np.float64] = field(compare=False)
    recalculations: int
    pattern_updates: int
    wall_s: float = field(compare=False)
    #: the run's controller, live (not compared by ``==``)
    controller: Controller | None = field(default=None, compare=False)
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


#: Iterations of each job of a warm-up run (:func:`warm_up`).
WARM_UP_ITERATIONS = 20


def warm_up(sim: SimCluster, jobs: Sequence[SimJob], policy: str | Policy, *,
            seed: int = 0) -> None:
    """Run the first two of ``jobs`` for at most 20 iterations under ``policy``,
    to be discarded.

    A process loads the compiled kernels the first time it runs them (seconds; the
    first run after an install compiles them); a run timed after this one does
    not pay for that in its wall time and decision latencies.  ``tdmcore
    simulate`` runs it for each policy before the timed runs, a sweep once per
    process and policy before its tasks.

    Parameters
    ----------
    sim, jobs, policy, seed
        As :func:`run_cluster` takes them (a policy object is used: pass a fresh one).

    Raises
    ------
    ValueError
        As :func:`run_cluster`.
    """
    short = [replace(j, iterations=min(j.iterations, WARM_UP_ITERATIONS))
             for j in tuple(jobs)[:2]]
    run_cluster(sim, short, policy, seed=seed)


def check_run_options(*, noise_sigma: Any = 0.01, sample_ms: Any = None,
                      progress: Any = None, skip_ahead: Any = True, queue: Any = "backoff",
                      contention_efficiency: Any = CONTENTION_EFFICIENCY,
                      network: Any = None
                      ) -> tuple[float, float | None, bool, float]:
    """Check the options of :func:`run_cluster` that do not depend on the jobs.

    :func:`run_cluster` calls it; a caller that sets the options ahead of the runs
    (a sweep spec's ``run.*``) calls it to refuse a bad value before any run.

    Parameters
    ----------
    noise_sigma, sample_ms, progress, skip_ahead, queue, contention_efficiency, network
        As :func:`run_cluster` takes them, with its defaults.

    Returns
    -------
    tuple
        ``(noise_sigma, sample_ms, skip_ahead, contention_efficiency)`` as the run
        uses them (``sample_ms`` None: the default, which depends on the jobs).

    Raises
    ------
    ValueError
        Naming the option: a noise below 0 or not a number, a ``sample_ms`` not
        > 0 (its bound against the jobs' span is :func:`run_cluster`'s), a
        ``progress`` that is not callable, a ``skip_ahead`` that is not a bool, an
        unknown ``queue`` or ``network``, an efficiency outside
        [MIN_CONTENTION_EFFICIENCY, 1].
    """
    if network is not None and network not in NETWORKS:
        raise ValueError(f"network: expected one of {', '.join(NETWORKS)}, got {network!r}")
    sigma = check_noise_sigma(noise_sigma)
    if progress is not None and not callable(progress):
        raise ValueError(f"progress: expected a callable or None, got {type(progress).__name__}")
    if queue not in QUEUES:
        raise ValueError(f"queue: expected one of {', '.join(QUEUES)}, got {queue!r}")
    eta = check_efficiency(contention_efficiency)
    skip = v.boolean("skip_ahead", skip_ahead)
    sample = None if sample_ms is None else v.positive_float("sample_ms", sample_ms)
    return sigma, sample, skip, eta


def run_cluster(sim: SimCluster, jobs: Sequence[SimJob], policy: str | Policy, *,
                seed: int = 0, noise_sigma: float = 0.01, sample_ms: float | None = None,
                progress: Callable[[float], None] | None = None,
                skip_ahead: bool = True, queue: str = "backoff",
                contention_efficiency: float = CONTENTION_EFFICIENCY,
                controller: ControllerConfig | None = None,
                network: str | None = None) -> RunResult:
    """Simulate ``jobs`` on ``sim`` under ``policy`` until every job has finished.

    Parameters
    ----------
    sim : SimCluster
        The cluster: nodes, each link's background traffic, latencies.
    jobs : sequence of SimJob
        The jobs (names unique).
    policy : str or Policy
        One of :data:`CLUSTER_POLICIES` (which labels the result), or a policy
        object implementing :class:`tdmcore.framework.Policy` (its ``name`` labels
        the result).  An object is used as it is for this run: pass a fresh one
        to each run.  The stop-and-wait controller runs for Metronome's policies,
        and for an object that carries a
        :class:`~tdmcore.metronome.policies.MetronomeConfig` as ``config``, on the
        shared network.
    seed : int
        Compute noise of job ``k`` (its index in ``jobs``) at iteration ``i`` is
        the counter-based draw ``(seed, k, i)`` (:mod:`tdmcore.sim.engine.network`), so
        every policy sees the same noise for the same job and iteration.
    noise_sigma : float
        Lognormal compute noise, mean 1 (1 % by default).
    sample_ms : float, optional
        Link utilisation sampling interval, ms > 0 (default: 1/400 of the last
        arrival plus the longest ideal job, at least 1 s).  At most
        :data:`MAX_SAMPLE_VALUES` samples x links over that span.
    progress : callable, optional
        Called with the simulated time (ms) reached, now and then.
    skip_ahead : bool
        Compute a networked job that is alone on all its links in closed form
        while none of its iterations can make the controller act (exact: nothing
        shares its transfers, and every report it would make is quiet; the test
        suite checks it against ``skip_ahead=False``, which runs every iteration
        through the engine, and every transfer through its event loop: with it, an
        iteration whose transfers meet no other is one event, bit for bit the
        loop's).  Link utilisation samples of such a stretch are spread evenly over
        it; totals are exact.
    queue : {"backoff", "fifo"}
        How waiting gangs are retried.  ``"backoff"`` (default), kube-scheduler
        with the coscheduling plugin: gangs are tried in arrival order; one that
        cannot be placed waits and is retried whenever the cluster changes (a job
        leaves), while the jobs behind it — and new arrivals — are tried
        meanwhile, so one unschedulable gang never blocks the cluster.
        ``"fifo"``: strict head-of-line order, nothing passes a waiting gang.
    contention_efficiency : float
        ``eta`` in [:data:`~tdmcore.sim.engine.network.MIN_CONTENTION_EFFICIENCY`,
        1]: two or more transfers that together ask for more than a link has left
        share ``eta`` of it (docs/simulator.md, "Contention").
        The default is the value fitted on the Metronome paper's measurements
        (:data:`tdmcore.sim.engine.network.CONTENTION_EFFICIENCY`); 1 is plain max-min
        fair sharing.  ``ideal`` gives every transfer a private link, so it
        never contends.
    controller : ControllerConfig, optional
        The stop-and-wait controller's thresholds (window, ``O_T``, ``A_T``, drift
        tolerance, re-measuring; paper §III-C) for a policy that runs it.  Default:
        :meth:`ControllerConfig.for_policy` of the policy's ``config``, the paper's
        values with the policy's ablation flags.  Its ``scheduler`` must be the
        policy's :class:`~tdmcore.metronome.policies.MetronomeConfig` (the controller plans
        the links with the scheduler's thresholds).
    network : {"shared", "ideal"}, optional
        ``shared``: the flow model of the host links; ``ideal``: every pod sends
        through a private link of exactly its rate, so no transfer contends, no
        background or latency applies and no controller runs (a job's time per
        iteration is its time alone).  Default: the policy's, ``ideal`` for the
        name ``ideal`` (Metronome's placement on the ideal network), ``shared``
        for every other name and for an object.

    Returns
    -------
    RunResult

    Raises
    ------
    ValueError
        Naming the argument: an unknown policy name, an object that lacks an
        extension point, jobs that are not unique ``SimJob``s, a bad seed, noise,
        ``skip_ahead`` (not a bool), queue, sample interval, contention efficiency
        or network (:func:`check_run_options`), a ``network`` that contradicts the
        policy's name (``ideal`` on the shared network), a ``controller`` for a
        policy that runs none or whose ``scheduler`` is not the policy's config;
        ``jobs`` naming the jobs that the policy could not place even on the
        empty cluster (they would never run: the run is all or nothing).

    Notes
    -----
    **[decision]** kube-scheduler also retries a gang when its back-off (1 s
    doubling to 10 s) expires and moves it to the back-off queue on a cluster
    event until then; the simulator retries at the cluster event itself.  A retry
    without a change to the cluster is deterministic and fails again, so only the
    up-to-10 s delay of the back-off is not modelled (against jobs of minutes to
    hours).

    A job that cannot be placed on the empty cluster under ``policy`` (it needs
    more than the cluster has) would never start: the run refuses the jobs
    instead of returning means over the others.  Every job that starts finishes.
    """
    if not isinstance(sim, SimCluster):
        raise ValueError(f"sim: expected a SimCluster, got {type(sim).__name__}")
    if isinstance(jobs, SimJob) or not isinstance(jobs, Iterable):
        raise ValueError(f"jobs: expected a non-empty sequence of SimJob, got "
                         f"{type(jobs).__name__}")
    jobs = tuple(jobs)
    if not jobs or not all(isinstance(j, SimJob) for j in jobs):
        raise ValueError("jobs: expected a non-empty sequence of SimJob")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ValueError("jobs: job names must be unique")
    sigma, sample, skip, eta = check_run_options(
        noise_sigma=noise_sigma, sample_ms=sample_ms, progress=progress,
        skip_ahead=skip_ahead, queue=queue, contention_efficiency=contention_efficiency,
        network=network)
    if isinstance(policy, str):
        placement, named_network = cluster_policy(policy)
        name = policy
        if network is not None and named_network != "shared" and network != named_network:
            raise ValueError(f"network: {policy!r} runs on the {named_network} network, "
                             f"not {network!r}")
    else:
        placement, name = check_policy(policy), str(policy.name)
        named_network = "shared"
    v.seed(seed)
    ideal = (network or named_network) == "ideal"
    if controller is not None:
        if not isinstance(controller, ControllerConfig):
            raise ValueError(f"controller: expected a ControllerConfig, got "
                             f"{type(controller).__name__}")
        config = None if ideal else getattr(placement, "config", None)
        if not isinstance(config, MetronomeConfig):
            raise ValueError(f"controller: policy {name!r} runs no controller")
        if controller.scheduler != config:
            raise ValueError("controller: its scheduler config differs from the policy's "
                             "(build it with ControllerConfig.for_policy(policy.config))")
    span = max(j.arrival_s * 1e3 for j in jobs) + max(j.iterations * j.period_ms for j in jobs)
    if sample is None:
        sample_ms = max(1000.0, span / 400)
    else:
        sample_ms = sample
        links = max(len(sim.cluster.link_gbps), 1)
        most = MAX_SAMPLE_VALUES // links
        if span / sample_ms > most:
            raise ValueError(
                f"sample_ms: {sample_ms:g} ms gives about {span / sample_ms:,.0f} samples of "
                f"{links} links over the jobs' ideal span ({span / 1e3:g} s); at most "
                f"{most:,} (a sample_ms of at least {span / most:.3g} ms)")
    results = {j.name: JobResult(j.name, j.model, j.priority, j.arrival_s * 1e3, j.iterations)
               for j in jobs}
    wall = time.perf_counter()
    run = Run(sim, jobs, placement, results, ideal=ideal, seed=seed, sigma=sigma,
              sample_ms=sample_ms, progress=progress, skip_ahead=skip,
              strict_fifo=queue == "fifo", contention_efficiency=eta, controller=controller)
    _refuse_never_placed(run, sim, jobs, name)
    run.execute()
    first = min((j.arrival_ms for j in results.values()), default=0.0)
    ends = [j.end_ms for j in results.values() if j.end_ms is not None]
    tct = (max(ends) - first) if ends else 0.0
    cap = sim.cluster.link_gbps
    util_t = np.asarray(run.sampler.times)
    util = np.asarray(run.sampler.rates) if run.sampler.rates else np.zeros((0, len(cap)))
    ctrl = run.controller
    return RunResult(
        policy=name, jobs=results, tct_ms=tct,
        gamma=gamma_of_links(run.sent, link_use_ms(_link_spans(run, len(cap))), cap),
        link_names=tuple(n.name for n in sim.cluster.nodes),
        link_capacity_gbps=cap.copy(), link_sent_gbit=run.sent,
        util_t_ms=util_t[1:], util_gbps=util,
        decision_s=np.asarray(run.placement.decision_s),
        recalculations=ctrl.recalculations if ctrl else 0,
        pattern_updates=run.mirror.pattern_updates if run.mirror is not None else 0,
        wall_s=time.perf_counter() - wall, controller=ctrl,
        link_plans=dict(run.placement.link_plans))


def _refuse_never_placed(run: Run, sim: SimCluster, jobs: Sequence[SimJob],
                         policy: str) -> None:
    """A ValueError naming ``jobs`` when the policy cannot place some of them even
    on the empty cluster (they would never start, and the run's means would leave
    them out without a word).  The placement's own test decides, once per shape
    of job (:meth:`~tdmcore.sim.run.placement.Placement.fits_empty`)."""
    never = [j for j in jobs if not run.placement.fits_empty(j)]
    if not never:
        return
    first = never[0]
    nodes = sim.cluster.nodes
    shown = ", ".join(repr(j.name) for j in never[:5]) + (
        f" and {len(never) - 5} more" if len(never) > 5 else "")
    raise ValueError(
        f"jobs: {len(never)} job(s) can never be placed under {policy!r}, even on the "
        f"empty cluster ({shown}); {first.name!r} asks for {first.workers} worker(s) of "
        f"{first.gpu:g} GPU, {first.cpu:g} CPU and {first.mem_gib:g} GiB"
        + (" on distinct nodes" if first.spread else "")
        + f", the cluster has {len(nodes)} node(s) and "
        f"{float(sim.cluster.gpu.sum()):g} GPU(s)")


def _link_spans(run: Run, n_links: int) -> list[list[tuple[float, float]]]:
    """Per node link, the ``(start, end)`` of every networked job placed across it."""
    spans: list[list[tuple[float, float]]] = [[] for _ in range(n_links)]
    end_of_run = run.sampler.times[-1]
    for name in run.book.networked:
        res = run.book.results[name]
        if res.start_ms is None:
            continue
        end = res.end_ms if res.end_ms is not None else end_of_run
        for link in run.book.pod_node_links[name]:
            spans[int(link)].append((res.start_ms, end))
    return spans


def link_use_ms(intervals: Sequence[Sequence[tuple[float, float]]]) -> NDArray[np.float64]:
    """How long each link was in use: the length of the union of its intervals.

    Parameters
    ----------
    intervals : sequence of sequences of ``(start_ms, end_ms)``
        Per link, the time each networked job placed across it ran (from its
        start to its end).

    Returns
    -------
    ndarray (L,)
        Per link, the milliseconds during which at least one of them ran.
    """
    out = np.zeros(len(intervals))
    for link, spans in enumerate(intervals):
        covered, reach = 0.0, -math.inf
        for start, end in sorted(spans):
            if end <= reach:
                continue
            covered += end - max(start, reach)
            reach = end
        out[link] = covered
    return out


def gamma_of_links(sent_gbit: ArrayLike, in_use_ms: ArrayLike,
                   capacity_gbps: ArrayLike) -> float:
    """Average bandwidth utilization Gamma of a run (Metronome paper Eqs. 5-6).

    Parameters
    ----------
    sent_gbit : array_like (L,)
        What the jobs sent through each link over the run (Gbit).
    in_use_ms : array_like (L,)
        How long each link was in use (:func:`link_use_ms`): some networked job
        placed across it was running.
    capacity_gbps : array_like (L,)
        Link capacities ``B_l`` > 0.

    Returns
    -------
    float
        Eq. (6) gives each link in use (``T_l > 0``) its utilization over that
        time, ``xi_l = (integral of min(S_l, B_l)) / (B_l T_l)``: its traffic
        ``S_l`` never exceeds ``B_l`` in the flow engine, so the integral is what
        it sent, ``min(1, sent_l / (B_l T_l))``.  Eq. (5) is then
        :func:`~tdmcore.metronome.scoring.average_bandwidth_utilization` over the
        links in use: ``mean_l B_l xi_l / B_max``.  0 when no link is ever in use.

    Notes
    -----
    **[decision, docs/fidelity.md]** "In use" is decided by placement, not by
    instantaneous traffic: Eq. (6) integrates over the whole period, compute
    phases included, so a link counts for all the time a placed job sends
    bursts through it, and Gamma does not depend on how often the run samples.
    Links in use rather than every link of the cluster: idle links would dilute
    Gamma by the cluster's size.  Over the time in use rather than bytes over
    the makespan: a policy whose contention slows its jobs carries the same
    bytes over a longer time, which the paper sees as a lower utilization while
    the jobs run.  Background traffic (iPerf3) is not the jobs' and is not
    counted.
    """
    cap = v.as_float_array("capacity_gbps", capacity_gbps, ndim=1)
    sent = v.as_float_array("sent_gbit", sent_gbit, ndim=1)
    use = v.as_float_array("in_use_ms", in_use_ms, ndim=1)
    if sent.shape != cap.shape or np.any(sent < 0):
        raise ValueError(f"sent_gbit: expected {cap.shape[0]} values >= 0")
    if use.shape != cap.shape or np.any(use < 0):
        raise ValueError(f"in_use_ms: expected {cap.shape[0]} values >= 0")
    if np.any(cap <= 0):
        raise ValueError("capacity_gbps: every capacity must be > 0")
    used = use > 0
    if not used.any():
        return 0.0
    xi = np.minimum(1.0, sent[used] / (cap[used] * use[used] * 1e-3))
    return average_bandwidth_utilization(cap[used], xi)
