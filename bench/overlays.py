"""python -m bench overlays: the four overlays of the shared publication layer -- the skip ring
(paper 000), the clique, tco (paper 001) and omen (paper 003) -- side by side on one workload of paper 001's
shape (`pubsub.tco.workload`), each measured in the simulator (`pubsub.sim.world`).

    --quick     300 nodes, 40 topics, 2-18 topics each (about a minute or two)
    (default)   2,000 nodes, 200 topics, 10-90 topics each, the paper's shape: the static
                columns (peers, edges, diameters) from the ideal overlays (see below) and,
                with --simulate, the whole table in the simulator (long: hours for the
                skip ring and the clique)

Per overlay, one simulation (seed, the sim's default delays 0.01-0.5 s, Timeout every
interval):

1. **build**: every node joins its topics at time 0, one `join` per topic as a client would;
   run until the overlay is legitimate and quiet (below), checked after every interval.
2. **static** (the state just reached): distinct peers per node -- the references a node
   holds over all its topics, the supervisor not counted (mean, maximum, and the mean over the
   10% of nodes with most topics) --, undirected edges, and per topic the diameter by BFS: on
   the topic's own edges (what its publications travel on: a skip ring's ring and shortcuts of
   that topic, the clique's members, tco's neighbours sharing the topic) and on the subgraph
   the topic's subscribers induce in the union of every topic's edges (the same for clique
   and tco; a skip ring's other rings add shortcuts no publication of the topic uses).
3. **publications**: `--per-topic` publications on every topic (quick 3, default 2), one at a
   time, at a random subscriber, with equal link delays (so a row's hop count is its distance
   in the broadcast, as in `bench dissemination`), each overlay's default dissemination (the
   arc broadcast on the skip ring and the clique, flooding on tco; `--dissemination flood`
   floods on every overlay); per publication the messages that carried it (Spread, PublishNew)
   and the hops the stored rows carry (`keep_rows`, `take_rows`).
4. **idle**: frames and messages per node per interval over `--idle` intervals (40), before the
   publications (empty tries: no anti-entropy) and after them (every topic in its rounds);
   frames as the runtime sends them: what one Timeout sends to one peer is one frame
   (`pubsub.runtime.bundling`), every other message one.  Supervisor messages per interval,
   sent and received.
5. **repairs**: `--events` joins (a new node with the workload's next topics), leaves (a node
   leaves all its topics) and crashes, in turn, nodes chosen at random; each counted from the
   event until the overlay is legitimate and quiet again.  Repair messages are those of kinds
   the idle overlay never sends, plus what the supervisor sent of its periodic kinds beyond
   its idle rate (its round robin of configurations); the periodic messages of the nodes
   (BuildSR's checks, GetConfiguration, anti-entropy's CheckTrie, tco's 20-Timeout reminders,
   `TcoSubscribe` with ``refresh``, counted apart from the requests) are not, as in `bench scale`.
   The publication layer's catch-up of a joiner (CheckAndPublish, Publish) is counted apart.

Legitimate is judged from each overlay's definition, not by its own check: the skip ring by
the independent checker of `tests.simhelpers` (members, labels, explicit edges and the
channels exactly SR(n)); the clique as tests/clique/test_clique_sim.py states it (the
supervisor's list is exactly the subscribers, every member holds it and reaches everyone);
tco as tests/tco/test_tco_sim.py states it, with the TC property checked here by BFS (the
record's nodes are the live subscribers, every topic's subscribers connected, backups share
a topic and primaries are their reverse, every node's table is the record's); omen as
tests/omen/test_omen_publications.py states it (every subscriber held in its topics, every
edge held from both ends between live subscribers, every topic's subscribers connected).
Quiet: besides,
no message of a kind the idle overlay never sends is in flight, and every node runs exactly
the topics it wants (a leaver has let go).

The ideal overlays (`--static-only`, and beside every simulated run as a cross-check): the
skip ring SR(n) of every topic over its subscribers in join order (`tests.checker.ideal_edges`),
every topic's complete graph, and the tco supervisor's record after the same joins
(`TcoSupervisor` fed one `TcoSubscribe` per node, no simulation), and for omen Low-ODA
over the same nodes (what its repairs mend towards).  Paper 001's target on the
full workload: tco's mean distinct peers at most a fifth of the skip ring's (printed).

Results: bench-results/overlays.json (or overlays-quick.json), with the machine and every
workload parameter.  `--cpu` adds idle CPU per node with real processes (`pubsub supervisor
--overlay X`, `pubsub node --overlay X` on free 127.0.0.1 ports), every process stopped by pid.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.machine import machine
from pubsub.kernel import registry
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.sim.world import SUPERVISOR, Simulation
from pubsub.skipring.labels import l
from pubsub.tco.backups import DEFAULT_LAMBDA
from pubsub.tco.supervisor import DEFAULT_AUDIT_EVERY
from pubsub.tco.workload import OPEN_PARAMETERS, POPULARITIES, Shape, Workload
from pubsub.topicgraph.lowoda import DEFAULT_RHO, low_oda
from tests.checker import ideal_edges
from tests.simhelpers import in_flight_problems, is_legitimate, labels_settled, problems

RESULTS = Path("bench-results")
OVERLAYS = ("skipring", "clique", "tco", "omen")
#: The messages that carry a new publication, and those with which anti-entropy hands over
#: what a member misses (a joiner's catch-up).
CARRIERS = ("spread", "publish_new")
CATCH_UP = ("check_and_publish", "publish")
#: Paper 001's target on its workload: tco's mean distinct peers / the skip ring's.
TARGET_RATIO = 0.2

Edge = tuple[str, str]
Graph = dict[str, set[str]]


# ---------------------------------------------------------------------- the metered simulation
def label(msg: Message) -> str:
    """What a message is counted as: its kind, and ``kind/refresh`` for a reminder that
    repeats what the receiver holds (tco's periodic `TcoSubscribe` with ``refresh``), so that
    the periodic reminders and the requests that start a repair are told apart."""
    return f"{msg.kind}/refresh" if getattr(msg, "refresh", False) else msg.kind


class MeteredSimulation(Simulation):
    """The simulator, counting frames as the runtime would send them (everything one Timeout
    sends to one peer is one frame, `pubsub.runtime.bundling`; any other message one), the
    supervisor's Timeouts, and messages by `label`: all, from and to the supervisor."""

    def __init__(self, seed: int, **options: Any) -> None:
        self.by_label: Counter[str] = Counter()
        self.from_supervisor: Counter[str] = Counter()
        self.to_supervisor: Counter[str] = Counter()
        self.frames: Counter[Ref] = Counter()
        self.sent: Counter[Ref] = Counter()
        self.supervisor_ticks = 0
        self._ticking: Ref | None = None
        super().__init__(seed, **options)

    def _tick(self, ref: Ref) -> None:
        if ref == SUPERVISOR:
            self.supervisor_ticks += 1
        self._ticking = ref
        try:
            super()._tick(ref)
        finally:
            self._ticking = None

    def _send(self, src: Ref, sends: Sequence[Send]) -> None:
        if src == self._ticking:  # the first sends of a Timeout: bundled per peer
            self._ticking = None
            dests = Counter(dest for dest, _ in sends)
            self.frames[src] += sum(1 if dest != src else count for dest, count in dests.items())
        else:
            self.frames[src] += len(sends)
        self.sent[src] += len(sends)
        for dest, msg in sends:
            name = label(msg)
            self.by_label[name] += 1
            if src == SUPERVISOR:
                self.from_supervisor[name] += 1
            elif dest == SUPERVISOR:
                self.to_supervisor[name] += 1
        super()._send(src, sends)


# ---------------------------------------------------------------------- graphs
def bfs(graph: Mapping[str, Iterable[str]], start: str, allowed: set[str] | None = None) -> dict[str, int]:
    """Distances from `start` (inside `allowed`, when given)."""
    seen = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for other in graph.get(node, ()):
            if other not in seen and (allowed is None or other in allowed):
                seen[other] = seen[node] + 1
                queue.append(other)
    return seen


def diameter(graph: Mapping[str, set[str]], members: set[str]) -> float:
    """The diameter of the subgraph of `graph` that `members` induce (inf: not connected; 0
    for one member): a BFS from every member at once, as boolean matrix products (numpy), so
    that a topic of a few hundred members in a dense graph costs milliseconds."""
    order = sorted(members)
    m = len(order)
    if m <= 1:
        return 0
    index = {ref: i for i, ref in enumerate(order)}
    adjacency = np.zeros((m, m), dtype=np.float32)
    for i, ref in enumerate(order):
        for other in graph.get(ref, set()) & members:
            adjacency[i, index[other]] = 1.0
    reach = np.eye(m, dtype=np.float32)
    reached, steps = m, 0
    while reached < m * m:
        reach = ((reach @ adjacency + reach) > 0).astype(np.float32)
        now = int(reach.sum())
        if now == reached:
            return math.inf
        reached, steps = now, steps + 1
    return steps


def connected(graph: Mapping[str, Iterable[str]], members: set[str]) -> bool:
    if not members:
        return True
    return len(bfs(graph, min(members), members)) == len(members)


def undirected(pairs: Iterable[tuple[str, str]]) -> Graph:
    graph: Graph = {}
    for a, b in pairs:
        if a == b:
            continue
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set()).add(a)
    return graph


