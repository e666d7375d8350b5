"""A node's durable publication store: SQLite in WAL mode, one file in the node's data dir.

What it keeps
    Every publication the node stores, per topic, numbered by a *local sequence number*
    1, 2, 3, ... in the order this node stored them (`append`).  That number is what
    clients resume from (``Follow(since=N)``), so it is assigned once, inside the
    transaction that writes the row, and never reused.  Alongside: the node's publication
    sequence-number *reservation* (`reserve_seq`), so that a restarted node never issues a
    (publisher, seq) pair twice.

Tables::

    publications(topic, local_seq, key, publisher, seq, payload, via, hops, stored_at_ms,
                 published_ms, prev, msg_id, proof, PRIMARY KEY (topic, local_seq),
                 UNIQUE (topic, publisher, seq, key))
    meta(name PRIMARY KEY, value)            -- "seq_reserved", "incarnation"

The unique index is what makes `append` skip a publication the topic already holds.  It
starts with the publisher and its sequence number, which grow, so that a batch's entries
land on the last pages of the index; a key alone is a hash, and indexing by it sends the
rows of a batch to as many different index pages, each written to the log at the commit
(11 µs per row at 5,000 rows, 15.5 µs at 30,000, in batches of 31, against 8 and 9 µs with
this order; `docs/measurements/issue11.md`).  A publication's key is a hash of
its publisher, sequence number and payload, so "the same publication" means the same four
values either way; two *different* publications with one key never reach the store, the
node core's trie holds only one of them.  Stores made before this order keep their
``UNIQUE (topic, key)``: they behave the same, only slower.

Incarnation.  A store has a random *incarnation* (16 hex digits), made when the store is
created and kept in ``meta``; a store in memory gets a new one with every process.  Local
numbers are only meaningful within one incarnation, so a stream cursor names both
(`pubsub.node.delivery`): a client that resumes with a number from another incarnation --
the node lost its store, or runs without one and restarted -- is told so instead of being
served the wrong publications.

``published_ms`` (the publication's own timestamp, `Publication.published_ms`), ``prev``,
``msg_id`` and ``proof`` (`Publication.prev`, `Publication.msg_id`, `Publication.proof`: its
publisher's signature, kept so that whoever gets it later from here can check it) were added
after the first layout; a store without them gets them (defaults 0, -1, "" and empty) when
it is opened, and older code,
which names its columns, still reads and writes such a store.

Durability
    `append` writes a batch in one transaction.  With ``sync="full"`` SQLite syncs the
    write-ahead log at every commit, so a committed publication survives a crash of the
    machine; with ``"normal"`` (the default) a commit only writes the log, which survives a
    crash of the process (kill -9), and the log is synced at checkpoints.  The node
    acknowledges a publication, and delivers it to its clients, only after the commit that
    wrote it.

Threads (`pubsub.node.commits` decides who calls what)
    Writes (`append`, `reserve_seq`) go through one connection, used by one thread at a
    time.  Reads (`read`, `publications`, `count`) and `checkpoint` use a second connection
    of their own when the store has a file, so that they can run on the store's thread
    while the event loop writes; WAL mode lets that reader see every committed row.  Under
    ``"normal"`` the store never checkpoints by itself (``wal_autocheckpoint`` off): the
    node calls `checkpoint` from its store thread, so the fsync a checkpoint needs never
    runs inside a commit on the event loop.

Without a data directory the same tables live in an in-memory SQLite database: nothing
survives the process, everything else behaves the same.

Rows read back are validated (a hand-edited or damaged file); bad rows are skipped with
a warning, never handed to the trie.
"""

from __future__ import annotations

import logging
import re
import secrets
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal, NamedTuple

from pubsub.runtime.datadir import StoreError, prepare_data_dir
from pubsub.kernel.message import Ref, Topic
from pubsub.skipring.messages import Payload, Publication, PublicationKey
from pubsub.skipring.trie import HASH_BYTES
from pubsub.kernel.wire import WireError, validate_ref, validate_topic

log = logging.getLogger(__name__)

DB_NAME = "publications.sqlite3"
_INCARNATION = re.compile(r"[0-9a-f]{16}")
#: Layout version, in SQLite's user_version.
FORMAT = 1

SyncMode = Literal["full", "normal"]


