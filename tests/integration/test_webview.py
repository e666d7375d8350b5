"""The supervisor's web view (pubsub/supervisor/webview.py) in headless Chromium, against a live
cluster of 8 node processes in one topic.

The page is read as drawn: its SVG members (``g.member``: data-ref, data-label) and edges
(``path.edge``: data-from, data-to), and its event log (``#log li``: data-kind, data-ref).
The drawn edges must be exactly those of the ideal SR(n) over the drawn members, as the
independent checker (`tests.checker.ideal_edges`) computes them; after kill -9 of a node
the page must show the repaired ring of 7, legitimate, with the fault in its log.

Needs Debian's ``chromium`` (``tests/install-chromium.sh``, run by ``make test``) and the
``playwright`` Python package (the ``test`` extra); Playwright drives that executable (no
browser download).  Skips with the reason when either is missing.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import shutil
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pubsub.ops.localcluster import LocalCluster
from tests.checker import ideal_edges
from tests.cluster_checks import ring_problems

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TOPIC = "webview"
N = 8
KILLED = 3
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
T = TypeVar("T")

#: What the page draws for one topic, read in one pass of the page's own thread.
READ_PAGE = """topic => {
  const section = document.querySelector(`section.topic[data-topic="${topic}"]`);
  const log = [...document.querySelectorAll("#log li")].map(li => [li.dataset.kind, li.dataset.ref || null]);
  if (!section) return {found: false, log};
  const svg = section.querySelector("svg");
  return {
    found: true,
    legitimate: section.dataset.legitimate === "true",
    members: [...svg.querySelectorAll("g.member")].map(g => [g.dataset.ref, g.dataset.label, g.dataset.answering]),
    edges: [...svg.querySelectorAll("path.edge")].map(p => [p.dataset.from, p.dataset.to, p.dataset.kind]),
    problems: [...section.querySelectorAll("ul.problems li")].map(li => li.textContent),
    log,
  };
}"""


def _drawn(page: Any) -> dict[str, Any]:
    return dict(page.evaluate(READ_PAGE, TOPIC))


def _wait_page(page: Any, problems: Callable[[dict[str, Any]], list[str]], timeout: float, what: str) -> dict[str, Any]:
    """Read the page every 0.25 s until `problems` finds nothing; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        drawn = _drawn(page)
        found = problems(drawn)
        if not found:
            return drawn
        if time.monotonic() > deadline:
            pytest.fail(f"the page did not show {what} within {timeout:g} s: {found[:5]}")
        page.wait_for_timeout(250)


def _ring_shown(n: int, gone: str | None = None) -> Callable[[dict[str, Any]], list[str]]:
    """Problems of a drawn topic: not n members, not legitimate, edges not SR(n), `gone` shown."""

    def problems(drawn: dict[str, Any]) -> list[str]:
        if not drawn["found"]:
            return ["no section for the topic yet"]
        found = list(drawn["problems"])
        members = {ref: label for ref, label, _ in drawn["members"]}
        if len(members) != n:
            found.append(f"{len(members)} members drawn, not {n}")
        if not drawn["legitimate"]:
            found.append("not marked legitimate")
        if gone is not None and gone in members:
            found.append(f"{gone} still drawn")
        if not found and {(a, b) for a, b, _ in drawn["edges"]} != ideal_edges(members):
            found.append("edges drawn differ from SR(n)")
        return found

    return problems


def _png(path: Path) -> None:
    assert path.exists(), f"no screenshot at {path}"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"


@pytest.fixture
def sync_api() -> Any:
    """Playwright's sync API, if Playwright and Debian's Chromium are here (else skip)."""
    api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (pip install -e '.[test]')")
    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian's chromium (tests/install-chromium.sh, or apt-get install chromium)")
    return api


@contextlib.contextmanager
def headless_chromium(sync_api: Any) -> Iterator[Any]:
    """Debian's Chromium, headless, driven by Playwright.  Playwright's sync API keeps an
    event loop running in this thread while it is open, so the cluster's own queries
    (`asyncio.run`) go through `off_thread` meanwhile."""
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def off_thread(call: Callable[[], T]) -> T:
    """`call()` on a thread of its own (see `headless_chromium`)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(call).result()


def test_web_view_draws_the_skip_ring_and_its_repair(tmp_path: Path, sync_api: Any) -> None:
    with LocalCluster(tmp_path / "cluster", N, interval=0.2, web=True) as cluster, contextlib.ExitStack() as stack:
        assert cluster.web_url is not None
        refs = cluster.node_refs
        for i in range(N):
            cluster.subscribe(i, TOPIC)
        cluster.poll(lambda: ring_problems(cluster, {TOPIC: refs}), 60, f"SR({N})")

        browser = stack.enter_context(headless_chromium(sync_api))
        page = browser.new_page(viewport={"width": 1000, "height": 900})
        page.goto(cluster.web_url)
        drawn = _wait_page(page, _ring_shown(N), 30, f"SR({N})")

        # Members and edges as drawn equal the supervisor's members and the checker's SR(8).
        members = {ref: label for ref, label, _ in drawn["members"]}
        supervisor_members, _ = off_thread(lambda: cluster.snapshot(TOPIC))
        assert members == supervisor_members
        edges = {(a, b) for a, b, _ in drawn["edges"]}
        assert edges == ideal_edges(members)
        assert len(drawn["edges"]) == len(edges), "an edge is drawn twice"
        # The JSON the page is drawn from says the same.
        with urllib.request.urlopen(cluster.web_url + "api/rings", timeout=5) as response:
            view = json.load(response)["topics"][TOPIC]
        assert view["legitimate"] and view["n"] == N
        assert {(e["from"], e["to"]) for e in view["edges"]} == ideal_edges(members)
        assert page.locator("#connection").get_attribute("data-state") == "live"

        shot = tmp_path / "webview-sr8.png"
        page.screenshot(path=str(shot), full_page=True)
        _png(shot)

        killed = refs[KILLED]
        cluster.kill(KILLED)
        remaining = [ref for ref in refs if ref != killed]

        def repaired(drawn: dict[str, Any]) -> list[str]:
            found = _ring_shown(N - 1, gone=killed)(drawn)
            kinds = [kind for kind, ref in drawn["log"] if ref == killed]
            if "fault" not in kinds:
                found.append(f"no fault logged for {killed}")
            if not any(kind == "converged" for kind, _ in drawn["log"]):
                found.append("no convergence logged")
            return found

        drawn = _wait_page(page, repaired, 60, f"the repaired SR({N - 1}) and the fault")
        members = {ref: label for ref, label, _ in drawn["members"]}
        assert set(members) == set(remaining)
        assert {(a, b) for a, b, _ in drawn["edges"]} == ideal_edges(members)
        assert off_thread(lambda: ring_problems(cluster, {TOPIC: remaining}, gone=[killed])) == []

        shot = tmp_path / "webview-repaired.png"
        page.screenshot(path=str(shot), full_page=True)
        _png(shot)
        page.close()
