"""The store's deferred writes (`PublicationStore.defer_writes`, `pubsub.node.journal`): a
commit is one write to the journal, its rows reach SQLite at `settle`, reads see them
either way, and what a killed process committed comes back when the store is opened."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pubsub.kernel.message import Ref, Topic
from pubsub.node.journal import Journal
from pubsub.node.retention import RetentionRecords
from pubsub.node.store import JOURNAL_NAME, SETTLE_ROWS, NewRow, PublicationStore, StoreError
from pubsub.publications.retention import Policy
from pubsub.publications.topicstate import make_publication

T, U = Topic("news"), Topic("sports")


def pubs(n: int, publisher: str = "h:5", start: int = 0, msg_id: bool = False) -> list:
    return [
        make_publication(Ref(publisher), start + i, f"p{start + i}".encode(), published_ms=1000 + start + i,
                         msg_id=f"m{start + i}" if msg_id else "")
        for i in range(n)
    ]


def deferred(where: Path | None) -> PublicationStore:
    store = PublicationStore(where)
    store.defer_writes()
    return store


def snapshot(store: PublicationStore) -> tuple[object, ...]:
    """Everything a reader of the store can see."""
    return (
        store.topics(),
        {t: [(s.local_seq, s.publication, s.via, s.hops, s.stored_at_ms) for s in store.read(t, limit=10_000)]
         for t in (T, U)},
        {t: [[s.local_seq for s in store.read(t, after=a, limit=3)] for a in range(0, store.latest(t) + 1, 2)]
         for t in (T, U)},
        {t: store.count(t) for t in (T, U)},
        sorted((t, p.key, ms) for t, p, ms in store.message_ids(0)),
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("on_disk", [True, False], ids=["file", "memory"])
def test_a_deferring_store_reads_as_one_that_writes_at_once(tmp_path: Path, seed: int, on_disk: bool) -> None:
    """Random commits (with duplicates, two topics) and random settles: after every step a
    deferring store shows exactly what a store writing each commit to SQLite shows."""
    rng = random.Random(seed)
    direct = PublicationStore(tmp_path / "direct" if on_disk else None)
    store = deferred(tmp_path / "deferred" if on_disk else None)
    pool = pubs(60, msg_id=True) + pubs(20, publisher="h:6")
    for step in range(40):
        rows = [NewRow(rng.choice((T, U)), rng.choice(pool), rng.choice(("tree", "local")), rng.randrange(4))
                for _ in range(rng.randrange(1, 6))]
        assert store.append(rows, now_ms=step) == direct.append(rows, now_ms=step)
        if rng.random() < 0.3:
            store.settle()
        assert snapshot(store) == snapshot(direct)
    for topic in (T, U):
        assert list(store.publications(topic)) == list(direct.publications(topic))
    store.close()
    direct.close()
    if on_disk:  # reopened: the keys that skip duplicates come from the file
        reopened, again = deferred(tmp_path / "deferred"), PublicationStore(tmp_path / "direct")
        rows = [NewRow(T, p, "tree") for p in pool]
        assert reopened.append(rows, now_ms=99) == again.append(rows, now_ms=99)
        assert snapshot(reopened) == snapshot(again)
        reopened.close()
        again.close()


def test_settle_moves_the_rows_into_sqlite_and_empties_the_journal(tmp_path: Path) -> None:
    store = deferred(tmp_path)
    store.append([NewRow(T, p, "local") for p in pubs(3)])
    journal = tmp_path / JOURNAL_NAME
    assert journal.stat().st_size > 16 and store._db.execute("SELECT COUNT(*) FROM batches").fetchone() == (0,)
    store.settle()
    assert journal.stat().st_size == 16 and store._db.execute("SELECT COUNT(*) FROM batches").fetchone() == (1,)
    assert store.settles == 1 and [s.local_seq for s in store.read(T)] == [1, 2, 3]
    store.settle()  # nothing waits: nothing written
    assert store.settles == 1
    store.close()


def test_many_waiting_rows_are_settled_by_the_commit_that_reaches_the_bound(tmp_path: Path) -> None:
    store = deferred(tmp_path)
    for i in range(SETTLE_ROWS):
        store.append([NewRow(T, pubs(1, start=i)[0], "tree")])
    assert store.settles == 1 and store._waiting() == []
    assert store.count(T) == SETTLE_ROWS
    store.close()


_CHILD = """
import os, sys
from pubsub.kernel.message import Ref, Topic
from pubsub.node.store import NewRow, PublicationStore
from pubsub.publications.topicstate import make_publication
store = PublicationStore(sys.argv[1])
store.defer_writes()
for i in range(int(sys.argv[2])):
    p = make_publication(Ref("h:5"), i, b"p%d" % i)
    [stored] = store.append([NewRow(Topic("news"), p, "tree")])
    if i == int(sys.argv[3]):
        store.settle()  # some rows in SQLite, the rest in the journal only
    print(stored.local_seq, p.key.hex(), flush=True)
