"""Nodes die while the arc broadcast carries publications (issue 11): every acknowledged
publication still reaches every live member.

Real processes on 127.0.0.1: a supervisor and 10 nodes in one topic.  One client publishes
as fast as acknowledgements allow (32 in flight) through node 0; once 300 publications are
acknowledged, the two members whose labels are shortest after the publisher's (the inner
nodes of its broadcast trees, each forwarding to several others) are killed with SIGKILL and
stay dead, while publishing goes on.  The subtrees below them lose the fast path for the
publications in flight; the ring is repaired around the dead, arcs are recomputed, and
anti-entropy fills in what the tree missed.  Checked: every acknowledged publication is
held, exactly once, by every live member; the tree did carry the publications (Spread, not
flooding).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from pubsub.client.library import Ack, Client
from pubsub.ops.localcluster import LocalCluster
from pubsub.skipring.statuscheck import ring_problems

pytestmark = pytest.mark.integration

T = "tree"
N = 10
TOTAL = 1200
KILL_AFTER = 300
WINDOW = 32
CONVERGE = 120.0


def legitimate(c: LocalCluster, n: int) -> list[str]:
    members, states = c.snapshot(T)
    problems = ring_problems(members, states)
    return problems if len(members) == n else [f"{len(members)} members, want {n}", *problems]


async def publish_all(ref: str, killed: asyncio.Event) -> list[Ack]:
    acks: list[Ack] = []
    async with Client(ref) as client:
        gate = asyncio.Semaphore(WINDOW)

        async def one(i: int) -> None:
            async with gate:
                acks.append(await client.publish(T, f"p{i}"))
                if len(acks) == KILL_AFTER:
                    killed.set()

        await asyncio.gather(*(one(i) for i in range(TOTAL)))
    return acks


def test_every_acknowledged_publication_reaches_every_live_member(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, N, interval=0.2) as c:
        for i in range(N):
            c.subscribe(i, T)
        c.poll(lambda: legitimate(c, N), 60, "a legitimate ring of 10")
        members, _ = c.snapshot(T)
        by_length = sorted((len(bits), ref) for ref, bits in members.items() if ref != c.node_refs[0])
        victims = [ref for _, ref in by_length[:2]]

        async def scenario() -> list[Ack]:
            killed = asyncio.Event()
            publishing = asyncio.ensure_future(publish_all(c.node_refs[0], killed))
            await asyncio.wait_for(killed.wait(), 60)
            for ref in victims:  # in the middle of the stream: broadcasts are in flight
                await asyncio.to_thread(c.kill, c.node_refs.index(ref), signal.SIGKILL)
            return await asyncio.wait_for(publishing, 120)

        acks = asyncio.run(scenario())
        assert len(acks) == TOTAL
        keys = {a.key.hex() for a in acks}
        assert len(keys) == TOTAL
        live = [ref for ref in c.node_refs if ref not in victims]

        def missing() -> list[str]:
            out = []
            for ref, entries in c.histories(live, T).items():
                held = [e["key"] for e in entries]
                if len(held) != len(set(held)):
                    out.append(f"{ref} holds a publication twice")
                if set(held) != keys:
                    out.append(f"{ref} holds {len(set(held) & keys)} of {TOTAL}")
            return out

        c.poll(missing, CONVERGE, "every live member to hold every acknowledged publication", 0.5)
        statuses = c.node_statuses(live)
        carried = sum(s["publications"]["counters"].get("stored_by_tree", 0) for s in statuses.values())
        assert carried > (N - 3) * TOTAL // 2  # the tree carried most of them
        assert all(s["publications"]["dissemination"] == "tree" for s in statuses.values())
