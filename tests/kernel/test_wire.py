"""The wire codec (`pubsub.kernel.wire`): round trips, every validation error, size limits, fuzzing."""

from __future__ import annotations

import dataclasses
import struct
import typing
from typing import Any, Literal

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cores.language.filters import Filter
from broker.cores.language.predicates import Predicate
from broker.cores.messages import Attrs
from pubsub.clique import messages as clique_messages  # noqa: F401  every overlay's kinds, whatever ran first
from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Hello, Reply
from pubsub.kernel.message import MESSAGE_TYPES, Message, Ref, Topic
from pubsub.kernel.wire import WireError, decode, encode
from pubsub.omen import messages as omen_messages  # noqa: F401
from pubsub.omen.views import Descriptor
from pubsub.publications import fields
from pubsub.publications.messages import (
    CertificateDer,
    CheckAndPublish,
    CheckTrie,
    KeyId,
    MsgId,
    NodeDigest,
    Payload,
    Position,
    Publication,
    PublicationKey,
    Publish,
    PublishNew,
)
from pubsub.publications.trie import TrieLabel, publication_key
from pubsub.skipring.labels import Label
from pubsub.skipring.messages import Contact, Ping, SetData
from pubsub.tco import messages as tco_messages  # noqa: F401

# --- strategies derived from the message annotations -------------------------------------------
topics = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=256
).map(Topic)
refs = st.builds(
    lambda host, port: Ref(f"{host}:{port}"),
    st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True),
    st.integers(1, 65535),
)
labels = st.text(alphabet="01", min_size=1, max_size=64).map(Label)
contacts = st.builds(Contact, labels, refs)
trie_labels = st.text(alphabet="01", max_size=128).map(TrieLabel.from_bits)
digests = st.builds(NodeDigest, trie_labels, st.binary(min_size=16, max_size=16))
publications = st.builds(
    Publication,
    st.binary(min_size=16, max_size=16),
    refs,
    st.integers(0, wire.INT64_MAX),
    st.binary(max_size=64),
    proof=st.binary(max_size=200),
)
json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(wire.INT64_MIN, wire.INT64_MAX)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


# The broker mode's field types (`broker.cores.messages`): filters and publication attributes.
attr_names = st.sampled_from(["a", "b", "price", "sym.x"])
attr_values = (
    st.integers(-(1 << 63), (1 << 63) - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
predicates = st.one_of(
    st.builds(Predicate, attr_names, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), attr_values),
    st.builds(Predicate, attr_names, st.just("prefix"), st.text(max_size=8)),
    st.builds(Predicate, attr_names, st.just("exists"), st.none()),
)
filters = st.lists(predicates, max_size=4).map(lambda ps: Filter(tuple(ps)))
attr_maps = st.dictionaries(attr_names, attr_values, min_size=1, max_size=4).map(Attrs)


def strategy_for(annotation: Any) -> st.SearchStrategy[Any]:
    if annotation is Filter:
        return filters
    if annotation is Attrs:
        return attr_maps
    if annotation is Topic:
        return topics
    if annotation is Ref:
        return refs
    if annotation is Label:
        return labels
    if annotation is Contact:
        return contacts
    if annotation is int:
        return st.integers(wire.INT64_MIN, wire.INT64_MAX)
    if annotation is bool:
        return st.booleans()
    if annotation is str:
        return st.text(max_size=wire.MAX_STR_CHARS)
    if annotation is bytes:
        return st.binary(max_size=64)
    if annotation is Payload:
        return st.binary(max_size=64)
    if annotation is PublicationKey:
        return st.binary(min_size=16, max_size=16)
    if annotation is KeyId:
        return st.binary(min_size=16, max_size=16)
    if annotation is CertificateDer:
        return st.binary(max_size=600)
    if annotation is Position:
        return st.integers(0, (1 << 64) - 1)
    if annotation is MsgId:
        return st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=64)
    if annotation is TrieLabel:
        return trie_labels
    if annotation is NodeDigest:
        return digests
    if annotation is Publication:
        return publications
    if annotation is Descriptor:
        return st.builds(
            Descriptor, refs, st.frozensets(topics, max_size=4), st.frozensets(refs, max_size=4),
            st.integers(wire.INT64_MIN, wire.INT64_MAX),
        )
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list:
        return st.lists(strategy_for(args[0]), max_size=4)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(strategy_for(args[0]), max_size=4).map(tuple)
    if origin is tuple:  # a fixed-length tuple, e.g. tco's (reference, topics) pairs
        return st.tuples(*(strategy_for(arg) for arg in args))
    if origin is Literal:
        return st.sampled_from(args)
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), json_like, max_size=5)
    if type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return st.none() | strategy_for(inner)
    registered = wire.FIELD_TYPES.get(annotation)
    supertype = getattr(annotation, "__supertype__", None)
    if registered is not None and supertype is not None:
        # a mode's own type (e.g. an overlay's): its underlying values that its check keeps
        check = registered[0]
        return strategy_for(supertype).map(lambda v: _checked(check, v)).filter(lambda v: v is not _REFUSED)
    raise AssertionError(f"no strategy for {annotation!r}")


