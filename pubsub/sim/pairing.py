"""Paper 004's pairing protocol (`pubsub.pairing`) run on many nodes in one process: a
synchronous and an asynchronous driver, phase after phase, from the random weakly connected
knowledge graphs of BuildSR's corrupted states (`pubsub.sim.scenarios.weakly_connected_graph`).

**Synchronous** (`sync_phase`; §2's synchronous model): rounds.  In each round every node
acts once -- it handles, in order, the messages delivered at the end of the last round (the
first round: it begins at line 1) -- and then sends: at most `sends_per_round` messages
(§2: one; 0 means no limit) from its queue of sends, first in, first out.  What is sent in a
round is delivered at its end.  Contention (§2): the most messages one node receives in one
round.

**Asynchronous** (`async_phase`; §2's asynchronous model): every node begins at time 0;
each message is delivered after a seeded delay drawn uniformly from (0, 1] time units, no
later than one unit after it was sent, and in order on each channel (a message never
overtakes an earlier one between the same two nodes); handling takes no time.  Events run
on the simulator's engine (`pubsub.sim.engine.EventQueue`).  Contention (§2): the most
messages in transit to one node at any moment.

Both drivers check §2's rule that a node sends only to identities it has learned (its
initial neighbours, and every identity a message delivered to it carried) and raise
`ModelViolation` otherwise.

**Phases.**  A phase starts every current node at line 1 and ends when nothing is in
transit: each node is then PAIRED (line 6), back at line 7 unpaired, or still ISOLATED at
line 4 (never probed).  The drivers see this globally; the copy notes that no node can (in
the synchronous model it speaks of phases of a known number of rounds instead).  Between
phases the driver joins each pair into one node, as the copy's introduction and §3.1.1 say
-- the two neighbour sets merged, the pair known to everyone by its smaller identity -- at
no cost and at once.  That stands in for §3.2's Patricia-tree merge and §3.3's supernode
simulation, which are not built; nothing here measures or claims them.  `run` repeats
phases until one node is left.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pubsub.pairing.messages import Message, NodeId
from pubsub.pairing.node import PairingNode
from pubsub.pairing.outcome import pairs as pairs_of
from pubsub.pairing.outcome import problems
from pubsub.pairing.protocol import begin, handle
from pubsub.pairing.states import State
from pubsub.sim.engine import EventQueue
from pubsub.sim.scenarios import weakly_connected_graph

#: N_u of every node: the knowledge graph, as the nodes hold it.
Graph = dict[NodeId, set[NodeId]]

DRIVERS = ("sync", "async")


class ModelViolation(Exception):
    """A run left §2's model: a send to an unknown identity, or a phase that did not end."""


@dataclass
class Phase:
    """One phase: what it started from and how it ended.

    `duration` is rounds (synchronous: the last round in which anything was sent) or time
    units (asynchronous: when the last message arrived).  `degree[u]` is d(u) of §2 at the
    phase's start: u's out-neighbours plus in-neighbours; `contention[u]` the most messages
    to u in one round (synchronous) or in transit at once (asynchronous).  `nodes` holds
    every node's state at the end.
    """

    index: int
    graph: Graph
    nodes: dict[NodeId, PairingNode]
    pairs: list[tuple[NodeId, NodeId]]
    messages: Counter[str]
    duration: float
    degree: dict[NodeId, int]
    contention: dict[NodeId, int]
    problems: list[str]

    @property
    def size(self) -> int:
        return len(self.graph)

    @property
    def paired_fraction(self) -> float:
        return 2 * len(self.pairs) / len(self.graph) if self.graph else 0.0

    @property
    def message_count(self) -> int:
        return sum(self.messages.values())

    @property
    def max_degree(self) -> int:
        return max(self.degree.values(), default=0)

    @property
    def max_contention(self) -> int:
        return max(self.contention.values(), default=0)

    def in_degree_zero(self) -> set[NodeId]:
        held = {v for targets in self.graph.values() for v in targets}
        return set(self.graph) - held


