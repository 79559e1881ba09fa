"""Door parity over the HTTP fake API server: the shipped scenarios give the same
placements, rotations, shifts and idle through the simulator and through the
Kubernetes bridge (the standalone scheduler, the controller and a node agent, each
with its own informers), pod for pod, after every change of the cluster
(``tests/k8s_bridge/door_parity.py`` says how)."""

from __future__ import annotations

import pytest

from k8s_bridge.agent import Agent, serve
from k8s_bridge.cache import ClusterModel
from k8s_bridge.cli import start_informers
from k8s_bridge.informer import Informer
from k8s_bridge.kube import Kube
from k8s_bridge.pipeline import Pipeline
from k8s_bridge.reconciler import ControllerService
from k8s_bridge.standalone import StandaloneScheduler
from k8s_bridge.web import Server
from tdmcore.framework import Status
from tdmcore.sim.scenarios import Scenario, metronome_snapshots, philly
from tests.k8s_bridge.door_parity import (
    SCHEDULER,
    BridgeDoor,
    Event,
    cluster_objects,
    create,
    mismatches,
    replay,
    simulate,
)
from tests.k8s_bridge.k8s_env import synced_to, wait_for
from tests.k8s_bridge.k8s_fake import FakeApiServer

POLICY = "metronome"


class FakeDoor(BridgeDoor):
    """The bridge's components in this process, over the fake API server: the
    standalone scheduler and the controller each with their own informers and cache
    (as their processes have), the controller served over HTTP behind a node agent."""

    def __init__(self, fake: FakeApiServer, policy: str) -> None:
        self.fake = fake
        self.kube = Kube.connect(host=fake.url)
        self.informers: list[Informer] = []
        scheduler_model = self._model()
        self.pipeline = Pipeline(scheduler_model, policy, self.kube)
        self.scheduler = StandaloneScheduler(self.pipeline, SCHEDULER)
        self.service = ControllerService(self._model(), self.kube, policy)
        self.controller = Server(self.service.app).start()
        # a patient agent: the first report after a change waits for the controller
        # to rebuild its plans, which a shared machine may make slower than 0.5 s
        self.agent = serve(Agent(self.controller.url, None, timeout_s=30.0).app(),
                           "127.0.0.1", 0)
        self.agent.start()
        self.agent_url = f"http://127.0.0.1:{self.agent.port}/v1/report"

    def _model(self) -> ClusterModel:
        model = ClusterModel()  # a client of its own, as a process has
        informers, _ = start_informers(Kube.connect(host=self.fake.url), model,
                                       watch_timeout_s=5.0)
        wait_for(lambda: all(i.synced.is_set() for i in informers), what="informers synced")
        self.informers += informers
        return model

    def sync(self) -> None:
        synced_to(self.fake, self.informers, timeout_s=20.0)

    def settle(self, bound: list[str]) -> None:
        self.sync()
        if bound:  # the scheduler's pass, as its loop runs it
            decisions = self.scheduler.run_once()
            refused = [f"{g.key}: {d.message}" for g, d in decisions
                       if d.status is not Status.SUCCESS]
            assert decisions and not refused, \
                f"the bridge did not place what the simulator placed: {refused or bound}"
            self.sync()
        for _ in range(10):  # the controller's loop, until it finds nothing to write
            if not self.service.reconcile():
                break
            self.sync()
        else:
            raise AssertionError("the controller kept writing")

    def close(self) -> None:
        self.agent.stop()
        self.controller.stop()
        for informer in self.informers:
            informer.stop(2.0)


def run_both(scenario: Scenario, policy: str = POLICY) -> tuple[list[Event], list[str]]:
    """The scenario through both doors; the simulator's events and every
    difference found, by event."""
    simulated = simulate(scenario, policy)
    with FakeApiServer() as fake:
        kube = Kube.connect(host=fake.url)
        for obj in cluster_objects(scenario):
            create(kube, obj)
        door = FakeDoor(fake, policy)
        try:
            views = replay(door, scenario, simulated.events)
        finally:
            door.close()
    return simulated.events, mismatches(simulated.events, views)


@pytest.fixture(scope="module")
def snapshots() -> dict[str, Scenario]:
    return metronome_snapshots(window_s=60.0)


def rotated(events: list[Event]) -> bool:
    """Whether some job was rotated on a shared link: the comparison saw Metronome
    at work, not only placements."""
    return any(v.rotation for e in events for v in e.view.values())


@pytest.mark.parametrize("sid", ["S1", "S2", "S3", "S4", "S5"])
def test_a_snapshot_gives_the_same_decisions_through_both_doors(snapshots, sid) -> None:
    events, found = run_both(snapshots[sid])
    assert [e.kind for e in events].count("place") == len(snapshots[sid].jobs)
    assert rotated(events)
    assert not found, "\n".join(found)


#: A busy stretch of the Philly trace: 20 jobs of 1 to 16 workers within 80 minutes,
#: on 4 nodes (the first slices of the trace are mostly one-GPU jobs, which share
#: no link)
PHILLY_SLICE = dict(n_jobs=20, n_nodes=4, start=61160, max_duration_s=1800.0)


def test_a_philly_slice_gives_the_same_decisions_through_both_doors() -> None:
    scenario = philly(**PHILLY_SLICE)  # type: ignore[arg-type]
    events, found = run_both(scenario)
    assert sum(e.kind == "place" for e in events) == len(scenario.jobs)
    assert rotated(events)
    assert not found, "\n".join(found)
