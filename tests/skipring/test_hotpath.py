"""The fast decoders (`pubsub.skipring.hotpath`): the Spread, Delivery and PublishRequest
decoders accept exactly what the generic decoder accepts, and a forwarded batch reuses the bytes it arrived
as."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pubsub.kernel import wire
from pubsub.kernel.message import Ref, Topic
from pubsub.skipring.antientropy import AntiEntropy, make_publication
from pubsub.skipring import hotpath
from pubsub.skipring.hotpath import decode_delivery, decode_publish_ack, decode_publish_request, decode_spread
from pubsub.skipring.messages import (
    Delivery, MsgId, Payload, Position, Publication, PublicationKey, PublicationList, PublishAck, PublishRequest,
    Spread,
)

T = Topic("t")
A = Ref("127.0.0.1:7001")


def frame(n: int, **changes: object) -> bytes:
    pubs = [make_publication(A, i, bytes(i % 7)) for i in range(n)]
    payload = wire.encode(Spread(T, A, Position(3), Position(9), 5, 2, pubs))[4:]
    if not changes:
        return payload
    body = msgpack.unpackb(payload, raw=False)
    body.update(changes)
    return msgpack.packb(body, use_bin_type=True)


def outcome(step: Callable[[], object]) -> object:
    """What `step` returns, or the code of the WireError it raises."""
    try:
        return step()
    except wire.WireError as exc:
        return exc.code


@contextmanager
def fast_paths_off() -> Iterator[None]:
    """The codec without its fast decoders and encoders, for the duration."""
    decoders, encoders = list(wire._FAST), dict(wire._FAST_ENCODERS)
    wire._FAST.clear()
    wire._FAST_ENCODERS.clear()
    try:
        yield
    finally:
        wire._FAST[:] = decoders
        wire._FAST_ENCODERS.update(encoders)


def generic(payload: bytes) -> object:
    """What the generic decoder makes of `payload`: the message, or the WireError code."""
    with fast_paths_off():
        return outcome(lambda: wire.decode(payload))


#: `hotpath.KEEP_BYTES_FROM` values that send every frame down one of the two readers: the
#: streaming one that keeps the bytes, and the one-call one.
STREAMED, IN_ONE_CALL = 0, 1 << 40


def both_ways(payload: bytes) -> list[Spread | None]:
    """`decode_spread(payload)` by the streaming reader, then by the one-call reader."""
    saved = hotpath.KEEP_BYTES_FROM
    try:
        found = []
        for threshold in (STREAMED, IN_ONE_CALL):
            hotpath.KEEP_BYTES_FROM = threshold
            found.append(decode_spread(payload))
        return found
    finally:
        hotpath.KEEP_BYTES_FROM = saved


def test_valid_frames_decode_the_same_and_large_ones_keep_their_bytes() -> None:
    for n in (0, 1, 15, 16, 200):
        payload = frame(n)
        keeps = len(payload) >= hotpath.KEEP_BYTES_FROM
        assert keeps == (n == 200)  # (these publications are small: 1 byte of payload or so)
        fast = decode_spread(payload)
        assert fast is not None and fast == generic(payload) == wire.decode(payload)
        assert isinstance(fast.publications, PublicationList)
        assert bool(fast.publications.packed) == keeps
        for decoded in both_ways(payload):
            assert decoded == fast
            assert isinstance(decoded, Spread) and isinstance(decoded.publications, PublicationList)
            forwarded = Spread(T, Ref("127.0.0.1:7002"), Position(4), Position(8), 5, 3, decoded.publications)
            encoded = wire.encode(forwarded)[4:]
            assert encoded == msgpack.packb(msgpack.unpackb(encoded, raw=False), use_bin_type=True)
            assert wire.decode(encoded) == forwarded


def test_a_decoded_batch_is_marked_checked_and_its_forged_keys_are_still_refused() -> None:
    """The hot decoder marks the batch whose fields it validated (`PublicationList.checked`),
    so the core skips that part of its own check -- but never the key's."""
    good = make_publication(A, 1, b"good")
    forged = make_publication(A, 2, b"forged")
    forged.payload = Payload(b"changed")  # the key no longer matches
    payload = wire.encode(Spread(T, A, Position(3), Position(9), 5, 2, [good, forged]))[4:]
    for decoded in both_ways(payload):
        assert decoded is not None and decoded.publications.checked
        core = AntiEntropy(A, T)
        core.spread(decoded)
        assert core.holds(good) and not core.holds(forged)
        assert core.counters["rejected_key_mismatch"] == 1
    assert not PublicationList([good]).checked  # built by hand: the core checks every field


