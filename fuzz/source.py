"""Decisions from fuzzer bytes: a tiny, deterministic stand-in for a data provider.

A target reads its whole input through one `Source`: every call consumes bytes from the
front, and once they run out every call returns its smallest answer (0, False, the first
choice, an empty string).  Equal bytes give equal decisions, so a crash found by libFuzzer
replays from its artifact, and the mutations libFuzzer makes to a byte change one decision
rather than the whole input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class Source:
    """Reads numbers, choices and strings from the front of `data`."""

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    @property
    def left(self) -> int:
        """Bytes not consumed yet."""
        return len(self._data) - self._pos

    def byte(self) -> int:
        """One byte, 0..255 (0 once the input is used up)."""
        if self._pos >= len(self._data):
            return 0
        value = self._data[self._pos]
        self._pos += 1
        return value

    def below(self, n: int) -> int:
        """An integer 0 <= i < n (n >= 1), from as few bytes as n needs."""
        if n <= 1:
            return 0
        value = 0
        span = 1
        while span < n:
            value = (value << 8) | self.byte()
            span <<= 8
        return value % n

    def between(self, lo: int, hi: int) -> int:
        """An integer lo <= i <= hi."""
        return lo + self.below(hi - lo + 1)

    def flag(self, percent: int = 50) -> bool:
        """True with about `percent` per cent of byte values."""
        return self.byte() * 100 < percent * 256

    def choice(self, items: Sequence[T]) -> T:
        """One of `items` (not empty)."""
        return items[self.below(len(items))]

    def raw(self, limit: int) -> bytes:
        """Up to `limit` bytes, as many as a length byte says."""
        n = min(self.below(limit + 1), self.left)
        out = self._data[self._pos : self._pos + n]
        self._pos += n
        return bytes(out)

    def text(self, limit: int, alphabet: str = "") -> str:
        """A string of up to `limit` characters: from `alphabet` if given, otherwise any
        code point (mostly ASCII, sometimes control characters or beyond)."""
        n = self.below(limit + 1)
        if alphabet:
            return "".join(alphabet[self.below(len(alphabet))] for _ in range(n))
        chars = []
        for _ in range(n):
            kind = self.below(8)
            if kind < 6:
                chars.append(chr(0x20 + self.below(0x5F)))
            elif kind == 6:
                chars.append(chr(self.below(0x20)))
            else:
                code = self.below(0x110000)
                chars.append(chr(code) if not 0xD800 <= code < 0xE000 else "?")
        return "".join(chars)

    def integer(self) -> int:
        """An integer with a fuzz-chosen magnitude: small ones often, the 64-bit edges and
        beyond sometimes."""
        kind = self.below(8)
        if kind < 4:
            return self.between(-2, 16)
        if kind == 4:
            return self.choice((-(1 << 63), (1 << 63) - 1, 1 << 63, (1 << 64) - 1))
        bits = self.choice((8, 16, 32, 62, 64))
        value = self.below(1 << bits)
        return -(value >> 1) if kind == 5 else value
