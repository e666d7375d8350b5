"""Invariants shared by the fuzz targets; each raises `Broken` with what it found.

A broken invariant is reported exactly like a crash (libFuzzer stops and keeps the input),
so `Broken` derives from `AssertionError` and carries a one-line description.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from pubsub.kernel import wire
from pubsub.kernel.effects import Answer, Batched, Persist
from pubsub.kernel.message import Message, Send
from pubsub.kernel.wire import WireError
from pubsub.publications.trie import PatriciaTrie, TrieNode


class Broken(AssertionError):
    """A state or output invariant does not hold."""


def require(condition: bool, what: str) -> None:
    """Raise `Broken(what)` unless `condition`."""
    if not condition:
        raise Broken(what)


def every_field(found: object) -> object:
    """`found` as plain values, every field included, nested messages and lists too: a
    publication's equality leaves out its timestamp, predecessor, message id and proof,
    which a decoder must still read right."""
    if isinstance(found, list):
        return [every_field(item) for item in found]
    if dataclasses.is_dataclass(found) and not isinstance(found, type):
        return (type(found), *(every_field(getattr(found, f.name)) for f in dataclasses.fields(found)))
    return found


def roundtrip(msg: Message) -> None:
    """`msg` encodes into a frame a peer accepts, and decodes back to the same bytes."""
    try:
        frame = wire.encode(msg)
    except WireError as exc:
        raise Broken(f"a core returned a message it cannot send: {msg!r}: {exc}") from None
    payload = frame[wire.HEADER_SIZE :]
    try:
        again = wire.decode(payload)
    except WireError as exc:
        raise Broken(f"the codec refuses what it encoded: {msg!r}: {exc}") from None
    require(type(again) is type(msg), f"decoded {type(again).__name__}, sent {type(msg).__name__}")
    require(wire.encode_payload(again) == payload, f"{msg.kind} does not survive encode/decode: {msg!r}")


def check_effects(effects: Iterable[Any], *, refs: bool = True) -> int:
    """Every effect is a Send, Answer, Persist or Batched whose messages survive the codec
    (the target hands each Batched item back to the core as a `Batch` and checks that too); with
    `refs`, every destination is a valid reference.  Returns how many messages it checked."""
    count = 0
    for effect in effects:
        if isinstance(effect, Send):
            require(isinstance(effect.dest, str), f"bad destination {effect.dest!r}")
            if refs:
                try:
                    wire.validate_ref(effect.dest)
                except WireError:
                    raise Broken(f"send to something that is no reference: {effect!r}") from None
            roundtrip(effect.msg)
            count += 1
        elif isinstance(effect, Answer):
            require(type(effect.client) is int, f"answer to a non-token {effect.client!r}")
            roundtrip(effect.msg)
            count += 1
        elif isinstance(effect, Persist):
            require(isinstance(effect.rows, tuple), f"a Persist whose rows are no tuple: {effect!r}")
            require(effect.token is None or type(effect.token) is int, f"a Persist with a non-token: {effect!r}")
            count += check_effects(effect.then, refs=refs) + check_effects(effect.otherwise, refs=refs)
        elif isinstance(effect, Batched):
            require(isinstance(effect.work, str) and isinstance(effect.topic, str),
                    f"a batched item without its work and topic: {effect!r}")
        else:
            raise Broken(f"not an effect: {effect!r}")
    return count


def check_trie(trie: PatriciaTrie[Any], what: str) -> None:
    """The trie's shape and Merkle hashes agree with its contents: every inner node has two
    children whose labels extend its own by 0 and by 1, leaves are full-length keys, the
    leaf index and the size match the leaves, and a trie built afresh from the same items
    has the same root (label and hash)."""
    root = trie.root_node()
    leaves: list[TrieNode[Any]] = []
    stack = [] if root is None else [root]
    while stack:
        node = stack.pop()
        require(bool(node.hash), f"{what}: a node without a hash after settling")
        if node.children is None:
            require(node.length == trie.key_bits, f"{what}: a leaf of {node.length} bits")
            leaves.append(node)
            continue
        require(len(node.children) == 2, f"{what}: an inner node with {len(node.children)} children")
        for bit, child in enumerate(node.children):
            require(child.length > node.length, f"{what}: a child no longer than its parent")
            require(
                child.label.startswith(node.label) and child.label.bit(node.length) == bit,
                f"{what}: child {bit} of {node.label.bits!r} is {child.label.bits!r}",
            )
        stack.extend(node.children)
    require(len(leaves) == len(trie), f"{what}: {len(leaves)} leaves, size {len(trie)}")
    require(all(trie.contains(leaf.value) for leaf in leaves), f"{what}: a leaf missing from the leaf index")
    fresh: PatriciaTrie[Any] = PatriciaTrie(trie.key_bits)
    for leaf in leaves:
        fresh.insert(leaf.value, leaf.item)
    require(fresh.root() == trie.root(), f"{what}: root hash differs from a trie rebuilt from its items")
