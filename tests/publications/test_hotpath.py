"""The fast decoders (`pubsub.publications.hotpath`, and the compiled ones of
`pubsub/publications/_chotpath.pyx`): the Spread, Delivery, PublishRequest and PublishAck decoders
accept exactly what the generic decoder accepts and build the same messages, and a forwarded
batch reuses the bytes it arrived as."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz.checks import every_field
from pubsub.kernel import wire
from pubsub.kernel.message import Ref, Topic
from pubsub.publications import hotpath, signatures
from pubsub.publications.antientropy import AntiEntropy
from pubsub.publications.topicstate import make_publication

try:
    from pubsub.publications import _chotpath
except ImportError as exc:  # `make venv` builds it: failing here means that build failed
    pytest.fail(f"the compiled decoders were not built ({exc}); see `make venv`'s output", pytrace=False)
from pubsub.publications.hotpath import decode_delivery, decode_publish_ack, decode_publish_request, decode_spread
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


def every_way(payload: bytes) -> list[Spread | None]:
    """`decode_spread(payload)` by the streaming reader, then by the one-call reader, then
    the compiled decoder's answer."""
    saved = hotpath.KEEP_BYTES_FROM
    try:
        found = []
        for threshold in (STREAMED, IN_ONE_CALL):
            hotpath.KEEP_BYTES_FROM = threshold
            found.append(decode_spread(payload))
        return [*found, _chotpath.decode_spread(payload)]
    finally:
        hotpath.KEEP_BYTES_FROM = saved


def test_the_codec_uses_the_compiled_decoders() -> None:
    """`make venv` builds them; every daemon then reads Spreads and Deliveries with them."""
    decoders = {prefix: decoder for prefix, decoder in wire._FAST}
    assert hotpath.COMPILED
    assert decoders[wire.fast_prefix("spread", 7)] is _chotpath.decode_spread
    assert decoders[wire.fast_prefix("delivery", 9)] is _chotpath.decode_delivery
    assert decoders[wire.fast_prefix("publish_request", 4)] is _chotpath.decode_publish_request
    assert decoders[wire.fast_prefix("publish_ack", 9)] is _chotpath.decode_publish_ack


def test_valid_frames_decode_the_same_and_large_ones_keep_their_bytes() -> None:
    for n in (0, 1, 15, 16, 200):
        payload = frame(n)
        keeps = len(payload) >= hotpath.KEEP_BYTES_FROM
        assert keeps == (n == 200)  # (these publications are small: 1 byte of payload or so)
        fast = decode_spread(payload)
        assert fast is not None and fast == generic(payload) == wire.decode(payload)
        assert isinstance(fast.publications, PublicationList)
        assert bool(fast.publications.packed) == keeps
        compiled = _chotpath.decode_spread(payload)
        assert compiled is not None and compiled.publications.packed  # it always keeps them
        for decoded in every_way(payload):
            assert every_field(decoded) == every_field(fast)
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
    for decoded in every_way(payload):
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
        assert every_way(payload) == [None, None, None]
        assert isinstance(generic(payload), str)  # the generic decoder refuses it, by code


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_mutated_frames_are_never_accepted_differently(data: st.DataObject) -> None:
    payload = bytearray(frame(data.draw(st.integers(0, 5))))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    reference = generic(bytes(payload))
    for fast in every_way(bytes(payload)):
        if fast is not None:
            assert every_field(fast) == every_field(reference)


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
FULL_DECODERS: dict[type, list[Callable[[bytes], object]]] = {
    Delivery: [decode_delivery, _chotpath.decode_delivery],
    PublishRequest: [decode_publish_request, _chotpath.decode_publish_request],
    PublishAck: [decode_publish_ack, _chotpath.decode_publish_ack],
}
DELIVERY = Delivery(T, 7, A, 3, PublicationKey(bytes(16)), Payload(b"body"), 1700, 1600, MsgId("id-1"))
REQUEST = PublishRequest(T, Payload(b"body"), 7, MsgId("id-1"))
ACK = PublishAck(7, T, A, 3, PublicationKey(bytes(16)), Ref("h:1"), 12)


