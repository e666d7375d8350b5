"""One executor, two hosts (issue 43, item 2): the node daemon's and the simulator's.

`pubsub.kernel.executor.Executor` carries out a core's effects in the daemon and in the
simulator; what differs is only what each host gives it: the daemon its SQLite group commit
(`pubsub.node.commits` over a real `PublicationStore`) and the event loop's clock, the
simulator its simulated store (`pubsub.sim.world.SimStore`) and the virtual clock.  This
test feeds the same inputs to two identical node cores, one under each host, and compares
the whole sequence of what came out: every send (in order), every commit (the rows it
wrote), every answer to a client, and the local numbers the acknowledgements carry.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

from pubsub.kernel.effects import Effect
from pubsub.kernel.executor import Executor
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.node.app import _LoopClock
from pubsub.node.commits import GroupCommit
from pubsub.node.rowcodec import Stored
from pubsub.node.store import PublicationStore
from pubsub.node.writer import StoreThread
from pubsub.publications.messages import HandOver, MsgId, Payload, PublicationList, PublishRequest, Spread
from pubsub.publications.topicstate import make_publication
from pubsub.sim.scenarios import legitimate_start
from pubsub.sim.world import SimStore, Simulation, _SimClock
from pubsub.skipring.nodecore import NodeCore

TOPIC = Topic("t")
Log = list[tuple[Any, ...]]


class Recorder:
    """The outlet of both hosts: answers and later sends, in one log with the commits."""

    def __init__(self, log: Log) -> None:
        self.log = log

    def answer(self, client: int, msg: Message) -> None:
        self.log.append(("answer", client, _shown(msg)))

    def deliver(self, sends: list[Send]) -> None:
        self.log.extend(("send", dest, _shown(msg)) for dest, msg in sends)


def _shown(msg: Message) -> Any:
    """A message as comparable data (Spreads by their publications' keys and arcs)."""
    if isinstance(msg, Spread):
        return ("spread", msg.start, msg.end, msg.hops, tuple(p.key for p in msg.publications))
    return msg


def inputs(members: list[Ref]) -> list[Callable[[NodeCore, float], list[Effect]]]:
    """The same inputs for both cores: client publications (one with a message id and a
    retry of it), a hand-over from a non-member, a Spread from a neighbour, Timeouts."""
    other = members[1]
    spread_from = make_publication(other, 0, b"from a neighbour")
    handed = make_publication(Ref("outsider:1"), 0, b"handed over")

    def request(client: int, payload: bytes, rid: int, msg_id: str = "") -> Callable[[NodeCore, float], list[Effect]]:
        req = PublishRequest(TOPIC, Payload(payload), rid, MsgId(msg_id))
        return lambda core, now: list(core.publish_request(client, req, 1000 + rid, now))

    return [
        request(1, b"first", 1),
        request(2, b"second", 2, "id-2"),
        lambda core, now: list(core.handle(HandOver(TOPIC, Ref("outsider:1"), handed, 7), now)),
        lambda core, now: list(core.handle(
            Spread(TOPIC, other, 0, (1 << 64) - 1, 10, 1, PublicationList([spread_from])), now
        )),
        request(1, b"third", 3),
        request(3, b"second again", 4, "id-2"),  # a retry of the id: answered as a duplicate
        lambda core, now: list(core.timeout(now)),
    ]


def a_member() -> tuple[NodeCore, list[Ref]]:
    """A configured member of a legitimate ring of four (from the simulator's start)."""
    sim = Simulation(5, dissemination="tree")
    members = legitimate_start(sim, 4, TOPIC)
    return sim.nodes[members[0]], members


def under_the_daemon(core: NodeCore, members: list[Ref]) -> Log:
    """The daemon's host: the group commit over an in-memory SQLite store, on a loop."""
    log: Log = []
    store = PublicationStore(None)
    store.defer_writes()
    thread = StoreThread("test store")

    def written(rows: list[Stored]) -> None:
        log.append(("commit", tuple((s.topic, s.publication.key, s.local_seq) for s in rows)))

    commits = GroupCommit(store, thread, on_written=written, on_error=lambda exc: None, inline=True)
    core.attach_store(store.durable, store.seq_reserved)
    executor = Executor(core, commits, _LoopClock(), Recorder(log))

    async def feed() -> None:
        for step in inputs(members):  # all in one pass of the loop, as a burst arrives
            log.extend(("send", dest, _shown(msg)) for dest, msg in executor.run(step(core, 0.0)))
        for _ in range(20):  # bounded: the commit and the releases are a few passes
            await asyncio.sleep(0)

    try:
        asyncio.run(feed())
    finally:
        thread.close()
        store.close()
    return log


def under_the_simulator(core: NodeCore, members: list[Ref]) -> Log:
    """The simulator's host: its simulated store and its virtual clock."""
    log: Log = []
    sim = Simulation(1, commit_delay=0.05)
    clock = _SimClock(sim)

    def commit_later() -> None:
        store.commit_pending = True

    store = SimStore(kick=commit_later)
    core.attach_store(False, 0)  # as the daemon's in-memory store: not durable
    executor = Executor(core, store, clock, Recorder(log))
    for step in inputs(members):  # all at one virtual instant
        log.extend(("send", dest, _shown(msg)) for dest, msg in executor.run(step(core, 0.0)))
        sim._end_of_pass()
    pending = list(store.unwritten)
    local = dict(store.local)
    for row in pending:  # the numbers this commit gives, logged as the daemon's store logs them
        local[row.topic] = local.get(row.topic, 0) + 1
        log.append(("row", row.topic, row.publication.key, local[row.topic]))
    store.commit()
    sim._end_of_pass()
    return _commits_as_one(log)


def _commits_as_one(log: Log) -> Log:
    """The simulator's rows of one commit as one commit entry, as the daemon logs it."""
    out: Log = []
    rows: list[tuple[Any, ...]] = []
    for entry in log:
        if entry[0] == "row":
            rows.append(entry[1:])
            continue
        if rows:
            out.append(("commit", tuple(rows)))
            rows = []
        out.append(entry)
    if rows:
        out.append(("commit", tuple(rows)))
    return out


def test_the_daemon_and_the_simulator_carry_out_the_same_effects_in_the_same_order() -> None:
    core, members = a_member()
    daemon = under_the_daemon(copy.deepcopy(core), members)
    simulated = under_the_simulator(copy.deepcopy(core), members)
    kinds = [entry[0] for entry in daemon]
    # the scenario exercises what matters: sends before the commit, one commit of every
    # row, then the answers, then the released sends (the hand-over's ack, the spreads)
    assert kinds.count("commit") == 1
    commit = kinds.index("commit")
    assert "send" in kinds[:commit] and "answer" in kinds[commit:] and "send" in kinds[commit:]
    (rows,) = [entry[1] for entry in daemon if entry[0] == "commit"]
    assert len(rows) == 5  # three of our own, the hand-over, the neighbour's Spread
    acks = [entry[2] for entry in daemon if entry[0] == "answer"]
    assert [ack.local_seq for ack in acks if not ack.duplicate] == [1, 2, 5]  # the store's numbers
    assert sum(ack.duplicate for ack in acks) == 1
    assert simulated == daemon
