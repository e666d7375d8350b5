# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The Patricia trie of `pubsub.publications.trie`, compiled (issue 11: native per-publication work).

The same classes (`PatriciaTrie`, `TrieNode`), the same methods, shapes, hashes and
``hash_computations`` as the module docstring of `pubsub.publications.trie` states them; the
Python classes of `pubsub.publications.pytrie` are the reference, and
`tests/publications/test_ctrie.py` runs both side by side on random operations.
`pubsub.publications.trie` uses these when this extension was built.

What differs is inside, and is about memory more than the interpreter: placing a leaf in a
trie of tens of thousands walks a path whose nodes are not in the processor's caches, so
each object visited costs a cache miss.  Here a node holds its two children and its 16-byte
digest in itself (the reference reaches them through a list and a bytes object), so a step
down the path touches two objects (the node and the sibling whose digest the parent's hash
needs) instead of five; and a label is a 128-bit C integer with its bits left-aligned (the
label of length L is the top L bits), so prefix tests, common-prefix lengths and the splits
of a batch are machine instructions.  ``children`` and ``hash`` are made on demand for the
Python code that reads them.  Digests are xxh3-128 computed by the xxhash library inside the
``xxhash`` package, checked against that package's Python function when this module loads.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsUnsignedLongLongMask, PyLong_FromUnsignedLongLong
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdlib cimport qsort
from libc.string cimport memcpy

import os

from pubsub.publications.triekeys import EMPTY_HASH, EMPTY_LABEL, HASH_BYTES, KEY_BITS, TrieLabel, digest, key_int

cdef extern from *:
    """
    typedef unsigned __int128 ctrie_u128;

    static inline ctrie_u128 ctrie_make(unsigned long long hi, unsigned long long lo) {
        return ((ctrie_u128)hi << 64) | lo;
    }
    static inline unsigned long long ctrie_hi(ctrie_u128 x) { return (unsigned long long)(x >> 64); }
    static inline unsigned long long ctrie_lo(ctrie_u128 x) { return (unsigned long long)x; }
    static inline ctrie_u128 ctrie_shl(ctrie_u128 x, int n) { return n >= 128 ? 0 : (n <= 0 ? x : x << n); }
    static inline ctrie_u128 ctrie_shr(ctrie_u128 x, int n) { return n >= 128 ? 0 : (n <= 0 ? x : x >> n); }
    static inline int ctrie_lt(ctrie_u128 a, ctrie_u128 b) { return a < b; }

    /* The top n bits set (0 <= n <= 128). */
    static inline ctrie_u128 ctrie_top(int n) {
        if (n <= 0) return 0;
        if (n >= 128) return ~(ctrie_u128)0;
        return ~(ctrie_u128)0 << (128 - n);
    }
    /* The first n bits of x (x's bits past them cleared). */
    static inline ctrie_u128 ctrie_prefix(ctrie_u128 x, int n) { return x & ctrie_top(n); }
    /* Whether a and b agree on their first n bits. */
    static inline int ctrie_agree(ctrie_u128 a, ctrie_u128 b, int n) { return ((a ^ b) & ctrie_top(n)) == 0; }
    /* How many leading bits a and b share (128 if equal). */
    static inline int ctrie_common(ctrie_u128 a, ctrie_u128 b) {
        ctrie_u128 x = a ^ b;
        unsigned long long hi = (unsigned long long)(x >> 64), lo = (unsigned long long)x;
        if (hi) return __builtin_clzll(hi);
        if (lo) return 64 + __builtin_clzll(lo);
        return 128;
    }
    /* Bit i counted from the left (0 <= i < 128). */
    static inline int ctrie_bit(ctrie_u128 x, int i) { return (int)((x >> (127 - i)) & 1); }
    /* The big-endian bytes of x into out[0..15]. */
    static inline void ctrie_be(ctrie_u128 x, unsigned char *out) {
        for (int i = 15; i >= 0; i--) { out[i] = (unsigned char)x; x >>= 8; }
    }
    """
    ctypedef unsigned long long u64 "unsigned long long"
    ctypedef struct u128 "ctrie_u128":
        pass
    u128 ctrie_make(u64 hi, u64 lo) nogil
    u64 ctrie_hi(u128 x) nogil
    u64 ctrie_lo(u128 x) nogil
    u128 ctrie_shl(u128 x, int n) nogil
    u128 ctrie_shr(u128 x, int n) nogil
    bint ctrie_lt(u128 a, u128 b) nogil
    u128 ctrie_prefix(u128 x, int n) nogil
    bint ctrie_agree(u128 a, u128 b, int n) nogil
    int ctrie_common(u128 a, u128 b) nogil
    int ctrie_bit(u128 x, int i) nogil
    void ctrie_be(u128 x, unsigned char *out) nogil

