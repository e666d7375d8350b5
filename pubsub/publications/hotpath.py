"""The hot path's decoders: Spread frames, and the Delivery frames of client streams, without
the generic per-field machinery (issue 11).

Every node decodes every Spread it receives -- one per batch of new publications -- and
forwards the same batch to its children.  `decode_spread` checks each field with direct
type tests (the same bounds the generic codec applies, `pubsub.kernel.wire` and
`pubsub.skipring.fields`).  A large frame (a batch under load) is read with a streaming
unpacker that keeps the bytes the publications arrived as, so that forwarding them
re-encodes nothing (`pubsub.publications.messages.PublicationList`); a small one (a publication
or a few, at moderate rates) is read in one call, which costs less than the streaming
reader's call per field, and re-encoded only if this node forwards it.

Every following client reads one Delivery frame per publication; `decode_delivery` reads
the full form of that frame with direct type tests.  Every publication starts as a client's
PublishRequest, which the node it reaches reads with `decode_publish_request`, and ends
there as the PublishAck its publisher reads with `decode_publish_ack`.

Every node that forwards a batch encodes one Spread per child, which differ only in their
arc: `encode_spread` writes the frame from its six small fields in one packer call and
appends the publications' bytes as the batch holds them (`PublicationList.packed`), where
the generic encoder builds the map, looks up the schema and splices the packed field in
over several calls (`pubsub.kernel.wire.encode_payload`).  Every node writes one Delivery
per publication to each of its followers: `delivery_payload` packs it straight from the
stored publication in one call, without building the `Delivery` first.  Both write the
same bytes as the generic encoder (tests compare them).

A fast decoder only ever accepts what the generic decoder accepts: for anything it does not
recognise at once -- a missing or extra field, a wrong type, a bound exceeded, garbage -- it
returns None and the generic decoder takes the frame, accepting it or raising the precise
`WireError` that the runtime counts.  Hostile input therefore meets the same checks and the
same error codes as before; only well-formed frames are faster.  Tests compare them with the
generic decoder on random and mutated frames.

The four decoders have compiled twins (`pubsub/publications/_chotpath.pyx`), which the codec
uses where they were built (`DECODERS`): they read a frame's bytes once and check each field
as they read it, which costs about half of these cold (a Spread 64 µs against 145, a
Delivery 44 against 120; docs/measurements/issue11.md, twenty-second round).  These stay as
the reference the tests hold the compiled ones to, and as the decoders of an install without
a C compiler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeGuard

import msgpack

from pubsub.kernel import wire
from pubsub.kernel.message import Message, Topic
from pubsub.kernel.wire import (
    INT64_MAX,
    INT64_MIN,
    MAX_PAYLOAD_BYTES,
    WireError,
    validate_ref,
    validate_topic,
)
from pubsub.publications.fields import MAX_MSG_ID_CHARS, MAX_PUBLICATIONS, encode_publications, msg_id_characters
from pubsub.publications.messages import (
    Delivery,
    MsgId,
    Payload,
    Position,
    Publication,
    PublicationKey,
    PublicationList,
    PublishAck,
    PublishRequest,
    Spread,
)
from pubsub.publications.signatures import MAX_PROOF_BYTES

_FIELDS = frozenset(("v", "t", "topic", "sender", "start", "end", "levels", "hops", "publications"))
_INT64 = 1 << 63
#: Spread frames of at least this many bytes keep the bytes of their publications (module
#: docstring); about 16 publications of 64 bytes, where re-encoding the batch for a
#: forward starts to cost more than the streaming reader's calls.
KEEP_BYTES_FROM = 2048


def decode_spread(payload: bytes) -> Spread | None:
    """The Spread in `payload`, or None to leave the frame to the generic decoder."""
    if len(payload) < KEEP_BYTES_FROM:
        fields, raw = _full_map(payload, "spread", _FIELDS), b""
    else:
        fields, raw = _streamed_spread(payload)
    if fields is None:
        return None
    try:
        return _checked(fields, raw)
    except (WireError, TypeError, ValueError):
        return None


def _streamed_spread(payload: bytes) -> tuple[dict[str, object] | None, bytes]:
    """What `_full_map` gives for a Spread frame, read with a streaming unpacker, and the
    bytes its publications arrived as."""
    n = len(payload)
    unpacker = msgpack.Unpacker(
        raw=False,
        strict_map_key=True,
        max_buffer_size=max(n, 1),
        read_size=max(n, 1),
        max_str_len=n,
        max_bin_len=n,
        max_array_len=n,
        max_map_len=n // 2,
        max_ext_len=0,
    )
    try:
        unpacker.feed(payload)
        if unpacker.read_map_header() != len(_FIELDS):
            return None, b""
        fields: dict[str, object] = {}
        raw = b""
        for _ in range(len(_FIELDS)):
            name = unpacker.unpack()
            if name == "publications":
                start = unpacker.tell()
                fields[name] = unpacker.unpack()
                raw = payload[start : unpacker.tell()]
            else:
                fields[name] = unpacker.unpack()
        if unpacker.tell() != n or fields.keys() != _FIELDS:
            return None, b""
    except Exception:  # noqa: BLE001 - anything odd: the generic decoder decides
        return None, b""
    return (fields, raw) if _is_frame_of(fields, "spread") else (None, b"")


def _checked(fields: dict[str, object], raw: bytes) -> Spread | None:
    """The Spread of a frame's fields (version and kind checked already)."""
    start, end, levels, hops = fields["start"], fields["end"], fields["levels"], fields["hops"]
    for position in (start, end):
        if type(position) is not int or not 0 <= position < 1 << 64:
            return None
    if not (_int64(levels) and _int64(hops)):
        return None
    assert isinstance(start, int) and isinstance(end, int)
    items = fields["publications"]
    if type(items) is not list or len(items) > MAX_PUBLICATIONS:
        return None
    publications = PublicationList(packed=raw, checked=True)
    for item in items:
        if type(item) is not list or not 4 <= len(item) <= 8:
            return None
        key, publisher, seq, body = item[0], item[1], item[2], item[3]
        stamp = item[4] if len(item) > 4 else 0
        prev = item[5] if len(item) > 5 else -1
        msg_id = item[6] if len(item) > 6 else ""
        proof = item[7] if len(item) > 7 else b""
        if type(proof) is not bytes or len(proof) > MAX_PROOF_BYTES:
            return None
        if type(key) is not bytes or len(key) != 16 or type(body) is not bytes or len(body) > MAX_PAYLOAD_BYTES:
            return None
        if type(seq) is not int or not 0 <= seq < _INT64 or type(stamp) is not int or not 0 <= stamp < _INT64:
            return None
        if type(prev) is not int or not -1 <= prev < _INT64 or not _msg_id(msg_id):
            return None
        publications.append(
            Publication(PublicationKey(key), validate_ref(publisher), seq, Payload(body), stamp, prev, msg_id, proof)
        )
    return Spread(
        validate_topic(fields["topic"]),
        validate_ref(fields["sender"]),
        Position(start),
        Position(end),
        levels,
        hops,
        publications,
    )


