"""One OMen node's protocol (paper 003 §4-§5): its own descriptor and TCO neighbours, the
local view of its predecessors (Alg. 2, 4), T-Man and peer sampling (Alg. 3), the churn
queue (Alg. 5-6) and, as coordinator, the repair of one event at a time:

1. **fetch**: ask every node of the shadow set -- S = B(v') ∪ N(v') for a leave,
   S = B(v') ∪ {v'} for a join (§3.2) -- for its current descriptor (`OmenShadowRequest`);
   a node that does not answer within `fetch_timeout` Timeouts is left out of S (it is
   presumed gone; its own churn event will follow);
2. **repair**: Alg. 1 on what the answers say (`pubsub.omen.repair`, induced connectivity
   unless the setting says global, which needs a global view and so is the simulator's);
3. **edges**: send each endpoint its new edges, and for a leave every shadow node the
   departed node to drop (`OmenEdges`), again on every Timeout until it acknowledges, at
   most `edge_tries` times;
4. **done**: tell the L-successor range (`OmenDone`, notifySuccRange) and drop the event.

Beyond the paper (INFERRED): a node whose neighbours change sends its new descriptor at once
to its L successors, the nodes that keep N(it) -- T-Man alone would refresh N(v') only at the
next exchange, and a node that left before it would leave behind the edges its coordinator
did not know (a joiner that leaves soon after its join repair, measured in the simulator).
The message is a T-Man buffer marked as an answer, so it is not answered.

Input is one entry, `handle(message, now)`, plus `timeout(now)`; output is a list
of `Send` effects.  `now` counts Timeouts.  No I/O.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pubsub.kernel.message import Message, Ref, Send
from pubsub.omen.churn import DEFAULT_READY_TIMEOUT, DEFAULT_STANDBY_TIMEOUT, ChurnEvent, ChurnQueue
from pubsub.omen.circle import Circle, hashed
from pubsub.omen.messages import (
    Descriptors,
    OmenChurn,
    OmenDone,
    OmenEdges,
    OmenEdgesAck,
    OmenGossip,
    OmenMembership,
    OmenShadowAnswer,
    OmenShadowRequest,
    OmenShuffle,
    Refs,
)
from pubsub.omen.repair import CONNECTIVITY, induced_overlay, repair_tco_on_churn
from pubsub.omen.sampling import DEFAULT_SIZE, PeerSampler
from pubsub.omen.tman import DEFAULT_T_WAIT, TMan
from pubsub.omen.views import DEFAULT_LAMBDA, METHODS, Descriptor, LocalView
from pubsub.topicgraph.graph import Node, Topic, TopicOverlay, edge
from pubsub.topicgraph.lowoda import DEFAULT_RHO

#: L, the resilience factor (paper 003 §3.3; INFERRED default).
DEFAULT_L = 2
DEFAULT_FETCH_TIMEOUT = 10
DEFAULT_EDGE_TRIES = 5
#: Shadow requests remembered (an edge message must follow one).
ASKED_REMEMBERED = 1024


@dataclass(frozen=True)
class Settings:
    """A node's OMen settings (the supervisor gives every node the same)."""

    resilience: int = DEFAULT_L
    coverage: int = DEFAULT_LAMBDA
    t_wait: int = DEFAULT_T_WAIT
    rho: float = DEFAULT_RHO
    connectivity: str = "induced"
    standby_timeout: int = DEFAULT_STANDBY_TIMEOUT
    ready_timeout: int = DEFAULT_READY_TIMEOUT
    fetch_timeout: int = DEFAULT_FETCH_TIMEOUT
    edge_tries: int = DEFAULT_EDGE_TRIES
    method: str = "primal-dual"
    sample_size: int = DEFAULT_SIZE

    def __post_init__(self) -> None:
        if self.resilience < 1 or self.coverage < 1 or self.t_wait < 1 or self.sample_size < 2 or self.rho <= 0:
            raise ValueError(
                f"omen needs L >= 1, λ >= 1, T_wait >= 1, a peer sample of at least 2 and ρ > 0, not L "
                f"{self.resilience}, λ {self.coverage}, T_wait {self.t_wait}, sample {self.sample_size}, ρ {self.rho}"
            )
        if self.connectivity not in CONNECTIVITY or self.method not in METHODS:
            raise ValueError(f"connectivity is one of {CONNECTIVITY}, the backup method one of {METHODS}")


