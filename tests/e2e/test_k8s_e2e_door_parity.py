"""Door parity on a real control plane: S3 (idle injection) through the simulator and
through the bridge's processes -- the standalone scheduler, the controller and a node
agent, as their shipped ServiceAccounts -- gives the same placements, rotations,
shifts and idle, pod for pod (``tests/k8s_bridge/door_parity.py`` says how)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from k8s_bridge.auth import AUDIENCE
from k8s_bridge.envtest import wait_until
from tdmcore.sim.scenarios import metronome_snapshots
from tests.e2e.e2e_env import Env, service_account_token
from tests.k8s_bridge.door_parity import (
    NAMESPACE,
    SCHEDULER,
    TRAINER,
    BridgeDoor,
    cluster_objects,
    create,
    mismatches,
    replay,
    simulate,
)

pytestmark = pytest.mark.e2e


class ProcessDoor(BridgeDoor):
    """The bridge's components as processes against the real API server."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.kube = env.kube
        self.scheduler = env.component("parity-scheduler", [
            "scheduler", "--scheduler-name", SCHEDULER], "tdmcore-standalone-scheduler").start()
        self.controller = env.component("parity-controller", [
            "controller", "--resync-seconds", "0.5"], "tdmcore-controller").start()
        # the agent forwards with a token of its ServiceAccount for the controller's
        # audience, as agent.yaml projects one (the controller checks it: TokenReview)
        token = env.plane.dir / "parity-agent.token"
        token.write_text(service_account_token(env, "tdmcore-agent", [AUDIENCE]))
        self.agent = env.component("parity-agent", [
            "agent", "--controller", self.controller.url, "--timeout", "30",
            "--token-file", str(token)], None).start()
        self.agent_url = f"{self.agent.url}/v1/report"
        # each pod's hook sends its own projected token (the controller checks that it
        # is bound to the pod the report names): the pods run as TRAINER
        self.kube.request("POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", body={
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": TRAINER, "namespace": NAMESPACE}})
        self._tokens: dict[str, str] = {}

    def tokens(self, pod: Mapping[str, Any]) -> dict[str, str]:
        meta = pod["metadata"]
        if meta["uid"] not in self._tokens:
            answer = self.kube.request(
                "POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{TRAINER}/token",
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"audiences": [AUDIENCE], "expirationSeconds": 3600,
                               "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                                  "name": meta["name"], "uid": meta["uid"]}}})
            self._tokens[meta["uid"]] = str(answer["status"]["token"])
        return {"Authorization": f"Bearer {self._tokens[meta['uid']]}"}

    def _counts(self) -> tuple[float, float]:
        return (self.controller.metric("tdmcore_controller_reconciles_total"),
                self.controller.metric("tdmcore_controller_writes_total"))

    def settle(self, bound: Sequence[str]) -> None:
        def placed() -> bool:
            pods = {p["metadata"]["name"]: p for p in
                    self.kube.list("Pod", NAMESPACE)["items"]}
            return all((pods.get(name, {}).get("spec") or {}).get("nodeName")
                       for name in bound)

        wait_until(placed, 60, f"the standalone scheduler to bind {list(bound)}")
        # the controller has settled when three of its passes in a row write nothing
        for _ in range(60):
            reconciles, writes = self._counts()
            wait_until(lambda r=reconciles: self._counts()[0] >= r + 3, 30,
                       "three controller passes")
            if self._counts()[1] == writes:
                return
        raise AssertionError("the controller kept writing")

    def close(self) -> None:
        for comp in (self.agent, self.controller, self.scheduler):
            comp.stop(5.0)


@pytest.fixture
def door(env: Env) -> Iterator[ProcessDoor]:
    scenario = metronome_snapshots(window_s=60.0)["S3"]
    objs = cluster_objects(scenario)
    nodes = [o["metadata"]["name"] for o in objs if o["kind"] == "Node"]
    others = [n["metadata"]["name"] for n in env.kube.list("Node")["items"]]
    assert not others, f"nodes of another test are still in the cluster: {others}"
    env.namespace(NAMESPACE)
    assert {o["kind"] for o in objs} == {"Node", "NodeBandwidth"}  # no topology, no AppGroup
    for obj in objs:
        create(env.kube, obj)
    made = ProcessDoor(env)
    try:
        yield made
    finally:
        made.close()
        env.clean(NAMESPACE, nodes)


def test_s3_gives_the_same_decisions_through_both_doors(env: Env, door: ProcessDoor) -> None:
    scenario = metronome_snapshots(window_s=60.0)["S3"]
    simulated = simulate(scenario)
    views = replay(door, scenario, simulated.events)
    assert len(views) >= 4
    # the comparison saw what S3 is about: a rotation, a shift and injected idle
    assert any(v.rotation and v.shift_ms and v.idle_ms for view in views for v in view.values())
    found = mismatches(simulated.events, views)
    assert not found, "\n".join(found)
