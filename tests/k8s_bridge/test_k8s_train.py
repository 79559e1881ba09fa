"""The training hook in a real training loop: PyTorch DDP (gloo, 2 processes on
loopback) with :class:`k8s_bridge.hook.TrainingHook` registered, against a running
node agent and controller.  The shifts, pauses and idle the controller answers land
where it said: the iteration start times against the target phase.

Marker ``train``; it runs where ``torch`` is installed (the ``train`` extra,
``pip install -e ".[train]"``) and is skipped with that reason elsewhere.  The
figures it prints are in docs/kubernetes.md ("The hook in a real training loop").
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from k8s_bridge.agent import Agent, serve
from k8s_bridge.envtest import free_port
from k8s_bridge.reconciler import ControllerService
from k8s_bridge.web import Server
from tests.k8s_bridge import k8s_objects as K
from tests.k8s_bridge.k8s_env import cluster

pytestmark = pytest.mark.train
torch = pytest.importorskip("torch", reason="the DDP test needs torch: pip install -e '.[train]'")

ROOT = Path(__file__).resolve().parents[2]
JOB = "training.kubeflow.org/job-name"
#: the high-priority job (reported by the test, every 100 ms exactly) and the DDP job:
#: both 20 Gbps on a 25 Gbps link, so they take turns; 185 ms beside 2 x 100 ms is a
#: gap of 15 ms, more than twice G_T (5 ms) and within E_T (18.5 ms): idle is injected
HIGH = dict(period=100.0, duty=0.3, gbps=20.0)
LOW = dict(period=185.0, duty=0.3, gbps=20.0)
STEPS = 60
#: steps whose communication is slowed by 50 ms (contention): more than o_t of a window
SLOW = (25, 33)
#: how close (ms) a start the hook aligned or paused must land to the target phase
LAND_MS = 10.0


def objects() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [K.node(n) for n in ("n0", "n1", "n2")]
    for job, p in (("h", HIGH), ("l", LOW)):
        out.append(K.podbandwidth(job, period=p["period"], duty=p["duty"], gbps=p["gbps"],
                                  match={JOB: job}))
        out.append(K.podgroup(job, 2))
    for name, node, prio in (("h-0", "n0", "high"), ("h-1", "n1", "high"),
                             ("l-0", "n0", "low"), ("l-1", "n2", "low")):
        labels = {**K.job_labels(name[0], prio), "scheduling.x-k8s.io/pod-group": name[0]}
        out.append(K.pod(name, labels=labels, node=node, phase="Running",
                         created=f"2026-11-20T00:00:0{'hl'.index(name[0])}Z"))
    return out


def circular(a: float, b: float, period: float) -> float:
    """The distance of ``a`` and ``b`` on a circle of ``period``."""
    d = (a - b) % period
    return min(d, period - d)


def test_ddp_with_the_hook_lands_shifts_pauses_and_idle_where_the_controller_said(
        tmp_path: Path) -> None:
    with cluster(objects()) as (fake, kube, model, informers):
        service = ControllerService(model, kube, "metronome")
        service.reconcile()
        answers: list[tuple[str, list[float], dict[str, Any]]] = []
        report = service.report

        def logged(key: str, starts: list[float], durations: list[float],
                   comms: list[float] | None, *who: Any) -> dict[str, Any]:
            answer = report(key, starts, durations, comms, *who)
            answers.append((key, list(starts), dict(answer)))
            return answer

        service.report = logged  # type: ignore[method-assign]
        controller = Server(service.app).start()
        agent = serve(Agent(controller.url, None, timeout_s=10.0).app(), "127.0.0.1", 0)
        agent.start()
        try:
            # the reference job's iterations: exactly every 100 ms up to now
            now = time.time() * 1000.0
            starts = [now - 1000.0 + 100.0 * k for k in range(10)]
            service.report("default/h-0", starts, [100.0] * 10, [30.0] * 10)
            ctrl = service.current()
            idle = ctrl.idle_ms("default/l")
            assert idle > 0 and ctrl.target_phase("default/l") is not None
            port = free_port()
            env = {**os.environ, "TDMCORE_AGENT_URL": f"http://127.0.0.1:{agent.port}",
                   "POD_NAMESPACE": "default", "GLOO_SOCKET_IFNAME": "lo",
                   "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                   "TDMCORE_TRAIN_COMPUTE_MS": str(LOW["period"] * (1 - LOW["duty"])),
                   "TDMCORE_TRAIN_COMM_MS": str(LOW["period"] * LOW["duty"]),
                   "TDMCORE_TRAIN_SLOW": f"{SLOW[0]}:{SLOW[1]}",
                   "TDMCORE_TRAIN_SLOW_MS": "50"}
            ranks = [subprocess.Popen(
                [sys.executable, "-m", "tests.k8s_bridge.ddp_train", str(r), "2", str(port),
                 str(STEPS), str(tmp_path / f"rank{r}.json")], cwd=ROOT,
                env={**env, "POD_NAME": f"l-{r}"}, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True) for r in range(2)]
            try:
                outputs = [p.communicate(timeout=300)[0] for p in ranks]
            finally:
                for p in ranks:
                    p.kill()
            for p, text in zip(ranks, outputs, strict=True):
                assert p.returncode == 0, text[-3000:]
        finally:
            agent.stop()
            controller.stop()
    figures = []
    for r in range(2):
        log = json.loads((tmp_path / f"rank{r}.json").read_text())
        steps = log["steps"]
        assert (log["sent"], log["dropped"]) == (STEPS, 0)
        mine = [(s, a) for key, s, a in answers if key == f"default/l-{r}"]
        reported = [start for s, _ in mine for start in s]
        assert len(reported) == STEPS  # every step's start, in order
        # steps reported up to and with each answer: they ran before it arrived, and
        # the one in flight when it came may have started before it too
        upto = [sum(len(s) for s, _ in mine[:k + 1]) for k in range(len(mine))]
        # -- idle: slept inside each step once the controller had said so ----------
        told = next(k for k, (_, a) in enumerate(mine) if a["idle_ms"] > 0)
        assert mine[told][1]["idle_ms"] == pytest.approx(idle)
        assert log["idle_ms"] == pytest.approx(idle)
        slept = [steps[i]["body"] - reported[i] for i in range(upto[told] + 1, STEPS)]
        before = [steps[i]["body"] - reported[i] for i in range(upto[told])]
        assert all(idle - 0.5 <= x <= idle + LAND_MS for x in slept), slept
        assert all(x < 0.5 for x in before), before
        # -- shift and pauses: a start the hook moved lands on the target phase ------
        lattice = mine[-1][1]["phase_period_ms"]
        target = mine[-1][1]["target_phase_ms"]
        assert lattice == pytest.approx(ctrl.phase_period_ms("default/l"))
        assert all(a["target_phase_ms"] == pytest.approx(target, abs=1e-6)
                   for _, a in mine if a["target_phase_ms"] is not None)
        # the first step after the first answer (a new assignment: the hook aligns
        # it) and after every answer with a pause (recomputed against the target)
        landed = [upto[0] + 1] + [upto[k] + 1 for k, (_, a) in enumerate(mine)
                                  if a["pause_ms"] > 0 and upto[k] + 1 < STEPS]
        moved = [i for i in range(STEPS) if reported[i] - steps[i]["enter"] > 1.0]
        pauses = len(landed) - 1
        assert pauses, "the slowed steps brought no pause"
        assert min(landed[1:]) > SLOW[0]
        errors = [circular(reported[i], target, lattice) for i in sorted({*landed, *moved})]
        assert max(errors) <= LAND_MS, (landed, moved, errors)
        figures.append(f"rank {r}: idle {idle:.2f} ms asked, slept "
                       f"{statistics.median(slept):.2f} ms median (max "
                       f"{max(slept):.2f}) over {len(slept)} steps; alignment and "
                       f"{pauses} pause(s): {len(errors)} starts land "
                       f"{statistics.median(errors):.2f} ms median / {max(errors):.2f} ms max "
                       f"from the target phase (lattice {lattice:.2f} ms)")
    print("\n" + "\n".join(figures))
