"""Extender mode on a real control plane: kube-scheduler with the shipped configuration
calls the extender process, which binds and records NodeBandwidth status."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest

from benchmarks.k8s_bind import start_plain_scheduler
from k8s_bridge.envtest import wait_until
from tests.e2e.e2e_env import SCHEDULER, TEST, Component, Env, wait_known

pytestmark = pytest.mark.e2e

JOB = "training.kubeflow.org/job-name"
OPEN = "e2e.tdmcore.io/open"


@pytest.fixture
def placed(env: Env, extender: Component) -> Iterator[tuple[str, list[str]]]:
    ns = env.namespace("e2e-place")
    nodes = env.nodes("place", 4)
    wait_known(extender, nodes)
    try:
        yield ns, nodes
    finally:
        env.clean(ns, nodes)


def _label(env: Env, nodes: list[str], value: str) -> None:
    for node in nodes:
        env.kube.merge_patch("Node", node, {"metadata": {"labels": {OPEN: value}}})


def test_placements_are_the_extenders_top_score(env: Env, extender: Component,
                                                placed: tuple[str, list[str]]) -> None:
    """Each pod is created unschedulable (a nodeSelector value no node has yet); the
    extender's own filter and prioritize answers for it are read; then the nodes get
    that value and the pod must land on a node of the top extender score."""
    ns, nodes = placed
    jobs = {"a": (100.0, 0.5), "b": (100.0, 0.4), "c": (200.0, 0.3)}
    for job, (period, duty) in jobs.items():
        env.podbandwidth(ns, job, period=period, duty=duty, gbps=20, match={JOB: job})
    chosen: dict[str, str] = {}
    for job in jobs:
        for i in range(2):
            name = f"{job}-{i}"
            # a selector value of its own: a kube-scheduler cache that still holds an
            # older label value can never match it
            pod = env.pod(ns, name, gpu=4, labels={JOB: job}, node_selector={OPEN: name})
            status, scores = extender.post("/prioritize", {"Pod": pod, "NodeNames": nodes})
            assert status == 200, scores
            status, filtered = extender.post("/filter", {"Pod": pod, "NodeNames": nodes})
            assert status == 200 and not filtered["Error"], filtered
            feasible = set(filtered["NodeNames"])
            by_node = {s["Host"]: s["Score"] for s in scores if s["Host"] in feasible}
            assert by_node, (name, chosen, filtered)
            top = max(by_node.values())
            _label(env, nodes, name)
            chosen[name] = wait_until(lambda: env.node_of(ns, name), 20,
                                      f"{name} bound")
            assert by_node[chosen[name]] == top, (name, chosen[name], by_node)
    # NodeBandwidth status as documented: every traffic pod on its node's link, once
    by_link: dict[str, set[str]] = {}
    for name, node in chosen.items():
        by_link.setdefault(node, set()).add(name)

    def recorded() -> bool:
        for node, pods in by_link.items():
            nbw = env.nodebandwidth(node)
            entries = ((nbw or {}).get("status") or {}).get("pods") or []
            if {e["name"] for e in entries} != pods:
                return False
        return True

    wait_until(recorded, 20, "every pod recorded on its node's NodeBandwidth")
    for node, pods in by_link.items():
        status = env.nodebandwidth(node)["status"]  # type: ignore[index]
        assert status["basePeriodMs"] > 0, status
        orders = [e["order"] for e in status["pods"]]
        assert orders == sorted(orders) and len(set(orders)) == len(orders)
        for entry in status["pods"]:
            period, duty = jobs[entry["job"].rsplit("/", 1)[-1]]
            assert entry["namespace"] == ns and entry["name"] in pods
            assert entry["periodMs"] == period and entry["dutyCycle"] == duty
            assert entry["bandwidthGbps"] == 20 and entry["lowComm"] is False
            assert isinstance(entry["shiftMs"], float | int)


def test_the_shipped_mode_binds_the_policys_pick_unscored(
        env: Env, extender: Component, placed: tuple[str, list[str]]) -> None:
    """The shipped configuration (Filter decides): Filter keeps one node, the policy's
    pick, claimed for the pod; kube-scheduler binds the pod there itself, with no
    prioritize or bind call, and the extender records it on the watch."""
    ns, nodes = placed
    before = {verb: extender.metric("tdmcore_extender_decisions_total", {"verb": verb})
              for verb in ("filter", "prioritize", "bind")}
    env.podbandwidth(ns, "a", period=100.0, duty=0.5, gbps=20, match={JOB: "a"})
    env.podbandwidth(ns, "b", period=100.0, duty=0.4, gbps=20, match={JOB: "b"})
    picks = {}
    for name, job in (("a-0", "a"), ("a-1", "a"), ("b-0", "b"), ("b-1", "b")):
        pod = env.pod(ns, name, gpu=4, labels={JOB: job}, node_selector={OPEN: name})
        status, filtered = extender.post("/filter", {"Pod": pod, "NodeNames": nodes})
        assert status == 200 and not filtered["Error"], filtered
        assert len(filtered["NodeNames"]) == 1, filtered
        picks[name] = filtered["NodeNames"][0]
        _label(env, nodes, name)
        node = wait_until(lambda: env.node_of(ns, name), 20, f"{name} bound")
        assert node == picks[name], (name, node, picks)
    after = {verb: extender.metric("tdmcore_extender_decisions_total", {"verb": verb})
             for verb in ("filter", "prioritize", "bind")}
    assert after["filter"] - before["filter"] >= 8
    assert after["prioritize"] == before["prioritize"] and after["bind"] == before["bind"]

    def recorded() -> bool:
        names = {e["name"] for n in set(picks.values())
                 for e in ((env.nodebandwidth(n) or {}).get("status") or {}).get("pods") or []}
        return names == set(picks)

    wait_until(recorded, 20, "the pods recorded on their nodes' NodeBandwidth status")


def test_with_no_decide_in_filter_kube_scheduler_scores_and_the_extender_binds(
        env: Env, extender: Component, placed: tuple[str, list[str]]) -> None:
    """``--no-decide-in-filter`` with a kube-scheduler calling prioritize and bind (a
    profile of its own): Filter keeps every feasible node, the pod lands on a node of
    the extender's top score, and the extender binds it."""
    ns, nodes = placed
    name = "tdmcore-prioritize"
    scoring = env.component("extender-prioritize", ["extender", "--scheduler-name", name,
                                                    "--no-decide-in-filter"], SCHEDULER)
    scoring.start()
    kube = start_plain_scheduler(env, name, {
        "urlPrefix": scoring.url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
        "bindVerb": "bind", "weight": 5, "enableHTTPS": False, "httpTimeout": "5s",
        "nodeCacheCapable": True, "ignorable": False})
    try:
        wait_known(scoring, nodes)
        env.podbandwidth(ns, "a", period=100.0, duty=0.5, gbps=20, match={JOB: "a"})
        for pod_name in ("a-0", "a-1"):
            pod = env.pod(ns, pod_name, gpu=4, labels={JOB: "a"},
                          node_selector={OPEN: pod_name}, scheduler=name)
            status, scores = scoring.post("/prioritize", {"Pod": pod, "NodeNames": nodes})
            status, filtered = scoring.post("/filter", {"Pod": pod, "NodeNames": nodes})
            assert status == 200 and len(filtered["NodeNames"]) > 1, filtered
            by_node = {s["Host"]: s["Score"] for s in scores
                       if s["Host"] in filtered["NodeNames"]}
            _label(env, nodes, pod_name)
            node = wait_until(lambda p=pod_name: env.node_of(ns, p), 30, f"{pod_name} bound")
            assert by_node[node] == max(by_node.values()), (pod_name, node, by_node)
        # The extender counts a bind once the API server has taken it, so the test can
        # see the pod bound a moment before the count moves (a CI run did, 2026-11-29).
        wait_until(lambda: scoring.metric("tdmcore_extender_decisions_total",
                                          {"verb": "bind", "outcome": "ok"}) == 2, 10,
                   "the extender to count both binds")
        assert scoring.metric("tdmcore_extender_decisions_total", {"verb": "prioritize"}) >= 2
    finally:
        kube.stop()
        scoring.stop()


