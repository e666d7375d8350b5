"""The import rules of docs/architecture.md ("Layers"), checked on the tree and shown to bite.

The rules live in pyproject.toml as import-linter contracts (cores do no I/O; kernel,
runtime, telemetry and the simulation engine import no mode; the daemons, runtime,
telemetry, client, tools and simulation engine import no overlay and no broker; arrows
point down) plus one
rule import-linter cannot state, no import cycle between modules, checked here with grimp
(the import graph library import-linter is built on).  Each rule is also run against a
small throwaway tree with one deliberate violation, so a rule that silently stopped
matching anything would fail here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
ROOT_PACKAGES = ("pubsub", "broker")


def _contracts() -> dict[str, object]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]  # type: ignore[no-any-return]


def _lint_imports(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "COLUMNS": "250"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", "pyproject.toml", "--no-cache"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )


def module_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every strongly connected set of two or more modules (an import cycle), by Tarjan's
    algorithm over the graph's direct imports between project modules."""
    modules = sorted(m for m in graph.modules if m.split(".")[0] in ROOT_PACKAGES)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    work: list[tuple[str, list[str]]] = []  # the depth-first path, each with its unvisited targets
    for root in modules:
        if root in index:
            continue

        def enter(module: str) -> None:
            nonlocal counter
            index[module] = low[module] = counter
            counter += 1
            stack.append(module)
            on_stack.add(module)
            targets = sorted(
                t for t in graph.find_modules_directly_imported_by(module) if t in modules
            )
            work.append((module, targets))

        enter(root)
        while work:
            module, targets = work[-1]
            if targets:
                target = targets.pop()
                if target not in index:
                    enter(target)
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    item = stack.pop()
                    on_stack.discard(item)
                    component.append(item)
                    if item == module:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


# --- the real tree -------------------------------------------------------------------------
def test_import_contracts_hold_on_the_tree() -> None:
    done = _lint_imports(ROOT, ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_no_import_cycle_between_modules() -> None:
    graph = grimp.build_graph(*ROOT_PACKAGES, cache_dir=None)
    assert module_cycles(graph) == []


# --- the rules bite ------------------------------------------------------------------------
def _stub_tree(base: Path) -> None:
    """Every package the contracts name, empty, plus pyproject.toml with the real contracts."""
    contracts = _contracts()
    names: set[str] = set()
    for contract in contracts["contracts"]:  # type: ignore[union-attr]
        for key in ("source_modules", "forbidden_modules", "layers"):
            for entry in contract.get(key, []):
                names.update(part.strip() for part in entry.replace("|", ":").split(":"))
    for name in sorted(names):
        if name.split(".")[0] not in ROOT_PACKAGES:
            continue  # the standard library's modules
        path = base.joinpath(*name.split("."))
        path.mkdir(parents=True, exist_ok=True)
        (path / "__init__.py").touch()
        for parent in path.relative_to(base).parents:
            if str(parent) != ".":
                (base / parent / "__init__.py").touch()
    lines = ["[tool.importlinter]", f"root_packages = {_toml(list(ROOT_PACKAGES))}",
             "include_external_packages = true", ""]
    for contract in contracts["contracts"]:  # type: ignore[union-attr]
        lines.append("[[tool.importlinter.contracts]]")
        for key, value in contract.items():
            lines.append(f"{key} = {_toml(value)}")
        lines.append("")
    (base / "pyproject.toml").write_text("\n".join(lines))


def _toml(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return '"' + str(value).replace('"', '\\"') + '"'


def _package(base: Path, name: str) -> None:
    """`name` and every package above it, empty (where the contracts do not name them)."""
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
        path = base.joinpath(*parts[:depth])
        path.mkdir(exist_ok=True)
        (path / "__init__.py").touch()


def _write(base: Path, module: str, source: str) -> None:
    path = base.joinpath(*module.split(".")).with_suffix(".py")
    path.write_text(source)


@pytest.mark.parametrize(
    ("module", "source", "broken"),
    [
        ("pubsub.skipring.bad", "import asyncio\n", "Cores and kernel do no I/O"),
        ("broker.cores.bad", "import time\n", "Cores and kernel do no I/O"),
        ("pubsub.skipring.supervisor.bad", "import sqlite3\n", "Cores and kernel do no I/O"),
        ("pubsub.runtime.bad", "import broker.app\n", "import no protocol mode"),
        ("pubsub.kernel.bad", "import pubsub.skipring\n", "import no protocol mode"),
        ("pubsub.sim.engine.bad", "import pubsub.skipring.supervisor.core\n", "import no protocol mode"),
        ("pubsub.telemetry.bad", "import pubsub.supervisor.app\n", "import no protocol mode"),
        ("pubsub.skipring.bad", "import pubsub.node\n", "Arrows point down"),
        ("pubsub.skipring.supervisor.bad", "import pubsub.supervisor.app\n", "Arrows point down"),
        ("pubsub.runtime.bad", "import pubsub.client\n", "Arrows point down"),
        ("pubsub.clique.bad", "import socket\n", "Cores and kernel do no I/O"),
        ("pubsub.node.bad", "import pubsub.skipring.labels\n", "import no overlay and no broker"),
        ("pubsub.supervisor.bad", "import pubsub.clique.supervisor\n", "import no overlay and no broker"),
        ("pubsub.client.bad", "import broker.cores\n", "import no overlay and no broker"),
        ("pubsub.ops.bad", "import pubsub.skipring.ideal\n", "import no overlay and no broker"),
        ("pubsub.sim.engine.bad", "import pubsub.clique\n", "import no overlay and no broker"),
    ],
)
def test_each_contract_catches_a_deliberate_violation(
    tmp_path: Path, module: str, source: str, broken: str
) -> None:
    _stub_tree(tmp_path)
    for name in (module.rpartition(".")[0], source.removeprefix("import ").strip()):
        if name.split(".")[0] in ROOT_PACKAGES:
            _package(tmp_path, name)  # where the module goes and what it imports, in the clean tree
    clean = _lint_imports(tmp_path, tmp_path)
    assert clean.returncode == 0, clean.stdout[-3000:] + clean.stderr[-2000:]
    _write(tmp_path, module, source)
    done = _lint_imports(tmp_path, tmp_path)
    assert done.returncode != 0
    broken_lines = [line for line in done.stdout.splitlines() if line.endswith("BROKEN")]
    assert any(broken in line for line in broken_lines), done.stdout[-3000:]


def test_the_cycle_check_finds_a_deliberate_cycle(tmp_path: Path) -> None:
    _stub_tree(tmp_path)
    _write(tmp_path, "pubsub.kernel.a", "from pubsub.kernel import b\n")
    _write(tmp_path, "pubsub.kernel.b", "from pubsub.kernel import c\n")
    _write(tmp_path, "pubsub.kernel.c", "import pubsub.kernel.a\n")
    # In a fresh interpreter, so that the throwaway `pubsub` is the one found.
    script = (
        "import grimp; from tests.test_architecture import module_cycles; "
        "print(module_cycles(grimp.build_graph('pubsub', cache_dir=None)))"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[['pubsub.kernel.a', 'pubsub.kernel.b', 'pubsub.kernel.c']]"
