"""Reading simulated systems for the tests and the benchmark: snapshots and legitimacy.

Legitimacy is judged by the independent checker (`tests.checker`), never by the protocol
code: a topic is legitimate when the supervisor's members are exactly the subscribers that
want the topic, their labels are l(0..n-1), every member's explicit edges equal SR(n), and
the channels hold nothing a legitimate run could not have sent (paper 000 §1.1: a state
includes the messages in the channels; a stale message in flight is an implicit edge that
is still wrong).
"""

from __future__ import annotations

from typing import Any

from pubsub.kernel.message import Ref, Send, Topic
from pubsub.sim.world import Simulation
from pubsub.skipring.messages import Contact, RemoveConnections, SetData, Unsubscribe
from tests.checker import NodeState, canonical_label_problems, compare, ideal_skip_ring

NodeStates = dict[Ref, dict[str, object]]


def snapshot(sim: Simulation, topic: Topic) -> tuple[dict[Ref, str], NodeStates]:
    """(supervisor members ref -> label bits, node ref -> its state for the topic)."""
    db = sim.supervisor.topics.get(topic)
    members = {ref: label.bits for label, ref in db.members() if ref is not None} if db else {}
    states = {
        ref: node.instances[topic].status()
        for ref, node in sim.nodes.items()
        if topic in node.instances
    }
    return members, states


def subscribers(sim: Simulation, topic: Topic) -> set[Ref]:
    """The live processes that want `topic`."""
    return {ref for ref, node in sim.nodes.items() if topic in node.wanted_topics}


def problems(sim: Simulation, topic: Topic) -> list[str]:
    """Everything that keeps the topic from being exactly SR(n); [] when legitimate."""
    members, states = snapshot(sim, topic)
    found = compare({str(r): bits for r, bits in members.items()}, {str(r): st for r, st in states.items()})
    wanted = subscribers(sim, topic)
    if set(members) != wanted:
        found.append(
            f"members differ from subscribers: missing {sorted(wanted - set(members))[:5]},"
            f" extra {sorted(set(members) - wanted)[:5]}"
        )
    db = sim.supervisor.topics.get(topic)
    if db is not None and db.without_subscriber:
        found.append("database holds tuples without subscriber")
    return found


def in_flight_problems(sim: Simulation, topic: Topic) -> list[str]:
    """Messages in flight that disagree with the current members and database."""
    members, _ = snapshot(sim, topic)
    db = sim.supervisor.topics.get(topic)
    found = []
    for src, dest, msg in sim.in_flight():
        if getattr(msg, "topic", topic) != topic:
            continue
        for value in vars_of(msg):
            if isinstance(value, Contact) and members.get(value.ref) != value.label.bits:
                found.append(f"in flight {src}->{dest}: {msg} carries a wrong contact {value}")
        if isinstance(msg, RemoveConnections) and msg.ref in members:
            found.append(f"in flight {src}->{dest}: {msg} would cut a member")
        if isinstance(msg, Unsubscribe) and msg.ref in members and msg.ref in subscribers(sim, topic):
            found.append(f"in flight: {msg} of a member that wants the topic")
        if isinstance(msg, SetData) and db is not None:
            label = db.label_of(dest)
            expected = (None, None) if label is None else db.neighbours(label)
            if msg.label != label or (msg.pred, msg.succ) != expected:
                found.append(f"in flight to {dest}: {msg} disagrees with the database")
    return found


def vars_of(msg: object) -> list[object]:
    return [getattr(msg, name) for name in getattr(msg, "__slots__", ())]


def labels_settled(sim: Simulation, topic: Topic) -> bool:
    """Cheap necessary condition: members are the subscribers and hold their labels."""
    db = sim.supervisor.topics.get(topic)
    if db is None or len(db) != len(subscribers(sim, topic)):
        return False
    for ref, node in sim.nodes.items():
        instance = node.instances.get(topic)
        if instance is not None and instance.label != db.label_of(ref):
            return False
    return True


def is_legitimate_full(sim: Simulation, topic: Topic) -> bool:
    """`is_legitimate` the long way: every problem listed, then asked whether there was any
    (what `is_legitimate` returned before it took the shortcuts; tests compare the two)."""
    return (
        labels_settled(sim, topic)
        and not in_flight_problems(sim, topic)
        and not problems(sim, topic)
    )


