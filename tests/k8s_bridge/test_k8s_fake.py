"""Tests of the fake Kubernetes API server (``tests/k8s_bridge/k8s_fake.py``), driven through the
official ``kubernetes`` client and through plain ``urllib``.

Findings about the client (37.x) that the fake reproduces, pinned here:

* a dropped watch makes ``Watch().stream`` raise ``urllib3.exceptions.ProtocolError``
  ("Response ended prematurely"), with or without ``timeout_seconds``;
* a 410 ERROR event makes it raise ``ApiException`` (status 410); without
  ``timeout_seconds`` it re-watches once from the same resourceVersion first;
* ``create_namespaced_binding`` binds the pod but then fails to deserialize the ``Status``
  the server answers into a ``V1Binding`` (kubernetes-client/python#547): call it with
  ``_preload_content=False``;
* ``CustomObjectsApi.patch_*`` always sends ``application/merge-patch+json``: a JSON patch
  (a list) needs ``_content_type="application/json-patch+json"``. ``CoreV1Api.patch_*``
  sends a dict as a strategic merge patch and a list as a JSON patch.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pydantic
import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.k8s_bridge.k8s_fake import ApiError, FakeApiServer

GROUP, VERSION = "tdmcore.io", "v1alpha1"
NODE_BW = f"{GROUP}/{VERSION}"

# --------------------------------------------------------------------------- helpers


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
    }


def pod(
    name: str,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    node_name: str | None = None,
    scheduler: str = "default-scheduler",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox"}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def pod_bandwidth(name: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": NODE_BW,
        "kind": "PodBandwidth",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"gbps": 10},
    }


def binding(pod_name: str, node_name: str) -> client.V1Binding:
    return client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod_name),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node_name),
    )


def in_background(fn: Callable[[], Any]) -> Callable[[float], Any]:
    """Start ``fn`` on a daemon thread; the returned function waits at most ``seconds`` for
    its result (re-raising its exception) and fails instead of hanging."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def result(seconds: float) -> Any:
        thread.join(seconds)
        assert not thread.is_alive(), f"did not finish within {seconds} s"
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")

    return result


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on a thread and fail (instead of hanging) if it takes over ``seconds``."""
    return in_background(fn)(seconds)


def watch_pods(v1: client.CoreV1Api, **kwargs: Any) -> list[dict[str, Any]]:
    """Every event of ``Watch().stream(v1.list_pod_for_all_namespaces, **kwargs)``."""
    return list(watch.Watch().stream(v1.list_pod_for_all_namespaces, **kwargs))


def when_watching(
    fake: FakeApiServer, action: Callable[[], None], count: int = 1
) -> Callable[[float], Any]:
    """Run ``action`` on a thread as soon as ``count`` watches are open; returns the wait
    for its end (see :func:`in_background`)."""

    def run() -> None:
        deadline = time.monotonic() + 5
        while fake.watch_count < count:
            assert time.monotonic() < deadline, f"{count} watches never opened"
            time.sleep(0.01)
        action()

    return in_background(run)


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def raw(
    fake: FakeApiServer,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    """(HTTP code, decoded JSON body) of one request through urllib."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(fake.url + path, data=data, method=method)
    request.add_header("Content-Type", content_type)
    try:
        with _OPENER.open(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def raw_watch_lines(fake: FakeApiServer, path: str) -> Iterator[dict[str, Any]]:
    """The events of a watch through urllib, until the server ends the stream.

    Reads with ``read1``, which raises ``http.client.IncompleteRead`` when the connection
    is cut before the terminating chunk; iterating over the response's lines would not:
    ``readline`` on a chunked ``HTTPResponse`` treats a cut-off stream as its end.
    """
    with _OPENER.open(fake.url + path, timeout=5) as response:
        assert response.status == 200
        assert response.headers["Transfer-Encoding"] == "chunked"
        buffer = b""
        while chunk := response.read1(65536):
            *lines, buffer = (buffer + chunk).split(b"\n")
            yield from (json.loads(line) for line in lines if line)
        assert buffer == b""


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def api(fake: FakeApiServer) -> Iterator[client.ApiClient]:
    with client.ApiClient(client.Configuration(host=fake.url)) as api_client:
        yield api_client


@pytest.fixture
def v1(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


# --------------------------------------------------------------------------- list / get


def test_lists_and_their_resource_version(
    fake: FakeApiServer, v1: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    fake.create(node("n2"))
    fake.create(node("n1"))
    fake.create(pod("a", "ns1"))
    fake.create(pod("b", "ns2"))
    fake.create({**node("bw1"), "apiVersion": NODE_BW, "kind": "NodeBandwidth"})

    nodes = v1.list_node()
    assert [n.metadata.name for n in nodes.items] == ["n1", "n2"]
    assert nodes.metadata.resource_version == str(fake.resource_version)
    assert [p.metadata.name for p in v1.list_pod_for_all_namespaces().items] == ["a", "b"]
    assert [p.metadata.name for p in v1.list_namespaced_pod("ns2").items] == ["b"]

    bws = custom.list_cluster_custom_object(GROUP, VERSION, "nodebandwidths")
    assert bws["kind"] == "NodeBandwidthList" and bws["apiVersion"] == NODE_BW
    assert [o["metadata"]["name"] for o in bws["items"]] == ["bw1"]
    assert bws["metadata"]["resourceVersion"] == str(fake.resource_version)

    fake.create(node("n3"))  # the list resourceVersion follows every write
    assert v1.list_node().metadata.resource_version == str(fake.resource_version)


def test_server_fills_in_metadata_and_generation(
    fake: FakeApiServer, custom: client.CustomObjectsApi
) -> None:
    before = fake.resource_version
    created = custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        "podbandwidths",
        {"metadata": {"name": "x"}, "spec": {"a": 1}, "status": {"set": "by a controller"}},
    )
    meta = created["metadata"]
    assert created["kind"] == "PodBandwidth" and created["apiVersion"] == NODE_BW
    assert meta["resourceVersion"] == str(before + 1) == str(fake.resource_version)
    assert len(meta["uid"]) == 36 and meta["creationTimestamp"].endswith("Z")
    assert meta["generation"] == 1
    assert "status" not in created  # status has its own subresource: ignored on create

    args = (GROUP, VERSION, "default", "podbandwidths", "x")
    status_only = custom.patch_namespaced_custom_object_status(*args, {"status": {"ok": True}})
    assert status_only["metadata"]["generation"] == 1
    spec_change = custom.patch_namespaced_custom_object(*args, {"spec": {"a": 2}})
    assert spec_change["metadata"]["generation"] == 2
    assert spec_change["metadata"]["uid"] == meta["uid"]
    assert int(spec_change["metadata"]["resourceVersion"]) == before + 3


def test_get_missing_object_is_a_not_found_status(v1: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        v1.read_namespaced_pod("nope", "default")
    assert err.value.status == 404
    status = json.loads(err.value.body)
    assert status["kind"] == "Status" and status["reason"] == "NotFound"
    assert status["message"] == 'pods "nope" not found'


# --------------------------------------------------------------------------- watch


def test_watch_sees_concurrent_writes_in_order(fake: FakeApiServer, v1: client.CoreV1Api) -> None:
    fake.create(pod("old"))
    rv = v1.list_pod_for_all_namespaces().metadata.resource_version

    def writes() -> None:
        fake.create(pod("p", "ns1"))
        v1.patch_namespaced_pod("p", "ns1", {"metadata": {"labels": {"x": "y"}}})
        v1.delete_namespaced_pod("p", "ns1")

    done = when_watching(fake, writes)
    stream = watch.Watch()

    def consume() -> list[tuple[str, str, str]]:
        seen = []
        for event in stream.stream(
            v1.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=2
        ):
            obj = event["object"]
            seen.append((event["type"], obj.metadata.name, obj.metadata.resource_version))
            if event["type"] == "DELETED":
                stream.stop()
        return seen

    seen = within(5, consume)
    done(5)  # the writes (and their responses) are over before the server stops
    assert [(t, name) for t, name, _ in seen] == [
        ("ADDED", "p"),
        ("MODIFIED", "p"),
        ("DELETED", "p"),
    ]
    versions = [int(v) for _, _, v in seen]
    assert versions == sorted(versions) and versions[0] > int(rv)
    assert versions[-1] == fake.resource_version  # DELETED carries the deletion's version


def test_watch_replays_history_or_lists_current_objects(fake: FakeApiServer) -> None:
    fake.create(pod("a"))
    rv = fake.resource_version
    fake.create(pod("b"))
    fake.delete("v1", "Pod", "a", "default")

    replay = list(
        raw_watch_lines(fake, f"/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=0.1")
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in replay] == [
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    for start in ("", "&resourceVersion=0"):  # no version: the current objects, as ADDED
        initial = list(raw_watch_lines(fake, f"/api/v1/pods?watch=1&timeoutSeconds=0.1{start}"))
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in initial] == [("ADDED", "b")]

    fake.create(pod("c", "other"))  # a namespaced watch sees its namespace only
    path = f"/api/v1/namespaces/other/pods?watch=true&resourceVersion={rv}&timeoutSeconds=0.1"
    assert [e["object"]["metadata"]["name"] for e in raw_watch_lines(fake, path)] == ["c"]


def test_watch_ends_after_timeout_seconds(fake: FakeApiServer, v1: client.CoreV1Api) -> None:
    started = time.monotonic()
    events = within(5, lambda: list(watch.Watch().stream(v1.list_node, timeout_seconds=1)))
    assert events == []
    assert 0.9 < time.monotonic() - started < 3
    assert fake.watch_count == 0


def test_bookmarks_reach_watches_that_asked(fake: FakeApiServer, v1: client.CoreV1Api) -> None:
    fake.create(pod("a"))
    rv = str(fake.resource_version)
    bookmarked = when_watching(fake, fake.bookmark, count=2)
    with_bookmarks = watch.Watch()

    def first_event() -> dict[str, Any]:
        for event in with_bookmarks.stream(
            v1.list_pod_for_all_namespaces,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=2,
        ):
            with_bookmarks.stop()
            return event
        raise AssertionError("no event")

    without_bookmarks = in_background(
        lambda: watch_pods(v1, resource_version=rv, timeout_seconds=1)
    )
    event = within(5, first_event)
    bookmarked(5)
    assert event["type"] == "BOOKMARK"
    assert event["raw_object"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": rv},
    }
    assert with_bookmarks.resource_version == rv  # the client tracks the bookmark's version
    assert without_bookmarks(5) == []  # no allowWatchBookmarks: no BOOKMARK


def test_watch_from_compacted_version_is_410(fake: FakeApiServer, v1: client.CoreV1Api) -> None:
    fake.create(pod("a"))
    rv = str(fake.resource_version)
    fake.create(pod("b"))
    fake.compact()

    with pytest.raises(ApiException) as err:
        within(5, lambda: watch_pods(v1, resource_version=rv, timeout_seconds=2))
    assert err.value.status == 410
    assert f"Expired: too old resource version: {rv} ({fake.resource_version})" in str(
        err.value.reason
    )

    # Without timeout_seconds the client re-watches once from the same version, then raises.
    fake.requests.clear()
    with pytest.raises(ApiException) as err:
        within(5, lambda: watch_pods(v1, resource_version=rv))
    assert err.value.status == 410
    assert [m for m, _ in fake.requests] == ["GET", "GET"]

    # On the wire: 200, one ERROR event carrying a 410 Status, end of stream.
    events = list(raw_watch_lines(fake, f"/api/v1/pods?watch=true&resourceVersion={rv}"))
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")

    # From the current version the watch works again.
    current = str(fake.resource_version)
    path = f"/api/v1/pods?watch=true&resourceVersion={current}&timeoutSeconds=0.1"
    assert list(raw_watch_lines(fake, path)) == []


def test_bounded_history_expires_old_versions() -> None:
    with FakeApiServer(history=2) as fake:
        fake.create(node("a"))
        first = fake.resource_version
        fake.create(node("b"))
        path = f"/api/v1/nodes?watch=true&resourceVersion={first}&timeoutSeconds=0.1"
        assert [e["type"] for e in raw_watch_lines(fake, path)] == ["ADDED"]
        fake.create(node("c"))  # the history holds the events after `first` (b, c)
        assert [e["type"] for e in raw_watch_lines(fake, path)] == ["ADDED", "ADDED"]
        fake.create(node("d"))  # the history holds c and d: b, right after `first`, is gone
        assert [e["type"] for e in raw_watch_lines(fake, path)] == ["ERROR"]


def test_dropped_watch_raises_protocol_error(fake: FakeApiServer, v1: client.CoreV1Api) -> None:
    fake.create(pod("a"))
    for kwargs in ({"timeout_seconds": 10}, {}):
        dropped = when_watching(fake, fake.drop_watches)
        seen: list[str] = []

        def consume(kwargs: dict[str, Any] = kwargs) -> None:
            for event in watch.Watch().stream(v1.list_pod_for_all_namespaces, **kwargs):
                seen.append(event["type"])

        started = time.monotonic()
        with pytest.raises(urllib3.exceptions.ProtocolError, match="ended prematurely"):
            within(5, consume)
        dropped(5)
        assert seen == ["ADDED"]
        assert time.monotonic() - started < 3


def test_dropped_watch_through_urllib_is_an_incomplete_read(fake: FakeApiServer) -> None:
    fake.create(node("a"))
    dropped = when_watching(fake, fake.drop_watches)
    events: list[dict[str, Any]] = []

    def consume() -> None:
        events.extend(raw_watch_lines(fake, "/api/v1/nodes?watch=true&timeoutSeconds=10"))

    with pytest.raises(http.client.IncompleteRead):
        within(5, consume)
    dropped(5)
    assert [e["type"] for e in events] == ["ADDED"]


def test_watch_label_selector_turns_unmatching_change_into_deleted(
    fake: FakeApiServer, v1: client.CoreV1Api
) -> None:
    fake.create(pod("a", labels={"app": "x"}))
    rv = str(fake.resource_version)
    fake.create(pod("b", labels={"app": "other"}))
    v1.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"app": "y"}}})
    v1.patch_namespaced_pod("b", "default", {"metadata": {"labels": {"app": "x"}}})
    path = f"/api/v1/pods?watch=true&resourceVersion={rv}&labelSelector=app%3Dx&timeoutSeconds=0.1"
    events = [(e["type"], e["object"]["metadata"]["name"]) for e in raw_watch_lines(fake, path)]
    assert events == [("DELETED", "a"), ("ADDED", "b")]


