"""The `omen` overlay's messages (paper 003 §3-§5).

Supervisor -> node (the supervisor stands in for the DHT and the failure detector that
OMen assumes, and keeps membership only: it never sends edges or views):

* `OmenMembership`: the receiver's L predecessors and L successors on the identifier circle;
* `OmenChurn`: a churn event, sent to the L successors of its node.

Node -> supervisor: `OmenJoin` (a node and its topics), `OmenLeave` (a graceful leave),
`OmenSuspect` (a peer it cannot reach); the supervisor probes a suspect (`OmenPing` /
`OmenPong`) before it declares the crash.

Node <-> node: `OmenGossip` (T-Man's buffers, Alg. 3), `OmenShuffle` (the peer-sampling
shuffle), the coordinator's `OmenShadowRequest` / `OmenShadowAnswer` (the shadow set's
current topics and neighbours), `OmenEdges` / `OmenEdgesAck` (the new edges, sent to both
endpoints until acknowledged, and the departed node to drop) and `OmenDone` (notifySuccRange,
Alg. 6: the repair of an event is complete).

A descriptor travels as [reference, topics, neighbours, version]; the codec checks each
field's shape and bounds.
"""

from __future__ import annotations

from typing import Literal, NewType

from pubsub.kernel.message import Message, Ref, Topic, message
from pubsub.kernel.wire import WireError, register_field_type, short, validate_int, validate_ref, validate_topic
from pubsub.omen.views import Descriptor

#: Most topics of one node, most references in one list, most descriptors in one message.
MAX_TOPICS = 1024
MAX_REFS = 1024
MAX_DESCRIPTORS = 4096

Refs = NewType("Refs", tuple[Ref, ...])
Topics = NewType("Topics", tuple[Topic, ...])
Descriptors = NewType("Descriptors", tuple[Descriptor, ...])


def validate_refs(value: object) -> Refs:
    if not isinstance(value, (list, tuple)) or len(value) > MAX_REFS:
        raise WireError("bad_field", f"references must be a list of at most {MAX_REFS}, got {short(value)}")
    return Refs(tuple(validate_ref(item) for item in value))


def validate_topics(value: object) -> Topics:
    if not isinstance(value, (list, tuple)) or len(value) > MAX_TOPICS:
        raise WireError("bad_field", f"topics must be a list of at most {MAX_TOPICS} names, got {short(value)}")
    topics = tuple(validate_topic(item) for item in value)
    if len(set(topics)) != len(topics):
        raise WireError("bad_field", "a topic list names a topic twice")
    return Topics(tuple(sorted(topics)))


def validate_descriptors(value: object) -> Descriptors:
    if not isinstance(value, (list, tuple)) or len(value) > MAX_DESCRIPTORS:
        raise WireError(
            "bad_field", f"descriptors must be a list of at most {MAX_DESCRIPTORS}, got {short(value)}"
        )
    found = []
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 4:
            raise WireError("bad_field", f"a descriptor is [reference, topics, neighbours, version], got {short(item)}")
        ref, topics, neighbours, version = item
        found.append(Descriptor(
            validate_ref(ref), frozenset(validate_topics(topics)), frozenset(validate_refs(neighbours)),
            validate_int(version),
        ))
    return Descriptors(tuple(found))


def encode_descriptors(value: Descriptors) -> list[list[object]]:
    return [[d.node, sorted(d.topics), sorted(d.neighbours), d.version] for d in value]


register_field_type(Refs, validate_refs, list)
register_field_type(Topics, validate_topics, list)
register_field_type(Descriptors, validate_descriptors, encode_descriptors)


@message("omen_join")
class OmenJoin(Message):
    """Node -> supervisor: `ref` is in exactly `topics` (again on every Timeout until its
    membership says so, then every few Timeouts as a reminder, `refresh`)."""

    ref: Ref
    topics: Topics
    refresh: bool = False


