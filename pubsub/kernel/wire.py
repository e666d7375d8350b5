"""The wire format: frame codec, message schema, size limits, validation errors.

This codec knows no mode's types: each mode teaches it its own field annotations with
`register_field_type`.

A frame is a 4-byte big-endian payload length followed by the payload, one msgpack map::

    {"v": 1, "t": <message kind>, <field>: <value>, ...}

Every field of every registered message (`pubsub.kernel.message.MESSAGE_TYPES`) is validated from
the dataclass annotations alone, so adding a message needs no codec change:

========================  ================================================================
annotation                on the wire
========================  ================================================================
``Topic``                 str, 1..256 characters, no control characters
``Ref``                   str ``"host:port"``; host 1..253 of ``[A-Za-z0-9._-]`` (this
                          covers names and IPv4 literals), port 1..65535
``list[str]``             an array of at most `MAX_STRINGS` (1024) strings of <= 4096 chars
``list[bytes]``           an array of at most `MAX_PAYLOADS` (16384) bin values (each bounded
                          by the frame; the payloads of a `Bundle`)
registered types          whatever `register_field_type` was told by a mode (the skip
                          ring's labels, contacts, trie digests and publications,
                          `pubsub.skipring.fields`; the broker mode's filters and
                          publication attributes, `broker.cores.messages`)
========================  ================================================================

Fields the message does not have are rejected, fields it needs are required.  Anything that
is not a valid frame raises `WireError` with a short machine-readable code (the network
runtime counts errors by code and answers with an ``ErrorReply`` carrying it).  Nothing in
here does I/O: `pubsub.kernel.framing.FrameDecoder` cuts a byte stream into frames with
`frame_length` (frames over the maximum are refused *before* their body is read) and the
runtime calls `decode` on each.
"""

from __future__ import annotations

import dataclasses
import keyword
import re
import struct
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, NewType

import msgpack

from pubsub.kernel.message import MESSAGE_TYPES, Message, Ref, Topic

#: Protocol version carried in every frame as "v".
PROTOCOL_VERSION = 1
#: Default largest payload accepted (the 4-byte header not included).
DEFAULT_MAX_FRAME = 1 << 20
#: The length prefix.
HEADER = struct.Struct(">I")
HEADER_SIZE = HEADER.size

MAX_TOPIC_CHARS = 256
MAX_HOST_CHARS = 253
MAX_STR_CHARS = 4096
MAX_BODY_DEPTH = 32
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
#: Most strings in one ``list[str]`` field.
MAX_STRINGS = 1024
#: Most values in one ``list[bytes]`` field: the messages of one `Bundle`, which carries
#: everything one Timeout sends to one peer (`pubsub.runtime.bundling`).  A node in 1,000
#: topics sends a ring neighbour a few thousand per interval; with a cap of 1024 they
#: needed several frames (issue 14, item 5).  The frame limit still bounds a bundle's bytes,
#: and every message in it is decoded and checked on its own.
MAX_PAYLOADS = 16384
#: Largest opaque payload a message may carry: the default frame less room for the rest of
#: the message (topic <= 1 KiB as UTF-8, references, a key, numbers, field names).
MAX_PAYLOAD_BYTES = DEFAULT_MAX_FRAME - 4096

#: Every code `decode` / `frame_length` / `encode` can raise.
ERROR_CODES = (
    "bad_msgpack",
    "not_a_map",
    "bad_version",
    "unknown_type",
    "bad_field",
    "missing_field",
    "frame_too_large",
    "unencodable",
)

_HOST_RE = re.compile(rf"[A-Za-z0-9._-]{{1,{MAX_HOST_CHARS}}}")
_PORT_RE = re.compile(r"[0-9]{1,5}")


class WireError(ValueError):
    """A frame or field that is not valid on the wire; `code` is one of ERROR_CODES."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


# --- field validators (also used by the CLI and the store) -----------------------------------
def short(value: object, limit: int = 60) -> str:
    """`value` shown for an error message, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: A control character: C0 (below 32), DEL, or C1 (127..159).
_CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f]")


def validate_topic(value: object) -> Topic:
    """A topic name: 1..256 characters, none of them a control character."""
    if not isinstance(value, str):
        raise WireError("bad_field", f"topic must be a string, got {short(value)}")
    if not 1 <= len(value) <= MAX_TOPIC_CHARS:
        raise WireError("bad_field", f"topic must have 1..{MAX_TOPIC_CHARS} characters")
    if _CONTROL_CHARACTER.search(value):
        raise WireError("bad_field", f"topic contains a control character: {short(value)}")
    return Topic(value)


