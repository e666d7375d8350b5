"""What the node daemon needs of a node core: `HostedNode` (issue 43, item 3).

The node daemon (`pubsub.node.app.NodeApp`), its retention keeper (`pubsub.node.retention`),
telemetry (`pubsub.node.telemetry`) and HTTP API (`pubsub.node.http`) reach the core only
through these members, whatever overlay it runs on;
`pubsub.publications.node.PublicationNode` is the one implementation (mypy checks that
it fulfils this, at the end of that module).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Protocol

from pubsub.kernel.effects import Effect
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.publications.messages import Publication, PublishRequest
from pubsub.publications.retention import Order, Policy


class HostedNode(Protocol):
    """A node core as the node daemon hosts it."""

    #: Largest payload a client may publish through this node.
    max_payload_bytes: int
    #: How new publications spread besides anti-entropy ("tree", "flood", "off").
    dissemination: str
    #: Sequence number of the next publication this node issues.
    next_seq: int

    @property
    def wanted_topics(self) -> set[Topic]: ...

    @property
    def flooding(self) -> bool: ...

    @property
    def dedupe_window(self) -> float: ...

    # ---------------------------------------------------------------- inputs
    def handle(self, msg: Message, now: float) -> Sequence[Effect]: ...

    def timeout(self, now: float) -> Sequence[Effect]: ...

    def publish_request(self, client: int, request: PublishRequest, published_ms: int, now: float) -> list[Effect]: ...

    def join(self, topic: Topic) -> list[Send]: ...

    def leave(self, topic: Topic) -> list[Send]: ...

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]: ...

    # ---------------------------------------------------------------- what the store brings back
    def attach_store(self, durable: bool, seq_reserved: int) -> None: ...

    def has_publication_core(self, topic: Topic) -> bool: ...

    def restore(self, topic: Topic, publications: Iterable[Publication]) -> int: ...

    def remember_message_id(self, topic: Topic, publication: Publication, now: float, expires: float) -> None: ...

    def load_retention(self, topic: Topic, policy: Policy, through: Order) -> None: ...

    def set_wall_offset(self, offset: float) -> None: ...

    def retention_changes(self) -> list[tuple[Topic, Policy, Order]]: ...

    def retention_unsaved(self, topic: Topic) -> None: ...

    # ---------------------------------------------------------------- inspection, admission
    def is_member(self, topic: Topic) -> bool: ...

    def admitted_supervisor(self, msg: Message, name: str) -> Ref: ...

    def status(self) -> dict[str, object]: ...

    def layer_status(self) -> dict[str, object]: ...

    def topic_counters(self, topic: Topic) -> Counter[str] | None: ...

    def publication_counters(self) -> Counter[str]: ...
