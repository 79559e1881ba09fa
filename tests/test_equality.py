"""Results and states with array fields compare by value (``tdmcore._equality``):
before, ``==`` of two of them raised "truth value of an array is ambiguous"."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tdmcore._equality import values_equal
from tdmcore.metronome.base_period import unify_periods
from tdmcore.sim.engine.network import FlowJob, simulate_flows


def test_two_runs_with_one_seed_are_equal_and_another_seed_is_not() -> None:
    jobs = [FlowJob("a", period_ms=100.0, duty_cycle=0.4, bandwidth_gbps=10.0, links=(0,),
                    iterations=20),
            FlowJob("b", period_ms=90.0, duty_cycle=0.4, bandwidth_gbps=10.0, links=(0,),
                    iterations=20)]
    a = simulate_flows(jobs, [10.0], seed=1)
    b = simulate_flows(jobs, [10.0], seed=1)
    c = simulate_flows(jobs, [10.0], seed=2)
    assert a == b and not a != b
    assert a != c
    assert a != "a result"  # another type: not equal, no error
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)


def test_a_base_period_compares_by_value() -> None:
    one = unify_periods([100.0, 95.0], [1, 0])
    two = unify_periods([100.0, 95.0], [1, 0])
    other = unify_periods([100.0, 50.0], [1, 0])
    assert one == two and one != other


def test_the_rule_arrays_containers_and_nan() -> None:
    nan = math.nan
    assert values_equal(np.array([1.0, nan]), np.array([1.0, nan]))
    assert not values_equal(np.array([1.0, 2.0]), np.array([1.0, 2.0, 3.0]))  # shape
    assert not values_equal(np.array([1.0]), [1.0])  # an array is not a list
    assert values_equal((np.arange(3), {"k": np.ones(2)}), (np.arange(3), {"k": np.ones(2)}))
    assert not values_equal((np.arange(3),), [np.arange(3)])  # tuple is not list
    assert not values_equal({"k": 1}, {"j": 1})
    assert values_equal(nan, np.float64(nan)) and not values_equal(nan, 0.0)
    assert values_equal(np.array([None, np.ones(2)], dtype=object),
                        np.array([None, np.ones(2)], dtype=object))


def test_two_runs_of_one_scenario_with_one_seed_are_equal() -> None:
    from tdmcore.sim.cluster import run_cluster
    from tdmcore.sim.scenarios import philly

    sc = philly(30, 8, 1300, 0)
    a = run_cluster(sc.sim, sc.jobs, "metronome", seed=0)
    b = run_cluster(sc.sim, sc.jobs, "metronome", seed=0)
    assert a is not b and a.controller is not b.controller
    assert a == b  # wall-clock timings and the live controller are not compared
    assert a != run_cluster(sc.sim, sc.jobs, "default", seed=0)


def test_a_thresholds_record_stays_hashable() -> None:
    from tdmcore.metronome.controller import Thresholds

    t = Thresholds(110.0, 50.0, 70.0, 0.0, 20.0, 100.0, 1.0)
    assert t == Thresholds(110.0, 50.0, 70.0, 0.0, 20.0, 100.0, 1.0) and len({t, t}) == 1
