"""A skip-ring subscriber process without I/O: the shared publication layer over the skip ring.

`NodeCore` is `pubsub.publications.node.PublicationNode` over a
`pubsub.skipring.overlay.SkipRingOverlay` (one BuildSR instance per subscribed topic, paper
000 §4, with the sharded supervisors' discovery): the node core the daemon
(`pubsub.node.app`, through the mode registry) and the simulator (`pubsub.sim.world`)
build for the skip ring.  It adds nothing to either but the skip ring's fault injection
(`corrupt`, which the node daemon's ``corrupt_node`` admin action calls); the names below
let tests and the corruption tools reach the ring's state (``core.instances[topic]`` is the
topic's `SkipRingNode`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from pubsub.kernel.contracts import Corruption
from pubsub.kernel.message import Ref, Send, Topic
from pubsub.kernel.shards import Supervisors
from pubsub.publications.arcs import ArcView
from pubsub.publications.node import DISSEMINATIONS, PublicationNode
from pubsub.skipring.buildsr import SkipRingNode
from pubsub.skipring.corruption import corrupt_node
from pubsub.skipring.overlay import POLL_EVERY, POLL_MAX, SkipRingOverlay

__all__ = ["DISSEMINATIONS", "POLL_EVERY", "POLL_MAX", "NodeCore"]


class NodeCore(PublicationNode):
    """All BuildSR instances of one subscriber process, with their publications."""

    overlay: SkipRingOverlay

    def __init__(
        self, ref: Ref, supervisor: Ref, *, discover_supervisors: bool = False, **options: Any
    ) -> None:
        """`options`: the publication layer's (`PublicationNode`: rng, dissemination,
        batch and payload limits, hand-over, message-id and ordering settings)."""
        super().__init__(
            ref, SkipRingOverlay(ref, supervisor, discover_supervisors=discover_supervisors), **options
        )

    # ------------------------------------------------------------------ the ring's state
    @property
    def instances(self) -> dict[Topic, SkipRingNode]:
        """The BuildSR instance of every topic this process runs."""
        return self.overlay.instances

    @property
    def leaving(self) -> set[Topic]:
        return self.overlay.leaving

    @property
    def supervisor(self) -> Ref:
        return self.overlay.supervisor

    @property
    def supervisors(self) -> tuple[Ref, ...]:
        return self.overlay.supervisors

    @property
    def rehoming(self) -> dict[Topic, Ref]:
        return self.overlay.rehoming

    @property
    def _arc_views(self) -> dict[Topic, tuple[tuple[object, ...], ArcView]]:
        return self.overlay._arc_views

    def owner_of(self, topic: Topic) -> Ref:
        """The supervisor that owns `topic` as far as we know."""
        return self.overlay.owner_of(topic)

    def corrupt(
        self, topic: Topic | None, pool: Sequence[Ref] | None, rng: random.Random, junk: int
    ) -> Corruption:
        """Fault injection: an arbitrary BuildSR state for `topic` or every topic, and `junk`
        junk messages (`pubsub.skipring.corruption.corrupt_node`)."""
        return corrupt_node(self.ref, self.instances, self.supervisor, topic, pool, rng, junk)

    def adopt_supervisors(self, msg: Supervisors) -> list[Send]:
        """A live supervisor set (`SkipRingOverlay.adopt_supervisors`)."""
        return self.overlay.adopt_supervisors(msg)