# --------------------------------------------------------------------------- faults


def test_fail_next_then_success(fake: FakeApiServer, v1: client.CoreV1Api) -> None:
    fake.create(node("n1"))
    fake.fail_next("GET", r"/api/v1/nodes$", status=500, count=2)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            v1.list_node()
        assert err.value.status == 500
        assert json.loads(err.value.body)["reason"] == "InternalError"
    assert [n.metadata.name for n in v1.list_node().items] == ["n1"]

    fake.fail_next("GET", "watch=true", status=500)  # a failing watch request
    with pytest.raises(ApiException) as err:
        within(5, lambda: watch_pods(v1, timeout_seconds=1))
    assert err.value.status == 500

    fake.fail_next("POST", "/pods", status=503)
    with pytest.raises(ApiException) as err:
        v1.create_namespaced_pod("default", pod("p"))
    assert err.value.status == 503
    assert fake.get("v1", "Pod", "p") is None  # a failed request does not write
    v1.create_namespaced_pod("default", pod("p"))


# --------------------------------------------------------------------------- conflicts


def test_create_existing_is_already_exists(fake: FakeApiServer, v1: client.CoreV1Api) -> None:
    v1.create_namespaced_pod("default", pod("p"))
    with pytest.raises(ApiException) as err:
        v1.create_namespaced_pod("default", pod("p"))
    assert err.value.status == 409
    assert json.loads(err.value.body)["reason"] == "AlreadyExists"
    with pytest.raises(ApiError) as direct:
        fake.create(pod("p"))
    assert direct.value.code == 409