def test_a_pod_tdmcore_cannot_read_says_why_in_its_event(env: Env, extender: Component,
                                                          placed: tuple[str, list[str]]) -> None:
    """A bad priority label: kube-scheduler's FailedScheduling event carries tdmcore's
    reason (it said only 'code 400' when Filter answered 400), and nothing is bound."""
    ns, nodes = placed
    env.pod(ns, "odd", labels={"tdmcore.io/priority": "urgent"},
            node_selector={TEST: "place"})
    said = wait_until(lambda: [m for m in env.event_messages(ns, "odd", "FailedScheduling")
                               if "tdmcore.io/priority" in m], 30,
                      "a FailedScheduling event naming the label")
    assert "urgent" in said[0] and "code 400" not in said[0], said
    assert env.bound(ns) == {}


def test_a_forged_bind_is_refused_with_its_reason(env: Env, extender: Component,
                                                  placed: tuple[str, list[str]]) -> None:
    """Issue 40: a well-formed ``POST /bind`` from anyone bound a pending pod whose
    ``nodeSelector`` no node matches (``pool=does-not-exist``) onto a node of ours:
    bind re-checked only tdmcore's own filter.  kube-scheduler never calls the
    extender's Filter for that pod (its own filters leave no node), so the extender
    has passed no node for it, and the forged bind is refused with the reason."""
    ns, nodes = placed
    pod = env.pod(ns, "forged", gpu=1, node_selector={"pool": "does-not-exist"})
    wait_until(lambda: env.event_messages(ns, "forged", "FailedScheduling"), 30,
               "kube-scheduler to find no node for the pod")
    refused = extender.metric("tdmcore_extender_decisions_total",
                              {"verb": "bind", "outcome": "refused"})
    status, answer = extender.post("/bind", {
        "PodName": "forged", "PodNamespace": ns, "PodUID": pod["metadata"]["uid"],
        "Node": nodes[0]})
    assert status == 200, answer
    assert "did not pass" in answer["Error"] or "no Filter pass" in answer["Error"], answer
    assert env.node_of(ns, "forged") is None
    assert extender.metric("tdmcore_extender_decisions_total",
                           {"verb": "bind", "outcome": "refused"}) == refused + 1


