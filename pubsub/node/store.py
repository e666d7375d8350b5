"""A node's durable publication store: SQLite in WAL mode, one file in the node's data dir.

What it keeps
    Every publication the node stores, per topic, numbered by a *local sequence number*
    1, 2, 3, ... in the order this node stored them (`append`).  That number is what
    clients resume from (``Follow(since=N)``), so it is assigned once, inside the
    transaction that writes it, and never reused.  Alongside: the node's publication
    sequence-number *reservation* (`reserve_seq`), so that a restarted node never issues a
    (publisher, seq) pair twice.

Tables (layout 2)::

    batches(topic, last_seq, first_seq, entries, stored_at_ms, oldest_ms, body,
            PRIMARY KEY (topic, last_seq)) WITHOUT ROWID
    meta(name PRIMARY KEY, value)            -- "seq_reserved", "incarnation"

One row per topic and commit, its publications the entries of a msgpack ``body``: the row
codec (`pubsub.node.rowcodec`) makes rows and reads them back.

Duplicates.  `append` skips a publication the topic already holds (same key), so that a
duplicate takes no local number.  The store keeps each topic's keys in memory to know
that, taken from the node's rebuilding of the topic's trie (`publications`) or else read
from the file the first time the topic is written to (about 90 bytes per publication held;
the node core's trie, which never hands the store a publication twice, holds far more).
Only readable publications count as held: one whose entry is damaged can be stored again.

Layout 1 (one row per publication, ``publications(topic, local_seq, key, ...)``) is
converted when such a store is opened, in one transaction (`pubsub.node.storemigration`).

Incarnation.  A store has a random *incarnation* (16 hex digits), made when the store is
created and kept in ``meta``; a store in memory gets a new one with every process.  Local
numbers are only meaningful within one incarnation, so a stream cursor names both
(`pubsub.node.delivery`): a client that resumes with a number from another incarnation --
the node lost its store, or runs without one and restarted -- is told so instead of being
served the wrong publications.

Durability
    `append` writes a batch in one transaction.  With ``sync="full"`` SQLite syncs the
    write-ahead log at every commit, so a committed publication survives a crash of the
    machine; with ``"normal"`` (the default) a commit only writes the log, which survives a
    crash of the process (kill -9), and the log is synced at checkpoints.  The node
    acknowledges a publication, and delivers it to its clients, only after the commit that
    wrote it.

Deferred writes (`defer_writes`; the node under ``"normal"`` and in memory)
    A commit is then one write to the journal next to the database (`JOURNAL_NAME`,
    `pubsub.node.journal`: why, and its format), which survives a crash of the process as
    the log does; its rows wait in memory until `settle` moves them into SQLite in one
    transaction (the node does every second, the store itself once `SETTLE_ROWS` rows or
    `SETTLE_BYTES` wait, and before retention removes anything), after which the journal
    is emptied.  Every read sees the waiting rows as if they were in SQLite.  Opening a
    store settles what its journal holds (a process that stopped without settling), so
    nothing committed is lost and every local number stays as it was handed out; the
    journal is locked while a store has it open.

Threads (`pubsub.node.commits` decides who calls what)
    Writes (`append`, `reserve_seq`, `remove_at_or_before`) go through one connection, used
    by one thread at a time.  Reads (`read`, `publications`, `count`) and `checkpoint` use
    a second connection of their own when the store has a file, so that they can run on
    the store's thread while the event loop writes; WAL mode lets that reader see every
    committed row.  Under ``"normal"`` the store never checkpoints by itself
    (``wal_autocheckpoint`` off): the node calls `checkpoint` from its store thread, so the
    fsync a checkpoint needs never runs inside a commit on the event loop.

Without a data directory the same tables live in an in-memory SQLite database: nothing
survives the process, everything else behaves the same.

What is read back is validated (a hand-edited or damaged file): a bad entry is skipped with
a warning, and so is a whole row whose body is not an array; nothing bad reaches the trie
(`pubsub.node.rowcodec`).
"""