def is_legitimate(sim: Simulation, topic: Topic) -> bool:
    """Exactly SR(n), channels included: the same verdict as `is_legitimate_full`, reached
    in one pass that stops at the first difference.  It reads the supervisor's table and the
    cores' fields directly instead of building their JSON snapshots twice, and takes the
    ideal from the independent oracle (`tests.checker.ideal_skip_ring`) once per membership
    (`_ideal`), so a check costs O(n + messages in flight) simple steps -- what lets the
    benchmark check 10^5 subscribers after every interval."""
    db = sim.supervisor.topics.get(topic)
    nodes = sim.nodes
    # labels_settled: the members are the subscribers and hold their labels.
    wanted = subscribers(sim, topic)
    if db is None or len(db) != len(wanted):
        return False
    for ref, node in nodes.items():
        instance = node.instances.get(topic)
        if instance is not None and instance.label != db.label_of(ref):
            return False
    # problems: the database (one label per subscriber, none without) ...
    if db.without_subscriber or len(db.labels_of) != len(db):
        return False
    members: dict[str, str] = {ref: label.bits for label, ref in dict.items(db.by_label)}
    if members.keys() != wanted:
        return False
    ideal = _ideal(members)
    if ideal is None:
        return False
    # ... and every instance's explicit edges (status(): label, left, right, ring, shortcuts).
    running = 0
    for ref, node in nodes.items():
        instance = node.instances.get(topic)
        if instance is None:
            continue
        running += 1
        want = ideal.get(ref)
        if want is None or instance.label is None or instance.label.bits != want["label"]:
            return False
        for key, contact in (("left", instance.left), ("right", instance.right), ("ring", instance.ring)):
            if (None if contact is None else (contact.label.bits, contact.ref)) != want[key]:
                return False
        shortcuts = instance.shortcuts
        expected: dict[str, str] = want["shortcuts"]
        if len(shortcuts) != len(expected):
            return False
        for label, holder in shortcuts.items():
            if expected.get(label.bits) != holder or holder is None:
                return False
    if running != len(ideal):
        return False
    # in_flight_problems: nothing in the channels a legitimate run could not have sent.
    for _src, dest, msg in sim.in_flight():
        if getattr(msg, "topic", topic) != topic:
            continue
        for value in vars_of(msg):
            if isinstance(value, Contact) and members.get(value.ref) != value.label.bits:
                return False
        if isinstance(msg, RemoveConnections) and msg.ref in members:
            return False
        if isinstance(msg, Unsubscribe) and msg.ref in members and msg.ref in wanted:
            return False
        if isinstance(msg, SetData):
            held = db.label_of(dest)
            expected_pair = (None, None) if held is None else db.neighbours(held)
            if msg.label != held or (msg.pred, msg.succ) != expected_pair:
                return False
    return True


#: The last membership whose ideal was built, and that ideal (None: not a valid membership).
_IDEAL_CACHE: list[tuple[dict[str, str], dict[str, NodeState] | None]] = []


def _ideal(members: dict[str, str]) -> dict[str, NodeState] | None:
    """`ideal_skip_ring(members)` when the labels are exactly l(0..n-1), else None; the last
    one is kept, so a run whose membership settled builds it once."""
    if _IDEAL_CACHE and _IDEAL_CACHE[0][0] == members:
        return _IDEAL_CACHE[0][1]
    ideal: dict[str, NodeState] | None = None
    if not canonical_label_problems(members):
        ideal = ideal_skip_ring(members)
    _IDEAL_CACHE[:] = [(dict(members), ideal)]
    return ideal


def references_to(sim: Simulation, topic: Topic, target: Ref) -> list[Ref]:
    """Nodes whose explicit edges for `topic` still point at `target`."""
    return [
        ref
        for ref, node in sim.nodes.items()
        if topic in node.instances and target in set(node.instances[topic].contacts())
    ]


def converge(sim: Simulation, topic: Topic, max_intervals: int) -> int:
    """Run until the topic is legitimate; the number of timeout intervals it took."""
    took = sim.run_intervals_until(lambda: is_legitimate(sim, topic), max_intervals)
    assert took is not None, (
        f"not legitimate after {max_intervals} intervals: "
        f"{(problems(sim, topic) + in_flight_problems(sim, topic))[:8]}"
    )
    return took


#: Kinds a legitimate ring never sends by itself; they flow only while something is repaired.
REPAIR_KINDS = frozenset(
    ("subscribe", "unsubscribe", "linearize", "introduce", "remove_connections")
)


def quiescent(sim: Simulation, topic: Topic) -> bool:
    """Legitimate, with no repair traffic left in flight."""
    if any(msg.kind in REPAIR_KINDS for _, _, msg in sim.in_flight()):
        return False
    return is_legitimate(sim, topic)


def settle(sim: Simulation, topic: Topic, max_intervals: int) -> int:
    """Run until quiescent; the number of timeout intervals it took."""
    took = sim.run_intervals_until(lambda: quiescent(sim, topic), max_intervals)
    assert took is not None, f"not quiescent after {max_intervals} intervals"
    return took



def retention_changed(supervisor: Any, topic: Topic, *, purge_ms: int | None = None, **limits: Any) -> list[Send]:
    """What the supervisor daemon does for `pubsub retention` (`pubsub.supervisor.app`): change
    the topic's settings in the core's table (a purge at `purge_ms`, or `limits`), then send
    them to its members."""
    if purge_ms is not None:
        supervisor.retention.purge(topic, purge_ms)
    else:
        supervisor.retention.set(topic, **limits)
    sends: list[Send] = supervisor.retention.announce(topic, supervisor.member_refs(topic))
    return sends
