"""Test-suite wide settings: how pytest-xdist spreads the tests over its workers.

Some integration modules are *scenarios*: their tests are steps that share one cluster of
real processes (a module-scoped fixture) and build on each other in file order.  xdist's
default "load" scheduling hands out tests in chunks regardless of modules, so such a module
could be split over two workers -- each would then start its own cluster and run only some
of the steps.  (``xdist_group`` marks would be the usual remedy, but xdist 3.8 tags the
grouped tests through an attribute pytest 9 no longer reads, so they have no effect here.)

With ``-n`` and the default distribution, the scheduler below keeps every module listed in
`SCENARIO_MODULES` together on one worker, in file order, and spreads every other test one
by one, as "load" does.  An explicit ``--dist`` (loadscope, loadfile, ...) is left alone.
The longest modules are collected first (`LONGEST_FIRST`), so they are handed out first.
"""

from __future__ import annotations

from typing import Any

import pytest

#: Modules whose tests must run in order on one worker (paths as in pytest node ids).
SCENARIO_MODULES = frozenset(
    {"tests/integration/test_integration.py", "tests/integration/test_publications.py",
     "tests/integration/test_chaos.py",
     "tests/broker/test_broker_integration.py",  # one 9-broker SCOT, steps in file order
     # one Spark session (JVM) for the module instead of one per xdist worker
     "tests/ops/test_analysis.py",
     # one cluster run and one `pubsub analyze` shared by the module's tests
     "tests/ops/test_analyze_run.py"}
)


#: The longest work units of `make test` (minutes each on 2 cores), longest first: they are
#: handed out before everything else, so that the run does not end with one worker busy
#: for minutes on a long test drawn last while the other has nothing left (longest
#: processing time first).  A module here moves as a block, in its own order.
LONGEST_FIRST = (
    "tests/ops/test_compose.py",
    "tests/ops/test_analyze_run.py",
    "tests/ops/test_analysis_streaming.py",
    "tests/ops/test_experiment.py",
    "tests/ops/test_analysis.py",
    "tests/sim/test_sim_convergence.py",
    "tests/integration/test_integration.py",
    "tests/bench/test_bench_endtoend.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`LONGEST_FIRST` modules first, in that order; every other test as collected."""
    rank = {module: i for i, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def _scenario_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class ScenarioScheduling(LoadScopeScheduling):
        """LoadScope with one work unit per scenario module and per other test."""

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in SCENARIO_MODULES else nodeid

    return ScenarioScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "load":
        return None
    return _scenario_scheduler(config, log)