def test_a_forged_filter_then_bind_is_refused_by_the_pods_own_constraints(
        env: Env, extender: Component, placed: tuple[str, list[str]]) -> None:
    """A review of issue 40: Bind took any node this extender's Filter passed, but the
    caller of ``/filter`` chooses the pod JSON and the node list, and tdmcore's Filter
    ignores nodeSelector, node affinity and taints.  A ``/filter`` of the pod without
    its selector (or its taint's node), then a ``/bind``, bound a pod kube-scheduler
    had found no node for.  Bind now checks the pod and the node as the extender's
    informers cached them, with kube-scheduler's rules, and refuses with the reason."""
    ns, nodes = placed
    env.kube.merge_patch("Node", nodes[1], {"metadata": {"labels": {OPEN: "tainted"}},
                                            "spec": {"taints": [{
                                                "key": "dedicated", "value": "infra",
                                                "effect": "NoSchedule"}]}})
    picky = env.pod(ns, "picky", gpu=1, node_selector={"pool": "does-not-exist"})
    plain = env.pod(ns, "plain", gpu=1, node_selector={OPEN: "tainted"})
    for name in ("picky", "plain"):
        wait_until(lambda n=name: env.event_messages(ns, n, "FailedScheduling"), 30,
                   f"kube-scheduler to find no node for {name}")
    refused = extender.metric("tdmcore_extender_bind_refusals_total", {"reason": "not_filtered"})
    for pod, node, reason in ((picky, nodes[0], "does not match the pod's nodeSelector"),
                              (plain, nodes[1], "taint dedicated=infra:NoSchedule")):
        bare = copy.deepcopy(pod)
        bare["spec"].pop("nodeSelector")
        status, passed = extender.post("/filter", {"Pod": bare, "NodeNames": [node]})
        assert status == 200 and passed["NodeNames"] == [node], passed
        status, answer = extender.post("/bind", {
            "PodName": pod["metadata"]["name"], "PodNamespace": ns,
            "PodUID": pod["metadata"]["uid"], "Node": node})
        assert status == 200 and reason in answer["Error"], answer
        assert env.node_of(ns, pod["metadata"]["name"]) is None
    assert extender.metric("tdmcore_extender_bind_refusals_total",
                           {"reason": "not_filtered"}) == refused + 2
