"""The package layout as the architecture states it, checked from the source (``ast``), so that
a misplaced import fails here rather than as a circular-import error at run time.

Covered: every ``import`` and ``from ... import`` in ``cudarl/`` and ``actors/``, at module
level or inside functions or ``TYPE_CHECKING`` blocks (a function-level import is still a
dependency, only a late one): no import circles between modules; imports point down the layers
(cli -> pool client -> actors -> rollout -> pool logic -> agents -> tester -> tasks -> base), and inside the tester
the sandbox knows neither builds nor judging and builds know nothing of judging; Python files
under 400 lines; and that reading a verdict loads the verdict module alone (no torch, no Ray).
Not covered: imports made by name at run time (``importlib.import_module`` in the lazy package
faces, child processes started by module name); those names come from imported modules'
``__name__`` and are exercised by the integration tests.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cudarl", "actors")

# Longest prefix wins; a module may import its own layer or any lower one.
LAYERS = {
    "cudarl.cli": 60,
    "cudarl.serve": 55,  # serving the agents: the A/B split, the request records (the app to come runs the pool)
    "cudarl.demo": 55,  # the demo: a tiny model, the warm start and the RL run on the pool, one after another
    "cudarl.verl_env": 52,  # cudarl inside verl's trainer: agents, rewards and the pool actor as verl's agent loop
    "cudarl.pool": 50,  # the lazy face, which loads the client
    "cudarl.pool.client": 50,
    "cudarl.rl.driver": 45,  # the RL run: engine, episodes, update workers (the judge is passed in)
    "cudarl.rl.policy_client": 45,  # the run's engine in a policy actor
    "actors": 40,
    "cudarl.sft": 38,  # the warm start: examples in the agents' prompts, rows in the rollout's token layout
    "cudarl.rl": 37,  # advantages and the policy loss on verl; the update workers
    "cudarl.rollout": 35,  # engines and the episode loop (judges through a callable, not the pool client)
    "cudarl.pool.book": 30, "cudarl.pool.records": 30, "cudarl.pool.scaling": 30, "cudarl.metrics": 30,
    "cudarl.reward": 28,  # pure functions of verdicts
    "cudarl.agents": 26,  # prompts, parsing, feedback, trajectories: read verdicts and tasks
    "cudarl.tester": 24,  # the lazy face
    "cudarl.tester.tester": 24, "cudarl.tester.batch": 24, "cudarl.tester.judgement": 24,
    "cudarl.tester.judging": 22,
    "cudarl.tester.build": 21,
    "cudarl.tester.sandbox": 20, "cudarl.tester.verdict": 20, "cudarl.tester.built": 20,
    "cudarl.tester.kernel_names": 20,
    "cudarl.tasks": 10,
    "cudarl": 0,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")}


def resolve(name: str) -> str | None:
    """The project module that ``name`` (a module, or a name inside one) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(resolve(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else resolve(base))
    return {name for name in found if name and name != module}


GRAPH = {module: imports_of(module) for module in MODULES}


def layer(module: str) -> int:
    prefix = module
    while prefix not in LAYERS:
        prefix = prefix.rpartition(".")[0]
        assert prefix, f"{module} has no layer in LAYERS: place it"
    return LAYERS[prefix]


def test_the_graph_is_read_from_the_source():
    """Guards the checks below against an empty graph: known edges must be found."""
    assert len(MODULES) > 60
    assert "cudarl.tester.verdict" in GRAPH["cudarl.tester.build.compile"]
    assert "actors.tester_pool" in GRAPH["cudarl.pool.client"]  # a function-level import


def test_no_import_circles():
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                circles.append(path[path.index(target):] + [module, target] if target in path else [module, target])
            elif target not in state:
                visit(target, path + [module])
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [])
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(circle) for circle in circles)


def test_imports_point_down_the_layers():
    upward = [f"{source} ({layer(source)}) imports {target} ({layer(target)})"
              for source, targets in GRAPH.items() for target in targets if layer(target) > layer(source)]
    assert not upward, "\n".join(sorted(upward))


def test_tasks_never_import_the_tester_or_anything_above():
    offending = sorted(f"{source} imports {target}" for source, targets in GRAPH.items()
                       if source.startswith("cudarl.tasks") for target in targets
                       if not target.startswith("cudarl.tasks") and layer(target) > 0)
    assert not offending, offending


def test_python_files_stay_under_400_lines():
    long = [f"{path.relative_to(ROOT)}: {count}" for folder in ("cudarl", "actors", "benchmarks", "tests", "scripts")
            for path in (ROOT / folder).rglob("*.py") if "exploits" not in path.parts
            for count in [len(path.read_text().splitlines())] if count >= 400]
    assert not long, long


def test_reading_a_verdict_loads_only_the_verdict_module():
    """The runner, a trainer or a dashboard reads verdicts; that must not pull in the tester."""
    probe = ("import sys; from cudarl.tester import Verdict; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cudarl', 'actors'))); "
             "print('torch' in sys.modules, 'ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded, heavy = done.stdout.splitlines()
    assert loaded == str(["cudarl", "cudarl.tester", "cudarl.tester.verdict"])
    assert heavy == "False False"
