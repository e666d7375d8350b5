"""How the tools look at an `omen` topic (pure: no I/O): the parts of its `Overlay` that judge
or show a topic from status reports (`pubsub.omen.mode` wires them in).

The supervisor keeps membership only, so there is no record of edges to compare with: a
topic is judged on the nodes' own reports.  `legitimate` says whether the topic is a TCO
now -- every subscriber the supervisor lists reports the topic configured and reachable,
every edge is held from both ends, the edges connect the subscribers -- and never more than
that: omen is not self-stabilizing (docs/omen.md), and the word "legitimate" here means only
"topic-connected as reported".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pubsub.publications.topicview import graph_view
from pubsub.topicgraph import reports
from pubsub.topicgraph.reports import connected, neighbours_of, reports_legitimate

__all__ = ["legitimate", "member_table", "problems", "reports_legitimate", "status_lines", "web_topic"]


def _members(entry: Mapping[str, Any]) -> list[str]:
    return [str(m.get("ref")) for m in entry.get("members") or []]


def problems(entry: Mapping[str, Any], states: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What keeps a topic from being a TCO as its nodes report it: the supervisor's `entry`
    (its subscribers), the nodes' status entries for it (`states`, by reference)."""
    members = _members(entry)
    found: list[str] = []
    edges = set()
    for ref in members:
        state = states.get(ref)
        if state is None:
            found.append(f"{ref}: did not report its state for this topic")
            continue
        held = neighbours_of(state)
        if held is None:
            found.append(f"{ref}: reports no neighbours")
            continue
        if not state.get("configured"):
            found.append(f"{ref}: not configured in the topic")
        if state.get("unreachable"):
            found.append(f"{ref}: cannot reach {state.get('unreachable')!r}")
        for other in sorted(held):
            back = neighbours_of(states.get(other, {})) or set()
            if other not in members:
                found.append(f"{ref}: holds {other}, which is not a subscriber")
            elif ref not in back:
                found.append(f"{ref} holds {other}, which does not hold it back")
            else:
                edges.add((min(ref, other), max(ref, other)))
    if not found and not connected(members, edges):
        found.append("the nodes' edges do not connect the topic's subscribers: not a TCO")
    return found


def legitimate(supervisor_body: Mapping[str, Any], states: Mapping[str, Any], topic: str) -> list[str]:
    """`Overlay.legitimate`: why `topic` is not a TCO as reported ([] when it is)."""
    entry = (supervisor_body.get("topics") or {}).get(topic) or {}
    return problems(entry, states)


def member_table(
    members: Mapping[str, str],
    states: Mapping[str, Mapping[str, Any]],
    name_of: Callable[[str], str],
) -> tuple[str, list[str], list[list[str]]]:
    """One topic's subscribers in circle order, with their neighbours in the topic."""
    return reports.member_table(members, states, name_of, "in circle order (omen overlay)")


def web_topic(
    topic: str,
    entry: Mapping[str, Any],
    answers: Mapping[str, Mapping[str, Any] | str],
    suspects: Iterable[str] = (),
) -> dict[str, Any]:
    """One topic as the supervisor's web view draws it: the subscribers on the circle in
    circle order, the edges each answering member reports (kind ``omen``), the problems."""
    return graph_view(topic, entry, answers, suspects, _members(entry), "omen", problems)


def status_lines(body: Mapping[str, Any]) -> list[str]:
    """An `omen` node as `pubsub status --node` prints it: degree, neighbours with the topics
    shared, the views it keeps for its predecessors, its coordinator duty, pending events,
    and that omen is not self-stabilizing."""
    neighbours = body.get("neighbours") or {}
    views = body.get("views") or {}
    lines = [f"omen: degree {len(neighbours)} (distinct peers); {body.get('note', '')}"]
    width = max((len(str(u)) for u in neighbours), default=9)
    lines.append(f"  {'NEIGHBOUR':<{width}}  TOPICS SHARED")
    for ref, shared in sorted(neighbours.items()):
        lines.append(f"  {ref:<{width}}  {', '.join(shared) if isinstance(shared, list) else shared}")
    lines.append(f"  predecessors: {', '.join(body.get('predecessors') or []) or '-'}; "
                 f"successors: {', '.join(body.get('successors') or []) or '-'}")
    for pred, view in sorted(views.items()):
        lines.append(f"  view of {pred}: {len(view.get('backups') or [])} backups, "
                     f"{len(view.get('neighbours') or [])} neighbours, {'ready' if view.get('ready') else 'not ready'}")
    duty = body.get("coordinating")
    lines.append(f"  coordinating: {duty['event'] + ' (' + duty['phase'] + ')' if duty else '-'}; "
                 f"queued {len(body.get('queued_events') or [])}, standby {len(body.get('standby_events') or [])}")
    return lines
