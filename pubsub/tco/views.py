"""How the tools look at a `tco` topic (pure: no I/O): the parts of its `Overlay` that judge
or show a topic from status reports (`pubsub.tco.mode` wires them in).

A `tco` node's status entry for a topic (`pubsub.tco.overlay.TcoOverlay.status`, with the
publication layer's section) holds ``neighbours`` (its neighbours there, from its table),
``configured``, ``leaving``, ``unreachable`` and ``publications``.  The supervisor's entry
lists the topic's subscribers (``members``, ``label`` their place in sorted order) and the
``edges`` among them.

* `legitimate`: the topic's state is the supervisor's overlay, and that overlay connects
  the topic's subscribers (the TCO property for this topic);
* `reports_legitimate`: the nodes that report the topic agree with each other on their
  edges, reach each other and are connected, and their trie roots agree;
* `member_table`, `web_topic`: the demo's table and the web view's drawing;
* `status_lines`: what `pubsub status --node` prints of a node's table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pubsub.publications.topicview import graph_view
from pubsub.topicgraph import reports
from pubsub.topicgraph.reports import connected, neighbours_of, reports_legitimate

__all__ = ["connected", "legitimate", "member_table", "problems", "reports_legitimate", "status_lines", "web_topic"]


def _supervisor_view(entry: Mapping[str, Any]) -> tuple[list[str], dict[str, set[str]]]:
    members = [str(m.get("ref")) for m in entry.get("members") or []]
    adjacent: dict[str, set[str]] = {m: set() for m in members}
    for pair in entry.get("edges") or []:
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            a, b = str(pair[0]), str(pair[1])
            adjacent.setdefault(a, set()).add(b)
            adjacent.setdefault(b, set()).add(a)
    return members, adjacent


def problems(entry: Mapping[str, Any], states: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What keeps a topic from the legitimate state: the supervisor's `entry` for it, the
    nodes' status entries for it (`states`, by reference)."""
    members, adjacent = _supervisor_view(entry)
    found: list[str] = []
    if len(set(members)) != len(members):
        found.append("the supervisor lists a subscriber twice")
    edges = [(a, b) for a in adjacent for b in adjacent[a] if a < b]
    if not connected(members, edges):
        found.append("the supervisor's edges do not connect the topic's subscribers")
    for ref in members:
        state = states.get(ref)
        if state is None:
            found.append(f"{ref}: did not report its state for this topic")
            continue
        held = neighbours_of(state)
        if held != adjacent.get(ref, set()):
            wanted = sorted(adjacent.get(ref, ()))
            found.append(f"{ref}: holds neighbours {sorted(held or ())}, the supervisor {wanted}")
        elif not state.get("configured"):
            found.append(f"{ref}: not configured in the topic")
        elif state.get("unreachable"):
            found.append(f"{ref}: cannot reach {state.get('unreachable')!r}")
    for ref, state in sorted(states.items()):
        if ref not in members and state.get("configured"):
            found.append(f"{ref}: configured in the topic, but the supervisor does not list it")
    return found


def legitimate(supervisor_body: Mapping[str, Any], states: Mapping[str, Any], topic: str) -> list[str]:
    """`Overlay.legitimate`: the problems of `topic` ([] when legitimate)."""
    entry = (supervisor_body.get("topics") or {}).get(topic) or {}
    return problems(entry, states)


def member_table(
    members: Mapping[str, str],
    states: Mapping[str, Mapping[str, Any]],
    name_of: Callable[[str], str],
) -> tuple[str, list[str], list[list[str]]]:
    """One topic's subscribers in sorted order, with their neighbours in the topic."""
    return reports.member_table(members, states, name_of, "in reference order (tco overlay)")


def web_topic(
    topic: str,
    entry: Mapping[str, Any],
    answers: Mapping[str, Mapping[str, Any] | str],
    suspects: Iterable[str] = (),
) -> dict[str, Any]:
    """One topic as the supervisor's web view draws it (`Overlay.web_topic`): the
    subscribers evenly on the circle in reference order, the edges each answering member
    reports (kind ``tco``), and the problems `problems` finds."""
    return graph_view(topic, entry, answers, suspects, _supervisor_view(entry)[0], "tco", problems)


def status_lines(body: Mapping[str, Any]) -> list[str]:
    """A `tco` node's table as `pubsub status --node` prints it: its degree (its distinct
    peers: one edge per neighbour, whatever the topics), each neighbour with the topics
    they share, its backups and primaries."""
    neighbours = body.get("neighbours") or {}
    backups, primaries = body.get("backups") or [], body.get("primaries") or []
    lines = [
        f"tco table: degree {len(neighbours)} (distinct peers), {len(backups)} backups, {len(primaries)} primaries",
    ]
    width = max((len(str(u)) for u in neighbours), default=9)
    lines.append(f"  {'NEIGHBOUR':<{width}}  TOPICS SHARED")
    for ref, shared in sorted(neighbours.items()):
        lines.append(f"  {ref:<{width}}  {', '.join(shared) if isinstance(shared, list) else shared}")
    lines.append(f"  backups: {', '.join(backups) or '-'}")
    lines.append(f"  primaries: {', '.join(primaries) or '-'}")
    return lines
