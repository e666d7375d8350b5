"""How the tools judge and draw an omen topic from the nodes' reports (`pubsub.omen.topicviews`):
a TCO as reported, never more."""

from __future__ import annotations

from typing import Any

from pubsub.omen.topicviews import legitimate, problems, status_lines, web_topic

ENTRY = {"members": [{"label": "0", "ref": "a:1"}, {"label": "1", "ref": "b:1"}, {"label": "2", "ref": "c:1"}]}


def state(*neighbours: str, **extra: Any) -> dict[str, Any]:
    return {"neighbours": list(neighbours), "configured": True, "unreachable": [], **extra}


def test_a_connected_topic_held_from_both_ends_is_found_a_tco() -> None:
    states = {"a:1": state("b:1"), "b:1": state("a:1", "c:1"), "c:1": state("b:1")}
    assert problems(ENTRY, states) == []
    assert legitimate({"topics": {"t": ENTRY}}, states, "t") == []


def test_a_split_topic_a_one_way_edge_and_a_silent_member_are_found() -> None:
    split = {"a:1": state("b:1"), "b:1": state("a:1"), "c:1": state()}
    assert problems(ENTRY, split) == ["the nodes' edges do not connect the topic's subscribers: not a TCO"]
    one_way = {"a:1": state("b:1", "c:1"), "b:1": state("a:1"), "c:1": state()}
    assert "a:1 holds c:1, which does not hold it back" in problems(ENTRY, one_way)
    silent = {"a:1": state("b:1"), "b:1": state("a:1")}
    assert "c:1: did not report its state for this topic" in problems(ENTRY, silent)


def test_the_web_view_draws_every_edge_once() -> None:
    states = {"a:1": state("b:1"), "b:1": state("a:1", "c:1"), "c:1": state("b:1")}
    body = web_topic("t", ENTRY, {ref: {"topics": {"t": st}} for ref, st in states.items()})
    assert sorted((e["from"], e["to"]) for e in body["edges"]) == [("a:1", "b:1"), ("b:1", "c:1")]
    assert all(e["kind"] == "omen" for e in body["edges"])


def test_status_lines_say_it_is_not_self_stabilizing() -> None:
    lines = status_lines({"neighbours": {"b:1": ["t"]}, "note": "omen is not self-stabilizing: ...",
                          "views": {"p:1": {"backups": ["x"], "neighbours": [], "ready": True}},
                          "predecessors": ["p:1"], "successors": ["s:1"], "coordinating": None})
    assert "not self-stabilizing" in lines[0] and "degree 1" in lines[0]
    assert any("view of p:1: 1 backups, 0 neighbours, ready" in line for line in lines)
