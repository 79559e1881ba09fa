"""The controller over an HTTP-level fake API server: offsets written into
NodeBandwidth status, idempotence, restarts, conflicts, reports, leader election."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from k8s_bridge.api import POD_AUTHORIZATION, ReportError, validate_report
from k8s_bridge.auth import AGENT_USER, ReportAuth
from k8s_bridge.kube import ApiError, Kube
from k8s_bridge.leader import start_election
from k8s_bridge.reconciler import ControllerService
from k8s_bridge.web import HttpError, Server
from tests.k8s_bridge import k8s_objects as K
from tests.k8s_bridge.k8s_env import cluster, synced_to, wait_for

NBW = "tdmcore.io/v1alpha1"


def objects() -> list[dict[str, Any]]:
    """a (high) spans n0 and n1; c shares n0 with it, b shares n1 (all low).

    Every job: 100 ms period, duty 0.5, 20 Gbps on 25 Gbps links: on each link the
    second job must sit half a period after a (no two comm phases fit together).
    """
    out: list[dict[str, Any]] = [K.node(n) for n in ("n0", "n1", "n2")]
    for job in ("a", "b", "c"):
        out.append(K.podbandwidth(job, period=100, duty=0.5, gbps=20,
                                  match={"training.kubeflow.org/job-name": job}))
    out += [
        K.pod("a-0", labels=K.job_labels("a", "high"), node="n0", phase="Running",
              created="2026-11-20T00:00:00Z"),
        K.pod("a-1", labels=K.job_labels("a", "high"), node="n1", phase="Running",
              created="2026-11-20T00:00:01Z"),
        K.pod("b-0", labels=K.job_labels("b"), node="n1", phase="Running",
              created="2026-11-20T00:00:02Z"),
        K.pod("c-0", labels=K.job_labels("c"), node="n0", phase="Running",
              created="2026-11-20T00:00:03Z"),
    ]
    return out


def shifts(fake) -> dict[str, float]:
    out = {}
    for nbw in fake.list(NBW, "NodeBandwidth"):
        for e in (nbw.get("status") or {}).get("pods", []):
            out[e["name"]] = e["shiftMs"]
    return out


def test_reconcile_writes_offsets_then_nothing():
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        # NodeBandwidth n0 and n1 (n2 is empty), and matchedPods of the 3 PodBandwidths
        assert service.reconcile() == 5
        matched = {p["metadata"]["name"]: p["status"]["matchedPods"]
                   for p in fake.list(NBW, "PodBandwidth", "default")}
        assert matched == {"a": 2, "b": 1, "c": 1}
        got = shifts(fake)
        assert got["a-0"] == got["a-1"] == 0.0  # the reference job
        assert got["b-0"] == pytest.approx(50.0)
        assert got["c-0"] == pytest.approx(50.0)
        n1 = fake.get(NBW, "NodeBandwidth", "n1")["status"]
        assert n1["basePeriodMs"] == pytest.approx(100.0)
        assert {e["name"]: e["rotation"] for e in n1["pods"]} == {"a-1": 0, "b-0": 36}
        assert service.reconcile() == 0  # idempotent
        synced_to(fake, informers)
        assert service.reconcile() == 0  # the watch echo changes nothing either


def test_restart_rebuilds_from_the_api():
    with cluster(objects()) as (fake, kube, model, informers):
        first = ControllerService(model, kube, "metronome")
        first.reconcile()
        before = shifts(fake)
        # a new process: fresh model and informers over the same API
        from k8s_bridge.cache import ClusterModel
        from k8s_bridge.cli import start_informers
        model2 = ClusterModel()
        infs, ready = start_informers(Kube.connect(host=fake.url), model2, watch_timeout_s=5)
        try:
            wait_for(ready, what="second model synced")
            second = ControllerService(model2, Kube.connect(host=fake.url), "metronome")
            assert second.reconcile() == 0
            assert shifts(fake) == before
            assert second.current().offsets_ms == first.current().offsets_ms
        finally:
            for i in infs:
                i.stop()


def test_recalculate_flag_selects_the_plan_mode():
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        # no Reserve recorded these links: both planned by the offline recalculation
        # (as the simulator's controller plans a contended link it has no plan for)
        assert service.current().recalculations == 2
        assert fake.get(NBW, "NodeBandwidth", "n1")["status"]["recalculate"] is True
        # a Reserve that skipped phase three (recalculate: false) for the same pods
        n1 = fake.get(NBW, "NodeBandwidth", "n1")
        fake.update({**n1, "status": {**n1["status"], "recalculate": False}})
        synced_to(fake, informers)
        # n0's plan is reused (same pods, mode, capacity); n1 is replanned 'first'
        assert service.current().recalculations == 0
        # a pod leaves n1: the link changed since it was recorded -> optimal again
        fake.delete("v1", "Pod", "b-0", "default")
        fake.create(K.pod("d-0", labels=K.job_labels("b"), node="n1", phase="Running"))
        synced_to(fake, informers)
        assert service.current().recalculations == 1
        ablation = ControllerService(model, kube, "metronome-no-phase3")
        assert ablation.current().recalculations == 0


def test_conflicts_and_errors_are_retried_next_pass():
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        fake.fail_next("POST", r"nodebandwidths", status=409, count=1)
        fake.fail_next("PATCH", r"nodebandwidths", status=500, count=1)
        first = service.reconcile()
        assert first < 5  # 2 NodeBandwidths + 3 PodBandwidths
        assert service.reconcile() == 5 - first
        assert service.reconcile() == 0
        assert shifts(fake)["b-0"] == pytest.approx(50.0)


def test_removed_pod_leaves_the_status():
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        fake.delete("v1", "Pod", "b-0", "default")
        synced_to(fake, informers)
        wait_for(lambda: "default/b-0" not in model.objects["Pod"])
        assert service.reconcile() == 2  # n1's status, b's matchedPods
        assert "b-0" not in shifts(fake)


def post(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def iterations(n: int, period: float, start: float = 1_000_000.0) -> list[dict[str, float]]:
    return [{"start_ms": start + i * period, "duration_ms": period, "comm_ms": period / 2}
            for i in range(n)]


def test_reports_pause_a_slow_low_priority_pod_only():
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        server = Server(service.app).start()
        try:
            url = server.url + "/v1/report"
            # the reference a-1 reports on schedule: its starts anchor the phases
            status, ans = post(url, {"namespace": "default", "pod": "a-1",
                                     "iterations": iterations(10, 100.0)})
            assert status == 200 and ans["pause_ms"] == 0.0 and ans["shift_ms"] == 0.0
            # b-0 is slowed down (130 ms > 1.1 x 100): 6 of 10 slow -> pause
            slow = [{"start_ms": 1_000_020.0 + i * 130, "duration_ms": 130.0}
                    for i in range(10)]
            status, ans = post(url, {"namespace": "default", "pod": "b-0",
                                     "iterations": slow})
            assert status == 200
            assert 0 < ans["pause_ms"] < 100
            assert ans["period_ms"] == 100.0 and ans["shift_ms"] == pytest.approx(50.0)
            # its next start = end of the last iteration + pause == a's phase + 50 ms
            end = slow[-1]["start_ms"] + slow[-1]["duration_ms"]
            assert (end + ans["pause_ms"] - (1_000_000.0 + 50.0)) % 100.0 == pytest.approx(0.0)
            assert (end + ans["pause_ms"]) % 100.0 == pytest.approx(ans["target_phase_ms"])
            # its length is observed in seconds (Prometheus' base unit)
            assert service.app.registry.get_sample_value(
                "tdmcore_controller_pause_seconds_sum") == pytest.approx(ans["pause_ms"] / 1e3)
            # a high-priority pod is never paused, however slow
            status, ans = post(url, {"namespace": "default", "pod": "a-0", "iterations": [
                {"start_ms": 1_002_000.0 + i * 150, "duration_ms": 150.0} for i in range(10)]})
            assert status == 200 and ans["pause_ms"] == 0.0
            status, ans = post(url, {"namespace": "default", "pod": "ghost",
                                     "iterations": iterations(1, 100.0)})
            assert status == 404 and "ghost" in ans["Error"]
        finally:
            server.stop()


@pytest.mark.parametrize(("body", "needle"), [
    ({"pod": "b-0", "iterations": [{"start_ms": 0, "duration_ms": 1}]}, "namespace"),
    ({"namespace": "default", "pod": "b-0", "iterations": []}, "iterations"),
    ({"namespace": "default", "pod": "b-0", "iterations": [{"start_ms": 0}]}, "duration_ms"),
    ({"namespace": "default", "pod": "b-0",
      "iterations": [{"start_ms": 0, "duration_ms": -1}]}, "duration_ms"),
    ({"namespace": "default", "pod": "b-0",
      "iterations": [{"start_ms": "0", "duration_ms": 1}]}, "start_ms"),
    ({"namespace": "default", "pod": "b-0",
      "iterations": [{"start_ms": 0, "duration_ms": 1, "comm_ms": 2}]}, "comm_ms"),
    ({"namespace": "default", "pod": "b-0",
      "iterations": [{"start_ms": 0, "duration_ms": 1}] * 1025}, "iterations"),
    ([], "body"),
])
def test_bad_reports(body, needle):
    """The one report check (k8s_bridge.api), which the controller answers 400."""
    with pytest.raises(ReportError) as exc:
        validate_report(body)
    assert needle in exc.value.field


def test_bad_report_over_http_changes_nothing():
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        ctrl = service.current()
        server = Server(service.app).start()
        try:
            status, ans = post(server.url + "/v1/report", {"namespace": "default", "pod": "b-0",
                                                           "iterations": [{"start_ms": 1}]})
            assert status == 400 and "duration_ms" in ans["Error"]
            assert ctrl.monitor.watches == {} and service.current() is ctrl
        finally:
            server.stop()


def test_pattern_update_is_written_to_the_podbandwidth():
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        # a's pods now compute for 100 ms instead of 50 (comm still 50 ms): every 150 ms,
        # steadily, a changed pattern (own part 100 ms, 50 % above its 50 ms baseline)
        report = [{"start_ms": 1_000_000.0 + i * 150, "duration_ms": 150.0, "comm_ms": 50.0}
                  for i in range(10)]
        service.report("default/a-1", [r["start_ms"] for r in report],
                       [r["duration_ms"] for r in report], [r["comm_ms"] for r in report])
        pbw = fake.get(NBW, "PodBandwidth", "a", "default")
        # re-measured: own part 100 + the declared 50 ms of all-reduce -> 150 ms, duty 1/3
        assert pbw["status"]["observedPeriodMs"] == pytest.approx(150.0)
        assert pbw["status"]["observedDutyCycle"] == pytest.approx(50.0 / 150.0)
        synced_to(fake, informers)
        # every reader now sees the new pattern (status overrides spec)
        assert model.state().placed["default/a-0"].pod.pattern.period_ms == pytest.approx(150.0)


class Reviews:
    """TokenReview answers: ``agent`` is the agent's token (bound to no pod),
    ``pod:<namespace>/<name>@<uid>`` a training pod's own (its namespace's ``default``
    ServiceAccount)."""

    def with_timeout(self, timeout_s: float) -> Reviews:
        return self

    def create(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        token = obj["spec"]["token"]
        user: dict[str, Any] = {"username": AGENT_USER}
        if token.startswith("pod:"):
            pod, _, uid = token[4:].partition("@")
            namespace, _, name = pod.partition("/")
            user = {"username": f"system:serviceaccount:{namespace}:default", "extra": {
                "authentication.kubernetes.io/pod-name": [name],
                "authentication.kubernetes.io/pod-uid": [uid]}}
        elif token != "agent":
            return {"status": {"authenticated": False, "error": "invalid bearer token"}}
        return {"status": {"authenticated": True, "audiences": ["tdmcore-controller"],
                           "user": user}}


@contextlib.contextmanager
def checking_controller() -> Iterator[tuple[Any, ControllerService, Server]]:
    """A controller over the fake API that checks reporters' tokens with
    :class:`Reviews`, serving on loopback: (the fake, the service, its server)."""
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome",
                                    auth=ReportAuth(Reviews()))  # type: ignore[arg-type]
        service.reconcile()
        server = Server(service.app).start()
        try:
            yield fake, service, server
        finally:
            server.stop()


def test_a_report_is_taken_only_with_the_reporting_pods_own_token():
    """Issue 40's review: the agent relays whatever reaches its hostPort, so with the
    agent's token alone any pod of a GPU node rewrote a neighbour's pattern through it.
    The controller takes a report only with the pod's own token beside the agent's:
    none is 401, a neighbour's, or one of an earlier pod of that name, 403, and neither
    changes the PodBandwidth; the pod's own is taken and its Event names it."""
    body = {"namespace": "default", "pod": "a-1",
            "iterations": [{"start_ms": 1_000_000.0 + i * 150, "duration_ms": 150.0,
                            "comm_ms": 50.0} for i in range(10)]}
    agent = {"Authorization": "Bearer agent"}
    with checking_controller() as (fake, service, server):
        for pod_token, code in ((None, 401), ("pod:default/b-0@uid-b", 403),
                                ("pod:default/a-1@uid-earlier", 403),
                                ("forged", 401)):
            headers = dict(agent) if pod_token is None else {
                **agent, POD_AUTHORIZATION: f"Bearer {pod_token}"}
            status, answer = post(server.url + "/v1/report", body, headers)
            assert status == code, (pod_token, answer)
            assert "observedPeriodMs" not in (fake.get(
                NBW, "PodBandwidth", "a", "default").get("status") or {})
        uid = fake.get("v1", "Pod", "a-1", "default")["metadata"]["uid"]
        status, answer = post(server.url + "/v1/report", body,
                              {**agent, POD_AUTHORIZATION: f"Bearer pod:default/a-1@{uid}"})
        assert status == 200, answer
        pbw = fake.get(NBW, "PodBandwidth", "a", "default")
        assert pbw["status"]["observedPeriodMs"] == pytest.approx(150.0)
        assert service.events is not None and service.events.flush(10.0)
        (said, *_) = [e for e in fake.list("v1", "Event", "default")
                      if e["reason"] == "PatternUpdated"]
        assert "by pod default/a-1 (system:serviceaccount:default:default) through the " \
               f"agent {AGENT_USER}" in said["message"]


