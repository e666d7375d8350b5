"""The matching indexes (`broker.cores.matching`): `SubscriptionIndex` and `CountingIndex`
return exactly what the scan (`LinearIndex`) returns, before and after removals and through
relabellings of the order codes; overlap queries, non-values, unsatisfiable and empty filters.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.cores.language.filters import Filter
from broker.cores.language.predicates import OPS, Predicate
from broker.cores.language.text import parse_filter
from broker.cores.matching.counting import CountingIndex
from broker.cores.matching.linear import LinearIndex
from broker.cores.matching.vectorised import SubscriptionIndex
from tests.broker.filterdomain import NAMES, NUMBER_WITNESSES, NUMBERS, STRING_WITNESSES, STRINGS

P = Predicate


def test_overlapping_in_the_index() -> None:
    for index in (SubscriptionIndex(), CountingIndex(), LinearIndex()):
        index.add("cheap", parse_filter("price < 10"))
        index.add("ibm", parse_filter('symbol = "IBM"'))
        index.add("vol", parse_filter("volume > 5"))
        adv = parse_filter('symbol prefix "I" and price >= 5 and price <= 20')
        assert index.overlapping(adv) == {"cheap", "ibm"}


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
    from broker.cores.language.values import NUM

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
