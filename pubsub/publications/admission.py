"""Who may send what, with TLS, for an overlay with one supervisor that configures its
nodes (the clique's and `tco`'s rules; the skip ring states its own,
`pubsub.skipring.admission`).

* At a node, what the supervisor configures (the overlay's tables and probes) and what the
  publication layer takes from the supervisor (`MemberIs`, `Retention`) come only from the
  node's supervisor; everything else (anti-entropy, publications, hand-overs, the overlay's
  messages between nodes) only from other nodes.
* At the supervisor, everything comes from nodes only, and what names its sender in
  ``ref`` only from that node.

An overlay names its message classes in a `Rules` value and hands out its two methods.
"""

from __future__ import annotations

from dataclasses import dataclass

from pubsub.kernel.message import Message
from pubsub.publications.messages import MemberIs
from pubsub.publications.retention import Retention


@dataclass(frozen=True)
class Rules:
    """An overlay's messages by sender: `from_supervisor` (besides MemberIs and Retention)
    a node takes from its supervisor only; `names_sender`, messages whose ``ref`` (or, without
    one, ``sender``) names the node that sends them (checked at the supervisor and at nodes)."""

    from_supervisor: tuple[type[Message], ...]
    names_sender: tuple[type[Message], ...]

    def node_admits(self, msg: Message, role: str, name: str, supervisor: object) -> str | None:
        """Why a node whose supervisor is `supervisor` refuses `msg` from `role` `name`, or None."""
        if isinstance(msg, (*self.from_supervisor, MemberIs, Retention)):
            if role == "supervisor" and name == supervisor:
                return None
            return f"{msg.kind} is accepted only from the supervisor {supervisor}, not from {role} {name}"
        if role != "node":
            return f"{msg.kind} is accepted only from nodes, not from {role} {name}"
        return self._named(msg, name)

    def supervisor_admits(self, msg: Message, role: str, name: str) -> str | None:
        """Why the supervisor refuses `msg` from `role` `name`, or None."""
        if role != "node":
            return f"{msg.kind} is accepted only from nodes, not from {role} {name}"
        return self._named(msg, name)

    def _named(self, msg: Message, name: str) -> str | None:
        if not isinstance(msg, self.names_sender):
            return None
        ref = getattr(msg, "ref", None) or getattr(msg, "sender", None)
        if ref is not None and ref != name:
            return f"{msg.kind} for {ref} is accepted only from {ref}, not from {name}"
        return None