@settings(max_examples=600, deadline=None)
@given(msg=st.one_of(deliveries, requests, acks))
def test_full_frames_decode_the_same(msg: Full) -> None:
    payload = wire.encode(msg)[4:]
    for decoder in FULL_DECODERS[type(msg)]:
        assert every_field(decoder(payload)) == every_field(msg) == every_field(generic(payload))


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
    (ACK, {"local_seq": False}),
    (ACK, {"duplicate": 0}),
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
    for payload in (full_frame(msg, **changes), full_frame(msg)[:-2]):
        assert [decoder(payload) for decoder in FULL_DECODERS[type(msg)]] == [None] * len(FULL_DECODERS[type(msg)])
        assert isinstance(generic(payload), str)  # the generic decoder refuses it, by code


def test_shorter_forms_go_to_the_generic_decoder() -> None:
    older = full_frame(DELIVERY, published_ms=None, msg_id=None)  # an older node's shorter frame
    assert decode_delivery(older) is None and isinstance(generic(older), Delivery)
    assert _chotpath.decode_delivery(older) is None
    without_id = full_frame(REQUEST, msg_id=None)  # a client that sends no message id
    assert isinstance(generic(without_id), PublishRequest)
    assert [decoder(without_id) for decoder in FULL_DECODERS[PublishRequest]] == [None, None]
    without_flags = full_frame(ACK, durable=None, duplicate=None)  # the defaults left out
    assert generic(without_flags) == ACK
    assert [decoder(without_flags) for decoder in FULL_DECODERS[PublishAck]] == [None, None]


@pytest.mark.parametrize("msg", [DELIVERY, REQUEST, ACK])
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_mutated_full_frames_are_never_accepted_differently(msg: Full, data: st.DataObject) -> None:
    payload = bytearray(full_frame(msg))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    for decoder in FULL_DECODERS[type(msg)]:
        fast = decoder(bytes(payload))
        if fast is not None:
            assert every_field(fast) == every_field(generic(bytes(payload)))


# --- the compiled decoders, byte by byte -------------------------------------------------------
# The compiled decoders parse msgpack themselves, so they are also fed every form msgpack has
# for a value (a small number written in 64 bits, a short text in a str 16), and values at
# and beyond each bound, written by this small packer; they must agree with the Python
# decoders (which read through msgpack) on every frame, and with the generic decoder on
# every frame they accept.
def int_forms(v: int) -> list[bytes]:
    """Every msgpack encoding of the integer `v`."""
    forms = [struct.pack(">B", v)] if 0 <= v <= 0x7F else [struct.pack(">b", v)] if -32 <= v < 0 else []
    for tag, fmt, low, high in (
        (0xCC, "B", 0, 1 << 8), (0xCD, "H", 0, 1 << 16), (0xCE, "I", 0, 1 << 32), (0xCF, "Q", 0, 1 << 64),
        (0xD0, "b", -(1 << 7), 1 << 7), (0xD1, "h", -(1 << 15), 1 << 15), (0xD2, "i", -(1 << 31), 1 << 31),
        (0xD3, "q", -(1 << 63), 1 << 63),
    ):
        if low <= v < high:
            forms.append(bytes([tag]) + struct.pack(">" + fmt, v))
    return forms


def sized_forms(n: int, fix: tuple[int, int] | None, tags: tuple[int, ...], widths: tuple[str, ...]) -> list[bytes]:
    """Every header of a str, bin or array of length `n`: the fix form (below its limit,
    tag) if any, then the sized forms."""
    forms = [bytes([fix[1] | n])] if fix and n < fix[0] else []
    sized = zip(tags, widths, strict=True)
    return forms + [bytes([tag]) + struct.pack(">" + w, n) for tag, w in sized if n < 1 << (8 * struct.calcsize(w))]


def str_forms(raw: bytes) -> list[bytes]:
    return [h + raw for h in sized_forms(len(raw), (32, 0xA0), (0xD9, 0xDA, 0xDB), ("B", "H", "I"))]


def bin_forms(raw: bytes) -> list[bytes]:
    return [h + raw for h in sized_forms(len(raw), None, (0xC4, 0xC5, 0xC6), ("B", "H", "I"))]


def array_forms(n: int) -> list[bytes]:
    return sized_forms(n, (16, 0x90), (0xDC, 0xDD), ("H", "I"))


def field(name: str) -> bytes:
    return bytes(msgpack.packb(name))