def test_stale_put_is_a_conflict(fake: FakeApiServer, v1: client.CoreV1Api) -> None:
    fake.create(node("n1"))
    stale = v1.read_node("n1")
    fresh = v1.read_node("n1")
    fresh.metadata.labels = {"a": "1"}
    assert v1.replace_node("n1", fresh).metadata.labels == {"a": "1"}

    stale.metadata.labels = {"a": "2"}
    with pytest.raises(ApiException) as err:
        v1.replace_node("n1", stale)
    assert err.value.status == 409
    status = json.loads(err.value.body)
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Operation cannot be fulfilled on nodes "n1": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert fake.get("v1", "Node", "n1")["metadata"]["labels"] == {"a": "1"}


def test_binding(fake: FakeApiServer, v1: client.CoreV1Api) -> None:
    fake.create(node("n1"))
    fake.create(pod("p1"))
    fake.create(pod("p2"))

    response = v1.create_namespaced_binding("default", binding("p1", "n1"), _preload_content=False)
    assert response.status == 201
    assert json.loads(response.data)["status"] == "Success"
    bound = v1.read_namespaced_pod("p1", "default")
    assert bound.spec.node_name == "n1"
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]

    with pytest.raises(ApiException) as err:  # a second binding
        v1.create_namespaced_pod_binding("p1", "default", binding("p1", "n1"))
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "Conflict"

    with pytest.raises(ApiException) as err:
        v1.create_namespaced_binding("default", binding("ghost", "n1"), _preload_content=False)
    assert err.value.status == 404

    # Deserialized, the client cannot read the real server's Status reply as a V1Binding
    # (kubernetes-client/python#547): the pod is bound, yet the call raises.
    with pytest.raises(pydantic.ValidationError, match="target"):
        v1.create_namespaced_pod_binding("p2", "default", binding("p2", "n1"))
    assert fake.get("v1", "Pod", "p2")["spec"]["nodeName"] == "n1"


