"""The `tco` overlay's messages: a node's topics, its table, probes and refusals.

A node tells its supervisor every topic it wants to be in (`TcoSubscribe`; none: it leaves
them all), again on every Timeout until its table agrees, whenever a peer refused it, and
every `REFRESH_EVERY` Timeouts even when its table agrees, with the table's digest (a
record that lost it learns it again; a node holding another table than the record's gets
it again).
The supervisor answers with the node's table (`TcoTable`): the topics it holds the node in,
its neighbours with the topics each shares, and its backups and primaries (paper 001,
Struct 5); ``topics`` None says "you are in no topic", the permission to let every topic go.
A node that cannot reach a neighbour reports it (`TcoSuspect`); the supervisor probes it
(`TcoPing` / `TcoPong`) before the leave repair.  A publication message from a peer that is
not a neighbour in its topic is answered with `TcoNotNeighbour` (its own error code), on
which the sender asks its supervisor for its table instead of dropping the peer itself.

The codec checks the shape and the bounds; what a well-formed table may still hold wrong
(the node itself, a peer twice, a peer sharing no topic) is the node's to drop and count
(`pubsub.tco.overlay`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NewType

import msgpack
import xxhash

from pubsub.kernel.message import Message, Ref, Topic, message
from pubsub.kernel.wire import WireError, register_field_type, short, validate_ref, validate_topic

#: Most topics one node may be in; most neighbours, backups or primaries in one table.
MAX_TOPICS = 1024
MAX_PEERS = 1024

#: A node's topics: distinct topic names, sorted, at most `MAX_TOPICS`.
TopicSet = NewType("TopicSet", tuple[Topic, ...])
#: References, at most `MAX_PEERS` (duplicates are the node's to drop and count).
Peers = NewType("Peers", tuple[Ref, ...])
#: A node's neighbours, each with the topics it shares with the node.
Neighbourhood = NewType("Neighbourhood", tuple[tuple[Ref, TopicSet], ...])


def validate_topic_set(value: object) -> TopicSet:
    """Topics from the wire: an array of at most `MAX_TOPICS` distinct topic names."""
    if not isinstance(value, (list, tuple)) or len(value) > MAX_TOPICS:
        raise WireError("bad_field", f"topics must be a list of at most {MAX_TOPICS} names, got {short(value)}")
    topics = tuple(validate_topic(item) for item in value)
    if len(set(topics)) != len(topics):
        raise WireError("bad_field", "a topic list names a topic twice")
    return TopicSet(tuple(sorted(topics)))


def validate_peers(value: object) -> Peers:
    """References from the wire: an array of at most `MAX_PEERS`."""
    if not isinstance(value, (list, tuple)) or len(value) > MAX_PEERS:
        raise WireError("bad_field", f"peers must be a list of at most {MAX_PEERS} references, got {short(value)}")
    return Peers(tuple(validate_ref(item) for item in value))


def validate_neighbourhood(value: object) -> Neighbourhood:
    """Neighbours from the wire: an array of at most `MAX_PEERS` [reference, topics] pairs."""
    if not isinstance(value, (list, tuple)) or len(value) > MAX_PEERS:
        raise WireError(
            "bad_field", f"neighbours must be a list of at most {MAX_PEERS} entries, got {short(value)}"
        )
    entries = []
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise WireError("bad_field", f"a neighbour is [reference, topics], got {short(item)}")
        entries.append((validate_ref(item[0]), validate_topic_set(item[1])))
    return Neighbourhood(tuple(entries))


register_field_type(TopicSet, validate_topic_set, list)
register_field_type(Peers, validate_peers, list)
register_field_type(Neighbourhood, validate_neighbourhood, lambda value: [[ref, list(ts)] for ref, ts in value])


def table_digest(
    topics: Iterable[str],
    neighbours: Iterable[tuple[str, Iterable[str]]],
    backups: Iterable[str],
    primaries: Iterable[str],
) -> int:
    """A 63-bit fingerprint of a table's content, order-free: what a node's reminder says
    it holds, compared by the supervisor with the table its record gives the node."""
    canonical = [
        sorted(topics),
        sorted((peer, sorted(shared)) for peer, shared in neighbours),
        sorted(backups),
        sorted(primaries),
    ]
    return int(xxhash.xxh3_64_intdigest(msgpack.packb(canonical))) & 0x7FFF_FFFF_FFFF_FFFF


@message("tco_subscribe")
class TcoSubscribe(Message):
    """Node -> supervisor: `ref` wants to be in exactly `topics` (none: in no topic).
    `refresh`: the periodic reminder of a node whose table agrees, answered only if the
    record does not hold it so: in other topics, or with another table than `table`, the
    `table_digest` of what the node holds (a table lost, or overtaken on the way by an
    older one, is sent again)."""

    ref: Ref
    topics: TopicSet
    refresh: bool = False
    table: int = 0


@message("tco_table")
class TcoTable(Message):
    """Supervisor -> node: the receiver's table.  `topics` None: it is in no topic."""

    topics: TopicSet | None
    neighbours: Neighbourhood
    backups: Peers
    primaries: Peers


@message("tco_suspect")
class TcoSuspect(Message):
    """Node -> supervisor: `suspect` could not be reached (`ref` reports it)."""

    ref: Ref
    suspect: Ref


@message("tco_ping")
class TcoPing(Message):
    """Supervisor -> node: are you alive?"""

    nonce: int


@message("tco_pong")
class TcoPong(Message):
    """Node -> supervisor: `ref` is alive (the nonce of the ping)."""

    nonce: int
    ref: Ref


@message("tco_not_neighbour")
class TcoNotNeighbour(Message):
    """Node -> peer: `ref` does not hold the receiver as a neighbour in `topic` (the
    receiver's message was refused; publications it carried were kept)."""

    topic: Topic
    ref: Ref
