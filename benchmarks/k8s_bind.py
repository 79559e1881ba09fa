"""Time to bind pods on a real control plane: plain kube-scheduler vs. kube-scheduler with
the tdmcore extender, in the same run (a benchmark, not a test).

::

    KUBEBUILDER_ASSETS=... python -m benchmarks.k8s_bind --nodes 1000 --pods 200 --rounds 2

Starts etcd + kube-apiserver + two kube-schedulers from ``$KUBEBUILDER_ASSETS`` (see
``k8s_bridge/envtest.py``): one with the shipped configuration calling the extender
(profile ``tdmcore-scheduler``), one plain (profile ``plain-scheduler``, no extender,
the same client QPS). ``--nodes`` fake 8-GPU nodes; each round creates ``--pods`` 1-GPU
pods (jobs of 10 pods, each job with a PodBandwidth, so the extender plans links and
writes NodeBandwidth status) for each mode in turn, from 8 client threads, and times the
first create to the last pod bound (seen on a watch of the namespace's pods, not by
polling). The extender's own ``bind`` latency comes from its ``/metrics`` histogram, and
its peer, plain kube-scheduler's own binding (the Bind extension point: its
DefaultBinder's POST of pods/binding), from kube-scheduler's ``/metrics``, both in the
same round (bucket bounds: p50 / p99 are "at most" figures). Each round also records the
machine's 1-minute load average and the CPU time per pod of kube-scheduler (the one
serving the mode), kube-apiserver, etcd and the extender, from the first create to the
last pod bound, and the API server's requests per pod by verb and resource
(``apiserver_request_total``, everyone's). ``--apiserver-profile DIR`` also records
kube-apiserver's own CPU profile in each round and prints its CPU per pod by kind of
request (``benchmarks/apiserver_profile.py``).
Modes: ``plain``, ``extender``
(status written behind the bind, the default), ``extender-sync`` (``--sync-status``:
the write inside the bind, as before), ``extender-decides`` (``--decide-in-filter``:
Filter keeps only the policy's pick, kube-scheduler binds it unscored) and ``floor``
(a third kube-scheduler, profile ``floor-scheduler``, calling a do-nothing extender: a
standard-library HTTP server in this process whose Filter keeps one of the offered
nodes in turn, with no bind verb and no API client, so kube-scheduler binds.  It is
what any HTTP extender costs on this machine, the floor under the extender modes).
``--extender-args`` passes further flags to the extender in every extender mode (e.g.
``--status-max-delay-seconds 30`` keeps the status writes out of the timed rounds).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from benchmarks.apiserver_profile import by_request, read
from k8s_bridge.cache import ClusterModel
from k8s_bridge.envtest import ControlPlane, Proc, assets_dir, free_port, wait_until
from k8s_bridge.kube import RESOURCES, Kube
from k8s_bridge.pipeline import Pipeline
from tests.e2e.e2e_env import DEPLOY, PODGROUP_CRD, SCHEDULER, Component, Env, wait_known

PLAIN = "plain-scheduler"
FLOOR = "floor-scheduler"
#: The extender modes: the extender's own flags, and the extender entry of a
#: kube-scheduler of their own (named after the mode, with these settings too) or
#: None: the shipped configuration's kube-scheduler (profile tdmcore-scheduler).
EXTENDER_MODES: dict[str, tuple[list[str], dict[str, Any] | None, dict[str, Any]]] = {
    "extender": ([], None, {}),
    "extender-sync": (["--sync-status"], None, {}),
    "extender-bind": ([], {"bindVerb": "bind"}, {}),
    "extender-prioritize": (["--no-decide-in-filter"], {
        "prioritizeVerb": "prioritize", "bindVerb": "bind", "weight": 5}, {}),
    # every feasible node offered to the extender (kube-scheduler's default on 1,000
    # nodes: a rotating 42 % of them)
    "extender-all-nodes": ([], {}, {"percentageOfNodesToScore": 100}),
}
JOB = "training.kubeflow.org/job-name"
#: seconds after the last binding still counted in a round's CPU (the extender's
#: NodeBandwidth writes wait up to 1 s for a lull in the binds)
SETTLE_S = 2.0


class BoundWatch:
    """The moment the last of ``count`` pods of ``namespace`` is bound, from one watch
    stream opened before the first create.

    Polling a LIST every 50 ms would cost the API server and this process CPU in
    proportion to the round's length (on 2 cores, taken from the mode being timed) and
    would round each time up to the poll's interval; the watch costs one event per
    change and times the binding to the event."""

    def __init__(self, kube: Kube, namespace: str, count: int, timeout_s: float) -> None:
        self.count = count
        self.bound: dict[str, str] = {}
        self.at: float | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._stopped = False
        self._lock = threading.Lock()
        self._stream: Any = None
        listed = kube.list("Pod", namespace)
        for pod in listed["items"]:
            self._see(pod)
        rv = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, daemon=True, args=(
            kube, RESOURCES["Pod"].path(namespace), rv, timeout_s))
        self._thread.start()

    def _see(self, pod: dict[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            self.bound[pod["metadata"]["name"]] = node
        if len(self.bound) >= self.count and self.at is None:
            self.at = time.monotonic()
            self._done.set()

    def _opened(self, stream: Any) -> None:
        with self._lock:
            self._stream = stream
            stopped = self._stopped
        if stopped:  # stop() came before the stream opened
            Kube.abort_watch(stream)

    def _run(self, kube: Kube, path: str, rv: str, timeout_s: float) -> None:
        try:
            for event in kube.watch(path, {"resourceVersion": rv}, timeout_s,
                                    opened=self._opened):
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self._see(event["object"])
                if self._done.is_set():
                    break
        except BaseException as exc:  # noqa: BLE001 - reported by wait()
            if not self._done.is_set() and not self._stopped:
                self.error = exc
        finally:
            self._done.set()

    def wait(self, timeout_s: float) -> float:
        """The monotonic time the last pod was bound; TimeoutError if not by then."""
        finished = self._done.wait(timeout_s)
        self.stop()
        if self.at is not None:
            return self.at
        if not finished:
            raise TimeoutError(f"{len(self.bound)} of {self.count} pods bound "
                               f"after {timeout_s:g} s")
        if self.error is not None:
            raise RuntimeError(f"the watch of bound pods failed: {self.error}") from self.error
        raise RuntimeError(f"the watch ended with {len(self.bound)} of {self.count} "
                           "pods bound")

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            stream = self._stream
        Kube.abort_watch(stream)
        self._thread.join(5)


class FloorExtender:
    """The do-nothing extender of mode ``floor``: Filter keeps one of the offered nodes
    (the next in turn), Prioritize scores every node 0.  Loopback only; a daemon thread
    serves it until :meth:`stop`."""

    def __init__(self) -> None:
        turn = itertools.count()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            wbufsize = 1 << 16  # headers and body in one write (no delayed-ACK stall)

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the handler's required name
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                names = body.get("NodeNames") or []
                if self.path.endswith("/filter"):
                    keep = [names[next(turn) % len(names)]] if names else []
                    answer: Any = {"NodeNames": keep, "FailedNodes": {}, "Error": ""}
                else:
                    answer = [{"Host": name, "Score": 0} for name in names]
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_plain_scheduler(env: Env, name: str = PLAIN,
                          extender: dict[str, Any] | None = None,
                          settings: dict[str, Any] | None = None) -> Proc:
    """kube-scheduler with one profile, no leader election and no extender (or
    ``extender``, a KubeSchedulerConfiguration extender entry; ``settings``: more
    top-level settings)."""
    kubeconfig = env.kubeconfig(SCHEDULER)
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta3",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "profiles": [{"schedulerName": name}]}
    if extender is not None:
        config["extenders"] = [extender]
    config.update(settings or {})
    path = env.plane.dir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = Proc(name, [
        str(assets_dir(("kube-scheduler",)) / "kube-scheduler"), "--config", str(path),
        "--authentication-kubeconfig", str(kubeconfig),
        "--authorization-kubeconfig", str(kubeconfig), "--bind-address", "127.0.0.1",
        "--secure-port", str(free_port()),
        "--cert-dir", str(env.plane.dir / f"{name}-certs")], env.logs)
    return proc


def add_nodes(plane: ControlPlane, count: int) -> list[str]:
    names = [f"n{i:04d}" for i in range(count)]
    chunks = [names[i::8] for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda chunk: plane.add_nodes(chunk, gpu=8), chunks))
    return names


def bind_histogram(ext: Component) -> dict[float, float]:
    """Cumulative bucket counts of the extender's bind latency."""
    import urllib.request

    with urllib.request.urlopen(f"{ext.url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return _buckets(text, "tdmcore_extender_request_seconds_bucket", {"route": "bind"})


def binder_histogram(scheduler: Proc, plane: ControlPlane, profile: str = PLAIN
                     ) -> dict[float, float]:
    """Cumulative bucket counts of a kube-scheduler's own Bind extension point (its
    DefaultBinder's POST of pods/binding): the peer of the extender's bind."""
    import ssl
    import urllib.request

    port = scheduler.argv[scheduler.argv.index("--secure-port") + 1]
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate
    request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics", headers={
        "Authorization": f"Bearer {plane.ADMIN_TOKEN}"})

    def fetch() -> str | None:
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as resp:
                return str(resp.read().decode())
        except OSError:
            return None

    text = wait_until(fetch, 60, "plain kube-scheduler's /metrics")
    return _buckets(text, "scheduler_framework_extension_point_duration_seconds_bucket",
                    {"extension_point": "Bind", "profile": profile})


