"""The message kinds every overlay's daemons speak, whatever the overlay.

The kernel's control messages (`pubsub.kernel.control`), supervisor sharding
(`pubsub.kernel.shards`), and the shared publication layer's messages
(`pubsub.publications.messages`, `pubsub.publications.retention`).  An overlay's
`kinds()` is these and its own (`pubsub.kernel.contracts.Overlay.kinds`); the runtime's
message and byte counters report each from the start.
"""

from __future__ import annotations

from pubsub.kernel import control, shards
from pubsub.kernel.message import kinds_of
from pubsub.publications import messages, retention

#: Sorted kinds of the messages every overlay's nodes and supervisors exchange.
SHARED_KINDS: tuple[str, ...] = kinds_of(control, shards, messages, retention)
