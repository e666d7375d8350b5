"""The skip ring as an overlay of the shared publication layer (paper 000, §4 and §4.1).

`SkipRingOverlay` implements `pubsub.publications.overlay.NodeOverlay` with one BuildSR
instance (`SkipRingNode`) per topic, and the parts of §4 and §4.1 that sit above a single
ring:

* join: start a BuildSR instance for the topic (it asks the supervisor to Subscribe);
* leave: keep running until the supervisor grants permission (SetData with ⊥, Lemma 4.1),
  then release every connection and delete the instance (`Released`: publications of ours
  whose commit is still running spread on the last arcs).  Until then Unsubscribe is
  repeated every Timeout, so a lost request cannot strand the node;
* a message for a topic this node does not run is answered with RemoveConnections, so
  stale neighbours forget us (Lemma 4.1); a configuration for such a topic is answered with
  Unsubscribe so that the supervisor's database forgets us too;
* a peer the runtime cannot reach is dropped from every instance and reported to the
  supervisor, which verifies the report before removing anyone (§3.3);
* what publications travel on: the flood targets are the instance's contacts (ring
  neighbours and shortcuts, E_R and E_S, §4.3), the arc view is the ring of labels
  (`pubsub.publications.arcs`), and anti-entropy's partners are chosen by
  `pubsub.skipring.partners` (a level partner or a ring neighbour).

Sharded supervisors (`pubsub.kernel.shards`, issue 14 item 4): with
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
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence

from pubsub.kernel.effects import Effect
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.kernel.shards import GetSupervisors, HashRing, Supervisors, ring_of
from pubsub.publications.arcs import ArcView
from pubsub.publications.messages import CheckAndPublish, CheckTrie
from pubsub.publications.overlay import Released
from pubsub.skipring.buildsr import SkipRingNode
from pubsub.skipring.messages import (
    Check,
    Delegate,
    Introduce,
    IntroduceShortcut,
    Linearize,
    Ping,
    Pong,
    RemoveConnections,
    SetData,
    Subscribe,
    SuspectCrash,
    Unsubscribe,
)
from pubsub.skipring.partners import anti_entropy_targets

#: With supervisor discovery: Timeouts between two questions for the live supervisor set,
#: at first and again after the set changed or a supervisor became unreachable; every
#: question doubles the gap up to `POLL_MAX` (about 5 s at the default 0.3 s interval),
#: so that with a stable set 100 nodes ask about 20 times per second in all instead of
#: about 170.  Changes reach members at once anyway (a supervisor tells the members of its
#: topics); the questions are the fallback.
POLL_EVERY = 2
POLL_MAX = 16


def _carried_ref(msg: Message) -> Ref | None:
    """The node a BuildSR message speaks for, to tell it we are not in that ring."""
    if isinstance(msg, (Introduce, Linearize, IntroduceShortcut, Delegate)):
        return msg.contact.ref
    if isinstance(msg, Check):
        return msg.sender.ref
    if isinstance(msg, (CheckTrie, CheckAndPublish)):
        return msg.sender  # a peer that thinks we are its ring neighbour
    return None


class SkipRingOverlay:
    """All BuildSR instances of one subscriber process (module docstring)."""

    def __init__(self, ref: Ref, supervisor: Ref, *, discover_supervisors: bool = False) -> None:
        self.ref = ref
        #: The one supervisor address we were given (every topic's owner until we learn
        #: the live supervisor set, module docstring).
        self.supervisor = supervisor
        #: Whether we ask for the live supervisor set (`pubsub.kernel.shards`).
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
        self.instances: dict[Topic, SkipRingNode] = {}
        #: The last arc view of each topic and the ring state it was made from (`arc_view`).
        self._arc_views: dict[Topic, tuple[tuple[object, ...], ArcView]] = {}
        self.wanted_topics: set[Topic] = set()
        self.leaving: set[Topic] = set()

    # ------------------------------------------------------------------ membership
    def join(self, topic: Topic, rng: random.Random) -> list[Send]:
        """Subscribe this process to `topic` (its instance asks the supervisor on Timeout)."""
        self.wanted_topics.add(topic)
        self.leaving.discard(topic)
        instance = self.instances.get(topic)
        if instance is None:
            instance = self.instances[topic] = SkipRingNode(self.ref, topic, self.owner_of(topic))
        if instance.label is None:
            return instance.timeout(rng)  # Subscribe right away rather than next tick
        return []

    def leave(self, topic: Topic) -> list[Send]:
        """Unsubscribe from `topic`; the instance lives on until the supervisor agrees."""
        self.wanted_topics.discard(topic)
        if topic not in self.instances:
            return []
        self.leaving.add(topic)
        return [Send(self.owner_of(topic), Unsubscribe(topic, self.ref))]

    def runs(self, topic: Topic) -> bool:
        return topic in self.instances

    def is_member(self, topic: Topic) -> bool:
        """Whether we run `topic` and are not leaving it (publications may be stored here)."""
        return topic in self.instances and topic not in self.leaving

    def is_configured(self, topic: Topic) -> bool:
        """Whether we are a member of `topic` that holds a label from the supervisor."""
        instance = self.instances.get(topic)
        return instance is not None and instance.label is not None and topic not in self.leaving

    def topics(self) -> Iterator[Topic]:
        return iter(list(self.instances))

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
    def handle(self, msg: Message, now: float, rng: random.Random) -> Sequence[Effect | Released]:
        """A BuildSR or supervisor message (the publication layer took its own)."""
        if isinstance(msg, Ping):  # from whichever live supervisor suspects us
            return [Send(s, Pong(msg.nonce, self.ref)) for s in self.supervisors]
        if isinstance(msg, Supervisors):
            return self.adopt_supervisors(msg)
        topic = getattr(msg, "topic", None)
        if topic is None:
            return []
        instance = self.instances.get(topic)
        if instance is None:
            return self.not_a_member(msg)
        if self.rehoming and isinstance(msg, SetData) and msg.label is not None:
            self.rehoming.pop(topic, None)  # the new owner configured us
        if isinstance(msg, SetData) and msg.label is None and topic in self.leaving:
            released = Released(topic, tuple(instance.contacts()), self.arc_view(topic))
            sends: list[Effect | Released] = [*instance.release()]  # permission to leave (§4.1 step 4, Lemma 4.1)
            del self.instances[topic]
            self._arc_views.pop(topic, None)
            self.leaving.discard(topic)
            sends.append(released)
            return sends
        return instance.handle(msg)

    def refuses(self, msg: Message) -> list[Send] | None:
        """Every sender is admitted: partners and spreads come from any member of the ring
        (paper 000 Alg. 5)."""
        return None

    def not_a_member(self, msg: Message) -> list[Send]:
        if isinstance(msg, SetData):
            if msg.label is None:
                return []
            return [Send(self.owner_of(msg.topic), Unsubscribe(msg.topic, self.ref))]
        ref = _carried_ref(msg)
        topic = getattr(msg, "topic", None)
        if ref is None or ref == self.ref or not isinstance(topic, str):
            return []
        return [Send(ref, RemoveConnections(Topic(topic), self.ref))]

    def timeout(self, now: float) -> list[Send]:
        """Ask for the live supervisor set when due; Subscribe again where the owner changed."""
        sends: list[Send] = []
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
        return sends

    def topic_timeout(self, topic: Topic, rng: random.Random) -> list[Send]:
        """BuildSR's Timeout (Alg. 1 BuildList / Alg. 2 BuildRing); a leaving instance
        repeats its Unsubscribe and never re-subscribes."""
        instance = self.instances[topic]
        sends: list[Send] = []
        if topic in self.leaving:
            sends.append(Send(instance.supervisor, Unsubscribe(topic, self.ref)))
            if instance.label is None:
                return sends
        sends.extend(instance.timeout(rng))
        return sends

    def exchanges(self, topic: Topic) -> bool:
        """Alg. 5 runs at every instance with a label (also while leaving)."""
        instance = self.instances.get(topic)
        return instance is not None and instance.label is not None

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

    # ------------------------------------------------------------------ what publications travel on
    def neighbours(self, topic: Topic) -> Iterator[Ref]:
        """PublishNew goes to every ring and shortcut neighbour (§4.3: E_R ∪ E_S)."""
        instance = self.instances.get(topic)
        return iter(()) if instance is None else instance.contacts()

    def partners(self, topic: Topic, rng: random.Random, eager: bool) -> list[Ref]:
        """A level partner or a ring neighbour (`pubsub.skipring.partners`)."""
        return anti_entropy_targets(self.instances[topic], rng, eager)

    def arc_view(self, topic: Topic) -> ArcView | None:
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

    # ------------------------------------------------------------------ inspection
    def status(self) -> dict[str, object]:
        """JSON-able state: per topic the BuildSR variables (README: `status --node`)."""
        topics: dict[str, object] = {}
        for topic, instance in sorted(self.instances.items()):
            entry = instance.status()
            entry["leaving"] = topic in self.leaving
            topics[topic] = entry
        body: dict[str, object] = {"ref": self.ref, "supervisor": self.supervisor, "topics": topics}
        if self._shards is not None:
            body["supervisors"] = {
                "live": list(self.supervisors),
                "owners": {t: self.owner_of(t) for t in sorted(self.instances)},
                "counters": dict(sorted(self.shard_counters.items())),
            }
        return body