# ---------------------------------------------------------------------- what each overlay holds
def topic_edges(sim: Simulation, name: str) -> dict[str, set[Edge]]:
    """Per topic, the undirected edges its publications travel on, as the nodes hold them."""
    out: dict[str, set[Edge]] = {}
    for ref, node in sim.nodes.items():
        for topic in node.wanted_topics:
            if name == "skipring":
                instance = node.instances.get(topic)
                peers: Iterable[str] = () if instance is None else instance.contacts()
            else:
                peers = node.overlay.neighbours(topic)
            edges = out.setdefault(topic, set())
            for peer in peers:
                if peer != ref:
                    edges.add((min(ref, peer), max(ref, peer)))
    return out


def subscriptions(sim: Simulation) -> dict[str, set[str]]:
    """topic -> its live subscribers."""
    out: dict[str, set[str]] = {}
    for ref, node in sim.nodes.items():
        for topic in node.wanted_topics:
            out.setdefault(topic, set()).add(ref)
    return out


def static_columns(topics_of: Mapping[str, Iterable[str]], per_topic: Mapping[str, set[Edge]]) -> dict[str, Any]:
    """Distinct peers, edges and topic diameters of one overlay (module docstring, step 2)."""
    sets = {node: set(ts) for node, ts in topics_of.items()}
    union: set[Edge] = set().union(*per_topic.values()) if per_topic else set()
    graph = undirected(union)
    peers = {node: len(graph.get(node, ())) for node in sets}
    ranked = sorted(sets, key=lambda node: (-len(sets[node]), node))
    top = ranked[: max(1, math.ceil(len(ranked) / 10))]
    members: dict[str, set[str]] = {}
    for node, ts in sets.items():
        for topic in ts:
            members.setdefault(topic, set()).add(node)
    own = [diameter(undirected(per_topic.get(t, ())), m) for t, m in sorted(members.items())]
    induced = [diameter(graph, m) for _, m in sorted(members.items())]
    split = sum(1 for d in own if d == math.inf)
    finite_own = [d for d in own if d != math.inf]
    finite_induced = [d for d in induced if d != math.inf]
    values = list(peers.values())
    return {
        "nodes": len(sets),
        "subscriptions": sum(len(ts) for ts in sets.values()),
        "peers_mean": statistics.fmean(values) if values else 0.0,
        "peers_max": max(values, default=0),
        "peers_top10_mean": statistics.fmean(peers[node] for node in top) if top else 0.0,
        "top10_nodes": len(top),
        "top10_topics_mean": statistics.fmean(len(sets[node]) for node in top) if top else 0.0,
        "edges": len(union),
        "diameter_max": max(own, default=0),
        "diameter_mean": statistics.fmean(finite_own) if finite_own else float("nan"),
        "induced_diameter_max": max(induced, default=0),
        "induced_diameter_mean": statistics.fmean(finite_induced) if finite_induced else float("nan"),
        "split_topics": split,
    }


