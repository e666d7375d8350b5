"""The node's publication store (`pubsub.node.store`) and the hand-over state machine
(`pubsub.publications.handover`), without any network."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import msgpack
import pytest

from pubsub.kernel.message import Ref, Topic
from pubsub.node.rowcodec import Stored
from pubsub.node.store import NewRow, PublicationStore, StoreError
from pubsub.publications.handover import HandOverClient
from pubsub.publications.messages import GetMember, HandOver, HandOverAck, MemberIs
from pubsub.publications.topicstate import make_publication
from pubsub.skipring.supervisor.core import SupervisorCore

T, U = Topic("news"), Topic("sports")
ME, SUP, M1, M2 = Ref("h:1"), Ref("h:9"), Ref("h:2"), Ref("h:3")


def pubs(n: int, publisher: str = "h:5", start: int = 0) -> list:
    return [make_publication(Ref(publisher), start + i, f"p{start + i}".encode()) for i in range(n)]


#: The first layout of the store (one row per publication), as stores made before layout 2 have it.
LAYOUT_1 = (
    "CREATE TABLE publications (topic TEXT NOT NULL, local_seq INTEGER NOT NULL, key BLOB NOT NULL,"
    " publisher TEXT NOT NULL, seq INTEGER NOT NULL, payload BLOB NOT NULL, via TEXT NOT NULL,"
    " hops INTEGER, stored_at_ms INTEGER NOT NULL, PRIMARY KEY (topic, local_seq), UNIQUE (topic, key))"
)


# --- store ---------------------------------------------------------------------------------------
def test_local_numbers_are_contiguous_per_topic_and_skip_duplicates(tmp_path: Path) -> None:
    with PublicationStore(tmp_path) as store:
        a, b, c = pubs(3)
        written = store.append([NewRow(T, a, "local"), NewRow(U, a, "flood", 2), NewRow(T, b, "flood", 1)])
        assert [(s.topic, s.local_seq) for s in written] == [(T, 1), (U, 1), (T, 2)]
        again = store.append([NewRow(T, a, "anti-entropy"), NewRow(T, c, "anti-entropy")])
        assert [(s.topic, s.local_seq, s.publication) for s in again] == [(T, 3, c)]
        assert store.latest(T) == 3 and store.latest(U) == 1 and store.latest(Topic("x")) == 0
        assert store.topics() == {T: 3, U: 1}
        assert [s.publication for s in store.read(T)] == [a, b, c]
        assert [s.local_seq for s in store.read(T, after=1, limit=1)] == [2]
        assert store.read(T, after=3) == []
        assert store.read(U)[0].via == "flood" and store.read(U)[0].hops == 2
        assert store.count(T) == 3


def test_read_stops_at_max_bytes_but_returns_at_least_one(tmp_path: Path) -> None:
    big = [make_publication(Ref("h:5"), i, bytes(1000)) for i in range(5)]
    with PublicationStore(tmp_path) as store:
        store.append(NewRow(T, p, "local") for p in big)
        assert len(store.read(T, max_bytes=2500)) == 3
        assert len(store.read(T, max_bytes=1)) == 1


def test_everything_survives_reopening(tmp_path: Path) -> None:
    items = pubs(50)
    with PublicationStore(tmp_path) as store:
        for p in items:
            store.append([NewRow(T, p, "flood", 1)])
        store.reserve_seq(2048)
        store.reserve_seq(10)  # never goes back
        assert store.seq_reserved == 2048
    with PublicationStore(tmp_path, sync="normal") as again:
        assert again.latest(T) == 50 and again.seq_reserved == 2048
        assert list(again.publications(T)) == items
        assert again.append([NewRow(T, pubs(1, start=99)[0], "local")])[0].local_seq == 51
    assert (tmp_path / "publications.sqlite3").exists()


def test_memory_store_forgets(tmp_path: Path) -> None:
    store = PublicationStore(None)
    assert not store.durable and store.location == ":memory:"
    store.append([NewRow(T, pubs(1)[0], "local")])
    assert store.latest(T) == 1
    store.close()
    assert PublicationStore(None).latest(T) == 0


def test_damaged_entries_and_rows_are_skipped(tmp_path: Path) -> None:
    with PublicationStore(tmp_path) as store:
        store.append(NewRow(T, p, "local") for p in pubs(3))
        store.append(NewRow(T, p, "local") for p in pubs(2, start=3))
    db = sqlite3.connect(tmp_path / "publications.sqlite3")
    [(body,)] = db.execute("SELECT body FROM batches WHERE last_seq = 3").fetchall()
    entries = msgpack.unpackb(body)
    entries[1][1] = b"\x00"  # local number 2: a key that is not 16 bytes
    entries[2][2] = "not a ref"  # local number 3: a bad publisher
    db.execute("UPDATE batches SET body = ? WHERE last_seq = 3", (msgpack.packb(entries),))
    db.execute("UPDATE batches SET body = x'c1' WHERE last_seq = 5")  # not msgpack at all
    db.commit()
    db.close()
    with PublicationStore(tmp_path) as store:
        assert [s.local_seq for s in store.read(T)] == [1]
        assert store.latest(T) == 5  # numbers are never reused
        assert store.append([NewRow(T, pubs(1, start=9)[0], "local")])[0].local_seq == 6
    db = sqlite3.connect(tmp_path / "publications.sqlite3")
    db.execute("UPDATE batches SET last_seq = 'seven' WHERE last_seq = 6")  # a damaged number
    db.commit()
    db.close()
    with PublicationStore(tmp_path) as store:  # opens; the damaged row is skipped everywhere
        assert store.latest(T) == 5 and [s.local_seq for s in store.read(T)] == [1] and store.count(T) == 5
        again = pubs(1, start=9)[0]  # its publication is not held: it can be stored again
        assert [(s.local_seq, s.publication) for s in store.append([NewRow(T, again, "anti-entropy")])] == [(6, again)]
        store._db.execute("BEGIN")  # retention (published_ms is 0 here) removes the sound rows' entries...
        assert store.remove_at_or_before(T, 1, b"") == (4, 6)
        store._db.execute("COMMIT")
        assert store.read(T) == [] and store.count(T) == 2  # (the row whose body is damaged)
        seven = store._db.execute("SELECT COUNT(*) FROM batches WHERE last_seq = 'seven'").fetchone()
        assert seven == (1,)  # ...and leaves the damaged row as it is, never rewritten into a sound one


def test_damaged_rows_of_a_layout_1_store_are_still_skipped(tmp_path: Path) -> None:
    """A layout-1 store's values are converted as they are, and checked when read."""
    a, b, c = pubs(3)
    db = sqlite3.connect(tmp_path / "publications.sqlite3")
    db.execute(LAYOUT_1)
    for n, p in enumerate((a, b, c), 1):
        db.execute(
            "INSERT INTO publications VALUES (?, ?, ?, ?, ?, ?, 'local', NULL, 7)", (T, n, p.key, p.publisher, p.seq, p.payload)
        )
    db.execute("UPDATE publications SET key = x'00' WHERE local_seq = 2")
    db.execute("UPDATE publications SET publisher = 'not a ref' WHERE local_seq = 3")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    with PublicationStore(tmp_path) as store:
        assert [s.publication for s in store.read(T)] == [a]
        assert store.latest(T) == 3 and store.read(T)[0].stored_at_ms == 7