_DELIVERY_FIELDS = frozenset((
    "v", "t", "topic", "local_seq", "publisher", "seq", "key", "payload", "stored_at_ms", "published_ms", "msg_id",
))


def _full_map(payload: bytes, kind: str, fields: frozenset[str]) -> dict[str, object] | None:
    """The map in `payload` if it is a frame of `kind` in this protocol version with exactly
    `fields` (every field present), under the generic decoder's size bounds; else None."""
    n = len(payload)
    try:
        obj = msgpack.unpackb(
            payload, raw=False, strict_map_key=True, max_str_len=n, max_bin_len=n, max_array_len=n,
            max_map_len=n // 2, max_ext_len=0,
        )
    except Exception:  # noqa: BLE001 - anything odd: the generic decoder decides
        return None
    if type(obj) is not dict or obj.keys() != fields or not _is_frame_of(obj, kind):
        return None
    return obj


def _is_frame_of(fields: dict[str, object], kind: str) -> bool:
    """Whether a frame's fields say this protocol version and `kind`."""
    version = fields["v"]  # True == 1 in Python: the type is checked as the generic decoder does
    return type(version) is int and version == wire.PROTOCOL_VERSION and fields["t"] == kind


def _int64(number: object) -> TypeGuard[int]:
    return type(number) is int and INT64_MIN <= number <= INT64_MAX


def _msg_id(msg_id: object) -> TypeGuard[str]:
    """Whether `msg_id` is a valid message id ("" for none)."""
    return type(msg_id) is str and (not msg_id or (len(msg_id) <= MAX_MSG_ID_CHARS and msg_id_characters(msg_id)))


def decode_delivery(payload: bytes) -> Delivery | None:
    """The Delivery in `payload` (all its fields present), or None to leave the frame to the
    generic decoder."""
    obj = _full_map(payload, "delivery", _DELIVERY_FIELDS)
    if obj is None:
        return None
    local_seq, seq = obj["local_seq"], obj["seq"]
    stored_at_ms, published_ms = obj["stored_at_ms"], obj["published_ms"]
    key, body, msg_id = obj["key"], obj["payload"], obj["msg_id"]
    if not (_int64(local_seq) and _int64(seq) and _int64(stored_at_ms) and _int64(published_ms)):
        return None
    if type(key) is not bytes or len(key) != 16 or type(body) is not bytes or len(body) > MAX_PAYLOAD_BYTES:
        return None
    if not _msg_id(msg_id):
        return None
    try:
        return Delivery(
            validate_topic(obj["topic"]), local_seq, validate_ref(obj["publisher"]), seq, PublicationKey(key),
            Payload(body), stored_at_ms, published_ms, MsgId(msg_id),
        )
    except WireError:
        return None


_PUBLISH_REQUEST_FIELDS = frozenset(("v", "t", "topic", "payload", "id", "msg_id"))