print("done", flush=True)
sys.stdin.read()  # killed here
"""


def test_what_a_killed_process_committed_is_there_when_the_store_is_opened(tmp_path: Path) -> None:
    """A real process commits 40 publications (settling once after the tenth) and is killed
    with SIGKILL; opening the store settles the journal: every number, every publication."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path), "40", "9"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2],
    )
    try:
        assert child.stdout is not None
        committed = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line or line.strip() == "done":
                break
            number, key = line.split()
            committed.append((int(number), bytes.fromhex(key)))
        assert len(committed) == 40
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert (tmp_path / JOURNAL_NAME).stat().st_size > 16  # the last 30 were never settled
    with PublicationStore(tmp_path) as store:
        assert [(s.local_seq, s.publication.key) for s in store.read(T, limit=100)] == committed
        assert store.latest(T) == 40
        assert store.append([NewRow(T, pubs(1, start=99)[0], "tree")])[0].local_seq == 41
    assert (tmp_path / JOURNAL_NAME).stat().st_size == 16  # settled when opened


def test_a_torn_last_frame_is_ignored_and_the_frames_before_it_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = deferred(tmp_path)
    store.append([NewRow(T, p, "tree") for p in pubs(2)])
    store.append([NewRow(T, p, "tree") for p in pubs(2, start=2)])
    size = (tmp_path / JOURNAL_NAME).stat().st_size
    store._journal.append([("news", 99, 99, 1, 0, 0, b"\x90")])  # a third commit ...
    os.truncate(tmp_path / JOURNAL_NAME, (tmp_path / JOURNAL_NAME).stat().st_size - 3)  # ... cut short
    store._journal.close()
    store._journal = None  # the process died: nothing settled, nothing closed
    store.deferring = False
    store.close()
    with caplog.at_level(logging.WARNING), PublicationStore(tmp_path) as reopened:
        assert [s.local_seq for s in reopened.read(T)] == [1, 2, 3, 4] and reopened.latest(T) == 4
    assert "cannot be read" in caplog.text and str(tmp_path / JOURNAL_NAME) in caplog.text
    assert size > 16


def test_frames_of_an_earlier_generation_are_never_replayed(tmp_path: Path) -> None:
    """A frame left from before a settle fails its check: what retention removed since does
    not come back."""
    store = deferred(tmp_path)
    store.append([NewRow(T, p, "tree") for p in pubs(3)])
    old = (tmp_path / JOURNAL_NAME).read_bytes()
    store.settle()
    RetentionRecords(store).prune(T, Policy(max_count=1), (2000, b"\xff" * 16))  # removes all three
    assert store.read(T) == []
    header = (tmp_path / JOURNAL_NAME).read_bytes()
    store.close()
    (tmp_path / JOURNAL_NAME).write_bytes(header + old[16:])  # the current header, the old frame
    with PublicationStore(tmp_path) as reopened:
        assert reopened.read(T) == [] and reopened.count(T) == 0


def test_retention_settles_what_waits_before_it_removes(tmp_path: Path) -> None:
    store = deferred(tmp_path)
    store.append([NewRow(T, p, "tree") for p in pubs(3)])
    assert RetentionRecords(store).prune(T, Policy(max_count=1), (1001, b"\xff" * 16)) == 2
    assert [s.local_seq for s in store.read(T)] == [3] and store._waiting() == []
    store.append([NewRow(T, pubs(1, start=7)[0], "tree")])
    with pytest.raises(StoreError, match="settle"):
        store.remove_at_or_before(T, 5000, b"")  # a caller that did not settle is refused
    store.close()


