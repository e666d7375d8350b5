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
to a random ring neighbour (cyclic left or right), and its flood targets are the
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

The daemon (`pubsub.node.app`) and the simulator (`pubsub.sim`) drive this same class.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from pubsub.kernel.effects import Answer, Effect, Persist
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.skipring.arcs import ArcView, position
from pubsub.skipring.antientropy import (
    DEFAULT_BATCH_BYTES,
    HANDOVER,
    LOCAL,
    AntiEntropy,
    Arrival,
    make_publication,
)
from pubsub.skipring.handover import DEFAULT_ATTEMPTS, DEFAULT_STEP_TIMEOUT, HandOverClient
from pubsub.skipring.messages import (
    Check,
    CheckAndPublish,
    CheckTrie,
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
    PublishAck,
    PublishFailed,
    PublishRequest,
    RemoveConnections,
    SetData,
    SuspectCrash,
    Unsubscribe,
)
from pubsub.skipring.buildsr import SkipRingNode
from pubsub.kernel.wire import MAX_PAYLOAD_BYTES


#: How new publications may spread besides anti-entropy.
DISSEMINATIONS = ("tree", "flood", "off")


def _carried_ref(msg: Message) -> Ref | None:
    """The node a BuildSR message speaks for, to tell it we are not in that ring."""
    if isinstance(msg, (Introduce, Linearize, IntroduceShortcut)):
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
    ) -> None:
        self.ref = ref
        self.supervisor = supervisor
        self.rng = rng
        self.instances: dict[Topic, SkipRingNode] = {}
        self.publications: dict[Topic, AntiEntropy] = {}
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
        #: Publishing decisions: hand-overs started, succeeded and received.
        self.publishing: Counter[str] = Counter()
        self._clients: dict[int, tuple[int, int]] = {}  # hand-over -> (client token, request id)

    # ------------------------------------------------------------------ client intents
    def join(self, topic: Topic) -> list[Send]:
        """Subscribe this process to `topic` (its instance asks the supervisor on Timeout)."""
        self.wanted_topics.add(topic)
        self.leaving.discard(topic)
        instance = self.instances.get(topic)
        if instance is None:
            instance = self.instances[topic] = SkipRingNode(self.ref, topic, self.supervisor)
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
        return [Send(self.supervisor, Unsubscribe(topic, self.ref))]

    # ------------------------------------------------------------------ protocol
    def handle(self, msg: Message, now: float) -> Sequence[Effect]:
        """Dispatch one protocol message."""
        if isinstance(msg, (MemberIs, HandOverAck)):
            return [*self.handover.handle(msg, now), *self._answer_handovers()]
        if isinstance(msg, HandOver):
            return self._accept_handover(msg)
        if isinstance(msg, Ping):
            return [Send(self.supervisor, Pong(msg.nonce, self.ref))]
        topic = getattr(msg, "topic", None)
        if topic is None:
            return []
        instance = self.instances.get(topic)
        if instance is None:
            return self._not_a_member(msg)
        if isinstance(msg, SetData) and msg.label is None and topic in self.leaving:
            released = instance.release()  # permission to leave (§4.1 step 4, Lemma 4.1)
            del self.instances[topic]
            retired = self.publications.pop(topic, None)
            if retired is not None:
                self.retired_counters.update(retired.counters)
            self.leaving.discard(topic)
            return released
        if isinstance(msg, PUBLICATION_MESSAGES):
            return self.anti_entropy(topic).handle(msg)
        return instance.handle(msg)

    def _not_a_member(self, msg: Message) -> list[Send]:
        if isinstance(msg, SetData):
            if msg.label is None:
                return []
            return [Send(self.supervisor, Unsubscribe(msg.topic, self.ref))]
        ref = _carried_ref(msg)
        topic = getattr(msg, "topic", None)
        if ref is None or ref == self.ref or not isinstance(topic, str):
            return []
        return [Send(ref, RemoveConnections(Topic(topic), self.ref))]

    def timeout(self, now: float) -> list[Effect]:
        """Timeout of every instance; leaving instances repeat their Unsubscribe.

        Each instance with a label also runs PublishTimeout (Alg. 5 l.1-4) with its ring
        neighbours as they stand after BuildSR's own Timeout.  Hand-overs whose step timed
        out start their next attempt (or fail, answering their client).
        """
        sends: list[Effect] = [*self.handover.timeout(now), *self._answer_handovers()]
        for topic, instance in self.instances.items():
            if topic in self.leaving:
                sends.append(Send(self.supervisor, Unsubscribe(topic, self.ref)))
                if instance.label is None:
                    continue  # never re-subscribe a topic we are leaving
            sends.extend(instance.timeout(self.rng))
            if instance.label is not None:
                ring = [c.ref for c in (instance.cyclic_left(), instance.cyclic_right()) if c]
                sends.extend(self.anti_entropy(topic).publish_timeout(self.rng, ring))
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
                flood_targets=lambda: self._flood_targets(topic),
                arc_view=lambda: self._arc_view(topic),
                batch_bytes=self.publish_batch_bytes,
            )
        return core

    def _arc_view(self, topic: Topic) -> ArcView | None:
        """Where we and our neighbours sit on the topic's ring (for the arc broadcast);
        None while we have no label."""
        instance = self.instances.get(topic)
        if instance is None or instance.label is None:
            return None
        levels = instance.label.length
        neighbours: list[tuple[int, Ref]] = []
        for label, ref in instance.labelled_contacts():
            if ref != self.ref:
                neighbours.append((position(label), ref))
                levels = max(levels, label.length)
        return ArcView(
            position(instance.label), levels, tuple(neighbours), instance.cyclic_right() is not None
        )

    def _flood_targets(self, topic: Topic) -> Iterator[Ref]:
        """PublishNew goes to every ring and shortcut neighbour (§4.3: E_R ∪ E_S)."""
        instance = self.instances.get(topic)
        return iter(()) if instance is None else instance.contacts()

    def publish(self, topic: Topic, payload: bytes) -> list[Send]:
        """Issue a publication on `topic` from this process (§4.2 and, if on, §4.3).

        ValueError if we do not run the topic or the payload is too large for a frame.
        """
        if not self.is_member(topic):
            raise ValueError(f"not subscribed to topic {topic!r}")
        return self.publish_publication(topic, self.issue(payload))

    def is_member(self, topic: Topic) -> bool:
        """Whether we run `topic` and are not leaving it (publications may be stored here)."""
        return topic in self.instances and topic not in self.leaving

    def issue(self, payload: bytes, published_ms: int = 0) -> Publication:
        """A new publication of this process: the next sequence number, not stored anywhere.

        `published_ms` is the time it was accepted (the daemon passes its wall clock; the
        core reads no clock).  ValueError if the payload is too large for a frame.
        """
        if len(payload) > MAX_PAYLOAD_BYTES:
            raise ValueError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD_BYTES}")
        publication = make_publication(self.ref, self.next_seq, bytes(payload), published_ms)
        self.next_seq += 1
        return publication

    def publish_publication(
        self, topic: Topic, publication: Publication, via: str = LOCAL
    ) -> list[Send]:
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
        """A client (token `client`) asks to publish: refuse an oversize payload; as a
        member, store the publication and acknowledge it once durable, then flood; else
        hand it over to a member.  `published_ms` is the wall clock the daemon read."""
        size = len(request.payload)
        if size > self.max_payload_bytes:
            return [
                Answer(
                    client,
                    PublishFailed(
                        request.id,
                        "payload_too_large",
                        f"payload of {size} bytes exceeds this node's limit of "
                        f"{self.max_payload_bytes} bytes (PUBSUB_MAX_PAYLOAD_BYTES)",
                    ),
                )
            ]
        publication = self.issue(request.payload, published_ms=published_ms)
        topic = request.topic
        if not self.is_member(topic):
            number, sends = self.handover.start(topic, publication, now)
            self._clients[number] = (client, request.id)
            self.publishing["handovers_started"] += 1
            return list(sends)
        floods = self.publish_publication(topic, publication)
        ack = PublishAck(
            request.id, topic, publication.publisher, publication.seq, publication.key, self.ref, None
        )
        failed = PublishFailed(
            request.id, "store_error", "the publication could not be written to the store"
        )
        return [Persist(then=(Answer(client, ack), *floods), otherwise=(Answer(client, failed),))]

    def _accept_handover(self, msg: HandOver) -> list[Effect]:
        """A non-member hands a publication to us: store it, and once it is durable answer
        HandOverAck(ok) and flood it."""
        self.publishing["handovers_received"] += 1

        def ack(ok: bool, code: str = "") -> Send:
            return Send(msg.sender, HandOverAck(msg.topic, self.ref, msg.request, ok, code))

        if not self.is_member(msg.topic):
            return [ack(False, "not_member")]
        floods = self.publish_publication(msg.topic, msg.publication, via=HANDOVER)
        if not self.holds(msg.topic, msg.publication):
            return [ack(False, "bad_publication")]
        return [Persist(then=(ack(True), *floods), otherwise=(ack(False, "store_error"),))]

    def _answer_handovers(self) -> list[Effect]:
        """Answer the clients of the hand-overs that ended."""
        answers: list[Effect] = []
        for outcome in self.handover.drain_outcomes():
            waiting = self._clients.pop(outcome.request, None)
            if waiting is None:
                continue
            client, request_id = waiting
            p = outcome.publication
            if outcome.ok and outcome.member is not None:
                self.publishing["handovers_succeeded"] += 1
                ack = PublishAck(request_id, outcome.topic, p.publisher, p.seq, p.key, outcome.member, None)
                answers.append(Answer(client, ack))
            else:
                answers.append(Answer(client, PublishFailed(request_id, outcome.code, outcome.detail)))
        return answers

    def holds(self, topic: Topic, publication: Publication) -> bool:
        """Whether the topic's trie holds `publication`."""
        core = self.publications.get(topic)
        return core is not None and core.holds(publication)

    def restore(self, topic: Topic, publications: Iterable[Publication]) -> int:
        """Refill a topic we run from storage; returns how many were new to its trie.

        They are not reported by `drain_arrivals` (they are stored already).
        """
        return self.anti_entropy(topic).restore(publications)

    def drain_arrivals(self) -> list[tuple[Topic, Arrival]]:
        """Publications stored since the last call, per topic, in arrival order."""
        out: list[tuple[Topic, Arrival]] = []
        for topic, core in self.publications.items():
            out.extend((topic, arrival) for arrival in core.drain_new())
        return out

    def publication_counters(self) -> Counter[str]:
        """The publication cores' counters summed over every topic since the start, those
        of topics already left included (never decreases)."""
        total = Counter(self.retired_counters)
        for core in self.publications.values():
            total.update(core.counters)
        return total

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        """The runtime gave up on `ref`: forget it everywhere and hint the supervisor (§3.3)."""
        if ref == self.supervisor:
            return []
        for instance in self.instances.values():
            instance.forget(ref)
        return [Send(self.supervisor, SuspectCrash(ref))]

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
            topics[topic] = entry
        return {"ref": self.ref, "supervisor": self.supervisor, "topics": topics}