#: References already found valid (they repeat in every frame: senders, publishers).
_VALID_REFS: dict[str, Ref] = {}
_VALID_REFS_MAX = 4096


def validate_ref(value: object) -> Ref:
    """A reference "host:port" (host of [A-Za-z0-9._-], 1..253 characters; port 1..65535)."""
    if type(value) is str:
        known = _VALID_REFS.get(value)
        if known is not None:
            return known
    ref = _check_ref(value)
    if len(_VALID_REFS) >= _VALID_REFS_MAX:
        _VALID_REFS.clear()
    _VALID_REFS[ref] = ref
    return ref


def _check_ref(value: object) -> Ref:
    if not isinstance(value, str):
        raise WireError("bad_field", f"reference must be a string, got {short(value)}")
    host, sep, port = value.rpartition(":")
    if (
        not sep
        or not _HOST_RE.fullmatch(host)
        or not _PORT_RE.fullmatch(port)
        or not 1 <= int(port) <= 65535
    ):
        raise WireError("bad_field", f"reference must be host:port, got {short(value)}")
    return Ref(value)


def validate_int(value: object) -> int:
    """A signed 64-bit integer (booleans are not integers here)."""
    if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:
        raise WireError("bad_field", f"expected a 64-bit integer, got {short(value)}")
    return value


def validate_bool(value: object) -> bool:
    """True or false (integers are not booleans here)."""
    if type(value) is not bool:
        raise WireError("bad_field", f"expected true or false, got {short(value)}")
    return value


def validate_str(value: object) -> str:
    """A string of at most 4096 characters."""
    if not isinstance(value, str) or len(value) > MAX_STR_CHARS:
        raise WireError("bad_field", f"expected a string of <= {MAX_STR_CHARS} characters")
    return value


