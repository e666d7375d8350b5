"""What the broker simulator (`broker.sim`) keeps per link and per client operation, and
its error."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from broker.cores.topology import BrokerId
from pubsub.kernel.message import Message


class SimError(RuntimeError):
    """Misuse of the simulator (unknown client, broker or link)."""


@dataclass
class Link:
    """One directed link (src -> dst) with its output queue at src."""

    src: BrokerId
    dst: BrokerId
    bandwidth: float | None  # units per second; None: transmission takes no time
    propagation: float
    queue: deque[tuple[Message, float, int]] = field(default_factory=deque)  # (msg, size, origin)
    busy: bool = False
    last_arrival: float = 0.0
    window_in: int = 0
    window_out: int = 0
    total_in: int = 0
    total_out: int = 0
    max_len: int = 0

    @property
    def queue_len(self) -> int:
        """Q_l: waiting messages plus the one on the wire (still the queue's head)."""
        return len(self.queue)


@dataclass
class OpStat:
    """One client operation: when it started, when the last message it caused was handled,
    and how many inter-broker messages it caused."""

    kind: str
    client: str
    start: float
    end: float
    messages: int = 0

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Delivery:
    client: str
    time: float
    sub_ids: tuple[str, ...]
