"""The fast decoders (`pubsub.skipring.hotpath`): the Spread, Delivery and PublishRequest
decoders accept exactly what the generic decoder accepts, and a forwarded batch reuses the bytes it arrived
as."""

from __future__ import annotations

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from pubsub.kernel import wire
from pubsub.kernel.message import Ref, Topic
from pubsub.skipring.antientropy import make_publication
from pubsub.skipring.hotpath import decode_delivery, decode_publish_request, decode_spread
from pubsub.skipring.messages import (
    Delivery, MsgId, Payload, Position, PublicationKey, PublicationList, PublishRequest, Spread,
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


def generic(payload: bytes) -> object:
    """What the generic decoder makes of `payload`: the message, or the WireError code."""
    saved = list(wire._FAST)
    wire._FAST.clear()
    try:
        return wire.decode(payload)
    except wire.WireError as exc:
        return exc.code
    finally:
        wire._FAST[:] = saved


def test_valid_frames_decode_the_same_and_keep_their_bytes() -> None:
    for n in (0, 1, 15, 16, 200):
        payload = frame(n)
        fast = decode_spread(payload)
        assert fast is not None and fast == generic(payload) == wire.decode(payload)
        assert isinstance(fast.publications, PublicationList) and fast.publications.packed
        forwarded = Spread(T, Ref("127.0.0.1:7002"), Position(4), Position(8), 5, 3, fast.publications)
        encoded = wire.encode(forwarded)[4:]
        assert encoded == msgpack.packb(msgpack.unpackb(encoded, raw=False), use_bin_type=True)
        assert wire.decode(encoded) == forwarded


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
        assert decode_spread(payload) is None
        assert isinstance(generic(payload), str)  # the generic decoder refuses it, by code


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_mutated_frames_are_never_accepted_differently(data: st.DataObject) -> None:
    payload = bytearray(frame(data.draw(st.integers(0, 5))))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    fast = decode_spread(bytes(payload))
    reference = generic(bytes(payload))
    if fast is not None:
        assert fast == reference


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
@given(msg=deliveries)
def test_delivery_frames_decode_the_same(msg: Delivery) -> None:
    payload = wire.encode(msg)[4:]
    assert decode_delivery(payload) == msg == generic(payload)


def delivery_frame(**changes: object) -> bytes:
    msg = Delivery(T, 7, A, 3, PublicationKey(bytes(16)), Payload(b"body"), 1700, 1600, MsgId("id-1"))
    body = msgpack.unpackb(wire.encode(msg)[4:], raw=False)
    body.update(changes)
    return msgpack.packb({k: v for k, v in body.items() if v is not None}, use_bin_type=True)


def test_odd_delivery_frames_go_to_the_generic_decoder() -> None:
    cases = [
        delivery_frame(local_seq="1"),
        delivery_frame(seq=1 << 63),
        delivery_frame(key=b"short"),
        delivery_frame(payload="text"),
        delivery_frame(publisher="no-port"),
        delivery_frame(topic="a\x00b"),
        delivery_frame(msg_id="has space"),
        delivery_frame(stored_at_ms=True),
        delivery_frame(v=True),
        delivery_frame(extra=1),
        delivery_frame()[:-2],
    ]
    for payload in cases:
        assert decode_delivery(payload) is None
        assert isinstance(generic(payload), str)  # the generic decoder refuses it, by code
    older = delivery_frame(published_ms=None, msg_id=None)  # an older node's shorter frame
    assert decode_delivery(older) is None and isinstance(generic(older), Delivery)


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_mutated_delivery_frames_are_never_accepted_differently(data: st.DataObject) -> None:
    payload = bytearray(delivery_frame())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    fast = decode_delivery(bytes(payload))
    if fast is not None:
        assert fast == generic(bytes(payload))


requests = st.builds(
    PublishRequest,
    topic=st.sampled_from([T, Topic("news/eu"), Topic("x" * 200)]),
    payload=st.binary(max_size=300).map(Payload),
    id=INT64,
    msg_id=st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=64).map(MsgId),
)


@settings(max_examples=300, deadline=None)
@given(msg=requests)
def test_publish_request_frames_decode_the_same(msg: PublishRequest) -> None:
    payload = wire.encode(msg)[4:]
    assert decode_publish_request(payload) == msg == generic(payload)


def request_frame(**changes: object) -> bytes:
    body = msgpack.unpackb(wire.encode(PublishRequest(T, Payload(b"body"), 7, MsgId("id-1")))[4:], raw=False)
    body.update(changes)
    return msgpack.packb({k: v for k, v in body.items() if v is not None}, use_bin_type=True)


def test_odd_publish_request_frames_go_to_the_generic_decoder() -> None:
    cases = [
        request_frame(id="1"),
        request_frame(id=1 << 63),
        request_frame(id=True),
        request_frame(payload="text"),
        request_frame(payload=bytes(wire.MAX_PAYLOAD_BYTES + 1)),
        request_frame(topic="a\x00b"),
        request_frame(topic=""),
        request_frame(msg_id="has space"),
        request_frame(msg_id="x" * 65),
        request_frame(v=True),
        request_frame(extra=1),
        request_frame()[:-2],
    ]
    for payload in cases:
        assert decode_publish_request(payload) is None
        assert isinstance(generic(payload), str)  # the generic decoder refuses it, by code
    without_id = request_frame(msg_id=None)  # a client that sends no message id
    assert decode_publish_request(without_id) is None and isinstance(generic(without_id), PublishRequest)


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_mutated_publish_request_frames_are_never_accepted_differently(data: st.DataObject) -> None:
    payload = bytearray(request_frame())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    fast = decode_publish_request(bytes(payload))
    if fast is not None:
        assert fast == generic(bytes(payload))
