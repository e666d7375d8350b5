"""The skip ring's parts of its `Overlay` that judge or show a topic from reports
(pubsub/skipring/statuscheck.py, pubsub/skipring/convergence.py), against the independent
oracle tests/checker.py, and their wiring in the registry (pubsub/modes/skipring.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pubsub.kernel import registry
from pubsub.skipring.convergence import SkipRingTracker
from pubsub.skipring.statuscheck import member_table, reports_legitimate, ring_order, ring_problems
from tests import checker


def entries_for(members: dict[str, str], root: str = "00") -> dict[str, dict[str, Any]]:
    """Status entries of nodes that hold exactly the ideal SR(n) state."""
    states = checker.to_reported(checker.ideal_skip_ring(members))
    return {ref: {**state, "publications": {"count": 3, "root": ["", root]}} for ref, state in states.items()}


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 16])
def test_an_ideal_ring_has_no_problems_and_is_legitimate_by_its_reports(n: int) -> None:
    members = checker.sr_members(n)
    entries = entries_for(members)
    assert ring_problems(members, entries) == []
    assert reports_legitimate(entries)
    assert [members[ref] for ref in ring_order(members)] == checker.ring_order_of(members.values())


def test_what_the_light_check_and_the_reports_find() -> None:
    members = checker.sr_members(8)
    refs = sorted(members)
    # A member that does not report: a problem; the rest alone are not SR(7).
    entries = entries_for(members)
    del entries[refs[3]]
    assert any(refs[3] in p and "did not report" in p for p in ring_problems(members, entries))
    assert not reports_legitimate(entries)
    # A wrong left neighbour.
    entries = entries_for(members)
    entries[refs[0]]["left"] = entries[refs[0]]["right"]
    assert any(f"{refs[0]}: left is" in p for p in ring_problems(members, entries))
    assert not reports_legitimate(entries)
    # An unresolved shortcut.
    entries = entries_for(members)
    holder = next(ref for ref in refs if entries[ref]["shortcuts"])
    bits = next(iter(entries[holder]["shortcuts"]))
    entries[holder]["shortcuts"][bits] = None
    assert f"{holder}: shortcut {bits} not resolved yet" in ring_problems(members, entries)
    assert not reports_legitimate(entries)
    # A non-member that reports a state.
    entries = entries_for(members)
    entries["127.0.0.1:9999"] = copy.deepcopy(entries[refs[0]])
    assert ring_problems(members, entries) == ["127.0.0.1:9999: reports a state but is not a member"]
    # Tries that disagree: the light check does not look, the reports' legitimacy does.
    entries = entries_for(members)
    entries[refs[5]]["publications"]["root"] = ["", "ff"]
    assert ring_problems(members, entries) == [] and not reports_legitimate(entries)
    assert not reports_legitimate({})


def test_the_member_table_is_in_ring_order_with_fractions_and_shortcuts() -> None:
    members = checker.sr_members(5)
    order, header, rows = member_table(members, entries_for(members), lambda ref: "n" + ref[-2:])
    assert order == "ring order (r = position on [0, 1))"
    assert header == ["#", "label", "r", "node", "ref", "shortcuts"]
    assert [row[1] for row in rows] == checker.ring_order_of(members.values())
    assert [row[2] for row in rows] == ["0", "1/8", "1/4", "1/2", "3/4"]
    first = rows[0]
    assert first[3:5] == ["n00", "127.0.0.1:7000"] and first[5] == "01->n02, 1->n01"
    assert rows[1][5] == "-"  # 001 holds no shortcut


def test_the_tracker_measures_an_ideal_ring_and_a_departure() -> None:
    members = checker.sr_members(8)
    reported = checker.to_reported(checker.ideal_skip_ring(members))
    tracker = SkipRingTracker()
    for ref, state in reported.items():
        tracker.apply(ref, {**state, "trie_root": "r"})
    measures = tracker.measures()
    assert measures["legitimate"] and measures["members"] == 8 and measures["exact_nodes"] == 8
    assert measures["correct_edges"] == measures["compared_edges"] > 0
    assert sorted(tracker.degrees()) == sorted(tracker.ideal_degrees())
    assert measures["max_degree"] == max(tracker.degrees())
    tracker.apply(sorted(members)[2], None)
    after = tracker.measures()
    assert after["members"] == 7 and not after["legitimate"] and not after["labels_ok"]
    assert len(tracker.ideal_degrees()) == 7


def test_the_registry_wires_the_skip_rings_views() -> None:
    overlay = registry.overlay("skipring")
    members = checker.sr_members(4)
    entries = entries_for(members)
    assert overlay.reports_legitimate(entries)
    assert overlay.member_table(members, entries, str)[1][0] == "#"
    supervisor_entry = {"n": 4, "legitimate_database": True,
                        "members": [{"label": bits, "ref": ref} for ref, bits in members.items()]}
    view = overlay.web_topic("t", supervisor_entry, {ref: {"topics": {"t": e}} for ref, e in entries.items()}, ())
    assert view["legitimate"] and view["n"] == 4
    assert overlay.topic_tracker is not None and overlay.topic_tracker().measures()["members"] == 0
