"""Authorization with real processes (issue 13, item 3): a TLS cluster of a supervisor and
three nodes started with a permissions file (``PUBSUB_PERMISSIONS``), clients holding their
own certificates, and what each may do:

* a client publishes only on the topics it was granted; a refused publication gets
  ``permission_denied`` and is stored nowhere;
* a client may not make a node leave (or join) a topic unless granted, nor read a stream it
  may not subscribe to; an unlisted client gets the file's default (here: nothing);
* the file is reloaded on SIGHUP: a grant added takes effect, a file that does not load
  keeps the rules in force and is counted;
* admin actions (`pubsub chaos`) need an admin certificate: a client is refused on the
  admin listener, the operator (admin) is served;
* the node's HTTP API speaks TLS with the same certificates and the same rules (403).

Every wait is bounded; every process is stopped by pid (`LocalCluster`).
"""

from __future__ import annotations

import http.client
import json
import os
import selectors
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import pick_free_ports
from pubsub.ops.tlsfiles import ClusterCerts

pytestmark = pytest.mark.integration

ORDERS, NEWS = "orders", "news"
COMMAND_TIMEOUT = 60.0
WAIT = 30.0
RULES = """
[users.alice]
publish = ["orders"]
subscribe = ["*"]
"""
RULES_WITH_JOIN = RULES + 'join = ["orders"]\n'


