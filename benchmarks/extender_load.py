"""Load test of the extender on loopback: latency of filter / prioritize / bind.

A seeded cluster of ``--nodes`` 8-GPU nodes (25 Gbps links) lives in the HTTP-level
fake API server of the test suite; about 60 % of the nodes already run a training
pod (periods and duty cycles in the range of the Muri measurements, 5-20 Gbps).
Like kube-scheduler, the client runs one scheduling cycle at a time (filter, then
prioritize) and binds asynchronously.
The extender is the real console script (``tdmcore-bridge extender``) in its own
process, reading the fake API through its informers, as in a cluster.  New pods arrive at
``--rate`` / 3 per second and each goes through what kube-scheduler sends: filter
with all ``NodeNames`` (``nodeCacheCapable``), prioritize, bind to the best node.
Latency is measured per request, send to answer, by the client.
The nodes sit in two zones that a NetworkTopology gives different costs, so a zone
label that flips (``--churn``: real Node changes per second) changes the latencies
Metronome's score reads.

    python -m benchmarks.extender_load --nodes 1000 --rate 100 --seconds 30 --seed 0

    # issue #20's target: five consecutive 30 s runs with one Node change per second,
    # each beside a run of the rebuild path (``--node-updates rebuild``) as its peer
    python -m benchmarks.extender_load --churn 1 --runs 5 --peer
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from tests.k8s_bridge import k8s_objects as K
from tests.k8s_bridge.k8s_env import cluster

#: scheduler-plugins' NetworkTopology: a cost between the two zones, either way
ZONES: dict[str, Any] = {
    "apiVersion": "networktopology.diktyo.x-k8s.io/v1alpha1", "kind": "NetworkTopology",
    "metadata": {"name": "net", "namespace": "default"},
    "spec": {"configmapName": "netperf-metrics", "weights": [{"name": "UserDefined",
             "topologyList": [{"topologyKey": "topology.kubernetes.io/zone", "originList": [
                 {"origin": a, "costList": [{"destination": b, "networkCost": 5,
                                             "bandwidthCapacity": "10Gi"}]}
                 for a, b in (("z1", "z2"), ("z2", "z1"))]}]}]}}

#: (period ms, duty cycle) pairs in the range of the Muri measurements
PATTERNS = [(120.0, 0.30), (200.0, 0.25), (240.0, 0.40), (300.0, 0.20), (400.0, 0.35)]


def build(n_nodes: int, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(objects already in the API, pods that will arrive) for a seeded instance."""
    rng = np.random.default_rng(seed)
    objs: list[dict[str, Any]] = [K.node(f"node-{i:04d}", zone=f"z{1 + i % 2}")
                                  for i in range(n_nodes)]
    objs.append(ZONES)
    for k, (period, duty) in enumerate(PATTERNS):
        objs.append(K.podbandwidth(f"p{k}", period=period, duty=duty,
                                   gbps=float(5 * (1 + k % 4)),
                                   match={"tdmcore.io/pattern": f"p{k}"}))
    busy = rng.choice(n_nodes, size=int(0.6 * n_nodes), replace=False)
    for j, node in enumerate(busy):
        labels = {"training.kubeflow.org/job-name": f"run-{j}",
                  "tdmcore.io/pattern": f"p{rng.integers(len(PATTERNS))}",
                  "tdmcore.io/priority": "high" if rng.random() < 0.2 else "low"}
        objs.append(K.pod(f"run-{j}-0", labels=labels, gpu=int(rng.choice([2, 4])),
                          node=f"node-{node:04d}", phase="Running"))
    arriving = []
    for j in range(100_000):
        labels = {"training.kubeflow.org/job-name": f"new-{j}",
                  "tdmcore.io/pattern": f"p{rng.integers(len(PATTERNS))}"}
        arriving.append(K.pod(f"new-{j}-0", labels=labels, gpu=int(rng.choice([1, 2, 4]))))
        if len(arriving) >= 20_000:
            break
    return objs, arriving


def _post(url: str, body: Any) -> tuple[float, Any]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=30) as resp:
        answer = json.loads(resp.read())
    return time.perf_counter() - t, answer


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status)
    except OSError:
        return 0


def start_extender(api_url: str, timeout_s: float = 120.0, node_updates: str = "incremental"
                   ) -> tuple[subprocess.Popen[bytes], str]:
    """``tdmcore-bridge extender`` on a free loopback port, once it is ready."""
    port = _free_port()
    log = tempfile.TemporaryFile()  # a pipe nobody reads would fill up and block it
    proc = subprocess.Popen(
        [sys.executable, "-m", "k8s_bridge.cli", "extender", "--api-server", api_url,
         "--host", "127.0.0.1", "--port", str(port), "--probe-port", "0",
         "--log-level", "WARNING",
         "--node-updates", node_updates],
        stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while _get(url + "/readyz") != 200:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            log.seek(0)
            err = log.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"the extender did not become ready: {err}")
        time.sleep(0.1)
    return proc, url