def test_a_refusal_is_logged_once_per_source_and_reason(caplog):
    """One agent relays the reports of every pod of its node: two pods whose hooks send
    no token, reporting in turn, are two refusals logged once each (keyed by the source
    alone, each alternation was a new reason, and every report was logged)."""
    agent = {"Authorization": "Bearer agent"}
    with checking_controller() as (fake, service, server):
        with caplog.at_level(logging.WARNING, logger="k8s_bridge.reconciler"):
            for _ in range(3):
                for pod in ("a-1", "b-0"):
                    status, _ = post(server.url + "/v1/report", {
                        "namespace": "default", "pod": pod,
                        "iterations": iterations(1, 100.0)}, agent)
                    assert status == 401
    said = [r.getMessage() for r in caplog.records if "refused a report" in r.getMessage()]
    assert len(said) == 2 and "default/a-1" in said[0] and "default/b-0" in said[1], said


def test_a_slow_event_write_holds_no_lock(monkeypatch):
    """A pattern change is a PatternUpdated Event on each pod of the job; the Events
    were POSTed (5 s timeout each) while the controller's global lock was held, so an
    API server slow to take them stalled every report.  They go out from a worker of
    their own once the lock is released: while the Event write hangs, the lock is free
    and another pod's report is answered at once; then the Events arrive."""
    gate, started = threading.Event(), threading.Event()
    real = Kube.create

    def create(self, kind, obj, namespace=None):
        if kind == "Event":
            started.set()
            gate.wait(10.0)
        return real(self, kind, obj, namespace)

    monkeypatch.setattr(Kube, "create", create)
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        slow = [1_000_000.0 + i * 150 for i in range(10)]
        reporter = threading.Thread(target=service.report, args=(
            "default/a-1", slow, [150.0] * 10, [50.0] * 10), daemon=True)
        try:
            reporter.start()
            assert started.wait(10.0), "no Event was written"
            assert service.lock.acquire(timeout=1.0), "the lock is held while an Event hangs"
            service.lock.release()
            t0 = time.monotonic()
            answer = service.report("default/b-0", [2_000_000.0], [100.0], [50.0])
            assert answer["pause_ms"] == 0.0 and time.monotonic() - t0 < 1.0
        finally:
            gate.set()
        reporter.join(10.0)
        assert service.events is not None and service.events.flush(10.0)
        said = {e["involvedObject"]["name"]: e for e in fake.list("v1", "Event", "default")
                if e["reason"] == "PatternUpdated"}
        assert set(said) == {"a-0", "a-1"}
        assert all(e["involvedObject"]["uid"] for e in said.values())


