"""The compiled Patricia trie (`pubsub/publications/_ctrie.pyx`) against the Python reference
(`pubsub.publications.pytrie`): the same answers, shapes, hashes and digest counts for any
sequence of updates and reads, at every key length the code treats differently."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pubsub.publications import pytrie, trie
from pubsub.publications.triekeys import KEY_BITS, TrieLabel

try:
    from pubsub.publications import _ctrie  # type: ignore[attr-defined]
except ImportError as exc:  # `make venv` builds it: failing here means that build failed
    pytest.fail(f"the compiled trie was not built ({exc}); see `make venv`'s output", pytrace=False)

#: Key lengths: tiny (several keys share every prefix), not a multiple of 8, one and two
#: machine words, and the publications' 128 bits.
KEY_LENGTHS = [1, 3, 13, 64, 65, 127, KEY_BITS]


def test_the_compiled_trie_is_the_one_in_use() -> None:
    """`make venv` builds the extension; the daemons and the simulator then use it."""
    assert trie.COMPILED and trie.PatriciaTrie is _ctrie.PatriciaTrie and trie.TrieNode is _ctrie.TrieNode


def shape(node: Any) -> Any:
    """A node and everything below it, as nested tuples of plain values."""
    if node is None:
        return None
    below = None if node.children is None else tuple(shape(child) for child in node.children)
    return (node.value, node.length, node.hash, node.item, below, node.label, node.is_leaf)


def labels(bits: int) -> st.SearchStrategy[TrieLabel]:
    return st.integers(0, bits).flatmap(lambda n: st.integers(0, (1 << n) - 1).map(lambda v: TrieLabel(v, n)))


def operations(bits: int) -> st.SearchStrategy[list[tuple[str, Any]]]:
    small = st.integers(0, min((1 << bits) - 1, 40))  # some keys again and again
    key = st.one_of(small, st.integers(0, (1 << bits) - 1))
    return st.lists(
        st.one_of(
            st.tuples(st.sampled_from(["add", "insert", "remove", "contains", "get"]), key),
            st.tuples(st.sampled_from(["search", "extension", "enumerate"]), labels(bits)),
            st.tuples(st.sampled_from(["root", "shape", "depth", "copy", "children", "len"]), st.none()),
        ),
        max_size=120,
    )


def apply(t: Any, op: str, arg: Any) -> Any:
    """One operation on trie `t`, and what it answered (nodes as their shapes)."""
    if op == "add":
        return t.add(arg, f"item {arg}")
    if op == "insert":
        return t.insert(arg, f"item {arg}")
    if op == "remove":
        return t.remove(arg)
    if op == "contains":
        return (t.contains(arg), arg in t)
    if op == "get":
        return t.get(arg)
    if op == "search":
        return shape(t.search(arg))
    if op == "extension":
        return shape(t.minimal_extension(arg))
    if op == "enumerate":
        return list(t.enumerate(arg))
    if op == "root":
        return t.root()
    if op == "shape":
        return shape(t.root_node())
    if op == "depth":
        return (t.depth(), list(t.keys()), list(t.items()))
    if op == "copy":
        copied = t.copy()
        return (shape(copied.root_node()), len(copied), list(copied.keys()))
    if op == "children":
        node = t.root_node()
        return None if node is None else [shape(child) for child in t.children(node) or ()]
    assert op == "len"
    return (len(t), t.size)


@pytest.mark.parametrize("bits", KEY_LENGTHS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_sequence_of_operations_gives_the_same_answers(bits: int, data: st.DataObject) -> None:
    ops = data.draw(operations(bits))
    reference, compiled = pytrie.PatriciaTrie(bits), _ctrie.PatriciaTrie(bits)
    for op, arg in ops:
        assert apply(compiled, op, arg) == apply(reference, op, arg), (op, arg)
        assert compiled.hash_computations == reference.hash_computations, (op, arg)
    assert shape(compiled.root_node()) == shape(reference.root_node())


@pytest.mark.parametrize("bits", [3, 64, KEY_BITS])
def test_large_batches_place_like_the_reference(bits: int) -> None:
    """Thousands of waiting leaves placed at once into a trie of thousands, then removals
    and a second batch: the recursive batch placement and the stale rehash at scale."""
    import random

    rnd = random.Random(bits)
    reference, compiled = pytrie.PatriciaTrie(bits), _ctrie.PatriciaTrie(bits)
    limit = 1 << bits
    for batch in range(4):
        keys = [rnd.randrange(limit) for _ in range(min(limit, 3000))]
        for k in keys:
            assert compiled.add(k, k) == reference.add(k, k)
        if batch == 2:
            for k in keys[::3]:
                assert compiled.remove(k) == reference.remove(k)
        assert compiled.root() == reference.root()
        assert compiled.hash_computations == reference.hash_computations
    assert list(compiled.items()) == list(reference.items())


def test_bad_keys_are_refused_alike() -> None:
    for bad in (-1, 8, 1.5, "1", True, b"\x00\x00", TrieLabel(1, 2)):
        for t in (pytrie.PatriciaTrie(3), _ctrie.PatriciaTrie(3)):
            with pytest.raises(ValueError):
                t.insert(bad, "x")
            with pytest.raises(ValueError):
                t.add(bad, "x")
    for bits in (0, KEY_BITS + 1):
        with pytest.raises(ValueError):
            _ctrie.PatriciaTrie(bits)
    with pytest.raises(ValueError):
        _ctrie.TrieNode(4, 2, b"", None, None)  # 4 does not fit in 2 bits
    with pytest.raises(ValueError):
        _ctrie.TrieNode(1, 2, b"short", None, None)  # a hash is 16 bytes or none
    with pytest.raises(TypeError):
        _ctrie.PatriciaTrie(3).children(None)  # refused, never read through


def test_keys_as_bytes_and_labels() -> None:
    compiled, reference = _ctrie.PatriciaTrie(16), pytrie.PatriciaTrie(16)
    for key in (b"\x12\x34", TrieLabel(0x5678, 16), 0x9ABC):
        assert compiled.insert(key, key) and reference.insert(key, key)
    assert compiled.root() == reference.root()
    assert compiled.get(b"\x12\x34") == b"\x12\x34" and compiled.contains(TrieLabel(0x9ABC, 16))
