"""The publication core (`pubsub.publications.antientropy`, `pubsub.publications.dissemination`,
`pubsub.publications.topicstate`; paper 000 §4.2-4.3, Alg. 5)."""

from __future__ import annotations

import random
from collections import deque

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from pubsub.kernel.effects import Batch, Batched, Persist
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.publications.antientropy import MAX_DEFERRED_ROUNDS, AntiEntropy
from pubsub.publications.arcs import ArcView
from pubsub.publications.dissemination import SPREAD_OWN
from pubsub.publications.fields import MAX_PUBLICATIONS
from pubsub.publications.messages import (
    CheckAndPublish,
    CheckTrie,
    NodeDigest,
    Payload,
    Position,
    Publication,
    PublicationKey,
    Publish,
    PublishNew,
    Spread,
)
from pubsub.publications.topicstate import (
    ANTI_ENTROPY,
    EAGER_ROUNDS,
    FLOOD,
    HANDOVER,
    LOCAL,
    PUBLICATION_OVERHEAD,
    make_publication,
)
from pubsub.publications.trie import EMPTY_HASH, EMPTY_LABEL, TrieLabel
from pubsub.skipring.messages import RemoveConnections, SetData
from pubsub.skipring.nodecore import NodeCore

TOPIC = Topic("t")
U, V, W = Ref("u:1"), Ref("v:1"), Ref("w:1")
B = TrieLabel.from_bits


def h(data: bytes) -> bytes:
    return xxhash.xxh3_128_digest(data)


def short_key_publication(bits: str, name: str) -> Publication:
    """A publication whose key starts with `bits` (for tries over len(bits)-bit keys)."""
    value = int(bits, 2) << (128 - len(bits))
    return Publication(PublicationKey(value.to_bytes(16, "big")), Ref("p:1"), 0, Payload(name.encode()))


P1, P2, P3, P4 = (short_key_publication(b, f"P{i}") for i, b in enumerate(("000", "010", "100", "101"), 1))


def figure_2() -> tuple[AntiEntropy, AntiEntropy]:
    """u holds P1..P4, v misses P4 (Figure 2), both over 3-bit keys."""
    u = AntiEntropy(U, TOPIC, key_bits=3, verify_keys=False)
    v = AntiEntropy(V, TOPIC, key_bits=3, verify_keys=False)
    for p in (P1, P2, P3, P4):
        u.store(p)
    for p in (P1, P2, P3):
        v.store(p)
    u.drain_new()
    v.drain_new()
    return u, v


Log = list[tuple[Ref, Ref, Message]]


def run(cores: dict[Ref, AntiEntropy], src: Ref, sends: list[Send], log: Log | None = None) -> Log:
    """Deliver in FIFO order until nothing is left; the (source, destination, message) log.

    Every Publish is checked on delivery: it must carry nothing the receiver already holds.
    """
    log = [] if log is None else log
    queue = deque((src, dest, msg) for dest, msg in sends)
    while queue:
        frm, dest, msg = queue.popleft()
        log.append((frm, dest, msg))
        receiver = cores[dest]
        if isinstance(msg, Publish):
            held = [p for p in msg.publications if receiver.holds(p)]
            assert not held, f"{frm} sent {dest} publications it already holds: {held}"
        queue.extend((dest, d, m) for d, m in receiver.handle(msg))
    return log


def digest(bits: str, hash_: bytes) -> NodeDigest:
    return NodeDigest(B(bits), hash_)  # type: ignore[arg-type]


# hashes of Figure 2 (3-bit keys are hashed as one byte)
HP1, HP2, HP3, HP4 = (h(bytes([k])) for k in (0b000, 0b010, 0b100, 0b101))
H0 = h(HP1 + HP2)
H10 = h(HP3 + HP4)


def test_figure_2_u_starts() -> None:
    u, v = figure_2()
    first = u.publish_timeout([V])
    assert first == [Send(V, CheckTrie(TOPIC, U, [digest("", u.trie.root()[1])]))]
    log = run({U: u, V: v}, U, first)
    assert [(src, dest, msg) for src, dest, msg in log[1:]] == [
        (V, U, CheckTrie(TOPIC, V, [digest("0", H0), digest("100", HP3)])),
    ]  # ... and u finds both hashes equal: the chain ends there
    assert v.trie.size == 3 and u.counters["rounds"] == 1


