"""An independent topic-connectivity checker for the tco tests: it shares no code with
`pubsub.tco` (its own graph walk over plain dicts and edge lists), so a fault in the cores'
components cannot hide itself here."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping


def split_topics(topics: Mapping[str, Iterable[str]], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """topic -> its number of connected parts, for every topic with more than one: a topic's
    part is what its subscribers reach over edges whose two ends both subscribe to it."""
    subscribed = {node: set(ts) for node, ts in topics.items()}
    adjacent: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        if a == b or a not in subscribed or b not in subscribed:
            raise AssertionError(f"edge ({a}, {b}) is not between two distinct nodes")
        adjacent[a].add(b)
        adjacent[b].add(a)
    by_topic: dict[str, set[str]] = defaultdict(set)
    for node, ts in subscribed.items():
        for topic in ts:
            by_topic[topic].add(node)
    split = {}
    for topic, members in by_topic.items():
        unseen, parts = set(members), 0
        while unseen:
            parts += 1
            frontier = [unseen.pop()]
            while frontier:
                here = frontier.pop()
                for there in adjacent[here] & unseen:
                    unseen.discard(there)
                    frontier.append(there)
        if parts > 1:
            split[topic] = parts
    return split


def degrees(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    count = dict.fromkeys(nodes, 0)
    for a, b in set(tuple(sorted(e)) for e in edges):
        count[a] += 1
        count[b] += 1
    return count