def run_load(n_nodes: int = 1000, rate: float = 100.0, seconds: float = 5.0, seed: int = 0,
             churn_per_s: float = 0.0, node_updates: str = "incremental") -> dict[str, Any]:
    """Run the load; per-verb and overall latency percentiles in ms.

    ``churn_per_s``: real Node changes per second during the run (a zone label that
    the topology reads flips); ``node_updates``: how the extender applies them
    (``incremental``, or ``rebuild``: the whole cluster state, as before).  The
    result also holds the 1-minute load average of the machine before and after.
    """
    objs, arriving = build(n_nodes, seed)
    n_pods = max(1, int(rate * seconds / 3))
    names = sorted(n["metadata"]["name"] for n in objs if n["kind"] == "Node")
    load_before = os.getloadavg()[0]
    with cluster(objs + arriving[:n_pods]) as (fake, _, _, _):
        proc, url = start_extender(fake.url, node_updates=node_updates)
        try:
            # one untimed pod through every verb: the extender's caches are warm
            warm = arriving[n_pods]
            fake.create(warm)
            time.sleep(0.5)
            for verb in ("filter", "prioritize"):
                _post(f"{url}/{verb}", {"Pod": fake.get("v1", "Pod", warm["metadata"]["name"],
                                                        "default"), "NodeNames": names})
            stop = threading.Event()
            churner = threading.Thread(target=_churn, args=(fake, names, churn_per_s, stop),
                                       daemon=True)
            if churn_per_s > 0:
                churner.start()
            try:
                lat, errors, refused, elapsed = _drive(fake, url, names, arriving[:n_pods], rate)
            finally:
                stop.set()
        finally:
            proc.terminate()
            proc.wait(10)
    everything = np.array([x for v in lat.values() for x in v]) * 1e3
    out: dict[str, Any] = {
        "nodes": n_nodes, "seed": seed, "rate_per_s": rate, "churn_per_s": churn_per_s,
        "node_updates": node_updates,
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "seconds": round(elapsed, 2),
        "requests": int(everything.size), "errors": len(errors),
        "binds_refused": len(refused),
        "achieved_rate_per_s": round(everything.size / elapsed, 1),
    }
    for verb, values in list(lat.items()) + [("all", list(everything / 1e3))]:
        arr = np.asarray(values) * 1e3
        if arr.size:
            out[verb] = {q: round(float(np.percentile(arr, p)), 2)
                         for q, p in (("p50", 50), ("p95", 95), ("p99", 99))}
            out[verb]["max"] = round(float(arr.max()), 2)
    if errors:
        out["first_errors"] = errors[:3]
    return out


def _churn(fake: Any, names: list[str], per_s: float, stop: threading.Event) -> None:
    """Every 1 / per_s seconds, move a node to the other zone (a real change)."""
    k = 0
    while not stop.wait(1.0 / per_s):
        node = fake.get("v1", "Node", names[k % len(names)])
        labels = node["metadata"].setdefault("labels", {})
        labels["topology.kubernetes.io/zone"] = "z1" if labels.get(
            "topology.kubernetes.io/zone") != "z1" else "z2"
        fake.update(node)
        k += 1


def _drive(fake: Any, url: str, names: list[str], pods: list[dict[str, Any]], rate: float
           ) -> tuple[dict[str, list[float]], list[str], list[str], float]:
    """kube-scheduler's pattern: one scheduling cycle at a time (filter, then
    prioritize) for pods arriving at ``rate / 3`` per second, binds in parallel.

    A bind the extender refuses because the node no longer fits is a *refusal*,
    not an error: the extender learns a pod's node only at its bind, so a cycle
    that starts before an earlier pod's bind arrives can pick the same node, and
    kube-scheduler requeues the refused pod.  Refusals are counted apart.
    """
    lat: dict[str, list[float]] = {"filter": [], "prioritize": [], "bind": []}
    errors: list[str] = []
    refused: list[str] = []
    lock = threading.Lock()

    def bind(live: dict[str, Any], node: str) -> None:
        try:
            t3, bound = _post(url + "/bind", {
                "PodName": live["metadata"]["name"], "PodNamespace": "default",
                "PodUID": live["metadata"]["uid"], "Node": node})
        except Exception as exc:  # noqa: BLE001 - counted and reported
            with lock:
                errors.append(repr(exc))
            return
        with lock:
            lat["bind"].append(t3)
            if bound.get("Error"):
                message = bound["Error"]
                (refused if "no longer passes" in message else errors).append(message)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=16) as pool:
        for i, pod in enumerate(pods):
            delay = start + i * 3.0 / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            live = fake.get("v1", "Pod", pod["metadata"]["name"], "default")
            args = {"Pod": live, "NodeNames": names}
            try:
                t1, filtered = _post(url + "/filter", args)
                args["NodeNames"] = filtered["NodeNames"] or []
                t2, scores = _post(url + "/prioritize", args)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                errors.append(repr(exc))
                continue
            lat["filter"].append(t1)
            lat["prioritize"].append(t2)
            if scores:
                pool.submit(bind, live, max(scores, key=lambda h: h["Score"])["Host"])
    return lat, errors, refused, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--churn", type=float, default=0.0,
                        help="real Node changes per second during the run")
    parser.add_argument("--runs", type=int, default=1, help="consecutive runs")
    parser.add_argument("--node-updates", choices=["incremental", "rebuild"],
                        default="incremental", help="how the extender applies Node changes")
    parser.add_argument("--peer", action="store_true",
                        help="after each run, the same run with --node-updates rebuild")
    args = parser.parse_args(argv)
    modes = [args.node_updates] + (["rebuild"] if args.peer else [])
    table = []
    for run in range(args.runs):
        for mode in modes:
            result = run_load(args.nodes, args.rate, args.seconds, args.seed, args.churn, mode)
            print(json.dumps(result), flush=True)
            table.append((run, mode, result))
    if args.runs > 1 or args.peer:
        print(f"{'run':>3} {'node updates':>12} {'req/s':>6} {'errors':>6} {'p50 ms':>7} "
              f"{'p99 ms':>7} {'max ms':>7} {'load 1m':>11}")
        for run, mode, r in table:
            load = "-".join(f"{x:.1f}" for x in r["load_avg_1m"])
            print(f"{run:>3} {mode:>12} {r['achieved_rate_per_s']:>6} {r['errors']:>6} "
                  f"{r['all']['p50']:>7} {r['all']['p99']:>7} {r['all']['max']:>7} "
                  f"{load:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
