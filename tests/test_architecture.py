"""The layers are enforced: import-linter's contracts (``pyproject.toml``) hold.

docs/architecture.md draws the layers: Kernels < Core < Sim < App, and the Kubernetes
bridge beside Sim on Core.  Here the contracts run on the code as it is (all kept),
on a copy with one forbidden import planted per contract (each one broken), and every
module of tdmcore is checked to sit in exactly one layer, so that a new module cannot
slip past the contracts unnamed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pyproject.toml"


def _contracts() -> dict[str, dict[str, object]]:
    with CONFIG.open("rb") as fh:
        data = tomllib.load(fh)
    return {c["id"]: c for c in data["tool"]["importlinter"]["contracts"]}


def _lint(config: Path, cwd: Path, pythonpath: str | None = None
          ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(config)!r}, no_cache=True, "
            "no_logo=True))")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _verdicts(stdout: str, verdict: str) -> list[str]:
    """The names of the contracts lint-imports reports as ``verdict`` (KEPT or
    BROKEN; a line may end in "(4 ignored imports)")."""
    found = (re.fullmatch(rf"(.+) {verdict}( \(\d+ ignored imports?\))?", line)
             for line in stdout.splitlines())
    return [m.group(1) for m in found if m]


def test_the_contracts_hold() -> None:
    run = _lint(CONFIG, ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert len(_verdicts(run.stdout, "KEPT")) == len(_contracts()) >= 6, run.stdout


def test_the_named_arrows_are_forbidden() -> None:
    """Kernels -/-> Core, Core -/-> Sim/App/Bridge, Sim <-/-> Bridge, as written."""
    c = _contracts()
    assert "tdmcore.metronome" in c["kernels"]["forbidden_modules"]
    for layer in ("tdmcore.sim", "tdmcore.app", "k8s_bridge"):
        assert layer in c["core"]["forbidden_modules"]
    assert "k8s_bridge" in c["sim"]["forbidden_modules"]
    assert "tdmcore.sim" in c["bridge"]["forbidden_modules"]
    assert "tdmcore.metronome" in c["framework"]["forbidden_modules"]
    assert {"tdmcore", "numpy", "numba", "scipy", "kubernetes"} <= set(
        c["hook"]["forbidden_modules"])  # type: ignore[arg-type]
    assert c["control"]["forbidden_modules"] == ["tdmcore.metronome.controller"]
    assert c["control-rooms"]["type"] == "independence"
    assert all(contract["type"] == "forbidden" for name, contract in c.items()
               if name != "control-rooms")


def test_the_hook_loads_nothing_its_contract_forbids() -> None:
    """The training hook ships into training pods: importing it (and creating one)
    in a fresh interpreter loads none of the modules its contract forbids, however
    they would be reached (the contract sees static imports only)."""
    forbidden = _contracts()["hook"]["forbidden_modules"]
    code = ("import sys, json; from k8s_bridge.hook import TrainingHook; "
            "TrainingHook.from_env({}); print(json.dumps(sorted(sys.modules)))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    loaded = {name.split(".")[0] for name in json.loads(run.stdout)}
    assert not loaded & set(forbidden), sorted(loaded & set(forbidden))  # type: ignore[arg-type]


def test_every_module_sits_in_one_layer() -> None:
    c = _contracts()
    core = set(c["core"]["source_modules"])  # type: ignore[arg-type]
    layers = {"tdmcore._kernels": "kernels", "tdmcore.sim": "sim", "tdmcore.app": "app",
              "tdmcore.__main__": "app"}  # `python -m tdmcore` is the App's entry
    layers.update(dict.fromkeys(core, "core"))
    src = ROOT / "src" / "tdmcore"
    found = []
    for entry in sorted(src.iterdir()):
        if entry.name.startswith("__pycache__") or entry.name == "__init__.py":
            continue
        if entry.is_dir() and (entry / "__init__.py").exists():
            found.append(f"tdmcore.{entry.name}")
        elif entry.suffix in (".py", ".pyx"):
            found.append(f"tdmcore.{entry.stem}")
    missing = [name for name in found if name not in layers]
    assert not missing, f"not in any layer of pyproject.toml's contracts: {missing}"
    assert set(c["kernels"]["forbidden_modules"]) >= core  # type: ignore[arg-type]


#: One planted import per contract: (file under the copy, the line, the contracts it
#: breaks).  Core -> Sim also breaks Bridge -/-> Sim: the bridge imports Core, and the
#: contracts forbid indirect imports too.
PLANTED = [
    ("src/tdmcore/_kernels/circle.py", "from tdmcore.model import Cluster", ("kernels",)),
    # ... and the controller's contracts: its rooms import link, and the simulator
    # imports the facade, which imports every room
    ("src/tdmcore/metronome/link.py", "from tdmcore.sim import cluster",
     ("core", "bridge", "control", "control-rooms")),
    ("src/tdmcore/__init__.py", "from tdmcore.app import cli", ("api",)),
    # the framework names no policy, not even for a type (issue 39)
    ("src/tdmcore/framework.py", "from tdmcore.metronome.link import LinkPlan",
     ("framework",)),
    ("src/tdmcore/sim/report.py", "import k8s_bridge.kube", ("sim",)),
    ("k8s_bridge/records.py", "from tdmcore.sim.scenarios import Scenario", ("bridge",)),
    ("src/tdmcore/metronome/control/alignment.py", "from tdmcore.metronome import controller",
     ("control", "control-rooms")),
    ("src/tdmcore/metronome/control/monitor.py", "from .alignment import align",
     ("control-rooms",)),
    # the hook imports api: numpy there reaches the training pods through it
    ("k8s_bridge/api.py", "import numpy", ("hook",)),
]


def _only_python(folder: str, names: list[str]) -> list[str]:
    """copytree's ignore: the Python sources and their folders, nothing else."""
    return [n for n in names
            if n == "__pycache__" or not (n.endswith(".py") or (Path(folder) / n).is_dir())]


