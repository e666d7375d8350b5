"""A skip-ring subscriber process without I/O: the shared publication layer over the skip ring.

`NodeCore` is `pubsub.publications.node.PublicationNode` over a
`pubsub.skipring.overlay.SkipRingOverlay` (one BuildSR instance per subscribed topic, paper
000 §4, with the sharded supervisors' discovery): the node core the daemon
(`pubsub.node.app`, through the mode registry) and the simulator (`pubsub.sim.world`)
build for the skip ring.  It adds nothing to either; the names below let tests and the
corruption tools reach the ring's state as before (``core.instances[topic]`` is the
topic's `SkipRingNode`).
"""

from __future__ import annotations

import random

from pubsub.kernel.message import Ref, Send, Topic
from pubsub.publications.node import DISSEMINATIONS, PublicationNode
from pubsub.skipring.antientropy import DEFAULT_BATCH_BYTES
from pubsub.skipring.arcs import ArcView
from pubsub.skipring.buildsr import SkipRingNode
from pubsub.skipring.handover import DEFAULT_ATTEMPTS, DEFAULT_STEP_TIMEOUT
from pubsub.skipring.ordering import DEFAULT_MAX_WAIT, DEFAULT_WAIT
from pubsub.skipring.overlay import POLL_EVERY, POLL_MAX, SkipRingOverlay
from pubsub.skipring.publishing import DEFAULT_LIMIT, DEFAULT_WINDOW
from pubsub.skipring.shards import Supervisors
from pubsub.kernel.wire import MAX_PAYLOAD_BYTES

__all__ = ["DISSEMINATIONS", "POLL_EVERY", "POLL_MAX", "NodeCore"]


class NodeCore(PublicationNode):
    """All BuildSR instances of one subscriber process, with their publications."""

    overlay: SkipRingOverlay

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
        super().__init__(
            ref,
            SkipRingOverlay(ref, supervisor, discover_supervisors=discover_supervisors),
            rng=rng,
            flooding=flooding,
            dissemination=dissemination,
            publish_batch_bytes=publish_batch_bytes,
            max_payload_bytes=max_payload_bytes,
            handover_timeout=handover_timeout,
            handover_attempts=handover_attempts,
            dedupe_window=dedupe_window,
            dedupe_limit=dedupe_limit,
            order_wait=order_wait,
            order_max_wait=order_max_wait,
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

    def adopt_supervisors(self, msg: Supervisors) -> list[Send]:
        """A live supervisor set (`SkipRingOverlay.adopt_supervisors`)."""
        return self.overlay.adopt_supervisors(msg)
