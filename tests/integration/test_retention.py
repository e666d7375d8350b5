"""Integration: retention through real daemons (issue 13, item 6, acceptance).

A supervisor and four nodes with data directories (OS processes on 127.0.0.1):

a. ``pubsub retention set`` gives topic "ret" a max age; ten publications reach every node;
   node 3 is killed (SIGKILL) while it holds them all; they expire at nodes 0-2 (tries
   empty, stores empty); node 3 is restarted on its data directory with all ten in its
   store, and none of them comes back anywhere: nodes 0-2 never hold one again, node 3
   prunes them.  Five publications made after the restart -- inside the window -- are held
   by every node, the tries are equal (same root, same count), and every store holds
   exactly those five.  A cursor before the removed publications is refused with
   ``cursor_expired``; since = 0 gives what is held.
b. ``pubsub topic purge`` removes every publication of "gone" at every node; what is
   published afterwards is kept everywhere.
c. A topic no member has joined: ``topic purge`` is refused (``no_members``, exit 1) and
   stores nothing; ``retention set`` says that no member has it yet, and a node that joins
   later gets the limits with its configuration.

Every wait polls a condition under a deadline; no assertion is about elapsed time.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from pubsub.client.library import Client, ClientError
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.members import members_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

T, PURGED, LATER = "ret", "gone", "later"
MAX_AGE = "12s"  # long enough for the young publications to be checked inside the window
SPREAD = 60.0
DOWN = 3


def pubsub(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", *args], capture_output=True, text=True, timeout=60
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("retention"), 4, interval=0.2) as c:
        yield c


def members(cluster: LocalCluster, topic: str) -> None:
    """Every node subscribes to `topic`; wait until each is a configured member."""
    for i in range(4):
        cluster.subscribe(i, topic)

    def missing() -> list[str]:
        listed = set(members_of(cluster.supervisor_status(), topic))
        problems = [f"{ref} not listed" for ref in cluster.node_refs if ref not in listed]
        for i in range(4):
            entry = (cluster.node_status(i).get("topics") or {}).get(topic) or {}
            if entry.get("label") is None:
                problems.append(f"node {i} has no label in {topic}")
        return problems

    cluster.poll(missing, SPREAD, f"the members of {topic}")


def payloads(cluster: LocalCluster, refs: list[str], topic: str) -> dict[str, set[str]]:
    """What each node's store holds (its history from 0); a row held twice fails the test."""
    out: dict[str, set[str]] = {}
    for ref, found in cluster.histories(refs, topic).items():
        texts = [d["payload"] for d in found]
        assert len(texts) == len(set(texts)), f"{ref} stores a publication twice: {texts}"
        out[ref] = set(texts)
    return out


def trie_of(body: dict[str, Any], topic: str) -> tuple[int, Any]:
    section = ((body.get("topics") or {}).get(topic) or {}).get("publications") or {}
    return section.get("count", -1), tuple(section.get("root") or ())


def test_max_age_expires_everywhere_and_a_returning_node_brings_nothing_back(cluster: LocalCluster) -> None:
    members(cluster, T)
    done = pubsub("retention", "set", T, "--max-age", MAX_AGE, "--supervisor", cluster.supervisor_ref)
    assert done.returncode == 0, done.stderr
    assert "max-age 12s" in done.stdout
    shown = pubsub("retention", "show", "--supervisor", cluster.supervisor_ref)
    assert f"{T}: max-age 12s" in shown.stdout

    def configured() -> list[str]:
        return [f"node {i} has no retention" for i in range(4)
                if "retention" not in ((cluster.node_status(i).get("topics") or {}).get(T) or {})]

    cluster.poll(configured, SPREAD, "the retention settings at every node")

    old = {f"old {i}" for i in range(10)}
    for text in sorted(old):
        cluster.publish(len(text) % 4, T, text)
    refs = cluster.node_refs

    def everywhere(wanted: set[str], among: list[str]) -> list[str]:
        found = payloads(cluster, among, T)
        return [f"{ref} holds {len(found[ref])} of {len(wanted)}" for ref in among if found[ref] != wanted]

    cluster.poll(lambda: everywhere(old, refs), SPREAD, "the old publications at every node")
    cluster.kill(DOWN, signal.SIGKILL)  # it holds all ten, in its store
    up = [r for j, r in enumerate(refs) if j != DOWN]

    def expired() -> list[str]:
        problems = [f"{ref} still holds {sorted(held & old)}" for ref, held in payloads(cluster, up, T).items()
                    if held & old]
        for j in range(4):
            if j != DOWN and trie_of(cluster.node_status(j), T)[0] != 0:
                problems.append(f"node {j}: trie holds {trie_of(cluster.node_status(j), T)[0]}")
        return problems

    cluster.poll(expired, SPREAD, "the expiry at the running nodes")

    cluster.restart_node(DOWN)  # with its data: the ten expired publications are in its store
    young = {f"young {i}" for i in range(5)}
    for text in sorted(young):
        cluster.publish(0, T, text)

    def settled() -> list[str]:
        found = payloads(cluster, refs, T)
        problems = [f"{ref} took back {sorted(found[ref] & old)}" for ref in up if found[ref] & old]
        assert not problems, problems  # never, at any look: nothing is resurrected
        problems = [f"{ref} holds {sorted(found[ref])}" for ref in refs if found[ref] != young]
        bodies = cluster.node_statuses()
        tries = {trie_of(body, T) for body in bodies.values()}
        if len(tries) != 1:
            problems.append(f"tries differ: {sorted(tries, key=str)}")
        return problems

    cluster.poll(settled, SPREAD, "young everywhere, old nowhere, tries equal")
    body = cluster.node_status(DOWN)
    assert body["publications"]["retention"]["deleted"] >= 10
    assert trie_of(body, T)[0] == 5

    async def cursors() -> None:
        client = Client(cluster.node_refs[0])
        page = await client.history_page(T)
        assert {d.payload.decode() for d in page.deliveries} == young
        with pytest.raises(ClientError) as refused:
            await client.history_page(T, since=f"{page.incarnation}:3")
        assert refused.value.code == "cursor_expired"
        assert "retention" in str(refused.value)
        last = page.deliveries[-1].local_seq
        after = await client.history_page(T, since=f"{page.incarnation}:{last}")
        assert after.deliveries == []

    asyncio.run(cursors())
    history = pubsub("history", T, "--node", cluster.node_refs[0], "--since", "3")
    assert history.returncode == 1 and "cursor_expired" in history.stderr, history.stderr