_REFUSED = object()


def _checked(check: Any, value: Any) -> Any:
    try:
        return check(value)
    except wire.WireError:
        return _REFUSED


def messages_of(cls: type) -> st.SearchStrategy[Message]:
    hints = typing.get_type_hints(cls)
    return st.builds(cls, **{f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(cls)})


any_message = st.one_of([messages_of(cls) for cls in MESSAGE_TYPES.values()])


def payload(obj: object) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def frame_of(kind: str, **fields: Any) -> bytes:
    return payload({"v": 1, "t": kind, **fields})


# --- round trips -------------------------------------------------------------------------------
def test_every_registered_message_has_a_schema() -> None:
    wire.check_schemas()
    assert "hello" in MESSAGE_TYPES


@pytest.mark.parametrize("kind", sorted(MESSAGE_TYPES))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_round_trip(kind: str, data: st.DataObject) -> None:
    msg = data.draw(messages_of(MESSAGE_TYPES[kind]))
    frame = encode(msg)
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    back = decode(frame[4:])
    assert type(back) is type(msg)
    assert back == msg


@pytest.mark.parametrize("kind", sorted(MESSAGE_TYPES))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_the_generic_encoder_writes_v_t_then_the_fields_in_declared_order(kind: str, data: st.DataObject) -> None:
    msg = data.draw(messages_of(MESSAGE_TYPES[kind]))
    spec = wire.spec(kind)
    keys = list(msgpack.unpackb(wire.encode_payload(msg), raw=False, strict_map_key=False))
    declared = [f.name for f in spec.fields]
    packed_last = [name for name, _ in spec.encoders]  # fields that may travel as Packed come last
    assert keys[:2] == ["v", "t"]
    assert [k for k in keys[2:] if k not in packed_last] == [k for k in declared if k not in packed_last]
    assert sorted(keys[2:]) == sorted(declared)


def test_a_message_missing_a_field_value_is_unencodable() -> None:
    hollow = object.__new__(Ping)  # a slot never set: reading it raises AttributeError
    with pytest.raises(WireError) as info:
        encode(hollow)
    assert info.value.code == "unencodable"


def test_the_map_writer_takes_only_identifiers_as_field_names() -> None:
    assert wire._body_writer("ping", ("nonce",))(Ping(nonce=3)) == {"v": 1, "t": "ping", "nonce": 3}
    for names in (("a b",), ("x", "import os"), ("class",)):
        with pytest.raises(TypeError):
            wire._body_writer("ping", names)


def test_frame_layout() -> None:
    frame = encode(Ping(nonce=5))
    assert msgpack.unpackb(frame[4:]) == {"v": 1, "t": "ping", "nonce": 5}
    frame = encode(SetData(Topic("t"), Contact(Label("01"), Ref("h:1")), None, None))
    assert msgpack.unpackb(frame[4:])["pred"] == ["01", "h:1"]


def test_defaults_may_be_omitted() -> None:
    assert decode(frame_of("reply")) == Reply(body={})


# --- every error code --------------------------------------------------------------------------
def code_of(data: bytes, max_frame: int = wire.DEFAULT_MAX_FRAME) -> str:
    with pytest.raises(WireError) as info:
        decode(data, max_frame)
    assert info.value.code in wire.ERROR_CODES
    return info.value.code


@pytest.mark.parametrize(
    "data",
    [b"", b"\xc1", payload({"v": 1, "t": "ping", "nonce": 1}) + b"\x00", b"\x92\x01", b"\xa5ab"],
    ids=["empty", "reserved-byte", "trailing-bytes", "short-array", "short-string"],
)
def test_bad_msgpack(data: bytes) -> None:
    assert code_of(data) == "bad_msgpack"


def test_bad_msgpack_ext_and_non_string_keys() -> None:
    assert (
        code_of(payload({"v": 1, "t": "ping", "nonce": msgpack.ExtType(1, b"x")})) == "bad_msgpack"
    )
    assert code_of(payload({1: 1})) == "bad_msgpack"
    assert code_of(b"\x81\xa1v\xa1\xff") == "bad_msgpack"  # {"v": <invalid UTF-8>}


