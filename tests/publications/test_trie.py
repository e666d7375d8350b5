"""The Patricia trie with Merkle hashes (`pubsub.publications.trie`, paper 000 §4.2)."""

from __future__ import annotations

import random

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from pubsub.publications.trie import (
    EMPTY_HASH,
    EMPTY_LABEL,
    PatriciaTrie,
    TrieLabel,
    TrieNode,
    publication_key,
)

B = TrieLabel.from_bits


def h(data: bytes) -> bytes:
    return xxhash.xxh3_128_digest(data)


def figure_2_trie() -> PatriciaTrie[str]:
    """u.T of Figure 2: P1=000, P2=010, P3=100, P4=101."""
    trie: PatriciaTrie[str] = PatriciaTrie(3)
    for key, name in ((0b000, "P1"), (0b010, "P2"), (0b100, "P3"), (0b101, "P4")):
        assert trie.insert(key, name)
    return trie


# --- an independent, from-scratch reference ----------------------------------------------------
def reference(keys: set[int], key_bits: int) -> tuple[TrieLabel, bytes]:
    """(label, hash) of the Patricia trie over `keys`, built recursively from the definition."""
    width = (key_bits + 7) // 8

    def build(ks: list[int]) -> tuple[TrieLabel, bytes]:
        if len(ks) == 1:
            return TrieLabel(ks[0], key_bits), h(ks[0].to_bytes(width, "big"))
        common = key_bits - (ks[0] ^ ks[-1]).bit_length()  # longest common prefix length
        split = key_bits - 1 - common
        zeros = [k for k in ks if not (k >> split) & 1]
        ones = [k for k in ks if (k >> split) & 1]
        label = TrieLabel(ks[0] >> (key_bits - common), common)
        return label, h(build(zeros)[1] + build(ones)[1])

    if not keys:
        return EMPTY_LABEL, EMPTY_HASH
    return build(sorted(keys))


def all_nodes(trie: PatriciaTrie[object]) -> list[TrieNode[object]]:
    root = trie.root_node()
    out, stack = [], [root] if root is not None else []
    while stack:
        node = stack.pop()
        out.append(node)
        pair = trie.children(node)
        if pair is not None:
            stack.extend(pair)
    return out


def path_length(trie: PatriciaTrie[object], key: int) -> int:
    """Number of nodes from the root to the leaf of `key`, both included."""
    node, count = trie.root_node(), 0
    while node is not None:
        count += 1
        pair = trie.children(node)
        if pair is None:
            return count
        node = pair[(key >> (trie.key_bits - 1 - node.length)) & 1]
    raise AssertionError("key not found")


# --- labels ------------------------------------------------------------------------------------
def test_trie_label_basics() -> None:
    label = B("0101")
    assert (label.value, label.length, label.bits) == (5, 4, "0101")
    assert B("") == EMPTY_LABEL and EMPTY_LABEL.bits == "" and len(EMPTY_LABEL) == 0
    assert B("01") != B("001") and B("01") != B("010")  # the length is part of the label
    assert label.startswith(B("01")) and label.startswith(label) and label.startswith(B(""))
    assert not label.startswith(B("1")) and not B("01").startswith(label)
    assert [label.bit(i) for i in range(4)] == [0, 1, 0, 1]
    assert label.append(1) == B("01011")
    assert {B("0"), B("0"), B("00")} == {B("0"), B("00")}
    with pytest.raises(ValueError):
        B("012")
    with pytest.raises(ValueError):
        TrieLabel(4, 2)  # 4 needs three bits
    with pytest.raises(AttributeError):
        label.value = 3  # type: ignore[misc]


# --- the operations on Figure 2's trie ---------------------------------------------------------
def test_figure_2_shape_and_hashes() -> None:
    trie = figure_2_trie()
    leaf = {k: h(bytes([k])) for k in (0b000, 0b010, 0b100, 0b101)}
    assert trie.size == len(trie) == 4
    assert trie.root() == (B(""), h(h(leaf[0] + leaf[2]) + h(leaf[4] + leaf[5])))
    zero, ten = trie.search(B("0")), trie.search(B("10"))
    assert zero is not None and zero.hash == h(leaf[0] + leaf[2]) and not zero.is_leaf
    assert ten is not None and ten.hash == h(leaf[4] + leaf[5])
    pair = trie.children(ten)
    assert pair is not None and [c.label.bits for c in pair] == ["100", "101"]
    assert [c.item for c in pair] == ["P3", "P4"] and pair[0].is_leaf
    assert trie.children(pair[0]) is None
    assert trie.search(B("100")) is pair[0]


def test_search_is_exact() -> None:
    trie = figure_2_trie()
    for bits in ("1", "00", "01", "11", "1011", "0" * 4):
        assert trie.search(B(bits)) is None
    for bits in ("", "0", "10", "000", "010", "100", "101"):
        node = trie.search(B(bits))
        assert node is not None and node.label == B(bits)


