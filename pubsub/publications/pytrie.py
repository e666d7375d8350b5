"""The Patricia trie in Python: the reference implementation of `pubsub.publications.trie`
(whose docstring states the shapes, hashes and costs), and what the daemons and the
simulator run where the compiled one (`pubsub/publications/_ctrie.pyx`) was not built."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from operator import attrgetter
from typing import Generic, TypeVar, cast

from pubsub.publications.triekeys import EMPTY_HASH, EMPTY_LABEL, KEY_BITS, TrieLabel, digest, key_int

V = TypeVar("V")


class TrieNode(Generic[V]):
    """One node: a leaf (holding a key and its value) or an inner node with two children.

    ``value``/``length`` spell the node's label (see `TrieLabel`); ``hash`` is kept up to
    date by `PatriciaTrie.insert`.  Treat nodes as read-only outside this module.
    """

    __slots__ = ("value", "length", "hash", "children", "item")

    def __init__(
        self,
        value: int,
        length: int,
        hash_: bytes,
        children: list[TrieNode[V]] | None,
        item: V | None,
    ) -> None:
        self.value = value
        self.length = length
        self.hash = hash_
        self.children = children
        self.item = item

    @property
    def label(self) -> TrieLabel:
        return TrieLabel(self.value, self.length)

    @property
    def is_leaf(self) -> bool:
        return self.children is None

    def __repr__(self) -> str:
        kind = "leaf" if self.children is None else "inner"
        return f"TrieNode({kind} {self.label.bits!r} {self.hash.hex()[:8]})"


class PatriciaTrie(Generic[V]):
    """A Patricia trie over ``key_bits``-bit keys with Merkle hashes (module docstring)."""

    def __init__(self, key_bits: int = KEY_BITS) -> None:
        if not 1 <= key_bits <= KEY_BITS:
            raise ValueError(f"key length must be 1..{KEY_BITS} bits, got {key_bits}")
        self.key_bits = key_bits
        self._key_bytes = (key_bits + 7) // 8
        self._root: TrieNode[V] | None = None
        self._size = 0
        self._stale = False  # some leaves wait in `_pending`, or nodes for their hash
        #: Leaves `add` made that wait for the next read to be placed (`_settle`).
        self._pending: list[TrieNode[V]] = []
        self._key_limit = 1 << key_bits
        #: Every leaf by its key: membership in O(1).
        self._leaves: dict[int, TrieNode[V]] = {}
        #: Digests computed so far (leaf and inner); insert adds O(depth) to it.
        self.hash_computations = 0

    # ------------------------------------------------------------------ keys and hashes
    def key_int(self, key: int | bytes | TrieLabel) -> int:
        """A key as an integer below 2**key_bits (`triekeys.key_int`)."""
        return key_int(key, self.key_bits)

    def leaf_hash(self, key: int) -> bytes:
        """h(key) of §4.2: xxh3-128 of the key's big-endian bytes."""
        self.hash_computations += 1
        return digest(key.to_bytes(self._key_bytes, "big"))

    def _inner_hash(self, node: TrieNode[V]) -> bytes:
        children = node.children
        assert children is not None
        self.hash_computations += 1
        return digest(children[0].hash + children[1].hash)

    # ------------------------------------------------------------------ updates
    def insert(self, key: int | bytes | TrieLabel, item: V) -> bool:
        """Store `item` under `key`; False (and nothing changes) if the key is present.

        Walks down once, splices in the new leaf (and one new inner node unless the trie
        was empty), then recomputes the hashes of the nodes on the walked path only.
        """
        k = self.key_int(key)
        if k in self._leaves:
            return False
        self._settle()
        leaf: TrieNode[V] = TrieNode(k, self.key_bits, b"", None, item)
        self._leaves[k] = leaf
        self._size += 1
        if self._root is None:
            leaf.hash = self.leaf_hash(k)
            self._root = leaf
        else:
            self._root = self._place_one(self._root, leaf)
        return True

    def add(self, key: int | bytes | TrieLabel, item: V) -> bool:
        """`insert` without walking or hashing: the new leaf waits in `_pending` and the next
        read places every waiting leaf and hashes what changed in one pass (`_settle`; see
        the module docstring).  Membership and size are exact at once."""
        k = key if type(key) is int and 0 <= key < self._key_limit else self.key_int(key)
        leaves = self._leaves
        if k in leaves:
            return False  # the same key is stored already
        leaf: TrieNode[V] = TrieNode(k, self.key_bits, b"", None, item)
        leaves[k] = leaf
        self._pending.append(leaf)
        self._size += 1
        self._stale = True
        return True

    def remove(self, key: int | bytes | TrieLabel) -> bool:
        """Take the leaf of `key` out (its parent is replaced by the sibling); False if the
        key is not stored.  The nodes above are marked stale like `add` does.  Used when a
        publication could not be written to the node's store: what is not durable is not
        held either."""
        k = self.key_int(key)
        if k not in self._leaves:
            return False
        self._settle()  # the leaf may still wait in `_pending`
        del self._leaves[k]
        self._size -= 1
        self._stale = True
        node = self._root
        assert node is not None
        if node.children is None:  # the only leaf
            self._root = None
            return True
        kb = self.key_bits
        holder: list[TrieNode[V]] | None = None  # the list that holds `node`
        slot = 0
        while True:
            children = node.children
            assert children is not None
            branch = (k >> (kb - 1 - node.length)) & 1
            child = children[branch]
            if child.children is None:  # `node` is the leaf's parent: splice the sibling in
                sibling = children[1 - branch]
                if holder is None:
                    self._root = sibling
                else:
                    holder[slot] = sibling
                return True
            node.hash = b""
            holder, slot, node = children, branch, child

    def _settle(self) -> None:
        """Hash the nodes `remove` left stale, then place the leaves `add` left waiting."""
        if not self._stale:
            return
        self._stale = False
        if self._root is not None and not self._root.hash:
            self._rehash_stale(self._root)
        pending = self._pending
        if pending:
            self._pending = []
            pending.sort(key=attrgetter("value"))
            keys = [leaf.value for leaf in pending]
            if self._root is None:
                self._root = self._build(pending, keys, 0, len(keys))
            else:
                self._root = self._place(self._root, pending, keys, 0, len(keys))

    def _rehash_stale(self, root: TrieNode[V]) -> None:
        """Hash every stale node under `root`, children before parents."""
        order: list[TrieNode[V]] = []
        stack = [root]
        while stack:
            node = stack.pop()
            if node.hash:
                continue  # clean, and so is everything below it
            order.append(node)
            if node.children is not None:
                stack.extend(node.children)
        for node in reversed(order):
            if node.children is None:
                node.hash = self.leaf_hash(node.value)
            else:
                node.hash = self._inner_hash(node)

    def _place(
        self, node: TrieNode[V], leaves: list[TrieNode[V]], keys: list[int], lo: int, hi: int
    ) -> TrieNode[V]:
        """The subtree of `node` with the new leaves ``leaves[lo:hi]`` (sorted by key, none
        stored below `node` yet) spliced in, every node on their paths hashed once.

        If every new key extends `node`'s label, the keys split between its children at
        the next bit and each child takes its share.  Otherwise the subtree gets a new top:
        an inner node at the longest prefix common to `node`'s label and every new key,
        with `node` (and the keys on its side) below one child and a subtree of the other
        keys below the other.  Sorted keys make the first and last the only ones to test.
        """
        if hi - lo == 1:
            return self._place_one(node, leaves[lo])
        kb = self.key_bits
        length = node.length
        shift = kb - length
        value = node.value
        first, last = keys[lo], keys[hi - 1]
        if first >> shift == value and last >> shift == value:
            children = node.children
            assert children is not None  # a leaf's label is a whole key: no new key extends it
            mid = self._split(keys, lo, hi, length)
            # a share of one leaf goes straight to `_place_one` (most shares near the bottom)
            if mid - lo == 1:
                children[0] = self._place_one(children[0], leaves[lo])
            elif mid > lo:
                children[0] = self._place(children[0], leaves, keys, lo, mid)
            if hi - mid == 1:
                children[1] = self._place_one(children[1], leaves[mid])
            elif mid < hi:
                children[1] = self._place(children[1], leaves, keys, mid, hi)
            node.hash = self._inner_hash(node)
            return node
        # The longest prefix of `node`'s label shared by the first and the last key (and
        # so by every key between them), and by those two keys themselves.
        top = value << shift
        common = min(length, kb - (first ^ top).bit_length(), kb - (last ^ top).bit_length())
        common = min(common, kb - (first ^ last).bit_length())
        mid = self._split(keys, lo, hi, common)
        if (value >> (length - 1 - common)) & 1:
            pair = [self._build(leaves, keys, lo, mid), self._place(node, leaves, keys, mid, hi) if mid < hi else node]
        else:
            pair = [self._place(node, leaves, keys, lo, mid) if mid > lo else node, self._build(leaves, keys, mid, hi)]
        return self._joined(first >> (kb - common), common, pair)

    def _place_one(self, top: TrieNode[V], leaf: TrieNode[V]) -> TrieNode[V]:
        """`_place` for a single new leaf, walking down without recursion: the subtree of
        `top` with `leaf` spliced in and the nodes on its path hashed.  (The hot loop of
        `_settle`: its steps are written out rather than calling `_joined` and
        `_inner_hash`.)"""
        kb = self.key_bits
        k = leaf.value
        leaf.hash = digest(k.to_bytes(self._key_bytes, "big"))
        path: list[TrieNode[V]] = []
        node = top
        parent: list[TrieNode[V]] | None = None
        slot = 0
        while True:
            length = node.length
            diff = (k >> (kb - length)) ^ node.value
            if diff:
                break
            path.append(node)
            parent = node.children
            assert parent is not None  # a leaf's label differs from any other key
            slot = (k >> (kb - 1 - length)) & 1
            node = parent[slot]
        common = length - diff.bit_length()
        pair = [node, leaf] if (k >> (kb - 1 - common)) & 1 else [leaf, node]
        inner = TrieNode(k >> (kb - common), common, digest(pair[0].hash + pair[1].hash), pair, None)
        if parent is None:
            top = inner
        else:
            parent[slot] = inner
        for ancestor in reversed(path):
            children = ancestor.children
            assert children is not None
            ancestor.hash = digest(children[0].hash + children[1].hash)
        self.hash_computations += len(path) + 2
        return top

    def _build(self, leaves: list[TrieNode[V]], keys: list[int], lo: int, hi: int) -> TrieNode[V]:
        """A hashed subtree of the new leaves ``leaves[lo:hi]`` alone (sorted, at least one)."""
        if hi - lo == 1:
            leaf = leaves[lo]
            leaf.hash = self.leaf_hash(leaf.value)
            return leaf
        kb = self.key_bits
        first = keys[lo]
        common = kb - (first ^ keys[hi - 1]).bit_length()
        mid = self._split(keys, lo, hi, common)
        pair = [self._build(leaves, keys, lo, mid), self._build(leaves, keys, mid, hi)]
        return self._joined(first >> (kb - common), common, pair)

    def _joined(self, value: int, length: int, pair: list[TrieNode[V]]) -> TrieNode[V]:
        """A new inner node labelled (`value`, `length`) over `pair`, hashed."""
        inner = TrieNode(value, length, b"", pair, None)
        inner.hash = self._inner_hash(inner)
        return inner

    def _split(self, keys: list[int], lo: int, hi: int, common: int) -> int:
        """Where ``keys[lo:hi]`` (sorted, all sharing their first `common` bits) splits: the
        index of the first key whose next bit is 1 (`hi` if none)."""
        cut = self.key_bits - 1 - common
        return bisect_left(keys, ((keys[lo] >> (cut + 1) << 1) | 1) << cut, lo, hi)

    # ------------------------------------------------------------------ queries
    @property
    def size(self) -> int:
        """Number of stored keys."""
        return self._size

    def __len__(self) -> int:
        return self._size

    def root(self) -> tuple[TrieLabel, bytes]:
        """(label, hash) of the root; (⊥, EMPTY_HASH) for the empty trie."""
        self._settle()
        if self._root is None:
            return EMPTY_LABEL, EMPTY_HASH
        return self._root.label, self._root.hash

    def root_node(self) -> TrieNode[V] | None:
        self._settle()
        return self._root

    def _leaf_for(self, k: int) -> TrieNode[V] | None:
        return self._leaves.get(k)

    def contains(self, key: int | bytes | TrieLabel) -> bool:
        return self._leaf_for(self.key_int(key)) is not None

    __contains__ = contains

    def get(self, key: int | bytes | TrieLabel) -> V | None:
        """The item stored under `key`, or None."""
        leaf = self._leaf_for(self.key_int(key))
        return None if leaf is None else leaf.item

    def _descend(self, label: TrieLabel) -> TrieNode[V] | None:
        """The shallowest node whose label has `label` as a (not necessarily proper) prefix.

        In a Patricia trie the nodes extending a given bit string form one subtree (or
        none), so this node is unique.  None when no stored key starts with `label`.
        """
        if label.length > self.key_bits:
            return None
        self._settle()
        node = self._root
        while node is not None:
            if node.length >= label.length:
                # Does this node's label extend `label`?
                return node if node.value >> (node.length - label.length) == label.value else None
            # node's label is shorter: it must be a prefix of `label` to go on.
            if label.value >> (label.length - node.length) != node.value:
                return None
            assert node.children is not None  # leaves have key_bits >= label.length
            node = node.children[(label.value >> (label.length - 1 - node.length)) & 1]
        return None

    def search(self, label: TrieLabel) -> TrieNode[V] | None:
        """SearchNode of Alg. 5 l.13: the node whose label is exactly `label`, or None."""
        node = self._descend(label)
        return node if node is not None and node.length == label.length else None

    def minimal_extension(self, label: TrieLabel) -> TrieNode[V] | None:
        """The node of least label length whose label has `label` as a proper prefix.

        This is node c of CheckTrie case (iii) (Alg. 5 l.19).  It is unique whenever no
        node is labelled exactly `label` -- the only situation CheckTrie asks.  If a node
        *is* labelled `label`, both of its children would qualify; this returns None then
        (and for a leaf, which has no extension at all).
        """
        node = self._descend(label)
        return node if node is not None and node.length > label.length else None

    def children(self, node: TrieNode[V]) -> tuple[TrieNode[V], TrieNode[V]] | None:
        """(child 0, child 1) of an inner node; None for a leaf."""
        self._settle()
        if node.children is None:
            return None
        return node.children[0], node.children[1]

    def enumerate(self, prefix: TrieLabel = EMPTY_LABEL) -> Iterator[tuple[int, V]]:
        """Every (key, item) whose key starts with `prefix`, in increasing key order."""
        start = self._descend(prefix)
        if start is None:
            return
        stack = [start]
        while stack:
            node = stack.pop()
            if node.children is None:
                yield node.value, cast(V, node.item)  # a leaf always holds its item
            else:
                stack.append(node.children[1])
                stack.append(node.children[0])

    def items(self) -> Iterator[tuple[int, V]]:
        return self.enumerate(EMPTY_LABEL)

    def keys(self) -> Iterator[int]:
        for key, _ in self.enumerate(EMPTY_LABEL):
            yield key

    def depth(self) -> int:
        """Number of nodes on the longest root-to-leaf path (0 for the empty trie)."""
        self._settle()
        best = 0
        stack = [(self._root, 1)] if self._root is not None else []
        while stack:
            node, d = stack.pop()
            best = max(best, d)
            if node.children is not None:
                stack.extend((child, d + 1) for child in node.children)
        return best

    def copy(self) -> PatriciaTrie[V]:
        """A structural copy: new nodes and child lists; labels, hashes and items shared
        (they are immutable), much faster than inserting every item again."""
        self._settle()
        dst: PatriciaTrie[V] = PatriciaTrie(self.key_bits)
        dst._size = self._size
        dst.hash_computations = self.hash_computations
        if self._root is None:
            return dst
        root = self._root
        dst._root = TrieNode(root.value, root.length, root.hash, None, root.item)
        stack = [(root, dst._root)]
        while stack:
            old, new = stack.pop()
            if old.children is None:
                dst._leaves[old.value] = new
                continue
            new.children = [TrieNode(c.value, c.length, c.hash, None, c.item) for c in old.children]
            stack.extend(zip(old.children, new.children, strict=True))
        return dst
