"""Skip-ring labels (paper 000, §2.1).

A label is a bit string y = y1..yd.  The supervisor hands out l(x) for x = 0, 1, 2, ...:
l moves the leading bit of x's binary form to the units place, so l(0..8) is
0, 1, 01, 11, 001, 011, 101, 111, 0001.  r(y) = sum y_i / 2^i places a label on [0, 1);
the ring is sorted by r.

Everything here is exact integer arithmetic: r(y) is kept as the pair (numerator, d) with
r(y) = numerator / 2^d, and two labels are compared by cross-multiplying.  A label's length
is part of its identity ("01" and "010" share r = 1/4 but are different labels); ties in r
are broken by length so that the order is total.
"""

from __future__ import annotations

from fractions import Fraction
from functools import total_ordering

#: Longest label accepted anywhere (a skip ring of 2^64 members is out of reach).
MAX_LABEL_BITS = 64


class LabelError(ValueError):
    """A bit string that is not a well-formed label."""


@total_ordering
class Label:
    """A label: a non-empty bit string, ordered by r(y) and then by length."""

    __slots__ = ("bits", "numerator", "length", "position", "_hash")

    def __init__(self, bits: str) -> None:
        if not bits or len(bits) > MAX_LABEL_BITS or bits.strip("01"):
            raise LabelError(f"not a label: {bits!r} (1..{MAX_LABEL_BITS} characters of 0/1)")
        self.bits = bits
        self.numerator = int(bits, 2)
        self.length = len(bits)
        #: r(y) in units of 2^-64: where the label sits on the ring, as arc broadcasts
        #: (`pubsub.publications.arcs`) name positions.
        self.position = self.numerator << (MAX_LABEL_BITS - self.length)
        self._hash = hash(bits)

    # -- identity ---------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Label) and other.bits == self.bits

    def __hash__(self) -> int:
        return self._hash

    def __lt__(self, other: Label) -> bool:
        mine = self.numerator << other.length
        theirs = other.numerator << self.length
        if mine != theirs:
            return mine < theirs
        return self.length < other.length

    def __repr__(self) -> str:
        return f"Label({self.bits!r})"

    def __str__(self) -> str:
        return self.bits

    def __len__(self) -> int:
        """|label|: the number of bits."""
        return self.length

    # -- the paper's functions --------------------------------------------------------------
    def r(self) -> Fraction:
        """r(y) = sum_i y_i / 2^i, exactly."""
        return Fraction(self.numerator, 1 << self.length)

    def index(self) -> int | None:
        """l^-1(label), or None when the label is not an image of l (e.g. "10")."""
        return label_index(self.bits)


def l(x: int) -> Label:  # noqa: E743 - the paper's name
    """l(x): the binary form of x with its leading bit moved to the end."""
    if x < 0:
        raise LabelError(f"l is defined on non-negative integers, got {x}")
    return Label(label_bits(x))


def label_bits(x: int) -> str:
    """The bit string of l(x) (l(0) = "0")."""
    b = bin(x)[2:]
    return b[1:] + b[0]


def label_index(bits: str) -> int | None:
    """l^-1 on a bit string: the x with l(x) = bits, or None if there is none."""
    if bits == "0":
        return 0
    if not bits or bits[-1] != "1":
        return None
    return int("1" + bits[:-1], 2)


def from_dyadic(numerator: int, exponent: int) -> Label:
    """The canonical label of the dyadic point numerator / 2^exponent, taken modulo 1.

    Canonical means shortest: the label of 1/4 is "01", never "010".  The point 0 is "0".
    This is how the shortcut computation of §3.2.2 names the points it computes.
    """
    numerator %= 1 << exponent
    if numerator == 0:
        return Label("0")
    while numerator % 2 == 0:
        numerator //= 2
        exponent -= 1
    return Label(format(numerator, "b").zfill(exponent))


def cyclic_distance(start: Label, end: Label) -> Fraction:
    """(r(end) - r(start)) mod 1: how far one walks right from start to reach end."""
    return (end.r() - start.r()) % 1
