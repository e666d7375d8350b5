"""An overlay simulated: its supervisor core and node cores on the discrete-event engine
(`pubsub.sim.engine`), looked up by the overlay's name in the registry (`pubsub.kernel.registry`;
the skip ring by default).

It runs the overlay's supervisor core (the skip ring's `SupervisorCore`) and any number of
its node cores (`NodeCore`) in one process and delivers
their `Send`s with random delays, so delivery is non-FIFO and the schedule is adversarial
yet reproducible from the seed.  Nodes fire Timeout every `interval` (± jitter), one
"timeout interval" being the time in which every subscriber has done so once.  Crashed
nodes swallow messages; a sender whose message hits a crashed node hears about it after
`detect_delay` (what the real runtime reports after failed reconnects).  Tests of the skip
ring reach into `nodes[ref].instances[topic]` and `supervisor.topics[topic]` to read or
inject state, and
into `nodes[ref].publications[topic]` (the topic's `AntiEntropy` core and its trie) for
publications; `publish` issues one, and `flooding` switches §4.3's flooding for every node.
`dissemination` chooses how new publications spread: "flood" (the paper's flooding, the
simulator's default, which the paper's claims are checked with), "tree" (the daemons'
default, the arc broadcast of `pubsub.publications.arcs`) or "off" (anti-entropy alone, also
``flooding=False``).

Publishing as a client does it (`publish_request`) runs the node's own decisions: the
hand-over through a non-member and the order "persist, then acknowledge, then flood",
which the core states as effects (`pubsub.kernel.effects`).  Every core's effects are
carried out by the daemons' own executor (`pubsub.kernel.executor`), on the virtual clock:
"the end of the pass" is right after the call (or the commit) that released something.
With `commit_delay` set, each node has a simulated store: the rows of its core's
`Persist`s are written by a group commit that takes `commit_delay` seconds (local numbers
per topic, as the daemon's store gives them), a `Persist` runs its effects only after the
commit that holds its rows and those before them, and a crash loses what was not yet
written.  Answers to clients are collected in `answers`; with `trace` every send and
commit is logged in `log`, so tests can check the order with no network.  Without
`commit_delay`, durability is not modelled and a `Persist`'s commit ends at once (with
`keep_rows`, its rows are kept in `rows`, by node, for a benchmark to read).
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pubsub.kernel import registry
from pubsub.kernel.effects import Answer, Effect
from pubsub.kernel.executor import Executor, LocalSeqs
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.publications.messages import MsgId, Payload, PublishRequest
from pubsub.publications.topicstate import Arrival, NewRow
from pubsub.sim.engine import EventQueue

SUPERVISOR = Ref("supervisor")

_DELIVER, _TIMER, _UNREACHABLE, _COMMIT = 0, 1, 2, 3


@dataclass
class SimStore:
    """A simulated node's durable store (`pubsub.kernel.executor.Store`): what commits
    wrote, and what waits for the next; `kick` asks its simulation for a commit."""

    kick: Callable[[], None]
    written: dict[Topic, dict[bytes, Arrival]] = field(default_factory=dict)
    unwritten: list[NewRow] = field(default_factory=list)
    waiting: list[Callable[[bool, LocalSeqs], None]] = field(default_factory=list)
    commit_pending: bool = False
    commits: int = 0
    local: Counter[Topic] = field(default_factory=Counter)

    def holds(self, topic: Topic, key: bytes) -> bool:
        return key in self.written.get(topic, {})

    def add(self, rows: Sequence[NewRow]) -> None:
        self.unwritten.extend(rows)
        self.kick()

    def after(self, action: Callable[[bool, LocalSeqs], None]) -> None:
        self.waiting.append(action)
        self.kick()

    def commit(self) -> list[NewRow]:
        """Write what waits and end the actions that waited for it; the rows written."""
        self.commit_pending = False
        rows, self.unwritten = self.unwritten, []
        waiting, self.waiting = self.waiting, []
        local_seqs: dict[tuple[Topic, bytes], int] = {}
        for row in rows:
            topic, key = row.topic, row.publication.key
            self.written.setdefault(topic, {})[key] = Arrival(row.publication, row.via, row.hops)
            self.local[topic] += 1
            local_seqs[(topic, key)] = self.local[topic]
        self.commits += 1
        for action in waiting:
            action(True, local_seqs)
        return rows


@dataclass
class InstantStore:
    """No durability modelled: every commit ends at once (with `keep`, its rows are kept)."""

    keep: list[NewRow] | None = None

    def add(self, rows: Sequence[NewRow]) -> None:
        if self.keep is not None:
            self.keep.extend(rows)

    def after(self, action: Callable[[bool, LocalSeqs], None]) -> None:
        action(True, {})


class _SimClock:
    """The executors' clock (`pubsub.kernel.executor.Clock`): the virtual one; what is for
    "soon" runs when the call that asked for it is done (`Simulation._dispatch`)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def now(self) -> float:
        return self.sim.events.now

    def soon(self, action: Callable[[], None]) -> None:
        self.sim._soon.append(action)

    def later(self, delay: float, action: Callable[[], None]) -> None:
        return None  # the simulator holds nothing back