#: Values within each bound ("good"), and values at and beyond each bound ("edge", some
#: of them valid); a frame draws each of its fields from the good ones but for one field
#: or none, so that about half of the frames are valid.
_POSITIVE = st.sampled_from([0, 1, 127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, (1 << 63) - 1])
GOOD = {
    "int64": _POSITIVE | st.sampled_from([-1, -32, -33, -129, -(1 << 63)]) | st.integers(-(1 << 63), (1 << 63) - 1),
    "position": _POSITIVE | st.sampled_from([1 << 63, (1 << 64) - 1]) | st.integers(0, (1 << 64) - 1),
    "count": _POSITIVE | st.integers(0, (1 << 63) - 1),
    "prev": st.just(-1) | _POSITIVE,
    "topic": st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=40).map(str.encode)
    | st.sampled_from(["é" * 256, "x" * 256, "a\xa0b"]).map(str.encode),
    "ref": st.sampled_from([A, "h:1", "node-3.example:65535"]).map(str.encode),
    "key": st.binary(min_size=16, max_size=16),
    "payload": st.binary(max_size=300),
    "msg_id": st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=64).map(str.encode),
    "proof": st.binary(max_size=80),
    "width": st.integers(4, 8),
    "flag": st.booleans(),
    "optional int64": st.none() | _POSITIVE | st.integers(-(1 << 63), (1 << 63) - 1),
}
_INTEGERS = st.sampled_from([
    -1, -2, -(1 << 63), (1 << 63) - 1, 1 << 63, (1 << 64) - 1, -(1 << 63) - 1,
]) | st.integers(-(1 << 64), (1 << 64) - 1)
EDGE = {
    **dict.fromkeys(["int64", "position", "count", "prev"], _INTEGERS),
    "topic": (st.text(max_size=300) | st.sampled_from(["", "é" * 257, "a\x85b", "a\x7fb", "a\x9fb", "a\x00"]))
    .map(lambda t: t.encode("utf-8", "surrogatepass"))
    | st.sampled_from([b"\xc2", b"\xff", b"a\xc2\x85", b"\xed\xa0\x80"]),
    "ref": st.sampled_from(["no-port", "h:0", "h:65536", "bad host:1", "", "h:1\x00", "é:1"]).map(str.encode),
    "key": st.binary(min_size=15, max_size=17),
    "payload": st.binary(max_size=300),
    "msg_id": (st.text(st.characters(min_codepoint=0, max_codepoint=0x200), max_size=66)
               | st.sampled_from(["~" * 65, "a b", "\x7f"])).map(lambda t: t.encode("utf-8", "surrogatepass")),
    "proof": st.binary(min_size=signatures.MAX_PROOF_BYTES, max_size=signatures.MAX_PROOF_BYTES + 1),
    "width": st.sampled_from([0, 3, 9]),
    "flag": st.sampled_from([0, 1, None]),
    "optional int64": _INTEGERS | st.just(False),
}
def value_forms(v: object) -> list[bytes]:
    """Every msgpack encoding of nil, a boolean or an integer."""
    if v is None or type(v) is bool:
        return [{None: b"\xc0", False: b"\xc2", True: b"\xc3"}[v]]
    assert isinstance(v, int)
    return int_forms(v)


FORMS = {
    "flag": value_forms, "optional int64": value_forms, "int64": int_forms, "position": int_forms, "count": int_forms, "prev": int_forms,
    "topic": str_forms, "ref": str_forms, "msg_id": str_forms, "key": bin_forms, "payload": bin_forms,
    "proof": bin_forms,
}


class Fields:
    """Draws a frame's fields one after the other, each from its good values but for the
    one numbered `broken`, drawn from the edge values."""

    def __init__(self, data: st.DataObject, fields: int) -> None:
        self.data, self.drawn = data, 0
        self.broken = data.draw(st.integers(0, 2 * fields))  # none broken about half the time

    def value(self, kind: str) -> object:
        broken = self.drawn == self.broken
        self.drawn += 1
        return self.data.draw((EDGE if broken else GOOD)[kind])

    def __call__(self, kind: str) -> bytes:
        forms = FORMS[kind](self.value(kind))
        if not forms or (self.drawn - 1 == self.broken and self.data.draw(st.integers(0, 4)) == 0):
            return b"\xc0"  # (a value with no form, or a broken field's: nil, a wrong type)
        return self.data.draw(st.sampled_from(forms))


