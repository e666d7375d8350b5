"""What the shared publication layer needs of an overlay, at one node (issue 43, item 3).

`NodeOverlay` is the contract: an overlay keeps, per topic, whether this node runs the
topic and whether it is configured there (holds its supervisor's word that it is a member),
the neighbours a publication is sent to, the view of the arc broadcast, the partners of
each anti-entropy round, its own messages and Timeouts, its status section, its admission
rules and its fault-injection actions.  `pubsub.publications.node.PublicationNode` drives
it; the skip ring (`pubsub.skipring.overlay.SkipRingOverlay`) is the first implementation,
the clique (`pubsub.clique`) the second.

An overlay's `handle` returns effects (`pubsub.kernel.effects`) and, when the overlay let go
of a topic it ran (the supervisor's permission to leave, paper 000 Lemma 4.1), a `Released`
value with the topic's last neighbours and arc view, so that publications of ours still
waiting for their commit spread on them.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from pubsub.kernel.effects import Effect
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.publications.arcs import ArcView


class Released(NamedTuple):
    """The overlay let go of `topic`: its neighbours and arc view as they last were."""

    topic: Topic
    neighbours: tuple[Ref, ...]
    arc_view: ArcView | None


class NodeOverlay(Protocol):
    """One node's overlay, all topics (module docstring)."""

    ref: Ref
    #: Topics this node should run (joined and not left); kept across restarts by the daemon.
    wanted_topics: set[Topic]

    # ---------------------------------------------------------------- membership
    def join(self, topic: Topic, rng: random.Random) -> list[Send]:
        """Start running `topic` (ask its supervisor)."""
        ...

    def leave(self, topic: Topic) -> list[Send]:
        """Stop running `topic` once its supervisor agrees (until then `runs` holds)."""
        ...

    def runs(self, topic: Topic) -> bool:
        """Whether this node runs `topic` (joined, possibly leaving): its publication core
        exists and takes the topic's publication messages."""
        ...

    def is_member(self, topic: Topic) -> bool:
        """Runs `topic` and is not leaving it."""
        ...

    def is_configured(self, topic: Topic) -> bool:
        """A member that holds its supervisor's configuration: only then does a client's
        publication get stored here rather than handed over."""
        ...

    def topics(self) -> Iterable[Topic]:
        """The topics this node runs, in a fixed order."""
        ...

    def owner_of(self, topic: Topic) -> Ref:
        """The supervisor responsible for `topic` (hand-overs ask it for a member)."""
        ...

    # ---------------------------------------------------------------- what publications travel on
    def neighbours(self, topic: Topic) -> Iterable[Ref]:
        """Where a flooded publication goes (paper 000 §4.3: every overlay neighbour)."""
        ...

    def arc_view(self, topic: Topic) -> ArcView | None:
        """This node and its neighbours on the topic's ring of positions, for the arc
        broadcast (`pubsub.publications.arcs`); None while the overlay cannot say (the
        publication layer floods then)."""
        ...

    def partners(self, topic: Topic, rng: random.Random, eager: bool) -> list[Ref]:
        """The partners of this Timeout's anti-entropy round (paper 000 Alg. 5 l.2)."""
        ...

    # ---------------------------------------------------------------- the overlay's own protocol
    def handle(self, msg: Message, now: float, rng: random.Random) -> Sequence[Effect | Released]:
        """One of the overlay's own messages."""
        ...

    def refuses(self, msg: Message) -> list[Send] | None:
        """A publication message for a topic this node runs, from a sender the overlay
        does not admit there: the refusal to send (None: admitted).  The publication
        layer keeps the publications such a message carries."""
        ...

    def not_a_member(self, msg: Message) -> list[Send]:
        """A publication message for a topic this node does not run: what to answer."""
        ...

    def timeout(self, now: float) -> list[Send]:
        """The overlay's Timeout work that concerns no single topic (before the topics')."""
        ...

    def topic_timeout(self, topic: Topic, rng: random.Random) -> list[Send]:
        """One topic's Timeout (before that topic's anti-entropy round)."""
        ...

    def exchanges(self, topic: Topic) -> bool:
        """Whether this node takes part in the topic's anti-entropy rounds now (a member
        its supervisor configured, also while it is leaving)."""
        ...

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        """The runtime gave up on `ref`."""
        ...

    # ---------------------------------------------------------------- inspection, admission
    def status(self) -> dict[str, object]:
        """JSON-able state: ``ref``, ``supervisor``, ``topics`` (one entry per topic run,
        which the publication layer completes) and whatever else the overlay reports."""
        ...

    def admitted_supervisor(self, msg: Message, name: str) -> Ref:
        """With TLS: the one supervisor whose `msg` this node accepts."""
        ...
