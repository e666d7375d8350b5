"""TLS with real processes (issue 13, items 1, 2 and 7): a cluster of a supervisor and three
nodes started with mutual TLS (`LocalCluster(tls=True)`, certificates made on the fly), the
CLI talking to it with the cluster's client certificate, and the connections it must
refuse:

* a plain-TCP client (no TLS at all);
* a client presenting a node certificate whose Hello claims another reference -- refused
  and counted (``identity_mismatch``) in the node's stats;
* a certificate issued by another CA (and the CLI presenting one is told that the TLS
  handshake failed, and to check who signed its certificate);
* a node certificate sending ``SetData`` as if it were the supervisor (``forbidden_sender``);
* in broker mode, a broker certificate sending a heartbeat in another broker's name.

`pubsub cluster up --tls` starts such a cluster in the background and `cluster status`
reaches it through the certificates named in the manifest.  And the safe default: a daemon asked to listen on 0.0.0.0 without TLS refuses unless it
was started with ``--insecure``; bad TLS settings (a certificate naming another daemon, files
that do not load) stop a daemon at start like any invalid setting.  Every wait is bounded; every process is stopped by pid.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.cores.control import BrokerHeartbeat
from broker.cores.topology import scot
from broker.localscot import LocalScot
from pubsub.kernel.control import ErrorReply, Hello, StatusRequest
from pubsub.kernel.message import Topic
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import pick_free_ports, poll, terminate
from pubsub.ops.tlsfiles import ClusterCerts
from pubsub.skipring.messages import SetData
from pubsub.skipring.statuscheck import ring_problems
from tests.attackers import exchange, tls_context

pytestmark = pytest.mark.integration

TOPIC = "secure"
CONVERGE = 60.0
COMMAND_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("tls"), 3, interval=0.2, admin=False, tls=True) as c:
        for i in range(3):
            c.subscribe(i, TOPIC, via_cli=True)  # through the CLI, with the client certificate
        yield c


def test_tls_cluster_forms_its_ring_and_serves_the_cli(cluster: LocalCluster) -> None:
    def problems() -> list[str]:
        members, states = cluster.snapshot(TOPIC)
        if len(members) != 3:
            return [f"{len(members)} members"]
        return ring_problems(members, states)

    cluster.poll(problems, CONVERGE, "the TLS ring")
    ack = cluster.publish(0, TOPIC, "over tls", via_cli=True)
    assert ack is not None

    def missing() -> list[str]:
        return [
            ref for ref, items in cluster.histories(cluster.node_refs, TOPIC, via_cli=True).items()
            if [item.get("payload") for item in items] != ["over tls"]
        ]

    cluster.poll(missing, CONVERGE, "the publication at every node")
    status = cluster.node_status(1, via_cli=True)
    assert "identity_mismatch" not in status["stats"].get("errors", {})


def test_a_plain_tcp_client_is_refused(cluster: LocalCluster) -> None:
    got = asyncio.run(exchange(cluster.node_refs[0], None, Hello(ref=None, role="client"), StatusRequest()))
    assert got == []  # the TLS handshake never completes: no frame is answered
    done = subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", "status", "--node", cluster.node_refs[0]],
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT, env=_plain_env(),
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "if it requires TLS, give a client certificate: PUBSUB_TLS_CA" in done.stderr, done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", "history", "news", "--node", cluster.node_refs[0]],
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT, env=_plain_env(),
    )
    assert done.returncode == 1 and "it closed the connection (if it requires TLS" in done.stderr, done.stderr


def test_a_node_certificate_claiming_another_reference_is_refused_and_counted(cluster: LocalCluster) -> None:
    assert cluster.certs is not None
    target, own, claimed = cluster.node_refs[0], cluster.node_refs[1], cluster.supervisor_ref
    ctx = tls_context(cluster.certs, own)
    before = cluster.node_status(0)["stats"]["errors"].get("identity_mismatch", 0)
    got = asyncio.run(exchange(target, ctx, Hello(ref=claimed, role="peer"), StatusRequest()))
    assert [m.code for m in got if isinstance(m, ErrorReply)] == ["identity_mismatch"]
    assert cluster.node_status(0)["stats"]["errors"].get("identity_mismatch", 0) == before + 1


def test_configuration_only_from_the_supervisor(cluster: LocalCluster) -> None:
    assert cluster.certs is not None
    target, own = cluster.node_refs[0], cluster.node_refs[1]
    forged = SetData(Topic(TOPIC), None, None, None)  # "you are not a member"
    got = asyncio.run(
        exchange(target, tls_context(cluster.certs, own), Hello(ref=own, role="peer"), forged)
    )
    assert [m.code for m in got if isinstance(m, ErrorReply)] == ["forbidden_sender"]
    assert cluster.node_status(0)["stats"]["errors"].get("forbidden_sender", 0) >= 1
    assert TOPIC in cluster.node_status(0)["topics"]  # still a member


def test_a_certificate_of_another_ca_is_refused(cluster: LocalCluster, tmp_path: Path) -> None:
    stranger = ClusterCerts.create(tmp_path / "other", {cluster.node_refs[1]: "node"})
    ctx = tls_context(stranger, cluster.node_refs[1], ca=cluster.certs.ca if cluster.certs else None)
    got = asyncio.run(
        exchange(cluster.node_refs[0], ctx, Hello(ref=cluster.node_refs[1], role="peer"), StatusRequest())
    )
    assert got == []
    assert TOPIC in cluster.node_status(0)["topics"]


def test_the_cli_with_a_certificate_of_another_ca_says_the_handshake_failed(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """The daemon refuses the certificate: with TLS 1.3 the client only sees its connection
    reset or closed after the handshake, which used to read "did not answer like a pubsub
    daemon: connection reset".  Both command paths (the checked connection of `publish`,
    the one-request `status`), and a CA that does not match the daemons' either."""
    assert cluster.certs is not None
    stranger = ClusterCerts.create(tmp_path / "other", {})
    cert, key = stranger.issue("client", "mallory")
    their_cert = {"PUBSUB_TLS_CA": str(cluster.certs.ca), "PUBSUB_TLS_CERT": str(cert), "PUBSUB_TLS_KEY": str(key)}
    all_theirs = {**their_cert, "PUBSUB_TLS_CA": str(stranger.ca)}
    node = cluster.node_refs[0]
    for env, command in (
        (their_cert, ["publish", TOPIC, "refused", "--node", node]),
        (their_cert, ["status", "--node", node]),
        (their_cert, ["status", "--supervisor", cluster.supervisor_ref]),
        (all_theirs, ["publish", TOPIC, "refused", "--node", node]),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "pubsub.cli.main", *command],
            capture_output=True, text=True, timeout=COMMAND_TIMEOUT, env={**_plain_env(), **env},
        )
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "TLS handshake" in done.stderr, (command, done.stderr)
        assert "signed by the cluster's CA" in done.stderr, (command, done.stderr)
        assert "did not answer like a pubsub daemon" not in done.stderr
    assert "refused" not in [item.get("payload") for item in cluster.histories([node], TOPIC, via_cli=True)[node]]