PUBLICATION = ["key", "ref", "count", "payload", "count", "prev", "msg_id", "proof"]


def drawn_publication(data: st.DataObject, draw: Fields) -> bytes:
    width = draw.value("width")
    assert isinstance(width, int)
    fields = [draw(kind) for kind in PUBLICATION] + [b"\x01"]
    return data.draw(st.sampled_from(array_forms(width))) + b"".join(fields[:width])


@settings(max_examples=250, deadline=None)
@given(data=st.data())
def test_the_compiled_spread_decoder_reads_every_form_as_the_python_one(data: st.DataObject) -> None:
    count = data.draw(st.integers(0, 3) | st.integers(0, 18))
    draw = Fields(data, 6 + 9 * count)
    payload = b"".join([
        wire.fast_prefix("spread", 7),
        field("topic"), draw("topic"), field("sender"), draw("ref"),
        field("start"), draw("position"), field("end"), draw("position"),
        field("levels"), draw("int64"), field("hops"), draw("int64"),
        field("publications"), data.draw(st.sampled_from(array_forms(count))),
        *(drawn_publication(data, draw) for _ in range(count)),
    ])
    compiled, python = _chotpath.decode_spread(payload), decode_spread(payload)
    assert every_field(compiled) == every_field(python)
    if compiled is not None:
        assert every_field(compiled) == every_field(generic(payload))


#: The fields of the frames with every field present, in the order the codec writes them,
#: and the kind of value each holds.
FULL_FIELDS: dict[type[Full], list[tuple[str, str]]] = {
    Delivery: [
        ("topic", "topic"), ("local_seq", "int64"), ("publisher", "ref"), ("seq", "int64"), ("key", "key"),
        ("payload", "payload"), ("stored_at_ms", "int64"), ("published_ms", "int64"), ("msg_id", "msg_id"),
    ],
    PublishRequest: [("topic", "topic"), ("payload", "payload"), ("id", "int64"), ("msg_id", "msg_id")],
    PublishAck: [
        ("id", "int64"), ("topic", "topic"), ("publisher", "ref"), ("seq", "int64"), ("key", "key"),
        ("stored_by", "ref"), ("local_seq", "optional int64"), ("durable", "flag"), ("duplicate", "flag"),
    ],
}


@pytest.mark.parametrize("cls", list(FULL_FIELDS))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_compiled_full_decoders_read_every_form_as_the_python_ones(cls: type[Full], data: st.DataObject) -> None:
    fields = FULL_FIELDS[cls]
    draw = Fields(data, len(fields))
    payload = b"".join([
        wire.fast_prefix(cls.kind, len(fields)),
        *(field(name) + draw(kind) for name, kind in fields),
        data.draw(st.sampled_from([b"", b"", b"\x00"])),  # now and then a byte too many
    ])
    python, compiled = (decoder(payload) for decoder in FULL_DECODERS[cls])
    assert every_field(compiled) == every_field(python)
    if compiled is not None:
        assert every_field(compiled) == every_field(generic(payload))


