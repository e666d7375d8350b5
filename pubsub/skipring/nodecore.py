"""A subscriber process without I/O: one BuildSR instance per subscribed topic (paper 000, §4).

`NodeCore` routes each protocol message to the `SkipRingNode` of its topic and implements
the parts of §4 and §4.1 that sit above a single ring:

* join: start a BuildSR instance for the topic (it asks the supervisor to Subscribe);
* leave: keep running until the supervisor grants permission (SetData with ⊥, Lemma 4.1),
  then release every connection and delete the instance.  Until then Unsubscribe is
  repeated every Timeout, so a lost request cannot strand the node;
* a message for a topic this node does not run is answered with RemoveConnections, so
  stale neighbours forget us (Lemma 4.1); a configuration for such a topic is answered with
  Unsubscribe so that the supervisor's database forgets us too;
* a peer the runtime cannot reach is dropped from every instance and reported to the
  supervisor, which verifies the report before removing anyone (§3.3).

Next to each BuildSR instance runs the topic's publication core (`AntiEntropy`, §4.2-4.3,
Alg. 5), created with the instance and dropped with it.  Its Timeout sends the trie root
to a partner chosen by `pubsub.skipring.partners` (a level partner or a ring neighbour),
and its flood targets are the
instance's contacts: ring neighbours and shortcuts (E_R and E_S).  `dissemination` chooses
how new publications spread besides anti-entropy: ``tree`` (the arc broadcast,
`pubsub.skipring.arcs`; the default), ``flood`` (the paper's flooding, §4.3) or ``off``.  `publish` issues a
publication from this process with a per-process sequence number; `drain_arrivals`
hands the publications stored since the last call to whoever delivers and persists them.

Publishing for clients (`publish_request`) and the hand-over are decided here too, and so is
their order against durability: a member stores the publication, then returns
``Persist(then=(acknowledge, flood))`` -- durable first, then the acknowledgement, then
flooding -- and a non-member hands the publication over to a member (`HandOverClient`:
GetMember to the supervisor, HandOver to the member, whose HandOverAck comes after *its*
Persist), then answers the client once a member holds it durably or the attempts are
exhausted.  Answers to clients are `Answer` effects tagged with the client's token
(`pubsub.kernel.effects`).  `issue` numbers a publication without storing it,
`publish_publication` stores and spreads an issued or handed-over publication, and
`restore` refills a topic's trie from durable storage without reporting the publications
as new.

Retention (`pubsub.skipring.retention`): a topic's settings arrive from the supervisor as
`Retention`; every Timeout -- before the anti-entropy round -- and every publication message
that finds a step of the max-age horizon due applies them to the topic's trie, and what
lies at or before the horizon is refused from then on.  `retention.drain_changes` tells the
daemon what to persist and remove from its store.

Sharded supervisors (`pubsub.skipring.shards`, issue 14 item 4): with
``discover_supervisors`` the node asks a supervisor for the live supervisor set
(`GetSupervisors`) at its first Timeout and then at gaps that double from `POLL_EVERY` to
`POLL_MAX` Timeouts (back to `POLL_EVERY` when the set changes or a supervisor is
unreachable), and adopts every `Supervisors` it receives (an answer, a redirect, or the news
a supervisor sends its members when the set changes).  Each topic's instance talks to the
topic's owner on the hash ring of that set (`owner_of`); when the owner of a topic we run
changes, we Subscribe there (again every Timeout until a configuration arrives), and the new
owner, whose database for the topic starts empty, rebuilds it from its subscribers.  Until
the first answer, and always without discovery (the simulator), every topic's owner is
`supervisor`.

The daemon (`pubsub.node.app`) and the simulator (`pubsub.sim`) drive this same class.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from functools import partial

from pubsub.kernel.effects import Batch, Batched, Committed, Effect, Persist
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.skipring.arcs import ArcView
from pubsub.skipring.antientropy import (
    HANDOVER,
    DEFAULT_BATCH_BYTES,
    LOCAL,
    SPREAD_OWN,
    AntiEntropy,
    Arrival,
    NewRow,
    make_publication,
)
from pubsub.skipring.handover import DEFAULT_ATTEMPTS, DEFAULT_STEP_TIMEOUT, HandOverClient
from pubsub.skipring.ordering import DEFAULT_MAX_WAIT, DEFAULT_WAIT, Sequencer
from pubsub.skipring.publishing import DEFAULT_LIMIT, DEFAULT_WINDOW, Publishing
from pubsub.skipring.retention import NodeRetention, Order, Policy, Retention
from pubsub.skipring.messages import (
    Check,
    CheckAndPublish,
    CheckTrie,
    Delegate,
    HandOver,
    HandOverAck,
    Introduce,
    IntroduceShortcut,
    Linearize,
    MemberIs,
    PUBLICATION_MESSAGES,
    Ping,
    Pong,
    Publication,
    PublishRequest,
    RemoveConnections,
    SetData,
    Subscribe,
    SuspectCrash,
    Unsubscribe,
)
from pubsub.skipring.buildsr import SkipRingNode
from pubsub.skipring.shards import GetSupervisors, HashRing, Supervisors, ring_of
from pubsub.skipring.partners import anti_entropy_targets
from pubsub.kernel.wire import MAX_PAYLOAD_BYTES


#: How new publications may spread besides anti-entropy.
DISSEMINATIONS = ("tree", "flood", "off")
#: With supervisor discovery: Timeouts between two questions for the live supervisor set,
#: at first and again after the set changed or a supervisor became unreachable; every
#: question doubles the gap up to `POLL_MAX` (about 5 s at the default 0.3 s interval),
#: so that with a stable set 100 nodes ask about 20 times per second in all instead of
#: about 170.  Changes reach members at once anyway (a supervisor tells the members of its
#: topics); the questions are the fallback.
POLL_EVERY = 2
POLL_MAX = 16
#: Seconds a left topic's publication core is kept for the arc broadcasts of its own
#: publications still waiting for their commit (`Batch` after leaving, see `handle`).
RETIRED_KEEP = 60.0


def _carried_ref(msg: Message) -> Ref | None:
    """The node a BuildSR message speaks for, to tell it we are not in that ring."""
    if isinstance(msg, (Introduce, Linearize, IntroduceShortcut, Delegate)):
        return msg.contact.ref
    if isinstance(msg, Check):
        return msg.sender.ref
    if isinstance(msg, (CheckTrie, CheckAndPublish)):
        return msg.sender  # a peer that thinks we are its ring neighbour
    return None


class NodeCore:
    """All BuildSR instances of one subscriber process."""

    def __init__(
        self,
        ref: Ref,
        supervisor: Ref,
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
        discover_supervisors: bool = False,
    ) -> None:
        self.ref = ref
        #: The one supervisor address we were given (every topic's owner until we learn
        #: the live supervisor set, module docstring).
        self.supervisor = supervisor
        #: Whether we ask for the live supervisor set (`pubsub.skipring.shards`).
        self.discover_supervisors = discover_supervisors
        #: The live supervisor set as last heard, and its hash ring (None: not heard yet).
        self.supervisors: tuple[Ref, ...] = (supervisor,)
        self._shards: HashRing | None = None
        #: Topics whose owner changed and has not configured us yet -> that owner.
        self.rehoming: dict[Topic, Ref] = {}
        #: topics_rehomed, supervisor_sets (adopted), redirects (received).
        self.shard_counters: Counter[str] = Counter()
        self._ticks = 0
        self._asked = 0
        self._poll_every = POLL_EVERY
        self._next_poll = 0  # the Timeout (counted in `_ticks`) of the next GetSupervisors
        self.rng = rng
        self.instances: dict[Topic, SkipRingNode] = {}
        self.publications: dict[Topic, AntiEntropy] = {}
        #: The last arc view of each topic and the ring state it was made from (`_arc_view`).
        self._arc_views: dict[Topic, tuple[tuple[object, ...], ArcView]] = {}
        self.wanted_topics: set[Topic] = set()
        self.leaving: set[Topic] = set()
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
            ref, supervisor, step_timeout=handover_timeout, attempts=handover_attempts
        )
        self.handover.owner_of = self.owner_of
        #: How this node answers clients' publish requests.
        self.publishing = Publishing(
            self, self.handover, max_payload_bytes, window=dedupe_window, limit=dedupe_limit
        )
        #: Each publisher's publications stored in order (`drain_arrivals` with a time).
        self.sequencer = Sequencer(wait=order_wait, max_wait=order_max_wait)
        #: Per-topic retention windows (`pubsub.skipring.retention`).
        self.retention = NodeRetention()
        #: Publication cores of topics left, kept until `RETIRED_KEEP` seconds after, for
        #: the `Batch` of their own publications still waiting for a commit.
        self._retired: dict[Topic, tuple[AntiEntropy, float]] = {}

    def attach_store(self, durable: bool, seq_reserved: int) -> None:
        """What the daemon's store is: whether it survives the process (acknowledgements
        say so), and the sequence number it reserved up to (we continue there, so that a
        restarted node never issues a publisher and sequence number twice)."""
        self.publishing.durable = durable
        self.next_seq = max(self.next_seq, seq_reserved)

    # ------------------------------------------------------------------ client intents
    def join(self, topic: Topic) -> list[Send]:
        """Subscribe this process to `topic` (its instance asks the supervisor on Timeout)."""
        self.wanted_topics.add(topic)
        self.leaving.discard(topic)
        instance = self.instances.get(topic)
        if instance is None:
            instance = self.instances[topic] = SkipRingNode(self.ref, topic, self.owner_of(topic))
        self.anti_entropy(topic)  # the topic's publication core lives next to its instance
        if instance.label is None:
            return instance.timeout(self.rng)  # Subscribe right away rather than next tick
        return []

    def leave(self, topic: Topic) -> list[Send]:
        """Unsubscribe from `topic`; the instance lives on until the supervisor agrees."""
        self.wanted_topics.discard(topic)
        if topic not in self.instances:
            return []
        self.leaving.add(topic)
        return [Send(self.owner_of(topic), Unsubscribe(topic, self.ref))]

    # ------------------------------------------------------------------ sharded supervisors
    def owner_of(self, topic: Topic) -> Ref:
        """The supervisor that owns `topic` as far as we know (module docstring)."""
        return self.supervisor if self._shards is None else self._shards.owner(topic)

    def admitted_supervisor(self, msg: Message, name: str) -> Ref:
        """The one supervisor whose `msg` we accept (`pubsub.skipring.admission`): the
        topic's owner, or for a Ping (which names no topic) any live supervisor."""
        topic = getattr(msg, "topic", None)
        if isinstance(topic, str):
            return self.owner_of(Topic(topic))
        return Ref(name) if name in self.supervisors else self.supervisor

    def _poll_soon(self) -> None:
        """Ask for the live set again within `POLL_EVERY` Timeouts, and as often at first."""
        self._poll_every = POLL_EVERY
        self._next_poll = min(self._next_poll, self._ticks + POLL_EVERY)

    def _ask_supervisors(self) -> list[Send]:
        """GetSupervisors to the next supervisor we know (rotating, so a dead one is
        passed over)."""
        targets = sorted({*self.supervisors, self.supervisor})
        target = targets[self._asked % len(targets)]
        self._asked += 1
        return [Send(target, GetSupervisors(self.ref))]

    def adopt_supervisors(self, msg: Supervisors) -> list[Send]:
        """A live supervisor set: re-route every topic whose owner changed."""
        if msg.redirect is not None:
            self.shard_counters["redirects"] += 1
        live = tuple(sorted({Ref(r) for r in msg.live}))
        if not live:
            return []
        if live != self.supervisors or self._shards is None:
            self.supervisors = live
            self._shards = ring_of(frozenset(live))
            self.shard_counters["supervisor_sets"] += 1
            self._poll_soon()
        sends: list[Send] = []
        for topic, instance in self.instances.items():
            target = self.owner_of(topic)
            if instance.supervisor == target:
                continue
            instance.supervisor = target
            self.shard_counters["topics_rehomed"] += 1
            if topic in self.leaving:
                sends.append(Send(target, Unsubscribe(topic, self.ref)))
            else:
                self.rehoming[topic] = target
                sends.append(Send(target, Subscribe(topic, self.ref)))
        return sends

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
        if isinstance(msg, Ping):  # from whichever live supervisor suspects us
            return [Send(s, Pong(msg.nonce, self.ref)) for s in self.supervisors]
        if isinstance(msg, Supervisors):
            return self.adopt_supervisors(msg)
        if isinstance(msg, Retention):
            return self._configure_retention(msg, now)
        topic = getattr(msg, "topic", None)
        if topic is None:
            return []
        instance = self.instances.get(topic)
        if instance is None:
            return self._not_a_member(msg)
        if self.rehoming and isinstance(msg, SetData) and msg.label is not None:
            self.rehoming.pop(topic, None)  # the new owner configured us
        if isinstance(msg, SetData) and msg.label is None and topic in self.leaving:
            # Publications of ours whose commit is still running spread on the last arcs.
            last_view, last_targets = self._arc_view(topic), list(instance.contacts())
            released = instance.release()  # permission to leave (§4.1 step 4, Lemma 4.1)
            del self.instances[topic]
            self._arc_views.pop(topic, None)
            retired = self.publications.pop(topic, None)
            if retired is not None:
                self.retired_counters.update(retired.counters)
                retired.arc_view = lambda: last_view
                retired.flood_targets = lambda: last_targets
                self._retired[topic] = (retired, now + RETIRED_KEEP)
            self.leaving.discard(topic)
            return released
        if isinstance(msg, PUBLICATION_MESSAGES):
            core = self.anti_entropy(topic)
            if self.retention.windows and self.retention.due(topic, now):
                self.retention.advance(topic, core, now)  # never exchange past a due step
            return core.handle(msg)
        return instance.handle(msg)

    def _configure_retention(self, msg: Retention, now: float) -> list[Send]:
        """The supervisor's retention settings for a topic (`pubsub.skipring.retention`):
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

    def _not_a_member(self, msg: Message) -> list[Send]:
        if isinstance(msg, SetData):
            if msg.label is None:
                return []
            return [Send(self.owner_of(msg.topic), Unsubscribe(msg.topic, self.ref))]
        ref = _carried_ref(msg)
        topic = getattr(msg, "topic", None)
        if ref is None or ref == self.ref or not isinstance(topic, str):
            return []
        return [Send(ref, RemoveConnections(Topic(topic), self.ref))]

    def timeout(self, now: float) -> list[Effect]:
        """Timeout of every instance; leaving instances repeat their Unsubscribe.

        Each instance with a label also runs PublishTimeout (Alg. 5 l.1-4) with its ring
        neighbours as they stand after BuildSR's own Timeout.  Hand-overs whose step timed
        out start their next attempt (or fail, answering their client).  Publications the
        ordering held back and released now leave as a `Persist`.
        """
        if self._retired:
            for topic in [t for t, (_, until) in self._retired.items() if until <= now]:
                del self._retired[topic]
        return self._persisting(self._timeout(now), now)

    def _timeout(self, now: float) -> list[Effect]:
        sends: list[Effect] = self.publishing.timeout(now)
        if self.discover_supervisors:
            if self._ticks >= self._next_poll:
                sends.extend(self._ask_supervisors())
                self._next_poll = self._ticks + self._poll_every
                self._poll_every = min(2 * self._poll_every, POLL_MAX)
            self._ticks += 1
        for topic, target in list(self.rehoming.items()):
            if topic in self.instances and topic not in self.leaving and target == self.owner_of(topic):
                sends.append(Send(target, Subscribe(topic, self.ref)))
            else:
                del self.rehoming[topic]
        if self.retention.windows:  # retention first: prune before this round's exchange
            for topic, core in self.publications.items():
                self.retention.advance(topic, core, now)
        for topic, instance in self.instances.items():
            if topic in self.leaving:
                sends.append(Send(instance.supervisor, Unsubscribe(topic, self.ref)))
                if instance.label is None:
                    continue  # never re-subscribe a topic we are leaving
            sends.extend(instance.timeout(self.rng))
            if instance.label is not None:
                core = self.anti_entropy(topic)
                targets = anti_entropy_targets(instance, self.rng, core.eager) if len(core.trie) else []
                sends.extend(core.publish_timeout(targets))
        return sends

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
            if topic not in self.instances:
                raise KeyError(topic)
            core = self.publications[topic] = AntiEntropy(
                self.ref,
                topic,
                flooding=self.flooding,
                tree=self.dissemination == "tree",
                flood_targets=partial(self._flood_targets, topic),
                arc_view=partial(self._arc_view, topic),
                batch_bytes=self.publish_batch_bytes,
            )
            core.retention = self.retention.window(topic)
        return core

    def _arc_view(self, topic: Topic) -> ArcView | None:
        """Where we and our neighbours sit on the topic's ring (for the arc broadcast);
        None while we have no label.

        Every Spread asks, and the ring changes rarely: the view is made again only when
        the instance's label, ring contacts or shortcut table differ from those of the last
        view.  They are compared by value, the labels by their bit strings: a neighbour's
        periodic messages replace a contact by an equal new one, and comparing strings
        calls no Python code (the shortcut table keeps its label objects)."""
        instance = self.instances.get(topic)
        if instance is None or instance.label is None:
            return None
        left, right, ring = instance.left, instance.right, instance.ring
        shape = (
            instance,
            instance.label.bits,
            None if left is None else (left.label.bits, left.ref),
            None if right is None else (right.label.bits, right.ref),
            None if ring is None else (ring.label.bits, ring.ref),
            tuple(instance.shortcuts.items()),
        )
        cached = self._arc_views.get(topic)
        if cached is not None and cached[0] == shape:
            return cached[1]
        levels = instance.label.length
        neighbours: list[tuple[int, Ref]] = []
        for label, ref in instance.labelled_contacts():
            if ref != self.ref:
                neighbours.append((label.position, ref))
                levels = max(levels, label.length)
        view = ArcView(
            instance.label.position, levels, tuple(neighbours), instance.cyclic_right() is not None
        )
        self._arc_views[topic] = (shape, view)
        return view

    def _flood_targets(self, topic: Topic) -> Iterator[Ref]:
        """PublishNew goes to every ring and shortcut neighbour (§4.3: E_R ∪ E_S)."""
        instance = self.instances.get(topic)
        return iter(()) if instance is None else instance.contacts()

    def publish(self, topic: Topic, payload: bytes) -> list[Effect]:
        """Issue a publication on `topic` from this process (§4.2 and, if on, §4.3).

        ValueError if we do not run the topic or the payload is too large for a frame.
        """
        if not self.is_member(topic):
            raise ValueError(f"not subscribed to topic {topic!r}")
        return self._persisting(self.publish_publication(topic, self.issue(payload)), None)

    def is_member(self, topic: Topic) -> bool:
        """Whether we run `topic` and are not leaving it (publications may be stored here)."""
        return topic in self.instances and topic not in self.leaving

    def is_configured(self, topic: Topic) -> bool:
        """Whether we are a member of `topic` that holds a label from the supervisor: only
        then does a client's publication get stored here rather than handed over."""
        instance = self.instances.get(topic)
        return instance is not None and instance.label is not None and topic not in self.leaving

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
        """A client (token `client`) asks to publish (`pubsub.skipring.publishing`);
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
        (`AntiEntropy.spread_own`: the arcs computed once for all of them), also for a
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
        publisher's order (`pubsub.skipring.ordering`: a publication whose predecessor has
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
        """The runtime gave up on `ref`: forget it everywhere and hint the supervisor (§3.3)."""
        if ref == self.supervisor or ref in self.supervisors:
            # a supervisor: the supervisors judge each other; ask another for the live set
            if not self.discover_supervisors:
                return []
            self._poll_soon()
            return self._ask_supervisors()
        for instance in self.instances.values():
            instance.forget(ref)
        return [Send(s, SuspectCrash(ref)) for s in self.supervisors]

    # ------------------------------------------------------------------ inspection
    def status(self) -> dict[str, object]:
        """JSON-able state: per topic the BuildSR variables (README: `status --node`)."""
        topics: dict[str, object] = {}
        for topic, instance in sorted(self.instances.items()):
            entry = instance.status()
            entry["leaving"] = topic in self.leaving
            core = self.publications.get(topic)
            if core is not None:
                entry["publications"] = core.status()
            retention = self.retention.status(topic)
            if retention is not None:
                entry["retention"] = retention
            topics[topic] = entry
        body: dict[str, object] = {"ref": self.ref, "supervisor": self.supervisor, "topics": topics}
        if self._shards is not None:
            body["supervisors"] = {
                "live": list(self.supervisors),
                "owners": {t: self.owner_of(t) for t in sorted(self.instances)},
                "counters": dict(sorted(self.shard_counters.items())),
            }
        return body
