"""The clique overlay's messages (`pubsub.clique`): membership, configuration and probes.

A node asks to be a member (`CliqueJoin`, again every Timeout until configured) or to stop
(`CliqueLeave`, again every Timeout until let go); the supervisor configures each member
with the topic's whole member list (`CliqueMembers`; ``members`` None: "you are not a
member", which is also the permission to leave).  A node that cannot reach a member reports
it (`CliqueSuspect`); the supervisor probes it (`CliquePing` / `CliquePong`) before
removing anyone.
"""

from __future__ import annotations

from typing import NewType

from pubsub.kernel.message import Message, Ref, Topic, message
from pubsub.kernel.wire import WireError, register_field_type, short, validate_ref

#: Most members of one clique topic (the member list travels whole).
MAX_MEMBERS = 1024

#: A topic's member list: distinct references, at most `MAX_MEMBERS`, in the supervisor's order.
Members = NewType("Members", tuple[Ref, ...])


def validate_members(value: object) -> Members:
    """A member list from the wire: an array of distinct references, at most `MAX_MEMBERS`."""
    if not isinstance(value, (list, tuple)) or len(value) > MAX_MEMBERS:
        raise WireError("bad_field", f"members must be a list of at most {MAX_MEMBERS} references, got {short(value)}")
    refs = tuple(validate_ref(item) for item in value)
    if len(set(refs)) != len(refs):
        raise WireError("bad_field", "a member list names a member twice")
    return Members(refs)


register_field_type(Members, validate_members, list)


@message("clique_join")
class CliqueJoin(Message):
    """Node -> supervisor: make `ref` a member of `topic`."""

    topic: Topic
    ref: Ref


@message("clique_leave")
class CliqueLeave(Message):
    """Node -> supervisor: `ref` leaves `topic`."""

    topic: Topic
    ref: Ref


@message("clique_members")
class CliqueMembers(Message):
    """Supervisor -> node: the members of `topic` (None: the receiver is not one)."""

    topic: Topic
    members: Members | None


@message("clique_suspect")
class CliqueSuspect(Message):
    """Node -> supervisor: `suspect` could not be reached (`ref` reports it)."""

    ref: Ref
    suspect: Ref


@message("clique_ping")
class CliquePing(Message):
    """Supervisor -> node: are you alive?"""

    nonce: int


@message("clique_pong")
class CliquePong(Message):
    """Node -> supervisor: `ref` is alive (the nonce of the ping)."""

    nonce: int
    ref: Ref
