"""What a long or interrupted command says, and the smaller messages of issue 41:
progress a log can show, Ctrl-C during the imports and while the kernels compile,
a policy's sys.exit, option names and exit codes, YAML 1.2 numbers, an incompatible
link."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tdmcore.app import common
from tdmcore.app.cli import cli
from tdmcore.app.lifecycle import main
from tdmcore.app.signals import Terminated, raise_terminated, redelivered


def _one_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("Error: ") and "Traceback" not in err[0], err
    return int(done.value.code or 0), err[0]


# ----------------------------------------------------------------------- progress
def test_without_a_terminal_long_work_prints_a_progress_line_every_interval(
        tmp_path: Path, monkeypatch, capsys) -> None:
    # issue 41: a 400-job trace printed nothing for 652 s without a TTY; the lines
    # come every PROGRESS_EVERY_S (30 s), here every 0.1 s to keep the test short
    monkeypatch.setattr(common, "PROGRESS_EVERY_S", 0.1)
    main(["simulate", "metronome-trace", "--hours", "12", "--load", "1", "--policies",
          "default,metronome", "--no-plots", "--out", str(tmp_path)])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("tdmcore: [")]
    assert lines, "no progress line"
    assert all(" metronome-trace / " in ln for ln in lines), lines
    assert common.PROGRESS_EVERY_S == 0.1 and common.LineProgress().every_s == 0.1


def test_line_progress_says_each_unfinished_task() -> None:
    bar = common.LineProgress(every_s=30.0)
    task = bar.add_task("simulating", total=4)
    done = bar.add_task("plotting", total=1)
    bar.advance(task)
    bar.update(task, description="trace / default: 2.50 h simulated")
    bar.update(done, completed=1)
    assert bar.lines() == ["tdmcore: [0:00:00] trace / default: 2.50 h simulated (1/4)"]
    assert common.PROGRESS_EVERY_S == 30.0


# ------------------------------------------------------------------------- Ctrl-C
def test_ctrl_c_while_the_commands_import_is_one_line(tmp_path: Path) -> None:
    # issue 41: Ctrl-C in the first ~1.5 s printed a 38-line traceback.  The
    # interrupt is sent the moment the commands' modules are being imported (rich's
    # table, which they import and the tdmcore package does not).
    code = textwrap.dedent("""
        import importlib.abc, os, signal, sys
        import tdmcore  # the package: imported before any of the command's code

        class Interrupt(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "rich.table":
                    sys.meta_path.remove(self)
                    os.kill(os.getpid(), signal.SIGINT)
                return None

        sys.meta_path.insert(0, Interrupt())
        import runpy
        sys.argv = ["tdmcore", "list", "scenarios"]
        runpy.run_module("tdmcore", run_name="__main__")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "Error: interrupted\n" and done.stdout == ""


@pytest.mark.parametrize(("sig", "raised", "code", "line"), [
    ("SIGINT", "KeyboardInterrupt", 130, "Error: interrupted"),
    ("SIGTERM", "Terminated", 143, "Error: terminated"),
])
def test_the_same_signal_again_after_the_answer_keeps_the_exit_code(
        sig: str, raised: str, code: int, line: str, tmp_path: Path) -> None:
    # The signal test once exited -2 after "Error: interrupted": a Ctrl-C sent again
    # (redelivered) while the first unwound was handled during the answer and killed
    # the process.  Here the command is interrupted and the same signal comes again
    # the moment its Error: line is written.
    code_text = textwrap.dedent(f"""
        import os, signal, sys
        from tdmcore.app import lifecycle
        from tdmcore.app.cli import cli
        from tdmcore.app.signals import Terminated

        class LateSignal:
            def __init__(self, stream):
                self.stream, self.sent = stream, False
            def write(self, text):
                n = self.stream.write(text)
                if text.startswith("Error:") and not self.sent:
                    self.sent = True
                    os.kill(os.getpid(), signal.{sig})
                    sum(range(10_000))  # bytecode: the handler runs here
                return n
            def flush(self):
                self.stream.flush()

        def interrupted(*args, **kwargs):
            raise {raised}

        cli.main = interrupted
        sys.stderr = LateSignal(sys.stderr)
        lifecycle.main(["list", "scenarios"])
    """)
    done = subprocess.run([sys.executable, "-c", code_text], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == code, done.stderr
    assert done.stderr == f"{line}\n" and done.stdout == ""


def test_ctrl_c_through_code_run_from_a_string_exits_130_under_python_m(
        tmp_path: Path) -> None:
    # The signal test exited -2 after "Error: interrupted" whenever the machine was
    # loaded (3 runs at once on 2 cores: every time): the Ctrl-C had passed through
    # source run by eval/exec (dataclasses, Numba), which marks a KeyboardInterrupt
    # as unhandled, and `python -m` then ends by SIGINT whatever the exit code.
    (tmp_path / "interrupted_cmd.py").write_text(textwrap.dedent("""
        from tdmcore.app import lifecycle
        from tdmcore.app.cli import cli

        def interrupted(*args, **kwargs):
            eval("(_ for _ in ()).throw(KeyboardInterrupt())")  # as deep in Numba

        cli.main = interrupted
        lifecycle.main(["list", "scenarios"])
    """), "utf-8")
    done = subprocess.run([sys.executable, "-m", "interrupted_cmd"], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "Error: interrupted\n" and done.stdout == ""


@pytest.mark.parametrize(("raised", "code", "line"), [
    ("KeyboardInterrupt", 130, "Error: interrupted"),
    ("Terminated", 143, "Error: terminated"),
])
def test_an_object_the_signal_left_half_built_adds_nothing_after_the_answer(
        raised: str, code: int, line: str, tmp_path: Path) -> None:
    # The signal test once ended "Error: terminated" with an llvmlite traceback: the
    # signal had landed inside a ValueRef's __init__, whose __del__ then failed
    # (AttributeError) when the exit freed it.  Here an object is interrupted while
    # it is built, and its finalizer fails the same way.
    code_text = textwrap.dedent(f"""
        from tdmcore.app import lifecycle
        from tdmcore.app.cli import cli
        from tdmcore.app.signals import Terminated

        class HalfBuilt:
            def __init__(self):
                raise {raised}  # the signal, before the object is whole
            def __del__(self):
                raise AttributeError("'HalfBuilt' object has no attribute '_ptr'")

        def interrupted(*args, **kwargs):
            HalfBuilt()

        cli.main = interrupted
        lifecycle.main(["list", "scenarios"])
    """)
    done = subprocess.run([sys.executable, "-c", code_text], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == code, done.stderr
    assert done.stderr == f"{line}\n" and done.stdout == ""


# ------------------------------------------------------------ a policy's sys.exit
def test_a_policy_calling_sys_exit_is_one_error_line(tmp_path: Path, monkeypatch,
                                                     capsys) -> None:
    # issue 41: the command exited silently with the policy's status
    (tmp_path / "quitter.py").write_text(textwrap.dedent("""
        import sys
        from tdmcore.metronome.policies import DefaultPolicy

        class Quitter(DefaultPolicy):
            name = "quitter"

            def score(self, state, cycle):
                sys.exit(3)
    """))
    monkeypatch.chdir(tmp_path)
    code, line = _one_error(["simulate", "--example", "--policies", "quitter:Quitter",
                             "--no-plots", "--out", str(tmp_path / "r")], capsys)
    assert code == 1
    assert line.startswith("Error: policy 'quitter': score raised SystemExit: 3")
    assert not (tmp_path / "r").exists()


def test_a_policy_factory_calling_sys_exit_is_one_error_line(tmp_path: Path, monkeypatch,
                                                             capsys) -> None:
    (tmp_path / "quits.py").write_text("import sys\n\ndef make():\n    sys.exit(4)\n")
    monkeypatch.chdir(tmp_path)
    code, line = _one_error(["simulate", "--example", "--policies", "quits:make",
                             "--no-plots", "--out", str(tmp_path / "r")], capsys)
    assert (code, line) == (1, "Error: --policies: quits:make() failed: SystemExit: 4")


# ------------------------------------------------------- option names, exit codes
@pytest.mark.parametrize("args, code, start", [
    # a non-finite number is a usage error wherever it is given (--capacity's too)
    (["link", "--pod", "a:400:0.1:nan", "--no-plot"], 2,
     "Error: --pod[1].bandwidth_gbps: expected a finite number"),
    (["link", "--capacity", "nan", "s1"], 2, "Error: Invalid value for '--capacity'"),
    # the option that gave the pods or the file, never the library's pods:/file:
    (["link", "--pod", "a:400:0.1:10", "--pod", "a:200:0.1:10", "--no-plot"], 1,
     "Error: --pod: pod names must be unique"),
    (["link", "--file", "nowhere.json"], 1, "Error: --file: cannot read nowhere.json"),
    (["sweep", "nowhere.yaml"], 1, "Error: cannot read nowhere.yaml"),
])
def test_errors_name_the_option_and_exit_as_documented(args, code, start, tmp_path,
                                                       monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    got, line = _one_error([*args, "--out", str(tmp_path / "r")], capsys)
    assert got == code and line.startswith(start), line
    assert not line.startswith(("Error: file:", "Error: pods:"))


def test_an_incompatible_link_is_never_perfect_nor_scored_100(tmp_path: Path) -> None:
    # issue 41: perfect: yes beside three scores of 100.00 (99.999999 rounded)
    result = CliRunner().invoke(cli, ["link", "--pod", "a:400:0.1:10:high", "--pod",
                                      "b:310:0.1:10", "--no-plot", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line.split("│")[2:5]
            for line in result.output.splitlines() if line.count("│") == 5}
    assert [c.strip() for c in rows["perfect"]] == ["no", "no", "no"]
    assert all(c.strip() != "100.00" for c in rows["score (Eq. 18)"])
    assert "INCOMPATIBLE" in result.output and "incompatible periods" in result.output


# ----------------------------------------------------------- YAML 1.2 numbers
def test_yaml_reads_exponent_numbers_as_numbers(tmp_path: Path) -> None:
    # issue 41: 2e0 and 1.0e18 were text (YAML 1.1), "expected a number"
    from tdmcore.sim.scenario_file import load_scenario_file, parse_document

    assert parse_document("a: 2e0\nb: 1.0e18\nc: -3E-2\nd: 2\ne: 1e\n", True) == \
        {"a": 2.0, "b": 1e18, "c": -0.03, "d": 2, "e": "1e"}
    assert yaml.safe_load("a: 2e0") == {"a": "2e0"}  # PyYAML's own loader untouched
    text = common.example_path().read_text("utf-8").replace("arrival_s: 2", "arrival_s: 2e0")
    path = tmp_path / "s.yaml"
    path.write_text(text, "utf-8")
    assert 2.0 in {j.arrival_s for j in load_scenario_file(path).jobs}


@pytest.mark.parametrize(("sig", "raised"), [("SIGINT", KeyboardInterrupt),
                                             ("SIGTERM", Terminated)])
def test_a_signal_a_callback_swallows_is_delivered_again(sig: str, raised: type,
                                                         monkeypatch) -> None:
    # A signal that lands in a callback C code calls (llvmlite's object-cache
    # callback, as Numba loads a kernel, in a SIGTERM test that then ran to its
    # end) cannot propagate: Python prints "Exception ignored" and goes on.  Here it
    # lands in a real ctypes callback.
    import ctypes
    import os
    import signal
    import time

    signum = signal.Signals[sig]
    previous = signal.signal(signum, {"SIGINT": signal.default_int_handler,
                                      "SIGTERM": raise_terminated}[sig])
    callback = ctypes.CFUNCTYPE(None)(lambda: os.kill(os.getpid(), signum))
    ignored: list[type] = []  # what Python reports as "Exception ignored"
    monkeypatch.setattr(sys, "unraisablehook", lambda u: ignored.append(u.exc_type))
    try:
        callback()  # swallowed, as before: nothing is raised
        start = time.monotonic()
        with pytest.raises(raised), redelivered():
            callback()
            time.sleep(30)  # raised in here, at once
        assert time.monotonic() - start < 10
    finally:
        signal.signal(signum, previous)
    assert ignored == [raised]  # the first, without redelivered(), only
