"""Fixtures of the e2e suite: one control plane per session (see ``e2e_env.py``).

Every test module here sets ``pytestmark = pytest.mark.e2e``; without ``KUBEBUILDER_ASSETS`` they
skip with a short reason, and the run's summary says once how to get the binaries.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from k8s_bridge.envtest import ControlPlane, EnvtestUnavailable, assets_dir
from tests.e2e.e2e_env import DEPLOY, PODGROUP_CRD, SCHEDULER, Component, Env

#: The short reason every e2e test skips with when the binaries are missing.
SKIP_REASON = "e2e: no envtest binaries (how to get them: the end of this run's output)"
#: Why the e2e tests cannot run here (empty: they can), said once at the end of a
#: run in which they skipped.
_UNAVAILABLE: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without the binaries every e2e test skips with one short reason; how to get
    them is said once, in the run's summary (:func:`pytest_terminal_summary`)."""
    e2e = [item for item in items if item.get_closest_marker("e2e")]
    if not e2e:
        return
    try:
        assets_dir()
    except EnvtestUnavailable as exc:
        _UNAVAILABLE.append(str(exc))
        for item in e2e:
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How to get the binaries, once, if some e2e test skipped for want of them (not
    when ``-m "not e2e"`` deselected them all, nor on ``--collect-only``)."""
    skipped = terminalreporter.stats.get("skipped", [])
    if _UNAVAILABLE and any(SKIP_REASON in str(getattr(r, "longrepr", "")) for r in skipped):
        terminalreporter.write_line(f"e2e tests skipped: {_UNAVAILABLE[0]}", yellow=True)


@pytest.fixture(scope="session")
def plane() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver with the shipped namespace, CRDs and RBAC (once per run)."""
    try:
        assets_dir()
    except EnvtestUnavailable as exc:
        pytest.skip(f"e2e: {exc}")
    keep = os.environ.get("TDMCORE_E2E_KEEP")  # a folder: keep certs, data and logs there
    # profiling: test_k8s_e2e_benchmark reads kube-apiserver's own CPU profile
    cp = ControlPlane(Path(keep), keep=True, profiling=True) if keep \
        else ControlPlane(profiling=True)
    try:
        try:
            cp.start()
        except EnvtestUnavailable as exc:  # e.g. no openssl command
            pytest.skip(f"e2e: {exc}")
        cp.apply_files([DEPLOY / "namespace.yaml", DEPLOY / "crds" / "nodebandwidths.yaml",
                        DEPLOY / "crds" / "podbandwidths.yaml", DEPLOY / "rbac.yaml",
                        DEPLOY / "requeue.yaml", DEPLOY / "standalone-scheduler.yaml"])
        cp.apply([PODGROUP_CRD])
        cp.wait_established([PODGROUP_CRD["metadata"]["name"]])
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def env(plane: ControlPlane) -> Iterator[Env]:
    # Compile the policy kernels once here (Numba's on-disk cache), so that the
    # component processes load them instead of compiling them side by side.
    from k8s_bridge.cache import ClusterModel
    from k8s_bridge.pipeline import Pipeline

    Pipeline(ClusterModel(), "metronome").warm_up()
    e = Env(plane)
    try:
        yield e
    finally:
        e.stop()


@pytest.fixture
def space(env: Env, request: pytest.FixtureRequest) -> Iterator[tuple[str, list[str]]]:
    """A namespace of the test's own and a list for the nodes it adds; both are
    cleaned when the test ends."""
    name = "e2e-" + request.node.name.removeprefix("test_").replace("_", "-")[:40]
    ns = env.namespace(name)
    nodes: list[str] = []
    try:
        yield ns, nodes
    finally:
        env.clean(ns, nodes)


@pytest.fixture(scope="session")
def extender(env: Env) -> Component:
    """The extender (ServiceAccount tdmcore-scheduler) and kube-scheduler calling it."""
    ext = env.component("extender", ["extender", "--scheduler-name", SCHEDULER],
                        SCHEDULER).start()
    env.extender = ext
    env.start_kube_scheduler(ext.url)
    return ext