def _buckets(text: str, name: str, labels: dict[str, str]) -> dict[float, float]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v
                                           for k, v in labels.items()):
                le = float(sample.labels["le"])
                out[le] = out.get(le, 0.0) + sample.value
    return out


def quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The smallest bucket bound holding the ``q`` quantile of the binds in between."""
    bounds = sorted(after)
    if not bounds:  # nothing observed (e.g. no bind verb: kube-scheduler binds)
        return float("nan")
    total = after[bounds[-1]] - before.get(bounds[-1], 0.0)
    if total <= 0:
        return float("nan")
    for le in bounds:
        if after[le] - before.get(le, 0.0) >= q * total:
            return le
    return float("inf")


def admin_get(plane: ControlPlane, path: str, timeout_s: float) -> bytes:
    """GET ``path`` of the envtest kube-apiserver with the admin token."""
    import ssl
    import urllib.request

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the envtest serving certificate
    request = urllib.request.Request(f"{plane.url}{path}", headers={
        "Authorization": f"Bearer {plane.ADMIN_TOKEN}"})
    with urllib.request.urlopen(request, context=context, timeout=timeout_s) as resp:
        data: bytes = resp.read()
    return data


class ApiserverProfile:
    """kube-apiserver's CPU profile over the ``seconds`` from now, written to ``out``
    (a thread waits for it; :meth:`join` before the next round's work)."""

    def __init__(self, plane: ControlPlane, seconds: int, out: Path) -> None:
        self.error: BaseException | None = None

        def fetch() -> None:
            try:
                out.write_bytes(admin_get(
                    plane, f"/debug/pprof/profile?seconds={seconds}", seconds + 30))
            except BaseException as exc:  # noqa: BLE001 - reported by join()
                self.error = exc

        self._thread = threading.Thread(target=fetch, daemon=True)
        self._thread.start()

    def join(self) -> None:
        self._thread.join()
        if self.error is not None:
            raise RuntimeError(f"kube-apiserver's profile failed: {self.error}") \
                from self.error


def api_requests(plane: ControlPlane) -> dict[str, float]:
    """kube-apiserver's request counts so far, by ``VERB resource[/subresource]``
    (``apiserver_request_total``; watches counted when they open)."""
    text = admin_get(plane, "/metrics", 10).decode()
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != "apiserver_request_total":
                continue
            labels = sample.labels
            key = f"{labels.get('verb')} {labels.get('resource')}"
            if labels.get("subresource"):
                key += f"/{labels['subresource']}"
            out[key] = out.get(key, 0.0) + sample.value
    return out


def thread_cpu_s(pid: int) -> dict[int, float]:
    """CPU seconds each thread of process ``pid`` has used so far, by thread id."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def thread_names(py_spy_raw: Path) -> dict[int, str]:
    """Thread id -> Python thread name, from py-spy's collapsed stacks (``thread (TID):
    NAME;...``); a worker's number is dropped (``waitress-3`` -> ``waitress-N``)."""
    import re

    names: dict[int, str] = {}
    for line in py_spy_raw.read_text().splitlines():
        hit = re.match(r"thread \((\d+)\): ([^;]*)", line)
        if hit:
            names[int(hit.group(1))] = re.sub(r"-\d+$", "-N", hit.group(2).strip())
    return names


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_round(env: Env, mode: str, pods: int, round_no: int,
              ext: Component | None, sched: tuple[str, Proc],
              profile: tuple[Path, int] | None = None,
              py_spy: tuple[Path, int] | None = None) -> dict[str, Any]:
    """One round of ``mode``: pods for the kube-scheduler ``sched`` (its profile's
    name and process), calling ``ext`` (the extender modes) or not.  With ``profile``
    (a folder and a number of seconds) kube-apiserver's CPU profile over that many
    seconds from the start of the clock is written there, ``MODE-ROUND.pb.gz``; the
    round's clean-up waits for it.  With ``py_spy`` (a folder and a number of seconds)
    the extender's Python stacks are sampled by py-spy over that many seconds from the
    start of the clock, as collapsed stacks in ``MODE-ROUND.txt`` (extender modes).

    **[decision]** The pods exist before the clock starts: the mode's kube-scheduler is
    paused (SIGSTOP) while they are created and resumed (SIGCONT) as the clock starts,
    so every mode is timed on the same waiting pods, and the creates (and their
    client's CPU) are outside the timed window.  CPU per pod is counted twice: over
    the timed window, and over the whole round (the creates, the binds and
    :data:`SETTLE_S` after the last one, when the writes behind the binds land)."""
    ns = env.namespace(f"bench-{mode}-{round_no}")
    scheduler, proc = sched
    jobs = max(1, pods // 10)
    for j in range(jobs):
        env.podbandwidth(ns, f"j{j}", period=100.0 + 50 * (j % 3), duty=0.3, gbps=5,
                         match={JOB: f"j{j}"})
    if ext is not None:  # the extender has seen the PodBandwidths before its pods
        time.sleep(0.5)
    before = bind_histogram(ext) if ext is not None else {}
    binder_before = binder_histogram(proc, env.plane, scheduler)
    load = os.getloadavg()[0]
    rebuilds = ext.metric("tdmcore_model_rebuilds_total") if ext is not None else 0.0
    decisions = ext.metric("tdmcore_pipeline_decisions_total") if ext is not None else 0.0
    names = [f"p{i:04d}" for i in range(pods)]
    assert env.plane.apiserver is not None and env.plane.etcd is not None
    procs = {"kube-scheduler": proc.pid,
             "kube-apiserver": env.plane.apiserver.pid, "etcd": env.plane.etcd.pid}
    if ext is not None and ext.proc is not None:
        procs["extender"] = ext.proc.pid
    cpu_start = {name: cpu_s(pid) for name, pid in procs.items()}

    def create(name: str) -> None:
        env.pod(ns, name, gpu=1, labels={JOB: f"j{int(name[1:]) % jobs}"}, scheduler=scheduler)

    watch = BoundWatch(env.kube, ns, pods, 300)
    paused = procs["kube-scheduler"]
    os.kill(paused, signal.SIGSTOP)
    try:
        t_create = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, names))
        created = time.monotonic() - t_create
        time.sleep(0.5)  # the creates' watch events reach the extender
    finally:
        requests_before = api_requests(env.plane)
        cpu_before = {name: cpu_s(pid) for name, pid in procs.items()}
        threads_before = thread_cpu_s(procs["extender"]) if "extender" in procs else {}
        profiler = None if profile is None else ApiserverProfile(
            env.plane, profile[1], profile[0] / f"{mode}-{round_no}.pb.gz")
        spy = None
        if py_spy is not None and "extender" in procs:
            spy = subprocess.Popen(
                ["py-spy", "record", "--pid", str(procs["extender"]), "--format", "raw",
                 "--rate", "200", "--duration", str(py_spy[1]), "--nonblocking",
                 "--threads", "--output", str(py_spy[0] / f"{mode}-{round_no}.txt")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # attached before the clock starts
        t0 = time.monotonic()
        os.kill(paused, signal.SIGCONT)
    try:
        took = watch.wait(300) - t0
    finally:
        watch.stop()
    cpu_bound = {name: cpu_s(pid) for name, pid in procs.items()}
    threads_after = thread_cpu_s(procs["extender"]) if "extender" in procs else {}
    requests_after = api_requests(env.plane)
    time.sleep(SETTLE_S)
    cpu_end = {name: cpu_s(pid) for name, pid in procs.items()}
    cpu_ms = {name: round((cpu_bound[name] - cpu_before[name]) * 1e3 / pods, 2)
              for name in procs}
    cpu_round = {name: round((cpu_end[name] - cpu_start[name]) * 1e3 / pods, 2)
                 for name in procs}
    api_per_pod = {key: round((n - requests_before.get(key, 0.0)) / pods, 2)
                   for key, n in sorted(requests_after.items())
                   if n - requests_before.get(key, 0.0) > 0}
    result: dict[str, Any] = {"mode": mode, "round": round_no, "pods": pods,
                              "create_s": round(created, 2), "bind_all_s": round(took, 2),
                              "load_avg_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
                              "cpu_ms_per_pod": cpu_ms,
                              "cpu_ms_per_pod_round": cpu_round,
                              "control_plane_cpu_ms_per_pod": round(sum(cpu_round.values()), 2),
                              "api_requests_per_pod": api_per_pod}
    # kube-scheduler's own binder (its Bind extension point) binds unless the extender
    # has a bind verb; both histograms are read (the one not binding stays empty)
    binder_after = binder_histogram(proc, env.plane, scheduler)
    result["binder_p50_le_s"] = quantile(binder_before, binder_after, 0.50)
    result["binder_p99_le_s"] = quantile(binder_before, binder_after, 0.99)
    if ext is not None:
        after = bind_histogram(ext)
        result["bind_p50_le_s"] = quantile(before, after, 0.50)
        result["bind_p99_le_s"] = quantile(before, after, 0.99)
        result["model_rebuilds"] = ext.metric("tdmcore_model_rebuilds_total") - rebuilds
        result["decisions_per_pod"] = round(
            (ext.metric("tdmcore_pipeline_decisions_total") - decisions) / pods, 2)
    if spy is not None and py_spy is not None:
        spy.wait(py_spy[1] + 30)
        # the extender's CPU in the timed window by thread (names from py-spy's stacks)
        names = thread_names(py_spy[0] / f"{mode}-{round_no}.txt")
        by_name: dict[str, float] = {}
        for tid, used in threads_after.items():
            name = names.get(tid, "(no Python frame sampled)")
            by_name[name] = by_name.get(name, 0.0) + used - threads_before.get(tid, 0.0)
        result["extender_threads_cpu_ms_per_pod"] = {
            k: round(v * 1e3 / pods, 3) for k, v in sorted(by_name.items(),
                                                            key=lambda kv: -kv[1])}
    if profiler is not None:
        profiler.join()
        assert profile is not None
        result["apiserver_profile"] = str(profile[0] / f"{mode}-{round_no}.pb.gz")
        result["profile_covers_round"] = took <= profile[1]
        if took > profile[1]:
            print(f"warning: round {round_no} of {mode} took {took:.2f} s, longer than "
                  f"its {profile[1]} s profile (--profile-seconds): its profile misses "
                  "the end", file=sys.stderr, flush=True)
    env.clean(ns, [])
    return result


def summarize(results: list[dict[str, Any]], modes: list[str]) -> dict[str, Any]:
    """Per mode, the median over rounds of the time to bind and of the control plane's
    CPU per pod (kube-scheduler + kube-apiserver + etcd + the extender, the whole
    round), each beside plain kube-scheduler's median in the same run; and a Markdown
    table of them (``text``)."""
    rows: list[dict[str, Any]] = []
    median: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for m in modes:
        mine = [x for x in results if x["mode"] == m]
        median[m] = statistics.median(x["bind_all_s"] for x in mine)
        cpu[m] = statistics.median(x["control_plane_cpu_ms_per_pod"] for x in mine)
    lines = ["| mode | time to bind (rounds) | median | x plain | control-plane CPU ms "
             "per pod (median) | x plain | load average |",
             "|---|---|---:|---:|---:|---:|---|"]
    for m in modes:
        mine = [x for x in results if x["mode"] == m]
        ratio = median[m] / median["plain"] if "plain" in median else float("nan")
        cpu_ratio = cpu[m] / cpu["plain"] if "plain" in cpu else float("nan")
        loads = [v for x in mine for v in x["load_avg_1m"]]
        rows.append({"mode": m, "rounds_s": [x["bind_all_s"] for x in mine],
                     "median_s": median[m], "x_plain": round(ratio, 2),
                     "cpu_ms_per_pod": cpu[m], "cpu_x_plain": round(cpu_ratio, 2),
                     "load_avg_1m": [min(loads), max(loads)]})
        lines.append(f"| {m} | {', '.join(f'{x:.2f}' for x in rows[-1]['rounds_s'])} s "
                     f"| {median[m]:.2f} s | {ratio:.2f} | {cpu[m]:.1f} | {cpu_ratio:.2f} "
                     f"| {min(loads):.1f}-{max(loads):.1f} |")
    return {"median": median, "rows": rows, "text": "\n".join(lines)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", default="plain,extender,extender-prioritize")
    parser.add_argument("--extender-args", default="",
                        help="Extra flags for the extender in every extender mode "
                             "(one string, split on spaces), e.g. "
                             "'--status-max-delay-seconds 2'.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the results here.")
    parser.add_argument("--apiserver-profile", type=Path, default=None, metavar="DIR",
                        help="Profile kube-apiserver in each round (its Go CPU profile "
                             "over --profile-seconds from the first create, into DIR) "
                             "and print its CPU per pod by kind of request, per mode.")
    parser.add_argument("--profile-seconds", type=int, default=3,
                        help="The length of each round's profile from the first "
                             "create (default 3 s, the same window for every mode: "
                             "200 pods bind in 1-3 s here, and the status writes "
                             "after the burst fall in it). A round longer than that "
                             "is reported on stderr and in the JSON "
                             "(profile_covers_round).")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="Sample the extender's Python stacks with py-spy over "
                             "--profile-seconds from the start of each extender round "
                             "(collapsed stacks, DIR/MODE-ROUND.txt).")
    parser.add_argument("--keep", type=Path, default=None,
                        help="Keep certificates, data and logs in this (empty) folder.")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    ext_args = args.extender_args.split()
    if args.profile_seconds < 1:
        parser.error("--profile-seconds: must be at least 1")
    profile = None
    if args.apiserver_profile is not None:
        args.apiserver_profile.mkdir(parents=True, exist_ok=True)
        profile = (args.apiserver_profile, args.profile_seconds)
    spy = None
    if args.py_spy is not None:
        args.py_spy.mkdir(parents=True, exist_ok=True)
        spy = (args.py_spy, args.profile_seconds)
    profiling = profile is not None
    plane = ControlPlane(args.keep, keep=True, profiling=profiling) if args.keep \
        else ControlPlane(profiling=profiling)
    plane.start()
    env: Env | None = None
    try:
        plane.apply_files([DEPLOY / "namespace.yaml", DEPLOY / "crds" / "nodebandwidths.yaml",
                           DEPLOY / "crds" / "podbandwidths.yaml", DEPLOY / "rbac.yaml"])
        plane.apply([PODGROUP_CRD])
        plane.wait_established([PODGROUP_CRD["metadata"]["name"]])
        Pipeline(ClusterModel(), "metronome").warm_up()
        env = Env(plane)
        t0 = time.monotonic()
        nodes = add_nodes(plane, args.nodes)
        print(f"{len(nodes)} nodes in {time.monotonic() - t0:.1f} s", flush=True)
        ext = env.component("extender", ["extender", "--scheduler-name", SCHEDULER,
                                         *ext_args], SCHEDULER).start()
        env.extender = ext
        shipped = env.start_kube_scheduler(ext.url)
        plain = start_plain_scheduler(env)
        scheds: dict[str, tuple[str, Proc]] = {"plain": (PLAIN, plain)}
        nothing = None
        if "floor" in modes:
            nothing = FloorExtender()
            scheds["floor"] = FLOOR, start_plain_scheduler(env, FLOOR, {
                "urlPrefix": nothing.url, "filterVerb": "filter",
                "prioritizeVerb": "prioritize", "weight": 1, "enableHTTPS": False,
                "httpTimeout": "5s", "nodeCacheCapable": True, "ignorable": False})
        for mode in modes:
            if mode not in scheds and mode not in EXTENDER_MODES:
                parser.error(f"--modes: unknown mode {mode!r}")
            if mode in EXTENDER_MODES:
                _, entry, settings = EXTENDER_MODES[mode]
                scheds[mode] = (SCHEDULER, shipped) if entry is None else (
                    f"{mode}-scheduler", start_plain_scheduler(env, f"{mode}-scheduler", {
                        "urlPrefix": ext.url, "filterVerb": "filter", "enableHTTPS": False,
                        "httpTimeout": "5s", "nodeCacheCapable": True, "ignorable": False,
                        **entry}, settings))
        wait_known(ext, nodes, 120)
        results = []
        current = ("extender", SCHEDULER)
        for r in range(args.rounds):
            for mode in modes:
                if mode in EXTENDER_MODES and (mode, scheds[mode][0]) != current:
                    ext.stop()
                    ext = env.component("extender", [
                        "extender", "--scheduler-name", scheds[mode][0],
                        *EXTENDER_MODES[mode][0], *ext_args], SCHEDULER,
                        port=ext.port).start()
                    wait_known(ext, nodes, 120)
                    current = (mode, scheds[mode][0])
                res = run_round(env, mode, args.pods, r,
                                ext if mode in EXTENDER_MODES else None, scheds[mode],
                                profile, spy)
                results.append(res)
                print(json.dumps(res), flush=True)
        wait_until(plain.alive, 1, "the plain kube-scheduler still running")
        table = summarize(results, modes)
        print(table["text"], flush=True)
        best = table["median"]
        summary: dict[str, dict[str, float]] = {}
        if profile is not None:
            for m in modes:
                shares = by_request([read(Path(x["apiserver_profile"])) for x in results
                                     if x["mode"] == m], args.pods)
                summary[m] = {k: round(v, 3) for k, v in shares.items()}
            kinds = list(dict.fromkeys(k for m in modes for k in summary[m]))
            print("kube-apiserver CPU ms per pod by kind (its profile, mean of rounds):")
            print(f"{'':22s}" + "".join(f"{m:>18s}" for m in modes))
            for k in kinds:
                print(f"{k:22s}" + "".join(f"{summary[m].get(k, 0.0):18.2f}" for m in modes))
        if args.json is not None:
            args.json.write_text(json.dumps({"results": results, "median": best,
                                             "table": table["rows"],
                                             "apiserver_cpu_ms_per_pod": summary}, indent=1))
        for name, (_, proc) in scheds.items():
            if name != "extender" and proc is not shipped:
                proc.stop()
        if nothing is not None:
            nothing.stop()
    finally:
        if env is not None:
            env.stop()
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