def test_non_leader_answers_503_and_does_not_write():
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome", leader=threading.Event())
        assert service.reconcile() == 0
        with pytest.raises(HttpError) as exc:
            service.report("default/b-0", [0.0], [100.0], None)
        assert exc.value.status == 503
        assert fake.list(NBW, "NodeBandwidth") == []


def test_a_standby_relays_both_tokens_to_the_leader():
    """A standby replica relays a report to the leader, which checks it again: with
    the agent's token and the pod's own (the leader would refuse a report without
    either)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from k8s_bridge.reconciler import LeaderForwarder

    seen: list[dict[str, str]] = []

    class Leader(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(dict(self.headers))
            payload = json.dumps({"pause_ms": 0.0}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Lookups:
        def get(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
            return {"spec": {"holderIdentity": "leader-0"}} if kind == "Lease" \
                else {"status": {"podIP": "127.0.0.1"}}

    leader = ThreadingHTTPServer(("127.0.0.1", 0), Leader)
    threading.Thread(target=leader.serve_forever, daemon=True).start()
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome", leader=threading.Event())
        service.forward = LeaderForwarder(Lookups(), "tdmcore-controller",  # type: ignore[arg-type]
                                          "tdmcore-system", leader.server_address[1])
        server = Server(service.app).start()
        try:
            body = {"namespace": "default", "pod": "b-0", "iterations": [
                {"start_ms": 1_000_000.0, "duration_ms": 100.0, "comm_ms": 50.0}]}
            request = urllib.request.Request(
                f"{server.url}/v1/report", data=json.dumps(body).encode(), method="POST",
                headers={"Content-Type": "application/json", "Authorization": "Bearer agent",
                         "X-Tdmcore-Pod-Authorization": "Bearer pod"})
            with urllib.request.urlopen(request, timeout=10) as resp:
                assert json.loads(resp.read()) == {"pause_ms": 0.0}
        finally:
            server.stop()
            leader.shutdown()
    (headers,) = seen
    assert headers["Authorization"] == "Bearer agent"
    assert headers["X-Tdmcore-Pod-Authorization"] == "Bearer pod"


def test_leader_election_one_leader_then_failover():
    with cluster(objects()) as (fake, kube, model, informers):
        first = start_election(Kube.connect(host=fake.url), "tdmcore-controller",
                               "tdmcore-system", "replica-1", lease_s=4, renew_deadline_s=3,
                               retry_s=1)
        one = first.leading
        second = None
        try:
            wait_for(one.is_set, 10, "first replica leads")
            second = start_election(Kube.connect(host=fake.url), "tdmcore-controller",
                                    "tdmcore-system", "replica-2", lease_s=4,
                                    renew_deadline_s=3, retry_s=1)
            two = second.leading
            lease = fake.get("coordination.k8s.io/v1", "Lease", "tdmcore-controller",
                             "tdmcore-system")
            assert lease["spec"]["holderIdentity"] == "replica-1"
            assert one.is_set() and not two.is_set()
            # the leader goes away: the other replica takes the lease once it expires
            first.stop()
            assert not one.is_set()
            wait_for(two.is_set, 20, "the second replica leads")
            lease = fake.get("coordination.k8s.io/v1", "Lease", "tdmcore-controller",
                             "tdmcore-system")
            assert lease["spec"]["holderIdentity"] == "replica-2"
        finally:
            first.stop()
            if second is not None:
                second.stop()


def test_election_rejects_bad_timings():
    with pytest.raises(ValueError, match="lease_s"):
        start_election(Kube.connect(host="http://127.0.0.1:9"), "x", "y", "z",
                       lease_s=2, renew_deadline_s=3, retry_s=1)


def test_answers_assign_low_priority_jobs_their_target_phase_only():
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        # the reference a reports: its starts anchor every phase
        high = service.report("default/a-1", [1_000_000.0], [100.0], None)
        assert high["target_phase_ms"] is None and high["align"] is None
        low = service.report("default/b-0", [1_000_010.0], [100.0], None)
        # b's comm phase sits 50 ms after a's: a's iteration starts at 1e6 (mod 100),
        # its comm at +50 (compute = 100 x (1 - 0.5)); b's comm at +100, its start at +50
        assert low["target_phase_ms"] == pytest.approx((1_000_000.0 + 50.0) % 100.0)
        assert low["align"] == "default/a@50.000"


class _FlakyKube(Kube):
    """A client whose every request raises :attr:`failure` while :attr:`outage` is
    set (shared by its copies)."""

    outage = threading.Event()
    failure: Exception = ApiError(0, "ConnectionError", "connection refused")

    def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        if self.outage.is_set():
            raise self.failure
        return super().request(method, path, **kw)


@pytest.mark.parametrize("failure", [
    ApiError(0, "ConnectionError", "connection refused"),  # the API unreachable
    # anything else (an answer not shaped as a Lease, a bug): before 2026-11-24 it
    # ended the election's loop with ``leading`` still set, so the replica went on
    # acting as leader while its Lease expired
    ValueError("not a Lease"),
], ids=["api-error", "unexpected-error"])
def test_leader_keeps_the_lease_until_the_renew_deadline_and_logs_quietly(caplog, failure):
    """An outage shorter than the renew deadline changes nothing; a longer one ends
    leadership after the renew deadline (not at the first failed call), and the
    replica campaigns on and leads again once the API answers. One WARNING per
    outage, with a traceback only for an unexpected error."""
    caplog.set_level(logging.DEBUG, logger="k8s_bridge.leader")
    with cluster(objects()) as (fake, kube, model, informers):
        flaky = _FlakyKube(Kube.connect(host=fake.url).api_client)
        flaky.outage = threading.Event()
        flaky.failure = failure
        election = start_election(flaky, "tdmcore-controller", "tdmcore-system", "r1",
                                  lease_s=6, renew_deadline_s=4, retry_s=1)
        try:
            wait_for(election.leading.is_set, 10, "r1 leads")
            flaky.outage.set()
            went_down = time.monotonic()
            wait_for(lambda: not election.leading.is_set(), 15, "leadership lost")
            held = time.monotonic() - went_down
            assert held >= 4 - 1.0, f"gave up after {held:.1f} s, before the renew deadline"
            flaky.outage.clear()
            wait_for(election.leading.is_set, 15, "r1 leads again")
        finally:
            election.stop()
    records = [r for r in caplog.records if r.name == "k8s_bridge.leader"]
    assert not [r for r in records if r.levelno >= logging.ERROR]
    tracebacks = [r for r in records if r.exc_info]
    assert len(tracebacks) == (0 if isinstance(failure, ApiError) else 1)
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings  # the outage began; the lease was lost
    infos = [r.getMessage() for r in records if r.levelno == logging.INFO]
    assert len(infos) <= 4, infos  # leads, API back, leads again, released: no chatter


def test_takeover_increments_lease_transitions_and_stop_releases():
    with cluster(objects()) as (fake, kube, model, informers):
        first = start_election(Kube.connect(host=fake.url), "tdmcore-controller",
                               "tdmcore-system", "r1", lease_s=12, renew_deadline_s=8,
                               retry_s=1)
        second = None
        try:
            wait_for(first.leading.is_set, 10, "r1 leads")
            lease = fake.get("coordination.k8s.io/v1", "Lease", "tdmcore-controller",
                             "tdmcore-system")
            assert lease["spec"]["leaseTransitions"] == 0
            second = start_election(Kube.connect(host=fake.url), "tdmcore-controller",
                                    "tdmcore-system", "r2", lease_s=12, renew_deadline_s=8,
                                    retry_s=1)
            first.stop()  # releases: r2 takes over at its next retry, not after ~11 s
            released = time.monotonic()
            wait_for(second.leading.is_set, 15, "r2 leads")
            assert time.monotonic() - released < 6.0
            lease = fake.get("coordination.k8s.io/v1", "Lease", "tdmcore-controller",
                             "tdmcore-system")
            assert lease["spec"]["holderIdentity"] == "r2"
            assert lease["spec"]["leaseTransitions"] == 1
        finally:
            first.stop()
            if second is not None:
                second.stop()


def high_and_low(high_ms: float, low_ms: float) -> list[dict[str, Any]]:
    """A high-priority job h and a low one l of these periods (duty cycle 0.3, 20 Gbps),
    one pod each on n0's 25 Gbps link, h deployed first."""
    objs: list[dict[str, Any]] = [K.node("n0")]
    for job, period in (("h", high_ms), ("l", low_ms)):
        objs.append(K.podbandwidth(job, period=period, duty=0.3, gbps=20,
                                   match={"training.kubeflow.org/job-name": job}))
    return objs + [K.pod("h-0", labels=K.job_labels("h", "high"), node="n0",
                         phase="Running", created="2026-11-20T00:00:00Z"),
                   K.pod("l-0", labels=K.job_labels("l"), node="n0", phase="Running",
                         created="2026-11-20T00:00:01Z")]