@pytest.mark.parametrize("obj", [[1, 2], "text", 5, None, b"bytes"])
def test_not_a_map(obj: object) -> None:
    assert code_of(payload(obj)) == "not_a_map"


@pytest.mark.parametrize("version", [None, 2, 0, True, "1", 1.0])
def test_bad_version(version: object) -> None:
    body: dict[str, Any] = {"t": "ping", "nonce": 1}
    if version is not None:
        body["v"] = version
    assert code_of(payload(body)) == "bad_version"


@pytest.mark.parametrize("kind", ["nope", 7, None, "", "Ping"])
def test_unknown_type(kind: object) -> None:
    assert code_of(payload({"v": 1, "t": kind})) == "unknown_type"


def test_missing_field() -> None:
    assert code_of(payload({"v": 1})) == "missing_field"
    assert code_of(frame_of("ping")) == "missing_field"
    assert code_of(frame_of("set_data", topic="t", pred=None, label=None)) == "missing_field"


def nested(depth: int) -> dict[str, Any]:
    """A map nested `depth` levels deep."""
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


BAD_FIELDS: list[tuple[str, dict[str, Any]]] = [
    # unknown extra field
    ("ping", {"nonce": 1, "extra": 2}),
    # int
    ("ping", {"nonce": True}),
    ("ping", {"nonce": 1.5}),
    ("ping", {"nonce": 1 << 63}),
    ("ping", {"nonce": "1"}),
    # topic
    ("join", {"topic": ""}),
    ("join", {"topic": "x" * 257}),
    ("join", {"topic": "a\nb"}),
    ("join", {"topic": "a\x7fb"}),
    ("join", {"topic": 3}),
    ("join", {"topic": None}),
    # ref
    ("suspect", {"ref": "nohost"}),
    ("suspect", {"ref": "h:0"}),
    ("suspect", {"ref": "h:65536"}),
    ("suspect", {"ref": "h:+80"}),
    ("suspect", {"ref": ":80"}),
    ("suspect", {"ref": "bad host:80"}),
    ("suspect", {"ref": "a" * 254 + ":80"}),
    ("suspect", {"ref": "[::1]:80"}),
    ("suspect", {"ref": ["h", 80]}),
    # label and contact
    ("check", {"topic": "t", "sender": ["0", "h:1"], "label": "", "flag": "LIN"}),
    ("check", {"topic": "t", "sender": ["0", "h:1"], "label": "012", "flag": "LIN"}),
    ("check", {"topic": "t", "sender": ["0", "h:1"], "label": "1" * 65, "flag": "LIN"}),
    ("check", {"topic": "t", "sender": ["0", "h:1"], "label": 1, "flag": "LIN"}),
    ("check", {"topic": "t", "sender": ["0"], "label": "1", "flag": "LIN"}),
    ("check", {"topic": "t", "sender": ["0", "h:1", "x"], "label": "1", "flag": "LIN"}),
    ("check", {"topic": "t", "sender": {"label": "0"}, "label": "1", "flag": "LIN"}),
    ("check", {"topic": "t", "sender": None, "label": "1", "flag": "LIN"}),
    ("check", {"topic": "t", "sender": ["2", "h:1"], "label": "1", "flag": "LIN"}),
    # flag
    ("check", {"topic": "t", "sender": ["0", "h:1"], "label": "1", "flag": "XYZ"}),
    ("check", {"topic": "t", "sender": ["0", "h:1"], "label": "1", "flag": None}),
    # optional contact present but malformed
    ("set_data", {"topic": "t", "pred": ["0"], "label": None, "succ": None}),
    # str
    ("error", {"code": "x", "detail": "y" * 4097}),
    ("error", {"code": 1, "detail": "y"}),
    ("hello", {"ref": None, "role": None}),
    # map body
    ("reply", {"body": [1, 2]}),
    ("reply", {"body": {"a": b"bytes"}}),
    ("reply", {"body": nested(wire.MAX_BODY_DEPTH + 1)}),
]


@pytest.mark.parametrize(("kind", "fields"), BAD_FIELDS)
def test_bad_field(kind: str, fields: dict[str, Any]) -> None:
    assert code_of(frame_of(kind, **fields)) == "bad_field"