def test_purge_removes_the_topic_everywhere(cluster: LocalCluster) -> None:
    members(cluster, PURGED)
    refs = cluster.node_refs
    before = {f"before {i}" for i in range(6)}
    for text in sorted(before):
        cluster.publish(1, PURGED, text)

    def holding(wanted: set[str]) -> list[str]:
        found = payloads(cluster, refs, PURGED)
        problems = [f"{ref} holds {sorted(found[ref])}" for ref in refs if found[ref] != wanted]
        counts = {trie_of(body, PURGED)[0] for body in cluster.node_statuses().values()}
        if counts != {len(wanted)}:
            problems.append(f"trie sizes {sorted(counts)}")
        return problems

    cluster.poll(lambda: holding(before), SPREAD, "the publications before the purge")
    refused = pubsub("topic", "purge", PURGED, "--supervisor", cluster.supervisor_ref)
    assert refused.returncode != 0 and "--yes" in refused.stderr
    done = pubsub("topic", "purge", PURGED, "--yes", "--supervisor", cluster.supervisor_ref)
    assert done.returncode == 0, done.stderr
    assert "sent to 4 member(s)" in done.stdout
    assert re.search(r"published at or before \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC \(\d+ Unix ms\)", done.stdout)
    cluster.poll(lambda: holding(set()), SPREAD, "the purge at every node")
    status = pubsub("status", "--node", refs[0])
    text = status.stdout.split(f"topic {PURGED}", 1)[1].split("\ntopic ", 1)[0]  # that topic's rows
    [row] = [line for line in text.splitlines() if line.strip().startswith("retention")]
    assert "max-age none, max-count none, max-bytes none, purged at " in row and "{" not in row, row
    after = {"after 0", "after 1"}
    for text in sorted(after):
        cluster.publish(2, PURGED, text)
    cluster.poll(lambda: holding(after), SPREAD, "the publications after the purge")


def test_a_topic_without_members_refuses_a_purge_and_keeps_limits_for_joiners(cluster: LocalCluster) -> None:
    sup = cluster.supervisor_ref
    purge = pubsub("topic", "purge", LATER, "--yes", "--supervisor", sup)
    assert purge.returncode == 1, (purge.stdout, purge.stderr)
    assert f"no_members: no member holds {LATER}: nothing purged" in purge.stderr, purge.stderr
    assert len(purge.stderr.strip().splitlines()) == 1 and not purge.stdout, purge.stderr
    done = pubsub("retention", "set", LATER, "--max-count", "3", "--supervisor", sup)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "no member yet; kept for members that join", done.stderr
    assert done.stdout.strip() == f"{LATER}: max-age none, max-count 3, max-bytes none", done.stdout  # no purge
    cluster.subscribe(0, LATER)

    def limits_not_there() -> list[str]:
        held = ((cluster.node_status(0).get("topics") or {}).get(LATER) or {}).get("retention") or {}
        if held.get("max_count") == 3 and not held.get("purged_ms"):
            return []
        return [f"node 0 holds {held or 'no retention'} for {LATER}"]

    cluster.poll(limits_not_there, SPREAD, f"the limits of {LATER} at the node that joined it")