def _plain_env() -> dict[str, str]:
    """This process's environment without the TLS client settings the cluster put there."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PUBSUB_TLS_")}


def _node(listen: str, supervisor: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pubsub.cli.main", "node", "--listen", listen, "--supervisor", supervisor, *extra],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_plain_env(),
    )


def test_no_plain_listening_beyond_loopback_without_insecure(tmp_path: Path) -> None:
    port, sup = pick_free_ports(2)
    refused = _node(f"0.0.0.0:{port}", f"127.0.0.1:{sup}")
    try:
        _, err = refused.communicate(timeout=COMMAND_TIMEOUT)
    finally:
        terminate(refused)
    # An invalid setting (README, "Settings"): exit 2, one line.
    assert refused.returncode == 2, err
    assert err.startswith(f"Error: 0.0.0.0:{port}: refusing to listen") and len(err.strip().splitlines()) == 1, err
    assert "--insecure" in err
    done = subprocess.run(  # the supervisor too, refused before it touches its data directory
        [sys.executable, "-m", "pubsub.cli.main", "supervisor", "--listen", f"0.0.0.0:{sup}", "--data",
         str(tmp_path / "sup")],
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT, env=_plain_env(),
    )
    assert done.returncode == 2 and "refusing to listen" in done.stderr, done.stderr
    assert not (tmp_path / "sup").exists()

    allowed = _node(f"0.0.0.0:{port}", f"127.0.0.1:{sup}", "--insecure")
    try:
        def not_listening() -> list[str]:
            if allowed.poll() is not None:
                raise AssertionError(f"the --insecure node exited: {allowed.stderr.read() if allowed.stderr else ''}")
            probe = subprocess.run(
                [sys.executable, "-m", "pubsub.cli.main", "status", "--node", f"127.0.0.1:{port}", "--json"],
                capture_output=True, text=True, timeout=COMMAND_TIMEOUT,
                env=_plain_env(),
            )
            return [] if probe.returncode == 0 else [probe.stderr.strip()]

        poll(not_listening, 30.0, "the --insecure node answering")
    finally:
        terminate(allowed)


def _refused(command: list[str], env: dict[str, str]) -> str:
    """Run a daemon command that must refuse to start: exit 2 with one line (README,
    "Settings"); its stderr.  Stopped by pid if it runs after all."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pubsub.cli.main", *command],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        _, err = proc.communicate(timeout=COMMAND_TIMEOUT)
    finally:
        terminate(proc)
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1, (command, proc.returncode, err)
    return err


