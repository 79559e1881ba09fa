"""Issue 40's attacks on a real control plane: who may report to the controller."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from k8s_bridge.envtest import wait_until
from tests.e2e.e2e_env import NS, Component, Env, service_account_token

pytestmark = pytest.mark.e2e

JOB = "training.kubeflow.org/job-name"
AGENT = "tdmcore-agent"


#: a TokenRequest token of a shipped ServiceAccount (e2e_env's)
_token = service_account_token


def _post(comp: Component, body: Any, token: str | None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"{comp.url}/v1/report", data=json.dumps(body).encode(),
                                     method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def _slow(ns: str, pod: str, node: str | None = None) -> dict[str, Any]:
    """Ten iterations of 150 ms (100 ms of own work, the declared 50 ms of all-reduce)
    for a pod declared at 100 ms, duty 0.5: a changed pattern, steadily."""
    import time

    start = time.time() * 1000.0 - 10_000.0
    body: dict[str, Any] = {"namespace": ns, "pod": pod, "iterations": [
        {"start_ms": start + i * 150.0, "duration_ms": 150.0, "comm_ms": 50.0}
        for i in range(10)]}
    if node is not None:
        body["node"] = node
    return body


def test_a_forged_report_is_refused_and_a_pattern_change_is_an_event(
        env: Env, space: tuple[str, list[str]]) -> None:
    """Issue 40: eight forged reports rewrote two PodBandwidths' observed period and
    duty cycle (which then override ``spec`` everywhere), with no log line or Event.
    Now a report needs the agent's token (TokenReview, audience tdmcore-controller):
    none, another account's, one for the API server's audience, or a pod-bound agent
    token from another node is refused (401/403) and changes nothing; the agent's own
    token is taken, and the pattern change it brings is logged and recorded as an
    Event on the pod."""
    ns, nodes = space
    nodes += env.nodes("report", 2)
    env.podbandwidth(ns, "j", period=100.0, duty=0.5, gbps=10.0, match={JOB: "j"})
    env.kube.create("Pod", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "j-0", "namespace": ns, "labels": {JOB: "j"}},
        "spec": {"nodeName": nodes[0], "containers": [{"name": "c", "image": "x.invalid/t:1",
                                                       "resources": {"limits": {
                                                           "nvidia.com/gpu": "1"}}}]}}, ns)
    agents = {}
    for i, node in enumerate(nodes):  # the agent pods of the two nodes (the DaemonSet's)
        agents[node] = env.kube.create("Pod", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"agent-{space[0]}-{i}", "namespace": NS},
            "spec": {"nodeName": node, "serviceAccountName": AGENT,
                     "containers": [{"name": "agent", "image": "x.invalid/agent:1"}]}}, NS)
    controller = env.component("controller-auth", ["controller", "--resync-seconds", "1"],
                               "tdmcore-controller").start()
    try:
        agent_token = _token(env, AGENT, ["tdmcore-controller"], agents[nodes[0]])
        # placed and known to the controller: a harmless report of its declared pattern
        on_time = {"namespace": ns, "pod": "j-0", "iterations": [
            {"start_ms": 1_000_000.0, "duration_ms": 100.0, "comm_ms": 50.0}]}
        wait_until(lambda: _post(controller, on_time, agent_token)[0] == 200, 30,
                   "the controller to know the pod")
        forged = {
            "no token": (None, 401),
            "garbage": ("not-a-token", 401),
            "the agent's token for the API server": (_token(env, AGENT), 401),
            "another account's token": (_token(env, "tdmcore-scheduler",
                                               ["tdmcore-controller"]), 403),
            "the other node's agent": (_token(env, AGENT, ["tdmcore-controller"],
                                              agents[nodes[1]]), 403),
        }
        for what, (token, code) in forged.items():
            for _ in range(2):
                status, answer = _post(controller, _slow(ns, "j-0"), token)
                assert status == code, (what, status, answer)
                assert answer["Error"], what
        pbw = env.kube.get("PodBandwidth", "j", ns)
        assert "observedPeriodMs" not in (pbw.get("status") or {}), pbw["status"]
        assert controller.metric("tdmcore_controller_refused_reports_total",
                                 {"code": "401"}) == 6
        assert controller.metric("tdmcore_controller_refused_reports_total",
                                 {"code": "403"}) == 4
        assert env.event_messages(ns, "j-0", "PatternUpdated") == []
        # the agent of the pod's own node: the pattern change is taken, logged, an Event
        status, answer = _post(controller, _slow(ns, "j-0"), agent_token)
        assert status == 200, answer
        pbw = env.kube.get("PodBandwidth", "j", ns)
        assert pbw["status"]["observedPeriodMs"] == pytest.approx(150.0)
        said = wait_until(lambda: env.event_messages(ns, "j-0", "PatternUpdated"), 10,
                          "a PatternUpdated Event on the pod")
        assert "100 -> 150 ms" in said[0] and AGENT in said[0], said
        assert controller.metric("tdmcore_controller_actions_total",
                                 {"kind": "pattern_update"}) == 1
        log = controller.proc.log(200_000) if controller.proc else ""
        assert "traffic pattern of job" in log and "written to PodBandwidth" in log
        assert "Traceback" not in log
    finally:
        controller.stop()
        for pod in agents.values():
            env.kube.request("DELETE", f"/api/v1/namespaces/{NS}/pods/"
                             f"{pod['metadata']['name']}", query={"gracePeriodSeconds": "0"})