def test_a_pause_beside_a_job_of_another_period_lands_on_the_phase_lattice():
    # S2's periods: the low job's target repeats every 98.68 ms (the high job's
    # period), not every 91.94 ms (its own); the answer's pause is the controller's
    with cluster(high_and_low(98.68, 91.94)) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        server = Server(service.app).start()
        try:
            url = server.url + "/v1/report"
            on_time = [{"start_ms": 1_000_000.0 + i * 98.68, "duration_ms": 98.68,
                        "comm_ms": 0.3 * 98.68} for i in range(10)]
            status, _ = post(url, {"namespace": "default", "pod": "h-0",
                                   "iterations": on_time})
            assert status == 200
            # slowed in its communication (its compute stays 0.7 x 91.94 ms)
            slow = [{"start_ms": 1_000_020.0 + i * 130, "duration_ms": 130.0,
                     "comm_ms": 130.0 - 0.7 * 91.94} for i in range(10)]
            status, ans = post(url, {"namespace": "default", "pod": "l-0",
                                     "iterations": slow})
            assert status == 200
            lattice = ans["phase_period_ms"]
            assert lattice == pytest.approx(98.68) and ans["period_ms"] == pytest.approx(91.94)
            end = slow[-1]["start_ms"] + slow[-1]["duration_ms"]
            assert 0 < ans["pause_ms"] < lattice
            assert ans["pause_ms"] == pytest.approx(
                service.current().pause_ms("default/l", end))
            off = (end + ans["pause_ms"] - ans["target_phase_ms"]) % lattice
            assert min(off, lattice - off) == pytest.approx(0.0, abs=1e-6)
        finally:
            server.stop()


