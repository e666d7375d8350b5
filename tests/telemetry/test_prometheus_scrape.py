"""A real Prometheus server (Debian's `prometheus` package) scrapes a 4-node local cluster.

The cluster (`LocalCluster(metrics=True)`) writes its file_sd target file; Prometheus runs
with a configuration generated into tmp_path (`pubsub.telemetry.metrics.prometheus_config`, scrape
interval 1 s), its own storage in tmp_path and a free port on 127.0.0.1.  The test then
asks Prometheus' HTTP API (/api/v1/query) for the series the daemons export.  The shipped
deploy/prometheus.yml is checked with `promtool`.  And a fresh daemon's scrape already has a
sample, 0, for every label value fixed in advance (error codes, the admin listener's among
them, reasons, arrival paths), and one for every message type of its mode, so that ``rate``
and ``absent`` tell zero from missing.

Prometheus is looked up on PATH (and in /usr/bin); when it is missing and this machine can
install it (apt-get as root), it is installed once.  Only if that is impossible does the
test skip, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pubsub.node.telemetry import REJECTION_REASONS, VIAS
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import pick_free_ports, poll
from pubsub.runtime import limits, tlscount
from pubsub.runtime.stats import ADMIN_ERROR_CODES, ERROR_CODES
from pubsub.skipring import admission
from pubsub.telemetry.metrics import prometheus_config, samples

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "metrics-topic"
N_NODES = 4


def find_or_install(binary: str) -> str:
    """Path of `binary` from Debian's prometheus package, installing it if possible;
    pytest.skip with the reason otherwise."""
    found = shutil.which(binary) or (f"/usr/bin/{binary}" if os.access(f"/usr/bin/{binary}", os.X_OK) else None)
    if found:
        return found
    if shutil.which("apt-get") is None:
        pytest.skip(f"{binary} is not installed and this machine has no apt-get to install it")
    if os.geteuid() != 0:
        pytest.skip(f"{binary} is not installed and installing it needs root (apt-get install prometheus)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # another installer of the same run (podman's, chromium's) may hold dpkg's lock: wait for it
    wait = ["-o", "DPkg::Lock::Timeout=600"]
    for command in (["apt-get", *wait, "update", "-qq"], ["apt-get", *wait, "install", "-y", "-qq", "prometheus"]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        if done.returncode != 0:
            pytest.skip(f"could not install prometheus: {' '.join(command)}: {done.stderr.strip()[-300:]}")
    found = shutil.which(binary)
    if not found:
        pytest.skip(f"apt-get installed prometheus but {binary} is not on PATH")
    return found


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return json.loads(reply.read())


def test_shipped_config_is_valid() -> None:
    promtool = find_or_install("promtool")
    done = subprocess.run(
        [promtool, "check", "config", str(ROOT / "deploy" / "prometheus.yml")],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_prometheus_scrapes_a_four_node_cluster(tmp_path: Path) -> None:
    prometheus = find_or_install("prometheus")
    with LocalCluster(tmp_path / "cluster", N_NODES, interval=0.2, metrics=True) as cluster:
        targets = cluster.workdir / "prometheus-targets.json"
        assert targets.exists()
        config = tmp_path / "prometheus.yml"
        config.write_text(prometheus_config([targets], scrape_interval="1s"), encoding="utf-8")
        (port,) = pick_free_ports(1)
        api = f"http://127.0.0.1:{port}"
        log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 - closed below
        server = subprocess.Popen(
            [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            for i in range(N_NODES):
                cluster.subscribe(i, TOPIC)
            cluster.publish(0, TOPIC, "scraped")

            def query(expr: str) -> list[dict[str, Any]]:
                url = f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
                body = get_json(url)
                assert body["status"] == "success", body
                return list(body["data"]["result"])

            def problems() -> list[str]:
                if server.poll() is not None:
                    raise AssertionError(
                        f"prometheus exited with {server.returncode}: "
                        + (tmp_path / "prometheus.log").read_text(errors="replace")[-2000:]
                    )
                try:
                    up = query('up{job="pubsub"}')
                    members = query(f'pubsub_topic_members{{topic="{TOPIC}"}}')
                    degree = query(f'pubsub_node_degree{{topic="{TOPIC}"}}')
                    size = query(f'pubsub_trie_publications{{topic="{TOPIC}"}}')
                    # a scrape can fall between the trie insert and the commit that counts it
                    local = query('pubsub_publications_delivered_total{via="local"} > 0')
                except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                    return [f"prometheus API not answering yet: {exc}"]
                wrong = []
                if sorted(float(r["value"][1]) for r in up) != [1.0] * (N_NODES + 1):
                    wrong.append(f"up: {[(r['metric'].get('instance'), r['value'][1]) for r in up]}")
                if [(r["metric"].get("role"), float(r["value"][1])) for r in members] != [("supervisor", 4.0)]:
                    wrong.append(f"members: {members}")
                node_targets = {f"127.0.0.1:{d.metrics_port}" for d in cluster.nodes}
                if {r["metric"]["instance"] for r in degree} != node_targets or any(
                    float(r["value"][1]) < 2 for r in degree
                ):
                    wrong.append(f"degree: {degree}")
                if {r["metric"]["instance"] for r in size} != node_targets or any(
                    float(r["value"][1]) != 1 for r in size
                ):
                    wrong.append(f"trie size: {size}")
                if not local:
                    wrong.append("no node has counted a local delivery yet")
                return wrong

            poll(problems, 90, "Prometheus to hold the cluster's series", interval=0.5)

            # The labels the target file gave, and a counter Prometheus can rate.
            (sup,) = query(f'pubsub_topic_members{{topic="{TOPIC}"}}')
            assert sup["metric"]["cluster"] == str(cluster.workdir)
            assert sup["metric"]["instance"] == f"127.0.0.1:{cluster.supervisor.metrics_port}"
            info = query('pubsub_daemon_info{role="node"}')
            assert sorted(r["metric"]["ref"] for r in info) == sorted(cluster.node_refs)
            local = query('pubsub_publications_delivered_total{via="local"} > 0')
            assert [r["metric"]["instance"] for r in local] == [f"127.0.0.1:{cluster.nodes[0].metrics_port}"]
        finally:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            log.close()
    assert server.returncode is not None


#: Labelled counters whose label values are fixed in advance: name -> (label, values).
KNOWN_EVERYWHERE = {
    "pubsub_connections_refused_total": ("reason", limits.REFUSED_REASONS),
    "pubsub_connections_closed_total": ("reason", limits.CLOSED_REASONS),
    "pubsub_publish_quota_refused_total": ("reason", limits.QUOTA_REASONS),
    "pubsub_tls_handshake_failures_total": ("reason", tlscount.REASONS),
}
KNOWN_AT_NODES = {
    "pubsub_publications_rejected_total": ("reason", REJECTION_REASONS),
    "pubsub_publications_delivered_total": ("via", VIAS),
    "pubsub_delivery_latency_seconds_count": ("via", VIAS),
}


#: The runtime's counters by message type: a sample for every kind of the daemon's mode.
BY_TYPE = (
    "pubsub_messages_sent_total", "pubsub_messages_received_total",
    "pubsub_sent_bytes_total", "pubsub_received_bytes_total",
)


@pytest.mark.parametrize("admin", [True, False])
def test_a_fresh_daemon_reports_zero_for_every_known_label_value(tmp_path: Path, admin: bool) -> None:
    # the admin listener's codes only where it is open
    codes = {"pubsub_frame_errors_total": ("code", (*ERROR_CODES, *ADMIN_ERROR_CODES) if admin else ERROR_CODES)}
    with LocalCluster(tmp_path / "cluster", 1, interval=0.2, metrics=True, admin=admin) as cluster:
        for daemon, known in ((cluster.supervisor, KNOWN_EVERYWHERE | codes),
                              (cluster.nodes[0], KNOWN_EVERYWHERE | KNOWN_AT_NODES | codes)):
            with urllib.request.urlopen(f"http://127.0.0.1:{daemon.metrics_port}/metrics", timeout=5) as reply:
                found = list(samples(reply.read().decode()))
            for name, (label, values) in known.items():
                got = {labels[label]: value for sample, labels, value in found if sample == name}
                assert got == dict.fromkeys(values, 0.0), (daemon.ref, name, got)
            for name in BY_TYPE:  # every kind, some (hello, ...) counted by now
                got = {labels["type"] for sample, labels, value in found if sample == name}
                assert got == set(admission.KINDS), (daemon.ref, name, sorted(got))
