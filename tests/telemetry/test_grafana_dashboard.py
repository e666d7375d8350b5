"""The Grafana dashboard (deploy/grafana/pubsub-dashboard.json) against real daemons.

Every metric a panel queries must exist in a real scrape of a running cluster (a
supervisor and three nodes with metrics and the event stream on, a topic, a publication)
and be documented in the README's metrics table; and, with a real Prometheus server
(Debian's package) scraping that cluster, every panel's query must be valid PromQL once
Grafana's variables are filled in, and the core panels must show data.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import pick_free_ports, poll
from pubsub.telemetry.metrics import prometheus_config
from tests.telemetry.test_prometheus_scrape import find_or_install

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "pubsub-dashboard.json"
TOPIC = "dash"
METRIC = re.compile(r"\b(pubsub_[a-z0-9_]+)\b")


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text(encoding="utf-8")))


def queries() -> list[tuple[str, str]]:
    """(panel title, expr) of every query of every panel."""
    return [
        (panel["title"], target["expr"])
        for panel in dashboard()["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]


def queried_metrics() -> set[str]:
    return {name for _, expr in queries() for name in METRIC.findall(expr)}


def fill_variables(expr: str) -> str:
    """What Grafana sends for 'All' of every variable, and a rate window."""
    return expr.replace("$__rate_interval", "1m").replace('"$job"', '".*"').replace('"$topic"', '".*"')


def exported_names(text: str) -> set[str]:
    """Every sample name the exposition `text` has or would have (a family without samples
    still names its series)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.update(sample.name for sample in family.samples)
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
        names.update(family.name + s for s in suffixes.get(family.type, ("",)))
    return names


def test_the_dashboard_is_well_formed() -> None:
    dash = dashboard()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dash["templating"]["list"]}
    assert variables == {"datasource", "job", "topic"}
    for panel in dash["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            used = set(re.findall(r"\$(\w+)", target["expr"])) - {"__rate_interval"}
            assert used <= variables, (panel["title"], used)
    assert len(queries()) >= 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("dashboard")
    with LocalCluster(base / "cluster", 3, interval=0.2, metrics=True, events_dir=base / "events") as c:
        for i in range(3):
            c.subscribe(i, TOPIC)
        c.poll(lambda: [] if len(c.supervisor_status()["topics"].get(TOPIC, {}).get("members", [])) == 3
               else ["three members"], 60, "three members")
        c.publish(0, TOPIC, "on the dashboard")
        yield c


def test_every_metric_the_dashboard_queries_exists_in_a_real_scrape(cluster: LocalCluster) -> None:
    exported: set[str] = set()
    for daemon in cluster.daemons():
        with urllib.request.urlopen(f"http://127.0.0.1:{daemon.metrics_port}/metrics", timeout=5) as reply:
            exported |= exported_names(reply.read().decode())
    wanted = queried_metrics()
    assert wanted, "the dashboard queries no pubsub metric"
    assert sorted(wanted - exported) == [], "queried but not exported"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    undocumented = sorted(
        name for name in wanted
        if re.sub(r"_(total|bucket|sum|count)$", "", name) not in readme
    )
    assert undocumented == [], "queried but not in the README's metrics table"


def test_every_query_runs_on_prometheus_scraping_the_cluster(cluster: LocalCluster, tmp_path: Path) -> None:
    prometheus = find_or_install("prometheus")
    targets = cluster.workdir / "prometheus-targets.json"
    config = tmp_path / "prometheus.yml"
    config.write_text(prometheus_config([targets], scrape_interval="1s"), encoding="utf-8")
    (port,) = pick_free_ports(1)
    api = f"http://127.0.0.1:{port}/api/v1/query?"
    with open(tmp_path / "prometheus.log", "wb") as log:
        server = subprocess.Popen(
            [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            def ask(expr: str) -> dict[str, Any]:
                url = api + urllib.parse.urlencode({"query": fill_variables(expr)})
                try:
                    with urllib.request.urlopen(url, timeout=5) as reply:
                        return dict(json.loads(reply.read()))
                except urllib.error.HTTPError as exc:  # 400 for a bad query: its body says why
                    return dict(json.loads(exc.read()))

            core = [expr for title, expr in queries() if title in ("Members per topic", "Degree per node",
                                                                    "Messages sent / s, by type")]

            def not_yet() -> list[str]:
                if server.poll() is not None:
                    raise AssertionError((tmp_path / "prometheus.log").read_text(errors="replace")[-2000:])
                try:
                    empty = [expr for expr in core if not ask(expr).get("data", {}).get("result")]
                except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                    return [f"prometheus not answering yet: {exc}"]
                return [f"no data yet: {expr}" for expr in empty]

            poll(not_yet, 90, "the core panels to show data", interval=0.5)
            bad = {}
            for title, expr in queries():
                body = ask(expr)
                if body.get("status") != "success":
                    bad[title] = body.get("error")
            assert bad == {}
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)
