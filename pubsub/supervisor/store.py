"""The supervisor's durable database: the key (the skip ring's label) each subscriber holds in each topic.

One SQLite file (WAL mode) in the data directory, one table::

    members(topic TEXT, label TEXT, ref TEXT, PRIMARY KEY (topic, label))
    retention(topic TEXT PRIMARY KEY, max_age_ms, max_count, max_bytes, purged_ms)

``retention`` keeps each topic's retention settings (`pubsub.publications.retention`), written
when an operator changes them (`save_retention`), loaded at start (`load_retention`).

The supervisor daemon loads the rows at start (`load`) and, after every call into its core,
applies what the core reports through ``drain_changes()`` (`apply`), all in one
transaction, so that the file always holds a state the core once had.  Rows that are not
well formed (a hand-edited or damaged file) are skipped with a warning rather than handed
to the core.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path

from pubsub.kernel.wire import WireError, validate_ref, validate_topic
from pubsub.runtime.datadir import StoreError, prepare_data_dir

log = logging.getLogger(__name__)

DB_NAME = "supervisor.sqlite3"

Row = tuple[str, str, str]
Change = tuple[str, str, str | None]


#: Longest member key a store accepts without the overlay's own check.
MAX_KEY = 260


def _bounded_key(key: object) -> str:
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY:
        raise ValueError(f"a member key must be 1..{MAX_KEY} characters")
    return key


class SupervisorStore:
    """The membership table of one supervisor, in `data_dir`/supervisor.sqlite3."""

    def __init__(self, data_dir: Path | str, validate_key: Callable[[str], str] | None = None) -> None:
        #: The overlay's check of a stored member key (`Overlay.member_key`: the skip ring's
        #: label bits, the clique's reference); without one any key of 1..`MAX_KEY` characters.
        self.validate_key = validate_key if validate_key is not None else _bounded_key
        self.data_dir = prepare_data_dir(Path(data_dir), StoreError)
        self.path = self.data_dir / DB_NAME
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS members ("
                " topic TEXT NOT NULL, label TEXT NOT NULL, ref TEXT NOT NULL,"
                " PRIMARY KEY (topic, label))"
            )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS retention (topic TEXT PRIMARY KEY,"
                " max_age_ms INTEGER NOT NULL, max_count INTEGER NOT NULL,"
                " max_bytes INTEGER NOT NULL, purged_ms INTEGER NOT NULL)"
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open supervisor database {self.path}: {exc}") from None

    def load(self) -> list[Row]:
        """Every well-formed (topic, label_bits, ref) row."""
        try:
            rows = self._db.execute("SELECT topic, label, ref FROM members").fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read supervisor database {self.path}: {exc}") from None
        good: list[Row] = []
        for row in rows:
            try:
                topic, label, ref = row
                good.append((validate_topic(topic), self.validate_key(label), validate_ref(ref)))
            except (WireError, ValueError) as exc:
                log.warning("%s: skipping malformed row %r: %s", self.path, row, exc)
        return good

    def apply(self, changes: Iterable[Change]) -> int:
        """Apply (topic, label_bits, ref | None) changes in one transaction; None deletes.

        Returns the number of changes applied.  Raises StoreError (nothing applied) on failure.
        """
        batch = list(changes)
        if not batch:
            return 0
        try:
            self._db.execute("BEGIN")
            try:
                for topic, label, ref in batch:
                    if ref is None:
                        self._db.execute(
                            "DELETE FROM members WHERE topic = ? AND label = ?", (topic, label)
                        )
                    else:
                        self._db.execute(
                            "INSERT INTO members (topic, label, ref) VALUES (?, ?, ?)"
                            " ON CONFLICT (topic, label) DO UPDATE SET ref = excluded.ref",
                            (topic, label, ref),
                        )
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write supervisor database {self.path}: {exc}") from None
        return len(batch)

    def load_retention(self) -> list[tuple[str, int, int, int, int]]:
        """Every (topic, max_age_ms, max_count, max_bytes, purged_ms) row with a valid topic
        (the core checks the numbers)."""
        try:
            rows = self._db.execute(
                "SELECT topic, max_age_ms, max_count, max_bytes, purged_ms FROM retention"
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read supervisor database {self.path}: {exc}") from None
        good: list[tuple[str, int, int, int, int]] = []
        for topic, *values in rows:
            try:
                good.append((validate_topic(topic), *values))
            except WireError as exc:
                log.warning("%s: skipping malformed retention row %r: %s", self.path, topic, exc)
        return good

    def save_retention(self, rows: Iterable[tuple[str, int, int, int, int]]) -> None:
        """Write (topic, max_age_ms, max_count, max_bytes, purged_ms) rows in one transaction
        (StoreError, nothing written, on failure)."""
        try:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany(
                    "INSERT INTO retention (topic, max_age_ms, max_count, max_bytes, purged_ms)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (topic) DO UPDATE SET"
                    " max_age_ms = excluded.max_age_ms, max_count = excluded.max_count,"
                    " max_bytes = excluded.max_bytes, purged_ms = excluded.purged_ms",
                    list(rows),
                )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write supervisor database {self.path}: {exc}") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SupervisorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