cdef extern from *:
    """
    #include <dlfcn.h>
    /* XXH3_128bits of the xxhash library inside the `xxhash` package, whose digests the
       reference computes: found by its name in that package's extension module. */
    typedef struct { unsigned long long low64; unsigned long long high64; } ctrie_xxh128;
    typedef ctrie_xxh128 (*ctrie_xxh3_fn)(const void *, size_t);
    static ctrie_xxh3_fn ctrie_xxh3 = NULL;

    static int ctrie_bind_xxh3(const char *path) {
        void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        if (handle == NULL) return 0;
        ctrie_xxh3 = (ctrie_xxh3_fn)dlsym(handle, "XXH3_128bits");
        return ctrie_xxh3 != NULL;
    }

    /* The 16-byte digest as `xxhash.xxh3_128_digest` spells it (high half first, big-endian). */
    static inline void ctrie_digest(const void *data, size_t len, unsigned char *out) {
        ctrie_xxh128 h = ctrie_xxh3(data, len);
        for (int i = 0; i < 8; i++) {
            out[i] = (unsigned char)(h.high64 >> (56 - 8 * i));
            out[8 + i] = (unsigned char)(h.low64 >> (56 - 8 * i));
        }
    }
    """
    int ctrie_bind_xxh3(const char *path)
    void ctrie_digest(const void *data, size_t length, unsigned char *out) nogil


def _bind_digest() -> None:
    """Find xxh3-128 in the loaded `xxhash` package and check it against that package's own
    digest; ImportError if either fails (`pubsub.publications.trie` then uses the reference)."""
    import xxhash._xxhash

    if not ctrie_bind_xxh3(os.fsencode(xxhash._xxhash.__file__)):
        raise ImportError(f"no XXH3_128bits in {xxhash._xxhash.__file__}")
    cdef unsigned char out[16]
    for sample in (b"", b"pubsub", bytes(range(256)) * 3):
        ctrie_digest(<const char *>sample, len(sample), out)
        if PyBytes_FromStringAndSize(<char *>out, 16) != digest(sample):
            raise ImportError("XXH3_128bits of the xxhash package disagrees with xxhash.xxh3_128_digest")


_bind_digest()


cdef inline int _from_int(object value, int shift, u128 *out) except -1:
    """`out` = a Python integer in [0, 2**128) (the callers check), shifted left by `shift`
    bits (0..128).  The mask conversion takes the low 64 bits of any integer."""
    cdef u64 lo = PyLong_AsUnsignedLongLongMask(value)
    cdef u64 hi = PyLong_AsUnsignedLongLongMask(value >> 64)
    out[0] = ctrie_shl(ctrie_make(hi, lo), shift)
    return 0


cdef inline object _to_int(u128 bits, int shift):
    """`bits` shifted right by `shift` bits (0..128), as a Python integer."""
    cdef u128 x = ctrie_shr(bits, shift)
    cdef u64 hi = ctrie_hi(x)
    if hi == 0:
        return PyLong_FromUnsignedLongLong(ctrie_lo(x))
    return (PyLong_FromUnsignedLongLong(hi) << 64) | PyLong_FromUnsignedLongLong(ctrie_lo(x))


#: One waiting leaf of a batch placement: its aligned key and the node (kept alive by the
#: list of waiting leaves while the batch is placed).
cdef struct Entry:
    u128 key
    void *leaf


cdef int _entry_order(const void *a, const void *b) noexcept nogil:
    cdef u128 x = (<Entry *>a).key
    cdef u128 y = (<Entry *>b).key
    if ctrie_lt(x, y):
        return -1
    if ctrie_lt(y, x):
        return 1
    return 0