@pytest.mark.parametrize("path, line, contracts", PLANTED)
def test_a_forbidden_import_breaks_its_contract(tmp_path: Path, path: str, line: str,
                                                 contracts: tuple[str, ...]) -> None:
    for tree in ("src/tdmcore", "k8s_bridge"):
        shutil.copytree(ROOT / tree, tmp_path / tree, ignore=_only_python)
    shutil.copy(CONFIG, tmp_path / "pyproject.toml")
    target = tmp_path / path
    target.write_text(target.read_text() + f"\n{line}  # planted\n")
    run = _lint(tmp_path / "pyproject.toml", tmp_path,
                os.pathsep.join([str(tmp_path / "src"), str(tmp_path)]))
    assert run.returncode != 0, run.stdout
    names = _contracts()
    assert _verdicts(run.stdout, "BROKEN") == [names[c]["name"] for c in names
                                                if c in contracts], run.stdout



#: The one import circle allowed in App and Sim: the cluster run and its parts
#: (tdmcore.sim.cluster builds tdmcore.sim.run's Run, whose parts read the run's
#: records from tdmcore.sim.cluster) and the event engine under them.
ENGINE = ("tdmcore.sim.cluster", "tdmcore.sim.run", "tdmcore.sim.engine")


def _circles(graph: object) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's
    algorithm, iterative), over grimp's graph of direct imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for root in sorted(graph.modules):  # type: ignore[attr-defined]
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]  # type: ignore[attr-defined]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(
                        graph.find_modules_directly_imported_by(child)))))  # type: ignore[attr-defined]
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(component)
    return out


def test_no_import_circle_in_app_and_sim_but_the_engines() -> None:
    """grimp (import-linter's graph of the code, imports inside functions included)
    finds every circle of imports; in App and Sim only the run's own is allowed.
    A circle elsewhere in the house is another room's."""
    import grimp

    graph = grimp.build_graph("tdmcore", cache_dir=None)
    circles = [c for c in _circles(graph)
               if any(m.startswith(("tdmcore.app", "tdmcore.sim")) for m in c)]
    def in_engine(module: str) -> bool:
        return any(module == p or module.startswith(f"{p}.") for p in ENGINE)

    others = [sorted(c) for c in circles if not all(in_engine(m) for m in c)]
    assert not others, others
    planted = _circles_of({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert planted == [{"a", "b", "c"}]  # the search itself finds a circle


def _circles_of(edges: dict[str, set[str]]) -> list[set[str]]:
    class Graph:
        modules = set(edges)

        @staticmethod
        def find_modules_directly_imported_by(module: str) -> set[str]:
            return edges[module]

    return _circles(Graph())
