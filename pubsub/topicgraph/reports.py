"""Judging a topic of a general-graph overlay (tco, omen) from its nodes' status reports
(pure: no I/O).  A node's status entry for a topic holds ``neighbours`` (its neighbours in
the topic), ``configured``, ``unreachable`` and the publication layer's ``publications``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any


def neighbours_of(entry: Mapping[str, Any]) -> set[str] | None:
    """A status entry's neighbours (None when it reports none, or something else)."""
    held = entry.get("neighbours")
    if not isinstance(held, (list, tuple)) or not all(isinstance(u, str) for u in held):
        return None
    return set(held)


def trie_root(entry: Mapping[str, Any]) -> str:
    publications = entry.get("publications")
    root = publications.get("root") if isinstance(publications, Mapping) else None
    return str(root[1]) if isinstance(root, (list, tuple)) and len(root) == 2 else ""


def connected(members: Iterable[str], edges: Iterable[tuple[str, str]]) -> bool:
    """Whether `edges` connect `members` (at most one component)."""
    nodes = set(members)
    adjacent: dict[str, set[str]] = {n: set() for n in nodes}
    for a, b in edges:
        if a in nodes and b in nodes:
            adjacent[a].add(b)
            adjacent[b].add(a)
    if not nodes:
        return True
    start = min(nodes)
    seen, stack = {start}, [start]
    while stack:
        for other in adjacent[stack.pop()] - seen:
            seen.add(other)
            stack.append(other)
    return seen == nodes


def reports_legitimate(entries: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether the nodes that report a topic ({ref: its status entry}) hold a legitimate
    state by their reports alone: at least one; each configured and reaching its
    neighbours, which all report the topic; every edge reported from both ends; the edges
    connect them; their trie roots agree."""
    if not entries:
        return False
    edges = set()
    for ref, entry in entries.items():
        held = neighbours_of(entry)
        if held is None or not entry.get("configured") or entry.get("unreachable") or not held <= set(entries):
            return False
        for other in held:
            if ref not in (neighbours_of(entries[other]) or ()):
                return False
            edges.add((min(ref, other), max(ref, other)))
    return connected(entries, edges) and len({trie_root(e) for e in entries.values()}) == 1


def member_table(
    members: Mapping[str, str],
    states: Mapping[str, Mapping[str, Any]],
    name_of: Callable[[str], str],
    title: str,
) -> tuple[str, list[str], list[list[str]]]:
    """One topic's subscribers in sorted order: place, node, reference and its neighbours
    in the topic ("?" when it reports none)."""
    rows = []
    for ref in sorted(members):
        held = neighbours_of(states.get(ref, {}))
        shown = "?" if held is None else ", ".join(name_of(u) for u in sorted(held)) or "-"
        rows.append([members[ref], name_of(ref), ref, shown])
    return title, ["#", "node", "ref", "neighbours in the topic"], rows
