"""Coalescing the Spreads of one batch (`pubsub.skipring.batching`)."""

from __future__ import annotations

from pubsub.kernel.message import Ref, Send, Topic
from pubsub.skipring.antientropy import PUBLICATION_OVERHEAD, make_publication
from pubsub.skipring.batching import coalesce
from pubsub.skipring.fields import MAX_PUBLICATIONS
from pubsub.skipring.messages import Ping, Position, Spread

T = Topic("t")
ME = Ref("h:1")


def spread(dest: str, seq: int, start: int = 1, end: int = 0, hops: int = 1, size: int = 10) -> Send:
    p = make_publication(ME, seq, bytes(size))
    return Send(Ref(dest), Spread(T, ME, Position(start), Position(end), 5, hops, [p]))


def seqs(send: Send) -> list[int]:
    assert isinstance(send.msg, Spread)
    return [p.seq for p in send.msg.publications]


def test_spreads_to_one_neighbour_on_one_arc_become_one_frame() -> None:
    sends = [spread("a:1", 0), spread("b:1", 0, start=7), spread("a:1", 1), Send(Ref("a:1"), Ping(3)),
             spread("b:1", 1, start=7), spread("a:1", 2)]
    out = coalesce(sends, 1 << 20)
    assert [s.dest for s in out] == ["a:1", "b:1", "a:1"]
    assert seqs(out[0]) == [0, 1, 2] and seqs(out[1]) == [0, 1]
    assert out[2].msg == Ping(3)  # other sends keep their order


def test_different_arcs_or_hops_are_not_merged_and_inputs_are_untouched() -> None:
    sends = [spread("a:1", 0), spread("a:1", 1, start=9), spread("a:1", 2, hops=2)]
    out = coalesce(sends, 1 << 20)
    assert [seqs(s) for s in out] == [[0], [1], [2]]
    merged = coalesce([spread("a:1", 0), spread("a:1", 1)], 1 << 20)
    assert seqs(merged[0]) == [0, 1]
    first = spread("a:1", 5)
    coalesce([first, spread("a:1", 6)], 1 << 20)
    assert seqs(first) == [5]  # the caller's message was not extended


def test_batches_respect_the_count_and_byte_limits() -> None:
    many = [spread("a:1", i) for i in range(MAX_PUBLICATIONS + 3)]
    out = coalesce(many, 1 << 30)
    assert [len(seqs(s)) for s in out] == [MAX_PUBLICATIONS, 3]
    per = 1000 + PUBLICATION_OVERHEAD
    big = [spread("a:1", i, size=1000) for i in range(10)]
    out = coalesce(big, 3 * per)
    assert [len(seqs(s)) for s in out] == [3, 3, 3, 1]
    assert sum((seqs(s) for s in out), []) == list(range(10))