def test_valid_edge_values() -> None:
    assert decode(frame_of("reply", body=nested(wire.MAX_BODY_DEPTH))).body == nested(  # type: ignore[attr-defined]
        wire.MAX_BODY_DEPTH
    )
    assert decode(frame_of("suspect", ref="a" * 253 + ":65535")).ref == "a" * 253 + ":65535"
    assert decode(frame_of("suspect", ref="10.0.0.1:1")).ref == "10.0.0.1:1"
    assert decode(frame_of("join", topic="é" * 256)).topic == "é" * 256
    assert decode(frame_of("ping", nonce=wire.INT64_MIN)).nonce == wire.INT64_MIN
    msg = decode(frame_of("set_data", topic="t", pred=None, label="1" * 64, succ=None))
    assert isinstance(msg, SetData) and msg.label == Label("1" * 64)
    assert decode(frame_of("hello", ref=None, role="client")) == Hello(ref=None, role="client")


def test_frame_too_large() -> None:
    header = struct.pack(">I", 2000)
    with pytest.raises(WireError) as info:
        wire.frame_length(header, max_frame=1999)
    assert info.value.code == "frame_too_large"
    assert wire.frame_length(header, max_frame=2000) == 2000
    assert (
        code_of(frame_of("error", code="x", detail="y" * 3000), max_frame=2000) == "frame_too_large"
    )
    with pytest.raises(WireError) as info:
        encode(ErrorReply(code="x", detail="y" * 3000), max_frame=2000)
    assert info.value.code == "frame_too_large"
    assert len(encode(ErrorReply(code="x", detail="y" * 3000))) > 3000  # default max is 1 MiB


def test_unencodable() -> None:
    for body in ({"x": object()}, {"x": {1, 2}}):
        with pytest.raises(WireError) as info:
            encode(Reply(body=body))
        assert info.value.code == "unencodable"


def test_error_carries_code_and_detail() -> None:
    with pytest.raises(WireError) as info:
        decode(frame_of("ping", nonce="x"))
    assert info.value.code == "bad_field" and "ping.nonce" in info.value.detail
    assert str(info.value).startswith("bad_field: ")


# --- fuzzing -----------------------------------------------------------------------------------
def decodes_or_wire_error(data: bytes) -> None:
    try:
        msg = decode(data)
    except WireError as exc:
        assert exc.code in wire.ERROR_CODES
    else:
        assert isinstance(msg, Message)


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_raise_wire_error(data: bytes) -> None:
    decodes_or_wire_error(data)


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats()
    | st.text(max_size=10)
    | st.binary(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.text(max_size=6) | st.sampled_from(["topic", "ref", "label"]), inner, max_size=3
        )
    ),
    max_leaves=10,
)


@settings(max_examples=1000, deadline=None)
@given(
    kind=st.sampled_from(sorted(MESSAGE_TYPES)),
    fields=st.dictionaries(
        st.sampled_from(
            [
                "topic",
                "ref",
                "contact",
                "label",
                "sender",
                "flag",
                "nonce",
                "body",
                "code",
                "detail",
                "pred",
                "succ",
                "role",
                "tuples",
                "prefix",
                "publications",
                "publication",
                "hops",
                "x",
            ]
        ),
        msgpack_values,
        max_size=5,
    ),
)
def test_structured_garbage_only_raises_wire_error(kind: str, fields: dict[str, Any]) -> None:
    decodes_or_wire_error(frame_of(kind, **fields))


