"""The controller's hand-overs to its front doors: ``restore`` (the bridge's rebuild),
``export_watch`` / ``absorb_watch`` / ``advance_anchor`` (the simulator's engine),
and the alignment's one table of target-phase terms."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tdmcore._kernels import regulation as R
from tdmcore.framework import Scheduler
from tdmcore.metronome.control.alignment import Alignment
from tdmcore.metronome.controller import Controller
from tdmcore.metronome.policies import MetronomeConfig, MetronomePolicy
from tdmcore.model import Cluster, ClusterState, Node, Pod, TrafficPattern

S3 = (TrafficPattern(102.76, 0.2, 25.0), TrafficPattern(186.84, 0.209, 25.0))


def s3_pair() -> tuple[ClusterState, Controller]:
    """S3's two jobs (the low one with injected idle) on node n0's link, n1 empty."""
    state = ClusterState(Cluster([Node("n0", 64, 64, 8, 25.0), Node("n1", 64, 64, 8, 25.0)]))
    sched = Scheduler(MetronomePolicy(MetronomeConfig()))
    ctl = Controller(state)
    for job, pattern, prio in (("h", S3[0], 1), ("l", S3[1], 0)):
        ctl.on_reserve(sched.schedule(state, Pod(f"{job}-0", job, pattern=pattern,
                                                 priority=prio)).reserve)
    return state, ctl


def fed(ctl: Controller) -> Controller:
    """Reports of both jobs: the high one on time, the low one slow (pauses)."""
    ctl.report_iterations("h-0", 1000.0 + 102.76 * np.arange(12), np.full(12, 102.76))
    ctl.report_iterations("l-0", 1030.0 + 230.0 * np.arange(12), np.full(12, 230.0))
    return ctl


def test_restore_rebuilds_what_the_old_controller_held() -> None:
    state, old = s3_pair()
    fed(old)
    new = Controller(state)
    shifts = new.restore({0: old.links[0]}, watches=old.export_watches(),
                         anchors_ms=old.anchors_ms)
    assert new.links[0] is old.links[0] and new.recalculations == 0
    assert shifts == {"h-0": 0.0, "l-0": old.offsets_ms["l"]}
    assert new.offsets_ms == old.offsets_ms and new.anchors_ms == old.anchors_ms
    assert new.target_phase("l") == old.target_phase("l") is not None
    assert new.idle_ms("l") == old.idle_ms("l") > 0
    for pod in ("h-0", "l-0"):
        a, b = new.watch_state(pod), old.watch_state(pod)
        assert a is not None and b is not None
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    # a flag plans the link (optimal: phase three, counted)
    again = Controller(state)
    again.restore({0: True})
    assert again.recalculations == 1 and again.offsets_ms == old.offsets_ms


def test_restore_drops_what_is_no_longer_placed() -> None:
    state, old = s3_pair()
    fed(old)
    watches = old.export_watches()
    watches["gone-0"] = watches["h-0"]
    new = Controller(state)
    new.restore({0: old.links[0]}, watches=watches, anchors_ms={**old.anchors_ms, "gone": 1.0})
    assert new.watch_state("gone-0") is None and "gone" not in new.anchors_ms


@pytest.mark.parametrize("plans, watches, anchors, match", [
    ({1: True}, None, None, "^plans: node 1 needs"),            # n1 has no traffic pods
    ({0: "yes"}, None, None, "^plans: node 0 needs"),
    ({5: True}, None, None, "^node:"),
    ([True], None, None, "^plans: expected a mapping"),
    ({0: True}, {"h-0": "w"}, None, "^watch: expected a Watch"),
    ({0: True}, None, {"h": float("nan")}, "^anchors_ms: 'h'"),
])
def test_restore_checks_everything_before_it_changes_anything(plans, watches, anchors,
                                                                match) -> None:
    state, _ = s3_pair()
    new = Controller(state)
    with pytest.raises(ValueError, match=match):
        new.restore(plans, watches=watches, anchors_ms=anchors)
    assert new.links == {} and new.recalculations == 0 and new.anchors_ms == {}
    assert new.export_watches() == {}


def test_restore_refuses_a_plan_made_for_other_pods() -> None:
    state, old = s3_pair()
    plan = old.links[0]
    state.remove("l-0")
    state.place(Pod("m-0", "m", pattern=S3[1]), 0)
    with pytest.raises(ValueError, match="^plans: the plan of node 0 was made for other"):
        Controller(state).restore({0: plan})


def test_export_absorb_and_advance_anchor() -> None:
    _, ctl = s3_pair()
    empty = ctl.export_watch("l-0")
    assert empty.reports == 0 and ctl.watch_state("l-0") is None
    fed(ctl)
    watch = ctl.export_watch("l-0")
    watch.counters[R.REPORTS] += 5  # changed elsewhere (the engine took reports)
    ctl.absorb_watch("l-0", watch)
    assert ctl.export_watch("l-0").reports == watch.reports
    with pytest.raises(ValueError, match="^pod:"):
        ctl.export_watch("nope-0")
    with pytest.raises(ValueError, match="^watch:"):
        ctl.absorb_watch("l-0", watch._replace(win=np.zeros(3)))
    anchor = ctl.anchors_ms["h"]
    ctl.advance_anchor("h", anchor - 50.0)  # earlier: stays
    ctl.advance_anchor("h", -np.inf)        # the engine's "no iteration yet"
    assert ctl.anchors_ms["h"] == anchor
    ctl.advance_anchor("h", anchor + 50.0)
    assert ctl.anchors_ms["h"] == anchor + 50.0
    ctl.advance_anchor("h", anchor + 99.0, first=True)  # has one: kept
    assert ctl.anchors_ms["h"] == anchor + 50.0
    ctl.advance_anchor("new", -np.inf)
    assert "new" not in ctl.anchors_ms
    ctl.advance_anchor("new", 7.0, first=True)
    assert ctl.anchors_ms["new"] == 7.0
    with pytest.raises(ValueError, match="^start_ms:"):
        ctl.advance_anchor("h", float("nan"))


def test_the_target_phase_is_the_table_s_terms_added_up() -> None:
    ctl = fed(s3_pair()[1])
    terms = ctl.target_terms("l")
    assert terms is not None and terms.reference == "h" and ctl.target_terms("h") is None
    pattern_h, pattern_l = S3
    idle = ctl.idle_ms("l")
    assert terms.compute_ref_ms == pattern_h.period_ms - pattern_h.comm_ms
    assert terms.compute_job_ms == pattern_l.period_ms - pattern_l.comm_ms + idle
    by_hand = (ctl.anchors_ms["h"] + terms.compute_ref_ms + ctl.offsets_ms["l"]
               - ctl.offsets_ms["h"] - terms.compute_job_ms)
    assert ctl.target_phase("l") == by_hand
    assert ctl.pause_ms("l", 5000.0) == (by_hand - 5000.0) % ctl.phase_period_ms("l")
    assert R.next_start_ms(by_hand, 5000.0, 100.0) == 5000.0 + (by_hand - 5000.0) % 100.0
    assert isinstance(ctl.alignment, Alignment)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctl.alignment.offsets_ms = {}  # type: ignore[misc]
    with pytest.raises(ValueError, match="^job:"):
        ctl.target_terms("nope")