def settings_fields(settings: Settings) -> dict[str, Any]:
    """The settings as `OmenMembership` carries them to every node."""
    return {
        "resilience": settings.resilience, "coverage": settings.coverage, "t_wait": settings.t_wait,
        "sample_size": settings.sample_size, "rho_permille": round(settings.rho * 1000), "method": settings.method,
    }


def settings_of(msg: OmenMembership) -> Settings:
    """What a node runs, from its membership."""
    return Settings(
        resilience=msg.resilience, coverage=msg.coverage, t_wait=msg.t_wait, sample_size=msg.sample_size,
        rho=msg.rho_permille / 1000, method=msg.method,
    )


@dataclass
class Repairing:
    """The coordinator's one repair in progress."""

    event: ChurnEvent
    shadow: list[Node]
    asked_at: int
    answers: dict[Node, Descriptor] = field(default_factory=dict)
    #: Phase "edges": endpoint -> (its OmenEdges, tries so far).
    unacked: dict[Node, tuple[OmenEdges, int]] = field(default_factory=dict)
    added: list[tuple[Node, Node]] = field(default_factory=list)
    phase: str = "fetch"
    #: Whether the view of the event's node was ready when the repair began.
    ready: bool = True


@dataclass
class Counters:
    repairs: int = 0
    edges_added: int = 0
    edges_dropped: int = 0
    left_out: int = 0
    given_up: int = 0
    #: Messages refused, by reason: edges from a node that never asked me for this event,
    #: an `omen_done` from a node not among my predecessors, a message of no kind I take.
    refused: int = 0
    refused_edges: int = 0
    refused_done: int = 0
    #: Edges a coordinator asked for to a peer that shares no topic with me (the edge
    #: would carry nothing): refused one by one, the rest of the message taken.
    refused_edge_topics: int = 0
    #: The longest an event waited in exeQ before its repair began (Timeouts).
    longest_wait: int = 0