def test_anything_odd_goes_to_the_generic_decoder() -> None:
    cases = [
        frame(2, hops="1"),
        frame(2, start=-1),
        frame(2, end=-5),
        frame(2, levels=1 << 63),
        frame(2, sender="no-port"),
        frame(2, topic=""),
        frame(2, publications=[[b"short", A, 1, b"", 0]]),
        frame(2, publications=[[bytes(16), A, -1, b"", 0]]),
        frame(2, publications="x"),
        frame(2, extra=1),
        frame(2, v=2),
        frame(2, v=True),  # equal to 1 in Python, still not a version
        frame(2)[:-3],
    ]
    for payload in cases:
        assert both_ways(payload) == [None, None]
        assert isinstance(generic(payload), str)  # the generic decoder refuses it, by code


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_mutated_frames_are_never_accepted_differently(data: st.DataObject) -> None:
    payload = bytearray(frame(data.draw(st.integers(0, 5))))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    reference = generic(bytes(payload))
    for fast in both_ways(bytes(payload)):
        if fast is not None:
            assert fast == reference


def generic_encoding(msg: Spread) -> object:
    """What the generic encoder makes of `msg`: the payload, or the WireError code."""
    with fast_paths_off():
        return outcome(lambda: wire.encode_payload(msg))


def fast_encoding(msg: Spread) -> object:
    """What the codec makes of `msg` with the fast encoder: the payload, or the WireError code."""
    assert wire._FAST_ENCODERS[Spread] is hotpath.encode_spread
    return outcome(lambda: wire.encode_payload(msg))


POSITIONS = st.integers(0, (1 << 64) - 1).map(Position)
spreads = st.builds(
    Spread,
    topic=st.sampled_from([T, Topic("news/eu"), Topic("x" * 200)]),
    sender=st.sampled_from([A, Ref("node-3.example:65535")]),
    start=POSITIONS,
    end=POSITIONS,
    levels=st.integers(1, 64),
    hops=st.integers(0, 1 << 40),
    publications=st.lists(
        st.builds(make_publication, publisher=st.sampled_from([A, Ref("h:1")]), seq=st.integers(0, 1 << 40),
                  payload=st.binary(max_size=300), published_ms=st.integers(0, 1 << 50),
                  prev=st.integers(-1, 1 << 40), msg_id=st.sampled_from(["", "id-1", "~" * 64])),
        max_size=40,
    ),
)


@settings(max_examples=300, deadline=None)
@given(msg=spreads, form=st.sampled_from(["list", "fresh batch", "batch as received"]))
def test_the_fast_spread_encoder_writes_what_the_generic_one_does(msg: Spread, form: str) -> None:
    if form == "fresh batch":  # a node's own batch, encoded on first use
        msg.publications = PublicationList(msg.publications)
    elif form == "batch as received":  # a received batch that kept the bytes it came as
        saved = hotpath.KEEP_BYTES_FROM
        hotpath.KEEP_BYTES_FROM = STREAMED
        try:
            received = decode_spread(wire.encode_payload(msg))
        finally:
            hotpath.KEEP_BYTES_FROM = saved
        assert received is not None and isinstance(received.publications, PublicationList)
        assert received.publications.packed
        msg.publications = received.publications
    expected = generic_encoding(msg)
    assert hotpath.encode_spread(msg) == expected
    assert fast_encoding(msg) == expected  # the codec uses it
    assert wire.decode(expected) == msg


def test_the_fast_spread_encoder_refuses_what_the_generic_one_does() -> None:
    good = make_publication(A, 1, b"x")
    for msg in (
        Spread(T, A, Position(1 << 64), Position(9), 5, 2, [good]),  # too large for msgpack
        Spread(T, A, Position(3), Position(9), 5, 2, [good, object()]),  # type: ignore[list-item]
        Spread(T, A, Position(3), Position(9), 5, 1 << 64, [good]),
    ):
        assert fast_encoding(msg) == generic_encoding(msg) == "unencodable"


# --- Delivery ----------------------------------------------------------------------------------
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
deliveries = st.builds(
    Delivery,
    topic=st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=40),
    local_seq=INT64,
    publisher=st.sampled_from([A, Ref("node-3.example:65535"), Ref("h:1")]),
    seq=INT64,
    key=st.binary(min_size=16, max_size=16).map(PublicationKey),
    payload=st.binary(max_size=300).map(Payload),
    stored_at_ms=INT64,
    published_ms=INT64,
    msg_id=st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=64).map(MsgId),
)



@settings(max_examples=300, deadline=None)
@given(msg=deliveries, prev=st.integers(-1, 1 << 40))
def test_the_delivery_payload_is_what_the_generic_encoder_writes(msg: Delivery, prev: int) -> None:
    """A stream's Deliveries are packed straight from the stored publication
    (`hotpath.delivery_payload`): the same bytes as encoding the Delivery message, which
    reads back as that message."""
    publication = Publication(msg.key, msg.publisher, msg.seq, msg.payload, msg.published_ms, prev, msg.msg_id)
    payload = hotpath.delivery_payload(msg.topic, msg.local_seq, publication, msg.stored_at_ms)
    assert payload == wire.encode_payload(msg)
    assert wire.decode(payload) == msg