def test_figure_2_v_starts() -> None:
    u, v = figure_2()
    first = v.publish_timeout([U])
    log = run({U: u, V: v}, V, first)
    assert log == [
        (V, U, CheckTrie(TOPIC, V, [digest("", h(H0 + HP3))])),
        (U, V, CheckTrie(TOPIC, U, [digest("0", H0), digest("10", H10)])),
        (V, U, CheckAndPublish(TOPIC, V, [digest("100", HP3)], B("101"))),
        (U, V, Publish(TOPIC, [P4])),
    ]
    assert u.trie.root() == v.trie.root() == (B(""), h(H0 + H10))
    assert [(a.publication, a.via) for a in v.drain_new()] == [(P4, ANTI_ENTROPY)]
    assert v.counters["repairs"] == 1 and not v.new


def test_equal_tries_exchange_only_the_root() -> None:
    u, v = figure_2()
    v.store(P4)
    for starter, other in ((u, V), (v, U)):
        log = run({U: u, V: v}, starter.ref, starter.publish_timeout([other]))
        assert len(log) == 1 and isinstance(log[0][2], CheckTrie)


def test_empty_tries() -> None:
    u = AntiEntropy(U, TOPIC, key_bits=3, verify_keys=False)
    v = AntiEntropy(V, TOPIC, key_bits=3, verify_keys=False)
    assert u.trie.root() == (EMPTY_LABEL, EMPTY_HASH)
    assert u.publish_timeout([V]) == []  # nothing to offer: no round
    assert u.counters["rounds_skipped_empty"] == 1 and u.counters["rounds"] == 0
    empty_root = CheckTrie(TOPIC, V, [digest("", EMPTY_HASH)])
    assert u.handle(empty_root) == []  # two empty tries are equal: no answer
    for p in (P1, P2):  # u's root label is now "0"
        u.store(p)
    log = run({U: u, V: v}, U, u.publish_timeout([V]))
    assert log[1:] == [
        (V, U, CheckAndPublish(TOPIC, V, [], B("0"))),  # (iii) without extension
        (U, V, Publish(TOPIC, [P1, P2])),
    ]  # one round from the non-empty side fills the empty one
    w = AntiEntropy(W, TOPIC, key_bits=3, verify_keys=False)
    run({U: u, W: w}, W, [Send(U, CheckTrie(TOPIC, W, [digest("", EMPTY_HASH)]))])
    assert w.trie.root() == u.trie.root() == v.trie.root()  # an empty root asks for all


def test_publish_timeout_sends_the_root_to_each_target_once() -> None:
    u, _ = figure_2()
    assert u.publish_timeout([]) == [] and u.counters["rounds"] == 0
    assert u.publish_timeout([U]) == []  # never ourselves
    sends = u.publish_timeout([V, W, V, U])
    assert sorted(s.dest for s in sends) == [V, W]
    assert all(s.msg == CheckTrie(TOPIC, U, [digest("", u.trie.root()[1])]) for s in sends)
    assert u.counters["rounds"] == 1 and u.counters["sent_root_check_trie"] == 2


def test_differences_make_a_node_eager_for_a_few_rounds() -> None:
    u, v = figure_2()  # u holds P4, v does not
    assert not u.eager and not v.eager
    run({U: u, V: v}, V, v.publish_timeout([U]))
    assert u.eager and v.eager  # v was repaired; u served the repair
    for _ in range(EAGER_ROUNDS):
        u.publish_timeout([V])
    assert not u.eager  # nothing new since: back to one partner
    run({U: u, V: v}, U, u.publish_timeout([V]))
    assert not u.eager  # equal tries: the exchange shows no difference
    quiet = AntiEntropy(W, TOPIC, key_bits=3, verify_keys=False)
    quiet.publish_local(P1)
    assert not quiet.eager  # flooding spreads it
    alone = AntiEntropy(W, TOPIC, key_bits=3, verify_keys=False, flooding=False)
    alone.publish_local(P1)
    assert alone.eager  # nobody else holds it and nothing else spreads it


def fed_by_the_tree() -> tuple[AntiEntropy, list[Publication]]:
    """A leaf of the arc broadcast (its arc holds only itself) and publications to feed it."""
    me = 1 << 62
    view = ArcView(me, 2, ((me + (1 << 62), V),), True)
    leaf = AntiEntropy(U, TOPIC, tree=True, arc_view=lambda: view)
    return leaf, [make_publication(W, i, b"p%d" % i) for i in range(20)]


