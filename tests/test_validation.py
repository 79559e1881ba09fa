"""Bad input raises ValueError naming the argument, and changes nothing."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tdmcore
from tdmcore.elastic import make_elastic_policy
from tdmcore.metronome.link import compact_rotations
from tdmcore.metronome.policies import make_policy
from tdmcore.metronome.scoring import score_from_excess
from tdmcore.oasis.admission import make_admission_policy
from tdmcore.sim.models import model_pattern

D = np.ones((2, 8))


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: tdmcore.discretize(0.0, 0.5, 1.0, 100.0), "period_ms"),
        (lambda: tdmcore.discretize(float("nan"), 0.5, 1.0, 100.0), "period_ms"),
        (lambda: tdmcore.discretize(100.0, 1.5, 1.0, 100.0), "duty_cycle"),
        (lambda: tdmcore.discretize(100.0, -0.1, 1.0, 100.0), "duty_cycle"),
        (lambda: tdmcore.discretize(100.0, 0.5, -1.0, 100.0), "bandwidth_gbps"),
        (lambda: tdmcore.discretize(100.0, 0.5, 1.0, 150.0), "base_period_ms"),
        (lambda: tdmcore.discretize(100.0, 0.5, 1.0, -100.0), "base_period_ms"),
        (lambda: tdmcore.discretize(100.0, 0.5, 1.0, 100.0, bins=7), "bins"),
        (lambda: tdmcore.discretize(100.0, 0.5, 1.0, 100.0, bins=72.0), "bins"),
        (lambda: tdmcore.discretize([100.0, 50.0], [0.5, 0.5, 0.5], 1.0, 100.0), "period_ms"),
        (lambda: tdmcore.discretize([[100.0]], 0.5, 1.0, 100.0), "period_ms"),
        (lambda: tdmcore.score(D, [0], 1.0), "rotations"),
        (lambda: tdmcore.score(D, [0, 0.5], 1.0), "rotations"),
        (lambda: tdmcore.score(D, [0, 0], 0.0), "capacity_gbps"),
        (lambda: tdmcore.score(-D, [0, 0], 1.0), "demand"),
        (lambda: tdmcore.score(np.ones((2, 4)), [0, 0], 1.0), "demand"),
        (lambda: tdmcore.score(np.full((2, 8), np.nan), [0, 0], 1.0), "demand"),
        (lambda: tdmcore.link_utilization(D, [0, 0], float("inf")), "capacity_gbps"),
        (lambda: tdmcore.search_rotations(D, 1.0, [1]), "limits"),
        (lambda: tdmcore.search_rotations(D, 1.0, [1, 0]), "limits"),
        (lambda: tdmcore.search_rotations(D, 1.0, [-1, 8]), "limits"),  # the reference's too
        (lambda: tdmcore.search_rotations(D, 1.0, [1, 9]), "limits"),
        (lambda: tdmcore.search_rotations(D, 1.0, [1, 8], mode="best"), "mode"),
        (lambda: tdmcore.search_rotations(D, 1.0, [1, 8], mode="optimal"), "mids"),
        (lambda: tdmcore.search_rotations(D, 1.0, [1, 8], mode="optimal", mids=[[1.0]]), "mids"),
        (lambda: tdmcore.search_rotations(D, 1.0, [1, 8], mode="optimal",
                                          mids=[[1.0], [np.nan]]), "mids[1]"),
        (lambda: tdmcore.search_rotations(np.ones((2, 8, 1)), 1.0, [1, 8]), "demand"),
        (lambda: tdmcore.unify_periods([100.0, -1.0], ["high", "low"]), "periods_ms"),
        (lambda: tdmcore.unify_periods("400", ["high"]), "periods_ms"),  # text is no number
        (lambda: tdmcore.unify_periods(["400", 200.0], ["high", "low"]), "periods_ms"),
        (lambda: tdmcore.unify_periods([100.0], ["urgent"]), "priorities[0]"),
        (lambda: tdmcore.unify_periods([100.0, 90.0], ["high"]), "priorities"),
        (lambda: tdmcore.unify_periods([100.0], ["high"], gt_ms=-1), "gt_ms"),
        (lambda: tdmcore.unify_periods([100.0], ["high"], et_frac=float("nan")), "et_frac"),
        (lambda: tdmcore.unify_periods([100.0], ["high"], max_multiple=0), "max_multiple"),
        (lambda: tdmcore.rotations_to_shifts([-1], 100.0), "rotations"),
        (lambda: tdmcore.search_rotations(D, 1.0, [1, 8], mode=["x"]), "mode"),
        (lambda: tdmcore.score(D.astype(complex), [0, 0], 1.0), "demand"),
        (lambda: tdmcore.discretize(1e-6, 0.5, 1.0, 1e6), "base_period_ms"),
        (lambda: tdmcore.comm_midpoints(10**12, 0.5), "multiple"),
        (lambda: tdmcore.average_bandwidth_utilization([10, 0], [0.5, 0.5]), "capacities_gbps"),
        (lambda: tdmcore.average_bandwidth_utilization([10], [1.5]), "utilizations"),
        (lambda: tdmcore.average_bandwidth_utilization([10, 5], [0.5]), "utilizations"),
        # these two took any value and ended in ZeroDivisionError (before 2026-11-24)
        (lambda: score_from_excess(5.0, 0.0, 72), "capacity_gbps"),
        (lambda: score_from_excess(5.0, 10.0, 0), "bins"),
        (lambda: score_from_excess(-1.0, 10.0, 72), "excess_gbps"),
        (lambda: score_from_excess(float("nan"), 10.0, 72), "excess_gbps"),
        (lambda: compact_rotations([10.0, 5.0], 0), "bins"),
        (lambda: compact_rotations([10.0, -5.0], 72), "arcs_bins[1]"),
        (lambda: compact_rotations([10.0, 73.0], 72), "arcs_bins[1]"),
        (lambda: compact_rotations([[10.0]], 72), "arcs_bins"),
        (lambda: compact_rotations([10.0, np.inf], 72), "arcs_bins"),
    ],
)
def test_bad_input_names_the_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(name) + ":"):
        call()


def test_bad_input_leaves_caller_arrays_untouched() -> None:
    demand = np.array([[1.0] * 8, [np.nan] * 8])
    limits = np.array([5, 8])
    copy_d, copy_l = demand.copy(), limits.copy()
    with pytest.raises(ValueError):
        tdmcore.search_rotations(demand, 1.0, limits)
    np.testing.assert_array_equal(demand, copy_d)
    np.testing.assert_array_equal(limits, copy_l)
    good = np.ones((2, 8))
    tdmcore.search_rotations(good, 1.0, limits)
    np.testing.assert_array_equal(limits, copy_l)  # limits[0] is ignored, not overwritten


@pytest.mark.parametrize(("args", "message"), [
    ((0, 0.5, 1.0), "period_ms: expected a number > 0, got 0"),
    ((100.0, 1.5, 1.0), "duty_cycle: expected a number in [0, 1], got 1.5"),
    ((100.0, -0.1, 1.0), "duty_cycle: expected a number in [0, 1], got -0.1"),
    ((100.0, 0.5, float("nan")), "bandwidth_gbps: expected a finite number >= 0, got nan"),
    ((100.0, "half", 1.0), "duty_cycle: expected a number in [0, 1], got 'half'"),
    ((True, 0.5, 1.0), "period_ms: expected a number > 0, got True"),
])
def test_one_pattern_rule_speaks_for_every_entry_point(args: tuple, message: str) -> None:
    """The traffic-pattern rule is written once (tdmcore._validation.pattern): the
    model, the top-level API, the engine's jobs, the link catalog and scenario files
    all say the same."""
    from tdmcore._validation import pattern
    from tdmcore.model import TrafficPattern
    from tdmcore.sim.catalog import parse_pod
    from tdmcore.sim.engine.network import FlowJob

    name = message.split(":")[0]
    for make in (lambda: pattern(*args), lambda: TrafficPattern(*args),
                 lambda: tdmcore.discretize(*args, 100.0),
                 lambda: FlowJob("j", *args, links=(0,), iterations=1)):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            make()
    if not isinstance(args[0], bool) and not isinstance(args[1], str):
        head = message.split(", got")[0]  # the command line parses the text first
        with pytest.raises(ValueError, match=f"^--pod\\[1\\]\\.{re.escape(head)}, got "):
            parse_pod(":".join(["a", *map(str, args)]), 0)
    assert name in ("period_ms", "duty_cycle", "bandwidth_gbps")


def test_an_array_names_its_first_bad_entry() -> None:
    with pytest.raises(ValueError, match=r"^period_ms\[1\]: expected a number > 0, got -1.0$"):
        tdmcore.discretize([100.0, -1.0], 0.5, 1.0, 100.0)


def test_did_you_mean_ignores_case_and_stays_quiet_when_nothing_is_close() -> None:
    from tdmcore._validation import closest, did_you_mean

    models = ("VGG16", "VGG19", "GPT-2")
    assert closest("vgg19", models) == "VGG19"
    assert closest("VGG-19", models) == "VGG19"
    assert closest("gpt2", models) == "GPT-2"
    assert closest("transformer", models) is None
    assert did_you_mean("vgg19", models) == " (did you mean 'VGG19'?)"
    assert did_you_mean(42, models) == ""


@pytest.mark.parametrize(("call", "message"), [
    (lambda: model_pattern("vgg19", 2),
     "model: unknown model 'vgg19' (did you mean 'VGG19'?); choose from "),
    (lambda: make_policy("Metronome"),
     "name: unknown policy 'Metronome' (did you mean 'metronome'?); choose from "),
    (lambda: make_elastic_policy("dragn"),
     "name: unknown policy 'dragn' (did you mean 'dragon'?); choose from "),
    (lambda: make_admission_policy("OASIS"),
     "name: unknown policy 'OASIS' (did you mean 'oasis'?); choose from "),
    (lambda: make_policy(["a"]), "name: unknown policy ['a']; choose from "),
])
def test_unknown_names_suggest_the_close_one(call, message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        call()


@pytest.mark.parametrize("priority", [" High ", "LOW", 3, np.int64(-2)])
def test_one_priority_rule_for_pods_and_unify_periods(priority) -> None:
    from tdmcore.model import Pod, priority_value

    assert Pod("p", "j", priority=priority).priority == priority_value(priority)
    assert tdmcore.unify_periods([100.0], [priority]).compatible


@pytest.mark.parametrize("priority", ["medium", True, 1.0, 2**40])
def test_a_bad_priority_is_refused_alike(priority) -> None:
    from tdmcore.model import Pod

    with pytest.raises(ValueError, match="^priority: "):
        Pod("p", "j", priority=priority)
    with pytest.raises(ValueError, match=r"^priorities\[0\]: "):
        tdmcore.unify_periods([100.0], [priority])


def _link_pods():
    from tdmcore.metronome.link import LinkPod

    return [LinkPod("a", 100.0, 0.3, 5.0, priority=1), LinkPod("b", 50.0, 0.2, 5.0)]


def _bins_calls(bins):
    """Every public entry point that takes the discretization precision ``bins``."""
    from tdmcore.metronome.link import plan_link
    from tdmcore.metronome.policies.metronome import MetronomeConfig

    base = tdmcore.unify_periods([100.0, 50.0], ["high", "low"])
    return [
        lambda: tdmcore.discretize(100.0, 0.5, 1.0, 100.0, bins=bins),
        lambda: tdmcore.discretize_unified(base, [100.0, 50.0], [0.3, 0.2], [5.0, 5.0],
                                           bins=bins),
        lambda: tdmcore.comm_midpoints(2, 0.5, bins=bins),
        lambda: tdmcore.rotations_to_shifts([1], 100.0, bins=bins),
        lambda: plan_link(_link_pods(), 25.0, bins=bins),
        lambda: MetronomeConfig(bins=bins),
        lambda: score_from_excess(1.0, 10.0, bins),
        lambda: compact_rotations([1.0, 2.0], bins),
    ]


@pytest.mark.parametrize("bins", [3601, 10**12, np.int64(10**15)])
@pytest.mark.parametrize("which", range(8))
def test_bins_has_one_upper_bound_checked_before_any_allocation(bins, which) -> None:
    """Di-Pre is 8 to 3,600 in the library as on the command line (tdmcore link
    --bins): a huge ``bins`` is a ValueError naming it, raised before the circle's
    rows are allocated (it ran out of memory, or ran for minutes)."""
    import tracemalloc

    call = _bins_calls(bins)[which]
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"^bins: expected an integer in \[8, 3,600\], got "):
            call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


@pytest.mark.parametrize("which", range(8))
def test_the_largest_bins_is_accepted(which) -> None:
    _bins_calls(3600)[which]()


def test_the_cli_bounds_bins_with_the_library_constant() -> None:
    from tdmcore import _validation
    from tdmcore.app import cli

    assert (_validation.MIN_BINS, _validation.MAX_BINS) == (8, 3600)
    link = cli.cli.commands["link"]
    option = next(p for p in link.params if p.name == "bins")
    assert (option.type.min, option.type.max) == (_validation.MIN_BINS, _validation.MAX_BINS)


@pytest.mark.parametrize("m", [3601, 10**12, np.int64(2**62)])
def test_max_multiple_has_an_upper_bound_checked_before_the_kernel(m, monkeypatch) -> None:
    """``M`` is 1 to 3,600: a huge one raised MemoryError in the unification kernel
    (its candidate buffers take 16 M (k + 1) words) instead of a ValueError."""
    from tdmcore.metronome import base_period
    from tdmcore.metronome.link import plan_link
    from tdmcore.metronome.policies.metronome import MetronomeConfig

    def kernel(*args):
        raise AssertionError("the unification kernel ran (and allocated) first")

    monkeypatch.setattr(base_period, "unify_kernel", kernel)
    needle = r"^max_multiple: expected an integer in \[1, 3,600\], got "
    for call in (lambda: tdmcore.unify_periods([100.0, 50.0], ["high", "low"], max_multiple=m),
                 lambda: plan_link(_link_pods(), 25.0, max_multiple=m),
                 lambda: MetronomeConfig(max_multiple=m)):
        with pytest.raises(ValueError, match=needle):
            call()


def test_the_largest_max_multiple_is_accepted() -> None:
    from tdmcore.metronome.base_period import MAX_M
    from tdmcore.metronome.policies.metronome import MetronomeConfig

    assert MAX_M == 3600
    base = tdmcore.unify_periods([100.0, 50.0], ["high", "low"], max_multiple=MAX_M)
    assert base.multiples.tolist() == [1, 2]
    assert MetronomeConfig(max_multiple=np.int64(MAX_M)).max_multiple == MAX_M


def test_one_integer_rule() -> None:
    """tdmcore._validation.whole: a Python or NumPy integer (not a bool) in a range,
    as an int; the message names the argument and the range."""
    from tdmcore._validation import whole, whole_pair

    assert whole("n", np.int64(3)) == 3 and type(whole("n", np.int64(3))) is int
    assert whole("n", -5, None) == -5
    for value, low, high, message in [
        (True, 1, None, "n: expected an integer >= 1, got True"),
        (np.bool_(True), 1, None, "n: expected an integer >= 1, got "),
        (2.0, 1, None, "n: expected an integer >= 1, got 2.0"),
        (0, 1, None, "n: expected an integer >= 1, got 0"),
        (10**7, 1, 10**6, "n: expected an integer in [1, 1,000,000], got 10000000"),
        ("3", None, None, "n: expected an integer, got '3'"),
    ]:
        with pytest.raises(ValueError, match="^" + re.escape(message)):
            whole("n", value, low, high)
    assert whole_pair("r", [2, np.int64(5)]) == (2, 5)
    for pair in [(3, 2), (0, 2), (1.0, 2), (True, 2), (1, 2, 3), "12"]:
        with pytest.raises(ValueError, match=r"^r: expected a \(low, high\) pair of integers "):
            whole_pair("r", pair)


def test_numpy_integers_are_integers_everywhere() -> None:
    """Arguments that took only Python ints now take NumPy integers as well (one
    rule), and keep them as ints."""
    from tdmcore.metronome.controller import ControllerConfig
    from tdmcore.sim.cluster import SimJob

    cfg = ControllerConfig(window=np.int64(20), o_t=np.int32(5))
    assert (cfg.window, cfg.o_t) == (20, 5) and type(cfg.window) is int
    job = SimJob("j", "ResNet50", None, workers=np.int64(2), iterations=np.int64(10),
                 iteration_ms=100.0)
    assert type(job.workers) is int and type(job.iterations) is int
    with pytest.raises(ValueError, match=r"^iterations: expected an integer in \[1, "):
        SimJob("j", "ResNet50", None, workers=2, iterations=True, iteration_ms=100.0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, -1.0, 2e6])
def test_the_common_case_fast_path_refuses_what_the_general_path_refuses(bad: float) -> None:
    """check_demand and the search's limits and mids take a float64 (int64) array the
    short way (two reductions); a bad value there must meet the same refusal, with the
    same message, as the same numbers given as lists (issue 42's fast path)."""
    demand = np.ones((2, 8))
    demand[1, 3] = bad
    messages = []
    for given in (demand, demand.tolist()):
        with pytest.raises(ValueError, match="^demand: ") as info:
            tdmcore.search_rotations(given, 25.0, np.array([1, 8], dtype=np.int64))
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    mids = [np.array([1.0]), np.array([bad])]
    for mode in ("first", "optimal"):
        if np.isfinite(bad):
            continue
        with pytest.raises(ValueError, match=r"^mids\[1\]: must be finite"):
            tdmcore.search_rotations(np.ones((2, 8)), 25.0, [1, 8], mode=mode, mids=mids)
    for limits in (np.array([1, 9], dtype=np.int64), np.array([1, 0], dtype=np.int64)):
        with pytest.raises(ValueError, match="^limits: allowed rotations"):
            tdmcore.search_rotations(np.ones((2, 8)), 25.0, limits)


def test_first_mode_gives_psi_of_a_perfect_vector_as_optimal_mode_places_midpoints() -> None:
    """First mode places the midpoints on the circle only for a perfect vector's Psi,
    after the search; they must be the same midpoints, folded the same way."""
    demand = np.zeros((2, 8))
    demand[0, :2] = demand[1, :2] = 10.0
    mids = [np.array([0.5 - 8.0]), np.array([0.5 + 16.0])]
    got = tdmcore.search_rotations(demand, 25.0, [1, 8], mode="first", mids=mids)
    assert got.perfect and got.psi is not None
    # rows 0 and 1 do not contend (10 + 10 < 25): Psi is inf in both modes
    want = tdmcore.search_rotations(demand, 25.0, [1, 8], mode="optimal", mids=mids)
    assert got.psi == want.psi == float("inf")
    demand[:, :2] = 20.0  # now they contend: the distance of the midpoints counts
    got = tdmcore.search_rotations(demand, 25.0, [1, 8], mode="first", mids=mids)
    assert got.perfect and got.psi == min(abs(got.rotations[1]), 8 - abs(got.rotations[1]))


def test_fold_mids_and_contending_are_numpys_bit_for_bit() -> None:
    """The compiled fold of the midpoints and the contending pairs (issue 42: the
    wrapper's numpy passes cost more than some searches) give numpy's values."""
    from tdmcore._kernels.rotation_search import contending, fold_mids

    rng = np.random.default_rng(42)
    for n_bins in (8, 72, 360, 3600):
        flat = np.concatenate([rng.uniform(-3 * n_bins, 3 * n_bins, 500),
                               [-1e-300, -5e-324, -0.0, 0.0, n_bins, -n_bins, 1e300, -1e300,
                                n_bins - 1e-13, -1e-17]])
        want = np.mod(flat, n_bins)
        want[want >= n_bins] = 0.0
        assert np.array_equal(fold_mids(flat, n_bins).view(np.int64), want.view(np.int64))
    for _ in range(200):
        k = int(rng.integers(1, 7))
        demand = rng.uniform(0, 20, (k, 16)) * (rng.random((k, 16)) < 0.5)
        capacity = float(rng.uniform(5, 40))
        peaks = demand.max(axis=1)
        want = (peaks[:, None] + peaks[None, :]) >= capacity * (1.0 - 1e-9)
        np.fill_diagonal(want, False)
        assert np.array_equal(contending(demand, capacity, 1e-9), want)
