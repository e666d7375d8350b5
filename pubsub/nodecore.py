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

The daemon (`pubsub.node`) and the simulator (`pubsub.sim`) drive this same class.
"""

from __future__ import annotations

import random

from pubsub.messages import (
    Check,
    Introduce,
    IntroduceShortcut,
    Linearize,
    Message,
    Ping,
    Pong,
    Ref,
    RemoveConnections,
    Send,
    SetData,
    SuspectCrash,
    Topic,
    Unsubscribe,
)
from pubsub.skipring import SkipRingNode


def _carried_ref(msg: Message) -> Ref | None:
    """The node a BuildSR message speaks for, to tell it we are not in that ring."""
    if isinstance(msg, (Introduce, Linearize, IntroduceShortcut)):
        return msg.contact.ref
    if isinstance(msg, Check):
        return msg.sender.ref
    return None


class NodeCore:
    """All BuildSR instances of one subscriber process."""

    def __init__(self, ref: Ref, supervisor: Ref, *, rng: random.Random) -> None:
        self.ref = ref
        self.supervisor = supervisor
        self.rng = rng
        self.instances: dict[Topic, SkipRingNode] = {}
        self.wanted_topics: set[Topic] = set()
        self.leaving: set[Topic] = set()

    # ------------------------------------------------------------------ client intents
    def join(self, topic: Topic) -> list[Send]:
        """Subscribe this process to `topic` (its instance asks the supervisor on Timeout)."""
        self.wanted_topics.add(topic)
        self.leaving.discard(topic)
        instance = self.instances.get(topic)
        if instance is None:
            instance = self.instances[topic] = SkipRingNode(self.ref, topic, self.supervisor)
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
    def handle(self, msg: Message, now: float) -> list[Send]:
        """Dispatch one protocol message."""
        if isinstance(msg, Ping):
            return [Send(self.supervisor, Pong(msg.nonce, self.ref))]
        topic = getattr(msg, "topic", None)
        if topic is None:
            return []
        instance = self.instances.get(topic)
        if instance is None:
            return self._not_a_member(msg)
        if isinstance(msg, SetData) and msg.label is None and topic in self.leaving:
            sends = instance.release()  # permission to leave (§4.1 step 4, Lemma 4.1)
            del self.instances[topic]
            self.leaving.discard(topic)
            return sends
        return instance.handle(msg)

    def _not_a_member(self, msg: Message) -> list[Send]:
        if isinstance(msg, SetData):
            if msg.label is None:
                return []
            return [Send(self.supervisor, Unsubscribe(msg.topic, self.ref))]
        ref = _carried_ref(msg)
        if ref is None or ref == self.ref:
            return []
        return [Send(ref, RemoveConnections(msg.topic, self.ref))]  # type: ignore[attr-defined]

    def timeout(self, now: float) -> list[Send]:
        """Timeout of every instance; leaving instances repeat their Unsubscribe."""
        sends: list[Send] = []
        for topic, instance in self.instances.items():
            if topic in self.leaving:
                sends.append(Send(self.supervisor, Unsubscribe(topic, self.ref)))
                if instance.label is None:
                    continue  # never re-subscribe a topic we are leaving
            sends.extend(instance.timeout(self.rng))
        return sends

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
            topics[topic] = entry
        return {"ref": self.ref, "supervisor": self.supervisor, "topics": topics}
