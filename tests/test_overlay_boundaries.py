"""The overlay seam as import rules derived from the registry, so that an overlay registered
tomorrow is covered without naming it anywhere (docs/architecture.md, "Adding an overlay").

For every registered overlay (`pubsub.kernel.registry`, its `Overlay.package`):

* no host -- the node and supervisor daemons, the runtime, telemetry, the client library,
  the tools and the simulation engine -- imports anything of the overlay's package, directly
  or through other modules: they reach it only through the registry and the contracts;
* the overlay's package imports no host and no other overlay (its registration module, the
  one `registry.MODE_MODULES` names, may import what it registers: it is looked up by name
  and imported lazily);
* the overlay's package does no I/O: no asyncio, socket, sqlite3, time or os.

pyproject.toml states the same rules for the overlays of today by name (import-linter
contracts, tests/test_architecture.py); this test is what keeps a new package honest before
anyone adds it there.  Each rule is shown to catch a deliberate violation on a small graph.
"""

from __future__ import annotations

import copy
import importlib

import grimp
import pytest

from pubsub.kernel import registry

HOSTS = (
    "pubsub.node", "pubsub.supervisor", "pubsub.runtime", "pubsub.telemetry", "pubsub.client", "pubsub.ops",
    "pubsub.sim.engine",
)
#: Hosts an overlay's package must not import either (the hosts, the CLI and the whole simulator).
ABOVE = (*HOSTS, "pubsub.cli", "pubsub.sim", "pubsub.modes")
IO = ("asyncio", "socket", "sqlite3", "time", "os")


def overlays() -> dict[str, tuple[str, str]]:
    """overlay name -> (its package, its registration module)."""
    found = {}
    for module in registry.MODE_MODULES:
        mode = importlib.import_module(module).MODE
        if mode.overlay is not None:
            found[mode.name] = (mode.overlay.package, module)
    return found


def violations(graph: grimp.ImportGraph, packages: dict[str, tuple[str, str]]) -> list[str]:
    """Every broken rule of the module docstring, as one line each."""
    problems: list[str] = []
    homes = {package for package, _ in packages.values()}
    for name, (package, registration) in sorted(packages.items()):
        if package not in graph.modules:
            problems.append(f"{name}: its package {package} does not exist")
            continue
        for host in HOSTS:
            if host in graph.modules and graph.chain_exists(importer=host, imported=package, as_packages=True):
                chain = min(graph.find_shortest_chains(importer=host, imported=package, as_packages=True))
                problems.append(f"{host} imports the {name} overlay: {' -> '.join(chain)}")
        without = copy.deepcopy(graph)  # the registration module may import what it registers
        if registration in without.modules:
            without.remove_module(registration)
        for target in (*ABOVE, *IO, *(h for h in homes if h != package)):
            if target in without.modules and without.chain_exists(importer=package, imported=target, as_packages=True):
                chain = min(without.find_shortest_chains(importer=package, imported=target, as_packages=True))
                problems.append(f"the {name} overlay reaches {target}: {' -> '.join(chain)}")
    return problems


def test_every_registered_overlay_keeps_to_its_side_of_the_seam() -> None:
    packages = overlays()
    assert {"skipring", "clique"} <= set(packages)
    graph = grimp.build_graph("pubsub", "broker", include_external_packages=True, cache_dir=None)
    assert violations(graph, packages) == []


def _graph(imports: list[tuple[str, str]]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for module in ("pubsub", *HOSTS, *ABOVE, *IO, "pubsub.kernel", "pubsub.newring", "pubsub.newring.core",
                   "pubsub.newring.mode", "pubsub.other", "pubsub.other.core"):
        graph.add_module(module)
    for importer, imported in imports:
        graph.add_import(importer=importer, imported=imported)
    return graph


NEW = {"newring": ("pubsub.newring", "pubsub.newring.mode"), "other": ("pubsub.other", "pubsub.modes.other")}


@pytest.mark.parametrize(
    ("imports", "says"),
    [
        ([("pubsub.node", "pubsub.newring.core")], "pubsub.node imports the newring overlay"),
        ([("pubsub.ops", "pubsub.kernel"), ("pubsub.kernel", "pubsub.other.core")], "pubsub.ops imports the other"),
        ([("pubsub.newring.core", "pubsub.runtime")], "the newring overlay reaches pubsub.runtime: pubsub.newring.core -> pubsub.runtime"),
        ([("pubsub.newring.core", "time")], "the newring overlay reaches time"),
        ([("pubsub.newring.core", "pubsub.other.core")], "the newring overlay reaches pubsub.other"),
    ],
)
def test_the_rules_catch_a_deliberate_violation(imports: list[tuple[str, str]], says: str) -> None:
    assert violations(_graph([]), NEW) == []
    assert violations(_graph([("pubsub.newring.mode", "pubsub.sim")]), NEW) == []  # registration may
    found = violations(_graph(imports), NEW)
    assert any(says in line for line in found), found
