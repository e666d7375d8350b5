"""The clique's parts of its `Overlay` that judge or show a topic from status reports
(pubsub/clique/views.py): the experiment runner's check, the demo's table, the supervisor's
web view; and that the tools find them in the registry, the analysis refusing clearly."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pubsub.clique.views import member_table, reports_legitimate, web_topic
from pubsub.kernel import registry
from pubsub.ops.analysis.timeline import NotMeasured, analyse_topic, tracker_factory
from pubsub.ops.experiment.runner import topic_checks
from pubsub.supervisor.webview import RingWatch

TOPIC = "t"
REFS = [f"127.0.0.1:{7000 + i}" for i in range(5)]


def entry_of(members: list[str], root: str = "00", **changes: Any) -> dict[str, Any]:
    """A configured clique node's status entry for the topic (CliqueOverlay.status, with the
    publication layer's section)."""
    entry = {"members": list(members), "configured": True, "unreachable": [], "leaving": False,
             "publications": {"count": 2, "root": ["", root]}}
    return entry | changes


def entries_for(members: list[str]) -> dict[str, dict[str, Any]]:
    return {ref: entry_of(members) for ref in members}


def supervisor_entry(members: list[str]) -> dict[str, Any]:
    """The topic's part of CliqueSupervisor.status: members in its order, label = place."""
    return {"n": len(members), "legitimate_database": True,
            "members": [{"label": str(i), "ref": ref} for i, ref in enumerate(members)]}