cdef class TrieNode:
    """One node: a leaf (holding a key and its value) or an inner node with two children
    (`pubsub.publications.pytrie.TrieNode`, whose constructor this one takes too; ``hash`` is
    16 bytes, or empty while the node waits to be hashed)."""

    cdef u128 bits
    cdef readonly int length
    cdef unsigned char digest[16]
    cdef bint hashed
    cdef TrieNode zero
    cdef TrieNode one
    cdef public object item
    cdef object _value

    def __init__(self, value, int length, bytes hash_, children, item):
        if length < 0 or length > KEY_BITS or value < 0 or value >> length:
            raise ValueError(f"not a {length}-bit label value: {value}")
        _from_int(value, 128 - length, &self.bits)
        self.length = length
        self.hash = hash_
        if children is not None:
            self.zero, self.one = children
        self.item = item
        self._value = value

    def __class_getitem__(cls, item):
        return cls

    @property
    def hash(self):
        """The node's digest (16 bytes), or b"" while it waits to be hashed."""
        return PyBytes_FromStringAndSize(<char *>self.digest, 16) if self.hashed else b""

    @hash.setter
    def hash(self, bytes value):
        if len(value) not in (0, HASH_BYTES):
            raise ValueError(f"a node hash has {HASH_BYTES} bytes, not {len(value)}")
        self.hashed = len(value) == HASH_BYTES
        if self.hashed:
            memcpy(self.digest, PyBytes_AS_STRING(value), HASH_BYTES)

    @property
    def children(self):
        """[child 0, child 1] of an inner node (a new list each time); None for a leaf."""
        return None if self.zero is None else [self.zero, self.one]

    @property
    def value(self):
        """The label's bits read as a big-endian integer (`TrieLabel.value`)."""
        if self._value is None:
            self._value = _to_int(self.bits, 128 - self.length)
        return self._value

    @property
    def label(self):
        return TrieLabel(self.value, self.length)

    @property
    def is_leaf(self):
        return self.zero is None

    def __repr__(self):
        kind = "leaf" if self.zero is None else "inner"
        return f"TrieNode({kind} {self.label.bits!r} {self.hash.hex()[:8]})"


cdef inline TrieNode _node(u128 bits, int length, object item, object value):
    """A node not yet hashed (and without children)."""
    cdef TrieNode node = TrieNode.__new__(TrieNode)
    node.bits = bits
    node.length = length
    node.item = item
    node._value = value
    return node


cdef inline void _hash_pair(TrieNode node) noexcept:
    """`node`'s digest from its children's: xxh3-128 of the two, concatenated (§4.2)."""
    cdef unsigned char buf[32]
    memcpy(buf, node.zero.digest, 16)
    memcpy(buf + 16, node.one.digest, 16)
    ctrie_digest(buf, 32, node.digest)
    node.hashed = True