@message("omen_leave")
class OmenLeave(Message):
    """Node -> supervisor: `ref` leaves gracefully."""

    ref: Ref


@message("omen_membership")
class OmenMembership(Message):
    """Supervisor -> node: the receiver's L predecessors and L successors, nearest first,
    and the topics the supervisor holds it in."""

    preds: Refs
    succs: Refs
    topics: Topics = Topics(())
    #: The supervisor's settings, which every node runs: L, λ, T_wait (Timeouts), the
    #: peer sample's size, ρ in thousandths, the backup method.
    resilience: int = 2
    coverage: int = 5
    t_wait: int = 2
    sample_size: int = 8
    rho_permille: int = 3000
    method: Literal["primal-dual", "greedy"] = "primal-dual"


@message("omen_churn")
class OmenChurn(Message):
    """Supervisor -> node: a churn event at `node` (`id` unique; `change` is its kind), for
    the L successors of `node`; `topics` are the event's (a leaver's, or a joiner's new
    ones).  A join carries `candidates`: for each of its topics, up to λ other subscribers
    with their topics (the rendezvous a DHT gives a joiner; INFERRED, docs/omen.md)."""

    id: str
    change: Literal["join", "leave"]
    node: Ref
    topics: Topics
    candidates: Descriptors = Descriptors(())


@message("omen_gossip")
class OmenGossip(Message):
    """Node -> node: a T-Man buffer (Alg. 3); `reply` marks the passive thread's answer."""

    sender: Ref
    descriptors: Descriptors
    reply: bool = False


@message("omen_shuffle")
class OmenShuffle(Message):
    """Node -> node: a peer-sampling shuffle (`pubsub.omen.sampling`)."""

    sender: Ref
    descriptors: Descriptors
    reply: bool = False


@message("omen_shadow_request")
class OmenShadowRequest(Message):
    """Coordinator -> shadow node: your current descriptor, for event `event`."""

    sender: Ref
    event: str


@message("omen_shadow_answer")
class OmenShadowAnswer(Message):
    """Shadow node -> coordinator: its descriptor (one) for event `event`."""

    sender: Ref
    event: str
    descriptors: Descriptors


@message("omen_edges")
class OmenEdges(Message):
    """Coordinator -> endpoint: for event `event`, add edges to `add` (whose descriptors,
    with their topics, are in `peers`) and drop `drop`."""

    sender: Ref
    event: str
    add: Refs
    drop: Refs
    peers: Descriptors = Descriptors(())


@message("omen_edges_ack")
class OmenEdgesAck(Message):
    """Endpoint -> coordinator: `ref` holds the edges of event `event`."""

    event: str
    ref: Ref


@message("omen_done")
class OmenDone(Message):
    """Coordinator -> the L-successor range: event `event` is repaired (gcChurnEvent).
    `sender`, the coordinator, is among each receiver's predecessors, or it is refused."""

    event: str
    sender: Ref


@message("omen_suspect")
class OmenSuspect(Message):
    """Node -> supervisor: `suspect` could not be reached (`ref` reports it)."""

    ref: Ref
    suspect: Ref


@message("omen_ping")
class OmenPing(Message):
    """Supervisor -> node: are you alive?"""

    nonce: int


@message("omen_pong")
class OmenPong(Message):
    """Node -> supervisor: `ref` is alive (the nonce of the ping)."""

    nonce: int
    ref: Ref


@message("omen_gone")
class OmenGone(Message):
    """Supervisor -> node: `node`, which the receiver reported unreachable, is off the
    circle.  The receiver drops its edge to it and asks for a repair of its own (`OmenMend`):
    the leave's coordinator did not know that edge (beyond the paper, docs/omen.md)."""

    node: Ref


@message("omen_mend")
class OmenMend(Message):
    """Node -> supervisor: `ref` lost an edge no repair mended, or holds no neighbour in
    `topics` (none named: all its topics); a join event for it in those topics, with
    candidates, reconnects it."""

    ref: Ref
    topics: Topics = Topics(())
