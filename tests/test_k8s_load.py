"""The extender under load on loopback: p99 < 50 ms at 100 requests/s, 1,000 nodes.

The real console script serves, in its own process, a seeded 1,000-node cluster
read from the fake API server; the client behaves as kube-scheduler does (see
``benchmarks/extender_load.py``, which runs longer loads and prints the figures).
"""

from __future__ import annotations

from extender_load import run_load


def test_extender_p99_under_50_ms_at_100_rps_on_1000_nodes():
    result = run_load(n_nodes=1000, rate=100.0, seconds=6.0, seed=0)
    print(result)
    assert result["errors"] == 0, result.get("first_errors")
    assert result["requests"] == 3 * int(100.0 * 6.0 / 3)
    assert result["achieved_rate_per_s"] >= 90.0
    assert result["all"]["p99"] < 50.0, result
