"""Which peer may send which clique message, by the identity its TLS certificate names
(as `pubsub.skipring.admission` states it for the skip ring).

* At a node, configurations and probes (`CliqueMembers`, `CliquePing`) and what the
  publication layer takes from the supervisor (`MemberIs`, `Retention`) come only from the
  node's supervisor; everything else (anti-entropy, publications, hand-overs) only from
  other nodes.
* At the supervisor, everything comes from nodes only, and what names its sender
  (`CliqueJoin`, `CliqueLeave`, `CliquePong` for ``ref``, `CliqueSuspect` from ``ref``)
  only from that node.
"""

from __future__ import annotations

from pubsub.clique.messages import CliqueJoin, CliqueLeave, CliqueMembers, CliquePing, CliquePong, CliqueSuspect
from pubsub.kernel.message import Message
from pubsub.publications.messages import MemberIs
from pubsub.publications.retention import Retention

#: Messages a node accepts from its supervisor only.
FROM_SUPERVISOR = (CliqueMembers, CliquePing, MemberIs, Retention)
#: Supervisor messages that name their sender in ``ref``.
NAMES_SENDER = (CliqueJoin, CliqueLeave, CliquePong, CliqueSuspect)


def node_admits(msg: Message, role: str, name: str, supervisor: object) -> str | None:
    """Why a node whose supervisor is `supervisor` refuses `msg` from `role` `name`, or None."""
    if isinstance(msg, FROM_SUPERVISOR):
        if role == "supervisor" and name == supervisor:
            return None
        return f"{msg.kind} is accepted only from the supervisor {supervisor}, not from {role} {name}"
    if role != "node":
        return f"{msg.kind} is accepted only from nodes, not from {role} {name}"
    return None


def supervisor_admits(msg: Message, role: str, name: str) -> str | None:
    """Why the supervisor refuses `msg` from `role` `name`, or None."""
    if role != "node":
        return f"{msg.kind} is accepted only from nodes, not from {role} {name}"
    if isinstance(msg, NAMES_SENDER) and msg.ref != name:
        return f"{msg.kind} for {msg.ref} is accepted only from {msg.ref}, not from {name}"
    return None