def test_answers_carry_the_idle_the_plan_injects():
    """spec §7 "Idle reaches the training loop": S3's periods (102.76 ms high, 186.84
    ms low, 2:1 after idle injection): the low pod's answer carries the idle its
    link's plan injects, the controller's own ``idle_ms``, through the real agent;
    the high pod's answer none."""
    from k8s_bridge.agent import Agent, serve

    with cluster(high_and_low(102.76, 186.84)) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        server = Server(service.app).start()
        agent = serve(Agent(server.url, "n0").app(), "127.0.0.1", 0)
        agent.start()
        try:
            url = f"http://127.0.0.1:{agent.port}/v1/report"
            answers = {}
            for pod, period in (("h-0", 102.76), ("l-0", 186.84)):
                status, answers[pod] = post(url, {"namespace": "default", "pod": pod,
                                                  "iterations": iterations(3, period)})
                assert status == 200
            ctrl = service.current()
            idle = ctrl.idle_ms("default/l")
            assert idle > 0.0  # unification step 2 (its amount is the Core's to say)
            assert answers["l-0"]["idle_ms"] == pytest.approx(idle)
            assert answers["h-0"]["idle_ms"] == 0.0 == ctrl.idle_ms("default/h")
        finally:
            agent.stop()
            server.stop()


