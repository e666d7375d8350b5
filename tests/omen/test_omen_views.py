"""The peer-sampling and T-Man view updates (paper 003 §4.3, Alg. 3-4), and the churn
queue's decisions (Alg. 5)."""

from __future__ import annotations

import random

from pubsub.omen.churn import ChurnEvent, ChurnQueue
from pubsub.omen.sampling import PeerSampler
from pubsub.omen.tman import TMan
from pubsub.omen.views import Descriptor, LocalView, coverage


def d(node: str, topics: str = "", neighbours: tuple[str, ...] = (), version: int = 0) -> Descriptor:
    return Descriptor(node, frozenset(topics), frozenset(neighbours), version)


def test_a_shuffle_sends_the_oldest_peer_fresh_self_and_replaces_what_it_sent() -> None:
    rng = random.Random(1)
    a = PeerSampler("a", size=4, length=3)
    a.seed([d("b"), d("c"), d("d"), d("e"), d("f")])
    assert len(a.view) == 4 and "a" not in a.view  # bounded, never itself
    started = a.start_shuffle(d("a", version=7), rng)
    assert started is not None
    peer, sent = started
    assert peer not in a.view  # the oldest entry is taken out
    assert sent[0] == d("a", version=7) and len(sent) == 3
    b = PeerSampler(peer, size=4, length=3)
    b.seed([d("x"), d("y"), d("z")])
    answer = b.answer(sent, rng)
    b.merge(sent, answer)
    assert "a" in b.view and peer not in b.view and len(b.view) <= 4
    a.merge(answer, sent)
    assert len(a.view) <= 4 and "a" not in a.view
    assert set(a.view) >= {n.node for n in answer} - {"a"}


def test_a_newer_descriptor_replaces_an_older_one_and_never_the_reverse() -> None:
    s = PeerSampler("a")
    s.seed([d("b", "x", version=1)])
    s.merge([d("b", "xy", version=2)], [])
    assert s.view["b"].descriptor.topics == frozenset("xy")
    s.merge([d("b", "z", version=0)], [])
    assert s.view["b"].descriptor.topics == frozenset("xy")


def test_an_exchange_gives_the_predecessors_neighbours_and_ready_backups() -> None:
    """selectView (Alg. 4): N(v') is v''s neighbours as v' says; B(v') covers v''s topics λ
    times from the candidates of the buffer, sharing a topic each, and R(v') is set."""
    view = LocalView(d("me", "ab"), coverage_factor=2)
    view.keep(["p"])
    tman = TMan(view, PeerSampler("me"), t_wait=1)
    pred = d("p", "abc", ("q",), version=3)
    buffer = [pred, d("q", "ab"), d("r", "bc"), d("s", "ac"), d("t", "c"), d("u", "z")]
    tman.on_buffer(buffer, random.Random(0))
    assert view.N["p"] == frozenset({"q"})
    assert view.R["p"]
    chosen = [view.known[n] for n in view.B["p"]]
    assert coverage(pred.topics, chosen) >= 2
    assert "u" not in view.B["p"]  # shares no topic with p
    assert {x.node for x in view.get_view()} >= {"p", "q"}


def test_with_too_few_candidates_the_view_is_not_ready() -> None:
    view = LocalView(d("me"), coverage_factor=3)
    view.keep(["p"])
    view.select_view([d("p", "a"), d("q", "a")], random.Random(0))
    assert view.B["p"] == ["q"] and view.R["p"] is False


def test_the_predecessors_entries_go_when_it_is_no_longer_kept() -> None:
    view = LocalView(d("me"), coverage_factor=1)
    view.keep(["p"])
    view.select_view([d("p", "a"), d("q", "a")], random.Random(0))
    assert view.held() == 1
    assert view.keep(["x"]) == ["p"]
    assert view.held() == 0 and "q" not in view.known


def test_the_coordinator_queues_a_leave_and_takes_over_the_events_of_the_departed_coordinator() -> None:
    q = ChurnQueue(standby_timeout=5, ready_timeout=3)
    first = ChurnEvent("1:a", "leave", "a")
    q.handle(first, 0, coordinator="b", me="c")  # b coordinates a's leave; c stands by
    assert "1:a" in q.standby
    q.handle(ChurnEvent("2:b", "leave", "b"), 1, coordinator="c", me="c")  # b dies: c coordinates
    assert set(q.exe) == {"1:a", "2:b"}
    event = q.next_to_repair(2, ready=lambda n: True, in_range=lambda n: True)
    assert event == first  # the oldest local time first


def test_an_unready_view_waits_for_its_ready_timeout_then_repairs() -> None:
    q = ChurnQueue(standby_timeout=5, ready_timeout=3)
    q.handle(ChurnEvent("1:a", "leave", "a"), 0, coordinator="me", me="me")
    assert q.next_to_repair(2, ready=lambda n: False, in_range=lambda n: True) is None
    assert q.next_to_repair(3, ready=lambda n: False, in_range=lambda n: True) is not None
    assert q.unready == 1


def test_a_standby_event_moves_to_exeq_after_its_timer_only_when_in_range() -> None:
    q = ChurnQueue(standby_timeout=5, ready_timeout=3)
    q.handle(ChurnEvent("1:a", "leave", "a"), 0, coordinator="b", me="c")
    assert q.expire_standby(4, in_range=lambda n: True) == []
    assert q.expire_standby(5, in_range=lambda n: False) == []
    assert [e.id for e in q.expire_standby(10, in_range=lambda n: True)] == ["1:a"]
    q.done("1:a")
    q.handle(ChurnEvent("1:a", "leave", "a"), 11, coordinator="c", me="c")
    assert not q.exe and not q.standby  # a late copy of a handled event is ignored
