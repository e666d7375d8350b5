"""Publishing for clients at one node, without I/O: what an answer means (issue 12).

`Publishing` decides how a node answers `PublishRequest`s, and states every step as effects
(`pubsub.kernel.effects`):

* **Who stores.**  The node stores a client's publication itself only when it is a
  *configured* member of the topic -- it runs the topic *and holds a label from the
  supervisor*.  A node that merely joined (no label yet: the supervisor has not answered, or
  cannot be reached) hands the publication over to a member like a non-member does
  (`pubsub.publications.handover`), instead of acknowledging what no other node will see.
* **Persist, then answer, then spread.**  A member stores the publication and returns
  ``Persist(then=spreads, token=token)``; the executor writes it, then reports the
  outcome (`Committed`, which the node core hands to `persisted` with the local numbers
  the store gave), whose answers go out before the spreads.  If the write fails
  the node forgot the publication (it is not held anywhere: it was never spread), so the
  answer ``store_error`` is final.
* **Honest answers.**  `PublishAck` says where the publication is stored and whether that
  store is durable (`durable`: False for a node without a data directory, or a member
  reached by hand-over that has none).  `PublishFailed` means nothing was stored and
  nothing will be -- except code ``unknown``: a member received the publication but did
  not answer, so it may hold it.
* **Message ids, a retry publishes once.**  A request may carry the client's `msg_id`.
  Within `window` seconds, a request with an id already seen in the topic is not published
  again: while the first is in progress the second waits for its outcome; after an
  acknowledgement it gets the same acknowledgement (``duplicate``); after ``unknown`` the
  *same* publication (same key) is handed over again, which every member de-duplicates by
  key; after a definite failure it is published afresh.  Publications carry their id, so
  every node that stores one also answers a retry through it as a duplicate (a client that
  fails over to another node) -- and a node that restarts with its store refills the window
  from it (`remember`).  Ids are kept at most `window` seconds and `limit` entries.
* **Order.**  Each publication names the node's previous publication in the same topic
  (`Publication.prev`), so that nodes store, and deliver, one publisher's publications in
  order (`pubsub.publications.ordering`).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from pubsub.kernel.effects import Answer, Batched, Effect, Persist
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.publications.handover import HandOverClient
from pubsub.publications.messages import (
    HandOver,
    HandOverAck,
    MemberIs,
    Publication,
    PublishAck,
    PublishFailed,
    PublishRequest,
)
from pubsub.publications.topicstate import HANDOVER

#: Seconds a message id is remembered.
DEFAULT_WINDOW = 120.0
#: Message ids remembered at most (the oldest are forgotten first).
DEFAULT_LIMIT = 100_000


def _failure(code: str, detail: str, request_id: int) -> PublishFailed:
    return PublishFailed(request_id, code, detail)


class Node(Protocol):
    """What publishing needs of the node core (`pubsub.skipring.nodecore.NodeCore`)."""

    ref: Ref

    def is_member(self, topic: Topic) -> bool: ...

    def is_configured(self, topic: Topic) -> bool: ...

    def issue(self, payload: bytes, published_ms: int = 0, prev: int = -1, msg_id: str = "") -> Publication: ...

    def publish_publication(
        self, topic: Topic, publication: Publication, via: str = ...
    ) -> list[Send | Batched]: ...

    def holds(self, topic: Topic, publication: Publication) -> bool: ...


@dataclass(slots=True)
class _Entry:
    """One publication asked for by a client, while in progress (and, with a message id,
    for the window after)."""

    topic: Topic
    publication: Publication
    waiters: list[tuple[int, int]]  # (client token, request id) to answer
    first: tuple[int, int] = (-1, -1)  # the request that created it (the others repeat it)
    state: str = "pending"  # pending, ok, unknown
    stored_by: Ref | None = None
    durable: bool = True
    expires: float = 0.0
    persist: int | None = None  # the Persist token while a local write is in progress


@dataclass(slots=True)
class _Held:
    """A publication with a message id held here (stored, or acknowledged)."""

    publication: Publication
    stored_by: Ref
    durable: bool
    expires: float


@dataclass
class Publishing:
    """The publishing decisions of one node (see the module docstring)."""

    node: Node
    handover: HandOverClient
    max_payload_bytes: int
    window: float = DEFAULT_WINDOW
    limit: int = DEFAULT_LIMIT
    #: Whether this node's store survives its process.
    durable: bool = True
    counters: Counter[str] = field(default_factory=Counter)
    _entries: dict[int, _Entry] = field(default_factory=dict)  # persist token / hand-over -> entry
    _handovers: dict[int, _Entry] = field(default_factory=dict)
    _by_id: dict[tuple[Topic, str], _Entry | _Held] = field(default_factory=dict)
    _expiry: deque[tuple[float, Topic, str]] = field(default_factory=deque)
    _last_seq: dict[Topic, int] = field(default_factory=dict)
    _next_token: int = 0

    # ------------------------------------------------------------------ requests
    def request(self, client: int, req: PublishRequest, published_ms: int, now: float) -> list[Effect]:
        """A client's PublishRequest (see the module docstring)."""
        self._expire(now)
        size = len(req.payload)
        if size > self.max_payload_bytes:
            return [self._fail(client, req.id, "payload_too_large",
                               f"payload of {size} bytes exceeds this node's limit of "
                               f"{self.max_payload_bytes} bytes (PUBSUB_MAX_PAYLOAD_BYTES)")]
        topic, msg_id = req.topic, req.msg_id
        if msg_id:
            known = self._by_id.get((topic, msg_id))
            if isinstance(known, _Held):
                self.counters["duplicates"] += 1
                return [Answer(client, self._ack(req.id, topic, known.publication, known.stored_by,
                                                 known.durable, duplicate=True))]
            if known is not None:
                return self._again(known, client, req.id, now)
        prev = self._last_seq.get(topic, -1)
        publication = self.node.issue(req.payload, published_ms, prev, msg_id)
        self._last_seq[topic] = publication.seq
        entry = _Entry(topic, publication, [(client, req.id)], first=(client, req.id))
        if msg_id:
            self._remember_entry(entry, msg_id, now)
        return self._place(entry, now)

    def _again(self, entry: _Entry, client: int, request_id: int, now: float) -> list[Effect]:
        """A request repeating the message id of `entry`."""
        self.counters["duplicates"] += 1
        if entry.state == "ok" and entry.stored_by is not None:
            return [Answer(client, self._ack(request_id, entry.topic, entry.publication, entry.stored_by,
                                             entry.durable, duplicate=True))]
        entry.waiters.append((client, request_id))
        if entry.state == "unknown":  # the same publication once more: members de-duplicate
            entry.state = "pending"
            return self._place(entry, now)
        return []  # in progress: answered with the first

    def _place(self, entry: _Entry, now: float) -> list[Effect]:
        """Store it here (a configured member) or hand it over."""
        topic, publication = entry.topic, entry.publication
        if self.node.is_configured(topic):
            spreads = self.node.publish_publication(topic, publication)
            if not self.node.holds(topic, publication):
                return self._finish_failed(entry, "bad_publication", "the publication was refused")
            self._next_token += 1
            entry.persist = self._next_token
            self._entries[entry.persist] = entry
            self.counters["stored_here"] += 1
            return [Persist(then=tuple(spreads), token=entry.persist)]
        number, sends = self.handover.start(topic, publication, now)
        self._handovers[number] = entry
        self.counters["handovers_started"] += 1
        return list(sends)

    # ------------------------------------------------------------------ outcomes
    def persisted(
        self, token: int, ok: bool, local_seqs: Mapping[tuple[Topic, bytes], int] | None = None
    ) -> list[Effect]:
        """The write of a Persist this module returned ended (the executor reports it, with
        the local numbers the store gave what it wrote: the acknowledgement names it)."""
        entry = self._entries.pop(token, None)
        if entry is None:
            return []
        entry.persist = None
        if not ok:
            return self._finish_failed(entry, "store_error", "the publication could not be written to the "
                                       "store (it is not stored anywhere)")
        local_seq = None if local_seqs is None else local_seqs.get((entry.topic, entry.publication.key))
        return self._finish_ok(entry, self.node.ref, self.durable, local_seq)

    def handed_over(self) -> list[Effect]:
        """Answer the clients of the hand-overs that ended."""
        answers: list[Effect] = []
        for outcome in self.handover.drain_outcomes():
            entry = self._handovers.pop(outcome.request, None)
            if entry is None:
                continue
            if outcome.ok and outcome.member is not None:
                self.counters["handovers_succeeded"] += 1
                if outcome.original is not None:  # the member held this message id already
                    self._rewind(entry)
                    entry.publication, entry.first = outcome.original, (-1, -1)
                answers.extend(self._finish_ok(entry, outcome.member, outcome.durable))
            elif outcome.code == "unknown":
                self.counters["unknown"] += 1
                entry.state = "unknown"
                answers.extend(self._answer_all(entry, partial(_failure, "unknown", outcome.detail)))
            else:
                answers.extend(self._finish_failed(entry, outcome.code, outcome.detail))
        return answers

    def _finish_ok(
        self, entry: _Entry, stored_by: Ref, durable: bool, local_seq: int | None = None
    ) -> list[Effect]:
        """Acknowledge every waiter (with the local number, for a publication stored here);
        all but the request that created the entry repeated its message id and are told so
        (`duplicate`)."""
        entry.state, entry.stored_by, entry.durable = "ok", stored_by, durable
        waiters, entry.waiters = entry.waiters, []
        first = entry.first
        return [
            Answer(client, self._ack(rid, entry.topic, entry.publication, stored_by, durable,
                                     duplicate=(client, rid) != first, local_seq=local_seq))
            for client, rid in waiters
        ]

    def _finish_failed(self, entry: _Entry, code: str, detail: str) -> list[Effect]:
        """Nothing was stored: answer, let a retry with the same id publish afresh, and let
        our next publication in the topic name the one before this (which exists)."""
        self._rewind(entry)
        msg_id = entry.publication.msg_id
        if msg_id and self._by_id.get((entry.topic, msg_id)) is entry:
            del self._by_id[(entry.topic, msg_id)]
        return self._answer_all(entry, lambda rid: PublishFailed(rid, code, detail))

    def _rewind(self, entry: _Entry) -> None:
        """`entry`'s publication will exist nowhere: if it is our latest in its topic, our
        next one names the one before it as its predecessor (`Publication.prev`)."""
        if self._last_seq.get(entry.topic) == entry.publication.seq:
            self._last_seq[entry.topic] = entry.publication.prev

    def _answer_all(self, entry: _Entry, answer: Callable[[int], Message]) -> list[Effect]:
        waiters, entry.waiters = entry.waiters, []
        return [Answer(client, answer(rid)) for client, rid in waiters]

    def _ack(self, request_id: int, topic: Topic, p: Publication, stored_by: Ref, durable: bool,
             *, duplicate: bool = False, local_seq: int | None = None) -> PublishAck:
        return PublishAck(request_id, topic, p.publisher, p.seq, p.key, stored_by, local_seq, durable, duplicate)

    def _fail(self, client: int, request_id: int, code: str, detail: str) -> Answer:
        return Answer(client, PublishFailed(request_id, code, detail))

    # ------------------------------------------------------------------ hand-overs taken
    def accept_handover(self, msg: HandOver) -> list[Effect]:
        """A node hands a publication to us: store it, and once it is written answer
        HandOverAck(ok, durable) and spread it."""
        self.counters["handovers_received"] += 1

        def ack(ok: bool, code: str = "") -> Send:
            return Send(msg.sender, HandOverAck(msg.topic, self.node.ref, msg.request, ok, code, self.durable))

        if not self.node.is_configured(msg.topic):
            return [ack(False, "not_member")]
        msg_id = msg.publication.msg_id
        known = self._by_id.get((msg.topic, msg_id)) if msg_id else None
        held = isinstance(known, _Held) or (isinstance(known, _Entry) and known.state == "ok")
        if known is not None and held and known.publication.key != msg.publication.key:
            # A retry, through another node, of a publication we hold under this id.
            self.counters["duplicates"] += 1
            return [Send(msg.sender, HandOverAck(msg.topic, self.node.ref, msg.request, True, "",
                                                 self.durable, known.publication))]
        spreads = self.node.publish_publication(msg.topic, msg.publication, via=HANDOVER)
        if not self.node.holds(msg.topic, msg.publication):
            return [ack(False, "bad_publication")]
        return [Persist(then=(ack(True), *spreads), otherwise=(ack(False, "store_error"),))]

    def handle(self, msg: MemberIs | HandOverAck, now: float) -> list[Effect]:
        """A reply of the hand-over protocol."""
        return [*self.handover.handle(msg, now), *self.handed_over()]

    def timeout(self, now: float) -> list[Effect]:
        """Hand-over steps that timed out, and message ids whose window is over."""
        self._expire(now)
        return [*self.handover.timeout(now), *self.handed_over()]

    # ------------------------------------------------------------------ message ids
    def stored(self, topic: Topic, publication: Publication, now: float, expires: float | None = None) -> None:
        """This node stores a publication with a message id (from anywhere, or refilled
        from the store after a restart, with the time its window ends): a request repeating
        the id is a duplicate until then."""
        msg_id = publication.msg_id
        if not msg_id:
            return
        key = (topic, msg_id)
        if isinstance(self._by_id.get(key), _Entry):
            return  # ours, in progress: its own outcome decides
        until = now + self.window if expires is None else expires
        self._by_id[key] = _Held(publication, self.node.ref, self.durable, until)
        self._expiry.append((until, topic, msg_id))
        self._bound()

    def _remember_entry(self, entry: _Entry, msg_id: str, now: float) -> None:
        entry.expires = now + self.window
        self._by_id[(entry.topic, msg_id)] = entry
        self._expiry.append((entry.expires, entry.topic, msg_id))
        self._bound()

    def _bound(self) -> None:
        while len(self._by_id) > self.limit and self._expiry:
            _, topic, msg_id = self._expiry.popleft()
            self._drop(topic, msg_id, force=True)

    def _expire(self, now: float) -> None:
        while self._expiry and self._expiry[0][0] <= now:
            _, topic, msg_id = self._expiry.popleft()
            self._drop(topic, msg_id, force=False, now=now)

    def _drop(self, topic: Topic, msg_id: str, *, force: bool, now: float = 0.0) -> None:
        found = self._by_id.get((topic, msg_id))
        if found is None:
            return
        if isinstance(found, _Entry) and found.state == "pending" and not force:
            # In progress: its outcome is still owed; look again a window later.
            found.expires = now + self.window
            self._expiry.append((found.expires, topic, msg_id))
            return
        expires = found.expires
        if force or expires <= now:
            del self._by_id[(topic, msg_id)]

    def remembered(self) -> int:
        """Message ids in the window now."""
        return len(self._by_id)

    def restored(self, topic: Topic, publications: list[Publication]) -> None:
        """The node refilled `topic` from its store: continue its own publications' chain."""
        mine = [p.seq for p in publications if p.publisher == self.node.ref]
        if mine:
            self._last_seq[topic] = max(self._last_seq.get(topic, -1), max(mine))