# ---------------------------------------------------------------------- legitimacy (from the definitions)
def released_problems(sim: Simulation) -> list[str]:
    """Nodes that run a topic they do not want (a leaver not let go), or the reverse."""
    out = []
    for ref, node in sim.nodes.items():
        running, wanted = set(node.overlay.topics()), set(node.wanted_topics)
        if running != wanted:
            out.append(f"{ref} runs {sorted(running ^ wanted)[:3]} against what it wants")
    return out


def skipring_problems(sim: Simulation) -> list[str]:
    """Every topic exactly SR(n), channels included (`tests.simhelpers`)."""
    topics = sorted(set(subscriptions(sim)) | set(sim.supervisor.topics))
    for topic in topics:  # the cheap necessary condition first, for every topic
        if not labels_settled(sim, Topic(topic)):
            return [f"{topic}: members or labels not settled"]
    for topic in topics:
        if not is_legitimate(sim, Topic(topic)):
            found = problems(sim, Topic(topic)) + in_flight_problems(sim, Topic(topic))
            return [f"{topic}: " + "; ".join(found[:3])]
    return []


def clique_problems(sim: Simulation) -> list[str]:
    """tests/clique/test_clique_sim.py's oracle, for every topic."""
    wanted = subscriptions(sim)
    out = []
    for topic in sorted(set(wanted) | set(sim.supervisor.topics)):
        listed = list(sim.supervisor.topics.get(topic, []))
        if sorted(listed) != sorted(wanted.get(topic, ())):
            out.append(f"{topic}: the supervisor lists {len(listed)}, {len(wanted.get(topic, ()))} subscribe")
            continue
        for ref in sorted(wanted.get(topic, ())):
            state = sim.nodes[Ref(ref)].overlay.topics_run.get(topic)
            if state is None or state.members != tuple(listed):
                out.append(f"{topic}: {ref} holds another list")
            elif state.unreachable:
                out.append(f"{topic}: {ref} cannot reach {sorted(state.unreachable)[:3]}")
    return out


def tco_problems(sim: Simulation) -> list[str]:
    """tests/tco/test_tco_sim.py's oracle, the TC property by BFS here.  The record is read
    as the supervisor's tables (`TcoSupervisor.table`, what it sends each node), node by node,
    instead of its whole status, so that a check at 2,000 nodes stays cheap."""
    sup = sim.supervisor
    tables = {node: sup.table(node) for node in sorted(sup.overlay.topics)}
    record = {
        node: {
            "topics": sorted(table.topics or ()),
            "neighbours": {u: sorted(ts) for u, ts in table.neighbours},
            "backups": list(table.backups), "primaries": list(table.primaries),
        }
        for node, table in tables.items()
    }
    wanted = {ref: set(node.wanted_topics) for ref, node in sim.nodes.items() if node.wanted_topics}
    if set(record) != set(wanted):
        return [f"the record holds {len(record)} nodes, {len(wanted)} subscribe"]
    graph: Graph = {ref: set(entry["neighbours"]) for ref, entry in record.items()}
    if any(b not in record for bs in graph.values() for b in bs):
        return ["an edge names no node"]
    members: dict[str, set[str]] = {}
    for ref, entry in record.items():
        for topic in entry["topics"]:
            members.setdefault(topic, set()).add(ref)
    split = [t for t, m in sorted(members.items()) if not connected(graph, m)]
    if split:
        return [f"split topics {split[:5]}"]
    out = []
    reverse: dict[str, set[str]] = {}
    for ref, entry in record.items():
        for backup in entry["backups"]:
            reverse.setdefault(backup, set()).add(ref)
            if backup not in record or not set(record[backup]["topics"]) & set(entry["topics"]):
                out.append(f"{ref}'s backup {backup} shares no topic or is no node")
    for ref, entry in record.items():
        if set(entry["primaries"]) != reverse.get(ref, set()):
            out.append(f"{ref}'s primaries are not the reverse of its backups")
    for ref, topics in wanted.items():
        overlay, entry = sim.nodes[Ref(ref)].overlay, record[ref]
        if sorted(topics) != entry["topics"] or overlay.table_topics != frozenset(topics):
            out.append(f"{ref}'s table holds other topics")
        elif {u: sorted(ts) for u, ts in overlay.table_neighbours.items()} != entry["neighbours"]:
            out.append(f"{ref} holds other neighbours than the record")
        elif overlay.unreachable:
            out.append(f"{ref} cannot reach {sorted(overlay.unreachable)[:3]}")
    return out


def omen_problems(sim: Simulation) -> list[str]:
    """tests/omen/test_omen_publications.py's oracle, the TC property by BFS here: every
    subscriber held in its topics by the membership supervisor, every edge held from both
    ends and to a live node, every topic's subscribers connected over the edges."""
    wanted = {ref: set(node.wanted_topics) for ref, node in sim.nodes.items() if node.wanted_topics}
    out = []
    graph: Graph = {}
    for ref, topics in sorted(wanted.items()):
        overlay = sim.nodes[Ref(ref)].overlay
        if (overlay.held or frozenset()) != frozenset(topics):
            out.append(f"{ref} held in {sorted(overlay.held or ())}, joined {sorted(topics)}")
        graph[ref] = set(overlay.core.neighbours)
        for other in graph[ref]:
            if other not in wanted:
                out.append(f"{ref} holds {other}, no live subscriber")
            elif ref not in sim.nodes[Ref(other)].overlay.core.neighbours:
                out.append(f"{ref} holds {other}, which does not hold it back")
        if overlay.unreachable:
            out.append(f"{ref} cannot reach {sorted(overlay.unreachable)[:3]}")
    if out:
        return out
    members = subscriptions(sim)
    split = [t for t, m in sorted(members.items()) if not connected(graph, m)]
    return [f"split topics {split[:5]}"] if split else []


ORACLES: dict[str, Callable[[Simulation], list[str]]] = {
    "skipring": skipring_problems, "clique": clique_problems, "tco": tco_problems, "omen": omen_problems,
}


def settled(sim: Simulation, name: str, periodic: set[str] | None) -> list[str]:
    """[] when legitimate and quiet (module docstring); with `periodic` None, before the idle
    overlay's kinds are known, no message of the overlay's repair kinds may be in flight."""
    found = ORACLES[name](sim) or released_problems(sim)
    if found:
        return found
    if periodic is not None:
        flying = Counter(label(msg) for _, _, msg in sim.in_flight() if label(msg) not in periodic)
        if flying:
            return [f"in flight: {dict(flying)}"]
    return []


