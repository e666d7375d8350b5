"""The content-based language (`broker.cores.language`) and the subscription index (`broker.cores.matching`).

Parser (good and bad input), matching semantics, overlap and covering (worked cases and
properties: no false negatives against sampled publications, and on small finite domains every
claimed overlap has a witness), the wire form, and the index returning exactly what a scan
returns, before and after removals.
"""

from __future__ import annotations

import itertools
import json
import math
import random

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.cores.language import (
    MAX_ATTRIBUTES,
    MAX_NAME_LENGTH,
    MAX_PREDICATES,
    MAX_STRING_LENGTH,
    MAX_TEXT_LENGTH,
    OPS,
    Filter,
    FilterError,
    Predicate,
    attrs_from_json,
    attrs_to_text,
    covers,
    intersects,
    overlaps,
    parse_attrs,
    parse_filter,
    prefix_upper,
    validate_publication,
)
from broker.cores.matching import CountingIndex, LinearIndex, SubscriptionIndex
from broker.stockquote import ATTRIBUTES, SYMBOLS, StockQuotes

P = Predicate

# --------------------------------------------------------------------------- parsing


def test_parse_filter_example_from_the_issue() -> None:
    f = parse_filter('symbol = "IBM" and price > 100 and volume exists and name prefix "IB"')
    assert set(f.predicates) == {
        P("symbol", "=", "IBM"),
        P("price", ">", 100),
        P("volume", "exists"),
        P("name", "prefix", "IB"),
    }
    assert type(f.on("price")[0].value) is int


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = 1", P("x", "=", 1)),
        ("x = -1.5e3", P("x", "=", -1500.0)),
        ("x != 2.0", P("x", "!=", 2.0)),
        ("x<3", P("x", "<", 3)),
        ("x <= 1E2", P("x", "<=", 100.0)),
        ("x>-7", P("x", ">", -7)),
        ("x >= 0.25", P("x", ">=", 0.25)),
        ('s = "a \\"quoted\\" \\\\ \\n \\u00e9"', P("s", "=", 'a "quoted" \\ \n é')),
        ('s PREFIX "ab"', P("s", "prefix", "ab")),
        ("s EXISTS", P("s", "exists")),
        ('a.b_c9 = ""', P("a.b_c9", "=", "")),
        (f"x = {2**63 - 1}", P("x", "=", 2**63 - 1)),
        (f"x = {-(2**63)}", P("x", "=", -(2**63))),
    ],
)
def test_parse_one_predicate(text: str, expected: Predicate) -> None:
    (got,) = parse_filter(text).predicates
    assert got == expected
    assert type(got.value) is type(expected.value)


def test_and_is_case_insensitive_and_true_is_the_empty_filter() -> None:
    assert parse_filter("x = 1 AND y = 2 And z exists") == Filter.of(
        P("x", "=", 1), P("y", "=", 2), P("z", "exists")
    )
    assert parse_filter("  TRUE ") == Filter(())
    assert Filter(()).to_text() == "true"


