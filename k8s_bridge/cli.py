"""``tdmcore-bridge``: the extender sidecar, the standalone scheduler, the
controller and the node agent, one sub-command each."""

from __future__ import annotations

import functools
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import click
import kubernetes
import yaml

from tdmcore._click import FiniteFloat
from tdmcore.elastic import ELASTIC_POLICIES
from tdmcore.framework import QUEUES
from tdmcore.metronome.policies import POLICIES

from ._entry import EXIT_INTERRUPTED
from .auth import AGENT_USER, AUDIENCE
from .cache import WATCHED_KINDS, ClusterModel
from .informer import Informer
from .kube import Kube
from .web import DEFAULT_MAX_BODY, JsonApp, Server

__all__ = ["main", "start_informers"]

log = logging.getLogger("k8s_bridge")

#: Without these synced the bridge is not ready (the others are optional CRDs).
REQUIRED_KINDS = ("Node", "Pod", "NodeBandwidth", "PodBandwidth")


def start_informers(kube: Kube, model: ClusterModel, kinds: Sequence[str] = WATCHED_KINDS,
                    *, watch_timeout_s: float = 300.0) -> tuple[list[Informer],
                                                                 Callable[[], bool]]:
    """One informer per kind feeding ``model``; and a readiness check."""
    informers = [Informer(kube, kind, model.on_event, watch_timeout_s=watch_timeout_s,
                          known=functools.partial(model.snapshot, kind)).start()
                 for kind in kinds]
    required = [i for i in informers if i.kind in REQUIRED_KINDS]

    def ready() -> bool:
        return all(i.synced.is_set() for i in required)

    return informers, ready


