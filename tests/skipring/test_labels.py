"""Tests for pubsub.skipring.labels: the label map l, its inverse, r, ordering and canonical names."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pubsub.skipring.labels import (
    MAX_LABEL_BITS,
    Label,
    LabelError,
    cyclic_distance,
    from_dyadic,
    l,
    label_bits,
    label_index,
)

bitstrings = st.text(alphabet="01", min_size=1, max_size=MAX_LABEL_BITS)


def reference_key(bits: str) -> tuple[Fraction, int]:
    """Ring order computed independently: exact r, then length."""
    return (Fraction(int(bits, 2), 2 ** len(bits)), len(bits))


def test_first_labels() -> None:
    """l(0..8) are the first labels the supervisor hands out."""
    assert [l(x).bits for x in range(9)] == [
        "0", "1", "01", "11", "001", "011", "101", "111", "0001",
    ]
    assert [label_bits(x) for x in range(9)] == [l(x).bits for x in range(9)]


def test_round_trip_first_100k() -> None:
    """l is inverted by label_index and by Label.index; labels equal by bits."""
    for x in range(10**5):
        lab = l(x)
        assert label_index(lab.bits) == x
        assert lab.index() == x
        assert Label(lab.bits) == lab
        assert hash(Label(lab.bits)) == hash(lab)


def test_label_length_is_bit_length() -> None:
    """|l(x)| is the bit length of x (1 for x = 0): K_i grows by doubling."""
    for x in range(1, 5000):
        assert len(l(x)) == x.bit_length()
    assert len(l(0)) == 1


@given(st.integers(min_value=0, max_value=2**63))
def test_round_trip_large(x: int) -> None:
    """The round trip also holds far beyond the first 10^5 values."""
    assert label_index(l(x).bits) == x


@pytest.mark.parametrize("bits", ["10", "00", "110", "0000", "1110"])
def test_non_images(bits: str) -> None:
    """Bit strings ending in 0 (other than "0") are not images of l."""
    assert label_index(bits) is None
    assert Label(bits).index() is None


def test_negative_argument_rejected() -> None:
    """l is defined on non-negative integers only."""
    with pytest.raises(LabelError):
        l(-1)


@pytest.mark.parametrize("bits", ["", "2", "0" * (MAX_LABEL_BITS + 1), "01a", " 01", "0_1"])
def test_label_rejects(bits: str) -> None:
    """Empty strings, non-binary characters and over-long strings are not labels."""
    with pytest.raises(LabelError):
        Label(bits)


def test_label_accepts_max_length() -> None:
    """A 64-bit label is still accepted."""
    assert len(Label("1" * MAX_LABEL_BITS)) == MAX_LABEL_BITS


def test_ordering_by_r_then_length() -> None:
    """Labels order by r; equal r is broken by length; equality is by bits."""
    assert Label("01") < Label("010")
    assert Label("010") > Label("01")
    assert Label("01") != Label("010")
    assert Label("01").r() == Label("010").r() == Fraction(1, 4)
    assert Label("0") < Label("0001") < Label("001") < Label("01") < Label("1") < Label("11")
    assert Label("1111").r() == Fraction(15, 16)


@given(bitstrings, bitstrings)
def test_ordering_matches_fractions(a: str, b: str) -> None:
    """Label comparison agrees with an exact-fraction reference order."""
    assert (Label(a) < Label(b)) == (reference_key(a) < reference_key(b))
    assert (Label(a) == Label(b)) == (a == b)
    assert Label(a).r() == reference_key(a)[0]


@given(st.lists(bitstrings, max_size=30))
def test_ring_order_matches_fractions(bits: list[str]) -> None:
    """Sorting labels orders them exactly like the reference key."""
    got = [lab.bits for lab in sorted(Label(b) for b in bits)]
    assert got == sorted(bits, key=reference_key)


@pytest.mark.parametrize(
    ("numerator", "exponent", "expected"),
    [
        (2, 3, "01"),   # 2/8 = 1/4
        (0, 0, "0"),
        (0, 5, "0"),
        (1, 0, "0"),    # 1 modulo 1
        (8, 3, "0"),    # 8/8 = 1 modulo 1
        (1, 1, "1"),
        (3, 3, "011"),
        (5, 3, "101"),
        (12, 4, "11"),
        (-1, 2, "11"),  # -1/4 = 3/4 modulo 1
        (9, 3, "001"),  # 9/8 = 1/8 modulo 1
    ],
)
def test_from_dyadic_canonical(numerator: int, exponent: int, expected: str) -> None:
    """from_dyadic names a point by its shortest label, modulo 1."""
    assert from_dyadic(numerator, exponent).bits == expected


@given(st.integers(min_value=-(2**40), max_value=2**40), st.integers(min_value=0, max_value=40))
def test_from_dyadic_is_exact_and_shortest(numerator: int, exponent: int) -> None:
    """The name denotes the right point and has no superfluous trailing zero."""
    lab = from_dyadic(numerator, exponent)
    assert lab.r() == Fraction(numerator, 2**exponent) % 1
    assert lab.bits == "0" or not lab.bits.endswith("0")


def test_cyclic_distance() -> None:
    """Walking right from start to end, modulo 1."""
    assert cyclic_distance(Label("01"), Label("1")) == Fraction(1, 4)
    assert cyclic_distance(Label("1"), Label("01")) == Fraction(3, 4)
    assert cyclic_distance(Label("11"), Label("0")) == Fraction(1, 4)
    assert cyclic_distance(Label("01"), Label("01")) == 0


def test_sr16_points_are_sixteenths() -> None:
    """l(0..15) occupy exactly the points k/16, k = 0..15 (Figure 1)."""
    order = sorted(l(x) for x in range(16))
    assert [lab.r() for lab in order] == [Fraction(k, 16) for k in range(16)]