def test_canonical_order_and_duplicates() -> None:
    a = parse_filter("y > 1 and x = 2 and y > 1")
    b = parse_filter("x = 2 and y > 1")
    assert a == b and hash(a) == hash(b)
    assert a.to_text() == "x = 2 and y > 1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty filter"),
        ("x >", "column 4: expected a value after x >, found end of input"),
        ("x = IBM", "column 5: expected a value after x =, found 'IBM' (strings are double-quoted)"),
        ('x = "ab', 'column 5: unterminated string'),
        ("x > 1 or y < 2", "column 7: expected 'and' or end of filter, found 'or'"),
        ("x > 1 and", "column 10: expected an attribute name, found end of input"),
        ("x > 1 y < 2", "column 7: expected 'and' or end of filter, found 'y'"),
        ("= 3", "column 1: expected an attribute name, found '='"),
        ("x 3", "column 3: expected an operator"),
        ("x == 3", "column 4: expected a value after x =, found '='"),
        ("x = 1e999", "column 5: number 1e999 is out of range"),
        (f"x = {2**63}", "column 5: integer 9223372036854775808 does not fit in 64 bits"),
        ("x prefix 3", "column 10: prefix needs a double-quoted string, found '3'"),
        ("x = 1.", "column 5: bad number"),
        ("x = 12abc", "column 5: bad number"),
        ("x = @", "column 5: unexpected character '@'"),
        ('x = "\\q"', "column 6: bad string escape"),
        ("x exists 3", "column 10: expected 'and' or end of filter, found '3'"),
        ('x = "\\ud800"', "column 5: value of x = is not valid Unicode (a lone surrogate)"),
        ("true and x = 1", "column 6: expected an operator"),
    ],
)
def test_parse_errors_name_the_column(text: str, message: str) -> None:
    with pytest.raises(FilterError) as err:
        parse_filter(text)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_parse_limits() -> None:
    many = " and ".join(f"a{i} exists" for i in range(MAX_PREDICATES + 1))
    with pytest.raises(FilterError, match=f"more than {MAX_PREDICATES} predicates"):
        parse_filter(many)
    parse_filter(" and ".join(f"a{i} exists" for i in range(MAX_PREDICATES)))
    with pytest.raises(FilterError, match="longer than"):
        parse_filter('s = "' + "x" * (MAX_STRING_LENGTH + 1) + '"')
    with pytest.raises(FilterError, match="attribute name longer"):
        parse_filter("a" * (MAX_NAME_LENGTH + 1) + " exists")
    with pytest.raises(FilterError, match=f"longer than {MAX_TEXT_LENGTH}"):
        parse_filter("x exists" + " " * MAX_TEXT_LENGTH)
    with pytest.raises(FilterError, match="must be text"):
        parse_filter(b"x exists")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pred", "message"),
    [
        (lambda: P("x", "=", True), "must be a string, integer or float, not bool"),
        (lambda: P("x", "=", None), "not NoneType"),
        (lambda: P("x", "=", math.nan), "must be finite"),
        (lambda: P("x", ">", math.inf), "must be finite"),
        (lambda: P("x", "=", 2**64), "does not fit in 64 bits"),
        (lambda: P("x", "prefix", 5), "prefix needs a string"),
        (lambda: P("x", "exists", 1), "exists takes no value"),
        (lambda: P("x", "~", 1), "unknown operator '~'"),
        (lambda: P("1x", "=", 1), "bad attribute name '1x'"),
        (lambda: P("", "=", 1), "bad attribute name ''"),
        (lambda: P(3, "=", 1), "attribute name must be a string"),  # type: ignore[arg-type]
        (lambda: Filter((P("x", "exists"), "y")), "not a predicate"),  # type: ignore[arg-type]
        (lambda: Filter(tuple(P(f"a{i}", "exists") for i in range(MAX_PREDICATES + 1))), "at most"),
    ],
)
def test_predicate_and_filter_validation(pred, message: str) -> None:  # noqa: ANN001
    with pytest.raises(FilterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pred()


def test_parse_attrs() -> None:
    assert parse_attrs('symbol="IBM",price=101.5,volume=300') == {
        "symbol": "IBM",
        "price": 101.5,
        "volume": 300,
    }
    assert parse_attrs(' a = -1 , b = "x,y" ') == {"a": -1, "b": "x,y"}
    pub = {"s": 'q"\n', "i": 2**62, "f": -0.5, "e": 1e-300}
    assert parse_attrs(attrs_to_text(pub)) == pub


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty publication"),
        ("a=1,a=2", "column 5: attribute a given twice"),
        ("a=IBM", "column 3: expected a value for a, found 'IBM' (strings are double-quoted)"),
        ("a:1", "column 2: unexpected character ':'"),
        ("a>1", "column 2: expected '=' after a, found '>'"),
        ("a=1 b=2", "column 5: expected ',' or end of publication, found 'b'"),
        ("a=1,", "column 5: expected an attribute name, found end of input"),
        ("a=", "column 3: expected a value for a, found end of input"),
        ('a="\\udc00"', "column 3: value of a is not valid Unicode"),
        (",".join(f"a{i}=1" for i in range(MAX_ATTRIBUTES + 1)), f"more than {MAX_ATTRIBUTES} attributes"),
    ],
)
def test_parse_attrs_errors(text: str, message: str) -> None:
    with pytest.raises(FilterError) as err:
        parse_attrs(text)
    assert message in str(err.value)