# ---------------------------------------------------------------------- traffic
def snapshot(sim: MeteredSimulation) -> dict[str, Any]:
    return {
        "now": sim.now, "by_kind": sim.by_label.copy(), "from_sup": sim.from_supervisor.copy(),
        "to_sup": sim.to_supervisor.copy(), "frames": sim.frames.copy(), "sent": sim.sent.copy(),
        "sup_ticks": sim.supervisor_ticks,
    }


def since(sim: MeteredSimulation, before: Mapping[str, Any]) -> dict[str, Any]:
    now = snapshot(sim)
    return {
        "intervals": (now["now"] - before["now"]) / sim.interval,
        "by_kind": now["by_kind"] - before["by_kind"],
        "from_sup": now["from_sup"] - before["from_sup"],
        "to_sup": now["to_sup"] - before["to_sup"],
        "frames": now["frames"] - before["frames"],
        "sent": now["sent"] - before["sent"],
        "sup_ticks": now["sup_ticks"] - before["sup_ticks"],
    }


def idle(sim: MeteredSimulation, intervals: int) -> dict[str, Any]:
    """Frames and messages per node per interval, the supervisor's per interval, by kind."""
    before = snapshot(sim)
    sim.run_for(intervals * sim.interval)
    d = since(sim, before)
    n = max(len(sim.nodes), 1)
    node_frames = sum(v for ref, v in d["frames"].items() if ref != SUPERVISOR)
    node_sent = sum(v for ref, v in d["sent"].items() if ref != SUPERVISOR)
    sup = d["from_sup"] + d["to_sup"]
    return {
        "intervals": intervals,
        "frames_per_node": node_frames / n / intervals,
        "messages_per_node": node_sent / n / intervals,
        "supervisor_per_interval": sum(sup.values()) / intervals,
        "supervisor_sent_per_interval": sum(d["from_sup"].values()) / intervals,
        "supervisor_received_per_interval": sum(d["to_sup"].values()) / intervals,
        "by_kind_per_interval": {k: v / intervals for k, v in sorted(d["by_kind"].items())},
        "supervisor_by_kind_per_interval": {k: v / intervals for k, v in sorted(sup.items())},
        "supervisor_sent_by_kind_per_interval": {k: v / intervals for k, v in sorted(d["from_sup"].items())},
    }


# ---------------------------------------------------------------------- the phases
def build(shape: Shape, seed: int, name: str, dissemination: str, max_intervals: int,
          wall_cap: float) -> tuple[MeteredSimulation, Workload, dict[str, Any]]:
    work = Workload(shape, seed)
    initial = work.initial()
    sim = MeteredSimulation(seed, overlay=name, dissemination=dissemination, keep_rows=True)
    started = time.monotonic()
    for node in sorted(initial):
        ref = sim.add_node(node)
        for topic in sorted(initial[node]):
            sim.join(ref, Topic(topic))
    intervals, left = None, ["not checked"]
    for done in range(max_intervals + 1):
        left = settled(sim, name, None)
        if not left:
            intervals = done
            break
        if time.monotonic() - started > wall_cap:
            break
        if done and done % 25 == 0:
            print(f"   {name}: {done} intervals, {time.monotonic() - started:.0f} s, not yet: {left[:1]}", flush=True)
        sim.run_for(sim.interval)
    if intervals is None:
        raise TimeoutError(f"{name}: not legitimate after {done} intervals ({time.monotonic() - started:.0f} s): "
                           f"{left[:3]}")
    return sim, work, {
        "intervals": intervals, "messages": sim.traffic.total(),
        "supervisor_messages": sum(sim.traffic.from_supervisor.values()) + sum(sim.traffic.to_supervisor.values()),
        "wall_seconds": round(time.monotonic() - started, 1),
    }


def publications(sim: MeteredSimulation, per_topic: int, seed: int) -> dict[str, Any]:
    """`per_topic` publications on every topic, one at a time, equal link delays."""
    rng = random.Random(seed)
    started = time.monotonic()
    members = subscriptions(sim)
    saved, sim.delay = sim.delay, (0.01, 0.01)
    runs: list[dict[str, Any]] = []
    try:
        for topic in sorted(members):
            for i in range(per_topic):
                for node in sim.nodes:
                    sim.take_rows(node)
                publisher = rng.choice(sorted(members[topic]))
                before = snapshot(sim)
                sim.publish(Ref(publisher), Topic(topic), f"{topic}/{i}".encode())
                hops: dict[str, int] = {}
                for _ in range(200):  # 2 s at most: far beyond any diameter here
                    sim.run_for(0.01)
                    for ref in members[topic] - {publisher} - set(hops):
                        for row in sim.take_rows(Ref(ref)):
                            if row.topic == topic:
                                hops[ref] = row.hops or 0
                    if len(hops) == len(members[topic]) - 1:
                        break
                sim.run_for(0.05)  # what is still in flight after the last store
                d = since(sim, before)
                runs.append({
                    "topic": topic, "subscribers": len(members[topic]),
                    "messages": sum(d["by_kind"][k] for k in CARRIERS),
                    "catch_up": sum(d["by_kind"][k] for k in CATCH_UP),
                    "reached": len(hops), "hops_max": max(hops.values(), default=0),
                    "hops_mean": statistics.fmean(hops.values()) if hops else 0.0,
                })
                if len(runs) % 100 == 0:
                    print(f"   {len(runs)} publications, {time.monotonic() - started:.0f} s", flush=True)
    finally:
        sim.delay = saved
    missed = sum(r["subscribers"] - 1 - r["reached"] for r in runs)
    return {
        "publications": len(runs),
        "per_topic": per_topic,
        "messages_per_publication": statistics.fmean(r["messages"] for r in runs),
        "messages_per_receiver": sum(r["messages"] for r in runs) / max(sum(r["subscribers"] - 1 for r in runs), 1),
        "catch_up_per_publication": statistics.fmean(r["catch_up"] for r in runs),
        "hops_max": max(r["hops_max"] for r in runs),
        "hops_max_mean": statistics.fmean(r["hops_max"] for r in runs),
        "hops_mean": statistics.fmean(r["hops_mean"] for r in runs),
        "receivers_missed": missed,
        "runs": runs,
    }