def test_unusable_directory_and_wrong_layout(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="cannot create data directory"):
        PublicationStore(tmp_path / "file" / "sub")
    db = sqlite3.connect(tmp_path / "publications.sqlite3")
    db.execute("PRAGMA user_version = 7")
    db.close()
    with pytest.raises(StoreError, match="layout version 7"):
        PublicationStore(tmp_path)
    with pytest.raises(ValueError):
        PublicationStore(None, sync="sometimes")  # type: ignore[arg-type]


# --- hand-over -----------------------------------------------------------------------------------
def test_handover_success() -> None:
    h = HandOverClient(ME, SUP, step_timeout=1.0, attempts=3)
    p = pubs(1)[0]
    request, sends = h.start(T, p, now=0.0)
    [(dest, ask)] = sends
    assert dest == SUP and isinstance(ask, GetMember) and ask.ref == ME
    [(dest, hand)] = h.handle(MemberIs(T, M1, ask.nonce), now=0.1)
    assert dest == M1 and isinstance(hand, HandOver) and hand.publication == p
    assert h.handle(HandOverAck(T, M2, hand.request, True, ""), now=0.2) == []  # wrong member
    assert h.handle(HandOverAck(T, M1, hand.request, True, ""), now=0.2) == []
    [outcome] = h.drain_outcomes()
    assert outcome.ok and outcome.member == M1 and outcome.request == request
    assert not h.pending and h.counters["stale_replies"] == 1


def test_handover_no_members_fails_at_once() -> None:
    h = HandOverClient(ME, SUP)
    _, [(_, ask)] = h.start(T, pubs(1)[0], now=0.0)
    h.handle(MemberIs(T, None, ask.nonce), now=0.1)
    [outcome] = h.drain_outcomes()
    assert not outcome.ok and outcome.code == "no_members"