def test_attrs_from_json() -> None:
    assert attrs_from_json('{"symbol": "IBM", "price": 101.5, "volume": 300}') == {
        "symbol": "IBM",
        "price": 101.5,
        "volume": 300,
    }
    for text, message in [
        ("[1]", "is an object"),
        ("{", "not valid JSON"),
        ('{"a": true}', "not bool"),
        ('{"a": null}', "not NoneType"),
        ('{"a": [1]}', "not list"),
        ('{"a": NaN}', "must be finite"),
        ('{"1a": 1}', "bad attribute name"),
        ("{}", "at least one attribute"),
        ('{"a": 1' + ", " * MAX_TEXT_LENGTH + "}", "longer than"),
    ]:
        with pytest.raises(FilterError, match=message):
            attrs_from_json(text)


def test_validate_publication() -> None:
    assert validate_publication({"a": 1}) == {"a": 1}
    for bad, message in [
        ([("a", 1)], "is a map"),
        ({"a": b"x"}, "not bytes"),
        ({"a": "x" * (MAX_STRING_LENGTH + 1)}, "longer than"),
        ({f"a{i}": 1 for i in range(MAX_ATTRIBUTES + 1)}, "at most"),
        ({1: 1}, "attribute name must be a string"),
    ]:
        with pytest.raises(FilterError, match=message):
            validate_publication(bad)


# --------------------------------------------------------------------------- wire


def test_wire_round_trip_through_msgpack() -> None:
    f = parse_filter('s prefix "é\\u0000" and x >= -2.5 and y != 3 and z exists and w = "v"')
    data = msgpack.packb(f.to_wire())
    assert Filter.from_wire(msgpack.unpackb(data)) == f
    assert Filter.from_wire(msgpack.unpackb(data, use_list=False)) == f
    assert Filter.from_wire([]) == Filter(())


def test_filters_and_indexes_survive_pickle_and_deepcopy() -> None:
    """The simulator may copy broker state: copies match like the originals."""
    import copy
    import pickle

    f = parse_filter('s prefix "a" and x > 1 and y exists and z != "q"')
    pub = {"s": "ab", "x": 2, "y": 0, "z": "r"}
    index: SubscriptionIndex[str] = SubscriptionIndex()
    index.add("f", f)
    index.add("g", parse_filter("x < 5"))
    for clone in (pickle.loads(pickle.dumps(f)), copy.deepcopy(f)):
        assert clone == f and clone.matches(pub)
    for twin in (pickle.loads(pickle.dumps(index)), copy.deepcopy(index)):
        assert twin.match(pub) == {"f", "g"}
        twin.remove("f")
        twin.add("h", parse_filter("x = 2"))
        assert twin.match(pub) == {"g", "h"}
    assert index.match(pub) == {"f", "g"}


@pytest.mark.parametrize(
    ("junk", "message"),
    [
        ({"x": 1}, "is an array"),
        ("x = 1", "is an array"),
        ([["x", "=", 1, 2]], r"\[attr, op, value\]"),
        ([["x", "="]], r"\[attr, op, value\]"),
        (["x"], r"\[attr, op, value\]"),
        ([["x", 1, 1]], "operator must be a string"),
        ([["x", "=", True]], "not bool"),
        ([["x", "=", b"b"]], "not bytes"),
        ([["x", "=", None]], "not NoneType"),
        ([["x", "like", "a"]], "unknown operator"),
        ([[None, "=", 1]], "attribute name must be a string"),
        ([["x", "exists", None]] * (MAX_PREDICATES + 1), "at most"),
    ],
)
def test_from_wire_rejects_junk(junk: object, message: str) -> None:
    with pytest.raises(FilterError, match=message):
        Filter.from_wire(junk)


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