@dataclass
class Run:
    """Phases until one node is left (or `max_phases` ran out: `finished` is False)."""

    driver: str
    n: int
    phases: list[Phase] = field(default_factory=list)
    finished: bool = False


def knowledge_graph(n: int, rng: random.Random) -> Graph:
    """The knowledge graph of BuildSR's corrupted states over nodes 0 .. n-1: N_u is the set of
    nodes u holds (`weakly_connected_graph`)."""
    graph: Graph = {u: set() for u in range(n)}
    for holder, held in weakly_connected_graph(rng, list(range(n))):
        graph[holder].add(held)
    return graph


def weakly_connected(graph: Mapping[NodeId, Iterable[NodeId]]) -> bool:
    """Whether the graph is weakly connected (edges taken both ways)."""
    if not graph:
        return True
    both: dict[NodeId, set[NodeId]] = {u: set() for u in graph}
    for u, targets in graph.items():
        for v in targets:
            both[u].add(v)
            both.setdefault(v, set()).add(u)
    start = next(iter(both))
    seen, todo = {start}, [start]
    while todo:
        for v in both[todo.pop()]:
            if v not in seen:
                seen.add(v)
                todo.append(v)
    return len(seen) == len(both)


def degrees(graph: Mapping[NodeId, set[NodeId]]) -> dict[NodeId, int]:
    """d(u) = d+(u) + d-(u) of §2."""
    degree = {u: len(targets) for u, targets in graph.items()}
    for targets in graph.values():
        for v in targets:
            degree[v] += 1
    return degree


class _Knowledge:
    """§2's rule: a node sends only to an identity it knows."""

    def __init__(self, graph: Mapping[NodeId, set[NodeId]]) -> None:
        self.known = {u: set(targets) for u, targets in graph.items()}

    def learn(self, msg: Message) -> None:
        self.known[msg.receiver].update(msg.identities())

    def check(self, msg: Message) -> None:
        if msg.receiver not in self.known[msg.sender]:
            raise ModelViolation(f"{msg.sender} sends to {msg.receiver}, which it does not know: {msg}")


def _fresh(graph: Mapping[NodeId, set[NodeId]]) -> dict[NodeId, PairingNode]:
    return {u: PairingNode(u, set(targets)) for u, targets in sorted(graph.items())}


def sync_phase(graph: Graph, rng: random.Random, *, index: int = 1, sends_per_round: int = 1,
               max_rounds: int | None = None) -> Phase:
    """One phase in rounds (module docstring).  `max_rounds` (default: 20 (d + 4), d the largest
    degree, well above what the copy's O(d) needs) bounds it: beyond, `ModelViolation`."""
    nodes = _fresh(graph)
    degree = degrees(graph)
    limit = max_rounds if max_rounds is not None else 20 * (max(degree.values(), default=0) + 4)
    knowledge = _Knowledge(graph)
    queues: dict[NodeId, deque[Message]] = {u: deque() for u in nodes}
    busy: set[NodeId] = set()  # the nodes with sends queued
    inbox: dict[NodeId, list[Message]] = {}
    messages: Counter[str] = Counter()
    contention = dict.fromkeys(nodes, 0)
    last_send = 0
    rounds = 0
    while True:
        rounds += 1
        if rounds > limit:
            raise ModelViolation(f"phase {index}: still busy after {limit} rounds")
        if rounds == 1:
            for u, node in nodes.items():
                queues[u].extend(begin(node, rng))
        for v, arrived in inbox.items():  # each node touches only itself: the order is immaterial
            node = nodes[v]
            for msg in arrived:
                queues[v].extend(handle(node, msg))
        busy.update(u for u in (nodes if rounds == 1 else inbox) if queues[u])
        inbox = {}
        sent = 0
        for u in sorted(busy):  # senders in identity order, so each inbox is in a fixed order
            queue = queues[u]
            budget = len(queue) if sends_per_round == 0 else min(sends_per_round, len(queue))
            for _ in range(budget):
                msg = queue.popleft()
                knowledge.check(msg)
                inbox.setdefault(msg.receiver, []).append(msg)
                messages[msg.kind.value] += 1
                sent += 1
            if not queue:
                busy.discard(u)
        for v, arrived in inbox.items():
            contention[v] = max(contention[v], len(arrived))
            for msg in arrived:
                knowledge.learn(msg)
        if sent:
            last_send = rounds
        else:
            break
    return _phase(index, graph, nodes, messages, float(last_send), degree, contention)