def _common(f: Callable[..., None], host: str = "0.0.0.0",
            host_help: str | None = None) -> Callable[..., None]:
    options = [
        click.option("--kubeconfig", type=click.Path(exists=True, dir_okay=False), default=None,
                     help="Outside a cluster: the kubeconfig to use."),
        click.option("--api-server", default=None,
                     help="Talk to this URL without authentication (kubectl proxy)."),
        click.option("--host", default=host, show_default=True, help=host_help),
        click.option("--log-level", default="INFO", show_default=True,
                     type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
                                       case_sensitive=False)),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _probe_options(port: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``--probe-host`` / ``--probe-port``: where ``/healthz``, ``/readyz`` and
    ``/metrics`` are served apart from the component's own routes."""
    def add(f: Callable[..., None]) -> Callable[..., None]:
        f = click.option("--probe-port", type=click.IntRange(0, 65535), default=port,
                         show_default=True,
                         help="Port of /healthz, /readyz and /metrics alone (the kubelet's "
                              "probes, Prometheus); 0: a free port.")(f)
        f = click.option("--probe-host", default="0.0.0.0", show_default=True,
                         help="Address of the probe port.")(f)
        return f
    return add


def _probe_server(app: JsonApp, host: str, port: int) -> Server:
    """``/healthz``, ``/readyz`` and ``/metrics`` of ``app`` (its readiness and its
    registry) on a port of their own, served from a background thread."""
    probes = JsonApp(f"{app.name}_probes", ready=lambda: app.ready(),
                     registry=app.registry)
    server = Server(probes, host, port, threads=2).start()
    log.info("probes and metrics on %s", server.url)
    return server


def _policy_options(f: Callable[..., None]) -> Callable[..., None]:
    f = click.option("--default-link-gbps", type=FiniteFloat(min=0.0, min_open=True),
                     default=25.0, show_default=True,
                     help="Link capacity of nodes without NodeBandwidth.spec.bandwidth.")(f)
    f = click.option("--policy", type=click.Choice(list(POLICIES)), default="metronome",
                     show_default=True, help="The scheduling policy (as in the simulator).")(f)
    return f


def _configure_logging(log_level: str) -> None:
    """The components' log format at ``log_level``, on stderr.

    **[decision]** urllib3 logs a WARNING for each of its connection retries; with
    an unreachable API server that is several lines a second per informer.  Its
    retries are reported once per outage by the informer instead (one WARNING,
    then one INFO line when the server answers again), so urllib3 speaks only of
    errors.
    """
    logging.basicConfig(level=log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)


def _setup(log_level: str, kubeconfig: str | None, api_server: str | None) -> Kube:
    _configure_logging(log_level)
    try:
        return Kube.connect(kubeconfig, host=api_server)
    except yaml.YAMLError as exc:  # the official client parses it with PyYAML
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ValueError(f"kubeconfig: {kubeconfig} is not valid YAML ({where}"
                         f"{getattr(exc, 'problem', None) or exc})") from None


def _serve_forever(server: Server, stop: threading.Event) -> None:
    def handle(signum: int, frame: object) -> None:
        stop.set()
        server.stop()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    log.info("serving on %s", server.url)
    server.run()
    log.info("stopped serving on %s", server.url)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tdmcore")
def cli() -> None:
    """tdmcore on Kubernetes: extender, standalone scheduler, controller and agent."""


@cli.command("extender")
@functools.partial(_common, host="127.0.0.1",
                   host_help="Address of the verbs (filter, prioritize, bind): loopback, "
                             "for kube-scheduler in the same pod.  Anything else lets any "
                             "pod that reaches it ask for binds.")
@_probe_options(9888)
@_policy_options
@click.option("--port", type=click.IntRange(0, 65535), default=8888, show_default=True)
@click.option("--prefix", default="", help="URL prefix of the verbs (urlPrefix's path).")
@click.option("--max-body-bytes", type=click.IntRange(min=1024), default=DEFAULT_MAX_BODY,
              show_default=True, help="Larger requests are answered 400.")
@click.option("--scheduler-name", default="tdmcore-scheduler", show_default=True,
              help="Bind only pods whose spec.schedulerName is this.")
@click.option("--gang-wait-seconds", type=FiniteFloat(min=0.0, max=600.0), default=30.0,
              show_default=True,
              help="How long the nodes claimed for a PodGroup gang (placed whole at its "
                   "first member's Filter) are held for the members not bound yet; 0: no "
                   "gangs (members are placed one by one).")
@click.option("--threads", type=click.IntRange(1, 1024), default=8, show_default=True,
              help="Web server threads (requests served at once; no request waits for a "
                   "gang).")
@click.option("--requeue/--no-requeue", default=True, show_default=True,
              help="Touch waiting pods so that kube-scheduler retries them at once.")
@click.option("--async-status/--sync-status", default=True, show_default=True,
              help="Write NodeBandwidth status behind the bind (not inside it).")
@click.option("--status-max-delay-seconds", type=FiniteFloat(min=0.0, max=60.0),
              default=1.0, show_default=True,
              help="With --async-status: a NodeBandwidth write waits for a lull in the binds "
                   "(0.1 s without one), at most this long.")
@click.option("--node-updates", type=click.Choice(["incremental", "rebuild"]),
              default="incremental", show_default=True,
              help="On a change of an existing Node: update it in place, or rebuild the "
                   "whole cluster state (the former behaviour, for comparison).")
@click.option("--decide-in-filter/--no-decide-in-filter", default=True, show_default=True,
              help="Filter keeps only the policy's pick among the feasible nodes, claimed "
                   "for the pod until it is bound: kube-scheduler binds it without scoring "
                   "(the shipped configuration has no prioritize or bind verb).  Off: "
                   "Filter keeps every feasible node, kube-scheduler adds Metronome's "
                   "scores to its own (prioritizeVerb) and the extender binds (bindVerb).")
def extender_cmd(kubeconfig: str | None, api_server: str | None, host: str, log_level: str,
                 probe_host: str, probe_port: int,
                 policy: str, default_link_gbps: float, port: int, prefix: str,
                 max_body_bytes: int, scheduler_name: str, gang_wait_seconds: float,
                 threads: int, requeue: bool, async_status: bool,
                 status_max_delay_seconds: float, node_updates: str,
                 decide_in_filter: bool) -> None:
    """kube-scheduler HTTP extender: POST /filter, /prioritize, /bind."""
    from .extender import Extender
    from .pipeline import Pipeline
    from .requeue import Requeuer

    kube = _setup(log_level, kubeconfig, api_server)
    model = ClusterModel(default_link_gbps=default_link_gbps,
                         incremental_nodes=node_updates == "incremental")
    _, ready = start_informers(kube, model)
    pipeline = Pipeline(model, policy, kube, scheduler_name=scheduler_name,
                        gang_wait_s=gang_wait_seconds)
    pipeline.async_status = async_status
    pipeline.status_max_delay_s = status_max_delay_seconds
    pipeline.filter_decides = decide_in_filter
    pipeline.warm_up()
    ext = Extender(pipeline, prefix=prefix, ready=ready, max_body=max_body_bytes)
    stop = threading.Event()
    server = Server(ext.app, host, port, threads)  # listening from here on
    probes = _probe_server(ext.app, probe_host, probe_port)
    if requeue:  # after the server listens: requeued pods reach an extender that answers
        threading.Thread(target=Requeuer(pipeline, kube, scheduler_name).run,
                         args=(stop, ready), name="requeue", daemon=True).start()
    try:
        _serve_forever(server, stop)
    finally:  # what the writer still holds (else the controller's reconcile writes it)
        probes.stop()
        pipeline.close(5.0)


@cli.command("scheduler")
@_common
@_policy_options
@click.option("--port", type=click.IntRange(0, 65535), default=8889, show_default=True)
@click.option("--scheduler-name", default="tdmcore-scheduler", show_default=True,
              help="Schedule pods whose spec.schedulerName is this.")
@click.option("--leader-elect/--no-leader-elect", default=False, show_default=True)
@click.option("--lease-name", default="tdmcore-standalone-scheduler", show_default=True,
              help="Not kube-scheduler's Lease (tdmcore-scheduler in extender mode).")
@click.option("--lease-namespace", default="tdmcore-system", show_default=True)
@click.option("--queue", type=click.Choice(QUEUES), default="backoff", show_default=True,
              help="A gang that cannot be placed backs off while the ones behind it are "
                   "tried (as kube-scheduler with coscheduling), or blocks them (fifo).")
def scheduler_cmd(kubeconfig: str | None, api_server: str | None, host: str, log_level: str,
                  policy: str, default_link_gbps: float, port: int, scheduler_name: str,
                  leader_elect: bool, lease_name: str, lease_namespace: str,
                  queue: str) -> None:
    """Standalone secondary scheduler over the same pipeline (PodGroup gangs)."""
    from .leader import default_identity, start_election
    from .pipeline import Pipeline
    from .standalone import StandaloneScheduler

    kube = _setup(log_level, kubeconfig, api_server)
    model = ClusterModel(default_link_gbps=default_link_gbps)
    _, ready = start_informers(kube, model)
    pipeline = Pipeline(model, policy, kube)
    pipeline.warm_up()
    sched = StandaloneScheduler(pipeline, scheduler_name, ready=ready, queue=queue)
    election = start_election(kube, lease_name, lease_namespace,
                              default_identity()) if leader_elect else None
    leading = election.leading if election is not None else None
    stop = threading.Event()

    def may_run() -> bool:
        return ready() and (leading is None or leading.is_set())

    threading.Thread(target=sched.run, args=(stop, 0.5, may_run), name="scheduling",
                     daemon=True).start()
    try:
        _serve_forever(Server(sched.app, host, port), stop)
    finally:
        if election is not None:  # hand the Lease over at once
            election.stop()


@cli.command("controller")
@_common
@_probe_options(9890)
@_policy_options
@click.option("--port", type=click.IntRange(0, 65535), default=8890, show_default=True)
@click.option("--leader-elect/--no-leader-elect", default=False, show_default=True)
@click.option("--lease-name", default="tdmcore-controller", show_default=True)
@click.option("--lease-namespace", default="tdmcore-system", show_default=True)
@click.option("--resync-seconds", type=FiniteFloat(min=0.5), default=5.0,
              show_default=True)
@click.option("--elastic", type=click.Choice(list(ELASTIC_POLICIES)), default=None,
              envvar="TDMCORE_ELASTIC",
              help="Also run this elastic policy over annotated PyTorchJobs/TFJobs "
                   "[TDMCORE_ELASTIC] (the deploy/elastic component sets it).")
@click.option("--report-auth", type=click.Choice(["tokenreview", "none"]),
              default="tokenreview", show_default=True,
              help="Who may POST /v1/report: callers whose Bearer token the API server "
                   "authenticates (TokenReview) as a --report-user; none: anyone (only "
                   "where nothing else can reach the port).")
@click.option("--report-audience", default=AUDIENCE, show_default=True,
              help="The audience the reporters' tokens are issued for.")
@click.option("--report-user", "report_users", multiple=True, default=[AGENT_USER],
              show_default=True, help="A user allowed to report (repeat for more).")
def controller_cmd(kubeconfig: str | None, api_server: str | None, host: str, log_level: str,
                   probe_host: str, probe_port: int, policy: str,
                   default_link_gbps: float, port: int, leader_elect: bool,
                   lease_name: str, lease_namespace: str, resync_seconds: float,
                   elastic: str | None, report_auth: str, report_audience: str,
                   report_users: tuple[str, ...]) -> None:
    """The controller: offsets, recalculation, regulation (POST /v1/report)."""
    from .auth import ReportAuth
    from .elastic import ElasticController
    from .leader import default_identity, start_election
    from .reconciler import ControllerService, LeaderForwarder

    kube = _setup(log_level, kubeconfig, api_server)
    model = ClusterModel(default_link_gbps=default_link_gbps)
    _, ready = start_informers(kube, model)
    election = start_election(kube, lease_name, lease_namespace,
                              default_identity()) if leader_elect else None
    leading = election.leading if election is not None else None
    auth = ReportAuth(kube, report_users, report_audience) \
        if report_auth == "tokenreview" else None
    service = ControllerService(model, kube, policy, leader=leading, auth=auth)
    service.app.ready = ready
    if leader_elect:  # a standby relays reports to the leader, so every replica is Ready
        service.forward = LeaderForwarder(kube, lease_name, lease_namespace, port)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set() and not ready():
            stop.wait(0.2)
        service.run(stop, resync_seconds)

    threading.Thread(target=loop, name="reconcile", daemon=True).start()
    if elastic is not None:
        scaler = ElasticController(model, kube, elastic)
        for kind in ("PyTorchJob", "TFJob"):
            Informer(kube, kind, scaler.on_event).start()

        def scale() -> None:
            while not stop.is_set():
                if ready() and service.leading.is_set():
                    try:
                        scaler.step()
                    except Exception:  # the next sync retries
                        log.exception("elastic step failed")
                stop.wait(float(scaler.policy.sync_s))

        threading.Thread(target=scale, name="elastic", daemon=True).start()
    server = Server(service.app, host, port)
    probes = _probe_server(service.app, probe_host, probe_port)
    try:
        _serve_forever(server, stop)
    finally:
        probes.stop()
        if election is not None:  # hand the Lease over at once
            election.stop()


@cli.command("agent")
@click.option("--host", default="0.0.0.0", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=9471, show_default=True)
@click.option("--controller", envvar="TDMCORE_CONTROLLER_URL", default=None,
              help="The controller's URL [TDMCORE_CONTROLLER_URL] (none: answer every "
                   "report with no action).")
@click.option("--node", envvar="NODE_NAME", default="", help="This node's name [NODE_NAME].")
@click.option("--timeout", "timeout_s", type=FiniteFloat(min=0.0, min_open=True), default=0.5,
              show_default=True, help="Seconds to wait for the controller.")
@click.option("--token-file", envvar="TDMCORE_AGENT_TOKEN_FILE", default=None,
              help="The agent's ServiceAccount token, sent to the controller as a Bearer "
                   "token [TDMCORE_AGENT_TOKEN_FILE] (agent.yaml projects one, audience "
                   f"{AUDIENCE}).")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
def agent_cmd(host: str, port: int, controller: str | None, node: str, timeout_s: float,
              token_file: str | None, log_level: str) -> None:
    """The node agent: relays training pods' iteration reports to the controller."""
    from .agent import run_agent

    _configure_logging(log_level)
    run_agent(host, port, controller, node, timeout_s, token_file)


@cli.command("warm-cache")
@click.option("--dir", "folder", required=True,
              type=click.Path(file_okay=False, writable=True, path_type=Path),
              help="Where to write the compiled kernels (the Dockerfile's "
                   "/opt/tdmcore/numba-cache).")
def warm_cache_cmd(folder: Path) -> None:
    """Compile every kernel the servers use into a Numba cache (image build time)."""
    from .warm import build

    files, took = build(folder)
    click.echo(f"{files} compiled kernels in {folder} ({took:.0f} s)")


def main(argv: Sequence[str] | None = None) -> int:
    from .warm import seed

    seed()  # the image's warm kernel cache into the writable one, before any kernel runs
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="tdmcore-bridge",
                 standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `tdmcore-bridge`: the help
        click.echo(exc.ctx.get_help() if exc.ctx is not None else cli.get_help(
            click.Context(cli, info_name="tdmcore-bridge")))
        return 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("Error: interrupted", err=True)
        return EXIT_INTERRUPTED
    except click.UsageError as exc:  # one line, as `tdmcore` prints it
        hint = f" (see: {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        click.echo(f"Error: {exc.format_message()}{hint}", err=True)
        return exc.exit_code
    except click.ClickException as exc:
        click.echo(f"Error: {exc.format_message()}", err=True)
        return exc.exit_code
    except (ValueError, OSError, kubernetes.config.ConfigException) as exc:
        # a bad value only the command could check, a busy port, a bad kubeconfig:
        # one line, no traceback
        click.echo(f"Error: {exc}", err=True)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
