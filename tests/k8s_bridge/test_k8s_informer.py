"""list -> watch -> re-list on 410, against the HTTP-level fake API server."""

from __future__ import annotations

import pytest

from k8s_bridge.informer import Informer
from k8s_bridge.kube import ApiError, Conflict, Gone, Kube, NotFound
from tests.k8s_bridge import k8s_objects as K
from tests.k8s_bridge.k8s_env import wait_for
from tests.k8s_bridge.k8s_fake import FakeApiServer


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def __call__(self, kind: str, event: str, obj: dict) -> None:
        self.events.append((event, obj["metadata"]["name"]))


@pytest.fixture()
def fake():
    with FakeApiServer() as server:
        yield server


def start(fake: FakeApiServer, kind: str = "Pod", **kw) -> tuple[Informer, Recorder]:
    rec = Recorder()
    inf = Informer(Kube.connect(host=fake.url), kind, rec, watch_timeout_s=kw.pop("t", 5.0),
                   backoff_s=(0.05, 0.2), **kw).start()
    wait_for(inf.synced.is_set, what="synced")
    return inf, rec


def test_list_then_watch_sees_every_change_in_order(fake):
    fake.create(K.pod("a"))
    inf, rec = start(fake)
    try:
        assert rec.events == [("ADDED", "a")]
        fake.create(K.pod("b"))
        b = fake.get("v1", "Pod", "b", "default")
        b["metadata"]["labels"] = {"x": "y"}
        fake.update(b)
        fake.delete("v1", "Pod", "a", "default")
        wait_for(lambda: len(rec.events) == 4, what="4 events")
        assert rec.events[1:] == [("ADDED", "b"), ("MODIFIED", "b"), ("DELETED", "a")]
        assert set(inf.store) == {"default/b"}
        assert inf.store["default/b"]["metadata"]["labels"] == {"x": "y"}
        assert inf.resource_version == str(fake.resource_version)
        assert inf.lists == 1
    finally:
        inf.stop()
        fake.drop_watches()


def test_bookmark_moves_the_resource_version(fake):
    fake.create(K.pod("a"))
    inf, rec = start(fake)
    try:
        wait_for(lambda: fake.watch_count >= 1, what="watch open")
        fake.create(K.node("n0"))  # another kind: the pod watch sees nothing ...
        fake.bookmark()  # ... but a bookmark carries the new resourceVersion
        wait_for(lambda: inf.resource_version == str(fake.resource_version),
                 what="bookmark applied")
        assert rec.events == [("ADDED", "a")]
    finally:
        inf.stop()
        fake.drop_watches()


def test_gone_relists_and_hands_over_the_difference(fake):
    fake.create(K.pod("a"))
    fake.create(K.pod("b"))
    inf, rec = start(fake, t=1.0)
    try:
        wait_for(lambda: fake.watch_count >= 1, what="watch open")
        # changes the informer misses: the watch is dropped, the history compacted
        fake.drop_watches()
        fake.compact()
        fake.delete("v1", "Pod", "a", "default")
        b = fake.get("v1", "Pod", "b", "default")
        b["metadata"]["labels"] = {"v": "2"}
        fake.update(b)
        fake.compact()
        fake.create(K.pod("c"))
        fake.compact()
        wait_for(lambda: inf.lists >= 2, what="re-list")
        wait_for(lambda: set(inf.store) == {"default/b", "default/c"}, what="store")
        assert ("DELETED", "a") in rec.events
        assert ("MODIFIED", "b") in rec.events
        assert ("ADDED", "c") in rec.events
        assert inf.store["default/b"]["metadata"]["labels"] == {"v": "2"}
    finally:
        inf.stop()
        fake.drop_watches()


def test_dropped_connection_resumes_without_relist(fake):
    inf, rec = start(fake)
    try:
        wait_for(lambda: fake.watch_count >= 1, what="watch open")
        fake.drop_watches()
        # the new watch first: a create racing the drop could still ride the old stream
        wait_for(lambda: inf.watches >= 2, what="watch reopened")
        fake.create(K.pod("late"))
        wait_for(lambda: ("ADDED", "late") in rec.events, what="event after reconnect")
        assert inf.lists == 1  # resumed from its resourceVersion
    finally:
        inf.stop()
        fake.drop_watches()