@settings(max_examples=500, deadline=None)
@given(msg=any_message, data=st.data())
def test_mutated_frames_only_raise_wire_error(msg: Message, data: st.DataObject) -> None:
    body = bytearray(encode(msg)[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(body) - 1))
        body[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    decodes_or_wire_error(bytes(body[:cut]))
    decodes_or_wire_error(bytes(body))


# --- publication messages (Alg. 5) -------------------------------------------------------------
H16 = bytes(range(16))
PUB = [H16, "h:1", 0, b"payload"]


def test_publication_messages_round_trip_at_the_limits() -> None:
    full = TrieLabel.from_bits("1" * 128)
    msgs: list[Message] = [
        CheckTrie(Topic("t"), Ref("h:1"), [NodeDigest(TrieLabel.from_bits(""), H16)]),
        CheckTrie(Topic("t"), Ref("h:1"), [NodeDigest(full, H16)] * fields.MAX_DIGESTS),
        CheckAndPublish(Topic("t"), Ref("h:1"), [], TrieLabel.from_bits("")),
        CheckAndPublish(Topic("t"), Ref("h:1"), [NodeDigest(full, H16)], full),
        Publish(Topic("t"), [Publication(H16, Ref("h:1"), 7, b"x")] * fields.MAX_PUBLICATIONS),
        Publish(Topic("t"), []),
        PublishNew(Topic("t"), Publication(H16, Ref("h:1"), wire.INT64_MAX, b""), 3),
    ]
    for msg in msgs:
        assert decode(encode(msg)[4:]) == msg
    frame = msgpack.unpackb(encode(msgs[3])[4:])
    assert frame["tuples"] == [["1" * 128, H16]] and frame["prefix"] == "1" * 128


def test_largest_payload_fits_in_a_publish_new_frame() -> None:
    payload = b"x" * wire.MAX_PAYLOAD_BYTES
    ref = Ref("a" * 253 + ":65535")
    key = publication_key(ref, 1, payload)
    msg = PublishNew(Topic("\U0001F600" * 256), Publication(key, ref, wire.INT64_MAX, payload), 1)
    assert decode(encode(msg)[4:]) == msg


PUBLICATION_BAD_FIELDS: list[tuple[str, dict[str, Any], str]] = [
    # trie labels: too long, not bits, not a string
    ("check_trie", {"topic": "t", "sender": "h:1", "tuples": [["0" * 129, H16]]}, "longer than the key length"),
    ("check_trie", {"topic": "t", "sender": "h:1", "tuples": [["012", H16]]}, "bit string"),
    ("check_trie", {"topic": "t", "sender": "h:1", "tuples": [[5, H16]]}, "bit string"),
    # hashes: wrong size, wrong type
    ("check_trie", {"topic": "t", "sender": "h:1", "tuples": [["0", H16[:15]]]}, "exactly 16 bytes"),
    ("check_trie", {"topic": "t", "sender": "h:1", "tuples": [["0", H16 + b"!"]]}, "exactly 16 bytes"),
    ("check_trie", {"topic": "t", "sender": "h:1", "tuples": [["0", "a" * 16]]}, "exactly 16 bytes"),
    # tuple shape and list bounds
    ("check_trie", {"topic": "t", "sender": "h:1", "tuples": [["0"]]}, "[label, hash]"),
    ("check_trie", {"topic": "t", "sender": "h:1", "tuples": {"0": H16}}, "array"),
    ("check_trie", {"topic": "t", "sender": "h:1", "tuples": [["0", H16]] * 65}, "limit of 64"),
    ("check_trie", {"topic": "t", "sender": "nohost", "tuples": []}, "host:port"),
    # prefixes
    ("check_and_publish", {"topic": "t", "sender": "h:1", "tuples": [], "prefix": "1" * 129}, "longer than the key length"),
    ("check_and_publish", {"topic": "t", "sender": "h:1", "tuples": [], "prefix": "10x"}, "bit string"),
    ("check_and_publish", {"topic": "t", "sender": "h:1", "tuples": [], "prefix": None}, "bit string"),
    ("check_and_publish", {"topic": "t", "sender": "h:1", "tuples": [], "prefix": b"\x01"}, "bit string"),
    # publications
    ("publish", {"topic": "t", "publications": [PUB] * 257}, "limit of 256"),
    ("publish", {"topic": "t", "publications": [[H16, "h:1", 0]]}, "[key, publisher, seq, payload]"),
    ("publish", {"topic": "t", "publications": [[H16[:8], "h:1", 0, b""]]}, "exactly 16 bytes"),
    ("publish", {"topic": "t", "publications": [[H16, "h:1", -1, b""]]}, "negative"),
    ("publish", {"topic": "t", "publications": [[H16, "h:1", 0, "text"]]}, "payload must be bytes"),
    ("publish", {"topic": "t", "publications": [[H16, "bad", 0, b""]]}, "host:port"),
    ("publish_new", {"topic": "t", "publication": PUB, "hops": "1"}, "64-bit integer"),
    ("publish_new", {"topic": "t", "publication": None, "hops": 1}, "[key, publisher, seq, payload]"),
]


@pytest.mark.parametrize(("kind", "fields", "detail"), PUBLICATION_BAD_FIELDS)
def test_publication_bad_field(kind: str, fields: dict[str, Any], detail: str) -> None:
    with pytest.raises(WireError) as info:
        decode(frame_of(kind, **fields))
    assert info.value.code == "bad_field"
    assert detail in info.value.detail, info.value.detail
    assert info.value.detail.startswith(f"{kind}.")


def test_payload_larger_than_the_limit() -> None:
    big = [H16, "h:1", 0, b"x" * (wire.MAX_PAYLOAD_BYTES + 1)]
    with pytest.raises(WireError) as info:
        decode(frame_of("publish_new", topic="t", publication=big, hops=1))
    assert info.value.code == "bad_field" and "exceeds" in info.value.detail
    with pytest.raises(WireError) as info:  # and no frame carries more than the maximum
        encode(Publish(Topic("t"), [Publication(H16, Ref("h:1"), 0, b"x" * 600_000)] * 2))
    assert info.value.code == "frame_too_large"
