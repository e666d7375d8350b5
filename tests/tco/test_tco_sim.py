"""The `tco` overlay in the simulator (`pubsub.tco`, on `pubsub.sim.world`).

Legitimacy is judged here from the definition, with the independent checker
(`tests.tco.checker`, no code shared with the cores): every live node's table holds it in
exactly the topics it wants, with the neighbours the supervisor's record gives it; the
record's nodes are exactly the live subscribers; its edges make a TCO; every backup shares
a topic with its node and the primaries are the reverse of the backups.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

from pubsub.kernel.message import Ref, Topic
from pubsub.publications.messages import CheckTrie
from pubsub.sim.world import SUPERVISOR, Simulation
from pubsub.tco.messages import Neighbourhood, Peers, TcoNotNeighbour, TcoSubscribe, TcoSuspect, TcoTable, TopicSet
from tests.tco.checker import split_topics


def oracle(sim: Simulation) -> list[str]:
    """Why the simulation is not in tco's legitimate state ([] when it is)."""
    record = sim.supervisor.status()["tables"]
    problems = []
    wanted = {ref: node.wanted_topics for ref, node in sim.nodes.items() if node.wanted_topics}
    if set(record) != set(wanted):
        problems.append(f"record holds {sorted(record)}, subscribers are {sorted(wanted)}")
    edges = {tuple(sorted((a, b))) for a, entry in record.items() for b in entry["neighbours"]}
    for a, b in edges:
        if a not in record or b not in record:
            problems.append(f"edge {a}-{b} names no node")
    if not problems:
        split = split_topics({ref: entry["topics"] for ref, entry in record.items()}, edges)
        if split:
            problems.append(f"split topics {split}")
    reverse: dict[str, set[str]] = {}
    for ref, entry in record.items():
        for backup in entry["backups"]:
            reverse.setdefault(backup, set()).add(ref)
            if backup not in record or not set(record[backup]["topics"]) & set(entry["topics"]):
                problems.append(f"{ref}'s backup {backup} shares no topic or is no node")
    for ref, entry in record.items():
        if set(entry["primaries"]) != reverse.get(ref, set()):
            problems.append(f"{ref}'s primaries are not the reverse of the backups")
    for ref, topics in wanted.items():
        overlay = sim.nodes[ref].overlay
        entry = record.get(ref)
        if entry is None:
            continue
        if sorted(topics) != entry["topics"] or overlay.table_topics != frozenset(topics):
            problems.append(f"{ref} wants {sorted(topics)}, its table holds {overlay.table_topics}")
        held = {u: sorted(ts) for u, ts in overlay.table_neighbours.items()}
        if held != entry["neighbours"]:
            problems.append(f"{ref} holds {held}, the record {entry['neighbours']}")
        if overlay.unreachable:
            problems.append(f"{ref} cannot reach {sorted(overlay.unreachable)}")
    return problems


def converge(sim: Simulation, intervals: int = 120) -> int:
    done = sim.run_intervals_until(lambda: not oracle(sim), intervals)
    assert done is not None, oracle(sim)[:5]
    return done


def subscribe_all(sim: Simulation, n: int, topics: int, seed: int, low: int = 1, high: int = 4) -> dict[Ref, list[Topic]]:
    rng = random.Random(seed)
    names = [Topic(f"t{i}") for i in range(topics)]
    chosen = {}
    for _ in range(n):
        ref = sim.add_node()
        chosen[ref] = rng.sample(names, rng.randint(low, min(high, topics)))
        for topic in chosen[ref]:
            sim.join(ref, topic)
    return chosen


def record_edges(sim: Simulation) -> set[tuple[str, str]]:
    return set(sim.supervisor.overlay.edges())


def tco(n: int, topics: int, seed: int, **options: object) -> tuple[Simulation, dict[Ref, list[Topic]]]:
    sim = Simulation(seed, overlay="tco", **options)  # type: ignore[arg-type]
    chosen = subscribe_all(sim, n, topics, seed)
    converge(sim)
    return sim, chosen


