"""A Patricia trie with Merkle hashes over fixed-length binary keys (paper 000, §4.2).

Every subscriber keeps its publications for a topic in one of these tries; the
anti-entropy protocol (`pubsub.publications.antientropy`, Alg. 5) compares two tries by exchanging
(label, hash) pairs of their nodes.

Shape
-----
Keys are bit strings of one fixed length ``key_bits`` (128 for real publication keys, see
`publication_key`; tests use 3-bit keys to replay Figure 2).  Chains of single-child nodes
are compressed, so every inner node has exactly two children.  Each node carries a
*label*:

* a leaf's label is its whole key (``key_bits`` bits);
* an inner node's label is the longest common prefix of its two children's labels, hence
  strictly shorter than ``key_bits``.  Child 0 continues with bit 0 after that prefix,
  child 1 with bit 1.

Labels are `TrieLabel` values: an immutable pair (``value``, ``length``) of integers, the
label's bits read as a big-endian number plus the number of bits, so that "01" and "010"
differ.  Prefix tests and bit lookups are integer shifts; ``.bits`` gives the "0"/"1"
string used on the wire.  The empty label ``TrieLabel(0, 0)`` (the paper's ⊥) is the
root's label whenever the stored keys do not all share a first bit.

Hashes
------
All hashes are 16-byte xxh3-128 digests:

* leaf: ``xxh3_128(key bytes)``, the key as a big-endian integer in ``ceil(key_bits / 8)``
  bytes -- for 128-bit keys exactly the 16 key bytes;
* inner node: ``xxh3_128(hash(child 0) || hash(child 1))`` (a Merkle hash: §4.2 hashes
  the concatenation of the children's hashes).

Equal hashes at equal labels mean equal key sets below (up to hash collisions), which is
what CheckTrie case (i) relies on.  An insertion recomputes only the hashes on the path
from the new leaf to the root: O(depth) digest computations, counted in
``hash_computations`` so that tests can assert the bound without timing anything.

`add` is the lazy form the publication path uses (issue 11): it records the new leaf
(membership and size are exact at once) and leaves it waiting; the next read that needs the
shape or the hashes (`root`, `search`, `children`, ...) sorts the waiting leaves by key and
places them in one descent, splitting the sorted run at each node by the next bit and
hashing every node on their paths once, children before parents.  A batch of k insertions
then shares the walk and the hashes of the upper part of their paths, and a node that
receives a thousand publications between two anti-entropy rounds walks and hashes the top
of its trie once, not a thousand times.  `remove` marks the nodes above the removed leaf
stale (an empty hash; a stale node's ancestors are always stale too, so a clean node heads
a clean subtree), and the next read hashes them again before it places waiting leaves.

Empty trie
----------
An empty trie has no nodes: `search` and `minimal_extension` find nothing, and `root`
reports the pair (``TrieLabel(0, 0)``, `EMPTY_HASH`) with ``EMPTY_HASH`` = 16 zero bytes
(not the digest of anything stored).  A peer that receives this pair finds either a
root with label ⊥ and a different hash (case (ii)) or no such node (case (iii)), and
either way ends up sending everything it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsub.publications.pytrie import PatriciaTrie, TrieNode
from pubsub.publications.triekeys import EMPTY_HASH, EMPTY_LABEL, HASH_BYTES, KEY_BITS, TrieLabel, publication_key

__all__ = [
    "COMPILED", "EMPTY_HASH", "EMPTY_LABEL", "HASH_BYTES", "KEY_BITS", "PatriciaTrie", "TrieLabel", "TrieNode",
    "publication_key",
]

#: Whether `PatriciaTrie` and `TrieNode` are the compiled ones (`pubsub/publications/_ctrie.pyx`,
#: built by `make venv`): the same classes, behaviour and hashes as the Python reference in
#: `pubsub.publications.pytrie`; placing a leaf in a trie of 20,000 takes about 2.4 µs there
#: against 17-21 in the reference (docs/measurements/issue11.md, nineteenth round).
COMPILED = False
if not TYPE_CHECKING:
    try:
        from pubsub.publications._ctrie import PatriciaTrie, TrieNode  # noqa: F811
    except ImportError:  # not built (no C compiler where the project was installed)
        pass
    else:
        COMPILED = True