cdef class PatriciaTrie:
    """A Patricia trie over ``key_bits``-bit keys with Merkle hashes
    (`pubsub.publications.pytrie.PatriciaTrie`)."""

    cdef readonly int key_bits
    cdef int _key_bytes
    cdef int _shift
    cdef object _key_limit
    cdef TrieNode _root
    cdef Py_ssize_t _size
    cdef bint _stale
    cdef list _pending
    cdef dict _leaves
    #: Digests computed so far (leaf and inner); insert adds O(depth) to it.
    cdef public Py_ssize_t hash_computations

    def __init__(self, int key_bits=KEY_BITS):
        if not 1 <= key_bits <= KEY_BITS:
            raise ValueError(f"key length must be 1..{KEY_BITS} bits, got {key_bits}")
        self.key_bits = key_bits
        self._key_bytes = (key_bits + 7) // 8
        self._shift = 128 - key_bits
        self._key_limit = 1 << key_bits
        self._root = None
        self._size = 0
        self._stale = False
        self._pending = []
        self._leaves = {}
        self.hash_computations = 0

    def __class_getitem__(cls, item):
        return cls

    # ------------------------------------------------------------------ keys and hashes
    cpdef object key_int(self, object key):
        """A key as an integer below 2**key_bits (`triekeys.key_int`)."""
        return key_int(key, self.key_bits)

    def leaf_hash(self, key):
        """h(key) of §4.2: xxh3-128 of the key's big-endian bytes."""
        cdef TrieNode leaf = self._leaf(self.key_int(key), None)
        self._hash_leaf(leaf)
        return leaf.hash

    cdef inline TrieNode _leaf(self, object k, object item):
        """A new leaf for key `k` (checked by the caller), not yet hashed."""
        cdef TrieNode leaf = _node(ctrie_make(0, 0), self.key_bits, item, k)
        _from_int(k, self._shift, &leaf.bits)
        return leaf

    cdef inline void _hash_leaf(self, TrieNode leaf) noexcept:
        """A leaf's digest: xxh3-128 of its key's big-endian bytes (counted)."""
        cdef unsigned char buf[16]
        ctrie_be(ctrie_shr(leaf.bits, self._shift), buf)
        ctrie_digest(buf + 16 - self._key_bytes, self._key_bytes, leaf.digest)
        leaf.hashed = True
        self.hash_computations += 1

    cdef inline void _hash_inner(self, TrieNode node) noexcept:
        _hash_pair(node)
        self.hash_computations += 1

    # ------------------------------------------------------------------ updates
    def insert(self, key, item):
        """Store `item` under `key`; False (and nothing changes) if the key is present."""
        k = self.key_int(key)
        if k in self._leaves:
            return False
        self._settle()
        cdef TrieNode leaf = self._leaf(k, item)
        self._leaves[k] = leaf
        self._size += 1
        if self._root is None:
            self._hash_leaf(leaf)
            self._root = leaf
        else:
            self._root = self._place_one(self._root, leaf)
        return True

    def add(self, key, item):
        """`insert` without walking or hashing: the new leaf waits for the next read
        (`pubsub.publications.pytrie.PatriciaTrie.add`).  Membership and size are exact at once."""
        if type(key) is int and key >= 0 and key < self._key_limit:
            k = key
        else:
            k = self.key_int(key)
        cdef dict leaves = self._leaves
        if k in leaves:
            return False
        cdef TrieNode leaf = self._leaf(k, item)
        leaves[k] = leaf
        self._pending.append(leaf)
        self._size += 1
        self._stale = True
        return True

    def remove(self, key):
        """Take the leaf of `key` out (its parent is replaced by the sibling); False if the
        key is not stored.  The nodes above are marked stale like `add` does."""
        k = self.key_int(key)
        if k not in self._leaves:
            return False
        self._settle()
        del self._leaves[k]
        self._size -= 1
        self._stale = True
        cdef TrieNode node = self._root
        if node.zero is None:
            self._root = None
            return True
        cdef u128 aligned
        _from_int(k, self._shift, &aligned)
        cdef TrieNode holder = None  # the node whose child `node` is
        cdef int slot = 0
        cdef int branch
        cdef TrieNode child, sibling
        while True:
            branch = ctrie_bit(aligned, node.length)
            child = node.one if branch else node.zero
            if child.zero is None:  # `node` is the leaf's parent: splice the sibling in
                sibling = node.zero if branch else node.one
                if holder is None:
                    self._root = sibling
                elif slot:
                    holder.one = sibling
                else:
                    holder.zero = sibling
                return True
            node.hashed = False
            holder, slot, node = node, branch, child

    cdef int _settle(self) except -1:
        """Hash the nodes `remove` left stale, then place the leaves `add` left waiting."""
        if not self._stale:
            return 0
        self._stale = False
        if self._root is not None and not self._root.hashed:
            self._rehash_stale(self._root)
        cdef list pending = self._pending
        cdef Py_ssize_t n = len(pending)
        if n == 0:
            return 0
        self._pending = []
        cdef Entry *entries = <Entry *>PyMem_Malloc(n * sizeof(Entry))
        if entries == NULL:
            raise MemoryError()
        cdef Py_ssize_t i
        cdef TrieNode leaf
        try:
            for i in range(n):
                leaf = <TrieNode>pending[i]
                entries[i].key = leaf.bits
                entries[i].leaf = <void *>leaf
            qsort(entries, n, sizeof(Entry), _entry_order)
            if self._root is None:
                self._root = self._build(entries, 0, n)
            else:
                self._root = self._place(self._root, entries, 0, n)
        finally:
            PyMem_Free(entries)  # `pending` kept every leaf alive until here
        return 0

    cdef void _rehash_stale(self, TrieNode root) except *:
        """Hash every stale node under `root`, children before parents."""
        cdef list order = []
        cdef list stack = [root]
        cdef TrieNode node
        while stack:
            node = <TrieNode>stack.pop()
            if node.hashed:
                continue  # clean, and so is everything below it
            order.append(node)
            if node.zero is not None:
                stack.append(node.zero)
                stack.append(node.one)
        for node in reversed(order):
            if node.zero is None:
                self._hash_leaf(node)
            else:
                self._hash_inner(node)

    cdef TrieNode _place(self, TrieNode node, Entry *entries, Py_ssize_t lo, Py_ssize_t hi):
        """The subtree of `node` with the new leaves ``entries[lo:hi]`` (sorted, none stored
        below `node` yet) spliced in, every node on their paths hashed once (the reference's
        `_place`)."""
        if hi - lo == 1:
            return self._place_one(node, <TrieNode>entries[lo].leaf)
        cdef int length = node.length
        cdef u128 first = entries[lo].key
        cdef u128 last = entries[hi - 1].key
        cdef Py_ssize_t mid
        if ctrie_agree(first, node.bits, length) and ctrie_agree(last, node.bits, length):
            mid = _split(entries, lo, hi, length)
            if mid - lo == 1:
                node.zero = self._place_one(node.zero, <TrieNode>entries[lo].leaf)
            elif mid > lo:
                node.zero = self._place(node.zero, entries, lo, mid)
            if hi - mid == 1:
                node.one = self._place_one(node.one, <TrieNode>entries[mid].leaf)
            elif mid < hi:
                node.one = self._place(node.one, entries, mid, hi)
            self._hash_inner(node)
            return node
        # The longest prefix of `node`'s label shared by the first and the last key (and so
        # by every key between them), and by those two keys themselves.
        cdef int common = min(length, ctrie_common(first, node.bits), ctrie_common(last, node.bits))
        common = min(common, ctrie_common(first, last))
        mid = _split(entries, lo, hi, common)
        cdef TrieNode top = _node(ctrie_prefix(first, common), common, None, None)
        if ctrie_bit(node.bits, common):
            top.zero = self._build(entries, lo, mid)
            top.one = self._place(node, entries, mid, hi) if mid < hi else node
        else:
            top.zero = self._place(node, entries, lo, mid) if mid > lo else node
            top.one = self._build(entries, mid, hi)
        self._hash_inner(top)
        return top

    cdef TrieNode _place_one(self, TrieNode top, TrieNode leaf):
        """`_place` for a single new leaf, walking down without recursion: the subtree of
        `top` with `leaf` spliced in and the nodes on its path hashed."""
        cdef u128 k = leaf.bits
        cdef void *path[130]  # the nodes walked through (at most one per label length)
        cdef int depth = 0
        cdef TrieNode node = top
        cdef TrieNode parent = None
        cdef int slot = 0
        while ctrie_agree(k, node.bits, node.length):
            path[depth] = <void *>node
            depth += 1
            parent = node
            slot = ctrie_bit(k, node.length)
            node = node.one if slot else node.zero
        cdef int common = ctrie_common(k, node.bits)
        cdef TrieNode inner = _node(ctrie_prefix(k, common), common, None, None)
        if ctrie_bit(k, common):
            inner.zero, inner.one = node, leaf
        else:
            inner.zero, inner.one = leaf, node
        self._hash_leaf(leaf)
        self._hash_inner(inner)
        if parent is None:
            top = inner
        elif slot:
            parent.one = inner
        else:
            parent.zero = inner
        cdef int i
        for i in range(depth - 1, -1, -1):
            _hash_pair(<TrieNode>path[i])
        self.hash_computations += depth
        return top

    cdef TrieNode _build(self, Entry *entries, Py_ssize_t lo, Py_ssize_t hi):
        """A hashed subtree of the new leaves ``entries[lo:hi]`` alone (sorted, at least one)."""
        cdef TrieNode leaf
        if hi - lo == 1:
            leaf = <TrieNode>entries[lo].leaf
            self._hash_leaf(leaf)
            return leaf
        cdef u128 first = entries[lo].key
        cdef int common = ctrie_common(first, entries[hi - 1].key)
        cdef Py_ssize_t mid = _split(entries, lo, hi, common)
        cdef TrieNode inner = _node(ctrie_prefix(first, common), common, None, None)
        inner.zero = self._build(entries, lo, mid)
        inner.one = self._build(entries, mid, hi)
        self._hash_inner(inner)
        return inner

    # ------------------------------------------------------------------ queries
    @property
    def size(self):
        """Number of stored keys."""
        return self._size

    def __len__(self):
        return self._size

    def root(self):
        """(label, hash) of the root; (⊥, EMPTY_HASH) for the empty trie."""
        self._settle()
        if self._root is None:
            return EMPTY_LABEL, EMPTY_HASH
        return self._root.label, self._root.hash

    def root_node(self):
        self._settle()
        return self._root

    def contains(self, key):
        return self.key_int(key) in self._leaves

    def __contains__(self, key):
        return self.key_int(key) in self._leaves

    def get(self, key):
        """The item stored under `key`, or None."""
        leaf = self._leaves.get(self.key_int(key))
        return None if leaf is None else (<TrieNode>leaf).item

    cdef TrieNode _descend(self, object label):
        """The shallowest node whose label has `label` as a (not necessarily proper) prefix;
        None when no stored key starts with `label`."""
        cdef int want = label.length
        if want > self.key_bits:
            return None
        self._settle()
        cdef u128 bits
        _from_int(label.value, 128 - want, &bits)
        cdef TrieNode node = self._root
        while node is not None:
            if node.length >= want:
                return node if ctrie_agree(node.bits, bits, want) else None
            if not ctrie_agree(node.bits, bits, node.length):
                return None
            node = node.one if ctrie_bit(bits, node.length) else node.zero
        return None

    def search(self, label):
        """SearchNode of Alg. 5 l.13: the node whose label is exactly `label`, or None."""
        cdef TrieNode node = self._descend(label)
        return node if node is not None and node.length == label.length else None

    def minimal_extension(self, label):
        """The node of least label length whose label has `label` as a proper prefix (node c
        of CheckTrie case (iii), Alg. 5 l.19); None if a node is labelled `label`."""
        cdef TrieNode node = self._descend(label)
        return node if node is not None and node.length > label.length else None

    def children(self, TrieNode node not None):
        """(child 0, child 1) of an inner node; None for a leaf."""
        self._settle()
        if node.zero is None:
            return None
        return node.zero, node.one

    def enumerate(self, prefix=EMPTY_LABEL):
        """Every (key, item) whose key starts with `prefix`, in increasing key order."""
        start = self._descend(prefix)
        if start is None:
            return
        cdef list stack = [start]
        cdef TrieNode node
        while stack:
            node = <TrieNode>stack.pop()
            if node.zero is None:
                yield node.value, node.item
            else:
                stack.append(node.one)
                stack.append(node.zero)

    def items(self):
        return self.enumerate(EMPTY_LABEL)

    def keys(self):
        for key, _ in self.enumerate(EMPTY_LABEL):
            yield key

    def depth(self):
        """Number of nodes on the longest root-to-leaf path (0 for the empty trie)."""
        self._settle()
        cdef int best = 0
        cdef int d
        cdef TrieNode node
        stack = [(self._root, 1)] if self._root is not None else []
        while stack:
            node, d = stack.pop()
            best = max(best, d)
            if node.zero is not None:
                stack.append((node.zero, d + 1))
                stack.append((node.one, d + 1))
        return best

    def copy(self):
        """A structural copy: new nodes; labels, hashes and items shared."""
        self._settle()
        cdef PatriciaTrie dst = PatriciaTrie(self.key_bits)
        dst._size = self._size
        dst.hash_computations = self.hash_computations
        if self._root is not None:
            dst._root = _copied(self._root, dst._leaves)
        return dst


