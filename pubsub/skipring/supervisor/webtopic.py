"""One topic of the supervisor's web view (`pubsub.supervisor.webview`) for the skip ring:
the skip ring's `Overlay.web_topic` (pure: no I/O).

The topic is judged against the ideal skip ring of the supervisor's membership
(`pubsub.skipring.ideal`, Definition 2.1).  *Legitimate* means: labels exactly l(0..n-1),
every member answers and holds exactly its ideal label, left, right, ring and shortcuts,
and no other polled node holds state for the topic.  Whether the members' publication
tries agree is shown beside it (``publications_agree``), not as part of legitimacy.  The
page places each member at the angle 2π·r(label) and draws the ring and shortcut edges the
nodes report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pubsub.publications.topicview import TopicView
from pubsub.skipring.ideal import NodeView, edge_score, ideal_ring, is_canonical, parse_label


def _position(bits: str) -> float | None:
    """r(label) as a float in [0, 1), or None for a malformed label."""
    label = parse_label(bits)
    return None if label is None else float(label.r())


def _edges(ref: str, state: Mapping[str, Any]) -> dict[str, str]:
    """target -> kind ("ring" or "shortcut") of the edges one node reports for a topic."""
    out: dict[str, str] = {}
    shortcuts = state.get("shortcuts")
    if isinstance(shortcuts, Mapping):
        for target in shortcuts.values():
            if isinstance(target, str):
                out[target] = "shortcut"
    for key in ("left", "right", "ring"):
        contact = state.get(key)
        if isinstance(contact, (list, tuple)) and len(contact) == 2 and isinstance(contact[1], str):
            out[str(contact[1])] = "ring"
    out.pop(ref, None)
    return out


def topic_view(
    topic: str,
    entry: Mapping[str, Any],
    answers: Mapping[str, Mapping[str, Any] | str],
    suspects: Iterable[str] = (),
) -> dict[str, Any]:
    """One topic as the page draws it, judged against the ideal skip ring.

    `entry` is the topic's part of the supervisor's status (``members``,
    ``legitimate_database``); `answers` maps every polled node to its status body or to why
    it did not answer.  Returns ``topic``, ``n``, ``members`` (in ring order: ref, label,
    r, answering, suspect, publications), ``edges`` (from, to, kind; from the members'
    reports), ``legitimate``, ``problems`` (why not, at most 20), ``legitimate_database``
    and ``publications_agree``.
    """
    view = TopicView(topic, answers, suspects)
    problems = view.problems
    listed: dict[str, str] = {}
    for member in entry.get("members") or []:
        ref, bits = member.get("ref"), str(member.get("label"))
        if ref is None:
            problems.append(f"label {bits} is held by nobody")
        else:
            listed[str(ref)] = bits
    if not listed:
        problems.append("no members")
    elif not is_canonical(listed.values()):
        problems.append(f"labels are not l(0..{len(listed) - 1})")
    ideal = ideal_ring(listed)
    for ref, bits in sorted(listed.items(), key=lambda item: (_position(item[1]) or 0.0, len(item[1]), item[0])):
        state = view.member(ref, bits, _position(bits))
        if state is None:
            continue
        view.edges.extend({"from": ref, "to": to, "kind": kind} for to, kind in sorted(_edges(ref, state).items()))
        node = NodeView.from_fields(ref, state)
        want = ideal.get(ref)
        if node.label != bits:
            problems.append(f"{ref} has label {node.label}, the supervisor says {bits}")
        elif want is not None:
            correct, compared = edge_score(want, node)
            if correct != compared:
                problems.append(f"{ref}: {correct} of {compared} edges as in SR({len(listed)})")
    for ref in sorted(set(view.states) - set(listed)):
        problems.append(f"{ref} holds state for the topic but is not a member")
    return view.body(entry, len(listed))