def test_minimal_extension() -> None:
    trie = figure_2_trie()
    cases = {"1": "10", "00": "000", "01": "010", "": None, "0": None, "11": None, "100": None}
    for bits, expected in cases.items():
        node = trie.minimal_extension(B(bits))
        assert (None if node is None else node.label.bits) == expected, bits
    small: PatriciaTrie[str] = PatriciaTrie(3)
    small.insert(0b100, "P3")
    small.insert(0b000, "P1")
    small.insert(0b010, "P2")  # v.T of Figure 2: "10" is no node; "100" is its extension
    node = small.minimal_extension(B("10"))
    assert node is not None and node.label == B("100")


def test_enumerate_by_prefix() -> None:
    trie = figure_2_trie()
    assert list(trie.enumerate()) == [(0, "P1"), (2, "P2"), (4, "P3"), (5, "P4")]
    assert list(trie.enumerate(B("1"))) == [(4, "P3"), (5, "P4")]
    assert list(trie.enumerate(B("101"))) == [(5, "P4")]
    assert list(trie.enumerate(B("01"))) == [(2, "P2")]
    assert list(trie.enumerate(B("11"))) == []
    assert list(trie.enumerate(B("0000"))) == []  # longer than the keys
    assert list(trie.keys()) == [0, 2, 4, 5]


