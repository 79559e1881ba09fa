"""benchmarks.contended: its rounds take each policy's best and compare every job
(its bad arguments: tests/test_benchmark_report.py)."""

from __future__ import annotations

import pytest

from benchmarks import contended


def test_rounds_take_each_policys_best(monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    real = contended.timed
    clock = iter([5.0, 9.0, 3.0, 12.0])  # ideal, default; then again

    def timed(sc: object, policy: str, seed: int, noise: float) -> tuple[float, float, object]:
        _, _, run = real(sc, policy, seed, noise)
        wall = next(clock)
        return wall, wall / 2, run

    monkeypatch.setattr(contended, "timed", timed)
    best = contended.table(6, 2, 0, 0.85, 0.01, ["ideal", "default"], rounds=2)
    assert best == {"ideal": 3.0, "default": 9.0}
    out = capsys.readouterr().out
    assert "round 1 of 2" in out and "round 2 of 2" in out
    summary = out.split("best of 2 rounds")[1].splitlines()
    default = next(line for line in summary if line.split()[:1] == ["default"])
    # best wall 9 over best ideal 3; the rounds' own ratios were 1.80x and 4.00x
    assert default.split()[1:3] == ["9.00", "3.00x"] and default.endswith("1.80-4.00x")


def test_rounds_stop_when_a_policys_jobs_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    real = contended.timed
    calls: list[str] = []

    def timed(sc: object, policy: str, seed: int, noise: float) -> tuple[float, float, object]:
        wall, cpu, run = real(sc, policy, seed, noise)
        calls.append(policy)
        if calls.count("default") == 2:  # one job on other nodes: the same JCT and TCT
            job = next(iter(run.jobs.values()))  # type: ignore[attr-defined]
            job.nodes = ("elsewhere",)
        return wall, cpu, run

    monkeypatch.setattr(contended, "timed", timed)
    with pytest.raises(SystemExit, match="default's per-job results differ between rounds"):
        contended.table(6, 2, 0, 0.85, 0.01, ["ideal", "default"], rounds=2)


def test_ideal_is_warmed_when_not_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ratio divides by ideal's time: ideal compiles before it is timed, even
    when --policies does not name it (else a cold cache makes every ratio look small)."""
    warmed: list[str] = []
    monkeypatch.setattr(contended, "warm", lambda sc, names, seed, noise: warmed.extend(names))
    contended.table(6, 2, 0, 0.85, 0.01, ["default"], rounds=1)
    assert warmed == ["ideal", "default"]
