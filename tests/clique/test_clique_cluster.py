"""The clique overlay with real processes: ``pubsub cluster up --overlay clique`` (issue 43).

Every command runs as its own OS process, as an operator types it; the daemons are the
shared ``pubsub supervisor`` / ``pubsub node`` ones, on real TCP over 127.0.0.1.  Eight
nodes join topics a and b; one node leaves b, so that b has a non-member to publish
through; publications go through members and through the non-member (a hand-over); then
two nodes are killed with SIGKILL and more publications follow.  Every live member must
hold every acknowledged publication, and the supervisor's and every node's status must
agree with an independent check written here from the definition of the clique.

The two killed are nodes that stored no acknowledged publication themselves: an
acknowledgement promises that the publication is durable at `stored_by`, and a node killed
before its broadcast left and never restarted takes what only it held with it (anti-entropy
brings it back when it returns), whatever the overlay.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pubsub.client.library import Ack, Client
from pubsub.kernel.control import Reply, StatusRequest
from pubsub.kernel.message import Ref
from pubsub.ops.detached import read_manifest
from pubsub.runtime.client import request
from tests.ops.test_cluster_cmd import cluster_cmd, cluster_dir, entries, exited, status_json

pytestmark = pytest.mark.integration

__all__ = ["cluster_dir"]  # the fixture, used by name below

#: Seconds the cluster may take to agree again after a change (a few Timeouts of 0.3 s,
#: the supervisor's probe of a dead member, its round robin of configurations).
SETTLE = 60.0


def status(ref: str) -> dict[str, Any]:
    reply = asyncio.run(request(Ref(ref), StatusRequest(), timeout=5.0))
    assert isinstance(reply, Reply)
    return reply.body


def wait_for(condition: Callable[[], list[str]], what: str, timeout: float = SETTLE) -> None:
    """Poll `condition` (the problems left) until it returns none; fail with the last ones."""
    deadline = time.monotonic() + timeout
    problems = condition()
    while problems and time.monotonic() < deadline:
        time.sleep(0.3)
        problems = condition()
    assert not problems, f"{what}: {problems[:5]}"


def clique_problems(supervisor: str, nodes: dict[str, str], topic: str, wanted: set[str]) -> list[str]:
    """The independent check: the supervisor lists exactly the live subscribers `wanted`,
    each of them holds exactly that list, configured, reaching everyone; no one else is
    configured in the topic."""
    body = status(supervisor)
    entry = (body.get("topics") or {}).get(topic) or {}
    listed = [str(m["ref"]) for m in entry.get("members", [])]
    problems = [] if set(listed) == wanted and len(listed) == len(wanted) else [f"supervisor lists {listed}"]
    for ref in nodes.values():
        state = (status(ref).get("topics") or {}).get(topic)
        if ref in wanted:
            if not state or state.get("members") != listed or not state.get("configured") or state.get("unreachable"):
                problems.append(f"{ref}: {state}")
        elif state and state.get("configured"):
            problems.append(f"{ref}: configured but not a member")
    return problems


def held(ref: str, topic: str) -> set[bytes]:
    async def keys() -> set[bytes]:
        async with Client(ref) as client:
            return {d.key for d in await client.history(topic)}

    return asyncio.run(keys())


def publish(ref: str, topic: str, payloads: list[str]) -> list[Ack]:
    async def send() -> list[Ack]:
        async with Client(ref) as client:
            return [await client.publish(topic, payload) for payload in payloads]

    return asyncio.run(send())


def test_a_clique_cluster_keeps_every_acknowledged_publication_through_two_kills(cluster_dir: Path) -> None:
    done = cluster_cmd(cluster_dir, "up", "--overlay", "clique", "-n", "8", "--topics", "a,b")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "clique overlay" in done.stdout
    doc = read_manifest(cluster_dir)
    assert doc["overlay"] == "clique"
    supervisor = doc["supervisor"]["ref"]
    nodes = {n["name"]: n["ref"] for n in doc["nodes"]}
    refs = list(nodes.values())
    code, body = status_json(cluster_dir)
    assert code == 0 and all(body["topics"][t]["legitimate"] for t in ("a", "b")), body["topics"]
    for topic in ("a", "b"):
        wait_for(lambda t=topic: clique_problems(supervisor, nodes, t, set(refs)), f"topic {topic} legitimate")

    outsider = refs[7]  # leaves b: publishing b through it is a hand-over
    async def leave() -> None:
        async with Client(outsider) as client:
            await client.leave("b")

    asyncio.run(leave())
    in_b = set(refs) - {outsider}
    wait_for(lambda: clique_problems(supervisor, nodes, "b", in_b), "b without the node that left")

    acked: dict[str, list[Ack]] = {"a": [], "b": []}
    acked["a"] += publish(refs[0], "a", [f"a from a member {i}" for i in range(5)])
    acked["b"] += publish(refs[1], "b", [f"b from a member {i}" for i in range(5)])
    handed = publish(outsider, "b", [f"b through a non-member {i}" for i in range(3)])
    assert all(ack.stored_by in in_b and ack.stored_by != outsider for ack in handed)
    acked["b"] += handed

    # Two members of both topics that publish nothing die, nodes that stored none of the
    # acknowledged publications first.  A victim that stored one (a hand-over's member is the
    # supervisor's choice) dies once another survivor holds it: a kill -9 without a restart
    # must not be the only copy's end, and waiting for that is what durability promises.
    storing = {ack.stored_by for acks in acked.values() for ack in acks}
    publishers = {refs[0], refs[1], refs[3], outsider}
    chosen = sorted((r for r in refs if r in in_b and r not in publishers), key=lambda r: (r in storing, r))[:2]
    assert len(chosen) == 2, (storing, publishers)
    survivors = {"a": set(refs) - set(chosen), "b": in_b - set(chosen)}

    def only_at_victims() -> list[str]:
        return [
            f"{ack.key.hex()[:8]} ({topic}) only at {ack.stored_by}"
            for topic, acks in acked.items()
            for ack in acks
            if ack.stored_by in chosen and not any(ack.key in held(r, topic) for r in survivors[topic])
        ]

    wait_for(only_at_victims, "the victims' acknowledged publications held by a survivor")
    victims = [e for e in entries(cluster_dir) if e.ref in chosen]
    for victim in victims:
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
    dead = {v.ref for v in victims}
    acked["a"] += publish(refs[3], "a", [f"a after the kills {i}" for i in range(5)])
    acked["b"] += publish(outsider, "b", [f"b after the kills {i}" for i in range(3)])

    live = {name: ref for name, ref in nodes.items() if ref not in dead}
    wait_for(lambda: clique_problems(supervisor, live, "a", set(refs) - dead), "a without the dead")
    wait_for(lambda: clique_problems(supervisor, live, "b", in_b - dead), "b without the dead")
    for topic, members in (("a", set(refs) - dead), ("b", in_b - dead)):
        stored_at = {ack.key: ack.stored_by for ack in acked[topic]}

        def lacking(t: str = topic, m: set[str] = members, k: dict[bytes, str] = stored_at) -> list[str]:
            return [
                f"{r} lacks {[(key.hex()[:8], k[key]) for key in set(k) - held(r, t)]}"
                for r in sorted(m)
                if set(k) - held(r, t)
            ]

        wait_for(lacking, f"every live member of {topic} holds every acknowledged publication")
    code, body = status_json(cluster_dir)
    assert code == 3  # up, but two daemons are not running
    assert all(body["topics"][t]["legitimate"] for t in ("a", "b")), body["topics"]

    pids = [e.pid for e in entries(cluster_dir) if e.pid is not None]
    assert cluster_cmd(cluster_dir, "down").returncode == 0
    assert all(exited(pid) for pid in pids)