requests = st.builds(
    PublishRequest,
    topic=st.sampled_from([T, Topic("news/eu"), Topic("x" * 200)]),
    payload=st.binary(max_size=300).map(Payload),
    id=INT64,
    msg_id=st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=64).map(MsgId),
)
acks = st.builds(
    PublishAck,
    id=INT64,
    topic=st.sampled_from([T, Topic("news/eu"), Topic("x" * 200)]),
    publisher=st.sampled_from([A, Ref("node-3.example:65535")]),
    seq=INT64,
    key=st.binary(min_size=16, max_size=16).map(PublicationKey),
    stored_by=st.sampled_from([A, Ref("h:1")]),
    local_seq=st.none() | INT64,
    durable=st.booleans(),
    duplicate=st.booleans(),
)
Full = Delivery | PublishRequest | PublishAck
#: The decoders that read a frame with every field present, by the message they make.
FULL_DECODERS = {Delivery: decode_delivery, PublishRequest: decode_publish_request, PublishAck: decode_publish_ack}
DELIVERY = Delivery(T, 7, A, 3, PublicationKey(bytes(16)), Payload(b"body"), 1700, 1600, MsgId("id-1"))
REQUEST = PublishRequest(T, Payload(b"body"), 7, MsgId("id-1"))
ACK = PublishAck(7, T, A, 3, PublicationKey(bytes(16)), Ref("h:1"), 12)


@settings(max_examples=600, deadline=None)
@given(msg=st.one_of(deliveries, requests, acks))
def test_full_frames_decode_the_same(msg: Full) -> None:
    payload = wire.encode(msg)[4:]
    assert FULL_DECODERS[type(msg)](payload) == msg == generic(payload)


def full_frame(msg: Full, **changes: object) -> bytes:
    """`msg` encoded, with fields changed, added, or left out (None)."""
    body = msgpack.unpackb(wire.encode(msg)[4:], raw=False)
    body.update(changes)
    return msgpack.packb({k: v for k, v in body.items() if v is not None}, use_bin_type=True)


ODD = [
    (DELIVERY, {"local_seq": "1"}),
    (DELIVERY, {"seq": 1 << 63}),
    (DELIVERY, {"key": b"short"}),
    (DELIVERY, {"publisher": "no-port"}),
    (DELIVERY, {"stored_at_ms": True}),
    (REQUEST, {"id": "1"}),
    (REQUEST, {"id": 1 << 63}),
    (REQUEST, {"id": True}),
    (REQUEST, {"payload": bytes(wire.MAX_PAYLOAD_BYTES + 1)}),
    (REQUEST, {"topic": ""}),
    (REQUEST, {"msg_id": "x" * 65}),
    (ACK, {"local_seq": "12"}),
    (ACK, {"local_seq": 1 << 63}),
    (ACK, {"durable": 1}),
    (ACK, {"stored_by": "no-port"}),
    (ACK, {"key": b"short"}),
    (ACK, {"seq": True}),
    *(
        (msg, change)
        for msg in (DELIVERY, REQUEST)
        for change in ({"v": True}, {"extra": 1}, {"payload": "text"}, {"topic": "a\x00b"}, {"msg_id": "has space"})
    ),
    *(
        (ACK, change)
        for change in ({"v": True}, {"extra": 1}, {"topic": "a\x00b"}, {"publisher": 5})
    ),
]


@pytest.mark.parametrize(("msg", "changes"), ODD)
def test_odd_full_frames_go_to_the_generic_decoder(msg: Full, changes: dict[str, object]) -> None:
    decoder = FULL_DECODERS[type(msg)]
    for payload in (full_frame(msg, **changes), full_frame(msg)[:-2]):
        assert decoder(payload) is None
        assert isinstance(generic(payload), str)  # the generic decoder refuses it, by code


def test_shorter_forms_go_to_the_generic_decoder() -> None:
    older = full_frame(DELIVERY, published_ms=None, msg_id=None)  # an older node's shorter frame
    assert decode_delivery(older) is None and isinstance(generic(older), Delivery)
    without_id = full_frame(REQUEST, msg_id=None)  # a client that sends no message id
    assert decode_publish_request(without_id) is None and isinstance(generic(without_id), PublishRequest)
    without_flags = full_frame(ACK, durable=None, duplicate=None)  # the defaults left out
    assert decode_publish_ack(without_flags) is None and generic(without_flags) == ACK


@pytest.mark.parametrize("msg", [DELIVERY, REQUEST, ACK])
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_mutated_full_frames_are_never_accepted_differently(msg: Full, data: st.DataObject) -> None:
    payload = bytearray(full_frame(msg))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    fast = FULL_DECODERS[type(msg)](bytes(payload))
    if fast is not None:
        assert fast == generic(bytes(payload))