def test_server_errors_back_off_and_recover(fake):
    fake.fail_next("GET", r"/api/v1/pods", status=500, count=3)
    fake.create(K.pod("a"))
    inf, rec = start(fake)
    try:
        assert inf.errors >= 1
        assert rec.events == [("ADDED", "a")]
    finally:
        inf.stop()
        fake.drop_watches()


def test_error_map(fake):
    kube = Kube.connect(host=fake.url)
    with pytest.raises(NotFound):
        kube.get("Pod", "nope", "default")
    kube.create("Pod", K.pod("a"), "default")
    with pytest.raises(Conflict) as exc:
        kube.create("Pod", K.pod("a"), "default")
    assert exc.value.reason == "AlreadyExists" and not exc.value.retryable
    fake.fail_next("GET", r"/api/v1/nodes", status=503)
    with pytest.raises(ApiError) as exc:
        kube.list("Node")
    assert exc.value.status == 503 and exc.value.retryable
    stale = fake.get("v1", "Pod", "a", "default")
    fresh = dict(stale, metadata=dict(stale["metadata"], labels={"x": "1"}))
    kube.replace("Pod", fresh)
    with pytest.raises(Conflict):
        kube.replace("Pod", stale)  # old resourceVersion
    fake.compact()
    with pytest.raises(Gone):
        list(kube.watch("/api/v1/pods", {"resourceVersion": "1"}, 2.0))


def test_connection_refused_is_retryable():
    kube = Kube.connect(host="http://127.0.0.1:9")
    kube.api_client.configuration.retries = 0
    with pytest.raises(ApiError) as exc:
        kube.list("Node")
    assert exc.value.status == 0 and exc.value.retryable


def test_an_outage_is_one_warning_and_one_recovery_line(fake, caplog):
    # five failed lists in a row: one WARNING for the outage, the rest at DEBUG, and
    # one INFO line when the API server answers again (not a line per retry)
    fake.fail_next("GET", r"/api/v1/pods", status=500, count=5)
    fake.create(K.pod("a"))
    with caplog.at_level("DEBUG", logger="k8s_bridge.informer"):
        inf, rec = start(fake)
        try:
            assert inf.errors == 5 and rec.events == [("ADDED", "a")]
        finally:
            inf.stop()
            fake.drop_watches()
    records = [r for r in caplog.records if r.name == "k8s_bridge.informer"]
    warnings = [r for r in records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "later failures at DEBUG" in warnings[0].message
    assert sum(r.levelname == "DEBUG" and "failure" in r.message for r in records) == 4
    assert [r.message for r in records if r.levelname == "INFO"] == [
        "Pod informer: the API server answers again after 5 failed attempt(s)"]


def test_a_missing_crd_is_named_in_one_line(caplog):
    """An operator's review (2026-11-24): started before the CRDs were applied, the
    informer logged '404 : 404 page not found' and, on the next line, the retry."""
    from tests.k8s_bridge.k8s_fake import RESOURCES

    served = tuple(r for r in RESOURCES if r.kind != "PodBandwidth")
    with FakeApiServer(resources=served) as server, \
            caplog.at_level("WARNING", logger="k8s_bridge.informer"):
        inf = Informer(Kube.connect(host=server.url), "PodBandwidth", Recorder(),
                       backoff_s=(0.05, 0.2)).start()
        try:
            wait_for(lambda: caplog.records, what="a warning")
        finally:
            inf.stop()
    [record] = caplog.records
    text = record.getMessage()
    assert "podbandwidths.tdmcore.io" in text and "CustomResourceDefinition" in text, text
    assert "\n" not in text


def test_a_text_error_body_is_one_line():
    from k8s_bridge.kube import error_for

    assert str(error_for(404, b"404 page not found\n")) == "404 : 404 page not found"


def test_an_unreachable_api_server_is_said_in_a_short_line():
    """An operator's review (2026-11-24): each informer's outage WARNING was several
    hundred characters of urllib3's pool and connection reprs."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ApiError) as caught:
        Kube.connect(host=f"http://127.0.0.1:{port}").request("GET", "/api/v1/nodes",
                                                              query={"limit": 1})
    text = str(caught.value)
    assert caught.value.status == 0 and caught.value.retryable
    assert text.startswith(f"0 ConnectionError: GET http://127.0.0.1:{port}/api/v1/nodes: ")
    assert "Connection refused" in text and "Pool" not in text and "object at" not in text
    assert len(text) < 160, text
