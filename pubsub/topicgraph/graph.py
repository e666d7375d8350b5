"""An overlay G(V, E) over nodes that subscribe to topics (paper 001, §III).

`TopicOverlay` holds each node's topics (``v.topics``) and the undirected edges
(``v.neighbors``).  The sub-graph a topic t induces has the nodes that subscribe to t and the
edges between two of them; its connected components are t's *TC-components*, and the
overlay is *topic-connected* (a TCO) when every topic has at most one.  `Components` keeps
the TC-components of a set of topics under edge additions (one union-find per topic), which
is what Low-ODA's contributions are counted on (`pubsub.topicgraph.lowoda`).

Nodes and topics are strings (a node's reference, a topic's name); every iteration that can
decide a choice is over sorted values, so a run is a function of its inputs alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Node = str
Topic = str
Edge = tuple[Node, Node]


def edge(u: Node, v: Node) -> Edge:
    """The undirected edge {u, v} in its one stored form (the smaller node first)."""
    if u == v:
        raise ValueError(f"no edge from {u!r} to itself")
    return (u, v) if u < v else (v, u)


class TopicOverlay:
    """Nodes with their topics, and the edges between them."""

    def __init__(self, topics: Mapping[Node, Iterable[Topic]] | None = None, edges: Iterable[Edge] = ()) -> None:
        self.topics: dict[Node, frozenset[Topic]] = {}
        self.neighbors: dict[Node, set[Node]] = {}
        #: topic -> the nodes that subscribe to it (t.nodes).
        self.subscribers: dict[Topic, set[Node]] = {}
        #: The nodes whose topics, edges or neighbours' shared topics a mutation changed,
        #: since the holder last cleared it (the supervisor sends and stores their tables).
        self.touched: set[Node] = set()
        for node, node_topics in (topics or {}).items():
            self.add_node(node, node_topics)
        for u, v in edges:
            self.add_edge(u, v)

    # ------------------------------------------------------------------ nodes and edges
    def add_node(self, node: Node, topics: Iterable[Topic]) -> None:
        """A node with its topics and no edges (ValueError if it is here already)."""
        if node in self.topics:
            raise ValueError(f"node {node!r} is in the overlay already")
        self.topics[node] = frozenset(topics)
        self.neighbors[node] = set()
        self.touched.add(node)
        for topic in self.topics[node]:
            self.subscribers.setdefault(topic, set()).add(node)

    def remove_node(self, node: Node) -> list[Edge]:
        """Remove a node and its edges; the edges removed."""
        removed = [edge(node, other) for other in sorted(self.neighbors[node])]
        self.touched |= self.neighbors[node] | {node}
        for other in self.neighbors.pop(node):
            self.neighbors[other].discard(node)
        for topic in self.topics.pop(node):
            members = self.subscribers[topic]
            members.discard(node)
            if not members:
                del self.subscribers[topic]
        return removed

    def set_topics(self, node: Node, topics: Iterable[Topic]) -> None:
        """Change a node's topics (its edges stay: the caller decides which go)."""
        self.touched |= self.neighbors[node] | {node}
        for topic in self.topics[node]:
            members = self.subscribers[topic]
            members.discard(node)
            if not members:
                del self.subscribers[topic]
        self.topics[node] = frozenset(topics)
        for topic in self.topics[node]:
            self.subscribers.setdefault(topic, set()).add(node)

    def add_edge(self, u: Node, v: Node) -> None:
        self.neighbors[u].add(v)
        self.neighbors[v].add(u)
        self.touched |= {u, v}

    def remove_edge(self, u: Node, v: Node) -> None:
        self.neighbors[u].discard(v)
        self.neighbors[v].discard(u)
        self.touched |= {u, v}

    def has_edge(self, u: Node, v: Node) -> bool:
        return v in self.neighbors.get(u, ())

    def edges(self) -> set[Edge]:
        return {edge(u, v) for u, others in self.neighbors.items() for v in others if u < v}

    def shared(self, u: Node, v: Node) -> frozenset[Topic]:
        """The topics u and v both subscribe to."""
        return self.topics[u] & self.topics[v]

    # ------------------------------------------------------------------ degrees
    def degree(self, node: Node) -> int:
        return len(self.neighbors[node])

    def max_degree(self) -> int:
        return max((len(n) for n in self.neighbors.values()), default=0)

    def average_degree(self) -> float:
        return 2 * len(self.edges()) / len(self.neighbors) if self.neighbors else 0.0

    # ------------------------------------------------------------------ topic-connectivity
    def components(self, topic: Topic) -> list[set[Node]]:
        """The TC-components of `topic`: the connected parts of the sub-graph it induces."""
        members = self.subscribers.get(topic, set())
        seen: set[Node] = set()
        parts = []
        for start in sorted(members):
            if start in seen:
                continue
            part, stack = {start}, [start]
            while stack:
                for other in self.neighbors[stack.pop()]:
                    if other in members and other not in part:
                        part.add(other)
                        stack.append(other)
            seen |= part
            parts.append(part)
        return parts

    def split_topics(self, topics: Iterable[Topic] | None = None) -> list[Topic]:
        """The topics (of `topics`, default all) with more than one TC-component, sorted."""
        chosen = sorted(self.subscribers if topics is None else set(topics))
        return [t for t in chosen if len(self.components(t)) > 1]

    def is_topic_connected(self, topics: Iterable[Topic] | None = None) -> bool:
        return not self.split_topics(topics)

    def copy(self) -> TopicOverlay:
        return TopicOverlay(self.topics, self.edges())


class Components:
    """The TC-components of `topics` in an overlay, kept under edge additions: one
    union-find per topic over the topic's subscribers.  `count` is the number of
    TC-components over all those topics; an added edge (u, v) merges, for every topic both
    subscribe to, the two components it joins (the reduction is the edge's contribution)."""

    def __init__(self, overlay: TopicOverlay, topics: Iterable[Topic]) -> None:
        self.overlay = overlay
        self.topics = sorted(set(topics) & set(overlay.subscribers))
        self._parent: dict[Topic, dict[Node, Node]] = {}
        self.count = 0
        for topic in self.topics:
            parent: dict[Node, Node] = {}
            for part in overlay.components(topic):
                root = min(part)
                for node in part:
                    parent[node] = root
                self.count += 1
            self._parent[topic] = parent

    def _find(self, topic: Topic, node: Node) -> Node:
        parent = self._parent[topic]
        root = node
        while parent[root] != root:
            root = parent[root]
        while parent[node] != root:
            parent[node], node = root, parent[node]
        return root

    def contribution(self, u: Node, v: Node) -> int:
        """contrib((u, v)): the topics both subscribe to whose components the edge joins."""
        return sum(
            1 for t in self.overlay.shared(u, v) if t in self._parent and self._find(t, u) != self._find(t, v)
        )

    def join(self, u: Node, v: Node) -> int:
        """Merge what the edge (u, v) joins; the reduction in the number of components."""
        merged = 0
        for topic in self.overlay.shared(u, v):
            if topic not in self._parent:
                continue
            a, b = self._find(topic, u), self._find(topic, v)
            if a != b:
                self._parent[topic][max(a, b)] = min(a, b)
                merged += 1
        self.count -= merged
        return merged

    def connected(self) -> bool:
        """Every topic has one component."""
        return self.count == len(self.topics)