class Stored(NamedTuple):
    """One stored publication with its place in this node's delivery order."""

    topic: Topic
    local_seq: int
    publication: Publication
    via: str
    hops: int | None
    stored_at_ms: int

    @property
    def published_ms(self) -> int:
        """The publication's own timestamp (0 when unknown)."""
        return self.publication.published_ms


class NewRow(NamedTuple):
    """A publication to append: the topic, the publication, how it arrived."""

    topic: Topic
    publication: Publication
    via: str
    hops: int | None = None


_INSERT = (
    "INSERT OR IGNORE INTO publications (topic, local_seq, key, publisher, seq, payload, via,"
    " hops, stored_at_ms, published_ms, prev, msg_id, proof) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: Columns added after the first layout: (name, declaration).
_ADDED_COLUMNS = (
    ("published_ms", "INTEGER NOT NULL DEFAULT 0"),
    ("prev", "INTEGER NOT NULL DEFAULT -1"),
    ("msg_id", "TEXT NOT NULL DEFAULT ''"),
    ("proof", "BLOB NOT NULL DEFAULT x''"),
)


def _values(s: Stored) -> tuple[object, ...]:
    p = s.publication
    return (
        s.topic, s.local_seq, p.key, p.publisher, p.seq, p.payload, s.via, s.hops, s.stored_at_ms,
        p.published_ms, p.prev, p.msg_id, p.proof,
    )


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
            if version not in (0, FORMAT):
                raise StoreError(f"{where} has layout version {version}, this node reads {FORMAT}")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS publications ("
                " topic TEXT NOT NULL, local_seq INTEGER NOT NULL, key BLOB NOT NULL,"
                " publisher TEXT NOT NULL, seq INTEGER NOT NULL, payload BLOB NOT NULL,"
                " via TEXT NOT NULL, hops INTEGER, stored_at_ms INTEGER NOT NULL,"
                " published_ms INTEGER NOT NULL DEFAULT 0,"
                " PRIMARY KEY (topic, local_seq), UNIQUE (topic, publisher, seq, key))"
            )
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(publications)")}
            for name, declaration in _ADDED_COLUMNS:  # a store written before they existed
                if name not in columns:
                    self._db.execute(f"ALTER TABLE publications ADD COLUMN {name} {declaration}")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value NOT NULL)"
            )
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
                    "SELECT topic, MAX(local_seq) FROM publications GROUP BY topic"
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
        sequence number of its topic.  A publication the topic already holds (same key) is
        skipped.  Returns what was written, in order.  StoreError (and nothing written) on
        failure.

        The common case -- nothing in the batch is stored already -- is one `executemany`;
        if the insert count shows a duplicate, the batch is rolled back and written row by
        row, so that duplicates take no local number.
        """
        batch = list(rows)
        if not batch:
            return []
        stamp = int(time.time() * 1000) if now_ms is None else now_ms
        try:
            written = self._append_all(batch, stamp)
            if written is None:
                written = self._append_each(batch, stamp)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write {self.location}: {exc}") from None
        self.commits += 1
        return written

    def _numbered(
        self, batch: list[NewRow], stamp: int
    ) -> tuple[dict[Topic, int], list[Stored], list[tuple[object, ...]]]:
        """Each row numbered in its topic: the new latest numbers, the rows as stored, and
        their column values (one pass: this runs for every publication a node stores)."""
        latest = dict(self._latest)
        out: list[Stored] = []
        values: list[tuple[object, ...]] = []
        for topic, p, via, hops in batch:
            local_seq = latest[topic] = latest.get(topic, 0) + 1
            stored = Stored(topic, local_seq, p, via, hops, stamp)
            out.append(stored)
            values.append(_values(stored))
        return latest, out, values

    def _append_all(self, batch: list[NewRow], stamp: int) -> list[Stored] | None:
        """The whole batch in one statement; None (rolled back) if any row was a duplicate."""
        latest, numbered, values = self._numbered(batch, stamp)
        db = self._db
        db.execute("BEGIN")
        try:
            before = db.total_changes
            db.executemany(_INSERT, values)
            if db.total_changes - before != len(numbered):
                db.execute("ROLLBACK")
                return None
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        self._latest = latest
        return numbered

    def _append_each(self, batch: list[NewRow], stamp: int) -> list[Stored]:
        """Row by row, skipping duplicates (the rare path)."""
        latest = dict(self._latest)
        written: list[Stored] = []
        db = self._db
        db.execute("BEGIN")
        try:
            for row in batch:
                local_seq = latest.get(row.topic, 0) + 1
                stored = Stored(row.topic, local_seq, row.publication, row.via, row.hops, stamp)
                if db.execute(_INSERT, _values(stored)).rowcount == 1:
                    latest[row.topic] = local_seq
                    written.append(stored)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        self._latest = latest
        return written

    # ------------------------------------------------------------------ reading
    def read(
        self, topic: Topic, after: int = 0, limit: int = 256, max_bytes: int = 1 << 20
    ) -> list[Stored]:
        """Publications of `topic` with local sequence number > `after`, in that order.

        At most `limit` of them, and no more once their payloads reach `max_bytes` (at
        least one is returned if any exists).  Damaged rows are skipped with a warning.
        """
        try:
            cursor = self._reader().execute(
                "SELECT local_seq, key, publisher, seq, payload, via, hops, stored_at_ms,"
                " published_ms, prev, msg_id, proof FROM publications"
                " WHERE topic = ? AND local_seq > ? ORDER BY local_seq LIMIT ?",
                (topic, after, limit),
            )
            out: list[Stored] = []
            size = 0
            for row in cursor:
                stored = self._decode(topic, row)
                if stored is None:
                    continue
                out.append(stored)
                size += len(stored.publication.payload)
                if size >= max_bytes:
                    break
            return out
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read {self.location}: {exc}") from None

    def publications(self, topic: Topic) -> Iterator[Publication]:
        """Every stored publication of `topic` (for rebuilding its trie), in local order."""
        after = 0
        while True:
            batch = self.read(topic, after, limit=1024, max_bytes=1 << 24)
            if not batch:
                return
            for stored in batch:
                yield stored.publication
            after = batch[-1].local_seq

    def message_ids(self, since_ms: int) -> list[tuple[Topic, Publication, int]]:
        """(topic, publication, stored_at_ms) of every stored publication that has a message
        id and was stored at or after `since_ms` (to refill the de-duplication window)."""
        try:
            rows = self._reader().execute(
                "SELECT topic, local_seq, key, publisher, seq, payload, via, hops, stored_at_ms,"
                " published_ms, prev, msg_id, proof FROM publications"
                " WHERE msg_id != '' AND stored_at_ms >= ?",
                (since_ms,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read {self.location}: {exc}") from None
        out: list[tuple[Topic, Publication, int]] = []
        for topic, *rest in rows:
            stored = self._decode(topic, tuple(rest))
            if stored is not None:
                out.append((stored.topic, stored.publication, stored.stored_at_ms))
        return out

    def count(self, topic: Topic) -> int:
        """How many publications of `topic` are stored."""
        try:
            row = self._reader().execute(
                "SELECT COUNT(*) FROM publications WHERE topic = ?", (topic,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read {self.location}: {exc}") from None
        return int(row[0])

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

    def _decode(self, topic: Topic, row: tuple[object, ...]) -> Stored | None:
        local_seq, key, publisher, seq, payload, via, hops, stamp, published_ms, prev, msg_id, proof = row
        try:
            if type(key) is not bytes or len(key) != HASH_BYTES:
                raise ValueError("key is not 16 bytes")
            if type(seq) is not int or seq < 0 or type(payload) is not bytes:
                raise ValueError("bad seq or payload")
            if type(local_seq) is not int or type(stamp) is not int:
                raise ValueError("bad local_seq or timestamp")
            if type(published_ms) is not int or published_ms < 0:
                published_ms = 0  # a damaged timestamp is only unknown, the row stays
            if type(prev) is not int or prev < -1:
                prev = -1  # likewise an unknown predecessor
            if not isinstance(msg_id, str) or len(msg_id) > 64:
                msg_id = ""
            if type(proof) is not bytes:
                proof = b""  # unsigned: nodes that check signatures refuse it
            publication = Publication(
                PublicationKey(key),
                Ref(validate_ref(publisher)),
                seq,
                Payload(payload),
                published_ms,
                prev,
                msg_id,
                proof,
            )
            return Stored(
                validate_topic(topic),
                local_seq,
                publication,
                str(via),
                hops if type(hops) is int else None,
                stamp,
            )
        except (WireError, ValueError) as exc:
            log.warning("%s: skipping damaged row %s #%s: %s", self.location, topic, local_seq, exc)
            return None

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        if self._reader_db is not None:
            self._reader_db.close()
        self._db.close()

    def __enter__(self) -> PublicationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
