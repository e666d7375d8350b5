"""The messages of the shared publication layer: what every overlay's nodes exchange about
publications, and what clients exchange with the daemons.

Cores exchange these plain dataclasses (`pubsub.kernel.message`); the simulator passes them
as they are and the network runtime turns them into msgpack frames (`pubsub.kernel.wire`).
Field types are annotated with the NewTypes below, which `pubsub.publications.fields`
teaches the codec, so that every field of every message is validated from the annotations.

Names follow paper 000 (Alg. 5, §4.2-4.3): CheckTrie, CheckAndPublish, Publish and
PublishNew.  Spread carries new publications down the arc broadcast
(`pubsub.publications.arcs`), the duplicate-free alternative to PublishNew's flooding.

Beyond the paper: the clients' control requests (join, leave, publish, follow), the
deliveries a node streams to a following client, the hand-over of a publication issued at
a node that does not subscribe to its topic (GetMember / MemberIs with the supervisor,
HandOver / HandOverAck with a member), and the certificates of the keys that sign
publications.  An overlay's own messages live in its package (the skip ring's BuildSR
messages in `pubsub.skipring.messages`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple, NewType

from pubsub.kernel.message import Message, Ref, Topic, message
from pubsub.publications.trie import TrieLabel


# --- clients <-> daemons (control plane) -------------------------------------------------------
@message("join")
class JoinTopic(Message):
    """Client -> node: run BuildSR for this topic (pubsub subscribe)."""

    topic: Topic


@message("leave")
class LeaveTopic(Message):
    """Client -> node: unsubscribe from this topic (pubsub unsubscribe)."""

    topic: Topic


# --- publications (Alg. 5, §4.2-4.3) ---------------------------------------------------------
#: A trie node's hash: exactly 16 bytes (xxh3-128, `pubsub.publications.trie`).
NodeHash = NewType("NodeHash", bytes)
#: A client's id for a publication: "" (none) or 1..64 printable ASCII characters.
MsgId = NewType("MsgId", str)
#: A point of the ring in units of 2^-64 (an integer 0 <= p < 2^64), `pubsub.publications.arcs`.
Position = NewType("Position", int)
#: A publication's key: exactly 16 bytes, `pubsub.publications.trie.publication_key` of its content.
PublicationKey = NewType("PublicationKey", bytes)
#: The application's bytes inside a publication (bounded by the frame size on the wire).
Payload = NewType("Payload", bytes)


class NodeDigest(NamedTuple):
    """One (label, hash) tuple of CheckTrie: a trie node without its edges (§4.2)."""

    label: TrieLabel
    hash: NodeHash

    def __repr__(self) -> str:
        return f"({self.label.bits or '⊥'},{self.hash.hex()[:8]})"


@dataclass(slots=True, eq=False)
class Publication:
    """One publication: its key, who issued it, the issuer's sequence number, the payload.

    Not a message by itself; Publish, PublishNew and Spread carry publications.  The key is
    `pubsub.publications.trie.publication_key(publisher, seq, payload)` and is the publication's leaf
    label in every trie (§4.2: the key generated from the issuer's ID and the content).

    Treat it as immutable -- but for `proof`, which its issuer sets once, before the
    publication leaves the node (it is not frozen only because frozen dataclasses are several
    times slower to build, and every received publication is built once per node).
    Equality and hashing ignore `published_ms` and `proof`.
    """

    key: PublicationKey
    publisher: Ref
    seq: int
    payload: Payload
    #: Wall-clock milliseconds (Unix) when the first node accepted it from a client; 0 when
    #: unknown.  Carried with the publication everywhere, but not part of its key or identity.
    published_ms: int = 0
    #: The `seq` of the same publisher's previous publication in the same topic (-1: none
    #: or unknown); nodes store a publication only after its predecessor, for at most a
    #: bound (`pubsub.publications.ordering`), so each publisher's publications are numbered,
    #: and delivered, in order.  Not part of the key.
    prev: int = -1
    #: The id the client gave the publish request ("" when none): nodes answer a retried
    #: request with the same id as a duplicate instead of publishing twice
    #: (`pubsub.publications.publishing`).  Not part of the key.
    msg_id: str = ""
    #: The publisher's signature of the batch it issued this in, with this publication's
    #: place in it (`pubsub.publications.signatures`); b"" when unsigned (a cluster without
    #: TLS).  Not part of the key or the equality.
    proof: bytes = b""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Publication):
            return NotImplemented
        return (
            self.key == other.key
            and self.publisher == other.publisher
            and self.seq == other.seq
            and self.payload == other.payload
        )

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Publication({self.key.hex()[:8]} {self.publisher}#{self.seq} {len(self.payload)}B)"


class PublicationList(list[Publication]):
    """A batch of publications that may remember its msgpack encoding (`packed`): a relay
    forwards the batch it received to several neighbours, unchanged, so the batch is encoded
    at most once per node -- or not at all when it still holds the bytes it arrived as
    (`pubsub.publications.hotpath`).  Never change a list whose `packed` is set.

    `checked`: the decoder built every item from fields it validated one by one (types and
    bounds, `pubsub.publications.hotpath`), so the core does not check them again; it still
    verifies each key against its publication."""

    __slots__ = ("packed", "checked")

    def __init__(self, items: Iterable[Publication] = (), packed: bytes = b"", checked: bool = False) -> None:
        super().__init__(items)
        self.packed = packed
        self.checked = checked


@message("check_trie")
class CheckTrie(Message):
    """CheckTrie(sender, tuples): "here are some of my trie nodes; compare" (Alg. 5 l.11)."""

    topic: Topic
    sender: Ref
    tuples: list[NodeDigest]


@message("check_and_publish")
class CheckAndPublish(Message):
    """CheckAndPublish(sender, tuples, pf): CheckTrie plus "send me everything under pf"
    (Alg. 5 l.25)."""

    topic: Topic
    sender: Ref
    tuples: list[NodeDigest]
    prefix: TrieLabel


@message("publish")
class Publish(Message):
    """Publish(P): publications the receiver lacks, in one bounded batch (Alg. 5 l.6)."""

    topic: Topic
    publications: list[Publication]


@message("publish_new")
class PublishNew(Message):
    """PublishNew(p): a fresh publication flooded over ring and shortcut edges (§4.3,
    Alg. 5 l.30); `hops` counts the edges it has crossed, for measurements."""

    topic: Topic
    publication: Publication
    hops: int


@message("spread")
class Spread(Message):
    """New publications travelling down the arc broadcast (`pubsub.publications.arcs`): the
    receiver stores them and forwards them inside the arc [start, end), which it is
    responsible for, split among its neighbours there.  `levels` is the sender's view of
    the ring's longest label (the resolution of the split), `hops` the edges crossed so far
    (the publisher sends 1).  All publications of one Spread share the arc."""

    topic: Topic
    sender: Ref
    start: Position
    end: Position
    levels: int
    hops: int
    publications: list[Publication]


# --- publications: clients <-> node (control plane) ------------------------------------------
@message("publish_request")
class PublishRequest(Message):
    """Client -> node: publish `payload` on `topic`.  `id` is the client's own number for
    the request; the answer (PublishAck or PublishFailed) carries it back, so a client may
    have many requests outstanding on one connection."""

    topic: Topic
    payload: Payload
    id: int
    #: The client's id of the publication (1..64 printable characters), the same on every
    #: retry of it: within the node's window a second request with the same id is answered
    #: with the first one's acknowledgement and nothing is published twice.  "" = none.
    msg_id: MsgId = MsgId("")


@message("publish_ack")
class PublishAck(Message):
    """Node -> client: the publication is stored at `stored_by` (a member of the topic),
    durably unless `durable` is False.

    `publisher` and `seq` name the publication (the node that issued it and its sequence
    number there), `key` is its 16-byte key; `local_seq` is its number in `stored_by`'s
    delivery order when the publishing node stored it itself, else None.
    """

    id: int
    topic: Topic
    publisher: Ref
    seq: int
    key: PublicationKey
    stored_by: Ref
    local_seq: int | None
    #: Whether `stored_by` keeps it on disk (False: a node without a data directory, whose
    #: store dies with its process).
    durable: bool = True
    #: The request repeated a message id already published: this acknowledges that earlier
    #: publication, nothing new was published.
    duplicate: bool = False


@message("publish_failed")
class PublishFailed(Message):
    """Node -> client: the request `id` was not acknowledged; `code` says why,
    machine-readably.  Every code but ``unknown`` means nothing was stored and nothing will
    be (payload_too_large, bad_msg_id, no_members, handover_failed, store_error, ...);
    ``unknown`` means it may have been stored (a member received it but did not answer): a
    retry with the same message id is then answered as a duplicate if it was."""

    id: int
    code: str
    detail: str


@message("follow")
class Follow(Message):
    """Client -> node: stream the topic's publications with local sequence number > `since`
    as Delivery frames on this connection (everything when since = 0).

    `new_only` starts after what the node holds now instead, and skips what is older than
    the request by the publications' own timestamps (`published_from_ms`).  With `live` the
    stream goes on until the client closes the connection; without it, it ends after the
    publications held at the time of the request with a Reply whose body has ``"end": true``.
    """

    topic: Topic
    since: int
    new_only: bool
    live: bool
    #: The store incarnation `since` belongs to (the ``incarnation`` of an earlier stream's
    #: reply); a cursor from another incarnation is refused (``cursor_incarnation``), as is
    #: one beyond the node's latest number (``cursor_beyond_end``) -- unless `from_now`,
    #: which resumes from the node's latest number instead.
    incarnation: str | None = None
    from_now: bool = False
    #: Skip publications published (`Publication.published_ms`) before this wall-clock
    #: millisecond, 0 for none.  A `new_only` stream that gives 0 gets the request's time
    #: less the clock skew allowed (`pubsub.node.delivery`), and its reply says which, for
    #: the client to give again when it resumes: a node that is still catching up on the
    #: topic's history (it just joined) delivers that history as it arrives otherwise.
    published_from_ms: int = 0


@message("delivery")
class Delivery(Message):
    """Node -> following client: one publication, numbered `local_seq` (1, 2, ... per topic,
    in the order this node stored them; durable, so a client resumes with since = the last
    number it processed).  `stored_at_ms` is the node's wall clock when it stored it;
    `published_ms` is the publication's own timestamp (`Publication.published_ms`, 0 when
    unknown)."""

    topic: Topic
    local_seq: int
    publisher: Ref
    seq: int
    key: PublicationKey
    payload: Payload
    stored_at_ms: int
    published_ms: int = 0
    #: The publisher's message id ("" when none), for applications that de-duplicate.
    msg_id: MsgId = MsgId("")


# --- publications: node <-> supervisor and node <-> node (hand-over) ----------------------------
@message("get_member")
class GetMember(Message):
    """Node -> supervisor: name one current member of `topic` (for a hand-over); the answer
    MemberIs goes to `ref` and carries `nonce` back.  `avoid` is a member that just failed
    to take a hand-over: named only if it is the only one."""

    topic: Topic
    ref: Ref
    nonce: int
    avoid: Ref | None = None


@message("member_is")
class MemberIs(Message):
    """Supervisor -> node: a member of `topic`, or None when the topic has no members."""

    topic: Topic
    member: Ref | None
    nonce: int


@message("hand_over")
class HandOver(Message):
    """Node -> member: store this publication as if you had issued it (durably, then flood
    it), and answer `sender` with HandOverAck(request)."""

    topic: Topic
    sender: Ref
    publication: Publication
    request: int


@message("hand_over_ack")
class HandOverAck(Message):
    """Member -> node: the outcome of HandOver `request`.  ok means `member` holds the
    publication (or, with `original`, the earlier one with its message id); otherwise
    `code` says why not (not_member, bad_publication, store_error)."""

    topic: Topic
    member: Ref
    request: int
    ok: bool
    code: str
    #: Whether `member`'s store survives its process (False: no data directory).
    durable: bool = True
    #: When the member already held a publication with the same message id (a retry):
    #: that publication, which stands for this one (not stored again).
    original: Publication | None = None


# --- publication keys: node <-> node (`pubsub.node.signing`) ------------------------------------
#: A DER certificate (at most `pubsub.publications.fields.MAX_CERTIFICATE_BYTES`).
CertificateDer = NewType("CertificateDer", bytes)
#: A key id: SHA-256 of a raw Ed25519 public key, 32 bytes (`pubsub.publications.signatures`).
KeyId = NewType("KeyId", bytes)


@message("key_certificate")
class KeyCertificate(Message):
    """The certificate of a key that signs publications: sent on a link before the first
    publication signed by that key, and in answer to KeyRequest."""

    certificate: CertificateDer


@message("key_request")
class KeyRequest(Message):
    """"Send me the certificates of these keys": the sender received publications signed
    by keys it does not know (it dropped them; anti-entropy brings them back)."""

    keys: list[KeyId]


#: Publication messages (all carry a topic; `NodeCore` routes them to the topic's trie).
PUBLICATION_MESSAGES = (CheckTrie, CheckAndPublish, Publish, PublishNew, Spread)