def answers_for(entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {ref: {"overlay": "clique", "topics": {TOPIC: entry}} for ref, entry in entries.items()}


# --- the reports alone ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 5])
def test_a_clique_of_the_reporting_nodes_is_legitimate(n: int) -> None:
    assert reports_legitimate(entries_for(REFS[:n]))


def test_what_keeps_the_reports_from_a_clique() -> None:
    assert not reports_legitimate({})
    entries = entries_for(REFS)
    del entries[REFS[2]]  # the others still list it
    assert not reports_legitimate(entries)
    entries = entries_for(REFS)
    entries[REFS[0]] = entry_of(REFS[:4])  # one lists fewer
    assert not reports_legitimate(entries)
    entries = entries_for(REFS)
    entries[REFS[1]]["configured"] = False
    assert not reports_legitimate(entries)
    entries = entries_for(REFS)
    entries[REFS[1]]["unreachable"] = [REFS[2]]
    assert not reports_legitimate(entries)
    entries = entries_for(REFS)
    entries[REFS[3]]["members"] = None  # joining: no list yet
    assert not reports_legitimate(entries)
    entries = entries_for(REFS)
    entries[REFS[4]] = entry_of(list(reversed(REFS)))  # the same set in another order
    assert not reports_legitimate(entries)
    entries = entries_for(REFS)
    entries[REFS[4]]["publications"]["root"] = ["", "ff"]  # tries that disagree
    assert not reports_legitimate(entries)


def test_the_experiment_runner_judges_by_the_clusters_overlay() -> None:
    statuses = {ref: {"topics": {TOPIC: entry}} for ref, entry in entries_for(REFS[:3]).items()}
    statuses[REFS[4]] = {"topics": {}}  # a node that does not run the topic
    [check] = topic_checks(statuses, [TOPIC], 5.0, registry.overlay("clique"))
    assert check.legitimate and check.members == 3 and check.ts == 5.0 and check.topic == TOPIC
    [check] = topic_checks(statuses, [TOPIC], 5.0)  # the skip ring's check: no labels here
    assert not check.legitimate and check.members == 3


# --- the demo's table ----------------------------------------------------------------------------
def test_the_member_table_lists_the_members_in_the_supervisors_order() -> None:
    refs = [f"127.0.0.1:{7100 + i}" for i in range(12)]
    members = {ref: str(i) for i, ref in enumerate(refs)}
    states = entries_for(refs)
    del states[refs[5]]
    order, header, rows = member_table(members, states, lambda ref: "n" + ref[-2:])
    assert "clique overlay" in order
    assert header == ["#", "node", "ref", "neighbours"]
    assert [row[0] for row in rows] == [str(i) for i in range(12)]  # 10 and 11 after 9
    assert rows[0] == ["0", "n00", refs[0], "11"]
    assert rows[5][3] == "?"


# --- the web view ----------------------------------------------------------------------------------
def test_a_clique_is_drawn_as_the_complete_graph_of_its_members() -> None:
    view = web_topic(TOPIC, supervisor_entry(REFS), answers_for(entries_for(REFS)))
    assert view["legitimate"], view["problems"]
    assert view["n"] == 5 and view["publications_agree"] and view["legitimate_database"]
    assert [m["ref"] for m in view["members"]] == REFS
    assert [m["r"] for m in view["members"]] == [0.0, 0.2, 0.4, 0.6, 0.8]
    assert all(m["answering"] and m["publications"] == 2 for m in view["members"])
    assert {(e["from"], e["to"]) for e in view["edges"]} == {(a, b) for a in REFS for b in REFS if a != b}


def test_what_the_web_view_finds_wrong_in_a_clique() -> None:
    entries = entries_for(REFS)
    answers = answers_for(entries)
    answers[REFS[1]] = "connection refused"
    view = web_topic(TOPIC, supervisor_entry(REFS), answers, suspects=[REFS[1]])
    silent = view["members"][1]
    assert not silent["answering"] and silent["suspect"]
    assert view["problems"] == [f"{REFS[1]} does not answer: connection refused"]
    assert not view["legitimate"] and not view["publications_agree"]

    entries = entries_for(REFS)
    entries[REFS[2]] = entry_of(REFS[:3])
    view = web_topic(TOPIC, supervisor_entry(REFS), answers_for(entries))
    assert [p for p in view["problems"] if p.startswith(REFS[2])] == [
        f"{REFS[2]} lists {REFS[:3]!r}, the supervisor lists {REFS!r}"
    ]
    assert {e["to"] for e in view["edges"] if e["from"] == REFS[2]} == {REFS[0], REFS[1]}

    entries = entries_for(REFS)
    outsider = "127.0.0.1:9999"
    entries[outsider] = copy.deepcopy(entries[REFS[0]])
    view = web_topic(TOPIC, supervisor_entry(REFS), answers_for(entries))
    assert view["problems"] == [f"{outsider} is configured in the topic but is not a member"]

    view = web_topic(TOPIC, {"members": []}, {})
    assert view["problems"] == ["no members"] and not view["legitimate"]


async def test_the_watch_judges_a_clique_supervisors_topics_as_a_clique() -> None:
    """A clique supervisor's status names its overlay: the watch draws its topics with the
    clique's view (the members' lists hold no skip ring labels)."""

    def status() -> dict[str, Any]:
        return {"overlay": "clique", "topics": {TOPIC: supervisor_entry(REFS)}, "suspects": []}

    answers = answers_for(entries_for(REFS))

    async def ask(ref: str) -> Any:
        return answers[ref]

    watch = RingWatch("127.0.0.1:6999", status, ask, clock=lambda: 0.0)
    await watch.poll()
    assert watch.view()["topics"][TOPIC]["legitimate"]
    given = RingWatch("127.0.0.1:6999", status, ask, web_topic=registry.overlay("skipring").web_topic)
    await given.poll()
    assert not given.view()["topics"][TOPIC]["legitimate"]  # judged as a skip ring: wrong


# --- the registry ----------------------------------------------------------------------------------
def test_the_registry_wires_the_cliques_views_and_the_analysis_refuses_it() -> None:
    overlay = registry.overlay("clique")
    assert overlay.reports_legitimate(entries_for(REFS))
    assert overlay.member_table({REFS[0]: "0"}, entries_for(REFS[:1]), str)[2] == [["0", REFS[0], REFS[0], "0"]]
    assert overlay.web_topic(TOPIC, supervisor_entry(REFS), answers_for(entries_for(REFS)), ())["legitimate"]
    assert overlay.topic_tracker is None
    with pytest.raises(NotMeasured, match="does not measure the 'clique' overlay"):
        tracker_factory("clique")
    with pytest.raises(NotMeasured):
        analyse_topic(TOPIC, [], [], [], None, 0.5, overlay="clique")  # type: ignore[arg-type]


def test_pubsub_analyze_says_it_cannot_measure_a_clique(tmp_path: Path) -> None:
    from pubsub.ops.analysis.cli import analyze

    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "node.jsonl").write_text("{}\n")
    done = CliRunner().invoke(analyze, [str(tmp_path), "--overlay", "clique"])
    assert done.exit_code == 1 and "does not measure the 'clique' overlay" in done.output, done.output
    done = CliRunner().invoke(analyze, [str(tmp_path), "--overlay", "nonesuch"])
    assert done.exit_code == 1 and "no overlay 'nonesuch'" in done.output, done.output