def test_overlapping_in_the_index() -> None:
    for index in (SubscriptionIndex(), CountingIndex(), LinearIndex()):
        index.add("cheap", parse_filter("price < 10"))
        index.add("ibm", parse_filter('symbol = "IBM"'))
        index.add("vol", parse_filter("volume > 5"))
        adv = parse_filter('symbol prefix "I" and price >= 5 and price <= 20')
        assert index.overlapping(adv) == {"cheap", "ibm"}


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


# --------------------------------------------------------------------------- properties

NAMES = ("x", "y", "z")
NUMBERS: tuple[int | float, ...] = (-2, -1, 0, 1, 2, 0.5, 1.5, -0.0, 1.0)
STRINGS = ("", "a", "b", "aa", "ab", "ba", "bb")


@st.composite
def predicates(draw: st.DrawFn) -> Predicate:
    name = draw(st.sampled_from(NAMES))
    op = draw(st.sampled_from(OPS))
    if op == "exists":
        return P(name, op)
    if op == "prefix" or draw(st.booleans()):
        return P(name, op, draw(st.sampled_from(STRINGS)))
    return P(name, op, draw(st.sampled_from(NUMBERS)))


filters = st.lists(predicates(), max_size=4).map(lambda ps: Filter(tuple(ps)))


def _midpoints(values: list[float]) -> list[float]:
    ordered = sorted(set(values))
    return [(a + b) / 2 for a, b in itertools.pairwise(ordered)]


NUMBER_WITNESSES = sorted(
    set(NUMBERS) | set(_midpoints(list(NUMBERS))) | {min(NUMBERS) - 1, max(NUMBERS) + 1}
)
# Strings over {NUL, a, b, c} up to length 4: with constants over {a, b} of length <= 2 and at
# most 8 predicates on an attribute, some such string lies in every non-empty constraint set
# (the set is an interval of the string order minus constant points; if it has a member, lo or
# lo + NUL or lo + NUL + NUL is one, where lo is a constant, possibly followed by one NUL).
STRING_WITNESSES = ["".join(t) for n in range(5) for t in itertools.product("\0abc", repeat=n)]
WITNESSES: list[int | float | str] = [*NUMBER_WITNESSES, *STRING_WITNESSES]

publications = st.dictionaries(
    st.sampled_from(NAMES),
    st.sampled_from(NUMBER_WITNESSES) | st.sampled_from(STRING_WITNESSES[:40]),
    max_size=3,
)


def _witness(preds: list[Predicate]) -> int | float | str | None:
    """A value satisfying all of preds (one attribute) among the finite candidates."""
    for value in WITNESSES:
        if all(p.matches({"v": value}) for p in (P("v", q.op, q.value) for q in preds)):
            return value
    return None


@settings(max_examples=300, deadline=None)
@given(filters, filters, st.lists(publications, max_size=12))
def test_overlap_has_no_false_negatives(adv: Filter, sub: Filter, pubs: list[dict]) -> None:
    for pub in pubs:
        under_adv = {k: v for k, v in pub.items() if k in adv.attributes}
        if adv.matches(under_adv) and sub.matches(under_adv):
            assert overlaps(adv, sub), (adv, sub, under_adv)
        if adv.matches(pub) and sub.matches(pub):
            assert intersects(adv, sub), (adv, sub, pub)
        if covers(adv, sub) and sub.matches(pub):
            assert adv.matches(pub), (adv, sub, pub)