# --------------------------------------------------------------------------- patches


def test_custom_object_status_merge_and_json_patch(
    fake: FakeApiServer, custom: client.CustomObjectsApi
) -> None:
    fake.create({**pod_bandwidth("pb"), "status": {"phase": "Pending"}})
    args = (GROUP, VERSION, "default", "podbandwidths", "pb")

    merged = custom.patch_namespaced_custom_object_status(
        *args, {"status": {"phase": "Running", "rate": 3}, "spec": {"gbps": 99}}
    )
    assert merged["status"] == {"phase": "Running", "rate": 3}
    assert merged["spec"] == {"gbps": 10}  # the status subresource changes status only

    rv = merged["metadata"]["resourceVersion"]
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "replace", "path": "/status/rate", "value": 4},
        {"op": "remove", "path": "/status/phase"},
    ]
    patched = custom.patch_namespaced_custom_object_status(
        *args, ops, _content_type="application/json-patch+json"
    )
    assert patched["status"] == {"rate": 4}

    stale = [ops[0], {"op": "replace", "path": "/status/rate", "value": 5}]
    with pytest.raises(ApiException) as err:  # optimistic lock on a stale version
        custom.patch_namespaced_custom_object_status(
            *args, stale, _content_type="application/json-patch+json"
        )
    assert err.value.status == 422 and json.loads(err.value.body)["reason"] == "Invalid"
    assert fake.get(NODE_BW, "PodBandwidth", "pb", "default")["status"] == {"rate": 4}

    with pytest.raises(ApiException) as err:  # merge patch with a stale version
        custom.patch_namespaced_custom_object_status(
            *args, {"metadata": {"resourceVersion": rv}, "status": {"rate": 5}}
        )
    assert err.value.status == 409

    with pytest.raises(ApiException) as err:  # a list sent as a merge patch (the default)
        custom.patch_namespaced_custom_object_status(*args, ops[1:])
    assert err.value.status == 400

    main = custom.patch_namespaced_custom_object(*args, {"spec": {"gbps": 1}, "status": None})
    assert main["spec"] == {"gbps": 1} and main["status"] == {"rate": 4}

    fake.create({**node("nb"), "apiVersion": NODE_BW, "kind": "NodeBandwidth"})
    nb = (GROUP, VERSION, "nodebandwidths", "nb")
    cluster = custom.patch_cluster_custom_object(
        *nb,
        [{"op": "add", "path": "/spec", "value": {"gbps": 40}}],
        _content_type="application/json-patch+json",
    )
    assert cluster["spec"] == {"gbps": 40}
    cluster = custom.patch_cluster_custom_object_status(*nb, {"status": {"free": 40}})
    assert cluster["status"] == {"free": 40}


