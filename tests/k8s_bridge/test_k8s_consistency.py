"""The cluster model stays true to the API objects through binds, failed binds, gang
waits and out-of-order events (each test failed before its fix; the reproducers came
from an independent review of the bridge)."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.test import Client

from k8s_bridge.cache import ClusterModel
from k8s_bridge.extender import Extender
from k8s_bridge.kube import Kube
from k8s_bridge.pipeline import BindError, Pipeline
from k8s_bridge.reconciler import ControllerService
from k8s_bridge.records import merge_entries, write_status
from k8s_bridge.requeue import Requeuer

from . import k8s_objects as K
from .k8s_fake import FakeApiServer

NBW = "tdmcore.io/v1alpha1"
GROUP = "scheduling.x-k8s.io/pod-group"
JOB = "training.kubeflow.org/job-name"


@pytest.fixture
def api() -> Iterator[tuple[FakeApiServer, Kube]]:
    with FakeApiServer() as fake:
        yield fake, Kube.connect(host=fake.url)


def deliver(model: ClusterModel, fake: FakeApiServer, objs: list[dict[str, Any]],
            event: str = "ADDED") -> None:
    """What the watch would deliver: the API's current copy of each object."""
    for o in objs:
        meta = o["metadata"]
        model.on_event(o["kind"], event, fake.get(o["apiVersion"], o["kind"], meta["name"],
                                                  meta.get("namespace")))


def load(fake: FakeApiServer, objs: list[dict[str, Any]], **kw: Any) -> ClusterModel:
    for o in objs:
        fake.create(o)
    model = ClusterModel(**kw)
    deliver(model, fake, objs)
    return model


def entry(name: str, shift: float, order: int) -> dict[str, Any]:
    return {"namespace": "default", "name": name, "job": f"default/{name[0]}", "priority": 0,
            "lowComm": False, "shiftMs": shift, "order": order, "periodMs": 100.0,
            "dutyCycle": 0.5, "bandwidthGbps": 10.0, "rotation": 0}


def two_jobs_on_n0() -> list[dict[str, Any]]:
    return [K.node("n0"),
            K.podbandwidth("a", period=100, duty=0.5, gbps=10, match={JOB: "a"}),
            K.podbandwidth("b", period=100, duty=0.5, gbps=10, match={JOB: "b"}),
            K.pod("a-0", labels=K.job_labels("a"), node="n0", phase="Running"),
            K.pod("b-0", labels=K.job_labels("b"), node="n0", phase="Running")]


def recorded(rv: int, shift: float) -> dict[str, Any]:
    nbw = K.nodebandwidth("n0")
    nbw["metadata"]["resourceVersion"] = str(rv)
    nbw["status"] = {"pods": [entry("a-0", 0.0, 1), entry("b-0", shift, 2)],
                     "basePeriodMs": 100.0}
    return nbw


def shift_of(model: ClusterModel, key: str) -> float:
    return model.state().placed[key].shift_ms


# ------------------------------------------------------------------ status writes
def test_a_status_write_lands_on_the_bound_pods_node_when_a_node_joins_meanwhile(api):
    fake, kube = api
    objs = [K.node("n0"), K.node("n1"),
            K.podbandwidth("t", period=100, duty=0.5, gbps=10, match={"app": "t"}),
            K.pod("q", labels={"app": "t"}, node="n0", phase="Running"),
            K.pod("p", labels={"app": "t"})]
    model = load(fake, objs)
    pipeline = Pipeline(model, "metronome", kube)
    post = kube.bind

    def bind_while_a_node_joins(namespace: str, name: str, uid: str | None, node: str) -> None:
        post(namespace, name, uid, node)
        fake.create(K.node("a0"))  # sorts first: every node index moves
        deliver(model, fake, [K.node("a0")])

    kube.bind = bind_while_a_node_joins  # type: ignore[method-assign]
    pipeline.bind("default", "p", None, "n1")
    status = fake.get(NBW, "NodeBandwidth", "n1")["status"]
    assert [e["name"] for e in status["pods"]] == ["p"]
    assert fake.get(NBW, "NodeBandwidth", "n0") is None  # q's node was not written