@settings(max_examples=300, deadline=None)
@given(filters, filters)
def test_overlap_implies_a_witness_on_a_small_domain(adv: Filter, sub: Filter) -> None:
    """Exactness the other way: every overlap claimed has a witness publication, built per
    attribute from a finite candidate set that contains a witness whenever one exists."""
    both = adv.predicates + sub.predicates
    names = {p.attr for p in both}
    witness = {name: _witness([p for p in both if p.attr == name]) for name in names}
    assert intersects(adv, sub) is all(v is not None for v in witness.values())
    if overlaps(adv, sub):
        assert adv.matches(witness) and sub.matches(witness)
        assert set(witness) <= adv.attributes
    # covers(a, b) fails exactly when a publication matches b but not a.
    if sub.satisfiable():
        counter = None
        for name in adv.attributes:
            mine = [p for p in sub.predicates if p.attr == name]
            theirs = [P("v", p.op, p.value) for p in adv.predicates if p.attr == name]
            if not mine:
                counter = name
                break
            for value in WITNESSES:
                if all(P("v", p.op, p.value).matches({"v": value}) for p in mine) and not all(
                    t.matches({"v": value}) for t in theirs
                ):
                    counter = name
                    break
            if counter:
                break
        assert covers(adv, sub) is (counter is None), (adv, sub, counter)


@settings(max_examples=200, deadline=None)
@given(filters)
def test_text_and_wire_round_trips(f: Filter) -> None:
    assert parse_filter(f.to_text()) == f
    assert Filter.from_wire(msgpack.unpackb(msgpack.packb(f.to_wire()))) == f
    assert f.satisfiable() is (_all_witnessed(f))


def _all_witnessed(f: Filter) -> bool:
    return all(_witness(list(f.on(name))) is not None for name in f.attributes)


EXTREMES: tuple[int | float, ...] = (2**53, 2**53 + 1, float(2**53), 2**63 - 1, -(2**63), 1e308, -1e308, 5e-324)


@st.composite
def index_predicates(draw: st.DrawFn) -> Predicate:
    name = draw(st.sampled_from(NAMES))
    op = draw(st.sampled_from(OPS))
    if op == "exists":
        return P(name, op)
    if op == "prefix" or draw(st.booleans()):
        return P(name, op, draw(st.sampled_from(STRINGS)))
    return P(name, op, draw(st.sampled_from(NUMBERS + EXTREMES)))


index_filters = st.lists(index_predicates(), max_size=4).map(lambda ps: Filter(tuple(ps)))
index_publications = st.dictionaries(
    st.sampled_from(NAMES),
    st.sampled_from(NUMBER_WITNESSES + list(EXTREMES) + STRING_WITNESSES[:60] + [True]),
    max_size=3,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(index_filters, min_size=1, max_size=40),
    st.lists(index_publications, min_size=1, max_size=10),
    st.data(),
)
def test_index_returns_exactly_what_a_scan_returns(
    subs: list[Filter], pubs: list[dict], data: st.DataObject
) -> None:
    """Both indexes against the scan, after adds, re-adds under a key, and random removals."""
    indexes = [SubscriptionIndex(capacity=1), CountingIndex(), LinearIndex()]
    for key, f in enumerate(subs):
        for index in indexes:
            index.add(key % 30, f)  # keys repeat: add replaces
    for round_ in range(3):
        for pub in pubs:
            expected = indexes[-1].match(pub)
            assert expected == {k for k, f in indexes[-1]._filters.items() if f.matches(pub)}
            for index in indexes[:-1]:
                assert index.match(pub) == expected, (type(index).__name__, round_, pub)
        assert len({len(index) for index in indexes}) == 1
        victims = data.draw(st.lists(st.integers(0, 31), max_size=12), label=f"remove {round_}")
        for key in victims:
            removed = {index.remove(key) for index in indexes}
            assert len(removed) == 1
        more = data.draw(st.lists(index_filters, max_size=8), label=f"add {round_}")
        for i, f in enumerate(more):
            for index in indexes:
                index.add(100 + 10 * round_ + i, f)


