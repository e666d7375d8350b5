"""The shared publication layer's field types on the wire, taught to the kernel codec
(`pubsub.kernel.wire`).

========================  ================================================================
annotation                on the wire
========================  ================================================================
``TrieLabel``             str of 0/1, 0..128 characters (a trie node label or a prefix)
``NodeDigest``            ``[label_bits, hash]``; hash is bin of exactly 16 bytes
``Position``              an integer 0..2^64-1 (a point of the ring in units of 2^-64)
``PublicationKey``        bin of exactly 16 bytes
``Payload``               bin of at most `MAX_PAYLOAD_BYTES`
``Publication``           ``[key, publisher, seq, payload, published_ms, prev, msg_id, proof]``: key
                          bin of 16 bytes, publisher a ``Ref``, seq an integer 0..2^63-1,
                          payload bin of at most `MAX_PAYLOAD_BYTES` (the frame size less
                          room for the envelope), published_ms an integer 0..2^63-1 (Unix
                          ms when first accepted, 0 = unknown), prev an integer -1..2^63-1
                          (the publisher's previous seq in the topic, -1 = none), msg_id a
                          message id (`validate_msg_id`, "" = none), proof bin of at most
                          `MAX_PROOF_BYTES` (`pubsub.publications.signatures`, sent only when
                          not empty); the last four are optional on input
``CertificateDer``        bin of at most `MAX_CERTIFICATE_BYTES`
``KeyId``                 bin of exactly 16 bytes
``list[KeyId]``           an array of at most `MAX_KEY_IDS` key ids
``list[NodeDigest]``      an array of at most `MAX_DIGESTS` (64) digests
``list[Publication]``     an array of at most `MAX_PUBLICATIONS` (256) publications
========================  ================================================================

`register` is called once by the package (`pubsub.publications.__init__`), so that
importing any module of the layer makes its messages decodable.  The validators are also used by the
CLI and the stores.
"""

from __future__ import annotations

from typing import Any

from pubsub.kernel.wire import (
    MAX_PAYLOAD_BYTES,
    Packed,
    WireError,
    bounded_bytes,
    bounded_list,
    exact_bytes,
    identity,
    list_encoder,
    pack,
    register_field_type,
    short,
    validate_int,
    validate_ref,
)
from pubsub.publications.messages import (
    CertificateDer,
    KeyId,
    MsgId,
    NodeDigest,
    NodeHash,
    Payload,
    Position,
    Publication,
    PublicationKey,
    PublicationList,
)
from pubsub.publications.signatures import KEY_ID, MAX_PROOF_BYTES
from pubsub.publications.trie import HASH_BYTES, KEY_BITS, TrieLabel

#: Most (label, hash) tuples in one CheckTrie / CheckAndPublish.
MAX_DIGESTS = 64
#: Most publications in one Publish.
MAX_PUBLICATIONS = 256
#: Largest certificate in a KeyCertificate.
MAX_CERTIFICATE_BYTES = 8192
#: Most key ids in one KeyRequest.
MAX_KEY_IDS = 16


def validate_trie_label(value: object) -> TrieLabel:
    """A trie label or prefix: a string of 0..128 characters 0/1 ("" is the root's ⊥)."""
    if not isinstance(value, str):
        raise WireError("bad_field", f"a trie label must be a bit string, got {short(value)}")
    if len(value) > KEY_BITS:
        raise WireError(
            "bad_field", f"a label longer than the key length ({len(value)} > {KEY_BITS} bits)"
        )
    if value.strip("01"):
        raise WireError("bad_field", f"a trie label must be a bit string, got {short(value)}")
    return TrieLabel.from_bits(value)


def validate_position(value: object) -> Position:
    """A point of the ring: an integer 0 <= p < 2^64."""
    if type(value) is not int or not 0 <= value < 1 << 64:
        raise WireError("bad_field", f"a ring position is an integer 0..2^64-1, got {short(value)}")
    return Position(value)


def validate_node_hash(value: object) -> NodeHash:
    """A trie node hash: bin of exactly 16 bytes."""
    return NodeHash(exact_bytes(value, HASH_BYTES, "a node hash"))


def validate_publication_key(value: object) -> PublicationKey:
    """A publication key: bin of exactly 16 bytes."""
    return PublicationKey(exact_bytes(value, HASH_BYTES, "a publication key"))


def validate_key_id(value: object) -> KeyId:
    """A key id: bin of exactly `KEY_ID` (16) bytes."""
    return KeyId(exact_bytes(value, KEY_ID, "a key id"))