def _check_json_like(value: object, depth: int) -> None:
    """`value` is at container depth `depth` (the body map itself is depth 1)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if depth > MAX_BODY_DEPTH:
        raise WireError("bad_field", f"lists and maps nested deeper than {MAX_BODY_DEPTH}")
    if isinstance(value, list):
        for item in value:
            _check_json_like(item, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise WireError("bad_field", f"map keys must be strings, got {short(key)}")
            _check_json_like(item, depth + 1)
        return
    raise WireError("bad_field", f"unsupported value {short(value)}")


def validate_map(value: object) -> dict[str, Any]:
    """A map with string keys whose values are JSON-like (nil, bool, numbers, str, list, map)."""
    if not isinstance(value, dict):
        raise WireError("bad_field", f"expected a map, got {short(value)}")
    _check_json_like(value, 1)
    return value


def exact_bytes(value: object, size: int, what: str) -> bytes:
    """bin of exactly `size` bytes (`what` names it in the error)."""
    if type(value) is not bytes or len(value) != size:
        got = f"{len(value)} bytes" if isinstance(value, bytes) else short(value)
        raise WireError("bad_field", f"{what} must be exactly {size} bytes, got {got}")
    return value


def bounded_bytes(value: object, limit: int, what: str) -> bytes:
    """bin of at most `limit` bytes (`what` names it in the error)."""
    if type(value) is not bytes:
        raise WireError("bad_field", f"{what} must be bytes, got {short(value)}")
    if len(value) > limit:
        raise WireError("bad_field", f"{what} of {len(value)} bytes exceeds {limit}")
    return value


def bounded_list(inner: Validator, limit: int, what: str) -> Validator:
    """An array of at most `limit` items, each checked by `inner`."""
    def check(value: object) -> list[Any]:
        if not isinstance(value, list):
            raise WireError("bad_field", f"{what} must be an array, got {short(value)}")
        if len(value) > limit:
            raise WireError("bad_field", f"{len(value)} {what} exceed the limit of {limit}")
        return [inner(item) for item in value]

    return check


# --- schema: one (decoder, encoder) pair per annotation --------------------------------------
Validator = Callable[[object], Any]
Encoder = Callable[[Any], Any]


def identity(value: Any) -> Any:
    """The encoder of a field that travels as it is."""
    return value


def list_encoder(inner: Encoder) -> Encoder:
    """Encode each item of a list with `inner`."""
    def enc(value: Any) -> list[Any]:
        return [inner(item) for item in value]

    return enc


def _validate_bytes(value: object) -> bytes:
    if type(value) is not bytes:
        raise WireError("bad_field", f"expected bin, got {short(value)}")
    return value


def _optional(inner: Validator) -> Validator:
    def check(value: object) -> Any:
        return None if value is None else inner(value)

    return check


def _optional_encoder(inner: Encoder) -> Encoder:
    def enc(value: Any) -> Any:
        return None if value is None else inner(value)

    return enc


def _literal(choices: tuple[object, ...]) -> Validator:
    def check(value: object) -> Any:
        if not isinstance(value, str) or value not in choices:
            raise WireError("bad_field", f"expected one of {list(choices)}, got {short(value)}")
        return value

    return check


#: Field types taught to the codec by other packages: annotation -> (validator, encoder).
FIELD_TYPES: dict[Any, tuple[Validator, Encoder]] = {}


def register_field_type(annotation: Any, check: Validator, encode: Encoder) -> None:
    """Teach the codec a field annotation defined by a mode (one validator that returns the
    decoded value or raises WireError, one encoder to msgpack-able data).  Registering the
    same annotation again replaces it."""
    FIELD_TYPES[annotation] = (check, encode)
    _SPECS.clear()


def _schema_for(annotation: Any) -> tuple[Validator, Encoder]:
    """The validator and encoder for one field annotation; TypeError if unsupported."""
    registered = FIELD_TYPES.get(annotation)
    if registered is not None:
        return registered
    if annotation is Topic:
        return validate_topic, identity
    if annotation is Ref:
        return validate_ref, identity
    if annotation is int:
        return validate_int, identity
    if annotation is bool:
        return validate_bool, identity
    if annotation is str:
        return validate_str, identity
    if annotation is bytes:
        return _validate_bytes, identity
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is list and args == (str,):
        return bounded_list(validate_str, MAX_STRINGS, "strings"), list_encoder(identity)
    if origin is list and args == (bytes,):
        return bounded_list(_validate_bytes, MAX_PAYLOADS, "payloads"), list_encoder(identity)
    if origin is Literal and all(isinstance(a, str) for a in args):
        return _literal(args), identity
    if origin is dict and args and args[0] is str:
        return validate_map, identity
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        inner = args[0] if args[1] is type(None) else args[1]
        check, enc = _schema_for(inner)
        return _optional(check), (identity if enc is identity else _optional_encoder(enc))
    if isinstance(annotation, NewType):
        raise TypeError(f"no wire schema for NewType {annotation.__name__}")
    raise TypeError(f"no wire schema for annotation {annotation!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class FieldSpec:
    """How one message field travels."""

    name: str
    check: Validator
    encode: Encoder
    required: bool


@dataclasses.dataclass(frozen=True, slots=True)
class MessageSpec:
    """How one message type travels."""

    kind: str
    cls: type[Message]
    fields: tuple[FieldSpec, ...]
    names: frozenset[str]
    #: A function returning a message's map as the frame carries it ("v", "t", then the
    #: fields in declared order, values as the message holds them: `_body_writer`), and
    #: the (name, encoder) of the fields whose encoder is not `identity`.
    body: Callable[[Any], dict[str, Any]]
    encoders: tuple[tuple[str, Encoder], ...]


def _body_writer(kind: str, names: tuple[str, ...]) -> Callable[[Any], dict[str, Any]]:
    """The function that returns the frame's map of a `kind` message: "v", "t", then each
    of `names` (its dataclass fields, identifiers) read from the message, in order.  It is
    generated once per kind, as `dataclasses` generates ``__init__``, so that the generic
    encoder builds the map in one dict display instead of zipping the names with the
    values read by an attrgetter: a third of its time for a Delivery, the frame a node
    writes most (issue 11)."""
    if not all(name.isidentifier() and not keyword.iskeyword(name) for name in names):
        raise TypeError(f"{kind}: field names must be identifiers, got {names!r}")
    entries = "".join(f"{name!r}: m.{name}, " for name in names)
    namespace: dict[str, Any] = {}
    exec(f"def body(m):\n    return {{'v': {PROTOCOL_VERSION!r}, 't': {kind!r}, {entries}}}\n", namespace)
    writer: Callable[[Any], dict[str, Any]] = namespace["body"]
    return writer


def _build_spec(kind: str, cls: type) -> MessageSpec:
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        check, enc = _schema_for(hints[f.name])
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        specs.append(FieldSpec(f.name, check, enc, required))
    order = tuple(s.name for s in specs)
    encoders = tuple((s.name, s.encode) for s in specs if s.encode is not identity)
    return MessageSpec(kind, cls, tuple(specs), frozenset(order), _body_writer(kind, order), encoders)


_SPECS: dict[str, MessageSpec] = {}


def spec(kind: str) -> MessageSpec:
    """The schema of a registered message kind (built on first use, then cached).

    Built lazily so that messages registered after this module is imported are covered too.
    """
    found = _SPECS.get(kind)
    if found is None:
        cls = MESSAGE_TYPES.get(kind)
        if cls is None:
            raise WireError("unknown_type", f"unknown message type {short(kind)}")
        found = _SPECS[kind] = _build_spec(kind, cls)
    return found


def check_schemas() -> None:
    """Build every registered message's schema now; TypeError names an unsupported field."""
    for kind in MESSAGE_TYPES:
        spec(kind)


