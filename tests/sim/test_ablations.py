"""The paper's ablation without the third stage: compact rotations (§IV-C, Table VII)."""

from __future__ import annotations

import numpy as np
import pytest

from tdmcore.framework import Scheduler
from tdmcore.metronome.controller import Controller, ControllerConfig
from tdmcore.metronome.link import LinkPod, compact_rotations, plan_link
from tdmcore.metronome.policies import MetronomeConfig, MetronomePolicy
from tdmcore.model import Cluster, ClusterState, Node, Pod, TrafficPattern

VGG19 = TrafficPattern(422.26, 0.2, 25.0)


def test_compact_rotations_hand_arithmetic() -> None:
    # three 20 % arcs on 72 bins: 14.4 bins each.  Row 1 starts at ceil(14.4) = 15,
    # ends at 29.4; row 2 at ceil(29.4) = 30.
    np.testing.assert_array_equal(compact_rotations(np.array([14.4, 14.4, 14.4]), 72),
                                  [0, 15, 30])
    # wrapping past the circle: 50 + 30 -> row 2 at 80 mod 72 = 8
    np.testing.assert_array_equal(compact_rotations(np.array([50.0, 30.0, 5.0]), 72),
                                  [0, 50, 8])


def test_compact_plan_packs_without_cushions() -> None:
    pods = [LinkPod(f"{j}-0", 422.26, 0.2, 25.0, 1 if j == "a" else 0, j) for j in "abc"]
    compact = plan_link(pods, 25.0, mode="compact")
    optimal = plan_link(pods, 25.0, mode="optimal")
    assert compact.result.rotations.tolist() == [0, 15, 30]
    assert compact.result.perfect  # the arcs do not overlap
    # the 3rd stage spreads them (max Psi): more room between the arcs
    assert optimal.result.rotations.tolist() != [0, 15, 30]
    assert optimal.result.psi > 15.0


def _s1_on_one_link(phase_three: bool) -> Controller:
    state = ClusterState(Cluster([Node("n0", 32, 64, 4, 25.0), Node("n1", 32, 64, 4, 25.0),
                                  Node("n2", 32, 64, 4, 25.0), Node("n3", 32, 64, 4, 25.0)]))
    config = MetronomeConfig(phase_three=phase_three)
    sched = Scheduler(MetronomePolicy(config))
    ctl = Controller(state, ControllerConfig.for_policy(config))
    for job in "abc":
        gang = [Pod(f"{job}-{w}", job, cpu=1, mem_gib=1, gpu=1, pattern=VGG19,
                    priority=1 if job == "a" else 0, gang_size=2, spread=True)
                for w in range(2)]
        decision = sched.schedule_gang(state, gang)
        ctl.on_reserve_gang([d.reserve for d in decision.decisions if d.reserve])
    return ctl


@pytest.mark.parametrize("phase_three", [True, False])
def test_no_phase3_controller_plans_compact_links(phase_three: bool) -> None:
    ctl = _s1_on_one_link(phase_three)
    shared = [plan for plan in ctl.links.values() if len(plan.jobs) == 3]
    assert shared, "the three jobs share n0's link"
    plan = shared[0]
    if phase_three:
        assert plan.result_mode == "optimal" and ctl.recalculations >= 1
        assert plan.result.rotations.tolist() != [0, 15, 30]
    else:
        assert plan.result_mode == "compact" and ctl.recalculations == 0
        assert plan.result.rotations.tolist() == [0, 15, 30]