@pytest.mark.parametrize("n,topics", [(1, 1), (2, 1), (12, 3), (40, 8)])
def test_a_fresh_tco_becomes_legitimate_and_stays_so(n: int, topics: int) -> None:
    sim, _ = tco(n, topics, seed=n)
    edges, counters = record_edges(sim), dict(sim.supervisor.counters)
    sim.run_for(20 * sim.interval)
    assert oracle(sim) == []
    assert record_edges(sim) == edges  # closure: without churn no edge changes
    assert sim.supervisor.counters["edges_added"] == counters["edges_added"]


def test_a_topic_with_one_subscriber_gets_no_edges_or_backups() -> None:
    sim = Simulation(3, overlay="tco")
    alone = sim.add_node()
    sim.join(alone, Topic("solo"))
    converge(sim)
    entry = sim.supervisor.status()["tables"][alone]
    assert entry["neighbours"] == {} and entry["backups"] == []
    assert sim.supervisor.backups.short.get(alone) == {"solo": 3}  # λ unreachable, shown


@pytest.mark.parametrize("flooding", [True, False], ids=["flood", "anti-entropy-alone"])
def test_every_publication_reaches_every_live_subscriber(flooding: bool) -> None:
    sim, chosen = tco(30, 6, seed=5, flooding=flooding)
    rng = random.Random(5)
    sent: dict[Topic, int] = {}
    for i in range(20):
        ref = rng.choice(sorted(chosen))
        topic = rng.choice(chosen[ref])
        sim.publish(ref, topic, f"p{i}".encode())
        sent[topic] = sent.get(topic, 0) + 1

    def delivered() -> bool:
        return all(
            len(sim.nodes[ref].publications[t].trie) == sent.get(t, 0) for ref, ts in chosen.items() for t in ts
        )

    assert sim.run_intervals_until(delivered, 60 if flooding else 200) is not None
    if not flooding:
        assert sim.traffic.by_kind["publish_new"] == 0


def join_at_once(sim: Simulation, ref: Ref, topics: list[Topic]) -> None:
    """`ref` asks for all its topics in one TcoSubscribe (one join repair, not a join and
    topic changes): the node wants every topic before it tells its supervisor."""
    overlay = sim.nodes[ref].overlay
    for topic in topics[:-1]:
        overlay.wanted_topics.add(topic)
        overlay.running.add(topic)
    sim.join(ref, topics[-1])


def _shadow(sim: Simulation, node: str) -> set[str]:
    record = sim.supervisor
    return set(record.overlay.neighbors[node]) | set(record.backups.backups.get(node, []))


@pytest.mark.parametrize("seed", range(20))
def test_churn_keeps_a_tco_and_the_shadows_repair_stays_in_its_shadow_set(seed: int) -> None:
    """Joins, leaves and crashes, one at a time: after each the state converges to a TCO;
    a leave's or crash's new edges lie inside the shadow set and only the departed node's
    edges go; a join's new edges go from the joiner to its backups.  A round may widen
    (`Repair.widened`) only where the node's backups fell short of covering its topics
    (Alg. 12 l.8 never takes a candidate of weight 0)."""
    rng = random.Random(seed)
    sim, chosen = tco(16, 5, seed=seed, probe_timeout=2.0)
    supervisor = sim.supervisor
    names = [Topic(f"t{i}") for i in range(5)]
    strict = 0
    for _ in range(6):
        before = record_edges(sim)
        widened = supervisor.counters["repairs_widened"]
        event = rng.choice(["join", "leave", "crash"]) if len(chosen) > 4 else "join"
        if event == "join":
            ref = sim.add_node()
            chosen[ref] = rng.sample(names, rng.randint(1, 3))
            join_at_once(sim, ref, chosen[ref])
            converge(sim)
            short = supervisor.backups.short.get(ref)
        else:
            ref = rng.choice(sorted(chosen))
            shadow, short = _shadow(sim, ref), supervisor.backups.short.get(ref)
            if event == "leave":  # all its topics in one TcoSubscribe: one leave repair
                sim.nodes[ref].overlay.wanted_topics.intersection_update(chosen[ref][-1:])
                sim.leave(ref, chosen[ref][-1])
            else:
                sim.crash(ref)
            del chosen[ref]
            converge(sim)
        after = record_edges(sim)
        if supervisor.counters["repairs_widened"] > widened:
            assert short, f"{event} of {ref} widened with backups covering every topic"
            continue
        strict += 1
        if event == "join":
            backups = set(supervisor.backups.backups.get(ref, []))
            assert all(ref in e and (set(e) - {ref}) <= backups for e in after - before), (after - before, backups)
            assert before <= after  # a join removes nothing
        else:
            assert before - after == {e for e in before if ref in e}  # only its edges go
            assert all(set(e) <= shadow for e in after - before), (after - before, shadow)
    assert strict >= 3


