"""Network faults an operator injects through the admin listener (`pubsub.runtime.admin`):
dropped fractions of outgoing peer frames and partitions, applied by the runtime."""

from __future__ import annotations

import random

from pubsub.kernel.message import Ref


class NetworkFaults:
    """Network faults injected by an operator (`pubsub.runtime.admin`), each until a deadline on the
    runtime's clock: drop a fraction of the outgoing peer frames, or drop every peer frame
    to or from a reference outside `partition` (this side of a partition).  Frames are
    discarded where the core's sends enter the runtime and where received frames leave it;
    TCP connections stay up, local deliveries and client connections are never touched."""

    def __init__(self) -> None:
        self.drop_fraction = 0.0
        self.drop_until = 0.0
        self.partition: frozenset[Ref] = frozenset()
        self.partition_until = 0.0

    @property
    def armed(self) -> bool:
        """Whether any fault was ever set (the runtime skips every check otherwise)."""
        return bool(self.drop_until or self.partition_until)

    def outgoing(self, dest: Ref, now: float, rng: random.Random) -> str | None:
        """Why a frame to `dest` must be discarded now ("partition", "drop"), or None."""
        if self.partition_until > now and dest not in self.partition:
            return "partition"
        if self.drop_until > now and rng.random() < self.drop_fraction:
            return "drop"
        return None

    def incoming(self, src: Ref, now: float) -> str | None:
        """Why a frame from `src` must be discarded now ("partition"), or None."""
        if self.partition_until > now and src not in self.partition:
            return "partition"
        return None
