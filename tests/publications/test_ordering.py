"""The Sequencer (pubsub/publications/ordering.py): each publisher's publications go through in
their sequence order, a missing predecessor holds its followers back until their stream has been
quiet for `wait` seconds (or `max_wait` has passed),
and memory stays bounded."""

from __future__ import annotations

import random

import pytest

from pubsub.kernel.message import Ref, Topic
from pubsub.publications.messages import Publication
from pubsub.publications.ordering import Sequencer
from pubsub.publications.topicstate import Arrival, make_publication

T = Topic("t")
A, B = Ref("a:1"), Ref("b:1")


def chain(publisher: Ref, n: int, start: int = 10) -> list[Publication]:
    """n publications of one publisher, each naming the one before (the first none)."""
    out: list[Publication] = []
    prev = -1
    for seq in range(start, start + n):
        out.append(make_publication(publisher, seq, f"{publisher}-{seq}".encode(), prev=prev))
        prev = seq
    return out


def through(seqr: Sequencer, now: float) -> list[int]:
    return [a.publication.seq for _, a in seqr.release(now)]


def test_in_order_arrivals_go_through_at_once() -> None:
    s = Sequencer(wait=2.0)
    for p in chain(A, 5):
        s.push(T, Arrival(p, "tree"), 0.0)
    assert through(s, 0.0) == [10, 11, 12, 13, 14]
    assert s.counters["in_order"] == 5 and s.counters["waited"] == 0 and s.waiting == 0


def test_reversed_arrivals_are_released_in_sequence_order() -> None:
    s = Sequencer(wait=2.0)
    pubs = chain(A, 6)
    for p in reversed(pubs[1:]):
        s.push(T, Arrival(p, "anti_entropy"), 0.0)
    assert through(s, 0.1) == [] and s.waiting == 5
    s.push(T, Arrival(pubs[0], "anti_entropy"), 0.2)
    assert through(s, 0.2) == [10, 11, 12, 13, 14, 15]
    assert s.waiting == 0 and s.counters["released_late"] == 0


def test_random_interleaving_of_two_publishers_keeps_each_in_order() -> None:
    rng = random.Random(7)
    pubs = chain(A, 40) + chain(B, 40, start=100)
    rng.shuffle(pubs)
    s = Sequencer(wait=60.0, max_wait=60.0)
    released: list[Publication] = []
    for i, p in enumerate(pubs):
        s.push(T, Arrival(p, "anti_entropy"), float(i) * 0.01)
        released.extend(a.publication for _, a in s.release(float(i) * 0.01))
    assert len(released) == 80 and s.waiting == 0
    for publisher in (A, B):
        seqs = [p.seq for p in released if p.publisher == publisher]
        assert seqs == sorted(seqs)


def test_a_missing_predecessor_holds_back_until_its_stream_is_quiet_for_wait_seconds() -> None:
    s = Sequencer(wait=2.0)
    pubs = chain(A, 4)
    s.push(T, Arrival(pubs[0], "tree"), 0.0)
    s.push(T, Arrival(pubs[2], "tree"), 0.5)  # pubs[1] is lost
    s.push(T, Arrival(pubs[3], "tree"), 0.6)
    assert through(s, 0.6) == [10]
    # The stream's last arrival came at 0.6: not quiet for 2 s before 2.6.
    assert through(s, 2.5) == []
    assert through(s, 2.6) == [12, 13]
    assert s.counters["released_late"] == 1 and s.waiting == 0
    # The straggler, when it comes, goes through at once (its predecessor went through).
    s.push(T, Arrival(pubs[1], "anti_entropy"), 3.0)
    assert through(s, 3.0) == [11]