def spread(leaf: AntiEntropy, publication: Publication) -> None:
    me = 1 << 62
    leaf.handle(Spread(TOPIC, W, Position(me - 1), Position(me + 1), 2, 1, [publication]))


def test_a_node_the_tree_feeds_defers_its_rounds_but_never_more_than_a_few_in_a_row() -> None:
    leaf, pubs = fed_by_the_tree()
    spread(leaf, pubs[0])
    rounds = []
    for p in pubs[1:13]:
        spread(leaf, p)  # the tree keeps bringing publications
        rounds.append(bool(leaf.publish_timeout([V])))
    assert rounds == ([False] * MAX_DEFERRED_ROUNDS + [True]) * 3
    assert leaf.counters["rounds_deferred"] == 3 * MAX_DEFERRED_ROUNDS and leaf.counters["rounds"] == 3
    assert leaf.publish_timeout([V]) and leaf.publish_timeout([V])  # the tree is quiet: every Timeout


def test_a_node_that_saw_a_difference_or_got_no_tree_arrivals_never_defers() -> None:
    leaf, pubs = fed_by_the_tree()
    leaf.handle(Publish(TOPIC, [pubs[0]]))  # it lacked one: eager
    for p in pubs[1:1 + EAGER_ROUNDS]:
        spread(leaf, p)
        assert leaf.publish_timeout([V])
    flooded, _ = fed_by_the_tree()
    for i, p in enumerate(pubs):
        flooded.handle(PublishNew(TOPIC, p, 1))  # arrivals by flooding defer nothing
        assert flooded.publish_timeout([V]), i
    assert flooded.counters["rounds_deferred"] == 0


def test_a_handed_over_publication_has_its_key_verified_one_issued_here_is_not_hashed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    core = AntiEntropy(U, TOPIC)
    forged = make_publication(W, 1, b"x")
    forged.payload = b"y"  # type: ignore[assignment]
    core.publish_local(forged, via=HANDOVER)
    assert not core.holds(forged) and core.counters["rejected_key_mismatch"] == 1
    import pubsub.publications.topicstate as module  # where publications are validated

    own = make_publication(U, 1, b"mine")  # what `NodeCore.issue` makes, its key just computed
    other = make_publication(W, 2, b"theirs")
    hashed: list[int] = []
    real = module.publication_key
    monkeypatch.setattr(module, "publication_key", lambda *a: hashed.append(1) or real(*a))
    core.publish_local(own, via=LOCAL)
    assert core.holds(own) and hashed == []
    core.publish_local(other, via=HANDOVER)
    assert core.holds(other) and hashed == [1]


def publish_by_the_tree(origin: AntiEntropy, publications: list[Publication]) -> None:
    """Publish here and start their arc broadcast, as the node's owner does with the
    `Batched` effects of `publish_local`."""
    effects = [effect for p in publications for effect in origin.publish_local(p)]
    assert all(isinstance(effect, Batched) for effect in effects)
    spreads = origin.spread_own(publications)
    assert spreads and all(isinstance(s.msg, Spread) for s in spreads)


def test_a_publisher_spreading_its_own_publications_defers_its_rounds_too() -> None:
    """The publisher is always ahead of its neighbours by what it just spread: its rounds are
    deferred as a fed relay's are, never more than a few in a row."""
    origin, pubs = fed_by_the_tree()
    rounds = []
    for p in pubs[:12]:
        publish_by_the_tree(origin, [p])
        rounds.append(bool(origin.publish_timeout([V])))
    assert rounds == ([False] * MAX_DEFERRED_ROUNDS + [True]) * 3
    assert origin.counters["rounds_deferred"] == 3 * MAX_DEFERRED_ROUNDS
    assert origin.publish_timeout([V])  # nothing spread since: a round every Timeout


def test_serving_a_neighbour_what_the_tree_is_bringing_it_is_no_difference() -> None:
    """A CheckAndPublish served while the tree carries publications from here leaves the node
    as it was; served with the tree quiet, it makes the node eager."""
    origin, pubs = fed_by_the_tree()
    publish_by_the_tree(origin, pubs[:3])
    asked = origin.handle(CheckAndPublish(TOPIC, V, [], EMPTY_LABEL))
    assert sum(len(s.msg.publications) for s in asked if isinstance(s.msg, Publish)) == 3
    assert not origin.eager
    origin.publish_timeout([V])  # the round that ends the interval the tree was active in
    origin.handle(CheckAndPublish(TOPIC, V, [], EMPTY_LABEL))
    assert origin.eager


