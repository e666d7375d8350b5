"""What filters of the content-based language mean, on worked cases: matching
(`broker.cores.language.filters`, and the indexes agree), satisfiability
(`broker.cores.language.satisfiability`), overlap, intersection and covering
(`broker.cores.language.relations`).
"""

from __future__ import annotations

import math

import pytest

from broker.cores.language.predicates import Predicate
from broker.cores.language.relations import covers, intersects, overlaps
from broker.cores.language.satisfiability import prefix_upper
from broker.cores.language.text import parse_filter
from broker.cores.language.values import FilterError
from broker.cores.matching.counting import CountingIndex
from broker.cores.matching.vectorised import SubscriptionIndex

P = Predicate

# --------------------------------------------------------------------------- matching semantics

MATCHING = [
    # filter, publication, matches?
    ('symbol = "IBM" and price > 100', {"symbol": "IBM", "price": 101}, True),
    ('symbol = "IBM" and price > 100', {"symbol": "IBM", "price": 100}, False),
    ('symbol = "IBM" and price > 100', {"symbol": "IBM"}, False),  # attribute missing
    ('symbol = "IBM"', {"symbol": "IBM", "other": 1}, True),  # extra attributes are fine
    ("price = 100", {"price": 100.0}, True),  # int and float are one numeric domain
    ("price < 100.5", {"price": 100}, True),
    ("price = 100", {"price": "100"}, False),  # strings never equal numbers
    ("price != 100", {"price": "100"}, False),  # != also needs a value of its kind
    ("price != 100", {"price": 99.5}, True),
    ("price != 100", {}, False),
    ('name < "b"', {"name": "abc"}, True),  # strings compare by code point
    ('name < "B"', {"name": "abc"}, False),
    ('name > "a"', {"name": 5}, False),
    ('name prefix "IB"', {"name": "IBM"}, True),
    ('name prefix "IB"', {"name": "IB"}, True),
    ('name prefix "IB"', {"name": "I"}, False),
    ('name prefix ""', {"name": ""}, True),
    ('name prefix ""', {"name": 0}, False),
    ("v exists", {"v": 0}, True),
    ("v exists", {"v": ""}, True),
    ("v exists", {"w": 1}, False),
    ("v >= 2 and v <= 2", {"v": 2.0}, True),
    ("v > 2 and v < 1", {"v": 1.5}, False),
    (f"v > {2**53}", {"v": 2**53 + 1}, True),  # exact integers beyond float precision
    (f"v > {2**53}", {"v": float(2**53)}, False),
    ("true", {"anything": "x"}, True),
    ('name prefix "I" and name prefix "IB"', {"name": "IC"}, False),  # both prefixes count
    ('name prefix "I" and name prefix "IB"', {"name": "IBM"}, True),
    ("v > 2 and v >= 2", {"v": 2}, False),  # the tighter of two bounds
    ("v < 2 and v <= 2", {"v": 2}, False),
    ("v != 1 and v != 2 and v > 0", {"v": 2}, False),
    ("v != 1 and v != 2 and v > 0", {"v": 3}, True),
]


@pytest.mark.parametrize(("text", "pub", "expected"), MATCHING)
def test_matching_semantics(text: str, pub: dict, expected: bool) -> None:
    f = parse_filter(text)
    assert f.matches(pub) is expected
    assert all(p.matches(pub) for p in f.predicates) is expected
    for index in (SubscriptionIndex(), CountingIndex()):
        index.add("s", f)
        assert index.match(pub) == ({"s"} if expected else set())


# --------------------------------------------------------------------------- overlap and covering