#: A field of a frame at or just beyond one of its bounds, and whether that frame is valid;
#: "item" changes the second publication of the Spread ([key, publisher, seq, payload,
#: published_ms, prev, msg_id, proof]) by position.
BOUNDS: list[tuple[str, dict[object, object], bool]] = [
    *(("both", {"topic": topic}, ok) for topic, ok in (
        ("é" * 256, True), ("x" * 256, True), ("a\xa0b", True), ("\u2028", True), ("é" * 257, False),
        ("x" * 257, False), ("", False), ("a\x85b", False), ("a\x9fb", False), ("a\x7fb", False), ("a\x1fb", False),
    )),
    *(("both", {field: ref}, ok) for field in ("sender", "publisher") for ref, ok in (
        ("h:65535", True), ("h:0", False), ("h:65536", False), ("h", False), ("b c:1", False),
    )),
    *(("spread", {"start": v, "end": v}, ok) for v, ok in (((1 << 64) - 1, True), (0, True), (-1, False))),
    *(("both", {field: v}, ok) for field in ("levels", "hops", "local_seq", "stored_at_ms", "published_ms")
      for v, ok in ((-(1 << 63), True), ((1 << 63) - 1, True), (1 << 63, False))),
    *(("item", {2: v}, ok) for v, ok in ((0, True), ((1 << 63) - 1, True), (-1, False), (1 << 63, False))),
    *(("item", {4: v}, ok) for v, ok in ((0, True), ((1 << 63) - 1, True), (-1, False), (1 << 63, False))),
    *(("item", {5: v}, ok) for v, ok in ((-1, True), ((1 << 63) - 1, True), (-2, False), (1 << 63, False))),
    *(("item", {6: v}, ok) for v, ok in (("!" * 64, True), ("~", True), ("!" * 65, False), (" ", False), ("\x7f", False))),
    *(("item", {7: bytes(n)}, n <= signatures.MAX_PROOF_BYTES)
      for n in (0, signatures.MAX_PROOF_BYTES, signatures.MAX_PROOF_BYTES + 1)),
    *(("item", {0: bytes(n)}, n == 16) for n in (15, 16, 17)),
    *(("item", {"width": n}, 4 <= n <= 8) for n in (3, 4, 8, 9)),
    ("delivery", {"key": bytes(15)}, False),
    ("delivery", {"msg_id": "!" * 65}, False),
]


def bound_frames(where: str, changes: dict[object, object]) -> list[bytes]:
    """The frames (Spread, Delivery or both) with `changes` made, written by msgpack."""
    frames = []
    body = msgpack.unpackb(frame(3), raw=False)
    if where in ("spread", "item") or (where == "both" and changes.keys() & {*body, "publisher"}):
        if where == "item":
            item = body["publications"][1]
            item += [0, -1, "", b""][len(item) - 4 :]  # every field of the full form
            for position, value in changes.items():
                if position == "width":
                    assert isinstance(value, int)
                    item = (item + [b"x"])[:value]
                else:
                    item[position] = value
            body["publications"][1] = item
        elif "publisher" in changes:
            body["publications"][1][1] = changes["publisher"]
        else:
            body.update((k, v) for k, v in changes.items() if k in body)
        frames.append(msgpack.packb(body, use_bin_type=True))
    body = msgpack.unpackb(wire.encode(DELIVERY)[4:], raw=False)
    if where == "delivery" or (where == "both" and changes.keys() & body.keys()):
        body.update((k, v) for k, v in changes.items() if k in body)
        frames.append(msgpack.packb(body, use_bin_type=True))
    assert frames, f"no frame has {changes}"
    return frames


@pytest.mark.parametrize(("where", "changes", "valid"), BOUNDS)
def test_the_compiled_decoders_draw_each_bound_where_the_generic_one_does(
    where: str, changes: dict[object, object], valid: bool
) -> None:
    for payload in bound_frames(where, changes):
        is_spread = payload.startswith(wire.fast_prefix("spread", 7))
        compiled = (_chotpath.decode_spread if is_spread else _chotpath.decode_delivery)(payload)
        python = (decode_spread if is_spread else decode_delivery)(payload)
        reference = generic(payload)
        assert isinstance(reference, (Spread, Delivery)) == valid
        assert every_field(compiled) == every_field(python) == every_field(reference if valid else None)


def test_the_compiled_decoders_leave_other_orders_and_types_to_the_generic_one() -> None:
    """They read the fields in the order this codec writes them; a peer's other order is
    valid and reaches the generic decoder (so does anything that is not `bytes`)."""
    spread = frame(3)
    body = msgpack.unpackb(spread, raw=False)
    reordered = msgpack.packb({"v": body["v"], "t": body["t"], **dict(reversed(list(body.items())[2:]))})
    assert _chotpath.decode_spread(reordered) is None and generic(reordered) == generic(spread)
    delivery = wire.encode(DELIVERY)[4:]
    body = msgpack.unpackb(delivery, raw=False)
    reordered = msgpack.packb({"v": body["v"], "t": body["t"], **dict(reversed(list(body.items())[2:]))})
    assert _chotpath.decode_delivery(reordered) is None and generic(reordered) == DELIVERY
    for decoder, payload in ((_chotpath.decode_spread, spread), (_chotpath.decode_delivery, delivery)):
        assert decoder(payload) is not None
        assert decoder(bytearray(payload)) is None and decoder(memoryview(payload)) is None