def decode_publish_request(payload: bytes) -> PublishRequest | None:
    """The PublishRequest in `payload` (all its fields present), or None to leave the frame
    to the generic decoder."""
    obj = _full_map(payload, "publish_request", _PUBLISH_REQUEST_FIELDS)
    if obj is None:
        return None
    number, body, msg_id = obj["id"], obj["payload"], obj["msg_id"]
    if not _int64(number) or type(body) is not bytes or len(body) > MAX_PAYLOAD_BYTES or not _msg_id(msg_id):
        return None
    try:
        return PublishRequest(validate_topic(obj["topic"]), Payload(body), number, MsgId(msg_id))
    except WireError:
        return None


_PUBLISH_ACK_FIELDS = frozenset((
    "v", "t", "id", "topic", "publisher", "seq", "key", "stored_by", "local_seq", "durable", "duplicate",
))


def decode_publish_ack(payload: bytes) -> PublishAck | None:
    """The PublishAck in `payload` (all its fields present), or None to leave the frame to
    the generic decoder."""
    obj = _full_map(payload, "publish_ack", _PUBLISH_ACK_FIELDS)
    if obj is None:
        return None
    number, seq, key, local_seq = obj["id"], obj["seq"], obj["key"], obj["local_seq"]
    durable, duplicate = obj["durable"], obj["duplicate"]
    if not (_int64(number) and _int64(seq) and (local_seq is None or _int64(local_seq))):
        return None
    if type(key) is not bytes or len(key) != 16 or type(durable) is not bool or type(duplicate) is not bool:
        return None
    try:
        return PublishAck(
            number, validate_topic(obj["topic"]), validate_ref(obj["publisher"]), seq, PublicationKey(key),
            validate_ref(obj["stored_by"]), local_seq, durable, duplicate,
        )
    except WireError:
        return None


_SPREAD_HEAD = wire.fast_prefix("spread", len(_FIELDS) - 2)
_PUBLICATIONS_NAME = wire.pack("publications")


def encode_spread(msg: Spread) -> bytes:
    """The payload of `msg`, as `pubsub.kernel.wire.encode_payload` writes it: "v" and "t",
    the small fields in their declared order, then the publications (module docstring).
    A value packing refuses raises as packing does; the codec reports it."""
    small = wire.pack({
        "topic": msg.topic, "sender": msg.sender, "start": msg.start, "end": msg.end,
        "levels": msg.levels, "hops": msg.hops,
    })
    publications = encode_publications(msg.publications)
    packed = publications if type(publications) is wire.Packed else wire.pack(publications)
    return b"".join((_SPREAD_HEAD, small[1:], _PUBLICATIONS_NAME, packed))


def delivery_payload(topic: Topic, local_seq: int, publication: Publication, stored_at_ms: int) -> bytes:
    """The payload `pubsub.kernel.wire.encode_payload` writes for the Delivery of
    `publication`, numbered `local_seq` and stored at `stored_at_ms` (the fields in their
    declared order), packed in one call without building the message."""
    p = publication
    payload: bytes = wire.pack({
        "v": wire.PROTOCOL_VERSION, "t": "delivery", "topic": topic, "local_seq": local_seq,
        "publisher": p.publisher, "seq": p.seq, "key": p.key, "payload": p.payload,
        "stored_at_ms": stored_at_ms, "published_ms": p.published_ms, "msg_id": p.msg_id,
    })
    return payload


#: The decoder `register` gives the codec for each hot kind: the compiled twins of the ones
#: above (`pubsub/publications/_chotpath.pyx`, built by `make venv`), each of which accepts
#: exactly what its Python twin accepts and builds an equal message in one native call per
#: frame; without a C compiler at install time, the Python ones.
DECODERS: dict[str, Callable[[bytes], Message | None]] = {
    "spread": decode_spread,
    "delivery": decode_delivery,
    "publish_request": decode_publish_request,
    "publish_ack": decode_publish_ack,
}
#: Whether `DECODERS` are the compiled ones.
COMPILED = False
try:
    from pubsub.publications._chotpath import (
        decode_delivery as compiled_delivery,
    )
    from pubsub.publications._chotpath import (
        decode_publish_ack as compiled_ack,
    )
    from pubsub.publications._chotpath import (
        decode_publish_request as compiled_request,
    )
    from pubsub.publications._chotpath import (
        decode_spread as compiled_spread,
    )
except ImportError:  # not built (no C compiler where the project was installed)
    pass
else:
    COMPILED = True
    DECODERS.update(
        spread=compiled_spread, delivery=compiled_delivery, publish_request=compiled_request, publish_ack=compiled_ack
    )


def register() -> None:
    """Make the codec try a fast decoder first on the hot kinds' frames (`DECODERS`), and
    encode Spreads with `encode_spread`."""
    wire.register_fast_encoder(Spread, encode_spread)
    for kind, decoder in DECODERS.items():
        wire.register_fast_decoder(kind, decoder)
