"""A subscriber process without I/O: the shared publication layer over one overlay.

`PublicationNode` is the node core the node daemon (`pubsub.node.app`) and the simulator
drive.  It runs, per topic its overlay (`pubsub.publications.overlay.NodeOverlay`) runs, a
publication core (`AntiEntropy`, paper 000 §4.2-4.3, Alg. 5), created when the topic is
joined and dropped when the overlay lets go of it (`Released`).  Everything the overlay
knows -- who the neighbours are, the arc view, the anti-entropy partners, the supervisor
of a topic -- it asks the overlay; every message that is not a publication message goes
to the overlay.  `dissemination` chooses how new publications spread besides
anti-entropy: ``tree`` (the arc broadcast, `pubsub.publications.arcs`; the default), ``flood``
(the paper's flooding, §4.3) or ``off``.

Publishing for clients (`publish_request`) and the hand-over are decided here too, and so is
their order against durability: a member stores the publication, then returns
``Persist(then=(acknowledge, flood), token)`` -- durable first, then the acknowledgement,
then flooding -- and a non-member hands the publication over to a member (`HandOverClient`:
GetMember to the supervisor, HandOver to the member, whose HandOverAck comes after *its*
Persist), then answers the client once a member holds it durably or the attempts are
exhausted.  Answers to clients are `Answer` effects tagged with the client's token.
Whatever a call stored leaves at the head of its effects as the rows of a `Persist`, in
each publisher's order (`pubsub.publications.ordering`); how the write ended comes back as
`Committed`, and the `Batched` arc broadcasts of our own publications as `Batch`
(`pubsub.kernel.effects`).  `issue` numbers a publication without storing it,
`publish_publication` stores and spreads an issued or handed-over publication, and
`restore` refills a topic's trie from durable storage without reporting the publications
as new.

Retention (`pubsub.publications.retention`): a topic's settings arrive from the supervisor as
`Retention`; every Timeout -- before the anti-entropy round -- and every publication message
that finds a step of the max-age horizon due applies them to the topic's trie, and what
lies at or before the horizon is refused from then on.  `retention.drain_changes` tells the
daemon what to persist and remove from its store.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from pubsub.kernel.effects import Batch, Batched, Committed, Effect, Persist
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.kernel.wire import MAX_PAYLOAD_BYTES
from pubsub.publications.overlay import NodeOverlay, Released

if TYPE_CHECKING:
    from pubsub.publications.hosted import HostedNode
from pubsub.publications.antientropy import AntiEntropy
from pubsub.publications.arcs import ArcView
from pubsub.publications.dissemination import SPREAD_OWN
from pubsub.publications.handover import DEFAULT_ATTEMPTS, DEFAULT_STEP_TIMEOUT, HandOverClient
from pubsub.publications.messages import (
    PUBLICATION_MESSAGES,
    HandOver,
    HandOverAck,
    MemberIs,
    Publication,
    PublishRequest,
    Spread,
)
from pubsub.publications.ordering import DEFAULT_MAX_WAIT, DEFAULT_WAIT, Sequencer
from pubsub.publications.publishing import DEFAULT_LIMIT, DEFAULT_WINDOW, Publishing
from pubsub.publications.retention import NodeRetention, Order, Policy, Retention
from pubsub.publications.topicstate import DEFAULT_BATCH_BYTES, HANDOVER, LOCAL, Arrival, NewRow, make_publication

#: How new publications may spread besides anti-entropy.
DISSEMINATIONS = ("tree", "flood", "off")
#: Seconds a left topic's publication core is kept for the arc broadcasts of its own
#: publications still waiting for their commit (`Batch` after leaving, see `handle`).
RETIRED_KEEP = 60.0


class PublicationNode:
    """The publication layer of one subscriber process, over its overlay."""

    def __init__(
        self,
        ref: Ref,
        overlay: NodeOverlay,
        *,
        rng: random.Random,
        flooding: bool = True,
        dissemination: str = "tree",
        publish_batch_bytes: int = DEFAULT_BATCH_BYTES,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        handover_timeout: float = DEFAULT_STEP_TIMEOUT,
        handover_attempts: int = DEFAULT_ATTEMPTS,
        dedupe_window: float = DEFAULT_WINDOW,
        dedupe_limit: int = DEFAULT_LIMIT,
        order_wait: float = DEFAULT_WAIT,
        order_max_wait: float = DEFAULT_MAX_WAIT,
    ) -> None:
        self.ref = ref
        self.overlay = overlay
        self.rng = rng
        self.publications: dict[Topic, AntiEntropy] = {}
        if dissemination not in DISSEMINATIONS:
            raise ValueError(f"dissemination must be one of {', '.join(DISSEMINATIONS)}")
        #: How new publications spread besides anti-entropy ("off" when `flooding` is False).
        self.dissemination = dissemination if flooding else "off"
        #: Payload bytes per anti-entropy Publish batch; the daemon keeps it within a frame.
        self.publish_batch_bytes = publish_batch_bytes
        #: Sequence number of the next publication issued by this process.
        self.next_seq = 0
        #: Counters of the publication cores of topics this process left (metrics stay
        #: monotonic when a topic's core is dropped).
        self.retired_counters: Counter[str] = Counter()
        #: Largest payload a client may publish through this process.
        self.max_payload_bytes = max_payload_bytes
        #: Publications of topics we do not run, being handed over to a member.
        self.handover = HandOverClient(
            ref, overlay.owner_of, step_timeout=handover_timeout, attempts=handover_attempts
        )
        #: How this node answers clients' publish requests.
        self.publishing = Publishing(
            self, self.handover, max_payload_bytes, window=dedupe_window, limit=dedupe_limit
        )
        #: Each publisher's publications stored in order (`_stored` with a time).
        self.sequencer = Sequencer(wait=order_wait, max_wait=order_max_wait)
        #: Per-topic retention windows (`pubsub.publications.retention`).
        self.retention = NodeRetention()
        #: Publication cores of topics left, kept until `RETIRED_KEEP` seconds after, for
        #: the `Batch` of their own publications still waiting for a commit.
        self._retired: dict[Topic, tuple[AntiEntropy, float]] = {}

    @property
    def wanted_topics(self) -> set[Topic]:
        """The topics this node should run (the overlay's; the daemon keeps them on disk)."""
        return self.overlay.wanted_topics

    def attach_store(self, durable: bool, seq_reserved: int) -> None:
        """What the daemon's store is: whether it survives the process (acknowledgements
        say so), and the sequence number it reserved up to (we continue there, so that a
        restarted node never issues a publisher and sequence number twice)."""
        self.publishing.durable = durable
        self.next_seq = max(self.next_seq, seq_reserved)

    # ------------------------------------------------------------------ client intents
    def join(self, topic: Topic) -> list[Send]:
        """Run `topic`: the overlay joins it; its publication core lives next to it."""
        sends = self.overlay.join(topic, self.rng)
        self.anti_entropy(topic)
        return sends

    def leave(self, topic: Topic) -> list[Send]:
        """Stop running `topic` (the overlay decides when it has let go)."""
        return self.overlay.leave(topic)

    def is_member(self, topic: Topic) -> bool:
        """Whether we run `topic` and are not leaving it (publications may be stored here)."""
        return self.overlay.is_member(topic)

    def is_configured(self, topic: Topic) -> bool:
        """Whether a client's publication on `topic` is stored here rather than handed over."""
        return self.overlay.is_configured(topic)

    def admitted_supervisor(self, msg: Message, name: str) -> Ref:
        """With TLS: the one supervisor whose `msg` we accept (the overlay says)."""
        return self.overlay.admitted_supervisor(msg, name)

    # ------------------------------------------------------------------ protocol
    def handle(self, msg: Message, now: float) -> Sequence[Effect]:
        """Dispatch one input: a protocol message, or what the executor tells us back
        (`Committed`: how a write ended; `Batch`: `Batched` items released together).

        Whatever this call stored leaves at the head of the effects as the rows of a
        `Persist` (`pubsub.kernel.effects`), in each publisher's order."""
        cls = msg.__class__
        if cls is Committed:
            return self._committed(msg, now)  # type: ignore[arg-type]
        if cls is Batch:
            return self._batch(msg, now)  # type: ignore[arg-type]
        return self._persisting(self._handle(msg, now), now)

    def _handle(self, msg: Message, now: float) -> Sequence[Effect]:
        if isinstance(msg, (MemberIs, HandOverAck)):
            return self.publishing.handle(msg, now)
        if isinstance(msg, HandOver):
            return self.publishing.accept_handover(msg)
        if isinstance(msg, Retention):
            return self._configure_retention(msg, now)
        if isinstance(msg, PUBLICATION_MESSAGES):
            topic = msg.topic
            if not self.overlay.runs(topic):
                return self.overlay.not_a_member(msg)
            refusal = self.overlay.refuses(msg)
            if refusal is not None and not isinstance(msg, Spread):
                return refusal  # nothing in it to keep
            core = self.anti_entropy(topic)
            if self.retention.windows and self.retention.due(topic, now):
                self.retention.advance(topic, core, now)  # never exchange past a due step
            if refusal is not None:  # its publications are kept
                return [*core.handle(msg), *refusal]
            return core.handle(msg)
        effects = self.overlay.handle(msg, now, self.rng)
        if not any(e.__class__ is Released for e in effects):
            return effects  # type: ignore[return-value]
        out: list[Effect] = []
        for effect in effects:
            if isinstance(effect, Released):
                self._retire(effect, now)
            else:
                out.append(effect)
        return out

    def _retire(self, released: Released, now: float) -> None:
        """The overlay let go of a topic: drop its publication core, keeping it a while
        for our own publications whose commit is still running (they spread on the last
        arcs and neighbours)."""
        retired = self.publications.pop(released.topic, None)
        if retired is None:
            return
        self.retired_counters.update(retired.counters)
        last_view, last_targets = released.arc_view, list(released.neighbours)
        retired.arc_view = lambda: last_view
        retired.flood_targets = lambda: last_targets
        self._retired[released.topic] = (retired, now + RETIRED_KEEP)

    def _configure_retention(self, msg: Retention, now: float) -> list[Send]:
        """The supervisor's retention settings for a topic (`pubsub.publications.retention`):
        adopted, and applied at once to the topic's trie if we run it."""
        window = self.retention.configure(msg)
        core = self.publications.get(msg.topic)
        if window is not None and core is not None:
            core.retention = window
            self.retention.advance(msg.topic, core, now)
        return []

    def load_retention(self, topic: Topic, policy: Policy, through: Order) -> None:
        """Retention settings and horizon the daemon kept from before a restart; call before
        `restore`, which then refuses what lies at or before the horizon."""
        window = self.retention.load(topic, policy, through)
        core = self.publications.get(topic)
        if core is not None:
            core.retention = window

    def timeout(self, now: float) -> list[Effect]:
        """The periodic action: hand-overs whose step timed out start their next attempt
        (or fail, answering their client); the overlay's Timeout; retention; then per topic
        the overlay's Timeout and, where configured, PublishTimeout (Alg. 5 l.1-4) with the
        partners the overlay names as it stands after its own Timeout.  Publications the
        ordering held back and released now leave as a `Persist`."""
        if self._retired:
            for topic in [t for t, (_, until) in self._retired.items() if until <= now]:
                del self._retired[topic]
        effects: list[Effect] = self.publishing.timeout(now)
        overlay = self.overlay
        effects.extend(overlay.timeout(now))
        if self.retention.windows:  # retention first: prune before this round's exchange
            for topic, core in self.publications.items():
                self.retention.advance(topic, core, now)
        for topic in overlay.topics():
            effects.extend(overlay.topic_timeout(topic, self.rng))
            if overlay.exchanges(topic):
                core = self.anti_entropy(topic)
                targets = overlay.partners(topic, self.rng, core.eager) if len(core.trie) else []
                effects.extend(core.publish_timeout(targets))
        return self._persisting(effects, now)

    # ------------------------------------------------------------------ publications
    @property
    def flooding(self) -> bool:
        """Whether new publications are spread (by the tree or by flooding, §4.3) in
        addition to anti-entropy."""
        return self.dissemination != "off"

    @flooding.setter
    def flooding(self, on: bool) -> None:
        self.set_dissemination("tree" if on else "off")

    def set_dissemination(self, mode: str) -> None:
        """Switch every topic to `mode` ("tree", "flood" or "off")."""
        if mode not in DISSEMINATIONS:
            raise ValueError(f"dissemination must be one of {', '.join(DISSEMINATIONS)}")
        self.dissemination = mode
        for core in self.publications.values():
            core.flooding, core.tree = mode != "off", mode == "tree"

    def anti_entropy(self, topic: Topic) -> AntiEntropy:
        """The publication core of a topic we run (created on first use)."""
        core = self.publications.get(topic)
        if core is None:
            if not self.overlay.runs(topic):
                raise KeyError(topic)
            core = self.publications[topic] = AntiEntropy(
                self.ref,
                topic,
                flooding=self.flooding,
                tree=self.dissemination == "tree",
                flood_targets=partial(self.overlay.neighbours, topic),
                arc_view=partial(self._arc_view, topic),
                batch_bytes=self.publish_batch_bytes,
            )
            core.retention = self.retention.window(topic)
        return core

    def _arc_view(self, topic: Topic) -> ArcView | None:
        return self.overlay.arc_view(topic)

    def publish(self, topic: Topic, payload: bytes) -> list[Effect]:
        """Issue a publication on `topic` from this process (§4.2 and, if on, §4.3).

        ValueError if we do not run the topic or the payload is too large for a frame.
        """
        if not self.is_member(topic):
            raise ValueError(f"not subscribed to topic {topic!r}")
        return self._persisting(self.publish_publication(topic, self.issue(payload)), None)

    def issue(self, payload: bytes, published_ms: int = 0, prev: int = -1, msg_id: str = "") -> Publication:
        """A new publication of this process: the next sequence number, not stored anywhere.

        `published_ms` is the time it was accepted (the daemon passes its wall clock; the
        core reads no clock); `prev` the sequence number of our previous publication in the
        same topic; `msg_id` the client's id.  ValueError if the payload is too large.
        """
        if len(payload) > MAX_PAYLOAD_BYTES:
            raise ValueError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD_BYTES}")
        publication = make_publication(self.ref, self.next_seq, bytes(payload), published_ms, prev, msg_id)
        self.next_seq += 1
        return publication

    def publish_publication(
        self, topic: Topic, publication: Publication, via: str = LOCAL
    ) -> list[Send | Batched]:
        """Store and spread a publication as its publisher does (§4.3: store, then
        PublishNew to every neighbour when flooding): one `issue` made here, or one another
        process handed over because it does not run the topic.

        ValueError if we are not a member of `topic`.  A malformed publication is rejected
        and counted by the topic's core; `holds` tells afterwards whether it is stored.
        """
        if not self.is_member(topic):
            raise ValueError(f"not subscribed to topic {topic!r}")
        return self.anti_entropy(topic).publish_local(publication, via=via)

    # ------------------------------------------------------------------ publishing for clients
    def publish_request(
        self, client: int, request: PublishRequest, published_ms: int, now: float
    ) -> list[Effect]:
        """A client (token `client`) asks to publish (`pubsub.publications.publishing`);
        `published_ms` is the wall clock the daemon read."""
        return self._persisting(self.publishing.request(client, request, published_ms, now), now)

    # ------------------------------------------------------------------ what the executor tells us
    def _committed(self, msg: Committed, now: float) -> list[Effect]:
        """A write ended: forget what it could not write (a publication of someone else's
        comes back by anti-entropy; ours was never spread), then answer the clients whose
        publications waited for it (`Publishing.persisted`)."""
        for row in msg.unwritten:
            core = self.publications.get(row.topic)
            if core is not None:
                core.forget(row.publication)
        effects: list[Effect] = []
        for token in msg.tokens:
            effects += self.publishing.persisted(token, msg.ok, msg.local_seqs)
        return effects

    def _batch(self, msg: Batch, now: float) -> Sequence[Effect]:
        """`Batched` items released together: the arc broadcast of our own publications
        (`Dissemination.spread_own`: the arcs computed once for all of them), also for a
        topic we left since (on its last arcs)."""
        if msg.work != SPREAD_OWN:
            raise ValueError(f"no batched work {msg.work!r}")
        core = self.publications.get(msg.topic)
        if core is None:
            retired = self._retired.get(msg.topic)
            if retired is None:
                return []
            core = retired[0]
        return core.spread_own(list(msg.items))

    def _persisting(self, effects: Sequence[Effect], now: float | None) -> list[Effect]:
        """`effects`, after a `Persist` of what was stored since the last call, if anything."""
        rows = self._stored(now)
        if not rows:
            return effects if isinstance(effects, list) else list(effects)
        return [Persist(tuple(rows)), *effects]

    def holds(self, topic: Topic, publication: Publication) -> bool:
        """Whether the topic's trie holds `publication`."""
        core = self.publications.get(topic)
        return core is not None and core.holds(publication)

    def restore(self, topic: Topic, publications: Iterable[Publication]) -> int:
        """Refill a topic we run from storage; returns how many were new to its trie.

        They are not reported in a `Persist` (they are stored already); they count as
        gone through for the ordering of what arrives next.
        """
        stored = self.retention.admitted(topic, publications)  # never what retention removed
        for publication in stored:
            self.sequencer.known(topic, publication)
        self.publishing.restored(topic, stored)
        core = self.anti_entropy(topic)
        restored = core.restore(stored)
        if core.retention is not None:
            core.retention.invalidate()  # the trie grew without it: rebuild its index
        return restored

    def _stored(self, now: float | None) -> list[NewRow]:
        """Publications stored since the last call, as rows.  With `now`, in each
        publisher's order (`pubsub.publications.ordering`: a publication whose predecessor has
        not come waits while its publisher's publications keep arriving, `order_wait` of
        quiet and `order_max_wait` at most); without (`publish`, which a test or benchmark
        calls without a clock), in arrival order."""
        out: list[tuple[Topic, Arrival]] = []
        for topic, core in self.publications.items():
            if core.new:
                out += [(topic, arrival) for arrival in core.drain_new()]
        if now is None:
            return [NewRow(t, a.publication, a.via, a.hops) for t, a in out]
        if not out and not self.sequencer.waiting:
            return []
        for topic, arrival in out:
            if arrival.via in (LOCAL, HANDOVER):  # a Persist waits for it: never held back
                self.sequencer.admit(topic, arrival)
            else:
                self.sequencer.push(topic, arrival, now)
        released = self.sequencer.release(now)
        if self.retention.windows:  # what retention removed while it waited is not stored
            released = [(t, a) for t, a in released if self.holds(t, a.publication)]
        for topic, arrival in released:
            self.publishing.stored(topic, arrival.publication, now)
        return [NewRow(t, a.publication, a.via, a.hops) for t, a in released]

    def publication_counters(self) -> Counter[str]:
        """The publication cores' counters summed over every topic since the start, those
        of topics already left included (never decreases)."""
        total = Counter(self.retired_counters)
        for core in self.publications.values():
            total.update(core.counters)
        return total

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        """The runtime gave up on `ref` (the overlay forgets it)."""
        return self.overlay.peer_unreachable(ref, now)

    # ------------------------------------------------------------------ what the daemon keeps and shows
    def has_publication_core(self, topic: Topic) -> bool:
        """Whether the topic's publication core exists (its trie may need refilling)."""
        return topic in self.publications

    def topic_counters(self, topic: Topic) -> Counter[str] | None:
        """The counters of one topic's publication core (None: no such core)."""
        core = self.publications.get(topic)
        return None if core is None else core.counters

    @property
    def dedupe_window(self) -> float:
        """Seconds a message id is remembered (`pubsub.publications.publishing`)."""
        return self.publishing.window

    def remember_message_id(self, topic: Topic, publication: Publication, now: float, expires: float) -> None:
        """A publication the store holds from the last window: a request repeating its
        message id is a duplicate until `expires` (refilled after a restart)."""
        self.publishing.stored(topic, publication, now, expires=expires)

    def layer_status(self) -> dict[str, object]:
        """The publication layer's own state for the daemon's status: hand-overs in flight
        and their counters, the publishing counters and message ids remembered, what the
        ordering holds back and its counters."""
        return {
            "handovers_pending": len(self.handover.pending),
            "handover_counters": Counter(self.handover.counters),
            "publishing_counters": Counter(self.publishing.counters),
            "message_ids": self.publishing.remembered(),
            "order_waiting": self.sequencer.waiting,
            "order_counters": Counter(self.sequencer.counters),
        }

    def set_wall_offset(self, offset: float) -> None:
        """How this core's clock maps to Unix time (retention's max age is wall time)."""
        self.retention.wall_offset = offset

    def retention_changes(self) -> list[tuple[Topic, Policy, Order]]:
        """(topic, settings, horizon) of every topic whose retention changed since the last
        call, for the daemon to make durable (`pubsub.node.retention`)."""
        return self.retention.drain_changes() if self.retention.changed else []

    def retention_unsaved(self, topic: Topic) -> None:
        """The daemon could not store a topic's retention change: report it again next time."""
        self.retention.changed.add(topic)

    # ------------------------------------------------------------------ inspection
    def status(self) -> dict[str, object]:
        """JSON-able state: the overlay's, with each topic's publications and retention."""
        body = self.overlay.status()
        topics = body.get("topics")
        if isinstance(topics, dict):
            for topic, entry in topics.items():
                core = self.publications.get(topic)
                if core is not None:
                    entry["publications"] = core.status()
                retention = self.retention.status(topic)
                if retention is not None:
                    entry["retention"] = retention
        return body


if TYPE_CHECKING:

    def _hosted(node: PublicationNode) -> HostedNode:  # mypy: PublicationNode fulfils the contract
        return node
