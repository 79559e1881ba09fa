"""The bridge's Events (k8s_bridge/events.py): one shape, sent in the background from a
bounded queue that drops rather than blocks."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from k8s_bridge.events import EventSender, pod_event
from k8s_bridge.kube import ApiError
from tests.k8s_bridge import k8s_objects as K


class Stalled:
    """An API client whose Event POSTs wait for ``gate``; the second is refused."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()
        self.posted: list[dict[str, Any]] = []

    def with_timeout(self, timeout_s: float) -> Stalled:
        return self

    def create(self, kind: str, obj: dict[str, Any], namespace: str | None = None) -> Any:
        self.started.set()
        self.gate.wait(10.0)
        if len(self.posted) == 1:
            self.posted.append(obj)
            raise ApiError(403, "Forbidden", "events is forbidden")
        self.posted.append(obj)
        return obj


def test_a_full_queue_drops_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    api = Stalled()
    sender = EventSender(api, capacity=1)  # type: ignore[arg-type]
    events = [pod_event(K.pod(f"p{i}"), "Normal", "PatternUpdated", "m", "tdmcore-controller")
              for i in range(4)]
    with caplog.at_level(logging.WARNING, logger="k8s_bridge.events"):
        assert sender.send(events[0])       # taken by the worker, which waits on the API
        assert api.started.wait(5.0)
        assert sender.send(events[1])       # waits in the queue
        assert not sender.send(events[2])   # the queue is full: dropped at once
        assert not sender.send(events[3])
        api.gate.set()
        assert sender.flush(5.0)
    assert sender.dropped == 2 and sender.sent == 1
    assert [e["involvedObject"]["name"] for e in api.posted] == ["p0", "p1"]
    said = [r.getMessage() for r in caplog.records]
    assert len([m for m in said if "queue full" in m]) == 1, said
    assert any("not recorded" in m and "default/p1" in m for m in said), said


def test_an_event_names_its_pod_by_uid() -> None:
    event = pod_event(K.pod("p"), "Warning", "FailedScheduling", "x" * 2000, "c")
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod",
                                       "namespace": "default", "name": "p",
                                       "uid": "uid-default-p"}
    assert len(event["message"]) == 1024 and event["metadata"]["generateName"] == "p."