def test_core_patch_dict_and_list(fake: FakeApiServer, v1: client.CoreV1Api) -> None:
    fake.create(node("n1", {"keep": "1"}))
    fake.create(pod("p"))
    # A dict goes out as a strategic merge patch (applied as a merge patch) ...
    patched = v1.patch_node("n1", {"metadata": {"labels": {"new": "2", "keep": None}}})
    assert patched.metadata.labels == {"new": "2"}
    # ... and a list as a JSON patch.
    patched = v1.patch_node("n1", [{"op": "add", "path": "/spec/unschedulable", "value": True}])
    assert patched.spec.unschedulable is True
    patched = v1.patch_namespaced_pod(
        "p", "default", [{"op": "add", "path": "/metadata/labels/x", "value": "y"}]
    )
    assert patched.metadata.labels == {"x": "y"}
    status = v1.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    assert status.status.phase == "Running"


def test_put_keeps_status_and_put_status_changes_only_status(fake: FakeApiServer) -> None:
    fake.create({**pod_bandwidth("pb"), "status": {"phase": "Pending"}})
    path = "/apis/tdmcore.io/v1alpha1/namespaces/default/podbandwidths/pb"
    current = fake.get(NODE_BW, "PodBandwidth", "pb", "default")

    body = {**current, "spec": {"gbps": 20}, "status": {"phase": "Hacked"}}
    code, stored = raw(fake, "PUT", path, body)
    assert (
        code == 200 and stored["spec"] == {"gbps": 20} and stored["status"] == {"phase": "Pending"}
    )

    body = {**stored, "spec": {"gbps": 30}, "status": {"phase": "Running"}}
    code, stored = raw(fake, "PUT", path + "/status", body)
    assert (
        code == 200 and stored["spec"] == {"gbps": 20} and stored["status"] == {"phase": "Running"}
    )

    # Nothing changed: no write, as on a real server.
    version = fake.resource_version
    assert raw(fake, "PUT", path, stored) == (200, stored)
    assert fake.resource_version == version