# ------------------------------------------------------------------ assumed pods
def test_an_update_of_a_claimed_gang_member_keeps_its_node_claimed(api):
    fake, kube = api
    objs = [K.node("n0", gpu=8), K.node("n1", gpu=8), K.podgroup("g", 2),
            K.pod("g-0", gpu=8, labels={GROUP: "g"}), K.pod("g-1", gpu=8, labels={GROUP: "g"}),
            K.pod("x", gpu=8)]
    model = load(fake, objs)
    pipeline = Pipeline(model, "metronome", kube, gang_wait_s=10.0)
    g0 = model.objects["Pod"]["default/g-0"]
    node = pipeline.filter(g0, ["n0", "n1"]).nodes[0]  # admits g: both nodes claimed
    # the requeuer touches g-0; the watch delivers that update (newer, no nodeName)
    Requeuer(pipeline, kube, K.SCHEDULER).touch("default/g-0")
    deliver(model, fake, [objs[3]], "MODIFIED")
    assert "default/g-0" in model.state().placed
    assert pipeline.filter(model.objects["Pod"]["default/x"], [node]).nodes == []
    with pytest.raises(BindError, match="no longer passes"):
        pipeline.bind("default", "x", None, node)
    for name in ("g-0", "g-1"):
        pipeline.bind("default", name, None, pipeline.gangs.claims[f"default/{name}"].node)
    on_node = [p["metadata"]["name"] for p in fake.list("v1", "Pod")
               if p["spec"].get("nodeName") == node]
    assert on_node == ["g-0"]


def test_a_pod_deleted_while_its_gang_holds_its_claim_stays_deleted(api):
    fake, kube = api
    objs = [K.node("n0"), K.node("n1"), K.podgroup("g", 2),
            K.pod("g-0", gpu=8, labels={GROUP: "g"}), K.pod("g-1", gpu=8, labels={GROUP: "g"})]
    model = load(fake, objs)
    pipeline = Pipeline(model, "metronome", kube, gang_wait_s=0.3)
    assert pipeline.filter(model.objects["Pod"]["default/g-0"], ["n0", "n1"]).nodes
    gone = fake.get("v1", "Pod", "g-0", "default")
    fake.delete("v1", "Pod", "g-0", "default")
    model.on_event("Pod", "DELETED", gone)
    time.sleep(0.4)
    pipeline.expire_claims()  # released at the deadline
    assert "default/g-0" not in model.objects["Pod"]
    assert not model.state().placed
    assert "1 of minMember 2" in pipeline.gang_shortfall(model.objects["Pod"]["default/g-1"])


def test_a_pod_deleted_during_its_binding_stays_deleted(api):
    fake, kube = api
    model = load(fake, [K.node("n0"), K.pod("y")])
    pipeline = Pipeline(model, "metronome", kube)
    post = kube.bind

    def deleted_first(namespace: str, name: str, uid: str | None, node: str) -> None:
        obj = fake.get("v1", "Pod", name, namespace)
        fake.delete("v1", "Pod", name, namespace)
        model.on_event("Pod", "DELETED", obj)  # a fast watch
        post(namespace, name, uid, node)       # 404

    kube.bind = deleted_first  # type: ignore[method-assign]
    with pytest.raises(BindError, match="404"):
        pipeline.bind("default", "y", None, "n0")
    assert "default/y" not in model.objects["Pod"]
    assert not model.state().placed


def test_a_partly_bound_gang_keeps_its_bound_members_resources(api):
    fake, kube = api
    pods = [K.pod(f"g-{i}", gpu=8, labels={GROUP: "g"}) for i in range(3)]
    model = load(fake, [K.node("n0"), K.node("n1"), K.node("n2"), K.podgroup("g", 3), *pods])
    pipeline = Pipeline(model, "metronome", kube)
    fake.fail_next("POST", r"/pods/g-2/binding", 500)
    jsons = [model.objects["Pod"][f"default/g-{i}"] for i in range(3)]
    decision = pipeline.schedule_gang(jsons)
    assert "500" in decision.message
    bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in fake.list("v1", "Pod")}
    assert bound["g-2"] is None and bound["g-0"] and bound["g-1"]
    used = model.state().used_gpu.tolist()
    assert sorted(used) == [0.0, 8.0, 8.0]  # the two bound members still hold their GPUs


# ------------------------------------------------------------------ events
def test_a_recreated_pods_entry_is_not_taken_for_its_deleted_namesake(api):
    fake, kube = api
    web = K.pod("web-0", labels=K.job_labels("web"))
    objs = [K.node("n0"), K.podbandwidth("a", period=100, duty=0.5, gbps=10, match={JOB: "a"}),
            K.pod("a-0", labels=K.job_labels("a"), node="n0", phase="Running"), web]
    model = load(fake, objs)
    model.on_event("Pod", "DELETED", model.objects["Pod"]["default/web-0"])
    fake.delete("v1", "Pod", "web-0", "default")
    fake.create(K.pod("web-0", labels=K.job_labels("web")))
    deliver(model, fake, [web])
    assert "default/web-0" not in model.deleted_pods
    # the extender bound the new web-0 and recorded it; the informer has not caught up
    nbw = fake.create({**K.nodebandwidth("n0"), "status": {"pods": [
        {**entry("web-0", 0.0, int(time.time() * 1e6)), "job": "default/web"}],
        "basePeriodMs": 100.0}})
    model.on_event("NodeBandwidth", "ADDED", nbw)
    ControllerService(model, kube).reconcile()
    names = [e["name"] for e in fake.get(NBW, "NodeBandwidth", "n0")["status"]["pods"]]
    assert names == ["a-0", "web-0"]