def async_phase(graph: Graph, rng: random.Random, *, index: int = 1) -> Phase:
    """One phase with random delays (module docstring)."""
    nodes = _fresh(graph)
    degree = degrees(graph)
    knowledge = _Knowledge(graph)
    queue = EventQueue()
    last_on: dict[tuple[NodeId, NodeId], float] = {}
    transit = dict.fromkeys(nodes, 0)
    contention = dict.fromkeys(nodes, 0)
    messages: Counter[str] = Counter()
    limit = sum(degree.values()) + 4 * len(nodes)  # every node receives at most d(u) + 4 (docs/pairing.md)

    def send(sends: list[Message]) -> None:
        for msg in sends:
            knowledge.check(msg)
            channel = (msg.sender, msg.receiver)
            when = max(queue.now + 1.0 - rng.random(), last_on.get(channel, 0.0))
            last_on[channel] = when
            queue.schedule(when, 0, msg)
            transit[msg.receiver] += 1
            contention[msg.receiver] = max(contention[msg.receiver], transit[msg.receiver])
            messages[msg.kind.value] += 1

    for node in nodes.values():
        send(begin(node, rng))
    handled = 0
    while len(queue):
        _, msg = queue.pop()
        handled += 1
        if handled > limit:
            raise ModelViolation(f"phase {index}: more than {limit} messages")
        transit[msg.receiver] -= 1
        knowledge.learn(msg)
        send(handle(nodes[msg.receiver], msg))
    return _phase(index, graph, nodes, messages, queue.now, degree, contention)


def _phase(index: int, graph: Graph, nodes: dict[NodeId, PairingNode], messages: Counter[str], duration: float,
           degree: dict[NodeId, int], contention: dict[NodeId, int]) -> Phase:
    found = problems(nodes)
    return Phase(index, graph, nodes, [] if found else pairs_of(nodes), messages, duration, degree, contention, found)


def contract(phase: Phase) -> Graph:
    """The next phase's graph: each pair joined into one node named by its smaller identity,
    with the union of both neighbour sets as the nodes ended the phase (probers added,
    refusers dropped), every identity renamed, no node its own neighbour."""
    rename = {u: u for u in phase.nodes}
    for a, b in phase.pairs:
        rename[a] = rename[b] = min(a, b)
    graph: Graph = {}
    for u, node in phase.nodes.items():
        graph.setdefault(rename[u], set()).update(rename[v] for v in node.neighbors)
    for u, targets in graph.items():
        targets.discard(u)
    return graph


def run(graph: Graph, driver: str, rng: random.Random, *, sends_per_round: int = 1,
        max_phases: int = 1000) -> Run:
    """Phases of `driver` ("sync" or "async") from `graph` until one node is left, or
    `max_phases` have run.  A phase whose end is not a matching raises `ModelViolation`."""
    if driver not in DRIVERS:
        raise ValueError(f"driver must be one of {DRIVERS}, not {driver!r}")
    result = Run(driver, len(graph))
    for index in range(1, max_phases + 1):
        if len(graph) <= 1:
            break
        if driver == "sync":
            phase = sync_phase(graph, rng, index=index, sends_per_round=sends_per_round)
        else:
            phase = async_phase(graph, rng, index=index)
        if phase.problems:
            raise ModelViolation(f"phase {index} did not end in a matching: {phase.problems[:5]}")
        result.phases.append(phase)
        graph = contract(phase)
    result.finished = len(graph) <= 1
    return result


def unpaired(phase: Phase) -> dict[State, int]:
    """How many nodes ended the phase unpaired, by state."""
    return dict(Counter(n.state for n in phase.nodes.values() if n.state is not State.PAIRED))
