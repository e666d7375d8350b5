"""Client semantics with real processes (issue 12), through the `pubsub` command as a user
types it: cursors that a node refuses rather than silently misreads, message ids that make
a retried publish a duplicate stored once, an honest ``unknown`` while the only member is
frozen, an honest failure when a node's supervisor is wrong, the durability flag, and each
publisher's order at a late joiner.  (The same in the simulator: tests/sim/test_sim_semantics.py;
a store that fails its write -- ``store_error`` -- is covered in tests/node/test_commits.py,
since a real disk cannot be made to fail on cue here.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pubsub.ops import members
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import pick_free_ports, poll, terminate

pytestmark = pytest.mark.integration

#: Seconds one CLI command may take on a loaded 2-core machine.
COMMAND_TIMEOUT = 60.0
#: Seconds a publication may take to reach every member, or a ring to form.
SPREAD_TIMEOUT = 60.0

MEMORY_NODE = 3


def pubsub(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        **({"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}),
    )


def json_lines(done: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Four nodes; node 3 keeps its store in memory (no --data)."""
    with LocalCluster(
        tmp_path_factory.mktemp("semantics"), 4, interval=0.2, memory_nodes={MEMORY_NODE}
    ) as c:
        yield c


def members_of(cluster: LocalCluster, topic: str, nodes: list[int]) -> None:
    """Make `nodes` subscribe to `topic`; wait until the supervisor lists them all and each
    has its label (a configured member stores what is published through it)."""
    for i in nodes:
        cluster.subscribe(i, topic)
    wanted = {cluster.node_refs[i] for i in nodes}

    def missing() -> list[str]:
        listed = set(members.members_of(cluster.supervisor_status(), topic))
        problems = [f"{ref} not listed" for ref in sorted(wanted - listed)]
        for i in nodes:
            entry = (cluster.node_status(i).get("topics") or {}).get(topic) or {}
            if entry.get("label") is None:
                problems.append(f"node {i} has no label in {topic}")
        return problems

    cluster.poll(missing, SPREAD_TIMEOUT, f"the members of {topic}")


def wait_held(cluster: LocalCluster, node: int, topic: str, count: int) -> list[dict[str, object]]:
    """Poll `node`'s history of `topic` until it holds `count` publications; return it."""
    found: list[dict[str, object]] = []

    def short() -> list[str]:
        nonlocal found
        found = cluster.history(node, topic)
        return [] if len(found) >= count else [f"node {node} holds {len(found)} of {count}"]

    cluster.poll(short, SPREAD_TIMEOUT, f"{count} publications of {topic} at node {node}")
    return found


