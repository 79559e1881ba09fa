"""A fake API server with the bridge's informers attached (for the bridge's tests)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from k8s_fake import FakeApiServer

from k8s_bridge.cache import ClusterModel
from k8s_bridge.cli import start_informers
from k8s_bridge.informer import Informer
from k8s_bridge.kube import Kube


def wait_for(predicate: Callable[[], Any], timeout_s: float = 5.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what or predicate}")


@contextmanager
def cluster(objects: list[dict[str, Any]] = (), *, watch_timeout_s: float = 5.0,  # type: ignore[assignment]
            **model_kw: Any) -> Iterator[tuple[FakeApiServer, Kube, ClusterModel, list[Informer]]]:
    """Fake API with ``objects``; a model fed by informers (synced on entry)."""
    with FakeApiServer() as fake:
        for obj in objects:
            fake.create(obj)
        kube = Kube.connect(host=fake.url)
        model = ClusterModel(**model_kw)
        informers, ready = start_informers(kube, model, watch_timeout_s=watch_timeout_s)
        try:
            wait_for(lambda: all(i.synced.is_set() for i in informers), what="informers synced")
            yield fake, kube, model, informers
        finally:
            for inf in informers:
                inf.stop(2.0)


def synced_to(fake: FakeApiServer, informers: list[Informer], timeout_s: float = 5.0) -> None:
    """Wait until every informer has handled everything up to the fake's current
    resourceVersion (a bookmark moves the informers of untouched kinds along)."""
    target = fake.resource_version
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        fake.bookmark()
        if all(int(i.resource_version or 0) >= target for i in informers):
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for the informers to catch up")