OVERLAP = [
    # advertisement, subscription, overlaps?
    ('symbol = "IBM" and price >= 0', 'symbol = "IBM" and price > 100', True),
    ('symbol = "IBM" and price >= 0', 'symbol = "MSFT"', False),
    ('symbol = "IBM" and price < 50', "price > 100", False),
    ('symbol = "IBM"', 'symbol = "IBM" and price > 100', False),  # price is never published
    ('symbol = "IBM" and price exists', "price > 100", True),
    ('symbol = "IBM" and price exists', 'price = "high"', True),  # exists admits any kind
    ("price > 1 and price < 2", "price != 1.5", True),
    ("price >= 1 and price <= 1", "price != 1", False),  # a one-value domain
    ("price >= 1 and price <= 1", "price != 1.0", False),
    (f"price > 1.0 and price < {math.nextafter(1.0, 2)!r}", "price exists", False),  # no double between
    (f"price > {2**53} and price < {float(2**53 + 2)!r}", "price exists", True),  # 2**53 + 1 (an int)
    ("price > 1 and price < 2", "price = 1.5", True),
    ("price > 1 and price < 2", "price > 1.99 and price < 1.995", True),
    ("price > 1 and price < 2", 'price = "1.5"', False),  # kinds differ
    ('name prefix "IB"', 'name prefix "I"', True),
    ('name prefix "IB"', 'name prefix "IC"', False),
    ('name prefix "IB"', 'name = "IB"', True),
    ('name prefix "IB"', 'name = "I"', False),
    ('name prefix "IB"', 'name < "IB"', False),
    ('name prefix "IB"', 'name >= "IC"', False),
    ('name prefix "IB"', 'name < "IC"', True),
    ('name prefix "IB"', 'name != "IB"', True),
    ('name >= "a" and name <= "a"', 'name != "a"', False),
    ('name > "a" and name < "a\\u0000\\u0000"', 'name != "a\\u0000"', False),  # just one string between
    ('name > "a" and name < "a\\u0000\\u0000"', "name exists", True),
    ('name > "a" and name < "a\\u0000"', "name exists", False),  # a's successor is a + NUL
    ('name > "a" and name < "b"', 'name != "a\\u0000" and name != "aa"', True),
    ('name >= "a" and name < "aa"', 'name != "a"', True),  # "a\0", "a\0\0", ... remain
    (f'name prefix "{chr(0x10FFFF)}"', 'name > "\\u0000"', True),  # no upper bound
    ('name < ""', "name exists", False),  # nothing is below the empty string
    ("true", "true", True),
    ("x exists", "true", True),
    ("true", "x exists", False),
]


@pytest.mark.parametrize(("adv", "sub", "expected"), OVERLAP)
def test_overlap_cases(adv: str, sub: str, expected: bool) -> None:
    a, s = parse_filter(adv), parse_filter(sub)
    assert overlaps(a, s) is expected
    assert intersects(a, s) is intersects(s, a)
    if expected:
        assert intersects(a, s)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('s < ""', False),
        ('s <= ""', True),
        ("x > 1.7976931348623157e308", False),
        ("x < -1.7976931348623157e308", False),
        (f"x > {2**63 - 1}", True),  # 2.0 ** 63 is a double above every int64
        ("x > 1 and x < 2 and x != 1.5", True),
        ("x >= 1 and x < 2 and x != 1 and x != 1.5", True),
        ('x = 1 and x = "1"', False),
        ("x = 1 and x = 1.0", True),
        ('x prefix "ab" and x prefix "ac"', False),
        ("true", True),
    ],
)
def test_satisfiable_edges(text: str, expected: bool) -> None:
    assert parse_filter(text).satisfiable() is expected


def test_intersects_drops_the_advertised_attributes_convention() -> None:
    adv, sub = parse_filter('symbol = "IBM"'), parse_filter('symbol = "IBM" and price > 100')
    assert not overlaps(adv, sub)
    assert intersects(adv, sub)



COVERS = [
    # a, b, a covers b?
    ("x > 1", "x > 2", True),
    ("x > 1", "x >= 1", False),
    ("x >= 1", "x > 1", True),
    ("x > 1", "x = 1.5 and y exists", True),
    ("x exists", "x > 3", True),
    ("x > 3", "x exists", False),
    ("x != 3", "x > 3", True),
    ("x != 3", "x >= 3", False),
    ('s prefix "ab"', 's prefix "abc"', True),
    ('s prefix "abc"', 's prefix "ab"', False),
    ('s prefix "ab"', 's >= "ab" and s < "ac"', True),
    ('s prefix "ab"', 's >= "ab" and s <= "ac"', False),
    ("x > 1 and y < 2", "x > 5", False),  # b admits publications without y
    ("true", "x > 5", True),
    ("x > 5", "x > 5 and x < 5", True),  # nothing matches b
    ("x > 1", 'x = "a"', False),
    ("x = 1", "x >= 1 and x <= 1", True),
]


@pytest.mark.parametrize(("a", "b", "expected"), COVERS)
def test_covers_cases(a: str, b: str, expected: bool) -> None:
    assert covers(parse_filter(a), parse_filter(b)) is expected


def test_prefix_upper() -> None:
    assert prefix_upper("ab") == "ac"
    assert prefix_upper("a" + chr(0x10FFFF)) == "b"
    assert prefix_upper(chr(0x10FFFF)) is None
    assert prefix_upper("") is None
    assert prefix_upper("a\ud7ff") == "a\ue000"  # skips the surrogates
    assert covers(parse_filter('s prefix "\ud7ff"'), parse_filter('s = "\ud7ff\u0001"'))
    with pytest.raises(FilterError, match="lone surrogate"):
        P("s", "=", "\ud800")
