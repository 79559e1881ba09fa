"""Every Prometheus metric of the bridge's servers, defined in one place.

Each server has its own :class:`~prometheus_client.CollectorRegistry` (its
:class:`~k8s_bridge.web.JsonApp`'s), served on ``/metrics`` (the extender's and the
controller's on their probe ports).  The classes here create a server's metrics on
that registry; the code that observes them only calls ``inc`` / ``observe``.  Names
follow Prometheus' conventions (``_total`` on counters is added by the client,
``_seconds`` for durations); docs/kubernetes.md ("Metrics") lists them with example
PromQL.  The agent's metrics stay in :mod:`k8s_bridge.agent` (its relay's outcomes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

__all__ = ["LATENCY_BUCKETS", "ApiMetrics", "ControllerMetrics", "ExtenderMetrics",
           "HttpMetrics", "StandaloneMetrics"]

#: seconds: an extender answer is expected in milliseconds, a bind up to its gang wait
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: seconds from a gang's admission until it is bound or released (``--gang-wait-seconds``)
GANG_WAIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, 300.0)
#: seconds of a regulation pause (1 ms to 5 s)
PAUSE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class _ReadCounters(Collector):
    """Counters whose values other objects keep (counts that only grow: rebuilds,
    decisions), read when scraped: a Counter, not a Gauge, so that ``rate()`` and
    ``increase()`` apply and a restart reads as a counter reset."""

    def __init__(self, counters: dict[str, tuple[str, Callable[[], float]]]) -> None:
        self.counters = counters

    def collect(self) -> Iterator[CounterMetricFamily]:
        for name, (documentation, read) in self.counters.items():
            yield CounterMetricFamily(name, documentation, value=read())

    def describe(self) -> Iterator[CounterMetricFamily]:
        for name, (documentation, _) in self.counters.items():
            yield CounterMetricFamily(name, documentation)


class HttpMetrics:
    """Requests and latency per route of one server (``<name>_requests_total``,
    ``<name>_request_seconds``)."""

    def __init__(self, name: str, registry: CollectorRegistry) -> None:
        self.requests = Counter(f"{name}_requests", "HTTP requests by route and code",
                                ["route", "code"], registry=registry)
        self.latency = Histogram(f"{name}_request_seconds", "Request latency by route",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=registry)


class ApiMetrics:
    """Failed calls to the Kubernetes API (``tdmcore_api_errors_total{method, code}``;
    code 0: the API server could not be reached)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.errors = Counter("tdmcore_api_errors", "Failed Kubernetes API calls by HTTP "
                              "method and status (0: not reached)", ["method", "code"],
                              registry=registry)

    def error(self, method: str, status: int) -> None:
        self.errors.labels(method, str(status)).inc()


class ExtenderMetrics(ApiMetrics):
    """The extender's decisions, binds, refusals and gang waits."""

    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.decisions = Counter("tdmcore_extender_decisions", "Answers by verb and outcome "
                                 "(ok, error, refused, bad_request); binds: verb=bind, "
                                 "outcome=ok", ["verb", "outcome"], registry=registry)
        self.decision_seconds = Histogram(
            "tdmcore_extender_decision_seconds", "Time to decide, per verb (the pipeline's "
            "work, without HTTP; bind includes its API call and any gang wait)", ["verb"],
            buckets=LATENCY_BUCKETS, registry=registry)
        self.rejected_nodes = Counter("tdmcore_extender_rejected_nodes",
                                      "Nodes rejected by Filter", ["kind"], registry=registry)
        self.bind_refusals = Counter(
            "tdmcore_extender_bind_refusals", "Binds refused, by reason (not_filtered, "
            "not_claimed, no_longer_fits, pod_refused, api_error, other)",
            ["reason"], registry=registry)
        self.gang_wait_seconds = Histogram(
            "tdmcore_extender_gang_wait_seconds", "How long a gang took, from its admission "
            "(its nodes claimed at its first member's Filter) until minMember members were "
            "bound or its claims were released",
            ["outcome"], buckets=GANG_WAIT_BUCKETS, registry=registry)

    def model_counters(self, registry: CollectorRegistry, rebuilds: Callable[[], float],
                       decisions: Callable[[], float],
                       node_updates: Callable[[], float]) -> None:
        """Counters read off the pipeline and its model when scraped
        (``tdmcore_model_rebuilds_total``, ``tdmcore_pipeline_decisions_total``,
        ``tdmcore_model_node_updates_total``)."""
        registry.register(_ReadCounters({
            "tdmcore_model_rebuilds": ("ClusterState rebuilds from the cache", rebuilds),
            "tdmcore_pipeline_decisions": ("Full scheduling decisions computed (the rest "
                                           "answered from cache)", decisions),
            "tdmcore_model_node_updates": ("Node changes applied to the cluster state in "
                                           "place (no rebuild)", node_updates)}))

    def gang_settled(self, outcome: str, waited_s: float) -> None:
        self.gang_wait_seconds.labels(outcome).observe(waited_s)


class ControllerMetrics(ApiMetrics):
    """The controller's reconciles, writes, regulation and reports."""

    def __init__(self, registry: CollectorRegistry, leading: Callable[[], float]) -> None:
        super().__init__(registry)
        self.reconciles = Counter("tdmcore_controller_reconciles", "Reconcile passes",
                                  registry=registry)
        self.reconcile_seconds = Histogram("tdmcore_controller_reconcile_seconds",
                                           "Time of a reconcile pass, its writes included",
                                           buckets=LATENCY_BUCKETS, registry=registry)
        self.writes = Counter("tdmcore_controller_writes", "Status writes", ["kind"],
                              registry=registry)
        self.actions = Counter("tdmcore_controller_actions", "Regulation actions (pause, "
                               "pattern_update)", ["kind"], registry=registry)
        self.pause_seconds = Histogram("tdmcore_controller_pause_seconds",
                                       "Lengths of the pauses ordered (seconds)",
                                       buckets=PAUSE_BUCKETS, registry=registry)
        self.recalculations = Counter(
            "tdmcore_controller_recalculations", "Links planned by the offline "
            "recalculation (phase three, optimal mode)", registry=registry)
        self.reports = Counter("tdmcore_controller_reported_iterations",
                               "Iterations reported by agents", registry=registry)
        self.refused_reports = Counter("tdmcore_controller_refused_reports",
                                       "Reports refused before use, by HTTP status "
                                       "(401, 403: authentication)", ["code"],
                                       registry=registry)
        Gauge("tdmcore_controller_leader", "1 while this replica leads",
              registry=registry).set_function(leading)


class StandaloneMetrics(ApiMetrics):
    """The standalone scheduler's gang decisions."""

    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.gangs = Counter("tdmcore_scheduler_gangs", "Gang decisions by outcome",
                             ["outcome"], registry=registry)