class Setup:
    def __init__(self, cluster: LocalCluster, certs: ClusterCerts, rules: Path, http_port: int) -> None:
        self.cluster, self.certs, self.rules, self.http_port = cluster, certs, rules, http_port

    def run(self, who: str, *args: str) -> subprocess.CompletedProcess[str]:
        """A ``pubsub`` command with the certificate issued to `who`."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PUBSUB_TLS_")}
        env |= self.certs.env_of(who)
        return subprocess.run(
            [sys.executable, "-m", "pubsub.cli.main", *args],
            capture_output=True, text=True, timeout=COMMAND_TIMEOUT, env=env,
        )

    def errors(self, which: int, code: str) -> int:
        return int(self.cluster.node_status(which)["stats"]["errors"].get(code, 0))


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    workdir = tmp_path_factory.mktemp("permissions")
    rules = workdir / "permissions.toml"
    rules.write_text(RULES)
    (http_port,) = pick_free_ports(1)
    cluster = LocalCluster(
        workdir, 3, interval=0.2, tls=True, env={"PUBSUB_PERMISSIONS": str(rules)},
        node_args={0: ["--http-listen", f"127.0.0.1:{http_port}"]},
    )
    assert cluster.certs is not None
    for name in ("alice", "mallory"):
        cluster.certs.issue("client", name)
    with cluster:
        for i in range(3):
            for topic in (ORDERS, NEWS):
                cluster.subscribe(i, topic, via_cli=True)  # the operator's admin certificate
        yield Setup(cluster, cluster.certs, rules, http_port)


def _payloads(setup: Setup, topic: str) -> dict[str, list[str]]:
    return {
        ref: [str(item.get("payload")) for item in items]
        for ref, items in setup.cluster.histories(setup.cluster.node_refs, topic, via_cli=True).items()
    }


def test_a_client_publishes_only_where_it_is_granted(setup: Setup) -> None:
    node = setup.cluster.node_refs[1]
    before = setup.errors(1, "permission_denied")
    ok = setup.run("alice", "publish", ORDERS, "granted", "--node", node, "--json")
    assert ok.returncode == 0, ok.stderr
    denied = setup.run("alice", "publish", NEWS, "forbidden", "--node", node)
    assert denied.returncode != 0 and "permission_denied" in denied.stderr, denied.stderr
    assert "Traceback" not in denied.stderr
    assert setup.errors(1, "permission_denied") == before + 1
    setup.cluster.poll(
        lambda: [r for r, p in _payloads(setup, ORDERS).items() if "granted" not in p], WAIT,
        "the granted publication at every node",
    )
    # The refused one is nowhere: the publication that was granted arrived everywhere
    # after it was refused, and news holds nothing.
    assert all(p == [] for p in _payloads(setup, NEWS).values())


def test_no_leave_no_join_no_stream_without_a_grant(setup: Setup) -> None:
    node = setup.cluster.node_refs[2]
    left = setup.run("alice", "unsubscribe", ORDERS, "--node", node)
    assert left.returncode != 0 and "permission_denied" in left.stderr, left.stderr
    joined = setup.run("alice", "subscribe", "elsewhere", "--detach", "--node", node)
    assert joined.returncode != 0 and "permission_denied" in joined.stderr, joined.stderr
    topics = setup.cluster.node_status(2)["topics"]
    assert ORDERS in json.dumps(topics) and "elsewhere" not in json.dumps(topics)
    read = setup.run("mallory", "history", ORDERS, "--node", node)
    assert read.returncode != 0 and "permission_denied" in read.stderr, read.stderr
    assert setup.run("alice", "history", ORDERS, "--node", node).returncode == 0


def test_a_reader_without_a_join_grant_streams_with_no_join(setup: Setup) -> None:
    """`pubsub subscribe` asks the node to join first; a client granted reading but not
    joining was refused and had only `history`.  The refusal now names --no-join, and with
    it the client streams a topic the node runs."""
    node = setup.cluster.node_refs[1]
    refused = setup.run("alice", "subscribe", NEWS, "--node", node, "--count", "1")
    assert refused.returncode != 0 and "permission_denied" in refused.stderr, refused.stderr
    assert "--no-join" in refused.stderr, refused.stderr
    plain = {k: v for k, v in os.environ.items() if not k.startswith("PUBSUB_TLS_")}
    reader = subprocess.Popen(
        [sys.executable, "-m", "pubsub.cli.main", "subscribe", NEWS, "--node", node, "--no-join",
         "--new-only", "--count", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=plain | setup.certs.env_of("alice"),
    )
    try:
        assert reader.stderr is not None
        waiting = selectors.DefaultSelector()
        waiting.register(reader.stderr, selectors.EVENT_READ)
        assert waiting.select(timeout=WAIT), "the reader did not start its stream"
        started = reader.stderr.readline()  # "...: subscribed to news; ..." once the stream runs
        assert "subscribed to news" in started, started + reader.stderr.read()
        published = subprocess.run(
            [sys.executable, "-m", "pubsub.cli.main", "publish", NEWS, "read by alice", "--node", node],
            capture_output=True, text=True, timeout=COMMAND_TIMEOUT, env=plain | setup.certs.client_env(),
        )
        assert published.returncode == 0, published.stderr
        out, err = reader.communicate(timeout=COMMAND_TIMEOUT)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert reader.returncode == 0, err
    assert out.strip().endswith("read by alice"), out


def test_the_file_is_reloaded_on_sighup(setup: Setup) -> None:
    node, daemon = setup.cluster.node_refs[0], setup.cluster.node(0)
    assert daemon.process is not None
    setup.rules.write_text(RULES_WITH_JOIN)
    os.kill(daemon.process.pid, signal.SIGHUP)

    def refused() -> list[str]:
        done = setup.run("alice", "subscribe", ORDERS, "--detach", "--node", node)
        return [] if done.returncode == 0 else [done.stderr.strip()]

    setup.cluster.poll(refused, WAIT, "alice's join grant after SIGHUP")
    setup.rules.write_text("[users.alice\n")  # not TOML: the rules in force stay
    os.kill(daemon.process.pid, signal.SIGHUP)
    setup.cluster.poll(
        lambda: [] if setup.errors(0, "permissions_reload_error") >= 1 else ["not counted yet"], WAIT,
        "the failed reload counted",
    )
    assert setup.run("alice", "subscribe", ORDERS, "--detach", "--node", node).returncode == 0
    assert setup.run("alice", "publish", NEWS, "still no", "--node", node).returncode != 0
    setup.rules.write_text(RULES)
    os.kill(daemon.process.pid, signal.SIGHUP)


def test_admin_actions_need_an_admin_certificate(setup: Setup) -> None:
    admin = setup.cluster.node(1).admin_ref
    assert admin is not None
    refused = setup.run("alice", "chaos", "info", "--admin", admin)
    assert refused.returncode != 0 and "permission_denied" in refused.stderr, refused.stderr
    served = setup.run("localcluster", "chaos", "info", "--admin", admin)
    assert served.returncode == 0, served.stderr
    assert setup.errors(1, "admin_permission_denied") >= 1


def _https(setup: Setup, who: str, method: str, path: str, body: bytes | None = None) -> int:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(cafile=str(setup.certs.ca))
    cert, key = setup.certs.pairs[who]
    ctx.load_cert_chain(str(cert), str(key))
    request = urllib.request.Request(
        f"https://127.0.0.1:{setup.http_port}{path}", data=body, method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=COMMAND_TIMEOUT) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_the_http_api_speaks_tls_with_the_same_rules(setup: Setup) -> None:
    body = json.dumps({"payload": "via https"}).encode()
    assert _https(setup, "alice", "POST", f"/v1/topics/{NEWS}/publications", body) == 403
    assert _https(setup, "alice", "DELETE", f"/v1/topics/{ORDERS}/membership") == 403
    assert _https(setup, "alice", "POST", f"/v1/topics/{ORDERS}/publications", body) == 200
    assert _https(setup, "mallory", "GET", f"/v1/topics/{ORDERS}/publications") == 403
    with pytest.raises((urllib.error.URLError, http.client.HTTPException, ConnectionError)):  # plain HTTP
        urllib.request.urlopen(f"http://127.0.0.1:{setup.http_port}/v1/status", timeout=COMMAND_TIMEOUT)