@dataclass
class _SimOutlet:
    """Where one simulated process's answers and later sends go."""

    sim: Simulation
    ref: Ref

    def answer(self, client: int, msg: Message) -> None:
        self.sim.answers.append((self.sim.now, self.ref, Answer(client, msg)))

    def deliver(self, sends: list[Send]) -> None:
        self.sim._send(self.ref, sends)


@dataclass
class Traffic:
    """Message counters, by kind and by who sent them."""

    by_kind: Counter[str] = field(default_factory=Counter)
    from_supervisor: Counter[str] = field(default_factory=Counter)
    to_supervisor: Counter[str] = field(default_factory=Counter)

    def total(self) -> int:
        return sum(self.by_kind.values())


class Simulation:
    """Supervisor + subscribers on a virtual clock."""

    def __init__(
        self,
        seed: int,
        *,
        interval: float = 1.0,
        jitter: float = 0.1,
        delay: tuple[float, float] = (0.01, 0.5),
        config_budget: int = 1,
        detect_delay: float = 1.0,
        probe_timeout: float = 3.0,
        flooding: bool = True,
        dissemination: str = "flood",
        commit_delay: float | None = None,
        trace: bool = False,
        keep_rows: bool = False,
        overlay: str = registry.DEFAULT_OVERLAY,
        overlay_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.interval = interval
        self.jitter = jitter
        self.delay = delay
        self.detect_delay = detect_delay
        self.flooding = flooding
        self.dissemination = dissemination
        self.events = EventQueue()
        #: The overlay simulated (`pubsub.kernel.contracts.Overlay`), whose cores these are.
        self.overlay = registry.overlay(overlay)
        self.supervisor: Any = self.overlay.supervisor_core(
            SUPERVISOR,
            config_budget=config_budget,
            rng=random.Random(self.rng.getrandbits(64)),
            probe_timeout=probe_timeout,
            journal=False,
            **(overlay_options or {}),
        )
        self.nodes: dict[Ref, Any] = {}
        self.crashed: set[Ref] = set()
        self.traffic = Traffic()
        self.drop_rate = 0.0
        self.commit_delay = commit_delay
        #: Simulated stores, by node (only with `commit_delay`).
        self.stores: dict[Ref, SimStore] = {}
        #: (time, node, answer) of every answer a node gave a client.
        self.answers: list[tuple[float, Ref, Answer]] = []
        #: With `trace`: (time, "send" | "commit", node, detail) in the order they happened.
        self.log: list[tuple[float, str, Ref, Any]] | None = [] if trace else None
        #: With `keep_rows` (and no `commit_delay`): the rows each node's Persists carried.
        self.rows: dict[Ref, list[NewRow]] | None = {} if keep_rows else None
        self._pending_unreachable: set[tuple[Ref, Ref]] = set()
        #: Every process's executor (`pubsub.kernel.executor`), the supervisor's included.
        self._clock = _SimClock(self)
        self._soon: deque[Callable[[], None]] = deque()
        self.executors: dict[Ref, Executor] = {
            SUPERVISOR: Executor(self.supervisor, InstantStore(), self._clock, _SimOutlet(self, SUPERVISOR))
        }
        self._schedule(self._next_tick(), _TIMER, SUPERVISOR, None)

    @property
    def now(self) -> float:
        """The virtual clock, seconds."""
        return self.events.now

    # ------------------------------------------------------------------ population
    def add_node(self, ref: str | None = None) -> Ref:
        """A new subscriber process (not yet subscribed to anything)."""
        name = Ref(ref or f"n{len(self.nodes) + len(self.crashed)}")
        self.nodes[name] = self.overlay.node_core(
            name,
            SUPERVISOR,
            rng=random.Random(self.rng.getrandbits(64)),
            flooding=self.flooding,
            dissemination=self.dissemination,
        )
        store: SimStore | InstantStore
        if self.commit_delay is not None:
            store = self.stores[name] = SimStore(kick=lambda: self._commit_soon(name))
        else:
            keep = None if self.rows is None else self.rows.setdefault(name, [])
            store = InstantStore(keep)
        self.executors[name] = Executor(self.nodes[name], store, self._clock, _SimOutlet(self, name))
        self._schedule(self.now + self.rng.uniform(0, self.interval), _TIMER, name, None)
        return name

    def join(self, ref: Ref, topic: Topic) -> None:
        self._dispatch(ref, self.nodes[ref].join(topic))

    def publish(self, ref: Ref, topic: Topic, payload: bytes) -> None:
        """Node `ref` issues a publication on `topic` (NodeCore.publish)."""
        self._dispatch(ref, self.nodes[ref].publish(topic, payload))

    def carry_out(self, ref: Ref, effects: Sequence[Effect]) -> None:
        """Carry out, now and together, effects that node `ref`'s core returned to a test
        that stepped it by hand (e.g. the publications of one commit)."""
        self._dispatch(ref, effects)

    def publish_request(
        self, ref: Ref, topic: Topic, payload: bytes, *, client: int = 1, request_id: int = 1, msg_id: str = ""
    ) -> None:
        """A client (token `client`) asks node `ref` to publish, as over the client port
        (with the client's message id `msg_id`, if any): the node acknowledges once
        durable, or hands the publication over to a member when it is not a configured one
        (`NodeCore.publish_request`); answers land in `answers`."""
        request = PublishRequest(topic, Payload(payload), request_id, MsgId(msg_id))
        published_ms = int(self.now * 1000)
        self._dispatch(ref, self.nodes[ref].publish_request(client, request, published_ms, self.now))

    def take_rows(self, ref: Ref) -> list[NewRow]:
        """The rows node `ref`'s Persists carried since the last call (needs `keep_rows`):
        what it stored, in each publisher's order, with how it came and after how many hops."""
        if self.rows is None:
            raise ValueError("the simulation keeps no rows (keep_rows=False)")
        rows = self.rows.get(ref, [])
        taken = list(rows)
        rows.clear()
        return taken

    def leave(self, ref: Ref, topic: Topic) -> None:
        self._dispatch(ref, self.nodes[ref].leave(topic))

    def crash(self, ref: Ref) -> None:
        """Stop a node without warning; its address stays dead."""
        del self.nodes[ref]
        del self.executors[ref]
        self.crashed.add(ref)
        store = self.stores.get(ref)
        if store is not None:  # what was not written yet is lost with the process
            store.unwritten.clear()
            store.waiting.clear()

    def inject(self, dest: Ref, msg: Message, src: Ref = SUPERVISOR) -> None:
        """Put a message in flight (e.g. a corrupted one) as if `src` had sent it."""
        self._dispatch(src, [Send(dest, msg)])

    def in_flight(self) -> list[tuple[Ref, Ref, Message]]:
        """Messages sent but not yet delivered: (source, destination, message)."""
        return [(src, dest, msg) for dest, (src, msg) in self.events.pending(_DELIVER)]

    # ------------------------------------------------------------------ running
    def run_for(self, duration: float) -> None:
        self.run_until(self.now + duration)

    def run_until(self, deadline: float) -> None:
        events = self.events
        deliver, tick = self._deliver, self._tick
        for kind, (target, payload) in events.until(deadline):
            if kind == _DELIVER:
                deliver(target, payload)
            elif kind == _TIMER:
                tick(target)
            elif kind == _COMMIT:
                self._commit(target)
            else:
                self._unreachable(target, payload)
        events.now = max(events.now, deadline)

    def run_intervals_until(
        self, predicate: Callable[[], bool], max_intervals: int
    ) -> int | None:
        """Run interval by interval until `predicate()` holds; the count, or None on timeout."""
        for done in range(max_intervals + 1):
            if predicate():
                return done
            self.run_for(self.interval)
        return None

    # ------------------------------------------------------------------ internals
    def _next_tick(self) -> float:
        spread = self.interval * self.jitter
        return self.now + self.interval + self.rng.uniform(-spread, spread)

    def _tick(self, ref: Ref) -> None:
        now = self.events.now
        if ref == SUPERVISOR:
            self._dispatch(SUPERVISOR, self.supervisor.timeout(now))
        elif (node := self.nodes.get(ref)) is not None:
            self._dispatch(ref, node.timeout(now))
        else:
            return  # crashed: its timer dies with it
        self._schedule(self._next_tick(), _TIMER, ref, None)

    def _deliver(self, dest: Ref, payload: tuple[Ref, Message]) -> None:
        src, msg = payload
        if dest == SUPERVISOR:
            self._dispatch(SUPERVISOR, self.supervisor.handle(msg, self.events.now))
            return
        node = self.nodes.get(dest)
        if node is not None:
            self._dispatch(dest, node.handle(msg, self.events.now))
        elif (src, dest) not in self._pending_unreachable and self._alive(src):
            self._pending_unreachable.add((src, dest))
            self._schedule(self.now + self.detect_delay, _UNREACHABLE, src, dest)

    def _unreachable(self, src: Ref, dest: Ref) -> None:
        self._pending_unreachable.discard((src, dest))
        if src == SUPERVISOR:
            self._dispatch(SUPERVISOR, self.supervisor.peer_unreachable(dest, self.now))
        elif src in self.nodes:
            self._dispatch(src, self.nodes[src].peer_unreachable(dest, self.now))

    def _alive(self, ref: Ref) -> bool:
        """Whether `ref` is the supervisor or a live node (asked once per message to a
        crashed node, so no set of every live node is built for it)."""
        return ref == SUPERVISOR or ref in self.nodes

    def _dispatch(self, src: Ref, effects: Sequence[Effect]) -> None:
        """Carry out what `src`'s core returned (its executor), then what that released for
        the end of the pass."""
        executor = self.executors.get(src)
        if executor is None:  # a crashed process, or a test injecting as a stranger
            self._send(src, [e for e in effects if isinstance(e, Send)])
        else:
            self._send(src, executor.run(effects))
        self._end_of_pass()

    def _send(self, src: Ref, sends: Sequence[Send]) -> None:
        """Put `src`'s sends in flight, each with its own random delay (unless dropped)."""
        low, high = self.delay
        width = high - low
        traffic = self.traffic
        log = self.log
        schedule = self.events.schedule
        random = self.rng.random
        for dest, msg in sends:
            if log is not None:
                log.append((self.now, "send", src, (dest, msg)))
            kind = msg.kind
            traffic.by_kind[kind] += 1
            if src == SUPERVISOR:
                traffic.from_supervisor[kind] += 1
            elif dest == SUPERVISOR:
                traffic.to_supervisor[kind] += 1
            if self.drop_rate and random() < self.drop_rate:
                continue
            # = self.rng.uniform(low, high), the same draw
            schedule(self.now + (low + width * random()), _DELIVER, (dest, (src, msg)))

    def _commit_soon(self, ref: Ref) -> None:
        store = self.stores[ref]
        if not store.commit_pending:
            store.commit_pending = True
            assert self.commit_delay is not None
            self._schedule(self.now + self.commit_delay, _COMMIT, ref, None)

    def _commit(self, ref: Ref) -> None:
        """One group commit: write what waits, then end what waited for it."""
        store = self.stores.get(ref)
        if store is None or ref not in self.nodes:
            return  # crashed before its commit: nothing was written
        if self.log is not None:
            self.log.append((self.now, "commit", ref, [(r.topic, r.publication.key) for r in store.unwritten]))
        store.commit()
        self._end_of_pass()

    def _end_of_pass(self) -> None:
        """Run what the executors asked to have done at the end of this pass, in order
        (what that asks for in turn included)."""
        while self._soon:
            self._soon.popleft()()

    def _schedule(self, when: float, kind: int, target: Ref, payload: Any) -> None:
        self.events.schedule(when, kind, (target, payload))