def validate_digest(value: object) -> NodeDigest:
    """A CheckTrie tuple [label_bits, hash]."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise WireError("bad_field", f"a trie tuple must be [label, hash], got {short(value)}")
    return NodeDigest(validate_trie_label(value[0]), validate_node_hash(value[1]))


def validate_payload(value: object) -> Payload:
    """Publication payload: bin of at most MAX_PAYLOAD_BYTES."""
    return Payload(bounded_bytes(value, MAX_PAYLOAD_BYTES, "a payload"))


#: Longest message id.
MAX_MSG_ID_CHARS = 64


def msg_id_characters(value: str) -> bool:
    """Whether every character of `value` is printable ASCII other than space ('!'..'~'):
    ASCII, printable (which leaves out the controls and DEL) and no space -- three C-level
    string tests, where a per-character loop cost a few µs per publication (issue 11)."""
    return value.isascii() and value.isprintable() and " " not in value


def validate_msg_id(value: object) -> MsgId:
    """A message id: "" (none) or 1..64 printable ASCII characters (no spaces)."""
    if not isinstance(value, str) or len(value) > MAX_MSG_ID_CHARS or not msg_id_characters(value):
        raise WireError(
            "bad_field",
            f"a message id is 1..{MAX_MSG_ID_CHARS} printable ASCII characters, got {short(value)}",
        )
    return MsgId(value)


def validate_publication(value: object) -> Publication:
    """A publication [key, publisher, seq, payload, published_ms, prev, msg_id] (see the
    table above); older peers' shorter forms decode with the defaults."""
    if not isinstance(value, (list, tuple)) or not 4 <= len(value) <= 8:
        raise WireError(
            "bad_field",
            "a publication must be [key, publisher, seq, payload] with optional "
            f"published_ms, prev and msg_id, got {short(value)}",
        )
    key = validate_publication_key(value[0])
    seq = validate_int(value[2])
    if seq < 0:
        raise WireError("bad_field", f"a sequence number must not be negative, got {seq}")
    published_ms = validate_int(value[4]) if len(value) > 4 else 0
    if published_ms < 0:
        raise WireError("bad_field", f"published_ms must not be negative, got {published_ms}")
    prev = validate_int(value[5]) if len(value) > 5 else -1
    if prev < -1:
        raise WireError("bad_field", f"prev must be -1 or a sequence number, got {prev}")
    msg_id = validate_msg_id(value[6]) if len(value) > 6 else ""
    proof = bounded_bytes(value[7], MAX_PROOF_BYTES, "a proof") if len(value) > 7 else b""
    return Publication(
        key, validate_ref(value[1]), seq, validate_payload(value[3]), published_ms, prev, msg_id, proof
    )


def _encode_trie_label(value: TrieLabel) -> str:
    return value.bits


def _encode_digest(value: NodeDigest) -> list[Any]:
    return [value.label.bits, value.hash]


def _encode_publication(value: Publication) -> list[Any]:
    if value.proof:
        return [value.key, value.publisher, value.seq, value.payload, value.published_ms, value.prev,
                value.msg_id, value.proof]
    return [value.key, value.publisher, value.seq, value.payload, value.published_ms, value.prev, value.msg_id]


def encode_publications(values: list[Publication]) -> list[list[Any]] | Packed:
    """A list of publications; a `PublicationList` is encoded once and keeps its bytes."""
    if type(values) is PublicationList:
        if not values.packed:
            values.packed = pack([_encode_publication(p) for p in values])
        return Packed(values.packed)
    return [_encode_publication(p) for p in values]


def register() -> None:
    """Teach the kernel codec every field type of the publication layer (idempotent)."""
    register_field_type(TrieLabel, validate_trie_label, _encode_trie_label)
    register_field_type(NodeHash, validate_node_hash, identity)
    register_field_type(PublicationKey, validate_publication_key, identity)
    register_field_type(Position, validate_position, identity)
    register_field_type(MsgId, validate_msg_id, identity)
    register_field_type(Payload, validate_payload, identity)
    register_field_type(NodeDigest, validate_digest, _encode_digest)
    register_field_type(
        CertificateDer,
        lambda v: CertificateDer(bounded_bytes(v, MAX_CERTIFICATE_BYTES, "a certificate")),
        identity,
    )
    register_field_type(KeyId, validate_key_id, identity)
    register_field_type(list[KeyId], bounded_list(validate_key_id, MAX_KEY_IDS, "key ids"), list_encoder(identity))
    register_field_type(Publication, validate_publication, _encode_publication)
    register_field_type(
        list[NodeDigest],
        bounded_list(validate_digest, MAX_DIGESTS, "trie tuples"),
        list_encoder(_encode_digest),
    )
    register_field_type(
        list[Publication],
        bounded_list(validate_publication, MAX_PUBLICATIONS, "publications"),
        encode_publications,
    )