def test_handover_retries_after_refusal_and_timeout_then_gives_up() -> None:
    h = HandOverClient(ME, SUP, step_timeout=1.0, attempts=3)
    _, [(_, ask)] = h.start(T, pubs(1)[0], now=0.0)
    [(_, hand)] = h.handle(MemberIs(T, M1, ask.nonce), now=0.1)
    [(dest, ask2)] = h.handle(HandOverAck(T, M1, hand.request, False, "not_member"), now=0.2)
    assert dest == SUP and isinstance(ask2, GetMember) and ask2.avoid == M1
    assert h.handle(MemberIs(T, M2, ask.nonce), now=0.3) == []  # stale nonce: ignored
    [(_, hand2)] = h.handle(MemberIs(T, M2, ask2.nonce), now=0.3)
    assert h.timeout(now=1.0) == []  # not yet
    [(dest, ask3)] = h.timeout(now=1.5)  # M2 did not answer: attempt 3
    assert dest == SUP and ask3.avoid == M2
    assert h.timeout(now=3.0) == []  # the supervisor did not answer: out of attempts
    [outcome] = h.drain_outcomes()
    # HandOvers left (to M1 and M2): a member may hold it, so the outcome is unknown, not failed
    assert not outcome.ok and outcome.code == "unknown"
    assert "3 attempts" in outcome.detail and "supervisor" in outcome.detail
    assert h.handle(HandOverAck(T, M2, hand2.request, True, ""), now=4.0) == []  # too late


def test_handover_that_never_reached_a_member_fails() -> None:
    h = HandOverClient(ME, SUP, step_timeout=1.0, attempts=2)
    h.start(T, pubs(1)[0], now=0.0)
    [(dest, ask2)] = h.timeout(now=1.0)  # the supervisor did not answer
    assert dest == SUP and isinstance(ask2, GetMember)
    assert h.timeout(now=2.0) == []
    [outcome] = h.drain_outcomes()
    assert not outcome.ok and outcome.code == "handover_failed" and "nothing was stored" in outcome.detail


def test_handover_to_a_silent_only_member_is_unknown_not_no_members() -> None:
    """The only member got the HandOver and went silent (frozen): the supervisor then names
    nobody else, which used to end as no_members although the member may still store it."""
    h = HandOverClient(ME, SUP, step_timeout=1.0, attempts=4)
    _, [(_, ask)] = h.start(T, pubs(1)[0], now=0.0)
    h.handle(MemberIs(T, M1, ask.nonce), now=0.1)
    [(_, ask2)] = h.timeout(now=1.2)
    h.handle(MemberIs(T, None, ask2.nonce), now=1.3)
    [outcome] = h.drain_outcomes()
    assert not outcome.ok and outcome.code == "unknown"


def test_supervisor_names_a_random_member_or_none() -> None:
    core = SupervisorCore(SUP, rng=random.Random(3))
    for ref in (M1, M2):
        core.subscribe(T, ref)
    core._flush()
    seen = set()
    for nonce in range(30):
        [(dest, answer)] = core.handle(GetMember(T, ME, nonce), 0.0)
        assert dest == ME and isinstance(answer, MemberIs) and answer.nonce == nonce
        seen.add(answer.member)
    assert seen == {M1, M2}
    for nonce in range(10):  # another member whenever there is one
        [(_, answer)] = core.handle(GetMember(T, ME, nonce, avoid=M1), 0.0)
        assert answer.member == M2  # type: ignore[attr-defined]
    core.unsubscribe(T, M2)
    core._flush()
    [(_, answer)] = core.handle(GetMember(T, ME, 0, avoid=M1), 0.0)
    assert answer.member == M1  # type: ignore[attr-defined]
    [(_, none)] = core.handle(GetMember(Topic("empty"), ME, 1), 0.0)
    assert isinstance(none, MemberIs) and none.member is None


def test_one_row_per_topic_and_commit_and_duplicates_skipped_after_reopening(tmp_path: Path) -> None:
    """A commit is one row per topic (the module docstring: a row per publication cost a
    quarter of a node's work); the keys that skip duplicates come back from the file."""
    a, b, c = pubs(3)
    with PublicationStore(tmp_path) as store:
        store.append([NewRow(T, a, "local"), NewRow(U, a, "flood", 1), NewRow(T, b, "flood", 2), NewRow(T, b, "tree", 3)])
    db = sqlite3.connect(tmp_path / "publications.sqlite3")
    rows = db.execute("SELECT topic, first_seq, last_seq, entries FROM batches ORDER BY topic").fetchall()
    db.close()
    assert rows == [(T, 1, 2, 2), (U, 1, 1, 1)]
    with PublicationStore(tmp_path) as store:
        assert store.append([NewRow(T, b, "tree", 1), NewRow(T, c, "tree", 1), NewRow(U, b, "tree", 1)]) == [
            Stored(T, 3, c, "tree", 1, store.read(T, after=2)[0].stored_at_ms),
            Stored(U, 2, b, "tree", 1, store.read(U, after=1)[0].stored_at_ms),
        ]
        assert [s.publication for s in store.read(T)] == [a, b, c] and store.count(T) == 3


