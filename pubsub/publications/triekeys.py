"""The keys, labels and hashes of the publications' Patricia trie (`pubsub.publications.trie`,
whose docstring states them): `TrieLabel`, the constants, and `publication_key`."""

from __future__ import annotations

import struct

import xxhash

#: Length of publication keys and of the longest label a trie node can have.
KEY_BITS = 128
#: Length of every node hash (xxh3-128).
HASH_BYTES = 16
#: The hash reported for the root of an empty trie.
EMPTY_HASH = bytes(HASH_BYTES)

#: xxh3-128 of a byte string: every node hash and publication key.
digest = xxhash.xxh3_128_digest


class TrieLabel:
    """A bit string of 0..KEY_BITS bits kept as (value, length); immutable and hashable.

    ``value`` is the bits read as a big-endian unsigned integer, so ``value < 2**length``.
    """

    __slots__ = ("value", "length")

    value: int
    length: int

    def __init__(self, value: int, length: int) -> None:
        if length < 0 or value < 0 or value >> length:
            raise ValueError(f"not a {length}-bit label value: {value}")
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "length", length)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("TrieLabel is immutable")

    @classmethod
    def from_bits(cls, bits: str) -> TrieLabel:
        """The label spelled by a string of "0"/"1" ("" is the empty label)."""
        if bits.strip("01"):
            raise ValueError(f"not a bit string: {bits!r}")
        return cls(int(bits, 2) if bits else 0, len(bits))

    @property
    def bits(self) -> str:
        """The "0"/"1" spelling (the wire form)."""
        return format(self.value, "b").zfill(self.length) if self.length else ""

    def bit(self, i: int) -> int:
        """Bit i, counted from 0 at the left."""
        if not 0 <= i < self.length:
            raise IndexError(i)
        return (self.value >> (self.length - 1 - i)) & 1

    def startswith(self, prefix: TrieLabel) -> bool:
        """Whether `prefix` is a (not necessarily proper) prefix of this label."""
        shift = self.length - prefix.length
        return shift >= 0 and self.value >> shift == prefix.value

    def append(self, bit: int) -> TrieLabel:
        """This label followed by one more bit."""
        return TrieLabel((self.value << 1) | (bit & 1), self.length + 1)

    def __len__(self) -> int:
        return self.length

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TrieLabel)
            and other.length == self.length
            and other.value == self.value
        )

    def __hash__(self) -> int:
        return hash((self.value, self.length))

    def __repr__(self) -> str:
        return f"TrieLabel({self.bits!r})"

    def __str__(self) -> str:
        return self.bits or "⊥"

    def __reduce__(self) -> tuple[type, tuple[int, int]]:
        return (TrieLabel, (self.value, self.length))


EMPTY_LABEL = TrieLabel(0, 0)


def key_int(key: int | bytes | TrieLabel, key_bits: int) -> int:
    """A trie key of `key_bits` bits as an integer below 2**key_bits; ValueError if it does
    not fit.

    Accepts an int, a `TrieLabel` of exactly ``key_bits`` bits, or bytes of exactly
    ``key_bits`` bits (only when key_bits is a multiple of 8, e.g. 16 bytes for 128).
    """
    if isinstance(key, TrieLabel):
        if key.length != key_bits:
            raise ValueError(f"key must have {key_bits} bits, got {key.length}")
        return key.value
    if isinstance(key, (bytes, bytearray)):
        if len(key) * 8 != key_bits:
            raise ValueError(f"key must be {key_bits} bits, got {len(key)} bytes")
        return int.from_bytes(key, "big")
    if isinstance(key, int) and not isinstance(key, bool) and key >= 0 and not key >> key_bits:
        return key
    raise ValueError(f"key must be an integer in [0, 2**{key_bits}), got {key!r}")


_PUBLISHER_LEN = struct.Struct(">I")
_SEQ = struct.Struct(">q")


def publication_key(publisher: str, seq: int, payload: bytes) -> bytes:
    """The 16-byte key of a publication: xxh3-128 over (publisher, seq, payload).

    The encoding is unambiguous: the publisher reference as UTF-8 preceded by its length
    (4 bytes, big-endian), the sequence number as a signed 64-bit big-endian integer, then
    the payload, which runs to the end and so needs no length.  Equal payloads from one
    publisher under different sequence numbers get different keys (ARCHITECTURE: hashes).
    """
    name = publisher.encode("utf-8")
    return digest(_PUBLISHER_LEN.pack(len(name)) + name + _SEQ.pack(seq) + payload)
