"""The wire form of filters (`broker.cores.language.filters`): msgpack round trips, junk
refused, and filters and indexes that survive pickling and copying.
"""

from __future__ import annotations

import msgpack
import pytest

from broker.cores.language.filters import Filter
from broker.cores.language.text import parse_filter
from broker.cores.language.values import MAX_PREDICATES, FilterError
from broker.cores.matching.vectorised import SubscriptionIndex

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
