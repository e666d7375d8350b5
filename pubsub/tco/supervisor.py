"""The `tco` overlay's supervisor core: `TcoSupervisor`, hosted by the supervisor daemon
(`pubsub.supervisor.app`) as the skip ring's and the clique's supervisor cores are.

It keeps the whole overlay (paper 001, Struct 5): each node's topics, the edges, and each
node's backups and primaries, and repairs it with `ShadowDynAlg` (`pubsub.tco.dynamic`):

* a node new to the overlay that names its topics (`TcoSubscribe`) is a join (Alg. 9-10);
* a node that names no topic any more is a leave (Alg. 7-8), and so is a node found dead
  -- reported by a peer (`TcoSuspect`) or by our own runtime, probed (`TcoPing`) and silent
  for `probe_timeout` seconds; it is told it is in no topic (and so is any node the record
  does not hold that speaks), so that one found dead wrongly names its topics again;
* a node that names other topics is a topic change (`ShadowDynAlg.change`: an extension
  the paper does not have).

Every node whose table a repair changed gets it at once (`TcoTable`); besides,
`config_budget` tables per Timeout go out in round robin over the nodes, so that a lost
table is repaired within n / budget Timeouts and the supervisor's load per Timeout is
bounded (as the skip ring's supervisor sends SetData, paper 000 Alg. 3).  A leave is
granted with a table of no topics, repeated to whoever asks again.

Every `audit_every` Timeouts it audits its own record (self-stabilization from a record
that is wrong): edges between nodes sharing no topic are removed, a node whose backups are
not nodes, share no topic or repeat gets them rebuilt, and a topic whose subscribers are
split is mended with `construct_low_edges` over the pairs of its subscribers.  A record
that is right is left alone, so without churn nothing changes.

The record is stored in the daemon's member table as rows (topic, label, ref), whose label
says what the row holds (`member_key` checks it):

    (t, "m v", v)       v subscribes to t
    (t, "e a b", a)     the edge {a, b}, a < b, under the smallest topic they share
    (t, "b v u", v)     u is one of v's backups, under v's smallest topic

The rows are a function of the record, so what `drain_changes` reports is their
difference for the nodes a call touched (`TopicOverlay.touched`, `BackupTable.touched`);
a supervisor restarted on its store holds the same record and changes no edge.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Iterable
from itertools import combinations
from typing import Any

from pubsub.kernel.contracts import FaultRefused, Measure
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.kernel.wire import WireError, validate_ref
from pubsub.publications.messages import GetMember, MemberIs
from pubsub.publications.probes import Probes, choose_member
from pubsub.publications.retention import RetentionTable
from pubsub.tco.backups import DEFAULT_LAMBDA, METHODS
from pubsub.tco.dynamic import Repair, ShadowDynAlg
from pubsub.tco.messages import (
    Neighbourhood,
    Peers,
    TcoPing,
    TcoPong,
    TcoSubscribe,
    TcoSuspect,
    TcoTable,
    TopicSet,
    table_digest,
)
from pubsub.topicgraph.graph import Node, TopicOverlay
from pubsub.topicgraph.lowoda import DEFAULT_RHO, construct_low_edges

#: Timeouts between two audits of the record.
DEFAULT_AUDIT_EVERY = 10
#: Repairs kept for the status (the newest last).
RECENT_REPAIRS = 32

Row = tuple[str, str, str]
NO_TABLE = TcoTable(None, Neighbourhood(()), Peers(()), Peers(()))


def member_key(label: str) -> str:
    """A stored label, checked (ValueError if malformed): "m v", "e a b" or "b v u"."""
    if not isinstance(label, str):
        raise ValueError("a tco row label is a string")
    kind, _, rest = label.partition(" ")
    refs = rest.split(" ") if rest else []
    wanted = {"m": 1, "e": 2, "b": 2}.get(kind)
    if wanted is None or len(refs) != wanted:
        raise ValueError(f"a tco row label is 'm v', 'e a b' or 'b v u', not {label[:80]!r}")
    try:
        checked = [validate_ref(r) for r in refs]
    except WireError as exc:
        raise ValueError(f"a tco row label names a bad reference: {exc}") from None
    if kind == "e" and not checked[0] < checked[1]:
        raise ValueError(f"an edge row names its endpoints in order, not {label[:80]!r}")
    if kind == "b" and checked[0] == checked[1]:
        raise ValueError(f"a backup row names a node as its own backup: {label[:80]!r}")
    return label


class TcoSupervisor:
    """The whole topic-connected overlay and its repairs (module docstring)."""

    def __init__(
        self,
        ref: Ref,
        *,
        rng: random.Random,
        config_budget: int = 1,
        probe_timeout: float = 2.0,
        journal: bool = True,
        retention: RetentionTable | None = None,
        rho: float = DEFAULT_RHO,
        coverage: int = DEFAULT_LAMBDA,
        method: str = "primal-dual",
        audit_every: int = DEFAULT_AUDIT_EVERY,
    ) -> None:
        if config_budget < 1 or probe_timeout <= 0 or audit_every < 1:
            raise ValueError("config_budget and audit_every must be at least 1 and probe_timeout positive")
        if method not in METHODS:
            raise ValueError(f"no backup method {method!r}; choose one of {', '.join(METHODS)}")
        self.ref = ref
        self.rng = rng
        self.config_budget = config_budget
        self.probe_timeout = probe_timeout
        self.audit_every = audit_every
        self.overlay = TopicOverlay()
        #: The repairs (ρ, λ and the backup method are checked here: ValueError).
        self.dynamic = ShadowDynAlg(self.overlay, rng=rng, coverage=coverage, method=method, rho=rho)
        self.backups = self.dynamic.table
        #: The nodes under suspicion (`pubsub.publications.probes`).
        self.probes = Probes(probe_timeout)
        self._turn = 0
        self._timeouts = 0
        self.retention = retention if retention is not None else RetentionTable()
        self._journal = journal
        #: node -> the rows stored for it (`_rows`), and the changes not drained yet.
        self._rows_of: dict[Node, set[Row]] = {}
        self._changes: list[tuple[str, str, str | None]] = []
        #: node -> the table last sent to it.
        self._sent: dict[Node, TcoTable] = {}
        self._out: list[Send] = []
        #: The newest repairs, for the status; and those not yet drained for the events.
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_REPAIRS)
        self._repairs: deque[dict[str, Any]] = deque(maxlen=10 * RECENT_REPAIRS)
        #: joins, leaves, changes, crashes_detected, suspects, edges_added, edges_removed,
        #: repairs_widened, tables_sent, audits, audit_repairs, refused_subscribes, stale_tables
        #: (a reminder whose table differs from the record's).
        self.counters: Counter[str] = Counter()

    @property
    def config_counters(self) -> dict[str, int]:
        """Configuration traffic, for the metrics: configurations_sent (tables sent)."""
        return {"configurations_sent": self.counters["tables_sent"]}

    # ------------------------------------------------------------------ the protocol
    def handle(self, msg: Message, now: float) -> list[Send]:
        if isinstance(msg, TcoSubscribe):
            self.probes.alive(msg.ref)  # it speaks: it is alive
            self._subscribe(msg.ref, frozenset(msg.topics), msg.table if msg.refresh else None)
        elif isinstance(msg, TcoSuspect):
            self._suspect(msg.suspect, now)
            self._unknown(msg.ref)
        elif isinstance(msg, TcoPong):
            self.probes.answered(msg.ref, msg.nonce)
            self._unknown(msg.ref)
        elif isinstance(msg, GetMember):
            self._get_member(msg.topic, msg.ref, msg.nonce, msg.avoid)
        return self._settle()

    def timeout(self, now: float) -> list[Send]:
        """Leave repairs for the nodes whose probe expired; an audit every `audit_every`
        Timeouts; `config_budget` tables in round robin."""
        for ref in self.probes.expired(now):
            if ref in self.overlay.topics:
                self.counters["crashes_detected"] += 1
                repair = self.dynamic.leave(ref)
                repair.kind = "crash"
                self._repaired(repair)
                self._send(ref, NO_TABLE)  # should it live after all, it asks again
        self._timeouts += 1
        if self._timeouts % self.audit_every == 0:
            self.audit()
        nodes = sorted(self.overlay.topics)
        if nodes:
            start = self._turn % len(nodes)
            for i in range(min(self.config_budget, len(nodes))):
                self._send_table(nodes[(start + i) % len(nodes)])
            self._turn = start + min(self.config_budget, len(nodes))
        return self._settle()

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        """Our own runtime could not reach `ref`: probe it like a reported suspect."""
        self._suspect(ref, now)
        return self._settle()

    # ------------------------------------------------------------------ membership and repairs
    def _subscribe(self, ref: Ref, topics: frozenset[str], reminder: int | None = None) -> None:
        """`reminder`: the digest of the table a reminding node holds (None: a request)."""
        known = ref in self.overlay.topics
        if reminder is not None and known and self.overlay.topics[ref] == topics:
            table = self.table(ref)
            if reminder == table_digest(table.topics or (), table.neighbours, table.backups, table.primaries):
                return  # the node holds what the record gives it: nothing to say
            self.counters["stale_tables"] += 1
        if not topics:
            if known:
                self.counters["leaves"] += 1
                self._repaired(self.dynamic.leave(ref))
            self._send(ref, NO_TABLE)  # the permission to leave (again, if asked again)
            self._sent.pop(ref, None)
            return
        if not known:
            self.counters["joins"] += 1
            self._repaired(self.dynamic.join(ref, topics))
        elif self.overlay.topics[ref] != topics:
            self.counters["changes"] += 1
            self._repaired(self.dynamic.change(ref, topics))
        self._send_table(ref)  # the answer, also when nothing changed (it lost its table)

    def _unknown(self, ref: Ref) -> None:
        """A node the record does not hold speaks (removed as crashed while it lived, or
        forgotten): tell it it is in no topic, so that it names its topics again."""
        if ref not in self.overlay.topics:
            self._send(ref, NO_TABLE)

    def _repaired(self, repair: Repair) -> None:
        self.counters["edges_added"] += len(repair.added)
        self.counters["edges_removed"] += len(repair.removed)
        self.counters["repairs_widened"] += repair.widened
        self._note({
            "repair": repair.kind, "node": repair.node, "shadow": len(repair.shadow),
            "added": len(repair.added), "removed": len(repair.removed), "widened": repair.widened,
        })

    def _note(self, repair: dict[str, Any]) -> None:
        self.recent.append(repair)
        self._repairs.append(repair)

    def drain_repairs(self) -> list[dict[str, Any]]:
        """The repairs since the last call (the ``repair`` events, docs/events.md): what
        kind (join, leave, change, audit), of which node, the shadow set's size, the
        edges added and removed, whether it widened."""
        out = list(self._repairs)
        self._repairs.clear()
        return out

    def measures(self) -> list[Measure]:
        """The overlay's own metrics (`pubsub.telemetry.metrics.overlay_families`, one
        `Measure` each): degrees, coverage, repairs."""
        overlay, counters = self.overlay, self.counters
        degrees = [overlay.degree(n) for n in overlay.topics]
        reachable_short = [
            n for n, short in self.backups.short.items()
            if n in overlay.topics and any(len(overlay.subscribers.get(t, ())) > 1 for t in short)
        ]
        out: list[Measure] = [
            ("pubsub_tco_nodes", "Nodes in the overlay.", "gauge", {}, len(degrees)),
            ("pubsub_tco_edges", "Edges of the overlay.", "gauge", {}, len(overlay.edges())),
            ("pubsub_tco_max_degree", "Largest number of neighbours of a node.", "gauge", {}, max(degrees, default=0)),
            ("pubsub_tco_mean_degree", "Mean number of neighbours per node.", "gauge", {},
             sum(degrees) / len(degrees) if degrees else 0.0),
            ("pubsub_tco_split_topics", "Topics whose subscribers the edges do not connect.", "gauge", {},
             len(overlay.split_topics())),
            ("pubsub_tco_coverage", "λ: how many times backups should cover each topic of a node.", "gauge", {},
             self.dynamic.coverage),
            ("pubsub_tco_nodes_short_of_coverage",
             "Nodes whose backups cover a topic that others subscribe to fewer than λ times.", "gauge", {},
             len(reachable_short)),
        ]
        for kind in ("join", "leave", "change", "crash"):
            key = {"join": "joins", "leave": "leaves", "change": "changes", "crash": "crashes_detected"}[kind]
            out.append(("pubsub_tco_repairs", "Repairs run, by what caused them.", "counter", {"kind": kind},
                        counters[key]))
        out.append(("pubsub_tco_repairs", "Repairs run, by what caused them.", "counter", {"kind": "audit"},
                    counters["audit_repairs"]))
        for change in ("added", "removed"):
            out.append(("pubsub_tco_repair_edges", "Edges repairs added or removed.", "counter", {"change": change},
                        counters[f"edges_{change}"]))
        out.append(("pubsub_tco_stale_tables", "Reminders from nodes holding another table than the record's "
                    "(each answered with the table).", "counter", {}, counters["stale_tables"]))
        out.append(("pubsub_tco_repairs_widened", "Repairs that had to widen past the shadow set.", "counter", {},
                    counters["repairs_widened"]))
        return out

    def _suspect(self, ref: Ref, now: float) -> None:
        if ref not in self.overlay.topics:
            return
        nonce = self.probes.suspect(ref, now)
        if nonce is not None:
            self.counters["suspects"] += 1
            self._send(ref, TcoPing(nonce))

    def _get_member(self, topic: Topic, ref: Ref, nonce: int, avoid: Ref | None) -> None:
        members = sorted(self.overlay.subscribers.get(topic, ()))
        self._send(ref, MemberIs(topic, choose_member([Ref(r) for r in members], self.probes, avoid, self.rng), nonce))

    # ------------------------------------------------------------------ the audit
    def audit(self) -> dict[str, int]:
        """Repair what is wrong in the record itself (module docstring); what it did."""
        self.counters["audits"] += 1
        overlay, done = self.overlay, Counter[str]()
        for a, b in sorted(overlay.edges()):
            if not overlay.shared(a, b):
                overlay.remove_edge(a, b)
                done["edges_removed"] += 1
        for node in sorted(overlay.topics):
            backups = self.backups.backups.get(node, [])
            wrong = len(set(backups)) != len(backups) or any(
                b not in overlay.topics or b == node or not overlay.shared(node, b) for b in backups
            )
            if wrong or (not backups and self._could_have_backups(node)):
                self.backups.build(overlay, node, self.dynamic.coverage, self.dynamic.method, self.rng)
                if self.backups.backups.get(node, []) != backups:
                    done["backups_rebuilt"] += 1
        for topic in overlay.split_topics():
            potential = combinations(sorted(overlay.subscribers[topic]), 2)
            done["edges_added"] += len(construct_low_edges(overlay, [topic], potential, self.dynamic.rho).added)
        if done:
            self.counters["audit_repairs"] += 1
            self._note({"repair": "audit", **done})
        return dict(done)

    def _could_have_backups(self, node: Node) -> bool:
        return any(len(self.overlay.subscribers[t]) > 1 for t in self.overlay.topics[node])

    # ------------------------------------------------------------------ tables
    def table(self, node: Node) -> TcoTable:
        """`node`'s table as the record holds it (sorted throughout)."""
        overlay = self.overlay
        return TcoTable(
            TopicSet(tuple(sorted(overlay.topics[node]))),  # type: ignore[arg-type]
            Neighbourhood(tuple(
                (Ref(u), TopicSet(tuple(sorted(overlay.shared(node, u)))))  # type: ignore[arg-type]
                for u in sorted(overlay.neighbors[node])
            )),
            Peers(tuple(Ref(b) for b in sorted(self.backups.backups.get(node, [])))),
            Peers(tuple(Ref(p) for p in sorted(self.backups.primaries.get(node, ())))),
        )

    def _send_table(self, node: Node) -> None:
        table = self.table(node)
        self._sent[node] = table
        self.counters["tables_sent"] += 1
        self._send(Ref(node), table)
        for topic in table.topics or ():
            settings = self.retention.message(topic)
            if settings is not None:
                self._send(Ref(node), settings)

    def _settle(self) -> list[Send]:
        """After a call: every touched node whose table changed gets it now, and what the
        call changed in the record becomes rows to store; then the messages."""
        touched = self.overlay.touched | self.backups.touched
        self.overlay.touched, self.backups.touched = set(), set()
        for node in sorted(touched):
            if node in self.overlay.topics:
                if self._sent.get(node) != self.table(node):
                    self._send_table(node)
            else:
                self._sent.pop(node, None)
        if self._journal:
            self._store(touched)
        out, self._out = self._out, []
        return out

    # ------------------------------------------------------------------ persistence
    def _rows(self, node: Node) -> set[Row]:
        """The rows that hold what the record says of `node` (module docstring)."""
        overlay = self.overlay
        topics = overlay.topics.get(node)
        if not topics:
            return set()
        rows = {(t, f"m {node}", node) for t in topics}
        for other in overlay.neighbors[node]:
            shared = overlay.shared(node, other)
            if node < other and shared:
                rows.add((min(shared), f"e {node} {other}", node))
        first = min(topics)
        rows |= {(first, f"b {node} {b}", node) for b in self.backups.backups.get(node, [])}
        return rows

    def _store(self, nodes: Iterable[Node]) -> None:
        for node in nodes:
            old, new = self._rows_of.get(node, set()), self._rows(node)
            if old == new:
                continue
            new_keys = {(t, label) for t, label, _ in new}
            self._changes += [(t, label, None) for t, label, _ in old if (t, label) not in new_keys]
            self._changes += sorted(new - old)
            if new:
                self._rows_of[node] = new
            else:
                self._rows_of.pop(node, None)

    def drain_changes(self) -> list[tuple[str, str, str | None]]:
        """The rows changed since the last call: (topic, label, ref), ref None to delete."""
        out, self._changes = self._changes, []
        return out

    def load(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """The record as the daemon stored it.  Rows that contradict each other (an edge
        or a backup naming no node) are left out of the record and deleted at the next
        drain; what is wrong but consistent (a split topic, an edge sharing no topic) is
        left for the audit."""
        rows = list(rows)
        topics: dict[Node, set[str]] = {}
        stored: dict[Node, set[Row]] = {}
        for topic, label, ref in rows:
            stored.setdefault(ref, set()).add((topic, label, ref))
            kind, _, rest = label.partition(" ")
            if kind == "m" and rest == ref:
                topics.setdefault(ref, set()).add(topic)
        for node, node_topics in sorted(topics.items()):
            if node in self.overlay.topics:
                self.overlay.set_topics(node, self.overlay.topics[node] | node_topics)
            else:
                self.overlay.add_node(node, node_topics)
        backups: dict[Node, list[Node]] = {}
        for _, label, ref in sorted(rows):
            kind, _, rest = label.partition(" ")
            if kind == "m":
                continue
            a, _, b = rest.partition(" ")
            if a != ref or a not in self.overlay.topics or b not in self.overlay.topics:
                continue
            if kind == "e":
                self.overlay.add_edge(a, b)
            else:
                backups.setdefault(a, []).append(b)
        for node, chosen in backups.items():
            self.backups.assign(node, sorted(set(chosen)))
        self.overlay.touched, self.backups.touched = set(), set()
        self._rows_of = stored
        if self._journal:
            self._store(set(stored) | set(self.overlay.topics))
        else:
            self._rows_of, self._changes = {}, []

    def member_refs(self, topic: Topic) -> list[Ref]:
        """The subscribers of `topic`, sorted ([]: none, or an unknown topic)."""
        return [Ref(r) for r in sorted(self.overlay.subscribers.get(topic, ()))]

    # ------------------------------------------------------------------ fault injection
    def corrupt(self, topic: Topic | None, rng: random.Random) -> dict[str, dict[str, int]]:
        """Damage the record around `topic` (None: every topic), as paper 000 Def. 1.1
        asks convergence from any state: some of its edges removed, edges to nodes sharing
        no topic added, some of its subscribers given wrong backups.  Per topic what it did;
        FaultRefused for a topic nobody subscribes to."""
        if topic is not None and topic not in self.overlay.subscribers:
            raise FaultRefused("unknown_topic", f"no node subscribes to {topic!r}")
        chosen = [topic] if topic is not None else sorted(self.overlay.subscribers)
        done = {t: self._corrupt(t, rng) for t in chosen}
        self._out = self._settle()  # stored at the daemon's flush; the tables go with the next call
        return done

    def _corrupt(self, topic: str, rng: random.Random) -> dict[str, int]:
        overlay, done = self.overlay, Counter[str]()
        members = sorted(overlay.subscribers.get(topic, ()))
        for a, b in sorted(overlay.edges()):
            if topic in overlay.shared(a, b) and rng.random() < 0.5:
                overlay.remove_edge(a, b)
                done["edges_removed"] += 1
        strangers = sorted(set(overlay.topics) - set(members))
        for node in members:
            if strangers and rng.random() < 0.5:
                overlay.add_edge(node, rng.choice(strangers))
                done["foreign_edges"] += 1
            if rng.random() < 0.5:
                self.backups.assign(node, rng.sample(strangers, min(2, len(strangers))) or [node])
                done["wrong_backups"] += 1
        return dict(done)

    # ------------------------------------------------------------------ helpers
    def _send(self, dest: Ref, msg: Message) -> None:
        self._out.append(Send(dest, msg))

    def status(self) -> dict[str, object]:
        """JSON-able state: the overlay per topic (members with ``label`` their place in
        order, the edges inside it, whether the subscribers are connected), per node its
        table, the degrees, the coverage achieved, and the recent repairs."""
        overlay = self.overlay
        degrees = [overlay.degree(n) for n in overlay.topics]
        short = {n: s for n, s in self.backups.short.items() if n in overlay.topics}
        split = overlay.split_topics()
        return {
            "ref": self.ref,
            "overlay": "tco",
            "config_budget": self.config_budget,
            "rho": self.dynamic.rho,
            "coverage": self.dynamic.coverage,
            "backup_method": self.dynamic.method,
            "suspects": self.probes.suspects(),
            "counters": dict(sorted(self.counters.items())),
            "retention": self.retention.status(),
            "nodes": len(overlay.topics),
            "edges": len(overlay.edges()),
            "max_degree": max(degrees, default=0),
            "mean_degree": round(sum(degrees) / len(degrees), 3) if degrees else 0.0,
            "split_topics": split,
            "coverage_short": {n: dict(sorted(s.items())) for n, s in sorted(short.items())},
            "recent_repairs": list(self.recent),
            "tables": {
                node: {
                    "topics": sorted(overlay.topics[node]),
                    "neighbours": {u: sorted(overlay.shared(node, u)) for u in sorted(overlay.neighbors[node])},
                    "backups": sorted(self.backups.backups.get(node, [])),
                    "primaries": sorted(self.backups.primaries.get(node, ())),
                }
                for node in sorted(overlay.topics)
            },
            "topics": {
                topic: {
                    "n": len(members),
                    "legitimate_database": topic not in split,
                    "members": [{"label": str(i), "ref": ref} for i, ref in enumerate(sorted(members))],
                    "edges": sorted([a, b] for a in members for b in overlay.neighbors[a] if a < b and b in members),
                }
                for topic, members in sorted(overlay.subscribers.items())
            },
        }