def test_leases(api: client.ApiClient) -> None:
    leases = client.CoordinationV1Api(api)
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="leader", namespace="kube-system"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15),
    )
    created = leases.create_namespaced_lease("kube-system", lease)
    assert created.spec.holder_identity == "a"

    created.spec.holder_identity = "b"
    replaced = leases.replace_namespaced_lease("leader", "kube-system", created)
    assert replaced.spec.holder_identity == "b"
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)

    created.spec.holder_identity = "c"  # still carries the old resourceVersion
    with pytest.raises(ApiException) as err:
        leases.replace_namespaced_lease("leader", "kube-system", created)
    assert err.value.status == 409
    assert leases.read_namespaced_lease("leader", "kube-system").spec.holder_identity == "b"


# --------------------------------------------------------------------------- selectors


@pytest.fixture
def pods(fake: FakeApiServer) -> FakeApiServer:
    fake.create(pod("a", "ns1", {"app": "web", "tier": "front"}, node_name="n1"))
    fake.create(pod("b", "ns1", {"app": "web"}, scheduler="tdm"))
    fake.create(pod("c", "ns2", {"app": "db"}, node_name="n2", scheduler="tdm"))
    return fake


@pytest.mark.parametrize(
    ("label_selector", "expected"),
    [
        ("app=web", ["a", "b"]),
        ("app==web,tier=front", ["a"]),
        ("app!=web", ["c"]),
        ("tier!=front", ["b", "c"]),
        ("tier", ["a"]),
        ("!tier", ["b", "c"]),
        ("app in (db, web),!tier", ["b", "c"]),
        ("app notin (web)", ["c"]),
        ("", ["a", "b", "c"]),
    ],
)
def test_label_selectors(
    pods: FakeApiServer, v1: client.CoreV1Api, label_selector: str, expected: list[str]
) -> None:
    found = v1.list_pod_for_all_namespaces(label_selector=label_selector)
    assert [p.metadata.name for p in found.items] == expected


@pytest.mark.parametrize(
    ("field_selector", "expected"),
    [
        ("spec.nodeName=", ["b"]),
        ("spec.nodeName!=", ["a", "c"]),
        ("spec.nodeName==n2", ["c"]),
        ("spec.schedulerName=tdm,spec.nodeName=", ["b"]),
        ("metadata.namespace!=ns1", ["c"]),
        ("metadata.name=a", ["a"]),
    ],
)
def test_field_selectors(
    pods: FakeApiServer, v1: client.CoreV1Api, field_selector: str, expected: list[str]
) -> None:
    found = v1.list_pod_for_all_namespaces(field_selector=field_selector)
    assert [p.metadata.name for p in found.items] == expected


