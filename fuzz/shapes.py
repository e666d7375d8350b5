"""Wire bodies of every registered message kind, built from fuzzer decisions and decoded.

The cores never see a message the codec has not decoded, so the core targets get theirs the
same way: `decoded` picks a kind, builds ``{"v": 1, "t": kind, field: value, ...}`` with a
value of the right shape for each field's annotation (`value_for`), packs it with msgpack and
hands the bytes to `pubsub.kernel.wire.decode`.  Most values are valid; a few per cent are
near misses (a label of 65 bits, a key of 15 bytes, a missing field, an extra one), which the
codec must refuse with a `WireError` -- and anything it accepts is, by definition, a message
a peer could send.

Values are drawn from small pools (`World`: a handful of references, topics and labels,
the publications and trie digests seen so far) so that a sequence of messages talks about
the same nodes, rings and publications and reaches deep states instead of strangers.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgpack

import broker.cores.control  # noqa: F401

# Importing the modes registers every message kind and field type with the codec.
import pubsub.modes  # noqa: F401  (registers the modes)
import pubsub.skipring  # noqa: F401
from broker.cores.language.filters import Filter
from broker.cores.messages import Attrs
from fuzz.source import Source
from pubsub.kernel import wire
from pubsub.kernel.message import MESSAGE_TYPES, Message, Ref, Topic
from pubsub.kernel.wire import WireError
from pubsub.omen.views import Descriptor
from pubsub.publications.messages import MsgId, NodeDigest, NodeHash, Payload, Position, Publication, PublicationKey
from pubsub.publications.trie import KEY_BITS, TrieLabel, publication_key
from pubsub.skipring.labels import Label
from pubsub.skipring.messages import Contact

#: The supervisor every node core is configured with.
SUPERVISOR = "sup.test:7000"
#: Subscriber references (node targets run as the first one).
NODE_REFS = tuple(f"10.0.0.{i}:{7000 + i}" for i in range(1, 7))
#: Topics (the node targets join the first two).
TOPICS = ("news", "sports", "t")
#: Attribute names and operators of the broker language.
ATTRS = ("price", "sym", "vol", "x")
OPS = ("=", "!=", "<", "<=", ">", ">=", "prefix", "exists")


@dataclass
class World:
    """What messages may mention: references, topics, and things seen so far."""

    refs: tuple[str, ...] = (SUPERVISOR, *NODE_REFS)
    topics: tuple[str, ...] = TOPICS
    #: Broker ids and client names (broker targets fill them from their topology).
    senders: tuple[str, ...] = ("c1",)
    #: Valid publications seen so far (wire form), reused so that nodes see duplicates.
    publications: list[list[Any]] = field(default_factory=list)
    #: (label bits, hash) of trie nodes some core holds (targets add them).
    digests: list[list[Any]] = field(default_factory=list)
    #: Identifiers the broker cores have handed out (uids, tids), reused in later messages.
    ids: list[str] = field(default_factory=list)


def _bits(src: Source, lo: int, hi: int) -> str:
    return "".join("01"[src.byte() & 1] for _ in range(src.between(lo, hi)))


def _ref(src: Source, world: World) -> Any:
    kind = src.below(32)
    if kind < 29:
        return src.choice(world.refs)
    if kind == 29:
        return f"{src.text(12, 'abc.-_019')}:{src.between(0, 70000)}"
    if kind == 30:
        return src.text(20)
    return src.integer()


def _topic(src: Source, world: World) -> Any:
    kind = src.below(32)
    if kind < 30:
        return src.choice(world.topics)
    if kind == 30:
        return src.text(src.choice((4, 300)))
    return src.integer()


def _label(src: Source) -> Any:
    kind = src.below(32)
    if kind < 24:
        return _bits(src, 1, 4)
    if kind < 30:
        return _bits(src, 1, 64)
    return src.choice(("", "012", _bits(src, 65, 66), "1" * 64))


def _contact(src: Source, world: World) -> Any:
    if src.below(32) == 0:
        return src.choice(([], [_label(src)], "x", [_label(src), _ref(src, world), 1]))
    return [_label(src), _ref(src, world)]


def _trie_label(src: Source) -> Any:
    kind = src.below(16)
    if kind < 10:
        return _bits(src, 0, 8)
    if kind < 15:
        return _bits(src, 0, KEY_BITS)
    return src.choice((_bits(src, KEY_BITS + 1, KEY_BITS + 2), "2", 7))


def _hash(src: Source) -> Any:
    if src.below(32) == 0:
        return src.raw(17)
    return bytes(src.byte() for _ in range(16))


def _digest(src: Source, world: World) -> Any:
    if world.digests and src.flag(60):
        label, hash_ = src.choice(world.digests)
        return [label, hash_ if src.flag(85) else _hash(src)]
    return [_trie_label(src), _hash(src)]


def publication_wire(src: Source, world: World) -> Any:
    """A publication's wire form: mostly new and valid (its key matches its content), often
    one seen before, sometimes with a wrong key or a malformed part."""
    if world.publications and src.flag(40):
        return list(src.choice(world.publications))
    publisher = src.choice(world.refs) if src.flag(90) else _ref(src, world)
    seq = src.between(0, 6) if src.flag(85) else src.integer()
    payload = src.raw(24)
    published_ms = src.between(0, 5) if src.flag(90) else src.integer()
    prev = src.between(-1, 5) if src.flag(90) else src.integer()
    msg_id = src.choice(("", "a", "b", "id-1")) if src.flag(90) else src.text(70)
    key: Any
    try:
        key = publication_key(publisher, seq, payload) if src.flag(90) else _hash(src)
    except Exception:  # noqa: BLE001 - a malformed publisher or seq: any key will do
        key = _hash(src)
    pub = [key, publisher, seq, payload, published_ms, prev, msg_id][: src.choice((7, 7, 7, 4, 5, 6, 3))]
    if len(world.publications) < 64 and len(pub) >= 4 and type(seq) is int and 0 <= seq < 1 << 63:
        world.publications.append(pub)
    return pub


def _filter(src: Source, world: World) -> Any:
    preds = []
    for _ in range(src.below(4) if src.flag(95) else src.between(30, 40)):
        op = src.choice(OPS) if src.flag(95) else src.text(3)
        value = _value(src)
        if op == "exists":
            value = None if src.flag(90) else value
        elif op == "prefix" and src.flag(80):
            value = src.text(3, "ab")
        preds.append([src.choice(ATTRS) if src.flag(95) else src.text(6), op, value])
    return preds


def _value(src: Source) -> Any:
    kind = src.below(16)
    if kind < 6:
        return src.between(-3, 10)
    if kind < 10:
        return src.text(4, "abAB")
    if kind < 13:
        return src.between(-300, 300) / 8
    if kind == 13:
        return src.choice((float("inf"), float("nan"), True, None, b"x", (1 << 64) - 1))
    return src.integer()


def _attrs(src: Source, world: World) -> Any:
    if src.below(32) == 0:
        return src.choice(({}, [], {1: 2}, {"bad name": 1}))
    return {src.choice(ATTRS) if src.flag(95) else src.text(6): _value(src) for _ in range(src.between(1, 4))}


def _id(src: Source, world: World) -> str:
    if world.ids and src.flag(60):
        return src.choice(world.ids)
    return src.choice(("a", "b", "s1", "p1")) if src.flag(80) else src.text(8)


def _string(src: Source, world: World, name: str) -> Any:
    """A str field: broker senders and ids come from the pools, other strings are free."""
    if name in ("sender", "publisher", "client"):
        return src.choice(world.senders) if src.flag(90) else src.text(8)
    if name in ("uid", "tid", "pid", "adv_id", "sub_id"):
        return _id(src, world)
    if name in ("code", "role"):
        return src.choice(("peer", "client", "not_member", "")) if src.flag(80) else src.text(8)
    return src.text(16)


def _json(src: Source, depth: int = 0) -> Any:
    kind = src.below(8)
    if kind < 3 or depth > 3:
        return src.choice((None, True, 1, -1.5, "s"))
    if kind < 5:
        return [_json(src, depth + 1) for _ in range(src.below(3))]
    return {src.text(4): _json(src, depth + 1) for _ in range(src.below(3))}


def _descriptor(src: Source, world: World) -> Any:
    """An omen descriptor on the wire: [reference, topics, neighbours, version]."""
    if not src.flag(95):
        return src.choice(([], ["x"], [1, 2, 3, 4, 5], None))
    return [
        _ref(src, world),
        [_topic(src, world) for _ in range(src.below(3))],
        [_ref(src, world) for _ in range(src.below(3))],
        src.between(-1, 8) if src.flag(80) else src.integer(),
    ]


Maker = Callable[[Source, World, str], Any]

#: Field annotation -> how to make its wire value (`value_for` handles the generic ones).
MAKERS: dict[Any, Maker] = {
    Topic: lambda s, w, n: _topic(s, w),
    Ref: lambda s, w, n: _ref(s, w),
    Label: lambda s, w, n: _label(s),
    Contact: lambda s, w, n: _contact(s, w),
    TrieLabel: lambda s, w, n: _trie_label(s),
    NodeHash: lambda s, w, n: _hash(s),
    PublicationKey: lambda s, w, n: _hash(s),
    NodeDigest: lambda s, w, n: _digest(s, w),
    Position: lambda s, w, n: s.below(1 << 64) if s.flag(95) else s.integer(),
    Payload: lambda s, w, n: s.raw(32),
    MsgId: lambda s, w, n: s.choice(("", "a", "b", "id-1")) if s.flag(90) else s.text(70),
    Publication: lambda s, w, n: publication_wire(s, w),
    Filter: lambda s, w, n: _filter(s, w),
    Attrs: lambda s, w, n: _attrs(s, w),
    Descriptor: lambda s, w, n: _descriptor(s, w),
}


def value_for(src: Source, world: World, annotation: Any, name: str) -> Any:
    """A wire value for a field `name` annotated `annotation` (usually valid)."""
    maker = MAKERS.get(annotation)
    if maker is not None:
        return maker(src, world, name)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        return None if src.flag(30) else value_for(src, world, inner, name)
    if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        count = src.below(5) if src.flag(95) else src.choice((65, 257))
        return [value_for(src, world, args[0], name) for _ in range(count)]
    if origin is tuple and args and Ellipsis not in args:  # a fixed-length pair, as an array
        return [value_for(src, world, arg, name) for arg in args]
    if origin is Literal:
        return src.choice(args) if src.flag(95) else src.text(4)
    if origin is dict:
        return _json(src)
    if annotation is int:
        return src.between(-1, 8) if src.flag(70) else src.integer()
    if annotation is bool:
        return src.flag() if src.flag(95) else 1
    if annotation is str:
        return _string(src, world, name)
    if annotation is bytes:
        return src.raw(40)
    supertype = getattr(annotation, "__supertype__", None)
    if supertype is not None:  # a NewType no maker knows: its underlying type
        return value_for(src, world, supertype, name)
    raise TypeError(f"no maker for {annotation!r}")


_HINTS: dict[str, list[tuple[str, Any]]] = {}


def _fields(kind: str) -> list[tuple[str, Any]]:
    found = _HINTS.get(kind)
    if found is None:
        cls = MESSAGE_TYPES[kind]
        hints = typing.get_type_hints(cls)
        found = _HINTS[kind] = [(name, hints[name]) for name in wire.spec(kind).names]
        found.sort()
    return found


def body(src: Source, world: World, kind: str) -> dict[str, Any]:
    """The wire map of one `kind` message (a field missing or extra now and then)."""
    out: dict[str, Any] = {"v": 1, "t": kind}
    for name, annotation in _fields(kind):
        if src.below(64) == 0:
            continue  # missing (fine when the field has a default)
        out[name] = value_for(src, world, annotation, name)
    if src.below(64) == 0:
        out[src.choice(("extra", "v", "t"))] = src.choice((1, "x", None))
    return out


def decoded(src: Source, world: World, kinds: Sequence[str]) -> Message | None:
    """One message of one of `kinds`, through the real codec; None if the codec refused
    the body (only ever with a `WireError`)."""
    payload = msgpack.packb(body(src, world, src.choice(kinds)), use_bin_type=True)
    try:
        return wire.decode(payload)
    except WireError:
        return None


def kinds_of(*classes: type[Message]) -> tuple[str, ...]:
    """The wire names of message classes."""
    return tuple(cls.kind for cls in classes)


def as_ref(value: str) -> Ref:
    """A pool entry as a reference."""
    return Ref(value)


def label(bits: str) -> Label:
    """A label from its bits."""
    return Label(bits)


def contact(bits: str, ref: str) -> Contact:
    """A contact from its parts."""
    return Contact(Label(bits), Ref(ref))


def topic(name: str) -> Topic:
    """A pool entry as a topic."""
    return Topic(name)


def wire_publication(pub: Publication) -> list[Any]:
    """A publication's wire form (for `World.publications`), its proof if it has one."""
    out: list[Any] = [pub.key, pub.publisher, pub.seq, pub.payload, pub.published_ms, pub.prev, pub.msg_id]
    proof = getattr(pub, "proof", b"")
    return [*out, proof] if proof else out


__all__ = ["World", "decoded", "kinds_of", "publication_wire", "value_for", "body", "TrieLabel"]