def wait_until_tries_agree(sim: Simulation, max_intervals: int) -> int | None:
    """Intervals until every subscriber of every topic holds the same trie root."""
    def agree() -> bool:
        roots: dict[str, set[object]] = {}
        for node in sim.nodes.values():
            for topic in node.wanted_topics:
                core = node.publications.get(topic)
                roots.setdefault(topic, set()).add(None if core is None else core.trie.root())
        return all(len(r) == 1 for r in roots.values())
    return sim.run_intervals_until(agree, max_intervals)


def repairs(sim: MeteredSimulation, work: Workload, name: str, events: int, baseline: Mapping[str, Any],
            seed: int, max_intervals: int, wall_cap: float) -> dict[str, Any]:
    """`events` joins, leaves and crashes in turn (module docstring, step 5)."""
    rng = random.Random(seed + 1)
    periodic = set(baseline["by_kind_per_interval"])
    sent_rate = baseline["supervisor_sent_by_kind_per_interval"]
    runs: list[dict[str, Any]] = []
    started = time.monotonic()
    for _ in range(events):
        for action in ("join", "leave", "crash"):
            if time.monotonic() - started > wall_cap:
                break
            before = snapshot(sim)
            candidates = sorted(ref for ref, node in sim.nodes.items() if node.wanted_topics)
            if action == "join":
                node, topics = work.new_node()
                ref = sim.add_node(node)
                for topic in sorted(topics):
                    sim.join(ref, Topic(topic))
            else:
                ref = rng.choice(candidates)
                topics = frozenset(sim.nodes[ref].wanted_topics)
                if action == "leave":
                    for topic in sorted(topics):
                        sim.leave(ref, Topic(topic))
                else:
                    sim.crash(ref)
            reached = sim.run_intervals_until(lambda: not settled(sim, name, periodic), max_intervals)
            d = since(sim, before)
            sup = d["from_sup"] + d["to_sup"]
            by_kind = {k: v for k, v in d["by_kind"].items() if k not in periodic and k not in CATCH_UP}
            supervisor_excess = {  # what the supervisor sent beyond its idle rate
                k: max(0, round(v - sent_rate.get(k, 0.0) * d["intervals"]))
                for k, v in d["from_sup"].items() if k in periodic
            }
            supervisor_excess = {k: v for k, v in supervisor_excess.items() if v}
            runs.append({
                "action": action, "node": ref, "topics": len(topics), "reached": reached is not None,
                "intervals": reached, "repair": sum(by_kind.values()) + sum(supervisor_excess.values()),
                "repair_by_kind": dict(sorted(by_kind.items())), "supervisor_periodic_excess": supervisor_excess,
                "catch_up": sum(d["by_kind"][k] for k in CATCH_UP),
                "supervisor_messages": sum(sup.values()),
            })
            if reached is None:
                raise TimeoutError(f"{name}: {action} of {ref} not repaired after {max_intervals} intervals: "
                                   f"{settled(sim, name, periodic)[:3]}")
    out: dict[str, Any] = {"events_per_kind": events, "runs": runs}
    for action in ("join", "leave", "crash"):
        mine = [r for r in runs if r["action"] == action]
        out[action] = {
            "events": len(mine),
            "repair_mean": statistics.fmean(r["repair"] for r in mine) if mine else None,
            "repair_per_topic": (sum(r["repair"] for r in mine) / max(sum(r["topics"] for r in mine), 1)
                                 if mine else None),
            "intervals_mean": statistics.fmean(r["intervals"] for r in mine) if mine else None,
            "catch_up_mean": statistics.fmean(r["catch_up"] for r in mine) if mine else None,
            "topics_mean": statistics.fmean(r["topics"] for r in mine) if mine else None,
        }
    return out


