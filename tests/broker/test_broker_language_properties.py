"""Properties of the content-based language on generated filters: overlap, intersection and
covering have no false negatives against sampled publications, on a small finite domain every
claimed overlap has a witness (and covering fails exactly when a counterexample exists), and
the text and wire forms round-trip.
"""

from __future__ import annotations

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cores.language.filters import Filter
from broker.cores.language.predicates import OPS, Predicate
from broker.cores.language.relations import covers, intersects, overlaps
from broker.cores.language.text import parse_filter
from tests.broker.filterdomain import NAMES, NUMBER_WITNESSES, NUMBERS, STRING_WITNESSES, STRINGS

P = Predicate

# --------------------------------------------------------------------------- properties


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
