"""A skip ring as its nodes report it in their status (pure: no I/O).

* `ring_order` and `ring_problems`: the members as the supervisor lists them (ref -> label
  bits, `pubsub.ops.members.members_of`), their ring order, and what the nodes' reported
  states lack against that membership -- the skip ring's `Overlay.legitimate` (with the
  database check, `pubsub.modes.skipring`), also used by the tests' cluster checks;
* `reports_legitimate`: whether the nodes that report a topic hold the legitimate skip ring
  of themselves, judged from their reports alone (`pubsub.skipring.ideal.is_legitimate`:
  labels l(0..n-1), ideal edges, equal trie roots) -- the experiment runner's check;
* `member_table`: the demo's table of one ring, in ring order (label, r, shortcuts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pubsub.skipring.ideal import NodeView, is_legitimate
from pubsub.skipring.labels import Label, LabelError


# --- a light consistency test ------------------------------------------------------------------
def _label_or_none(bits: object) -> Label | None:
    try:
        return Label(str(bits))
    except LabelError:
        return None


def ring_order(members: Mapping[str, str]) -> list[str]:
    """Member references sorted by their labels' place on the ring (by r, then length)."""
    keyed = [(lab, ref) for ref, bits in members.items() if (lab := _label_or_none(bits))]
    return [ref for _, ref in sorted(keyed, key=lambda pair: pair[0])]


def ring_problems(
    members: Mapping[str, str], states: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """What keeps one topic's ring from agreeing with the supervisor's membership.

    Checks that every member reports a state with the supervisor's label; that left, right
    and ring are the neighbours in the supervisor's ring order (ring only at the two ends);
    that every shortcut entry is resolved to the member holding that label; and that no
    non-member reports a state.  Which shortcut *labels* a node should have is not checked
    here.  Returns [] when everything agrees.
    """
    problems: list[str] = []
    order = ring_order(members)
    if len(order) != len(members):
        problems.append("the supervisor lists a malformed label")
    holder = {bits: ref for ref, bits in members.items()}
    n = len(order)
    for position, ref in enumerate(order):
        state = states.get(ref)
        if state is None:
            problems.append(f"{ref}: member did not report its state for this topic (not answering, or not in it)")
            continue
        if state.get("label") != members[ref]:
            problems.append(
                f"{ref}: label {state.get('label')!r}, supervisor says {members[ref]!r}"
            )

        def contact(r: str) -> list[str]:
            return [members[r], r]

        want = {
            "left": contact(order[position - 1]) if position > 0 else None,
            "right": contact(order[position + 1]) if position < n - 1 else None,
            "ring": (
                contact(order[-1])
                if n > 1 and position == 0
                else contact(order[0])
                if n > 1 and position == n - 1
                else None
            ),
        }
        for key, expected in want.items():
            got = state.get(key)
            got = list(got) if isinstance(got, (list, tuple)) else got
            if got != expected:
                problems.append(f"{ref}: {key} is {got}, expected {expected}")
        shortcuts = state.get("shortcuts") or {}
        if not isinstance(shortcuts, Mapping):
            problems.append(f"{ref}: shortcuts is not a map")
            continue
        for bits, target in shortcuts.items():
            if target is None:
                problems.append(f"{ref}: shortcut {bits} not resolved yet")
            elif holder.get(bits) != target:
                problems.append(
                    f"{ref}: shortcut {bits} points to {target}, the supervisor says "
                    f"{holder.get(bits)}"
                )
    for ref in sorted(set(states) - set(members)):
        problems.append(f"{ref}: reports a state but is not a member")
    return problems


# --- the reports alone -------------------------------------------------------------------------
def view_of(ref: str, entry: Mapping[str, Any]) -> NodeView:
    """One node's status entry for a topic as a `NodeView` (its trie root: the hash of the
    ``publications`` section's ``root``, "" without one)."""
    root = (entry.get("publications") or {}).get("root")
    root_hash = root[1] if isinstance(root, (list, tuple)) and len(root) == 2 else ""
    return NodeView.from_fields(ref, entry, root_hash or "")


def reports_legitimate(entries: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether the nodes that report a topic ({ref: its status entry for the topic}) form
    the legitimate skip ring of themselves (`pubsub.skipring.ideal.is_legitimate`)."""
    return is_legitimate({ref: view_of(ref, entry) for ref, entry in entries.items()})


# --- the demo's table --------------------------------------------------------------------------
def _fraction(bits: str) -> str:
    r = Label(bits).r()
    return str(r.numerator) if r.denominator == 1 else f"{r.numerator}/{r.denominator}"


def member_table(
    members: Mapping[str, str],
    states: Mapping[str, Mapping[str, Any]],
    name_of: Callable[[str], str],
) -> tuple[str, list[str], list[list[str]]]:
    """One topic's ring in ring order (by r): position, label, r(label) as a fraction, node,
    reference and the shortcuts it reports (label -> node); `Overlay.member_table`."""
    rows = []
    for position, ref in enumerate(ring_order(members)):
        state = states.get(ref, {})
        shortcuts = state.get("shortcuts") or {}
        shown = ", ".join(
            f"{bits}->{name_of(str(target)) if target else '?'}"
            for bits, target in sorted(shortcuts.items(), key=lambda kv: Label(kv[0]))
        )
        rows.append(
            [str(position), members[ref], _fraction(members[ref]), name_of(ref), ref, shown or "-"]
        )
    order = "ring order (r = position on [0, 1))"
    return order, ["#", "label", "r", "node", "ref", "shortcuts"], rows