def test_a_status_written_back_by_someone_else_is_not_taken_for_our_echo():
    model = ClusterModel()
    for o in two_jobs_on_n0():
        model.on_event(o["kind"], "ADDED", o)
    model.on_event("NodeBandwidth", "ADDED", recorded(1, 0.0))
    ours = recorded(2, 50.0)
    model.expect("NodeBandwidth", "n0", ours["status"])
    model.on_event("NodeBandwidth", "MODIFIED", ours, reflected=True)
    model.on_event("NodeBandwidth", "MODIFIED", recorded(3, 30.0))  # another writer
    assert shift_of(model, "default/b-0") == 30.0
    model.on_event("NodeBandwidth", "MODIFIED", recorded(4, 50.0))  # and back
    assert shift_of(model, "default/b-0") == 50.0


def test_our_own_echo_needs_no_rebuild():
    model = ClusterModel()
    for o in two_jobs_on_n0():
        model.on_event(o["kind"], "ADDED", o)
    model.on_event("NodeBandwidth", "ADDED", recorded(1, 50.0))
    model.state()
    rebuilds = model.rebuilds
    ours = recorded(2, 50.0)
    ours["status"]["basePeriodMs"] = 100.5
    model.expect("NodeBandwidth", "n0", {"basePeriodMs": 100.5})
    model.on_event("NodeBandwidth", "MODIFIED", recorded(1, 50.0))  # a late, older echo
    model.on_event("NodeBandwidth", "MODIFIED", ours)               # our write's echo
    model.state()
    assert model.rebuilds == rebuilds


@pytest.mark.parametrize("incremental", [True, False])
def test_one_event_changing_a_link_and_its_status_applies_both(incremental):
    model = ClusterModel(incremental_nodes=incremental)
    for o in two_jobs_on_n0():
        model.on_event(o["kind"], "ADDED", o)
    model.on_event("NodeBandwidth", "ADDED", recorded(1, 50.0))
    assert shift_of(model, "default/b-0") == 50.0
    new = recorded(9, 25.0)
    new["spec"]["bandwidth"] = 20
    model.on_event("NodeBandwidth", "MODIFIED", new)
    state = model.state()
    assert state.placed["default/b-0"].shift_ms == 25.0
    assert state.cluster.link_gbps[0] == 20.0


def test_a_spec_change_in_the_answer_to_our_status_write_is_not_lost(api):
    fake, kube = api
    objs = [K.node("n0"), K.podbandwidth("a", period=100, duty=0.5, gbps=10, match={JOB: "a"}),
            K.pod("a-0", labels=K.job_labels("a"), node="n0", phase="Running")]
    model = load(fake, objs)
    assert model.state().placed["default/a-0"].pod.pattern.period_ms == 100.0
    pbw = fake.get(NBW, "PodBandwidth", "a", "default")
    pbw["spec"]["period"] = 200  # a user's edit; its watch event is still on its way
    fake.update(pbw)
    in_flight = fake.get(NBW, "PodBandwidth", "a", "default")
    ControllerService(model, kube)._reconcile_matches()  # answered with the new spec
    model.on_event("PodBandwidth", "MODIFIED", in_flight)
    model.on_event("PodBandwidth", "MODIFIED", fake.get(NBW, "PodBandwidth", "a", "default"))
    assert model.state().placed["default/a-0"].pod.pattern.period_ms == 200.0


def test_a_nodebandwidth_deleted_under_the_writer_gives_its_link_back(api):
    fake, kube = api
    model = load(fake, [K.node("n0"), K.nodebandwidth("n0", bandwidth=10)])
    assert model.state().cluster.link_gbps[0] == 10.0
    old = fake.get(NBW, "NodeBandwidth", "n0")
    fake.delete(NBW, "NodeBandwidth", "n0")  # an admin deletes it
    assert write_status(kube, model, "n0", lambda current: {"pods": [], "basePeriodMs": 0.0})
    model.on_event("NodeBandwidth", "DELETED", old)  # the watch catches up, late
    assert model.objects["NodeBandwidth"]["n0"]["metadata"]["uid"] \
        == fake.get(NBW, "NodeBandwidth", "n0")["metadata"]["uid"]
    assert model.state().cluster.link_gbps[0] == 25.0  # the default again