def test_a_node_that_changes_its_topics_is_repaired_and_keeps_serving_until_let_go() -> None:
    sim, chosen = tco(20, 4, seed=9)
    ref = sorted(chosen)[0]
    dropped = chosen[ref][0]
    sim.leave(ref, dropped)
    assert sim.nodes[ref].overlay.runs(dropped)  # serves until its table drops it
    sim.join(ref, Topic("t-new"))
    converge(sim)
    assert not sim.nodes[ref].overlay.runs(dropped)
    assert dropped not in sim.nodes[ref].publications
    assert dropped not in sim.supervisor.overlay.topics[ref]


def test_from_corrupted_states_at_200_nodes_it_converges_and_then_nothing_changes() -> None:
    """A damaged record (edges removed, foreign edges, wrong backups), wrong node tables and
    junk in flight: the audit and the round robin bring every table to the record, a TCO;
    then 100 intervals change nothing, with the supervisor within its budget."""
    sim = Simulation(200, overlay="tco", config_budget=4)
    chosen = subscribe_all(sim, 200, 30, seed=200, low=2, high=6)
    converge(sim, 200)
    rng = random.Random(200)
    damage = sim.supervisor.corrupt(None, rng)
    assert sum(sum(done.values()) for done in damage.values()) > 100
    assert oracle(sim)  # the record is no TCO with valid backups any more
    refs = sorted(chosen)
    for ref in rng.sample(refs, 60):  # wrong tables: strangers, the node itself, no shared topic
        strangers = rng.sample(refs, 3)
        bad = Neighbourhood(tuple((Ref(s), TopicSet((Topic("t0"), Topic("nowhere")))) for s in [*strangers, ref]))
        sim.inject(ref, TcoTable(TopicSet(tuple(sorted(chosen[ref]))), bad, Peers((ref,)), Peers(())))
    for _ in range(40):  # junk: subscriptions in others' names, wrong tables in flight
        victim = rng.choice(refs)
        sim.inject(SUPERVISOR, TcoSubscribe(victim, TopicSet(tuple(sorted(chosen[victim])))), src=victim)
        sim.inject(victim, TcoTable(None, Neighbourhood(()), Peers(()), Peers(())))
    intervals = converge(sim, 400)
    print(f"converged from the corrupted state in {intervals} intervals")
    assert sim.supervisor.counters["audit_repairs"] >= 1  # the audit mended the record
    edges = record_edges(sim)
    start = sim.traffic.from_supervisor.copy()
    sim.run_for(100 * sim.interval)
    assert oracle(sim) == [] and record_edges(sim) == edges
    sent = sum((sim.traffic.from_supervisor - start).values())
    assert sent <= 100 * 4 * 1.2, sent  # the round robin's budget (4 tables per Timeout), jitter aside


def test_a_publication_message_from_a_peer_outside_the_table_is_refused_and_the_sender_asks() -> None:
    sim, chosen = tco(12, 2, seed=4)
    topic = Topic("t0")
    members = sorted(r for r, ts in chosen.items() if topic in ts)
    receiver = members[0]
    stranger = next(r for r in members[1:] if r not in sim.nodes[receiver].overlay.table_neighbours)
    asked = sim.traffic.to_supervisor["tco_subscribe"]
    effects = sim.nodes[receiver].handle(CheckTrie(topic, stranger, []), sim.now)
    assert [type(e.msg) for e in effects] == [TcoNotNeighbour]  # type: ignore[union-attr]
    sim.carry_out(receiver, effects)
    sim.run_for(1.0)
    assert sim.nodes[stranger].overlay.counters["refusals_heard"] == 1
    assert sim.traffic.to_supervisor["tco_subscribe"] > asked  # it asks, not drops
    assert sim.nodes[receiver].overlay.counters["refused_senders"] == 1


