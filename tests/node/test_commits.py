"""Group commits on the store's thread (`pubsub.node.commits`): one commit in flight, the
next batch gathering meanwhile, actions only after the commit that holds what came before
them, failures reported to the actions and retried."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from pubsub.kernel.message import Ref, Topic
from pubsub.node.commits import GroupCommit, Written
from pubsub.node.rowcodec import Stored
from pubsub.node.store import NewRow, PublicationStore, StoreError
from pubsub.node.writer import StoreThread
from pubsub.publications.topicstate import LOCAL, make_publication

T = Topic("t")


def row(seq: int) -> NewRow:
    return NewRow(T, make_publication(Ref("h:1"), seq, b"x"), LOCAL)


class GatedStore(PublicationStore):
    """A store whose appends wait for a gate (to hold a commit in flight) and can fail."""

    def __init__(self, data: Path) -> None:
        super().__init__(data, sync="normal")
        self.gate = threading.Event()
        self.gate.set()
        self.fail = False
        self.batches: list[int] = []
        self.threads: set[str] = set()

    def append(self, rows, now_ms=None):  # type: ignore[no-untyped-def]
        self.threads.add(threading.current_thread().name)
        self.gate.wait(10)
        if self.fail:
            raise StoreError("disk full (test)")
        written = super().append(rows, now_ms)
        self.batches.append(len(rows))
        return written


def test_batches_grow_while_a_commit_is_in_flight(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = GatedStore(tmp_path)
        thread = StoreThread("test-store")
        written: list[Stored] = []
        outcomes: list[tuple[str, bool, int]] = []
        commits = GroupCommit(store, thread, on_written=written.extend, on_error=lambda e: None)

        def action(name: str) -> object:
            def run(ok: bool, local: Written) -> None:
                outcomes.append((name, ok, len(local)))
            return run

        store.gate.clear()  # hold the first commit
        commits.add([row(0)])
        commits.after(action("first"))
        await asyncio.sleep(0.05)
        assert commits.unwritten == 1 and outcomes == []
        for seq in range(1, 6):  # these gather while the first is in flight
            commits.add([row(seq)])
        commits.after(action("second"))
        store.gate.set()
        for _ in range(200):
            if len(outcomes) == 2:
                break
            await asyncio.sleep(0.01)
        assert store.batches == [1, 5]  # one commit, then the whole gathered batch
        assert outcomes == [("first", True, 1), ("second", True, 5)]
        assert [s.local_seq for s in written] == [1, 2, 3, 4, 5, 6]
        assert store.threads == {t for t in store.threads if t.startswith("test-store")}
        thread.close()
        store.close()

    asyncio.run(scenario())


def test_a_failed_commit_tells_its_actions_and_hands_its_rows_back(tmp_path: Path) -> None:
    """A failed commit is not retried behind the node's back: its rows go to `on_unwritten`
    (the node forgets them) and the actions waiting for it learn it failed; later rows are
    written normally."""

    async def scenario() -> None:
        store = GatedStore(tmp_path)
        thread = StoreThread("test-store")
        errors: list[StoreError] = []
        outcomes: list[bool] = []
        unwritten: list[NewRow] = []
        commits = GroupCommit(store, thread, on_written=lambda w: None, on_error=errors.append,
                              on_unwritten=unwritten.extend)
        store.fail = True
        commits.add([row(0)])
        commits.after(lambda ok, local: outcomes.append(ok))
        for _ in range(200):
            if outcomes:
                break
            await asyncio.sleep(0.01)
        assert outcomes == [False] and len(errors) == 1
        assert [r.publication.seq for r in unwritten] == [0] and commits.unwritten == 0
        store.fail = False
        commits.add([row(1)])
        commits.after(lambda ok, local: outcomes.append(ok))
        for _ in range(200):
            if len(outcomes) == 2:
                break
            await asyncio.sleep(0.01)
        assert outcomes == [False, True] and store.batches == [1]  # only the new row
        assert store.count(T) == 1
        thread.close()
        store.close()

    asyncio.run(scenario())


def test_flush_waits_for_the_commit_in_flight_and_writes_the_rest(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = GatedStore(tmp_path)
        thread = StoreThread("test-store")
        commits = GroupCommit(store, thread, on_written=lambda w: None, on_error=lambda e: None)
        store.gate.clear()
        commits.add([row(0)])
        await asyncio.sleep(0.02)
        commits.add([row(1), row(2)])
        threading.Timer(0.1, store.gate.set).start()
        commits.flush()  # blocks until both are written
        assert store.batches == [1, 2] and commits.unwritten == 0
        thread.close()
        store.close()

    asyncio.run(scenario())