def test_the_controller_replans_after_a_link_capacity_change():
    model = ClusterModel()
    objs = [K.node("n0"), K.node("n1"),
            K.podbandwidth("a", period=100, duty=0.5, gbps=20, match={JOB: "a"}),
            K.podbandwidth("b", period=100, duty=0.5, gbps=20, match={JOB: "b"}),
            K.pod("a-0", labels=K.job_labels("a"), node="n0", phase="Running"),
            K.pod("b-0", labels=K.job_labels("b"), node="n0", phase="Running")]
    for o in objs:
        model.on_event(o["kind"], "ADDED", o)
    nbw = K.nodebandwidth("n0", bandwidth=25)
    model.on_event("NodeBandwidth", "ADDED", nbw)
    service = ControllerService(model, None)
    assert service.current().links[0].capacity_gbps == 25.0
    wider = copy.deepcopy(nbw)
    wider["metadata"]["resourceVersion"] = "2"
    wider["spec"]["bandwidth"] = 100
    model.on_event("NodeBandwidth", "MODIFIED", wider)
    assert 0 not in service.current().links  # 2 x 20 Gbps fit in 100: nothing to plan


# ------------------------------------------------------------------ bad input
def test_a_pod_with_labels_that_are_no_map_is_a_400_even_when_cached():
    model = ClusterModel()
    good = K.pod("x")
    for o in (K.node("n0"), good):
        model.on_event(o["kind"], "ADDED", o)
    client = Client(Extender(Pipeline(model, "metronome")).app)
    assert client.post("/filter", json={"Pod": good, "NodeNames": ["n0"]}).status_code == 200
    bad = copy.deepcopy(good)
    bad["metadata"]["labels"] = ["not", "a", "map"]  # same name and resourceVersion
    answer = client.post("/filter", json={"Pod": bad, "NodeNames": ["n0"]})
    assert answer.status_code == 400
    assert answer.get_json()["Error"].startswith("Pod.metadata.labels: ")


# ------------------------------------------------------------------ shutdown
def test_close_writes_what_is_pending_and_stops_the_writer_thread():
    before = sum(t.name == "status-writer" for t in threading.enumerate())
    for _ in range(3):
        model = ClusterModel()
        for o in (K.node("n0"), K.pod("p")):
            model.on_event(o["kind"], "ADDED", o)
        pipeline = Pipeline(model, "metronome", None)
        pipeline.async_status = True
        pipeline.bind("default", "p", None, "n0")
        assert pipeline.close(5.0)
        pipeline.close(1.0)  # twice is harmless
    assert sum(t.name == "status-writer" for t in threading.enumerate()) == before


# ------------------------------------------------------------------ placement order
def _scheduled(pod: dict[str, Any], at: float) -> dict[str, Any]:
    """``pod`` as the API has it after a binding at ``at`` (epoch s)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True",
                                    "lastTransitionTime": stamp}]
    return pod


def test_an_entry_the_controller_records_is_ordered_by_bind_time(api):
    fake, kube = api
    now = time.time()
    old = "2026-01-01T00:00:00Z"  # created long before it was bound
    x = _scheduled(K.pod("x", labels=K.job_labels("b"), node="n0", phase="Running",
                         created=old), now - 5)
    y = _scheduled(K.pod("y", labels=K.job_labels("a"), node="n0", phase="Running",
                         created="2026-01-01T00:00:10Z"), now - 60)
    objs = [K.node("n0"),
            K.podbandwidth("a", period=100, duty=0.5, gbps=20, match={JOB: "a"}),
            K.podbandwidth("b", period=100, duty=0.5, gbps=20, match={JOB: "b"}), x, y]
    for o in objs:
        fake.create(o)
    model = ClusterModel()
    for o in objs:  # with their own timestamps (the fake stamps its own creation time)
        model.on_event(o["kind"], "ADDED", o)
    # unrecorded pods are ordered by bind time: y (bound a minute ago) before x
    assert model.state().node_pods[0] == ["default/y", "default/x"]
    ControllerService(model, kube).reconcile()
    entries = {e["name"]: e for e in fake.get(NBW, "NodeBandwidth", "n0")["status"]["pods"]}
    assert entries["x"]["order"] == int(now - 5) * 1_000_000
    # a writer whose informer has not seen x yet keeps its entry (bound 5 s ago, within
    # the grace for bindings on their way), which a creation-time order would expire
    assert merge_entries([], [entries["x"]], "n0", pods={}, deleted=())
    model.on_event("NodeBandwidth", "MODIFIED", fake.get(NBW, "NodeBandwidth", "n0"))
    live = model.state().node_pods[0]
    model.invalidate()
    assert model.state().node_pods[0] == live == ["default/y", "default/x"]