@contextlib.contextmanager
def failing_journal(store: PublicationStore, where: Path) -> Iterator[None]:
    """Inside, every write to the store's journal fails, and so do cutting it back and
    emptying it (its descriptor is read-only)."""
    journal = store._journal
    assert journal is not None
    writable = journal._fd
    journal._fd = os.open(where / JOURNAL_NAME, os.O_RDONLY)
    try:
        yield
    finally:
        os.close(journal._fd)
        journal._fd = writable


def test_a_failed_journal_write_takes_no_numbers_and_blocks_nothing_after_a_settle(tmp_path: Path) -> None:
    store = deferred(tmp_path)
    a, b = pubs(2)
    store.append([NewRow(T, a, "local")])
    with failing_journal(store, tmp_path), pytest.raises(StoreError, match="cannot write the journal"):
        store.append([NewRow(T, b, "local")])
    assert store.latest(T) == 1 and [s.publication for s in store.read(T)] == [a]
    with pytest.raises(StoreError, match="earlier write or emptying"):  # it could not be cut back: nothing after it
        store.append([NewRow(T, b, "local")])
    store.settle()  # empties the journal
    assert [(s.local_seq, s.publication) for s in store.append([NewRow(T, b, "local")])] == [(2, b)]
    store.close()
    with PublicationStore(tmp_path) as reopened:
        assert [s.publication for s in reopened.read(T)] == [a, b]


def test_a_journal_that_could_not_be_emptied_takes_no_commit_until_a_settle_empties_it(tmp_path: Path) -> None:
    """The rows are in SQLite but the journal lost its header: commits fail (a frame after
    it could not be read back) until the next settle empties it, with nothing waiting."""
    store = deferred(tmp_path)
    a, b = pubs(2)
    store.append([NewRow(T, a, "local")])
    with failing_journal(store, tmp_path), pytest.raises(StoreError, match="cannot empty the journal"):
        store.settle()
    assert store._waiting() == [] and [s.publication for s in store.read(T)] == [a]  # settled all the same
    with pytest.raises(StoreError, match="earlier write or emptying"):
        store.append([NewRow(T, b, "local")])
    store.settle()  # nothing waits, but the journal is emptied
    assert [(s.local_seq, s.publication) for s in store.append([NewRow(T, b, "local")])] == [(2, b)]
    store.close()


def test_readers_on_another_thread_see_every_row_once_while_rows_are_settled(tmp_path: Path) -> None:
    """Reads on a second thread copy the waiting rows before reading SQLite: whatever a
    settle does meanwhile, each read is the whole prefix, in order, without repeats."""
    store = deferred(tmp_path)
    done = threading.Event()
    problems: list[str] = []
    reads = [0]

    def reader() -> None:
        while not done.is_set() and not problems:
            got = [s.local_seq for s in store.read(T, limit=100_000)]
            if got != list(range(1, len(got) + 1)):
                problems.append(f"read {got[:5]}... of {len(got)}")
            count = store.count(T)
            if count < len(got):
                problems.append(f"count {count} below {len(got)} read before")
            reads[0] += 1

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(400):
            store.append([NewRow(T, pubs(1, start=i)[0], "tree")])
            if i % 7 == 0:
                store.settle()
    finally:
        done.set()
        thread.join(30)
    assert problems == [] and reads[0] > 0
    assert [s.local_seq for s in store.read(T, limit=1000)] == list(range(1, 401))
    store.close()


def test_the_journal_reads_nothing_from_a_file_that_is_not_one(tmp_path: Path) -> None:
    (tmp_path / "j").write_bytes(b"not a journal at all")
    journal = Journal(tmp_path / "j")
    assert journal.frames() == [] and journal.ignored == 20
    journal.reset()
    journal.append([["news", 1, 1, 1, 0, 0, b"\x90"]])
    assert journal.frames() == [[["news", 1, 1, 1, 0, 0, b"\x90"]]] and journal.generation == 1
    journal.close()