def simulate(shape: Shape, seed: int, name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One overlay through the five phases (module docstring)."""
    began = time.monotonic()
    dissemination = args.dissemination or registry.overlay(name).disseminations[0]
    if dissemination not in registry.overlay(name).disseminations:
        dissemination = registry.overlay(name).disseminations[0]
    sim, work, built = build(shape, seed, name, dissemination, args.max_intervals, args.wall_cap)
    print(f"   {name}: legitimate and quiet after {built['intervals']} intervals "
          f"({built['wall_seconds']} s)", flush=True)
    static = static_columns({ref: node.wanted_topics for ref, node in sim.nodes.items()}, topic_edges(sim, name))
    empty = idle(sim, args.idle)
    published = publications(sim, args.per_topic, seed)
    agreed = wait_until_tries_agree(sim, args.max_intervals)
    sim.run_for(2 * sim.interval)
    busy = idle(sim, args.idle)
    print(f"   {name}: {published['publications']} publications, idle measured "
          f"({time.monotonic() - began:.0f} s so far)", flush=True)
    repaired = repairs(sim, work, name, args.events, busy, seed, args.max_intervals, args.wall_cap)
    print(f"   {name}: {len(repaired['runs'])} repairs ({time.monotonic() - began:.0f} s so far)", flush=True)
    return {
        "overlay": name, "dissemination": dissemination, "build": built, "static": static,
        "publications": published, "tries_agreed_after_intervals": agreed,
        "idle_before_publications": empty, "idle": busy, "repairs": repaired,
        "nodes_at_end": len(sim.nodes), "wall_seconds": round(time.monotonic() - began, 1),
    }


# ---------------------------------------------------------------------- the ideal overlays
def ideal_static(shape: Shape, seed: int, name: str) -> dict[str, Any]:
    """The static columns of `name`'s ideal overlay over the workload's initial nodes."""
    initial = Workload(shape, seed).initial()
    order = sorted(initial)
    members: dict[str, list[str]] = {}
    for node in order:
        for topic in sorted(initial[node]):
            members.setdefault(topic, []).append(node)
    per_topic: dict[str, set[Edge]] = {}
    if name == "skipring":
        for topic, refs in members.items():
            labels = {ref: l(i).bits for i, ref in enumerate(refs)}
            per_topic[topic] = {(min(a, b), max(a, b)) for a, b in ideal_edges(labels) if a != b}
    elif name == "clique":
        for topic, refs in members.items():
            per_topic[topic] = {(a, b) for i, a in enumerate(sorted(refs)) for b in sorted(refs)[i + 1:]}
    elif name == "omen":  # what OMen mends towards: Low-ODA on the whole membership
        built = low_oda({node: frozenset(initial[node]) for node in order})
        for a, b in built.edges():
            for topic in built.shared(a, b):
                per_topic.setdefault(topic, set()).add((min(a, b), max(a, b)))
    else:
        from pubsub.tco.messages import TcoSubscribe, TopicSet
        from pubsub.tco.mode import OVERLAY

        core = OVERLAY.supervisor_core(Ref("supervisor"), rng=random.Random(seed), journal=False)
        for node in order:
            core.handle(TcoSubscribe(Ref(node), TopicSet(tuple(sorted(initial[node])))), 0.0)  # type: ignore[arg-type]
        tables = core.status()["tables"]
        for node, entry in tables.items():
            for other, shared in entry["neighbours"].items():
                for topic in shared:
                    per_topic.setdefault(topic, set()).add((min(node, other), max(node, other)))
    return static_columns(initial, per_topic)


# ---------------------------------------------------------------------- idle CPU with real processes
def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """Stop every process we started, by its pid: SIGTERM, then SIGKILL after 5 s."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def _statuses(refs: Sequence[str], timeout: float = 5.0) -> dict[str, dict[str, Any] | None]:
    """Every daemon's status body (None: no answer), asked concurrently."""
    import asyncio

    from pubsub.kernel.control import Reply, StatusRequest
    from pubsub.runtime.client import RequestError, request

    async def one(ref: str) -> dict[str, Any] | None:
        try:
            reply = await request(ref, StatusRequest(), timeout)
        except (RequestError, OSError):
            return None
        return reply.body if isinstance(reply, Reply) else None

    async def every() -> list[dict[str, Any] | None]:
        return await asyncio.gather(*(one(ref) for ref in refs))

    return dict(zip(refs, asyncio.run(every()), strict=True))


def _joined(joins: Mapping[str, Sequence[str]]) -> None:
    """Each node joins its topics (the client library's `join`, as `pubsub subscribe --detach`)."""
    import asyncio

    from pubsub.client.library import Client

    async def every() -> None:
        for ref, topics in joins.items():
            client = Client(ref)
            for topic in topics:
                await client.join(topic)

    asyncio.run(every())


def _published(wanted: Mapping[str, Sequence[str]]) -> None:
    """One publication per topic, at its first member, so that every topic is in its
    anti-entropy rounds while the CPU is read (a node with an empty trie sends none)."""
    import asyncio

    from pubsub.client.library import Client

    async def every() -> None:
        done: set[str] = set()
        for ref, topics in wanted.items():
            client = Client(ref)
            try:
                for topic in topics:
                    if topic not in done:
                        await client.publish(topic, f"idle cpu {topic}")
                        done.add(topic)
            finally:
                await client.close()

    asyncio.run(every())


def real_problems(name: str, refs: Sequence[str], supervisor: str, wanted: Mapping[str, Sequence[str]]) -> list[str]:
    """What keeps the real cluster from legitimacy, by the overlay's own check over the
    daemons' statuses (`Overlay.legitimate`, what `pubsub cluster status` applies)."""
    bodies = _statuses([supervisor, *refs])
    sup = bodies.pop(supervisor)
    if sup is None:
        return ["the supervisor does not answer"]
    silent = [ref for ref, body in bodies.items() if body is None]
    if silent:
        return [f"{len(silent)} nodes do not answer"]
    overlay = registry.overlay(name)
    topics = sorted({t for ts in wanted.values() for t in ts})
    out: list[str] = []
    for topic in topics:
        states = {ref: body["topics"][topic] for ref, body in bodies.items()
                  if body and topic in (body.get("topics") or {})}
        members = {ref for ref, ts in wanted.items() if topic in ts}
        if set(states) != members:
            out.append(f"{topic}: {len(states)} nodes report it, {len(members)} joined it")
            continue
        out += [f"{topic}: {p}" for p in overlay.legitimate(sup, states, topic)]
    return out


def cpu_sample(shape: Shape, seed: int, nodes: int) -> list[list[str]]:
    """The topics of the first `nodes` nodes of the workload the simulator ran (its shape,
    its seed): the same small workload, as many nodes of it as real processes fit."""
    initial = Workload(shape, seed).initial()
    return [sorted(initial[node]) for node in sorted(initial)[:nodes]]


def real_cpu(name: str, topics_of: Sequence[Sequence[str]], window: float, interval: float,
             timeout: float = 180.0) -> dict[str, Any]:
    """Idle CPU per node with real daemons (module docstring): a supervisor and one node of
    overlay `name` per entry of `topics_of` (its topics), on free 127.0.0.1 ports; once the
    overlay's own check finds every topic legitimate, one publication per topic
    (anti-entropy runs only on a non-empty trie) and 10 intervals, each process's CPU seconds
    over `window` seconds (/proc/PID/stat).  Every process started is stopped by its pid."""
    from pubsub.ops.processes import pick_free_ports

    ports = pick_free_ports(len(topics_of) + 1)
    supervisor = f"127.0.0.1:{ports[0]}"
    refs = [f"127.0.0.1:{p}" for p in ports[1:]]
    wanted = {ref: list(topics) for ref, topics in zip(refs, topics_of, strict=True)}
    nodes = len(refs)
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-overlays-{name}-"))
    command = [sys.executable, "-m", "pubsub.cli.main"]
    common = ["--overlay", name, "--interval", str(interval)]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with open(workdir / "supervisor.log", "wb") as log:
            procs.append(subprocess.Popen(
                [*command, "supervisor", "--listen", supervisor, "--data", str(workdir / "sup"), *common],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        for i, ref in enumerate(refs):
            with open(workdir / f"node{i}.log", "wb") as log:
                procs.append(subprocess.Popen(
                    [*command, "node", "--listen", ref, "--supervisor", supervisor, *common],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        started = time.monotonic()
        while any(body is None for body in _statuses([supervisor, *refs], 2.0).values()):
            dead = [p for p in procs if p.poll() is not None]
            if dead or time.monotonic() - started > 60:
                logs = sorted(workdir.glob("*.log"))
                tail = (logs[0].read_text(errors="replace")[-400:] if logs else "")
                raise RuntimeError(f"{name}: daemons did not start ({len(dead)} exited): {tail}")
            time.sleep(0.2)
        _joined(wanted)
        left = ["not checked"]
        while left:
            left = real_problems(name, refs, supervisor, wanted)
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"{name}: not legitimate after {timeout:.0f} s: {left[:3]}")
            time.sleep(0.5)
        converged = time.monotonic() - started
        _published(wanted)
        time.sleep(10 * interval)
        pids = {ref: proc.pid for ref, proc in zip([supervisor, *refs], procs, strict=True)}
        before = {ref: _cpu_seconds(pid) for ref, pid in pids.items()}
        t0 = time.monotonic()
        time.sleep(window)
        elapsed = time.monotonic() - t0
        after = {ref: _cpu_seconds(pid) for ref, pid in pids.items()}
        still = real_problems(name, refs, supervisor, wanted)
        cpu: dict[str, float] = {}
        for ref in pids:
            start, end = before[ref], after[ref]
            if start is not None and end is not None:
                cpu[ref] = end - start
        node_cpu = [cpu[ref] for ref in refs if ref in cpu]
        return {
            "overlay": name, "nodes": nodes, "topics": len({t for ts in wanted.values() for t in ts}),
            "topics_per_node": [min(map(len, wanted.values())), max(map(len, wanted.values()))],
            "subscriptions": sum(len(ts) for ts in wanted.values()), "interval": interval,
            "window_seconds": round(elapsed, 2), "converged_after_seconds": round(converged, 1),
            "legitimate_at_end": not still,
            "node_cpu_percent_mean": 100 * statistics.fmean(node_cpu) / elapsed if node_cpu else None,
            "node_cpu_percent_max": 100 * max(node_cpu) / elapsed if node_cpu else None,
            "supervisor_cpu_percent": 100 * cpu[supervisor] / elapsed if supervisor in cpu else None,
            "pids": [proc.pid for proc in procs],
        }
    finally:
        _stop(procs)
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench overlays", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--topics", type=int)
    parser.add_argument("--min-topics", type=int)
    parser.add_argument("--max-topics", type=int)
    parser.add_argument("--popularity", choices=POPULARITIES, default="uniform")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--overlays", nargs="+", choices=OVERLAYS, default=list(OVERLAYS))
    parser.add_argument("--per-topic", type=int, help="publications per topic (quick 3, default 2)")
    parser.add_argument("--events", type=int, help="joins, leaves and crashes each (quick 3, default 2)")
    parser.add_argument("--idle", type=int, default=40,
                        help="intervals of each idle window (default 40: two of tco's 20-Timeout reminder cycles)")
    parser.add_argument("--dissemination", choices=("flood",), help="flood on every overlay")
    parser.add_argument("--max-intervals", type=int,
                        help="intervals a phase may take (default 400, or twice the nodes if more)")
    parser.add_argument("--wall-cap", type=float, default=3600.0, help="seconds per phase before giving up")
    parser.add_argument("--static-only", action="store_true", help="only the ideal overlays' static columns")
    parser.add_argument("--simulate", action="store_true", help="at the full size too, run the simulator")
    parser.add_argument("--cpu", action="store_true", help="also idle CPU per node with real processes")
    parser.add_argument("--cpu-nodes", type=int, default=24,
                        help="nodes per overlay for --cpu: the workload's first ones, with their topics (default 24)")
    parser.add_argument("--cpu-window", type=float, default=20.0, help="seconds of the CPU window")
    args = parser.parse_args(argv)
    quick = Shape(nodes=300, topics=40, min_topics=2, max_topics=18, popularity=args.popularity)
    base = quick if args.quick else Shape(popularity=args.popularity)
    shape = Shape(
        nodes=args.nodes or base.nodes, topics=args.topics or base.topics,
        min_topics=args.min_topics or base.min_topics, max_topics=args.max_topics or base.max_topics,
        popularity=args.popularity,
    )
    args.per_topic = args.per_topic or (3 if args.quick else 2)
    args.max_intervals = args.max_intervals or max(400, 2 * shape.nodes)
    args.events = args.events or (3 if args.quick else 2)
    simulated = not args.static_only and (args.quick or args.simulate or args.nodes is not None)
    began = time.monotonic()
    print(f"== overlays side by side: {shape.nodes} nodes, {shape.topics} topics, {shape.min_topics}-"
          f"{shape.max_topics} topics each, {shape.popularity} popularity, seed {args.seed}")
    for key, value in OPEN_PARAMETERS.items():
        print(f"   open parameter, {key}: {value}")
    print(f"   simulator: {'yes' if simulated else 'no (ideal overlays only)'}; delays 0.01-0.5 s, "
          f"interval 1 s, jitter 0.1, probe timeout 3 s, config budget 1")
    print(f"   tco supervisor: rho = {DEFAULT_RHO}, lambda = {DEFAULT_LAMBDA}, primal-dual backups, audit every "
          f"{DEFAULT_AUDIT_EVERY} Timeouts (its defaults); dissemination: each overlay's default"
          f"{' (flood forced)' if args.dissemination else ''}")
    if simulated:
        print(f"   publications: {args.per_topic} per topic, equal link delays 0.01 s; idle windows "
              f"{args.idle} intervals; repairs: {args.events} each of join, leave, crash")
    results: dict[str, Any] = {}
    for name in args.overlays:
        t0 = time.monotonic()
        entry: dict[str, Any] = {"ideal": ideal_static(shape, args.seed, name)}
        entry["ideal"]["seconds"] = round(time.monotonic() - t0, 1)
        print(f"   {name}: ideal overlay's static columns in {entry['ideal']['seconds']} s", flush=True)
        if simulated:
            entry.update(simulate(shape, args.seed, name, args))
        results[name] = entry
    print_table(results, simulated)
    cpu: dict[str, Any] = {}
    if args.cpu:
        interval = 0.3  # the daemons' default
        sample = cpu_sample(shape, args.seed, args.cpu_nodes)
        print(f"\n  idle CPU with real processes: a supervisor and the workload's first {len(sample)} nodes "
              f"per overlay, each in its topics ({len({t for ts in sample for t in ts})} topics, "
              f"{min(map(len, sample))}-{max(map(len, sample))} each, {sum(map(len, sample))} subscriptions), "
              f"interval {interval} s, window {args.cpu_window:g} s")
        for name in args.overlays:
            try:
                cpu[name] = real_cpu(name, sample, args.cpu_window, interval)
            except RuntimeError as exc:
                cpu[name] = {"overlay": name, "error": str(exc)}
                print(f"  {name}: {exc}")
                continue
            row = cpu[name]
            print(f"  {name:<10} node CPU mean {_fmt(row['node_cpu_percent_mean'])} % (max "
                  f"{_fmt(row['node_cpu_percent_max'])} %), supervisor {_fmt(row['supervisor_cpu_percent'])} %, "
                  f"{row['subscriptions']} subscriptions, legitimate after {row['converged_after_seconds']} s"
                  f"{'' if row['legitimate_at_end'] else ', NOT legitimate at the end'}", flush=True)
    ratio = None
    if "skipring" in results and "tco" in results:
        key = "static" if simulated else "ideal"
        ratio = results["tco"][key]["peers_mean"] / results["skipring"][key]["peers_mean"]
        verdict = "meets" if ratio <= TARGET_RATIO else "MISSES"
        print(f"\n  tco / skip ring, mean distinct peers: {ratio:.3f} ({verdict} paper 001's target of at most "
              f"{TARGET_RATIO}{'' if shape == Shape(popularity=args.popularity) else ', set for the full workload'})")
    print(f"  ({time.monotonic() - began:.0f} s)")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("overlays-quick.json" if args.quick else "overlays.json")
    out.write_text(json.dumps({
        "machine": machine(), "shape": asdict(shape), "seed": args.seed, "open_parameters": OPEN_PARAMETERS,
        "simulated": simulated, "tco_settings": {"rho": DEFAULT_RHO, "coverage": DEFAULT_LAMBDA,
                                                  "backup_method": "primal-dual"},
        "per_topic": args.per_topic, "events": args.events, "idle_intervals": args.idle,
        "ratio_peers_tco_over_skipring": ratio, "target_ratio": TARGET_RATIO, "overlays": results, "cpu": cpu,
        "seconds": round(time.monotonic() - began, 1),
    }, indent=1, default=str))
    print(f"written to {out}")


def _fmt(value: object, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isinf(value):
            return "split"
        return f"{value:.{digits}g}"
    return str(value)


def _repair_cell(action: str) -> Callable[[Mapping[str, Any]], object]:
    def cell(r: Mapping[str, Any]) -> object:
        done = r["repairs"][action]
        return f"{_fmt(done['repair_mean'])} ({_fmt(done['repair_per_topic'])})"
    return cell


def _repair_intervals(action: str) -> Callable[[Mapping[str, Any]], object]:
    def cell(r: Mapping[str, Any]) -> object:
        return r["repairs"][action]["intervals_mean"]
    return cell


def print_table(results: Mapping[str, Any], simulated: bool) -> None:
    names = list(results)
    rows: list[tuple[str, Callable[[Mapping[str, Any]], object]]] = []
    key = "static" if simulated else "ideal"
    rows += [
        ("subscriptions (node, topic)", lambda r: r[key]["subscriptions"]),
        ("distinct peers per node, mean", lambda r: r[key]["peers_mean"]),
        ("distinct peers per node, maximum", lambda r: r[key]["peers_max"]),
        ("distinct peers, mean of the 10% in most topics", lambda r: r[key]["peers_top10_mean"]),
        ("edges", lambda r: r[key]["edges"]),
        ("topic diameter, maximum (the topic's own edges)", lambda r: r[key]["diameter_max"]),
        ("topic diameter, mean over topics", lambda r: r[key]["diameter_mean"]),
        ("induced-subgraph diameter, maximum / mean",
         lambda r: f"{_fmt(r[key]['induced_diameter_max'])} / {_fmt(r[key]['induced_diameter_mean'])}"),
    ]
    if simulated:
        rows += [
            ("ideal overlay: peers mean / max (cross-check)",
             lambda r: f"{_fmt(r['ideal']['peers_mean'])} / {r['ideal']['peers_max']}"),
            ("build: intervals to legitimate and quiet", lambda r: r["build"]["intervals"]),
            ("build: messages", lambda r: r["build"]["messages"]),
            ("dissemination", lambda r: r["dissemination"]),
            ("messages per publication", lambda r: r["publications"]["messages_per_publication"]),
            ("messages per receiver", lambda r: r["publications"]["messages_per_receiver"]),
            ("hops, maximum / mean of per-publication maxima",
             lambda r: f"{r['publications']['hops_max']} / {_fmt(r['publications']['hops_max_mean'])}"),
            ("hops, mean over receivers", lambda r: r["publications"]["hops_mean"]),
            ("receivers missed by the broadcast", lambda r: r["publications"]["receivers_missed"]),
        ]
        for action in ("join", "leave", "crash"):
            rows.append((f"repair messages per {action} (per topic)", _repair_cell(action)))
            rows.append((f"  intervals to legitimate and quiet, {action}", _repair_intervals(action)))
        rows += [
            ("idle frames per node per interval, empty tries",
             lambda r: r["idle_before_publications"]["frames_per_node"]),
            ("idle frames per node per interval, after publications", lambda r: r["idle"]["frames_per_node"]),
            ("idle messages per node per interval, after publications", lambda r: r["idle"]["messages_per_node"]),
            ("supervisor messages per interval, empty tries",
             lambda r: r["idle_before_publications"]["supervisor_per_interval"]),
            ("supervisor messages per interval, after publications", lambda r: r["idle"]["supervisor_per_interval"]),
            ("wall seconds in the simulator", lambda r: r["wall_seconds"]),
        ]
    width = max(len(label) for label, _ in rows) + 2
    print(f"\n  {'measure':<{width}}" + "".join(f"{n:>16}" for n in names))
    print("  " + "-" * (width + 16 * len(names)))
    for label, get in rows:
        cells = []
        for n in names:
            try:
                cells.append(_fmt(get(results[n])))
            except (KeyError, TypeError):
                cells.append("-")
        print(f"  {label:<{width}}" + "".join(f"{c:>16}" for c in cells))