def test_index_keeps_order_codes_exact_through_relabelling() -> None:
    """Thresholds inserted ever closer to 0 exhaust the room between two order codes, so the
    codes are relabelled (several times); matching stays exact before and after removals."""
    index: SubscriptionIndex[int] = SubscriptionIndex()
    scan: LinearIndex[int] = LinearIndex()
    filters = [Filter.of(P("x", ">", 0)), Filter.of(P("x", ">", 1))]
    filters += [Filter.of(P("x", ">", 2.0**-k), P("x", "<=", 1 - 2.0**-k)) for k in range(1, 120)]
    for key, f in enumerate(filters):
        index.add(key, f)
        scan.add(key, f)
    from broker.cores.language import NUM

    assert index._attrs["x"].ranges[(NUM, ">")].order.relabels >= 2
    probes = [0.0, 1.0, 0.75, 2.0**-60, 2.0**-119, 2.0**-118 * 1.5, 5e-324, *(random.Random(7).random() for _ in range(100))]
    for value in probes:
        assert index.match({"x": value}) == scan.match({"x": value})
    for key in range(0, len(filters), 3):
        index.remove(key)
        scan.remove(key)
    for value in probes:
        assert index.match({"x": value}) == scan.match({"x": value})


def test_non_values_in_a_publication_only_satisfy_exists() -> None:
    """An unvalidated publication may carry a bool or None: it is present, but of no kind."""
    for index in (SubscriptionIndex(), CountingIndex(), LinearIndex()):
        index.add("exists", parse_filter("v exists"))
        index.add("eq", parse_filter("v = 1"))
        index.add("ne", parse_filter("v != 0"))
        index.add("range", parse_filter("v >= 0"))
        assert index.match({"v": True}) == {"exists"}
        assert index.match({"v": None}) == {"exists"}
        assert index.match({"v": 1}) == {"exists", "eq", "ne", "range"}


def test_index_handles_unsatisfiable_and_empty_filters() -> None:
    index: SubscriptionIndex[str] = SubscriptionIndex()
    index.add("never", parse_filter("x > 2 and x < 1"))
    index.add("always", parse_filter("true"))
    assert index.match({"x": 1.5}) == {"always"}
    assert len(index) == 2 and index.get("never") == parse_filter("x > 2 and x < 1")
    assert index.remove("never") and index.remove("always") and not index.remove("always")
    assert index.match({"x": 1}) == set() and len(index) == 0


# --------------------------------------------------------------------------- the workload


def test_stock_quote_workload_shape_and_selectivity() -> None:
    workload = StockQuotes(seed=3)
    rng = random.Random(3)
    assert len(set(workload.symbols)) == SYMBOLS
    pubs = workload.publications(400, rng)
    subs = workload.subscriptions(400, rng)
    assert all(tuple(sorted(p)) == tuple(sorted(ATTRIBUTES)) for p in pubs)
    assert all(validate_publication(p) == p for p in pubs)
    assert all(f.attributes == frozenset(ATTRIBUTES) for f in subs)
    index: SubscriptionIndex[int] = SubscriptionIndex()
    for key, f in enumerate(subs):
        index.add(key, f)
    matched = sum(len(index.match(p)) for p in pubs)
    assert 0.012 < matched / (len(pubs) * len(subs)) < 0.03  # about 2%
    # A publisher's quotes stay inside its advertisement, and it overlaps the subscriptions
    # that can match them.
    for symbol in workload.symbols[:20]:
        adv = workload.advertisement(symbol)
        quotes = [workload.publication(rng, symbol) for _ in range(30)]
        assert all(adv.matches(q) for q in quotes)
        for f in subs:
            if any(f.matches(q) for q in quotes):
                assert overlaps(adv, f)
    assert json.dumps(pubs[0])  # JSON-friendly