def test_table_entries_naming_the_node_twice_or_sharing_no_topic_are_dropped_and_counted() -> None:
    sim = Simulation(1, overlay="tco")
    ref = sim.add_node()
    sim.join(ref, Topic("a"))
    overlay = sim.nodes[ref].overlay
    table = TcoTable(
        TopicSet((Topic("a"),)),
        Neighbourhood(((ref, TopicSet((Topic("a"),))), (Ref("x:1"), TopicSet((Topic("a"),))),
                       (Ref("x:1"), TopicSet((Topic("a"),))), (Ref("y:1"), TopicSet((Topic("b"),))))),
        Peers((ref, Ref("x:1"), Ref("x:1"))),
        Peers(()),
    )
    sim.nodes[ref].handle(table, 0.0)
    assert overlay.table_neighbours == {"x:1": frozenset({"a"})}
    assert overlay.backups == ("x:1",)
    assert overlay.counters["table_entries_dropped"] == 5


def _journaled(rows: dict[tuple[str, str], str], changes: Iterable[tuple[str, str, str | None]]) -> None:
    for topic, label, value in changes:
        if value is None:
            rows.pop((topic, label), None)
        else:
            rows[(topic, label)] = value


def test_a_supervisor_restarted_on_its_store_holds_the_same_record_and_changes_no_edge() -> None:
    from pubsub.tco.supervisor import TcoSupervisor, member_key

    rng = random.Random(8)
    first = TcoSupervisor(Ref("sup:1"), rng=random.Random(1))
    rows: dict[tuple[str, str], str] = {}
    names = [f"t{i}" for i in range(6)]
    refs = [f"n{i}:1" for i in range(25)]
    for ref in refs:
        first.handle(TcoSubscribe(Ref(ref), TopicSet(tuple(sorted(rng.sample(names, rng.randint(1, 3)))))), 0.0)
        _journaled(rows, first.drain_changes())
    for ref in refs[:5]:
        first.handle(TcoSubscribe(Ref(ref), TopicSet(())), 1.0)
        _journaled(rows, first.drain_changes())
    first.handle(TcoSubscribe(Ref(refs[7]), TopicSet(("t0", "t5"))), 2.0)  # type: ignore[arg-type]
    _journaled(rows, first.drain_changes())
    assert all(member_key(label) == label for _, label in rows)
    second = TcoSupervisor(Ref("sup:1"), rng=random.Random(2))
    second.load([(t, label, ref) for (t, label), ref in rows.items()])
    assert second.drain_changes() == []  # what was stored is what it holds
    assert second.overlay.edges() == first.overlay.edges()
    assert second.overlay.topics == first.overlay.topics
    assert {n: sorted(b) for n, b in second.backups.backups.items() if b} == {
        n: sorted(b) for n, b in first.backups.backups.items() if b
    }
    assert second.audit() == {}  # a TCO with valid backups: nothing to mend
    assert second.overlay.edges() == first.overlay.edges()


def test_a_store_with_rows_that_contradict_each_other_is_cleaned_on_load() -> None:
    from pubsub.tco.supervisor import TcoSupervisor

    core = TcoSupervisor(Ref("sup:1"), rng=random.Random(1))
    core.load([
        ("a", "m n1:1", "n1:1"), ("a", "m n2:1", "n2:1"),
        ("a", "e n1:1 n9:1", "n1:1"),  # an edge to no node
        ("a", "b n1:1 n9:1", "n1:1"),  # a backup that is no node
        ("a", "e n1:1 n2:1", "n2:1"),  # an edge stored under the wrong endpoint
    ])
    deleted = {(t, label) for t, label, value in core.drain_changes() if value is None}
    assert deleted == {("a", "e n1:1 n9:1"), ("a", "b n1:1 n9:1"), ("a", "e n1:1 n2:1")}
    assert core.overlay.edges() == set()
    core.audit()
    assert core.overlay.is_topic_connected()