from __future__ import annotations

import logging
import re
import secrets
import sqlite3
import time
from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import Any, Literal

from pubsub.kernel.message import Topic
from pubsub.node import rowcodec
from pubsub.node.journal import Journal, JournalError
from pubsub.node.rowcodec import FORMAT, INSERT, Stored
from pubsub.node.storemigration import convert_layout1
from pubsub.publications.messages import Publication
from pubsub.publications.topicstate import NewRow  # the rows of the core's Persists
from pubsub.runtime.datadir import StoreError, prepare_data_dir

log = logging.getLogger(__name__)

DB_NAME = "publications.sqlite3"
#: The journal of commits not yet settled into SQLite (`defer_writes`, `pubsub.node.journal`).
JOURNAL_NAME = "publications.journal"
#: Deferred rows are settled at once when this many wait (or `SETTLE_BYTES` of bodies) ...
SETTLE_ROWS = 512
SETTLE_BYTES = 1 << 20
#: ... and commits are refused while this many wait because settling fails.
MAX_UNSETTLED_ROWS = 8 * SETTLE_ROWS
_INCARNATION = re.compile(r"[0-9a-f]{16}")

SyncMode = Literal["full", "normal"]


_BATCHES = (
    "CREATE TABLE IF NOT EXISTS batches (topic TEXT NOT NULL, last_seq INTEGER NOT NULL,"
    " first_seq INTEGER NOT NULL, entries INTEGER NOT NULL, stored_at_ms INTEGER NOT NULL,"
    " oldest_ms INTEGER NOT NULL, body BLOB NOT NULL, PRIMARY KEY (topic, last_seq)) WITHOUT ROWID"
)
#: Replaying the journal: rows settled before the process stopped are there already.
_INSERT_REPLAYED = "INSERT OR IGNORE INTO batches VALUES (?, ?, ?, ?, ?, ?, ?)"
#: Rows whose number is damaged are skipped everywhere (their publications are not held
#: here, so they can come back by anti-entropy and be stored again under a new number).
_SOUND_ROW = "typeof(last_seq) = 'integer'"