def test_insert_contains_get() -> None:
    trie: PatriciaTrie[str] = PatriciaTrie(3)
    assert not trie.contains(0) and trie.get(0) is None
    assert trie.insert(0b101, "a") and not trie.insert(0b101, "b")
    assert trie.get(0b101) == "a" and 0b101 in trie and trie.size == 1
    assert trie.root() == (B("101"), h(bytes([5])))  # a single leaf is the root
    assert trie.insert(B("111"), "c") and trie.contains(B("111"))
    wide: PatriciaTrie[str] = PatriciaTrie()
    key = bytes(range(16))
    assert wide.insert(key, "k") and wide.contains(int.from_bytes(key, "big"))
    assert wide.root()[1] == h(key)  # 128-bit leaves hash their 16 key bytes
    for bad in (8, -1, True, "1", b"\x01", B("01"), 1.0):
        with pytest.raises(ValueError):
            trie.insert(bad, "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        PatriciaTrie(129)


def test_empty_trie() -> None:
    trie: PatriciaTrie[str] = PatriciaTrie(3)
    assert trie.root() == (EMPTY_LABEL, EMPTY_HASH) and bytes(16) == EMPTY_HASH
    assert trie.search(B("")) is None and trie.minimal_extension(B("")) is None
    assert list(trie.enumerate()) == [] and trie.size == 0 and trie.depth() == 0


# --- hashes: incremental = from scratch, order independence, O(depth) --------------------------
key_sets = st.integers(3, 128).flatmap(
    lambda bits: st.tuples(
        st.just(bits), st.lists(st.integers(0, (1 << bits) - 1), unique=True, max_size=60)
    )
)


@settings(max_examples=150, deadline=None)
@given(key_sets)
def test_incremental_hashes_equal_recomputation(case: tuple[int, list[int]]) -> None:
    bits, keys = case
    trie: PatriciaTrie[int] = PatriciaTrie(bits)
    inserted: set[int] = set()
    for key in keys:
        assert trie.insert(key, key)
        inserted.add(key)
        assert trie.root() == reference(inserted, bits)
    for node in all_nodes(trie):  # every node, not only the root
        under = {k for k, _ in trie.enumerate(node.label)}
        assert (node.label, node.hash) == reference(under, bits)
        assert node.is_leaf == (node.length == bits)
    assert sorted(trie.keys()) == sorted(inserted) and trie.size == len(inserted)


@settings(max_examples=100, deadline=None)
@given(key_sets, st.randoms(use_true_random=False))
def test_root_independent_of_insertion_order(case: tuple[int, list[int]], rnd: random.Random) -> None:
    bits, keys = case
    shuffled = keys[:]
    rnd.shuffle(shuffled)
    a: PatriciaTrie[int] = PatriciaTrie(bits)
    b: PatriciaTrie[int] = PatriciaTrie(bits)
    for key in keys:
        a.insert(key, key)
    for key in shuffled + keys:  # re-inserting changes nothing
        b.insert(key, key)
    assert a.root() == b.root()
    assert [(n.label, n.hash) for n in all_nodes(a)] == [(n.label, n.hash) for n in all_nodes(b)]


@pytest.mark.parametrize("bits", [3, 16, 128])
def test_insert_hashes_only_the_path(bits: int) -> None:
    """Each insert computes exactly one digest per node on the new leaf's root path."""
    rng = random.Random(bits)
    trie: PatriciaTrie[int] = PatriciaTrie(bits)
    total = min(1 << bits, 3000)
    keys = rng.sample(range(1 << bits), total) if bits < 64 else [rng.getrandbits(bits) for _ in range(total)]
    worst = 0
    for key in keys:
        before = trie.hash_computations
        trie.insert(key, key)
        cost = trie.hash_computations - before
        assert cost == path_length(trie, key)
        worst = max(worst, cost)
        before = trie.hash_computations
        assert not trie.insert(key, key) and trie.hash_computations == before  # no rehash
    assert worst <= trie.depth()
    if bits == 128:
        assert worst <= 40, worst  # random keys: depth ~ 2 log2(3000), nowhere near n


def test_publication_key() -> None:
    key = publication_key("h:1", 0, b"hello")
    assert isinstance(key, bytes) and len(key) == 16
    assert key == publication_key("h:1", 0, b"hello")
    others = {
        publication_key("h:1", 1, b"hello"),  # same payload, next sequence number
        publication_key("h:2", 0, b"hello"),
        publication_key("h:1", 0, b"hello!"),
        publication_key("h:1", 0, b""),
        publication_key("h:", 0, b"1hello"),  # boundaries are encoded, not implied
    }
    assert key not in others and len(others) == 5


@pytest.mark.parametrize("bits", [3, 16, 128])
def test_lazy_add_gives_the_same_hashes_as_insert(bits: int) -> None:
    """`add` defers hashing to the next read; the hashes that read finds equal those of
    eager insertion, whatever the order of adds and reads, and each stale node is hashed
    once per settling."""
    rng = random.Random(bits + 1)
    total = min(1 << bits, 2000)
    keys = rng.sample(range(1 << bits), total) if bits < 64 else [rng.getrandbits(bits) for _ in range(total)]
    eager: PatriciaTrie[int] = PatriciaTrie(bits)
    lazy: PatriciaTrie[int] = PatriciaTrie(bits)
    for i, key in enumerate(keys):
        assert eager.insert(key, key) == lazy.add(key, key)
        assert not lazy.add(key, key)  # duplicates are refused like insert refuses them
        if i % 97 == 0:
            assert lazy.root() == eager.root()
    assert lazy.root() == eager.root()
    assert [(n.label, n.hash) for n in all_nodes(lazy)] == [(n.label, n.hash) for n in all_nodes(eager)]
    before = lazy.hash_computations
    lazy.root()
    assert lazy.hash_computations == before  # nothing stale any more
    lazy.add(keys[0] ^ 1, 0) if bits < 64 else lazy.add(rng.getrandbits(bits), 0)
    lazy.insert(rng.getrandbits(bits) if bits >= 64 else (keys[1] ^ 3), 0)  # insert settles first
    eager2: PatriciaTrie[int] = PatriciaTrie(bits)
    for key, item in lazy.items():
        eager2.insert(key, item)
    assert lazy.root() == eager2.root()


@pytest.mark.parametrize("bits", [3, 16, 128])
def test_remove_leaves_the_trie_of_the_remaining_keys(bits: int) -> None:
    rng = random.Random(bits + 7)
    total = min(1 << bits, 600)
    keys = rng.sample(range(1 << bits), total) if bits < 64 else [rng.getrandbits(bits) for _ in range(total)]
    trie: PatriciaTrie[int] = PatriciaTrie(bits)
    for key in keys:
        trie.add(key, key)
    rng.shuffle(keys)
    gone, kept = keys[: total // 2], keys[total // 2 :]
    for i, key in enumerate(gone):
        assert trie.remove(key)
        assert not trie.remove(key) and not trie.contains(key)
        if i % 50 == 0:
            trie.root()  # interleave reads
    reference: PatriciaTrie[int] = PatriciaTrie(bits)
    for key in kept:
        reference.insert(key, key)
    assert len(trie) == len(kept) and trie.root() == reference.root()
    assert [(n.label, n.hash) for n in all_nodes(trie)] == [(n.label, n.hash) for n in all_nodes(reference)]
    for key in kept:
        assert trie.remove(key)
    assert len(trie) == 0 and trie.root() == PatriciaTrie(bits).root()


@settings(max_examples=200, deadline=None)
@given(
    bits=st.sampled_from([3, 8, 128]),
    ops=st.lists(
        st.tuples(st.sampled_from(["add", "add", "add", "remove", "insert", "read"]), st.integers(0, 2**128 - 1)),
        max_size=120,
    ),
)
def test_any_mix_of_updates_and_reads_gives_the_trie_of_the_keys_held(bits: int, ops: list[tuple[str, int]]) -> None:
    """Whatever the order of lazy adds (placed at the next read), removals (of placed or
    still waiting keys), eager inserts and reads, the trie has the labels and hashes of a
    trie built eagerly from the keys it holds."""
    trie: PatriciaTrie[int] = PatriciaTrie(bits)
    held: set[int] = set()
    for op, number in ops:
        key = number % (1 << bits) if op != "remove" or not held else sorted(held)[number % len(held)]
        if op == "add":
            assert trie.add(key, key) == (key not in held)
            held.add(key)
        elif op == "insert":
            assert trie.insert(key, key) == (key not in held)
            held.add(key)
        elif op == "remove":
            assert trie.remove(key) == (key in held)
            held.discard(key)
        else:
            trie.root()
        assert len(trie) == len(held) and all(trie.contains(k) for k in held)
    reference: PatriciaTrie[int] = PatriciaTrie(bits)
    for key in sorted(held):
        reference.insert(key, key)
    assert trie.root() == reference.root()
    assert [(n.label, n.hash) for n in all_nodes(trie)] == [(n.label, n.hash) for n in all_nodes(reference)]
    assert sorted(trie.keys()) == sorted(held)