def test_a_batch_is_answered_with_at_most_one_readjustment():
    """The hook sends 10 iterations per report and pauses only on the answer: the slow
    iterations after a batch's readjustment ran before the pod could pause, so they
    do not count towards another one (two batches of slow iterations are two
    readjustments, not three, and no "repeated readjustments" pattern update)."""
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        t0 = 1_000_000.0
        service.report("default/a-1", [t0 + i * 100 for i in range(10)], [100.0] * 10, None)
        t = t0 + 20
        marks = []
        for _ in range(2):
            starts = [t + i * 130 for i in range(10)]
            t = starts[-1] + 130
            answer = service.report("default/b-0", starts, [130.0] * 10, None)
            assert answer["pause_ms"] > 0
            watch = service.current().watch_state("default/b-0")
            assert watch is not None
            marks.append(watch.readjusted_at())
        # one mark per batch (the 6th slow iteration of each); the rest of a batch only
        # counts as reports, so the second batch's window starts empty
        assert marks == [[6], [6, 16]]
        assert service.current().watch_state("default/b-0").reports == 20
        status = fake.get(NBW, "PodBandwidth", "b", "default").get("status") or {}
        assert "observedPeriodMs" not in status
        # reported one at a time (the simulator's way, every pause applied at once)
        # the same iterations make three readjustments and a pattern update
        ctrl = service.current()
        fresh = ctrl.report_iterations("default/c-0", [t0 + 20 + i * 130 for i in range(20)],
                                       [130.0] * 20)
        assert [(k, type(a).__name__) for k, a in fresh] == [
            (5, "Readjustment"), (11, "Readjustment"), (17, "Readjustment"),
            (17, "PatternUpdate")]