def test_a_stream_that_keeps_arriving_keeps_its_gaps_open_up_to_max_wait() -> None:
    """A late joiner's history comes by anti-entropy in key order over many rounds: while
    the stream makes progress its arrivals wait for their predecessors (longer than
    `wait`), but never longer than `max_wait`."""
    s = Sequencer(wait=1.0, max_wait=10.0)
    pubs = chain(A, 30)
    order = list(reversed(pubs[1:]))  # every arrival waits for the one after it in the list
    now = 0.0
    for p in order[:20]:
        now += 0.5  # one arrival every 0.5 s: never quiet for 1 s
        s.push(T, Arrival(p, "anti_entropy"), now)
        assert through(s, now) == []
    assert s.waiting == 20
    for p in order[20:]:
        now += 0.5
        s.push(T, Arrival(p, "anti_entropy"), now)
    s.push(T, Arrival(pubs[0], "anti_entropy"), now)
    assert through(s, now) == list(range(10, 40))
    assert s.counters["released_late"] == 0
    # A gap that is never filled while the stream keeps arriving: out at max_wait.
    more = chain(A, 25, start=41)  # 41 never comes
    start = now
    for p in more[1:20]:
        s.push(T, Arrival(p, "tree"), now)
        assert through(s, now) == []
        now += 0.5
    assert now - start < 10.0
    assert through(s, start + 10.0) == list(range(42, 61))
    assert s.counters["released_late"] == 1


def test_a_quiet_stream_is_released_sorted_by_sequence_number() -> None:
    s = Sequencer(wait=2.0)
    pubs = chain(A, 8)
    s.push(T, Arrival(pubs[0], "tree"), 0.0)
    for p in (pubs[5], pubs[3], pubs[7], pubs[4]):  # 11, 12 and 16 never come
        s.push(T, Arrival(p, "anti_entropy"), 0.0)
    assert through(s, 1.9) == [10]
    assert through(s, 2.0) == [13, 14, 15, 17]
    # 13 (after the lost 12) and 17 (after the lost 16) overtook their predecessors.
    assert s.counters["released_late"] == 2


def test_a_stream_new_to_this_node_waits_for_its_history_up_to_max_wait() -> None:
    """A node that just joined hears a publisher's newest publication before anti-entropy
    brings the ones before it: quiet says nothing then, only `max_wait` releases it."""
    s = Sequencer(wait=2.0, max_wait=30.0)
    pubs = chain(A, 5)
    s.push(T, Arrival(pubs[4], "tree"), 0.0)
    assert through(s, 29.9) == []
    for p in pubs[:4]:
        s.push(T, Arrival(p, "anti_entropy"), 29.9)
    assert through(s, 29.9) == [10, 11, 12, 13, 14]
    s.push(T, Arrival(chain(B, 3)[2], "tree"), 30.0)  # B's history never comes
    assert through(s, 59.9) == []
    assert through(s, 60.0) == [12]
    assert s.counters["released_late"] == 1


def test_stored_and_admitted_publications_count_as_through() -> None:
    s = Sequencer(wait=2.0)
    pubs = chain(A, 3)
    s.known(T, pubs[0])  # restored from the store
    s.push(T, Arrival(pubs[1], "tree"), 0.0)
    assert through(s, 0.0) == [11]
    other = chain(B, 2)
    s.admit(T, Arrival(other[1], "local"))  # must be written now, whatever came before
    assert through(s, 0.0) == [other[1].seq]


def test_the_waiting_room_is_bounded() -> None:
    s = Sequencer(wait=100.0, max_wait=100.0, limit=10)
    pubs = chain(A, 30)
    for p in pubs[1:]:  # every one waits for its predecessor; none can go through
        s.push(T, Arrival(p, "anti_entropy"), 0.0)
    assert s.waiting <= 10
    released = through(s, 0.0)
    assert len(released) + s.waiting == 29
    assert s.counters["released_late"] >= 1


def test_topics_are_sequenced_separately() -> None:
    s = Sequencer(wait=2.0)
    pubs = chain(A, 2)
    s.push(Topic("u"), Arrival(pubs[0], "tree"), 0.0)
    s.push(T, Arrival(pubs[1], "tree"), 0.0)  # its predecessor went through in another topic
    assert [(t, a.publication.seq) for t, a in s.release(0.0)] == [(Topic("u"), 10)]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        Sequencer(wait=-1)
    with pytest.raises(ValueError):
        Sequencer(limit=0)
    with pytest.raises(ValueError):
        Sequencer(wait=5.0, max_wait=1.0)