class PublicationStore:
    """The publications of one node (file in `data_dir`, or in memory when it is None)."""

    def __init__(self, data_dir: Path | str | None, *, sync: SyncMode = "normal") -> None:
        if sync not in ("full", "normal"):
            raise ValueError(f"sync must be 'full' or 'normal', got {sync!r}")
        self.path: Path | None = None if data_dir is None else Path(data_dir) / DB_NAME
        if self.path is not None:
            prepare_data_dir(self.path.parent, StoreError)
        where = ":memory:" if self.path is None else str(self.path)
        try:
            # One thread at a time uses the connection (the node's writer thread, `pubsub.node.writer`).
            self._db = sqlite3.connect(where, isolation_level=None, check_same_thread=False)
            if self.path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(f"PRAGMA synchronous={sync.upper()}")
                if sync == "normal":
                    self._db.execute("PRAGMA wal_autocheckpoint=0")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, 1, FORMAT):
                raise StoreError(f"{where} has layout version {version}, this node reads {FORMAT}")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value NOT NULL)"
            )
            self._db.execute(_BATCHES)
            convert_layout1(self._db)
            self._journal = self._replay_journal()
            # kept as "i<hex>" so that an all-digit incarnation is not turned into a number
            found = self._db.execute("SELECT value FROM meta WHERE name = 'incarnation'").fetchone()
            if found is not None and isinstance(found[0], str) and _INCARNATION.fullmatch(found[0][1:]):
                self.incarnation: str = found[0][1:]
            else:
                self.incarnation = secrets.token_hex(8)
                self._db.execute(
                    "INSERT OR REPLACE INTO meta (name, value) VALUES ('incarnation', ?)",
                    ("i" + self.incarnation,),
                )
            self._db.execute(f"PRAGMA user_version = {FORMAT}")
            self._latest: dict[Topic, int] = {
                Topic(topic): int(latest)
                for topic, latest in self._db.execute(
                    f"SELECT topic, MAX(last_seq) FROM batches WHERE {_SOUND_ROW} GROUP BY topic"
                )
            }
            row = self._db.execute("SELECT value FROM meta WHERE name = 'seq_reserved'").fetchone()
            self._seq_reserved = int(row[0]) if row else 0
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open publication store {where}: {exc}") from None
        self.sync = sync
        self.commits = 0
        self.checkpoints = 0
        self._reader_db: sqlite3.Connection | None = None
        #: Each topic's keys: from reading it whole (`publications`), else read the first time
        #: the topic is written to (`_held`).
        self._keys: dict[Topic, set[bytes]] = {}
        #: `defer_writes`: rows committed to the journal, not yet settled into SQLite, in
        #: commit order (a new list at each settle: readers on other threads copy it first).
        self.deferring = False
        self._unsettled: list[tuple[Any, ...]] = []
        self._unsettled_bytes = 0
        self._settle_failing = False
        self.settles = 0

    # ------------------------------------------------------------------ properties
    @property
    def durable(self) -> bool:
        """Whether the store survives the process (it has a file)."""
        return self.path is not None

    @property
    def location(self) -> str:
        """The file, or ":memory:"."""
        return ":memory:" if self.path is None else str(self.path)

    @property
    def seq_reserved(self) -> int:
        """Sequence numbers below this may have been used; a restarted node starts here."""
        return self._seq_reserved

    def latest(self, topic: Topic) -> int:
        """The highest local sequence number of `topic` (0 when nothing is stored)."""
        return self._latest.get(topic, 0)

    def topics(self) -> dict[Topic, int]:
        """Every topic with stored publications, and its latest local sequence number."""
        return dict(self._latest)

    # ------------------------------------------------------------------ writing
    def reserve_seq(self, upto: int) -> None:
        """Record durably that sequence numbers below `upto` may be in use (one transaction)."""
        if upto <= self._seq_reserved:
            return
        try:
            self._db.execute(
                "INSERT INTO meta (name, value) VALUES ('seq_reserved', ?)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (upto,),
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write {self.location}: {exc}") from None
        self._seq_reserved = upto
        self.commits += 1

    def append(self, rows: Iterable[NewRow], now_ms: int | None = None) -> list[Stored]:
        """Write `rows` in one transaction, numbering each new one with the next local
        sequence number of its topic: one row per topic (module docstring).  A publication
        the topic already holds (same key) is skipped and takes no number.  Returns what
        was written, in order.  StoreError (and nothing written) on failure."""
        batch = list(rows)
        if not batch:
            return []
        if self.deferring and len(self._unsettled) >= MAX_UNSETTLED_ROWS:
            self.settle()  # StoreError: no commit until the rows waiting can be settled
        stamp = int(time.time() * 1000) if now_ms is None else now_ms
        latest = dict(self._latest)
        written: list[Stored] = []
        bodies: dict[Topic, list[list[Any]]] = {}
        added: list[tuple[set[bytes], bytes]] = []
        try:
            for topic, p, via, hops in batch:
                held = self._keys.get(topic)
                if held is None:
                    held = self._held(topic)
                key: bytes = p.key
                if key in held:
                    continue
                held.add(key)
                added.append((held, key))
                local_seq = latest[topic] = latest.get(topic, 0) + 1
                written.append(Stored(topic, local_seq, p, via, hops, stamp))
                entries = bodies.get(topic)
                if entries is None:
                    entries = bodies[topic] = []
                entries.append(rowcodec.entry(local_seq, p, via, hops))
            if bodies:
                values = [rowcodec.row(topic, stamp, entries) for topic, entries in bodies.items()]
                if self.deferring:
                    self._defer(values)
                else:
                    self._write(values)
        except BaseException as exc:
            for held, key in added:
                held.discard(key)
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot write {self.location}: {exc}") from None
            if isinstance(exc, JournalError):
                raise StoreError(str(exc)) from None
            raise
        self._latest = latest
        self.commits += 1
        if self.deferring and (len(self._unsettled) >= SETTLE_ROWS or self._unsettled_bytes >= SETTLE_BYTES):
            self._try_settle()
        return written

    # ------------------------------------------------------------------ deferred writes
    def defer_writes(self) -> None:
        """From now on a commit goes to the journal (one write; in memory for a store
        without a file) and its rows into SQLite at the next `settle`
        (`pubsub.node.journal`: why).  For a caller that owns the writing connection on
        one thread and calls `settle` now and then from that thread; reads from any
        thread see the rows waiting too."""
        if self.deferring:
            return
        if self.path is not None and self._journal is None:
            try:
                self._journal = Journal(self.path.with_name(JOURNAL_NAME))
                self._journal.reset()
            except OSError as exc:
                raise StoreError(f"cannot open the journal of {self.location}: {exc}") from None
        self.deferring = True

    def _defer(self, values: list[tuple[Any, ...]]) -> None:
        if self._journal is not None:
            self._journal.append(values)
        self._unsettled.extend(values)
        self._unsettled_bytes += sum([len(row[6]) for row in values])

    def settle(self) -> None:
        """Write the deferred rows into SQLite in one transaction, then empty the journal
        (StoreError on failure: the rows stay deferred, and the journal keeps them)."""
        rows = self._unsettled
        if rows:
            try:
                self._write(rows)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write {self.location}: {exc}") from None
            self._unsettled = []
            self._unsettled_bytes = 0
            self.settles += 1
        elif self._journal is None or not self._journal.broken:
            return  # nothing waits, and the journal takes writes
        if self._journal is not None:
            try:
                self._journal.reset()  # rows replayed after a crash before this would be skipped
            except JournalError as exc:
                raise StoreError(str(exc)) from None

    def _try_settle(self) -> None:
        """`settle` after a commit that reached the bound; a failure is logged once (the
        commit itself is in the journal) and tried again by the next commit or `settle`."""
        try:
            self.settle()
        except StoreError as exc:
            if not self._settle_failing:
                log.error("%s: cannot settle the journal's rows (commits go on until %d wait): %s",
                          self.location, MAX_UNSETTLED_ROWS, exc)
            self._settle_failing = True
        else:
            self._settle_failing = False

    def _replay_journal(self) -> Journal | None:
        """(Opening.)  Settle what the journal of a process that stopped holds; the journal,
        emptied, or None when there is none."""
        if self.path is None:
            return None
        path = self.path.with_name(JOURNAL_NAME)
        if not path.exists():
            return None
        try:
            journal = Journal(path)
            frames = journal.frames()
        except OSError as exc:
            raise StoreError(f"cannot read the journal {path}: {exc}") from None
        rows: list[tuple[Any, ...]] = [tuple(row) for frame in frames for row in frame if rowcodec.journal_row(row)]
        skipped = sum(len(frame) for frame in frames) - len(rows)
        if journal.ignored or skipped:
            log.warning(
                "%s: the journal ended in %d bytes that cannot be read (a commit cut short, or left from before a "
                "settle) and held %d damaged rows; %d rows were kept", path, journal.ignored, skipped, len(rows),
            )
        if rows:
            self._write(rows, _INSERT_REPLAYED)
            log.info("%s: %d rows settled from the journal", self.location, len(rows))
        try:
            journal.reset()
        except JournalError as exc:
            raise StoreError(str(exc)) from None
        return journal

    def _waiting(self, topic: Topic | None = None) -> list[tuple[Any, ...]]:
        """The deferred rows (of `topic`), copied: a reader takes them before it reads
        SQLite, so that a row settled in between is in one or the other (or both)."""
        rows = self._unsettled
        if not rows:
            return []
        return list(rows) if topic is None else [row for row in rows if row[0] == topic]

    def _write(self, values: list[tuple[object, ...]], statement: str = INSERT) -> None:
        """Insert batch rows in one transaction (one row: a single statement, which SQLite
        runs as a transaction of its own); `statement` is `INSERT` or, replaying the
        journal, `_INSERT_REPLAYED`."""
        db = self._db
        if len(values) == 1:
            db.execute(statement, values[0])
            return
        db.execute("BEGIN")
        try:
            db.executemany(statement, values)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _held(self, topic: Topic) -> set[bytes]:
        """The keys of the publications `topic` holds, read from the file the first time the
        topic is written to unless `publications` read them all before.  The publication of
        a damaged entry is not held (reads skip it), so that it can be stored again."""
        held: set[bytes] = set()
        waiting = self._waiting(topic)
        rows = self._db.execute(f"SELECT stored_at_ms, body FROM batches WHERE topic = ? AND {_SOUND_ROW}", (topic,))
        for stamp, body in chain(rows, [(row[4], row[6]) for row in waiting]):
            for entry in rowcodec.entries(self.location, topic, body):
                stored = rowcodec.decode(self.location, topic, entry, stamp)
                if stored is not None:
                    held.add(stored.publication.key)
        self._keys[topic] = held
        return held

    def remove_at_or_before(self, topic: Topic, ms: int, key: bytes) -> tuple[int, int]:
        """Delete the publications of `topic` published before `ms`, or at `ms` with a key
        up to `key` (the order of `pubsub.publications.retention`), inside the caller's
        transaction on the writing connection: how many went and the highest local number
        among them (0: none).  A caller whose transaction fails calls `drop_keys`."""
        if self._waiting(topic):
            raise StoreError(f"{self.location}: settle {topic!r} before removing from it")
        db = self._db
        removed, highest = 0, 0
        held = self._keys.get(topic)
        rows = db.execute(
            f"SELECT last_seq, stored_at_ms, body FROM batches WHERE topic = ? AND oldest_ms <= ? AND {_SOUND_ROW}",
            (topic, ms),
        ).fetchall()
        for last_seq, stamp, body in rows:
            # a rewritten row keeps only sound entries (the others cannot be read anyway)
            keep: list[list[Any]] = []
            gone: list[list[Any]] = []
            for entry in rowcodec.entries(self.location, topic, body):
                if rowcodec.sound(entry):
                    (gone if rowcodec.at_or_before(entry, ms, key) else keep).append(entry)
            if not gone:
                continue
            db.execute("DELETE FROM batches WHERE topic = ? AND last_seq = ?", (topic, last_seq))
            if keep:
                db.execute(INSERT, rowcodec.row(topic, stamp, keep))
            removed += len(gone)
            highest = max(highest, max(int(e[0]) for e in gone))
            if held is not None:
                held.difference_update(e[1] for e in gone)
        return removed, highest

    def drop_keys(self, topic: Topic) -> None:
        """Forget the keys of `topic` kept in memory (read again when next needed)."""
        self._keys.pop(topic, None)

    # ------------------------------------------------------------------ reading
    def read(
        self, topic: Topic, after: int = 0, limit: int = 256, max_bytes: int = 1 << 20
    ) -> list[Stored]:
        """Publications of `topic` with local sequence number > `after`, in that order.

        At most `limit` of them, and no more once their payloads reach `max_bytes` (at
        least one is returned if any exists).  Damaged entries are skipped with a warning.
        """
        out: list[Stored] = []
        size = 0
        waiting = self._waiting(topic)
        try:
            cursor = self._reader().execute(
                f"SELECT last_seq, stored_at_ms, body FROM batches WHERE topic = ? AND last_seq > ? AND {_SOUND_ROW}"
                " ORDER BY last_seq",
                (topic, after),
            )
            try:
                settled = after
                for last_seq, stamp, body in chain(cursor, [(row[1], row[4], row[6]) for row in waiting]):
                    if last_seq <= settled:
                        continue  # deferred, and settled since it was copied
                    settled = last_seq
                    for entry in rowcodec.entries(self.location, topic, body):
                        if rowcodec.sound(entry) and entry[0] <= after:
                            continue
                        stored = rowcodec.decode(self.location, topic, entry, stamp)
                        if stored is None:
                            continue
                        out.append(stored)
                        size += len(stored.publication.payload)
                        if len(out) >= limit or size >= max_bytes:
                            return out
            finally:
                cursor.close()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read {self.location}: {exc}") from None
        return out

    def publications(self, topic: Topic) -> Iterator[Publication]:
        """Every stored publication of `topic` (for rebuilding its trie), in local order.
        Once read to the end, their keys are kept for `append`'s duplicate check."""
        after = 0
        keys: set[bytes] = set()
        while True:
            batch = self.read(topic, after, limit=1024, max_bytes=1 << 24)
            if not batch:
                break
            for stored in batch:
                keys.add(stored.publication.key)
                yield stored.publication
            after = batch[-1].local_seq
        # Read to the end: these are the keys `append` needs (`_held`), unless it read them itself.
        self._keys.setdefault(topic, keys)

    def message_ids(self, since_ms: int) -> list[tuple[Topic, Publication, int]]:
        """(topic, publication, stored_at_ms) of every stored publication that has a message
        id and was stored at or after `since_ms` (to refill the de-duplication window)."""
        waiting = self._waiting()
        try:
            rows = self._reader().execute(
                f"SELECT topic, last_seq, stored_at_ms, body FROM batches WHERE stored_at_ms >= ? AND {_SOUND_ROW}",
                (since_ms,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read {self.location}: {exc}") from None
        found = {(topic, last_seq) for topic, last_seq, _, _ in rows}
        rows += [(row[0], row[1], row[4], row[6]) for row in waiting if row[4] >= since_ms and row[:2] not in found]
        out: list[tuple[Topic, Publication, int]] = []
        for topic, _, stamp, body in rows:
            for entry in rowcodec.entries(self.location, topic, body):
                if not rowcodec.sound(entry) or not entry[9]:
                    continue
                stored = rowcodec.decode(self.location, topic, entry, stamp)
                if stored is not None:
                    out.append((stored.topic, stored.publication, stored.stored_at_ms))
        return out

    def count(self, topic: Topic) -> int:
        """How many publications of `topic` are stored."""
        waiting = self._waiting(topic)
        try:
            total, last = self._reader().execute(
                "SELECT COALESCE(SUM(entries), 0), COALESCE(MAX(last_seq), 0) FROM batches"
                f" WHERE topic = ? AND {_SOUND_ROW}",
                (topic,),
            ).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read {self.location}: {exc}") from None
        return int(total) + sum([row[3] for row in waiting if row[1] > last])

    def _reader(self) -> sqlite3.Connection:
        """The connection reads go through: the writer's for a store in memory, else one of
        their own (opened on first use, by the thread that reads)."""
        if self.path is None:
            return self._db
        if self._reader_db is None:
            self._reader_db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        return self._reader_db

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the database file and sync it (a passive
        checkpoint: it never waits for writers).  Nothing to do in memory."""
        if self.path is None:
            return
        try:
            self._reader().execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot checkpoint {self.location}: {exc}") from None
        self.checkpoints += 1

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Settle what waits (what cannot be settled stays in the journal), then close."""
        if self.deferring:
            self._try_settle()
        if self._journal is not None:
            self._journal.close()
        if self._reader_db is not None:
            self._reader_db.close()
        self._db.close()

    def __enter__(self) -> PublicationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