def test_a_report_from_a_clock_ahead_is_refused_and_changes_nothing():
    """A start over a minute ahead of the controller's clock would pin its job's phase
    anchor (the latest start) in the future: 400 naming start_ms, nothing taken."""
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        ctrl = service.current()
        server = Server(service.app).start()
        try:
            url = server.url + "/v1/report"
            now = time.time() * 1000.0
            status, ans = post(url, {"namespace": "default", "pod": "a-1",
                                     "iterations": iterations(3, 100.0, now + 3_600_000.0)})
            assert status == 400 and "start_ms" in ans["Error"] and "clock" in ans["Error"]
            assert ctrl.anchors_ms == {} and ctrl.monitor.watches == {}
            status, ans = post(url, {"namespace": "default", "pod": "a-1",
                                     "iterations": iterations(3, 100.0, now + 30_000.0)})
            assert status == 200  # within the minute's allowance
        finally:
            server.stop()


def test_nodebandwidth_status_says_its_generation_and_whether_its_link_is_declared():
    """Issue 40: ``status.conditions`` and ``status.observedGeneration`` were declared in
    the CRD and never set.  Every NodeBandwidth gets both (an idle node's too), and a
    spec change is observed in the next pass; ``LinkDeclared`` is False, with the
    default speed named, where ``spec.bandwidth`` is missing."""
    with cluster(objects() + [K.nodebandwidth("n2")]) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        synced_to(fake, informers)
        for name in ("n0", "n1", "n2"):
            nbw = fake.get(NBW, "NodeBandwidth", name)
            status = nbw["status"]
            assert status["observedGeneration"] == nbw["metadata"]["generation"], name
            (cond,) = status["conditions"]
            assert (cond["type"], cond["status"], cond["reason"]) == (
                "LinkDeclared", "False", "DefaultLinkSpeed"), name
            assert "25 Gbps" in cond["message"] and cond["lastTransitionTime"]
        before = fake.get(NBW, "NodeBandwidth", "n2")
        fake.update({**before, "spec": {"bandwidth": "100G"}})
        synced_to(fake, informers)
        assert service.reconcile() >= 1
        after = fake.get(NBW, "NodeBandwidth", "n2")
        assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
        assert after["status"]["observedGeneration"] == after["metadata"]["generation"]
        (cond,) = after["status"]["conditions"]
        assert (cond["status"], cond["reason"]) == ("True", "Declared")
        synced_to(fake, informers)
        assert service.reconcile() == 0  # in sync: nothing more to write