cdef TrieNode _copy_of(TrieNode old):
    cdef TrieNode new = _node(old.bits, old.length, old.item, old._value)
    memcpy(new.digest, old.digest, 16)
    new.hashed = old.hashed
    return new


cdef TrieNode _copied(TrieNode root, dict leaves):
    """A copy of the subtree of `root`, its leaves entered in `leaves` by key."""
    cdef TrieNode top = _copy_of(root)
    cdef list stack = [(root, top)]
    cdef TrieNode old, new
    while stack:
        old, new = stack.pop()
        if old.zero is None:
            leaves[old.value] = new
            continue
        new.zero = _copy_of(old.zero)
        new.one = _copy_of(old.one)
        stack.append((old.zero, new.zero))
        stack.append((old.one, new.one))
    return top


cdef Py_ssize_t _split(Entry *entries, Py_ssize_t lo, Py_ssize_t hi, int common) noexcept:
    """Where ``entries[lo:hi]`` (sorted, all sharing their first `common` bits) splits: the
    index of the first key whose next bit is 1 (`hi` if none)."""
    cdef Py_ssize_t a = lo
    cdef Py_ssize_t b = hi
    cdef Py_ssize_t m
    while a < b:
        m = (a + b) >> 1
        if ctrie_bit(entries[m].key, common):
            b = m
        else:
            a = m + 1
    return a