# ------------------------------------------------------------------------------ cursors
def test_a_cursor_beyond_the_nodes_end_is_refused_and_from_now_resumes_at_its_latest(
    cluster: LocalCluster,
) -> None:
    members_of(cluster, "cur", [0])
    node = cluster.node_refs[0]
    for text in ("a", "b", "c"):
        json_lines(pubsub("publish", "cur", text, "--node", node, "--json"))
    held = json_lines(pubsub("history", "cur", "--node", node, "--json"))
    assert [h["payload"] for h in held] == ["a", "b", "c"]
    cursor = str(held[-1]["cursor"])
    incarnation, _, number = cursor.rpartition(":")
    assert incarnation and number == "3"
    # Resuming after #1 gives the rest; a cursor past the end is refused, not served empty.
    rest = json_lines(pubsub("history", "cur", "--node", node, "--json", "--since", f"{incarnation}:1"))
    assert [h["payload"] for h in rest] == ["b", "c"]
    beyond = pubsub("history", "cur", "--node", node, "--since", f"{incarnation}:99")
    assert beyond.returncode == 1 and "cursor_beyond_end" in beyond.stderr, beyond.stderr
    beyond = pubsub("subscribe", "cur", "--node", node, "--since", f"{incarnation}:99", "--count", "1")
    assert beyond.returncode == 1 and "cursor_beyond_end" in beyond.stderr, beyond.stderr
    # With --from-now the stream starts after the node's latest publication instead.
    follower = subprocess.Popen(
        [sys.executable, "-m", "pubsub.cli.main", "subscribe", "cur", "--node", node, "--json",
         "--since", f"{incarnation}:99", "--from-now", "--count", "1"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert follower.stderr is not None
        started = follower.stderr.readline()  # the stream is open once this line is out
        assert "the cursor was refused" in started, started
        json_lines(pubsub("publish", "cur", "d", "--node", node, "--json"))
        out, err = follower.communicate(timeout=COMMAND_TIMEOUT)
    finally:
        if follower.poll() is None:
            os.kill(follower.pid, signal.SIGKILL)
            follower.wait(timeout=10)
    assert follower.returncode == 0, err
    [delivery] = [json.loads(line) for line in out.splitlines()]
    assert delivery["payload"] == "d" and delivery["cursor"] == f"{incarnation}:4"


def test_a_restarted_memory_node_refuses_its_previous_incarnations_cursor(cluster: LocalCluster) -> None:
    members_of(cluster, "mem", [1, MEMORY_NODE])
    node = cluster.node_refs[MEMORY_NODE]
    for text in ("m1", "m2"):
        json_lines(pubsub("publish", "mem", text, "--node", cluster.node_refs[1], "--json"))
    wait_held(cluster, MEMORY_NODE, "mem", 2)
    before = json_lines(pubsub("history", "mem", "--node", node, "--json"))
    old_cursor = str(before[-1]["cursor"])
    cluster.restart_node(MEMORY_NODE)
    # Its store began again: it joins again and anti-entropy refills it, with new numbers.
    members_of(cluster, "mem", [MEMORY_NODE])
    wait_held(cluster, MEMORY_NODE, "mem", 2)
    refused = pubsub("history", "mem", "--node", node, "--since", old_cursor)
    assert refused.returncode == 1 and "cursor_incarnation" in refused.stderr, refused.stderr
    after = json_lines(pubsub("history", "mem", "--node", node, "--json"))
    assert {h["payload"] for h in after} == {"m1", "m2"}
    assert str(after[-1]["cursor"]).rpartition(":")[0] != old_cursor.rpartition(":")[0]


# ------------------------------------------------------------------------------ durability
def test_the_acknowledgement_says_whether_the_member_keeps_a_store(cluster: LocalCluster) -> None:
    members_of(cluster, "dur", [0, MEMORY_NODE])
    [on_disk] = json_lines(pubsub("publish", "dur", "x", "--node", cluster.node_refs[0], "--json"))
    [in_memory] = json_lines(pubsub("publish", "dur", "y", "--node", cluster.node_refs[MEMORY_NODE], "--json"))
    assert on_disk["durable"] is True and on_disk["stored_by"] == cluster.node_refs[0]
    assert in_memory["durable"] is False and in_memory["stored_by"] == cluster.node_refs[MEMORY_NODE]
    text = pubsub("publish", "dur", "z", "--node", cluster.node_refs[MEMORY_NODE])
    assert text.returncode == 0 and "NOT durable: the member keeps no store" in text.stdout, text.stdout


# ------------------------------------------------------------------------------ message ids
def test_a_repeated_message_id_is_a_duplicate_stored_once_at_every_node(cluster: LocalCluster) -> None:
    members_of(cluster, "ids", [0, 1])
    first = json_lines(pubsub("publish", "ids", "pay", "--node", cluster.node_refs[0], "--msg-id", "order-1", "--json"))
    again = json_lines(pubsub("publish", "ids", "pay", "--node", cluster.node_refs[0], "--msg-id", "order-1", "--json"))
    assert first[0]["duplicate"] is False and again[0]["duplicate"] is True
    assert again[0]["key"] == first[0]["key"]
    # Another member, once it holds the publication, answers the id too; so does a member
    # reached through a node that is not one (node 2 hands the request over).
    wait_held(cluster, 1, "ids", 1)
    other = json_lines(pubsub("publish", "ids", "pay", "--node", cluster.node_refs[1], "--msg-id", "order-1", "--json"))
    handed = json_lines(pubsub("publish", "ids", "pay", "--node", cluster.node_refs[2], "--msg-id", "order-1", "--json"))
    assert other[0]["duplicate"] is True and handed[0]["duplicate"] is True
    assert other[0]["key"] == handed[0]["key"] == first[0]["key"]
    text = pubsub("publish", "ids", "pay", "--node", cluster.node_refs[0], "--msg-id", "order-1")
    assert "a duplicate of an earlier request" in text.stdout, text.stdout
    for node in (0, 1):
        ids = [h["msg_id"] for h in cluster.history(node, "ids")]
        assert ids.count("order-1") == 1, (node, ids)
    bad = pubsub("publish", "ids", "pay", "--node", cluster.node_refs[0], "--msg-id", "no spaces")
    assert bad.returncode == 2 and "--msg-id" in bad.stderr, bad.stderr


def test_while_the_only_member_is_frozen_the_answer_is_unknown_and_a_retry_is_a_duplicate(
    cluster: LocalCluster,
) -> None:
    members_of(cluster, "solo", [1])
    via = cluster.node_refs[2]  # not a member: it hands the publication over to node 1
    cluster.kill(1, signal.SIGSTOP)
    try:
        frozen = pubsub("publish", "solo", "p", "--node", via, "--msg-id", "frozen-1", "--retries", "0",
                        "--timeout", "20")
    finally:
        cluster.kill(1, signal.SIGCONT)
    assert frozen.returncode == 1, frozen.stdout
    assert "unknown" in frozen.stderr and "failed" not in frozen.stderr.split("unknown")[0], frozen.stderr
    retried = json_lines(pubsub("publish", "solo", "p", "--node", via, "--msg-id", "frozen-1", "--json"))
    assert retried[0]["stored_by"] == cluster.node_refs[1]
    assert retried[0]["duplicate"] is True  # node 1 stored the first attempt once it thawed
    ids = [h["msg_id"] for h in cluster.history(1, "solo")]
    assert ids.count("frozen-1") == 1, ids


# ------------------------------------------------------------------------------ wrong supervisor
@pytest.fixture
def misconfigured_node(tmp_path: Path) -> Iterator[str]:
    """A node whose --supervisor names a port where nothing listens."""
    node_port, nobody = pick_free_ports(2)
    ref = f"127.0.0.1:{node_port}"
    log = open(tmp_path / "node.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "pubsub.cli.main", "node", "--listen", ref, "--supervisor",
         f"127.0.0.1:{nobody}", "--interval", "0.2"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        poll(lambda: [] if pubsub("status", "--node", ref).returncode == 0 else ["not answering"],
             COMMAND_TIMEOUT, "the node to answer")
        yield ref
    finally:
        terminate(proc)
        log.close()


def test_a_node_with_a_wrong_supervisor_does_not_acknowledge(cluster: LocalCluster, misconfigured_node: str) -> None:
    members_of(cluster, "lost", [0])
    done = pubsub("publish", "lost", "nowhere", "--node", misconfigured_node, "--timeout", "30")
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert "handover_failed" in done.stderr or "no_members" in done.stderr, done.stderr
    assert cluster.history(0, "lost") == []


# ------------------------------------------------------------------------------ order
def test_a_late_joiner_stores_each_publishers_publications_in_sequence_order(cluster: LocalCluster) -> None:
    members_of(cluster, "ord", [0, 1])
    lines = {i: "".join(f"{i}-{k}\n" for k in range(25)) for i in (0, 1)}
    senders = [
        subprocess.Popen(
            [sys.executable, "-m", "pubsub.cli.main", "publish", "ord", "--node", cluster.node_refs[i], "--quiet"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in (0, 1)
    ]
    for i, proc in zip((0, 1), senders, strict=True):
        out, err = proc.communicate(lines[i], timeout=COMMAND_TIMEOUT)
        assert proc.returncode == 0, err
    members_of(cluster, "ord", [2])
    held = wait_held(cluster, 2, "ord", 50)
    assert len(held) == 50
    for publisher in {h["publisher"] for h in held}:
        seqs = [int(str(h["seq"])) for h in held if h["publisher"] == publisher]
        assert seqs == sorted(seqs), (publisher, seqs)
