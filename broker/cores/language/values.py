"""Values and publications of the content-based language: the value domain, its kinds and
limits, and the validation of attribute names, values and whole publications.

Publications
    A map from attribute names to typed values: ``str`` (valid Unicode), ``int`` (signed 64
    bits) or ``float`` (finite).  ``bool`` is not a value.  Integers and floats are one
    numeric domain and compare numerically with each other (``1 == 1.0``); strings compare
    only with strings
    (lexicographically, by code point).

Limits (`MAX_PREDICATES`, `MAX_ATTRIBUTES`, `MAX_NAME_LENGTH`, `MAX_STRING_LENGTH`,
`MAX_TEXT_LENGTH`) are enforced everywhere a filter or publication is built; every violation
raises `FilterError` (a `ValueError`) with a one-line message.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Final

Value = str | int | float
Publication = Mapping[str, Value]

MAX_PREDICATES: Final = 32
"""Predicates in one filter."""
MAX_ATTRIBUTES: Final = 64
"""Attributes in one publication."""
MAX_NAME_LENGTH: Final = 64
"""Characters in an attribute name."""
MAX_STRING_LENGTH: Final = 1024
"""Characters in a string value."""
MAX_TEXT_LENGTH: Final = 16384
"""Characters in the text of a filter or of a publication."""
INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**63 - 1

NUM: Final = "num"
"""The numeric kind (int and float)."""
STR: Final = "str"
"""The string kind."""

KIND_OF_TYPE: Final[dict[type, str]] = {int: NUM, float: NUM, str: STR}
_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")


class FilterError(ValueError):
    """A filter, predicate or publication that is not valid in this language."""


def kind_of(value: object) -> str | None:
    """`NUM`, `STR`, or None for anything that is not a value (bool, None, bytes, ...)."""
    return KIND_OF_TYPE.get(type(value))


def check_name(name: object) -> str:
    """An attribute name, or FilterError."""
    if type(name) is not str:
        raise FilterError(f"attribute name must be a string, not {type(name).__name__}")
    if len(name) > MAX_NAME_LENGTH:
        raise FilterError(f"attribute name longer than {MAX_NAME_LENGTH} characters")
    if not _NAME_RE.match(name):
        raise FilterError(f"bad attribute name {name!r}: use letters, digits, '_' and '.'")
    return name


def check_value(value: object, where: str = "value") -> Value:
    """A value (str, int in 64 bits, finite float), or FilterError."""
    # Exact types, as `kind_of`: bool (an int subclass) and other subclasses are not values.
    if type(value) is int:
        if not INT_MIN <= value <= INT_MAX:
            raise FilterError(f"{where} {value} does not fit in 64 bits")
        return value
    if type(value) is float:
        if not math.isfinite(value):
            raise FilterError(f"{where} must be finite, not {value!r}")
        return value
    if type(value) is str:
        if len(value) > MAX_STRING_LENGTH:
            raise FilterError(f"{where} longer than {MAX_STRING_LENGTH} characters")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise FilterError(f"{where} is not valid Unicode (a lone surrogate)") from None
        return value
    raise FilterError(f"{where} must be a string, integer or float, not {type(value).__name__}")


def format_value(value: Value) -> str:
    """The literal of a value in the text forms (parsed back to an equal value of the same type)."""
    if type(value) is str:
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def validate_publication(obj: object) -> dict[str, Value]:
    """A publication (a map of 1..`MAX_ATTRIBUTES` valid attributes) as a dict, or FilterError.

    This is also the wire form of a publication's attributes (a msgpack map).
    """
    if not isinstance(obj, Mapping):
        raise FilterError(f"a publication is a map of attributes, not {type(obj).__name__}")
    if not obj:
        raise FilterError("a publication needs at least one attribute")
    if len(obj) > MAX_ATTRIBUTES:
        raise FilterError(f"a publication has at most {MAX_ATTRIBUTES} attributes, not {len(obj)}")
    out: dict[str, Value] = {}
    for name, value in obj.items():
        out[check_name(name)] = check_value(value, f"value of {name}")
    return out
