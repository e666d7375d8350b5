"""How the tools look at a clique (pure: no I/O): the clique's parts of its `Overlay` that
judge or show a topic from status reports (`pubsub.clique.mode` wires them in).

A clique node's status entry for a topic (`pubsub.clique.overlay.CliqueOverlay.status`,
with the publication layer's section) holds ``members`` (the member list as the supervisor
last sent it, or None), ``configured`` (that list names the node), ``unreachable`` (the
members it could not reach), ``leaving`` and ``publications`` (``count``, ``root``).  The
supervisor's entry lists the members in its order, ``label`` being each one's place.

* `reports_legitimate`: the nodes that report a topic form the clique of themselves;
* `member_table`: the demo's table of one topic, in the supervisor's order;
* `web_topic`: one topic as the supervisor's web view draws it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pubsub.publications.topicview import TopicView


def _root(entry: Mapping[str, Any]) -> str:
    """The hash of the entry's publication trie root ("" without one)."""
    publications = entry.get("publications")
    root = publications.get("root") if isinstance(publications, Mapping) else None
    return str(root[1]) if isinstance(root, (list, tuple)) and len(root) == 2 else ""


def _listed(entry: Mapping[str, Any]) -> list[str] | None:
    """The member list a node's entry reports, or None when it holds none."""
    members = entry.get("members")
    if not isinstance(members, (list, tuple)) or not all(isinstance(m, str) for m in members):
        return None
    return list(members)


def reports_legitimate(entries: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether the nodes that report a topic ({ref: its status entry for the topic}) hold
    the clique of themselves: at least one; each is configured, reaches every member and
    lists exactly the reporting nodes, each once, all in the same order; their trie roots
    agree."""
    if not entries:
        return False
    reporting = set(entries)
    lists: set[tuple[str, ...]] = set()
    for entry in entries.values():
        listed = _listed(entry)
        if listed is None or not entry.get("configured") or entry.get("unreachable"):
            return False
        if len(set(listed)) != len(listed) or set(listed) != reporting:
            return False
        lists.add(tuple(listed))
    return len(lists) == 1 and len({_root(entry) for entry in entries.values()}) == 1


def _place(key: str) -> tuple[int, int | str]:
    """Sort key of a supervisor's label: its place in the list (numbers first, in order)."""
    return (0, int(key)) if key.isdigit() else (1, key)


def member_table(
    members: Mapping[str, str],
    states: Mapping[str, Mapping[str, Any]],
    name_of: Callable[[str], str],
) -> tuple[str, list[str], list[list[str]]]:
    """One topic's members in the supervisor's order: place, node, reference and how many
    neighbours each reports (the other members of its list; "?" without a list)."""
    rows = []
    for key, ref in sorted(((key, ref) for ref, key in members.items()), key=lambda kr: (_place(kr[0]), kr[1])):
        listed = _listed(states.get(ref, {}))
        neighbours = str(len([m for m in listed if m != ref])) if listed is not None else "?"
        rows.append([key, name_of(ref), ref, neighbours])
    return "in the supervisor's order (clique overlay)", ["#", "node", "ref", "neighbours"], rows


def web_topic(
    topic: str,
    entry: Mapping[str, Any],
    answers: Mapping[str, Mapping[str, Any] | str],
    suspects: Iterable[str] = (),
) -> dict[str, Any]:
    """One topic as the supervisor's web view draws it (`Overlay.web_topic`).

    The members are the supervisor's (``entry``), in its order, evenly on the circle
    (r = place / n); the edges are the ones the members report: from each answering member
    to every other member of its list (kind ``ring``).  *Legitimate* means: at least one
    member, every member answers and holds the supervisor's list (same order), configured
    and reaching everyone, and no other polled node is configured in the topic.
    """
    view = TopicView(topic, answers, suspects)
    problems = view.problems
    listed: list[str] = []
    for member in entry.get("members") or []:
        ref = member.get("ref")
        if ref is None:
            problems.append(f"place {member.get('label')} is held by nobody")
        else:
            listed.append(str(ref))
    if not listed:
        problems.append("no members")
    elif len(set(listed)) != len(listed):
        problems.append("the supervisor lists a member twice")
    n = len(listed)
    for place, ref in enumerate(listed):
        state = view.member(ref, str(place), place / n)
        if state is None:
            continue
        held = _listed(state)
        view.edges.extend({"from": ref, "to": to, "kind": "ring"} for to in sorted(set(held or ())) if to != ref)
        if held != listed:
            problems.append(f"{ref} lists {held!r}, the supervisor lists {listed!r}")
        elif not state.get("configured"):
            problems.append(f"{ref} is not configured in the topic")
        elif state.get("unreachable"):
            problems.append(f"{ref} cannot reach {state.get('unreachable')!r}")
    for ref in sorted(set(view.states) - set(listed)):
        if view.states[ref].get("configured"):
            problems.append(f"{ref} is configured in the topic but is not a member")
    return view.body(entry, n)