def test_a_layout_1_store_is_converted_commit_by_commit(tmp_path: Path) -> None:
    """Conversion keeps every publication, its number and its commit time, one row per topic
    and commit as layout 1 wrote them (at most 512 publications a row)."""
    items = pubs(1300)
    db = sqlite3.connect(tmp_path / "publications.sqlite3")
    db.execute(LAYOUT_1)
    stamps = {T: [], U: []}
    for n, p in enumerate(items):
        topic, local = (T, n // 2 + 1) if n % 2 == 0 else (U, n // 2 + 1)
        stamp = 100 if local <= 600 else 200  # two commits per topic, the first of 600
        stamps[topic].append(stamp)
        db.execute(
            "INSERT INTO publications VALUES (?, ?, ?, ?, ?, ?, 'flood', 2, ?)",
            (topic, local, p.key, p.publisher, p.seq, p.payload, stamp),
        )
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    with PublicationStore(tmp_path) as store:
        for topic, mine in ((T, items[0::2]), (U, items[1::2])):
            read = list(store.read(topic, limit=2000, max_bytes=1 << 24))
            assert [s.publication for s in read] == mine and [s.local_seq for s in read] == list(range(1, 651))
            assert [s.stored_at_ms for s in read] == stamps[topic] and {(s.via, s.hops) for s in read} == {("flood", 2)}
            assert store.latest(topic) == 650 and store.count(topic) == 650
        assert store.append([NewRow(T, items[0], "tree")]) == []  # still held
    db = sqlite3.connect(tmp_path / "publications.sqlite3")
    rows = db.execute("SELECT topic, first_seq, last_seq FROM batches ORDER BY topic, last_seq").fetchall()
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    db.close()
    assert rows == [(T, 1, 512), (T, 513, 600), (T, 601, 650), (U, 1, 512), (U, 513, 600), (U, 601, 650)]
    assert "publications" not in tables


def test_a_failed_commit_leaves_nothing_behind(tmp_path: Path) -> None:
    """A commit that fails writes nothing and takes no numbers: the same publications are
    written by the next one."""
    a, b = pubs(2)
    with PublicationStore(tmp_path) as store:
        store.append([NewRow(T, a, "local")])
        reader = sqlite3.connect(tmp_path / "publications.sqlite3", isolation_level=None)
        reader.execute("BEGIN EXCLUSIVE")  # holds the file: the store's commit fails
        store._db.execute("PRAGMA busy_timeout = 0")
        with pytest.raises(StoreError, match="cannot write"):
            store.append([NewRow(T, b, "local")])
        reader.execute("ROLLBACK")
        reader.close()
        assert store.latest(T) == 1
        assert [(s.local_seq, s.publication) for s in store.append([NewRow(T, b, "local")])] == [(2, b)]


def test_a_store_with_the_first_unique_index_still_skips_duplicates(tmp_path: Path) -> None:
    """A layout-1 store, made with UNIQUE (topic, key), is converted and behaves the same."""
    db = sqlite3.connect(tmp_path / "publications.sqlite3")
    db.execute(LAYOUT_1)
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    a, b = pubs(2)
    with PublicationStore(tmp_path) as store:
        assert [s.local_seq for s in store.append([NewRow(T, a, "local"), NewRow(T, b, "flood", 1)])] == [1, 2]
        assert [s.publication for s in store.append([NewRow(T, a, "anti-entropy")])] == []
        assert [s.publication for s in store.read(T)] == [a, b]


@pytest.mark.parametrize("restored", [False, True], ids=["appended-first", "restored-first"])
def test_a_publication_whose_entry_is_damaged_can_be_stored_again(tmp_path: Path, restored: bool) -> None:
    a, b = pubs(2)
    with PublicationStore(tmp_path) as store:
        store.append([NewRow(T, a, "local"), NewRow(T, b, "local")])
    db = sqlite3.connect(tmp_path / "publications.sqlite3")
    [(body,)] = db.execute("SELECT body FROM batches").fetchall()
    entries = msgpack.unpackb(body)
    entries[1][4] = 7  # b's payload is not bytes: its key is intact, the entry is not readable
    db.execute("UPDATE batches SET body = ?", (msgpack.packb(entries),))
    db.commit()
    db.close()
    with PublicationStore(tmp_path) as store:
        if restored:  # as a node rejoining the topic does, before anything is appended
            assert list(store.publications(T)) == [a]
        written = store.append([NewRow(T, a, "anti-entropy"), NewRow(T, b, "anti-entropy")])
        assert [(s.local_seq, s.publication) for s in written] == [(3, b)]  # a is held, b is not
        assert [s.publication for s in store.read(T)] == [a, b]
