"""A skip ring as the supervisor reports it: members and labels, the ring order, and
what a node's reported state lacks against that membership (`ring_problems`).  Used by
the demo, `pubsub cluster status` and the tests' cluster checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pubsub.skipring.labels import Label, LabelError


def members_of(supervisor_body: Mapping[str, Any], topic: str) -> dict[str, str]:
    """ref -> label bits of one topic, from a supervisor status body."""
    entry = (supervisor_body.get("topics") or {}).get(topic) or {}
    members: dict[str, str] = {}
    for member in entry.get("members", []):
        bits = str(member.get("label"))
        ref = member.get("ref")
        members[str(ref) if ref is not None else f"<none:{bits}>"] = bits
    return members


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