def test_bad_tls_settings_are_invalid_settings(tmp_path: Path) -> None:
    """A certificate naming another daemon (another reference or role), TLS files that do
    not load, a node whose certificate cannot sign: exit 2 with one line, checked with the
    settings before anything starts."""
    sup, node, other = (f"127.0.0.1:{p}" for p in pick_free_ports(3))
    certs = ClusterCerts.create(tmp_path / "tls", {sup: "supervisor", node: "node", other: "node"})
    plain = _plain_env()
    data = tmp_path / "sup"

    def supervisor(ref: str, *tls: str) -> list[str]:
        return ["supervisor", "--listen", ref, "--data", str(data), *tls]

    def node_with(cert: Path, key: Path) -> list[str]:
        return ["node", "--listen", node, "--supervisor", sup, "--tls-ca", str(certs.ca), "--tls-cert", str(cert),
                "--tls-key", str(key)]

    # The supervisor's certificate, at another port: it names another daemon.
    moved = f"127.0.0.1:{pick_free_ports(1)[0]}"
    err = _refused(supervisor(moved, *certs.daemon_args(sup)), plain)
    assert f"names supervisor {sup}, not a supervisor at {moved}" in err, err
    assert not data.exists()  # refused before it opened its data directory
    # A key that is not the certificate's.
    err = _refused(node_with(certs.pairs[node][0], certs.pairs[other][1]), plain)
    assert f"the TLS key {certs.pairs[other][1]} does not belong to the certificate {certs.pairs[node][0]}" in err
    # A file that is not there (from the environment, which click does not check).
    missing = tmp_path / "tls" / "missing.crt"
    cert, key = certs.pairs[sup]
    env = {**plain, "PUBSUB_TLS_CA": str(missing), "PUBSUB_TLS_CERT": str(cert), "PUBSUB_TLS_KEY": str(key)}
    err = _refused(supervisor(sup), env)
    assert f"cannot read the TLS CA certificate {missing}: No such file or directory" in err, err
    assert not data.exists()
    # A certificate of another role for the node's reference.
    err = _refused(node_with(*certs.issue("supervisor", node)), plain)
    assert f"names supervisor {node}, not a node at {node}" in err, err
    # A node certificate of another CA: the node could not sign its publications.
    foreign = ClusterCerts.create(tmp_path / "foreign", {node: "node"})
    err = _refused(node_with(*foreign.pairs[node]), plain)
    assert "this node's own certificate cannot sign publications: not issued by this cluster's CA" in err, err


def test_brokers_link_over_tls_and_refuse_a_sender_that_is_not_the_peer(tmp_path: Path) -> None:
    # The path a-b times K_2: a,0's neighbours are b,0 and a,1.
    with LocalScot(tmp_path / "scot", scot([["a", "b"]], 2), tls=True) as brokers:
        def silent_links() -> list[str]:
            return [
                f"{bid} -> {link}"
                for bid, body in brokers.broker_statuses().items()
                for link, entry in body["links"].items()
                if entry["last_heard_s"] is None
            ]

        poll(silent_links, CONVERGE, "heartbeats on every broker link")
        assert brokers.certs is not None
        # A broker certificate of the cluster for a reference of its own (not a member's: a
        # second connection claiming a member's reference would race with that member's
        # link, which the runtime keeps one of per pair), speaking for b,0.
        target, (own,) = brokers.address("a,0"), [f"127.0.0.1:{p}" for p in pick_free_ports(1)]
        brokers.certs.issue("broker", own)
        forged = BrokerHeartbeat(sender="b,0")
        got = asyncio.run(exchange(target, tls_context(brokers.certs, own), Hello(ref=own, role="peer"), forged))
        assert [m.code for m in got if isinstance(m, ErrorReply)] == ["forbidden_sender"]
        status = brokers.broker_status("a,0", via_cli=True)
        assert status["stats"]["errors"].get("forbidden_sender") == 1
        assert status["stats"]["errors"].get("identity_mismatch") is None


def test_cluster_up_with_tls(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pubsub.cli.main", "cluster", *args, "--dir", str(directory)],
            capture_output=True, text=True, timeout=120, env=_plain_env(),
        )

    try:
        up = cli("up", "--tls", "-n", "2", "--interval", "0.2")
        assert up.returncode == 0, up.stderr
        assert "export PUBSUB_TLS_CA=" in up.stdout
        assert (directory / "tls" / "ca.crt").exists()
        status = cli("status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert "ring legitimate" in status.stdout
    finally:
        down = cli("down")
    assert down.returncode == 0, down.stderr