def test_a_node_removed_as_crashed_while_alive_is_told_and_joins_again() -> None:
    """A false suspicion: the victim's pongs are lost, so the supervisor runs the crash
    repair on a live node; it is told it is in no topic, names its topics again, and the
    overlay holds it once more."""
    sim, chosen = tco(12, 3, seed=13, probe_timeout=2.0)
    victim, reporter = sorted(chosen)[:2]
    node = sim.nodes[victim]
    real_handle = node.overlay.handle
    node.overlay.handle = lambda msg, now, rng: [] if type(msg).__name__ == "TcoPing" else real_handle(msg, now, rng)
    sim.inject(SUPERVISOR, TcoSuspect(reporter, victim), src=reporter)
    assert sim.run_intervals_until(lambda: sim.supervisor.counters["crashes_detected"] == 1, 20) is not None
    node.overlay.handle = real_handle
    converge(sim)
    assert sorted(sim.supervisor.overlay.topics[victim]) == sorted(chosen[victim])


def test_a_live_node_the_record_lost_is_learnt_again_from_its_reminder() -> None:
    """The record drops a node it never heard leave (a supervisor that lost its store is
    the same state for every node): the node's table still agrees with what it wants, and
    its periodic reminder (`TcoSubscribe.refresh`) makes the supervisor join it again."""
    from pubsub.tco.overlay import REFRESH_EVERY

    sim, chosen = tco(12, 3, seed=17)
    victim = sorted(chosen)[3]
    sim.supervisor.dynamic.leave(victim)  # forgotten: nobody tells the victim
    sim.supervisor.overlay.touched.clear()
    sim.supervisor.backups.touched.clear()
    assert oracle(sim)
    assert converge(sim, 3 * REFRESH_EVERY) <= 2 * REFRESH_EVERY
    assert sorted(sim.supervisor.overlay.topics[victim]) == sorted(chosen[victim])


def test_a_table_overtaken_by_an_older_one_is_sent_again_on_the_reminder() -> None:
    """Channels need not keep order: a node whose topics agree may end up holding an older
    table than the record's (here: the table of a node that since got a new neighbour).  Its
    reminder carries its table's digest; the supervisor answers a different one with the
    record's table, so the node holds it again within one reminder cycle -- and a reminder
    that matches is not answered."""
    from pubsub.tco.overlay import REFRESH_EVERY

    sim, _ = tco(60, 8, seed=19)
    # the node with neighbours whose turn in the one-table round robin is furthest away
    order = sorted(sim.supervisor.overlay.topics)
    turn = sim.supervisor._turn % len(order)
    victim = next(Ref(order[(turn - k) % len(order)]) for k in range(1, len(order) + 1)
                  if sim.nodes[Ref(order[(turn - k) % len(order)])].overlay.table_neighbours)
    overlay = sim.nodes[victim].overlay
    current = sim.supervisor.table(victim)
    older = TcoTable(current.topics, Neighbourhood(current.neighbours[1:]), current.backups, current.primaries)
    sim.inject(victim, older, src=SUPERVISOR)
    for _ in range(100):  # until it arrives (the simulator's delays are at most 0.5 s)
        if len(overlay.table_neighbours) < len(current.neighbours):
            break
        sim.run_for(0.01)
    assert overlay.settled() and oracle(sim), "the older table is held and its topics agree"
    assert converge(sim, 3 * REFRESH_EVERY) <= REFRESH_EVERY + 2
    assert sim.supervisor.counters["stale_tables"] >= 1
    stale = sim.supervisor.counters["stale_tables"]
    sim.run_for(2 * REFRESH_EVERY * sim.interval)  # every node reminds twice
    assert sim.supervisor.counters["stale_tables"] == stale  # matching reminders get no table
    assert not oracle(sim)
