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


def _post(comp: Component, body: Any, tokens: dict[str, str]) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json", **tokens}
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


def _trainer_pod(env: Env, ns: str, name: str, node: str) -> dict[str, Any]:
    """A training pod of job j on ``node``, running as the ServiceAccount ``trainer``
    (a pod-bound token names the pod's own account)."""
    return env.kube.create("Pod", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {JOB: "j"}},
        "spec": {"nodeName": node, "serviceAccountName": "trainer",
                 "containers": [{"name": "c", "image": "x.invalid/t:1", "resources": {
                     "limits": {"nvidia.com/gpu": "1"}}}]}}, ns)


def _trainer_token(env: Env, ns: str, pod: dict[str, Any] | None,
                   audiences: tuple[str, ...] = ("tdmcore-controller",)) -> str:
    """A token of ``ns``'s ServiceAccount ``trainer``: the one the kubelet projects into
    ``pod`` (TokenRequest bound to it), or, without a pod, one bound to none."""
    spec: dict[str, Any] = {"expirationSeconds": 3600, "audiences": list(audiences)}
    if pod is not None:
        spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod",
                                  "name": pod["metadata"]["name"],
                                  "uid": pod["metadata"]["uid"]}
    answer = env.kube.request(
        "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/trainer/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
    return str(answer["status"]["token"])


def test_a_forged_report_is_refused_and_a_pattern_change_is_an_event(
        env: Env, space: tuple[str, list[str]]) -> None:
    """Issue 40: eight forged reports rewrote two PodBandwidths' observed period and
    duty cycle (which then override ``spec`` everywhere), with no log line or Event.
    Then the agent's token was asked for; but the agent relays whatever reaches its
    hostPort with that token, so a pod on a GPU node could still report for any pod
    of its node, through the agent.  Now a report needs both tokens (TokenReview,
    audience tdmcore-controller): the agent's (none, another account's, one for the
    API server's audience, or one of an agent on another node is refused, 401/403)
    and the training pod's own, bound to the pod the report names (none -- an old
    hook -- is 401, logged once per pod; a neighbour's, or one bound to no pod, is
    403).  Refused reports change nothing; the pod's own report through its node's
    agent is taken, and the pattern change it brings is logged and recorded as an
    Event naming the pod that sent it and the agent that relayed it."""
    ns, nodes = space
    nodes += env.nodes("report", 2)
    env.podbandwidth(ns, "j", period=100.0, duty=0.5, gbps=10.0, match={JOB: "j"})
    env.kube.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts", body={
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "trainer", "namespace": ns}})
    pod = _trainer_pod(env, ns, "j-0", nodes[0])
    neighbour = _trainer_pod(env, ns, "k-0", nodes[0])
    agents = {}
    for i, node in enumerate(nodes):  # the agent pods of the two nodes (the DaemonSet's)
        agents[node] = env.kube.create("Pod", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"agent-{space[0]}-{i}", "namespace": NS},
            "spec": {"nodeName": node, "serviceAccountName": AGENT,
                     "containers": [{"name": "agent", "image": "x.invalid/agent:1"}]}}, NS)
    controller = env.component("controller-auth", ["controller", "--resync-seconds", "1"],
                               "tdmcore-controller").start()
    agent_token = _token(env, AGENT, ["tdmcore-controller"], agents[nodes[0]])
    token_file = env.plane.dir / f"{ns}-agent.token"
    token_file.write_text(agent_token)
    agent = env.component("agent-auth", ["agent", "--controller", controller.url, "--node",
                                         nodes[0], "--timeout", "10", "--token-file",
                                         str(token_file)], None).start()
    try:
        own = _trainer_token(env, ns, pod)

        def both(pod_token: str | None, agent_token: str | None = agent_token
                 ) -> dict[str, str]:
            headers = {"Authorization": f"Bearer {agent_token}"} if agent_token else {}
            if pod_token:
                headers["X-Tdmcore-Pod-Authorization"] = f"Bearer {pod_token}"
            return headers

        # placed and known to the controller: a harmless report of its declared pattern
        on_time = {"namespace": ns, "pod": "j-0", "iterations": [
            {"start_ms": 1_000_000.0, "duration_ms": 100.0, "comm_ms": 50.0}]}
        wait_until(lambda: _post(controller, on_time, both(own))[0] == 200, 30,
                   "the controller to know the pod")
        forged = {  # straight to the controller, the pod's own token beside
            "no agent token": (both(own, None), 401),
            "garbage": (both(own, "not-a-token"), 401),
            "the agent's token for the API server": (both(own, _token(env, AGENT)), 401),
            "another account's token": (both(own, _token(env, "tdmcore-scheduler", [
                "tdmcore-controller"])), 403),
            "the other node's agent": (both(own, _token(env, AGENT, ["tdmcore-controller"],
                                                        agents[nodes[1]])), 403),
        }
        relayed = {  # through the pod's own node's agent, as a hook posts
            "an old hook: no pod token": (None, 401),
            "a neighbour's pod token": (_trainer_token(env, ns, neighbour), 403),
            "the pod's token for the API server": (_trainer_token(
                env, ns, pod, ("https://kubernetes.default.svc",)), 401),
            "the pod's account, bound to no pod": (_trainer_token(env, ns, None), 403),
        }
        for what, (headers, code) in forged.items():
            for _ in range(2):
                status, answer = _post(controller, _slow(ns, "j-0"), headers)
                assert status == code, (what, status, answer)
                assert answer["Error"], what
        for what, (token, code) in relayed.items():
            for _ in range(2):
                status, answer = _post(agent, _slow(ns, "j-0"),
                                       {"Authorization": f"Bearer {token}"} if token else {})
                assert status == code, (what, status, answer)
                assert answer["Error"], what
        pbw = env.kube.get("PodBandwidth", "j", ns)
        assert "observedPeriodMs" not in (pbw.get("status") or {}), pbw["status"]
        assert controller.metric("tdmcore_controller_refused_reports_total",
                                 {"code": "401"}) == 10
        assert controller.metric("tdmcore_controller_refused_reports_total",
                                 {"code": "403"}) == 8
        assert env.event_messages(ns, "j-0", "PatternUpdated") == []
        log = controller.proc.log(200_000) if controller.proc else ""
        old_hook = [line for line in log.splitlines() if "refused a report" in line
                    and f"pod {ns}/j-0 sent none" in line]
        assert len(old_hook) == 1, old_hook  # said once, not per report
        # the pod itself, through its node's agent: the pattern change is taken, logged,
        # and an Event says who sent it and who relayed it
        status, answer = _post(agent, _slow(ns, "j-0"), {"Authorization": f"Bearer {own}"})
        assert status == 200 and "controller" not in answer, answer
        pbw = env.kube.get("PodBandwidth", "j", ns)
        assert pbw["status"]["observedPeriodMs"] == pytest.approx(150.0)
        said = wait_until(lambda: env.event_messages(ns, "j-0", "PatternUpdated"), 10,
                          "a PatternUpdated Event on the pod")
        assert "100 -> 150 ms" in said[0], said
        assert f"by pod {ns}/j-0 (system:serviceaccount:{ns}:trainer) through the agent " \
               f"system:serviceaccount:{NS}:{AGENT} (pod {NS}/" in said[0], said
        assert controller.metric("tdmcore_controller_actions_total",
                                 {"kind": "pattern_update"}) == 1
        log = controller.proc.log(200_000) if controller.proc else ""
        assert "traffic pattern of job" in log and "written to PodBandwidth" in log
        assert "Traceback" not in log
    finally:
        agent.stop()
        controller.stop()
        for agent_pod in agents.values():
            env.kube.request("DELETE", f"/api/v1/namespaces/{NS}/pods/"
                             f"{agent_pod['metadata']['name']}",
                             query={"gracePeriodSeconds": "0"})