class OmenNode:
    """One node's OMen state; `me` is its reference."""

    def __init__(
        self,
        me: Ref,
        topics: frozenset[Topic],
        settings: Settings,
        rng: random.Random,
        position: Callable[[Node], int] = hashed,
        global_overlay: Callable[[], TopicOverlay] | None = None,
        global_candidates: Callable[[], list[Descriptor]] | None = None,
    ) -> None:
        self.me = me
        self.settings = settings
        self.rng = rng
        self.position = position
        #: The whole overlay, for ``global`` connectivity (the simulator's; OMen-G).
        self.global_overlay = global_overlay
        #: Every live node's descriptor, for OMen-G's global view (the simulator's).
        self.global_candidates = global_candidates
        self.topics = frozenset(topics)
        self.neighbours: set[Node] = set()
        self.version = 0
        self.preds: list[Node] = []
        #: Former predecessors whose entries are kept until their event is handled, or
        #: until the deadline (a Timeout count) passes.
        self.departed: dict[Node, int] = {}
        self.succs: list[Node] = []
        self.view = LocalView(self.descriptor(), settings.coverage, settings.method)
        self.sampler = PeerSampler(me, settings.sample_size, max(1, settings.sample_size // 2))
        self.tman = TMan(self.view, self.sampler, settings.t_wait)
        self.queue = ChurnQueue(settings.standby_timeout, settings.ready_timeout)
        self.repairing: Repairing | None = None
        self.counters = Counters()
        self._shuffled: list[Descriptor] = []
        #: Peers' topics and the version of the descriptor they came from.
        self.peer_topics: dict[Node, frozenset[Topic]] = {}
        self.peer_versions: dict[Node, int] = {}
        #: (coordinator, event) pairs I answered a shadow request of, newest last.
        self.asked: dict[tuple[Node, str], None] = {}
        #: Ready-timeout overruns are `queue.unready`; the largest predecessor count held.
        self.most_views_held = 0

    def configure(self, settings: Settings) -> None:
        """The supervisor's settings (every node runs the same)."""
        if settings == self.settings:
            return
        self.settings = settings
        self.view.coverage_factor, self.view.method = settings.coverage, settings.method
        self.tman.t_wait = settings.t_wait
        self.sampler.size, self.sampler.length = settings.sample_size, max(1, settings.sample_size // 2)
        self.queue.standby_timeout, self.queue.ready_timeout = settings.standby_timeout, settings.ready_timeout

    # ------------------------------------------------------------------ own state
    def descriptor(self) -> Descriptor:
        return Descriptor(self.me, self.topics, frozenset(self.neighbours), self.version)

    def _changed(self) -> None:
        self.version += 1
        self.view.me = self.descriptor()

    def in_pred_range(self, node: Node, count: int | None = None) -> bool:
        """isInPredRange (Alg. 6): would `node` be among my `count` (default L) nearest
        predecessors, on the circle of me and the predecessors I was told?"""
        wanted = self.settings.resilience if count is None else count
        circle = Circle([self.me, *self.preds, node], self.position)
        return node != self.me and node in circle.predecessors(self.me, wanted)

    def is_coordinator(self, node: Node) -> bool:
        """isCoordinator (Alg. 6): am I `node`'s immediate successor?"""
        return self.in_pred_range(node, 1)

    def coordinator_of(self, node: Node) -> Node | None:
        """`node`'s immediate successor among the nodes I know on the circle (me and my
        predecessors): whom I take for the coordinator of its event."""
        circle = Circle([self.me, *self.preds], self.position)
        return circle.coordinator(node)

    # ------------------------------------------------------------------ input
    def handle(self, msg: Message, now: int) -> list[Send]:
        """One message; `now` counts Timeouts.  A node's messages name their sender."""
        sender: Node = str(getattr(msg, "sender", None) or getattr(msg, "ref", ""))
        if isinstance(msg, OmenMembership):
            return self._membership(list(msg.preds), list(msg.succs), now)
        if isinstance(msg, OmenChurn):
            event = ChurnEvent(msg.id, msg.change, msg.node, frozenset(msg.topics))
            coordinator = self.coordinator_of(msg.node)
            self.queue.handle(event, now, coordinator, self.me)
            self._keep()
            if event.kind == "join" and event.node != self.me and event.node in self.view.preds:
                # the joiner's backups from the candidates its event brings (and the view)
                joiner = Descriptor(event.node, event.topics, frozenset(), -1)
                self.view.select_view([joiner, *msg.candidates], self.rng)
            return self._work(now)
        if isinstance(msg, OmenGossip):
            buffer = Descriptors(tuple(self.tman.buffer()))
            out = [] if msg.reply else [Send(Ref(sender), OmenGossip(self.me, buffer, True))]
            self._learn(msg.descriptors)
            extra = self.global_candidates() if self.global_candidates is not None else []
            self.tman.on_buffer([*msg.descriptors, *extra], self.rng)
            self._note_views()
            return out
        if isinstance(msg, OmenShuffle):
            return self._shuffle(sender, msg)
        if isinstance(msg, OmenShadowRequest):
            self.asked[(sender, msg.event)] = None
            while len(self.asked) > ASKED_REMEMBERED:
                del self.asked[next(iter(self.asked))]
            return [Send(Ref(sender), OmenShadowAnswer(self.me, msg.event, Descriptors((self.descriptor(),))))]
        if isinstance(msg, OmenShadowAnswer):
            r = self.repairing
            if r is not None and r.phase == "fetch" and msg.event == r.event.id and sender in r.shadow:
                for d in msg.descriptors[:1]:
                    if d.node == sender:
                        r.answers[sender] = d
                return self._work(now)
            return []
        if isinstance(msg, OmenEdges):
            return self._edges(sender, msg)
        if isinstance(msg, OmenEdgesAck):
            r = self.repairing
            if r is not None and msg.event == r.event.id and msg.ref == sender:
                r.unacked.pop(sender, None)
                return self._work(now)
            return []
        if isinstance(msg, OmenDone):
            if sender in self.preds:
                self._handled(msg.event)
            else:
                self.refused_message("done")
            return []
        self.refused_message()
        return []

    def timeout(self, now: int) -> list[Send]:
        out: list[Send] = []
        gossip = self.tman.on_timeout(self.rng)
        if gossip is not None:
            peer, buffer = gossip
            out.append(Send(Ref(peer), OmenGossip(self.me, Descriptors(tuple(buffer)))))
        if now % self.settings.t_wait == 0:
            shuffle = self.sampler.start_shuffle(self.descriptor(), self.rng)
            if shuffle is not None:
                peer, sent = shuffle
                self._shuffled = sent
                out.append(Send(Ref(peer), OmenShuffle(self.me, Descriptors(tuple(sent)))))
        self.queue.expire_standby(now, self.in_pred_range)
        expired = [n for n, deadline in self.departed.items() if now >= deadline]
        if expired:
            for node in expired:
                del self.departed[node]
            self._keep()
        r = self.repairing
        if r is not None and r.phase == "edges":
            for node, (msg, tries) in sorted(r.unacked.items()):
                if tries >= self.settings.edge_tries:
                    del r.unacked[node]
                    self.counters.given_up += 1
                else:
                    r.unacked[node] = (msg, tries + 1)
                    out.append(Send(Ref(node), msg))
        return out + self._work(now)

    # ------------------------------------------------------------------ membership and views
    def _membership(self, preds: list[Node], succs: list[Node], now: int) -> list[Send]:
        gone = set(self.preds) - set(preds)
        self.preds, self.succs = preds, succs
        for node in gone:
            self.departed[node] = now + self.settings.standby_timeout
        for node in set(preds):
            self.departed.pop(node, None)
        self.sampler.seed(Descriptor(n, frozenset(), frozenset(), -1) for n in [*preds, *succs])
        self._keep()
        return []

    def _keep(self) -> None:
        """View entries for my L predecessors, every node of a queued event, and former
        predecessors whose event may still come (the supervisor's membership and its churn
        event can arrive in either order); the rest are cleaned (gcChurnEvent, §5)."""
        self.view.keep([*self.preds, *sorted(self.queue.pending_nodes() | set(self.departed))])
        self._note_views()

    def _note_views(self) -> None:
        self.most_views_held = max(self.most_views_held, self.view.held())

    def _shuffle(self, sender: Node, msg: OmenShuffle) -> list[Send]:
        arrived = list(msg.descriptors)
        if msg.reply:
            self.sampler.merge(arrived, self._shuffled)
            self._shuffled = []
            return []
        answer = self.sampler.answer(arrived, self.rng)
        self.sampler.merge(arrived, answer)
        return [Send(Ref(sender), OmenShuffle(self.me, Descriptors(tuple(answer)), True))]

    # ------------------------------------------------------------------ edges from a coordinator
    def _edges(self, sender: Node, msg: OmenEdges) -> list[Send]:
        """Edges from a coordinator: only one that asked me for my descriptor for this
        event is one (a coordinator always fetches its shadow set first); anything else is
        refused and counted."""
        if (sender, msg.event) not in self.asked:
            self.refused_message("edges")
            return []
        return [*self._apply(msg), Send(Ref(sender), OmenEdgesAck(msg.event, self.me))]

    def refused_message(self, reason: Literal["edges", "done"] | None = None) -> None:
        """Count a refused message (`Counters`): in all, and by its reason if any."""
        self.counters.refused += 1
        if reason == "edges":
            self.counters.refused_edges += 1
        elif reason == "done":
            self.counters.refused_done += 1

    def _apply(self, msg: OmenEdges) -> list[Send]:
        """Take a coordinator's edges in; if my neighbours changed, my new descriptor goes
        to my L successors, the nodes that keep N(me) (INFERRED, see the module docstring)."""
        before = set(self.neighbours)
        self._learn(msg.peers)
        topics_of = {d.node: d.topics for d in msg.peers}
        carrying = {n for n in msg.add if n != self.me and (n not in topics_of or topics_of[n] & self.topics)}
        self.counters.refused_edge_topics += len({n for n in msg.add if n != self.me} - carrying)
        self.neighbours |= carrying
        self.neighbours -= set(msg.drop)
        for node in msg.drop:
            self.sampler.drop(node)
        if self.neighbours == before:
            return []
        self.counters.edges_added += len(self.neighbours - before)
        self.counters.edges_dropped += len(before - self.neighbours)
        self._changed()
        fresh = OmenGossip(self.me, Descriptors((self.descriptor(),)), True)
        return [Send(Ref(n), fresh) for n in self.succs[: self.settings.resilience]]

    def _learn(self, descriptors: Iterable[Descriptor]) -> None:
        """Note the topics of peers (neighbours' topics say what each edge carries)."""
        for d in descriptors:
            held = self.peer_versions.get(d.node)
            if d.node != self.me and d.version >= 0 and (held is None or d.version >= held):
                self.peer_topics[d.node] = d.topics
                self.peer_versions[d.node] = d.version

    def shared_with(self, peer: Node) -> frozenset[Topic]:
        """The topics an edge to `peer` carries (all of mine while its topics are unknown)."""
        theirs = self.peer_topics.get(peer)
        return self.topics if theirs is None else self.topics & theirs

    def drop_neighbour(self, node: Node) -> list[Send]:
        """Forget the edge to a node that is gone; my new descriptor to my successors."""
        return self._apply(OmenEdges(self.me, "", Refs(()), Refs((Ref(node),))))

    def set_topics(self, topics: frozenset[Topic], drop_edges: bool = False) -> list[Send]:
        """The node is now in `topics` (it told its supervisor); with `drop_edges` -- it
        left a topic, which OMen handles as a leave and a join -- it holds no edge until
        the join's repair, and tells nobody: the leave's repair drops its edges at the
        other ends (a node leaving its last topic is gone from the circle as if crashed)."""
        self.topics = frozenset(topics)
        if drop_edges:
            # Leaving as 003 has it: the successors' views keep N(me) as it was, so that
            # the leave's coordinator tells every former neighbour to drop me (its shadow
            # set is B(me) and N(me)); my emptied descriptor would race that repair.
            self.neighbours.clear()
            self.view.me = self.descriptor()
            return []
        self._changed()
        fresh = OmenGossip(self.me, Descriptors((self.descriptor(),)), True)
        return [Send(Ref(n), fresh) for n in self.succs[: self.settings.resilience]]

    # ------------------------------------------------------------------ coordinating
    def _work(self, now: int) -> list[Send]:
        """Advance the repair in progress, or start the next one (processExeQ)."""
        r = self.repairing
        if r is None:
            event = self.queue.next_to_repair(now, lambda n: self.view.R.get(n, False), self.in_pred_range)
            if event is None:
                return []
            return self._start(event, now)
        if r.phase == "fetch":
            if set(r.answers) >= set(r.shadow) or now - r.asked_at >= self.settings.fetch_timeout:
                return self._mend(r)
            return []
        if not r.unacked:
            return self._finish(r, now)
        return []

    def _start(self, event: ChurnEvent, now: int) -> list[Send]:
        v = event.node
        self.counters.longest_wait = max(self.counters.longest_wait, now - self.queue.exe[event.id].localtime)
        shadow = set(self.view.B.get(v, []))
        shadow |= {v} if event.kind == "join" else set(self.view.N.get(v, frozenset()))
        if event.kind == "leave":
            shadow.discard(v)
        r = Repairing(event, sorted(shadow), now, ready=self.view.R.get(v, False))
        if self.me in shadow:
            r.answers[self.me] = self.descriptor()
        self.repairing = r
        asks = [Send(Ref(n), OmenShadowRequest(self.me, event.id)) for n in r.shadow if n != self.me]
        return asks + self._work(now)

    def _mend(self, r: Repairing) -> list[Send]:
        v = r.event.node
        answered = sorted(r.answers)
        silent = set(r.shadow) - set(answered)
        self.counters.left_out += len(silent)
        for node in silent:  # presumed gone: not a backup candidate any more
            self.view.known.pop(node, None)
            self.sampler.drop(node)
        topics = r.event.topics or self.view.known.get(v, Descriptor(v, frozenset())).topics
        neighbours = {n: set(r.answers[n].neighbours) - {v} for n in answered}
        if self.settings.connectivity == "global" and self.global_overlay is not None:
            known = self.global_overlay()
            if v in known.topics and r.event.kind == "leave":
                known.remove_node(v)
        else:
            known = induced_overlay({n: r.answers[n].topics for n in answered}, neighbours)
        mended = repair_tco_on_churn(
            known, answered, topics, connectivity=self.settings.connectivity, rho=self.settings.rho
        )
        r.added = list(mended.added)
        ends: dict[Node, set[Node]] = {}
        for a, b in r.added:
            ends.setdefault(a, set()).add(b)
            ends.setdefault(b, set()).add(a)
        drop = Refs((Ref(v),)) if r.event.kind == "leave" else Refs(())
        # the departed node's neighbours drop it whether or not they answered in time
        targets = set(ends) | (set(r.shadow) if drop else set())
        r.phase = "edges"
        out = []
        for node in sorted(targets):
            partners = sorted(ends.get(node, ()))
            msg = OmenEdges(
                self.me, r.event.id, Refs(tuple(Ref(n) for n in partners)), drop,
                Descriptors(tuple(r.answers[n] for n in partners if n in r.answers)),
            )
            if node == self.me:
                out += self._apply(msg)
            else:
                r.unacked[node] = (msg, 1)
                out.append(Send(Ref(node), msg))
        self.counters.repairs += 1
        return out

    def _handled(self, event_id: str) -> None:
        """Event `event_id` is repaired: drop it and what was kept for its node."""
        node = self.queue.done(event_id)
        if node is not None and node not in self.queue.pending_nodes():
            self.departed.pop(node, None)
        self._keep()

    def _finish(self, r: Repairing, now: int) -> list[Send]:
        """notifySuccRange -- unless the view was not ready: then the other successors' own
        timers run out and they repair it too, from their views (INFERRED).  After a join the
        joiner gets the descriptors this node holds (its predecessors' among them), so that
        it is ready to coordinate for them at once (paper 003 §5's local view stabilization)."""
        self.repairing = None
        self._handled(r.event.id)
        out: list[Send] = []
        if r.ready:
            out += [Send(Ref(n), OmenDone(r.event.id, self.me)) for n in self.succs[: self.settings.resilience]]
        if r.event.kind == "join" and r.event.node != self.me:
            held = Descriptors(tuple(self.view.get_view()))
            out.append(Send(Ref(r.event.node), OmenGossip(self.me, held, True)))
        return out + self._work(now)

    # ------------------------------------------------------------------ views for tests and status
    def edges(self) -> set[tuple[Node, Node]]:
        return {edge(self.me, n) for n in self.neighbours}