# --- frames ----------------------------------------------------------------------------------
def frame_length(header: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> int:
    """The payload length announced by a 4-byte header; frame_too_large over `max_frame`."""
    length: int = HEADER.unpack(header)[0]
    if length > max_frame:
        raise oversize_frame(length, max_frame)
    return length


def oversize_frame(length: int, max_frame: int) -> WireError:
    """The error for a header announcing `length` > `max_frame` bytes.  A header of four
    printable ASCII characters is almost always another protocol talking (an HTTP answer
    starts "HTTP", a request "GET "): the error then says so and quotes them."""
    text = HEADER.pack(length)
    detail = f"frame of {length} bytes exceeds {max_frame}"
    if text.isascii() and text.decode().isprintable():
        detail += f" (the first bytes read {text.decode()!r}: another protocol, not pubsub's framing)"
    return WireError("frame_too_large", detail)


class Packed(bytes):
    """A field value that is msgpack already: a field encoder may return it so that data
    that travels unchanged through many nodes (a publication) is encoded only once."""


#: One shared packer: `msgpack.packb` builds a new `Packer` per call, a Python-level step on
#: every frame sent (issue 11).  `Packer.pack` runs in C without calling back into Python
#: (no ``default``) or releasing the GIL, and empties its buffer after each call, also when
#: it raises, so callers on any thread may share it.
pack = msgpack.Packer(use_bin_type=True).pack


def _map_header(n: int) -> bytes:
    return bytes((0x80 | n,)) if n < 16 else b"\xde" + n.to_bytes(2, "big")


def encode_payload(msg: Message) -> bytes:
    """The msgpack payload of `msg` (no length prefix): "v", "t", then the fields in their
    declared order.  The map is built by one generated function (`MessageSpec.body`)
    and only the fields whose encoder is not the identity are passed through it -- this
    runs for every frame a node sends (issue 11).  A kind with a fast encoder
    (`register_fast_encoder`) is encoded by it; what either raises for a value it cannot
    encode becomes WireError("unencodable")."""
    fast = _FAST_ENCODERS.get(type(msg))
    if fast is not None:
        try:
            return fast(msg)
        except UNENCODABLE as exc:
            raise WireError("unencodable", f"cannot encode {msg.kind}: {exc}") from None
    s = spec(msg.kind)
    if type(msg) is not s.cls:
        raise WireError("unencodable", f"{type(msg).__name__} is not the {s.kind!r} message")
    try:
        body = s.body(msg)
        has_packed = False
        for name, encode in s.encoders:
            value = body[name] = encode(body[name])
            if type(value) is Packed:
                has_packed = True
        if has_packed:
            return _pack_with_packed(body)
        packed: bytes = pack(body)
        return packed
    except UNENCODABLE as exc:
        raise WireError("unencodable", f"cannot encode {s.kind}: {exc}") from None


#: What packing raises for a value it cannot encode.
UNENCODABLE = (TypeError, ValueError, AttributeError, OverflowError)

_PACKED_NAMES: dict[str, bytes] = {}

#: Fast encoders of hot message types (`register_fast_encoder`).
_FAST_ENCODERS: dict[type, Callable[[Any], bytes]] = {}


def register_fast_encoder(cls: type[Message], encoder: Callable[[Any], bytes]) -> None:
    """Encode messages of exactly `cls` with `encoder`, which must return the payload
    `encode_payload` would (same fields, same values; a test compares them); what it raises
    for a value it cannot encode (`UNENCODABLE`) the codec reports as it does its own."""
    _FAST_ENCODERS[cls] = encoder


def _pack_with_packed(body: dict[str, Any]) -> bytes:
    """The map of `body` with its `Packed` values inserted verbatim: the other fields packed
    in one call (their map header replaced by one that counts every field), then each
    packed field's name and value.  Field order differs from msgpack.packb(body), which no
    decoder depends on; "v" and "t" stay first."""
    plain = {name: value for name, value in body.items() if type(value) is not Packed}
    head: bytes = pack(plain)
    parts = [_map_header(len(body)), head[_map_header_size(len(plain)) :]]
    names = _PACKED_NAMES
    for name, value in body.items():
        if type(value) is Packed:
            packed_name = names.get(name)
            if packed_name is None:
                packed_name = names[name] = bytes(msgpack.packb(name))
            parts.append(packed_name)
            parts.append(value)
    return b"".join(parts)


def _map_header_size(n: int) -> int:
    return 1 if n < 16 else 3


def encode(msg: Message, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    """The whole frame for `msg`: length prefix and payload.

    Raises WireError("frame_too_large") rather than produce a frame a peer would refuse.
    """
    return frame(msg.kind, encode_payload(msg), max_frame)


def frame(kind: str, payload: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    """The whole frame for the payload of a `kind` message encoded already: length prefix
    and payload; WireError("frame_too_large") over `max_frame`, as `encode` raises."""
    if len(payload) > max_frame:
        raise WireError("frame_too_large", f"{kind} frame of {len(payload)} bytes exceeds {max_frame}")
    return HEADER.pack(len(payload)) + payload


#: Fast decoders of hot message kinds: (payload prefix, decoder).  A decoder returns the
#: message, or None to leave the frame to the generic decoder (which then accepts it or
#: raises the precise WireError), so a fast path never changes what is accepted.
_FAST: list[tuple[bytes, Callable[[bytes], Message | None]]] = []


def fast_prefix(kind: str, fields: int) -> bytes:
    """How the payload of a `kind` message with `fields` fields begins when this codec
    encoded it: the map header, then "v" and "t"."""
    parts = ["v", PROTOCOL_VERSION, "t", kind]
    return _map_header(fields + 2) + b"".join(bytes(msgpack.packb(part)) for part in parts)


def register_fast_decoder(kind: str, decoder: Callable[[bytes], Message | None]) -> None:
    """Try `decoder` first on payloads that begin as this codec encodes `kind`."""
    prefix = fast_prefix(kind, len(spec(kind).fields))
    _FAST[:] = [(p, d) for p, d in _FAST if p != prefix] + [(prefix, decoder)]


def decode(payload: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> Message:
    """The message in one frame's payload; raises WireError for anything invalid."""
    n = len(payload)
    if n > max_frame:
        raise WireError("frame_too_large", f"frame of {n} bytes exceeds {max_frame}")
    for prefix, fast in _FAST:
        if payload.startswith(prefix):
            found = fast(payload)
            if found is not None:
                return found
            break
    try:
        obj = msgpack.unpackb(
            payload,
            raw=False,
            strict_map_key=True,
            use_list=True,
            max_str_len=n,
            max_bin_len=n,
            max_array_len=n,
            max_map_len=n // 2,
            max_ext_len=0,
        )
    except Exception as exc:  # noqa: BLE001 - msgpack raises many types (ExtraData, FormatError, ...)
        raise WireError("bad_msgpack", f"{type(exc).__name__}: {exc}"[:200]) from None
    if not isinstance(obj, dict):
        raise WireError("not_a_map", f"frame holds {type(obj).__name__}, not a map")
    version = obj.get("v")
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise WireError(
            "bad_version",
            f"protocol version {short(version)} (this side speaks {PROTOCOL_VERSION})",
        )
    if "t" not in obj:
        raise WireError("missing_field", "frame has no message type 't'")
    kind = obj["t"]
    if not isinstance(kind, str) or kind not in MESSAGE_TYPES:
        raise WireError("unknown_type", f"unknown message type {short(kind)}")
    s = spec(kind)
    extra = obj.keys() - s.names - {"v", "t"}
    if extra:
        raise WireError("bad_field", f"{kind} has no field(s) {short(sorted(extra))}")
    values: dict[str, Any] = {}
    for f in s.fields:
        if f.name in obj:
            try:
                values[f.name] = f.check(obj[f.name])
            except WireError as exc:
                raise WireError(exc.code, f"{kind}.{f.name}: {exc.detail}") from None
        elif f.required:
            raise WireError("missing_field", f"{kind} needs field {f.name!r}")
    return s.cls(**values)