def test_a_repair_the_tree_then_brings_again_is_no_difference() -> None:
    """A round that stored what the tree was still bringing (a publisher's held broadcast)
    raced the tree: once a Spread brings one of those publications the node stops being
    eager and defers its rounds again.  A repair the tree does not bring keeps it eager, and
    the record of repairs lasts one Timeout interval."""
    leaf, pubs = fed_by_the_tree()
    leaf.handle(Publish(TOPIC, pubs[:2]))
    assert leaf.eager and leaf.counters["repairs"] == 2
    spread(leaf, pubs[0])  # the tree brings one of them after all
    assert not leaf.eager and leaf.counters["repairs_raced"] == 1
    spread(leaf, pubs[2])
    assert leaf.publish_timeout([V]) == [] and leaf.counters["rounds_deferred"] == 1
    leaf.handle(Publish(TOPIC, [pubs[3]]))
    spread(leaf, pubs[4])  # the tree brings something else: the repair stands
    assert leaf.eager
    assert leaf.publish_timeout([V])  # eager: a round, and the interval's record ends
    spread(leaf, pubs[3])  # brought a Timeout later: nothing tells a race from a slow tree
    assert leaf.eager and leaf.counters["repairs_raced"] == 1


def test_the_record_of_repairs_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node without a label runs no PublishTimeout, which clears the record: past its
    bound a repair is not remembered, and the tree bringing it again changes nothing."""
    import pubsub.publications.antientropy as module

    monkeypatch.setattr(module, "MAX_REMEMBERED_REPAIRS", 2)
    leaf, pubs = fed_by_the_tree()
    leaf.handle(Publish(TOPIC, pubs[:3]))
    spread(leaf, pubs[2])  # the third was not remembered
    assert leaf.eager and leaf.counters["repairs_raced"] == 0
    spread(leaf, pubs[1])
    assert not leaf.eager and leaf.counters["repairs_raced"] == 1


# --- convergence between two nodes ----------------------------------------------------------
def publication_sets(key_bits: int) -> st.SearchStrategy[tuple[list[Publication], list[Publication]]]:
    """Two sets of publications, overlapping at random."""
    if key_bits == 128:
        pubs = st.lists(st.binary(max_size=6), unique=True, max_size=40).map(
            lambda payloads: [make_publication(Ref("p:1"), i, p) for i, p in enumerate(payloads)]
        )
    else:
        pubs = st.lists(st.integers(0, (1 << key_bits) - 1), unique=True, max_size=40).map(
            lambda keys: [short_key_publication(format(k, f"0{key_bits}b"), str(k)) for k in keys]
        )
    return pubs.flatmap(
        lambda ps: st.tuples(
            st.just(ps), st.lists(st.sampled_from([0, 1, 2]), min_size=len(ps), max_size=len(ps))
        )
    ).map(lambda pair: ([p for p, s in zip(*pair, strict=True) if s != 1], [p for p, s in zip(*pair, strict=True) if s != 0]))


@pytest.mark.parametrize("key_bits", [128, 6])
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_two_nodes_converge_without_redundant_publications(key_bits: int, data: st.DataObject) -> None:
    mine, theirs = data.draw(publication_sets(key_bits))
    verify = key_bits == 128
    u = AntiEntropy(U, TOPIC, key_bits=key_bits, verify_keys=verify, batch_publications=3)
    v = AntiEntropy(V, TOPIC, key_bits=key_bits, verify_keys=verify, batch_publications=3)
    for p in mine:
        u.store(p)
    for p in theirs:
        v.store(p)
    union = {p.key for p in mine} | {p.key for p in theirs}
    missing = 2 * len(union) - len(mine) - len(theirs)
    first = data.draw(st.sampled_from([U, V]))
    cores = {U: u, V: v}
    rounds = 0
    while u.trie.root() != v.trie.root():
        # A round repairs what the parity of the trie paths puts on the starter's side
        # (Claim 1 in the proof of Theorem 5.19), so the starters alternate.
        starter = first if rounds % 2 == 0 else (V if first == U else U)
        other = V if starter == U else U
        run(cores, starter, cores[starter].publish_timeout([other]))
        rounds += 1
        # Lemma 5.24: every two rounds fix at least one missing subtree on some side.
        assert rounds <= 2 * missing + 2, rounds
    assert {p.key for p in u.publications()} == {p.key for p in v.publications()} == union
    sent = u.counters["publications_sent"] + v.counters["publications_sent"]
    assert sent == missing  # each missing publication travelled exactly once
    for core in (u, v):
        assert core.counters["rejected_malformed"] == 0 == core.counters["publish_duplicates"]


def test_publications_travel_in_bounded_batches() -> None:
    u = AntiEntropy(U, TOPIC, batch_publications=10, batch_bytes=2000)
    v = AntiEntropy(V, TOPIC, batch_publications=10, batch_bytes=2000)
    small = [make_publication(U, i, b"s") for i in range(35)]
    big = [make_publication(U, 100 + i, b"B" * 5000) for i in range(2)]
    for p in small + big:
        u.store(p)
    log = run({U: u, V: v}, U, u.publish_timeout([V]))
    batches = [m for _, _, m in log if isinstance(m, Publish)]
    assert sum(len(b.publications) for b in batches) == 37
    for batch in batches:
        assert len(batch.publications) <= 10
        size = sum(len(p.payload) + 64 for p in batch.publications)
        assert size <= 2000 or len(batch.publications) == 1  # an oversized one travels alone
    assert v.trie.root() == u.trie.root()
    with pytest.raises(ValueError):
        AntiEntropy(U, TOPIC, batch_publications=257)


# --- flooding --------------------------------------------------------------------------------
def test_publish_local_floods_when_on() -> None:
    p = make_publication(U, 0, b"news")
    on = AntiEntropy(U, TOPIC, flood_targets=lambda: [V, W, V, U])
    assert on.publish_local(p) == [
        Send(V, PublishNew(TOPIC, p, 1)),
        Send(W, PublishNew(TOPIC, p, 1)),
    ]
    assert on.new[0].via == LOCAL and on.publish_local(p) == []  # issued twice: nothing new
    off = AntiEntropy(U, TOPIC, flooding=False, flood_targets=lambda: [V])
    assert off.publish_local(p) == [] and off.holds(p)


def test_publish_new_stores_forwards_and_drops_duplicates() -> None:
    p = make_publication(U, 0, b"news")
    v = AntiEntropy(V, TOPIC, flood_targets=lambda: [U, W])
    assert v.handle(PublishNew(TOPIC, p, 1)) == [
        Send(U, PublishNew(TOPIC, p, 2)),
        Send(W, PublishNew(TOPIC, p, 2)),
    ]  # the paper forwards to all neighbours, the one it came from included
    assert v.new[-1] == (p, FLOOD, 1) and v.counters["stored_by_flooding"] == 1
    assert v.handle(PublishNew(TOPIC, p, 2)) == []
    assert v.counters["dropped_duplicates"] == 1 and len(v.new) == 1
    assert v.handle(PublishNew(TOPIC, p, 1), flood_targets=[W]) == []
    quiet = AntiEntropy(W, TOPIC, flooding=False, flood_targets=lambda: [U])
    assert quiet.handle(PublishNew(TOPIC, p, 3)) == [] and quiet.holds(p)


# --- malformed input: rejected, counted, never raised ----------------------------------------
GOOD_HASH = bytes(16)
MALFORMED: list[tuple[Message, str]] = [
    (CheckTrie(TOPIC, U, [digest("0000", GOOD_HASH)]), "rejected_label_too_long"),
    (CheckTrie(TOPIC, U, [digest("0", GOOD_HASH[:15])]), "rejected_bad_hash"),
    (CheckTrie(TOPIC, U, [digest("0", "x" * 16)]), "rejected_bad_hash"),  # type: ignore[arg-type]
    (CheckTrie(TOPIC, U, [("0", GOOD_HASH)]), "rejected_bad_label"),  # type: ignore[list-item]
    (CheckTrie(TOPIC, U, [digest("0", GOOD_HASH)] * 65), "rejected_bad_tuples"),
    (CheckTrie(TOPIC, U, "nonsense"), "rejected_bad_tuples"),  # type: ignore[arg-type]
    (CheckTrie(TOPIC, U, [(B("0"),)]), "rejected_bad_tuples"),  # type: ignore[list-item]
    (CheckTrie(TOPIC, None, []), "rejected_bad_sender"),  # type: ignore[arg-type]
    (CheckAndPublish(TOPIC, U, [], B("1010")), "rejected_prefix_too_long"),
    (CheckAndPublish(TOPIC, U, [], "101"), "rejected_bad_prefix"),  # type: ignore[arg-type]
    (CheckAndPublish(TOPIC, U, [], None), "rejected_bad_prefix"),  # type: ignore[arg-type]
    (CheckAndPublish(TOPIC, U, [digest("1111", GOOD_HASH)], B("1")), "rejected_label_too_long"),
    (Publish(TOPIC, "x"), "rejected_bad_publish"),  # type: ignore[arg-type]
    (Publish(TOPIC, ["x"]), "rejected_bad_publication"),  # type: ignore[list-item]
    (Publish(TOPIC, [Publication(b"short", U, 0, b"")]), "rejected_bad_publication"),  # type: ignore[arg-type]
    (PublishNew(TOPIC, P4, -1), "rejected_bad_hops"),
    (PublishNew(TOPIC, P4, "1"), "rejected_bad_hops"),  # type: ignore[arg-type]
    (PublishNew(TOPIC, None, 1), "rejected_bad_publication"),  # type: ignore[arg-type]
    (RemoveConnections(TOPIC, U), "rejected_unknown_message"),
]


@pytest.mark.parametrize(("msg", "counter"), MALFORMED, ids=[c for _, c in MALFORMED])
def test_malformed_input_is_rejected_and_counted(msg: Message, counter: str) -> None:
    u, v = figure_2()
    before = v.trie.root()
    assert v.handle(msg) == []
    assert v.counters[counter] == 1 and v.counters["rejected_malformed"] == 1
    assert v.trie.root() == before and not v.new


def test_publications_with_a_wrong_key_are_rejected_one_by_one() -> None:
    good = make_publication(U, 1, b"fine")
    forged = Publication(good.key, U, 2, Payload(b"fine"))  # key of another publication
    v = AntiEntropy(V, TOPIC)
    assert v.handle(Publish(TOPIC, [forged, good])) == []
    assert v.counters["rejected_key_mismatch"] == 1 and v.holds(good) and len(v.trie) == 1
    assert v.handle(PublishNew(TOPIC, forged, 1)) == [] and v.counters["rejected_key_mismatch"] == 2


def test_leaf_with_another_hash_is_ignored_and_counted() -> None:
    u, v = figure_2()
    assert v.handle(CheckTrie(TOPIC, U, [digest("100", bytes(16))])) == []
    assert v.counters["leaf_hash_mismatch"] == 1


@settings(max_examples=300, deadline=None)
@given(
    labels=st.lists(st.text("01", max_size=6), max_size=5),
    hashes=st.lists(st.binary(min_size=0, max_size=20), min_size=5, max_size=5),
    prefix=st.one_of(st.none(), st.text("01", max_size=6).map(B), st.text(max_size=3)),
)
def test_arbitrary_requests_never_raise(labels: list[str], hashes: list[bytes], prefix: object) -> None:
    u, v = figure_2()
    tuples = [digest(lab, hsh) for lab, hsh in zip(labels, hashes, strict=False)]  # fewer labels than hashes
    for msg in (CheckTrie(TOPIC, U, tuples), CheckAndPublish(TOPIC, U, tuples, prefix)):  # type: ignore[arg-type]
        for dest, reply in v.handle(msg):
            assert dest == U and reply.kind in ("check_trie", "check_and_publish", "publish")


# --- wiring into NodeCore -------------------------------------------------------------------
def test_nodecore_publish_and_routing() -> None:
    core = NodeCore(U, Ref("s:1"), rng=random.Random(0))
    with pytest.raises(ValueError):
        core.publish(TOPIC, b"x")  # not subscribed
    core.join(TOPIC)
    assert TOPIC in core.publications
    first, spread = core.publish(TOPIC, b"a")  # what it stored, and its arc broadcast, to be batched
    assert isinstance(spread, Batched) and (spread.work, spread.topic) == (SPREAD_OWN, TOPIC)
    assert core.handle(Batch(spread.work, spread.topic, (spread.item,)), 0.0) == []  # no neighbours yet
    second, _ = core.publish(TOPIC, b"a")  # same payload, next sequence number: a different publication
    assert isinstance(first, Persist) and isinstance(second, Persist)
    rows = [*first.rows, *second.rows]  # each call's Persist carries what that call stored
    assert [(r.topic, r.publication.seq, r.via) for r in rows] == [(TOPIC, 0, LOCAL), (TOPIC, 1, LOCAL)]
    assert not any(isinstance(e, Persist) for e in core.timeout(0.0))  # nothing stored since
    status = core.status()["topics"][TOPIC]  # type: ignore[index]
    assert status["publications"]["count"] == 2
    with pytest.raises(ValueError):
        core.publish(TOPIC, b"x" * (1 << 20))
    # a CheckTrie for a topic we do not run: the sender is told to drop us (Lemma 4.1)
    other = Topic("other")
    sends = core.handle(CheckTrie(other, V, [digest("", EMPTY_HASH)]), 0.0)
    assert sends == [Send(V, RemoveConnections(other, U))]
    assert core.handle(Publish(other, []), 0.0) == []


def test_nodecore_drops_the_trie_with_the_instance_and_propagates_flooding() -> None:
    core = NodeCore(U, Ref("s:1"), rng=random.Random(0), flooding=False)
    core.join(TOPIC)
    assert core.publications[TOPIC].flooding is False
    core.flooding = True
    assert core.publications[TOPIC].flooding is True
    core.leave(TOPIC)
    core.handle(SetData(TOPIC, None, None, None), 0.0)  # the supervisor's permission to leave
    assert TOPIC not in core.instances and TOPIC not in core.publications


def test_node_batches_fit_the_frame_limit() -> None:
    """A node configured for small frames never builds a Publish batch that exceeds them."""
    from pubsub.kernel import wire
    from pubsub.node.settings import FRAME_OVERHEAD
    from pubsub.publications.messages import CheckAndPublish

    frame = 16 * 1024
    node = NodeCore(
        Ref("u"), Ref("sup"), rng=random.Random(0), publish_batch_bytes=frame - FRAME_OVERHEAD
    )
    node.join(Topic("t"))
    core = node.anti_entropy(Topic("t"))
    for seq in range(40):
        core.publish_local(make_publication(Ref("u"), seq, bytes(1000)), ())
    core.drain_new()
    sends = core.handle(CheckAndPublish(Topic("t"), Ref("v"), [], EMPTY_LABEL))
    publishes = [s.msg for s in sends if s.msg.kind == "publish"]
    assert sum(len(m.publications) for m in publishes) == 40
    assert max(len(wire.encode(m, max_frame=frame)) for m in publishes) <= frame


def test_own_publications_start_their_arc_broadcast_together_within_the_limits() -> None:
    """`publish_local` hands the arc broadcast over as a `Batched` effect; `spread_own` sends
    the batch's publications in order, one Spread per neighbour for as many as the count
    and byte limits allow, every neighbour's Spread sharing one list (encoded once)."""
    me = 1 << 62
    view = ArcView(me, 2, ((me + (1 << 62), V), (0, W)), True)
    per = 1000 + PUBLICATION_OVERHEAD
    core = AntiEntropy(U, TOPIC, tree=True, arc_view=lambda: view, batch_bytes=3 * per)
    effects = [e for i in range(10) for e in core.publish_local(make_publication(U, i, bytes(1000)))]
    assert all(isinstance(e, Batched) and (e.work, e.topic) == (SPREAD_OWN, TOPIC) for e in effects)
    sends = core.spread_own([e.item for e in effects if isinstance(e, Batched)])
    batches: dict[Ref, list[list[int]]] = {}
    for dest, msg in sends:
        assert isinstance(msg, Spread) and msg.hops == 1 and msg.sender == U
        batches.setdefault(dest, []).append([p.seq for p in msg.publications])
    assert batches == {V: [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]], W: [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]}
    first_v, first_w = (msg for dest, msg in sends[:2])
    assert isinstance(first_v, Spread) and isinstance(first_w, Spread)
    assert first_v.publications is first_w.publications
    roomy = AntiEntropy(U, TOPIC, tree=True, arc_view=lambda: view)
    small = [make_publication(U, i, b"x") for i in range(MAX_PUBLICATIONS + 3)]
    assert [len(msg.publications) for dest, msg in roomy.spread_own(small) if isinstance(msg, Spread) and dest == V] == [
        MAX_PUBLICATIONS, 3
    ]