def test_bad_selector_is_bad_request(pods: FakeApiServer, v1: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        v1.list_pod_for_all_namespaces(field_selector="spec.nodeName")
    assert err.value.status == 400


# --------------------------------------------------------------------------- raw HTTP


def test_raw_http_errors_and_delete(fake: FakeApiServer) -> None:
    code, status = raw(fake, "GET", "/api/v1/widgets")
    assert code == 404 and status["kind"] == "Status" and status["reason"] == "NotFound"
    assert raw(fake, "GET", "/apis/tdmcore.io/v1alpha1/podbandwidths/x")[0] == 404

    code, status = raw(fake, "POST", "/api/v1/namespaces/default/configmaps", b"{not json")
    assert code == 400 and status["reason"] == "BadRequest" and status["status"] == "Failure"

    code, created = raw(
        fake,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        {"metadata": {"name": "cm"}, "data": {"k": "v"}},
    )
    assert code == 201 and created["kind"] == "ConfigMap" and created["data"] == {"k": "v"}
    code, generated = raw(
        fake, "POST", "/api/v1/namespaces/ns/configmaps", {"metadata": {"generateName": "g-"}}
    )
    assert code == 201 and generated["metadata"]["name"].startswith("g-")
    code, listed = raw(fake, "GET", "/api/v1/namespaces/default/configmaps")
    assert code == 200 and listed["kind"] == "ConfigMapList" and len(listed["items"]) == 1

    code, status = raw(fake, "DELETE", "/api/v1/namespaces/default/configmaps/cm", b"{")
    assert code == 400 and status["reason"] == "BadRequest"  # bad DeleteOptions: no delete
    code, last = raw(fake, "DELETE", "/api/v1/namespaces/default/configmaps/cm")
    assert code == 200 and last["data"] == {"k": "v"}
    assert int(last["metadata"]["resourceVersion"]) == fake.resource_version
    assert raw(fake, "DELETE", "/api/v1/namespaces/default/configmaps/cm")[0] == 404

    fake.create(pod("x"))
    code, status = raw(
        fake,
        "PATCH",
        "/api/v1/namespaces/default/pods/x",
        {},
        content_type="application/apply-patch+yaml",
    )
    assert code == 415 and status["reason"] == "UnsupportedMediaType"  # no server-side apply
    assert ("PATCH", "/api/v1/namespaces/default/pods/x") in fake.requests


def test_direct_store_access(fake: FakeApiServer) -> None:
    start = fake.resource_version
    fake.create(pod("p", "ns"))
    assert fake.resource_version == start + 1

    copy_ = fake.get("v1", "Pod", "p", "ns")
    copy_["spec"]["nodeName"] = "mutated"
    assert "nodeName" not in fake.get("v1", "Pod", "p", "ns")["spec"]

    updated = fake.update({**copy_, "status": {"phase": "Running"}})
    assert updated["status"] == {"phase": "Running"} and updated["spec"]["nodeName"] == "mutated"
    assert updated["metadata"]["resourceVersion"] == str(start + 2)
    assert [p["metadata"]["name"] for p in fake.list("v1", "Pod")] == ["p"]
    assert fake.list("v1", "Pod", "other") == []

    fake.delete("v1", "Pod", "p", "ns")
    assert fake.get("v1", "Pod", "p", "ns") is None
    assert fake.resource_version == start + 3
    with pytest.raises(ApiError) as err:
        fake.delete("v1", "Pod", "p", "ns")
    assert err.value.code == 404


def test_stop_with_an_open_watch_does_not_hang() -> None:
    fake = FakeApiServer().start()
    with client.ApiClient(client.Configuration(host=fake.url)) as api_client:
        v1 = client.CoreV1Api(api_client)
        events = in_background(lambda: watch_pods(v1, timeout_seconds=30))
        deadline = time.monotonic() + 5
        while fake.watch_count == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        within(5, fake.stop)
        with pytest.raises(urllib3.exceptions.ProtocolError):  # cut off, like a drop
            events(5)
