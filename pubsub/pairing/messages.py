"""The pairing protocol's messages (paper 004, §2 and §3.1.1).

§2 writes a message as (s, t, σ) or (s, t, σ, U): sender, receiver, type, and at most a few
identifiers.  The pairing needs one identifier, in the pair message of line 3 (the partner
the receiver is paired with).  The kinds are the ones the copy names:

* ``probe`` (line 2) and its replies ``accept`` / ``reject`` (the probe daemon);
* ``pair`` and ``no_pair`` (line 3), the notices a predecessor sends its successors;
* ``propose`` (line 5) and its replies ``accept``, ``reject_propose`` and ``paired``.

As in the copy, one ``accept`` kind answers both a probe and a proposal; the receiver tells
them apart by what its main thread is waiting for (`pubsub.pairing.protocol`).

These are plain values, not wire kinds of `pubsub.kernel`: only the simulator speaks this
protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

#: A node's identity.  The simulator numbers its nodes; the copy's identities are W-bit
#: strings, which only §3.2 (not built) looks inside.
NodeId = int


class Kind(Enum):
    """σ, the type of a message."""

    PROBE = "probe"
    ACCEPT = "accept"
    REJECT = "reject"
    PAIR = "pair"
    NO_PAIR = "no_pair"
    PROPOSE = "propose"
    REJECT_PROPOSE = "reject_propose"
    PAIRED = "paired"


@dataclass(frozen=True, slots=True)
class Message:
    """(sender, receiver, kind) or, for ``pair``, (sender, receiver, kind, about)."""

    sender: NodeId
    receiver: NodeId
    kind: Kind
    about: NodeId | None = None

    def identities(self) -> tuple[NodeId, ...]:
        """The identities the message shows its receiver (§2: the receiver learns them)."""
        return (self.sender,) if self.about is None else (self.sender, self.about)
