"""The text forms of the content-based language (`broker.cores.language.text`) and the
validation of predicates, filters and publications: the parser on good and bad input.
"""

from __future__ import annotations

import math

import pytest

from broker.cores.language.filters import Filter
from broker.cores.language.predicates import Predicate
from broker.cores.language.text import attrs_from_json, attrs_to_text, parse_attrs, parse_filter
from broker.cores.language.values import (
    MAX_ATTRIBUTES,
    MAX_NAME_LENGTH,
    MAX_PREDICATES,
    MAX_STRING_LENGTH,
    MAX_TEXT_LENGTH,
    FilterError,
    validate_publication,
)

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
