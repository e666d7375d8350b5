"""What every overlay's web view shows of one topic (`Overlay.web_topic`), whatever the
overlay: the members' own status for the topic, whether each answers, is suspected and how
many publications it holds, whether their tries' roots agree, and the body the page draws.
The overlay judges the rest -- the labels, the edges, legitimacy -- from the same
statuses (`pubsub.skipring.supervisor.webtopic`, `pubsub.clique.views`).  Pure."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: Most problems a topic's view lists.
MAX_PROBLEMS = 20


class TopicView:
    """One topic's view under construction, from the polled nodes' `answers` (ref -> its
    status body, or why it gave none)."""

    def __init__(self, topic: str, answers: Mapping[str, Mapping[str, Any] | str], suspects: Iterable[str]) -> None:
        self.topic = topic
        self.answers = answers
        self.suspected = set(suspects)
        #: ref -> the node's status entry for the topic, for every node that reports one.
        self.states: dict[str, Mapping[str, Any]] = {}
        for ref, body in answers.items():
            if isinstance(body, Mapping):
                state = (body.get("topics") or {}).get(topic)
                if isinstance(state, Mapping):
                    self.states[ref] = state
        self.members: list[dict[str, Any]] = []
        self.edges: list[dict[str, str]] = []
        self.problems: list[str] = []
        self._roots: set[str] = set()

    def member(self, ref: str, label: str, r: float | None) -> Mapping[str, Any] | None:
        """Add one member (its label and place r in [0, 1) on the page's circle); its status
        entry for the topic, or None (with the problem noted) when it does not answer or
        holds no state for the topic."""
        answer = self.answers.get(ref)
        state = self.states.get(ref)
        publications = (state or {}).get("publications") or {}
        count = publications.get("count") if isinstance(publications, Mapping) else None
        self.members.append(
            {
                "ref": ref,
                "label": label,
                "r": r,
                "answering": isinstance(answer, Mapping),
                "suspect": ref in self.suspected,
                "publications": count if isinstance(count, int) else None,
            }
        )
        if not isinstance(answer, Mapping):
            self.problems.append(f"{ref} does not answer" + (f": {answer}" if answer else ""))
            return None
        if state is None:
            self.problems.append(f"{ref} holds no state for the topic")
            return None
        root = publications.get("root") if isinstance(publications, Mapping) else None
        self._roots.add(json.dumps(root))
        return state

    def body(self, entry: Mapping[str, Any], n: int) -> dict[str, Any]:
        """The topic as the page draws it: ``topic``, ``n``, ``members``, ``edges``,
        ``legitimate`` (no problem noted), ``problems`` (at most `MAX_PROBLEMS`),
        ``legitimate_database`` (from the supervisor's `entry`) and ``publications_agree``."""
        return {
            "topic": self.topic,
            "n": n,
            "members": self.members,
            "edges": self.edges,
            "legitimate": not self.problems,
            "problems": self.problems[:MAX_PROBLEMS],
            "legitimate_database": bool(entry.get("legitimate_database")),
            "publications_agree": len(self._roots) <= 1 and all(m["answering"] for m in self.members),
        }


def graph_view(
    topic: str,
    entry: Mapping[str, Any],
    answers: Mapping[str, Mapping[str, Any] | str],
    suspects: Iterable[str],
    members: list[str],
    kind: str,
    problems: Callable[[Mapping[str, Any], Mapping[str, Mapping[str, Any]]], list[str]],
) -> dict[str, Any]:
    """A topic of a general-graph overlay (tco, omen) as the web view draws it: `members`
    evenly on the circle in the order given, the edges each answering member reports in its
    ``neighbours`` (of `kind`), and what `problems(entry, states)` finds."""
    view = TopicView(topic, answers, suspects)
    n = len(members)
    for place, ref in enumerate(members):
        state = view.member(ref, str(place), place / n)
        if state is None:
            continue
        held = state.get("neighbours")
        others = sorted(str(u) for u in held) if isinstance(held, (list, tuple)) else []
        view.edges.extend({"from": ref, "to": to, "kind": kind} for to in others if ref < to)
    if not members:
        view.problems.append("no members")
    view.problems.extend(problems(entry, view.states))
    return view.body(entry, n)
