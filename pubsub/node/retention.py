"""A node's retention on disk: what the core's windows removed leaves the store too.

The core decides (`pubsub.publications.retention`: settings from the supervisor, a horizon per
topic that only moves forward); this module makes it durable, in the node's publication
store (`pubsub.node.store`), one more table in the same SQLite file::

    retention(topic PRIMARY KEY, max_age_ms, max_count, max_bytes, purged_ms,
              through_ms, through_key, removed_local)

* **Pruning.**  When a topic's settings or horizon change, the publications at or before
  the horizon -- ``published_ms < through_ms``, or equal with ``key <= through_key``, the
  order of `pubsub.publications.retention` -- are deleted (`PublicationStore.remove_at_or_before`)
  and the topic's row is written, in one transaction.  It runs after the group commit that
  holds every row queued so far (`pubsub.node.commits`), so a publication stored just
  before it expired is written and then deleted, never left behind.
* **Restart.**  At start the settings and horizons are handed to the core before any topic's
  trie is refilled, so what the store still holds beyond a horizon (a crash between a
  commit and a prune) is not restored; the next prune deletes it.
* **Local numbers are never reused.**  ``removed_local`` is the highest local number ever
  removed in the topic.  The store's latest number is at least that after a restart, even
  if retention emptied the topic.
* **Cursors.**  A client that resumes after local number N while some publication numbered
  above N has been removed is told so (`pubsub.node.delivery`: ``cursor_expired``) rather
  than served the rest as if nothing were missing.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from functools import partial

from pubsub.kernel.message import Topic
from pubsub.node.commits import GroupCommit, Written
from pubsub.node.store import PublicationStore, StoreError
from pubsub.node.writer import StoreThread
from pubsub.publications.hosted import HostedNode
from pubsub.publications.retention import Order, Policy

log = logging.getLogger(__name__)

_TABLE = (
    "CREATE TABLE IF NOT EXISTS retention (topic TEXT PRIMARY KEY,"
    " max_age_ms INTEGER NOT NULL, max_count INTEGER NOT NULL, max_bytes INTEGER NOT NULL,"
    " purged_ms INTEGER NOT NULL, through_ms INTEGER NOT NULL, through_key BLOB NOT NULL,"
    " removed_local INTEGER NOT NULL)"
)


class RetentionRecords:
    """The retention table of one node's store (module docstring).  Its methods run where
    the store's writes run (`pubsub.node.commits`)."""

    def __init__(self, store: PublicationStore) -> None:
        self.store = store
        self._db: sqlite3.Connection = store._db  # the store's writing connection
        self.rows: dict[Topic, tuple[Policy, Order]] = {}
        self._removed: dict[Topic, int] = {}
        try:
            self._db.execute(_TABLE)
            found = self._db.execute(
                "SELECT topic, max_age_ms, max_count, max_bytes, purged_ms, through_ms, through_key,"
                " removed_local FROM retention"
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the retention table of {store.location}: {exc}") from None
        for topic, age, count, size, purged, through_ms, through_key, removed in found:
            try:
                policy = Policy(age, count, size, purged)
                if type(through_ms) is not int or type(through_key) is not bytes or type(removed) is not int:
                    raise ValueError("bad horizon")
            except ValueError as exc:
                log.warning("%s: skipping damaged retention row %r: %s", store.location, topic, exc)
                continue
            self.rows[Topic(topic)] = (policy, (through_ms, through_key))
            self._removed[Topic(topic)] = removed
            # local numbers are never reused, even when retention emptied the topic
            latest = store._latest
            if removed > latest.get(Topic(topic), 0):
                latest[Topic(topic)] = removed

    def removed_local(self, topic: Topic) -> int:
        """The highest local number of `topic` that retention removed (0: none)."""
        return self._removed.get(topic, 0)

    def prune(self, topic: Topic, policy: Policy, through: Order) -> int:
        """Delete what lies at or before `through` and record the settings and horizon, in
        one transaction; how many publications went (StoreError, nothing changed, on failure)."""
        ms, key = through
        db = self._db
        self.store.settle()  # what waits in the journal is removed too
        try:
            db.execute("BEGIN")
            try:
                count, highest = self.store.remove_at_or_before(topic, ms, key)
                removed = max(self._removed.get(topic, 0), highest)
                db.execute(
                    "INSERT OR REPLACE INTO retention (topic, max_age_ms, max_count, max_bytes, purged_ms,"
                    " through_ms, through_key, removed_local) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (topic, policy.max_age_ms, policy.max_count, policy.max_bytes, policy.purged_ms, ms, key, removed),
                )
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                self.store.drop_keys(topic)  # its keys in memory may miss rows that stay
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"cannot prune {topic!r} in {self.store.location}: {exc}") from None
        self._removed[topic] = removed
        self.rows[topic] = (policy, through)
        return int(count)


class RetentionKeeper:
    """Carries a node core's retention decisions to its store and its streams."""

    def __init__(
        self,
        core: HostedNode,
        store: PublicationStore,
        thread: StoreThread,
        commits: GroupCommit,
        pruned: Callable[[Topic], None],
        on_error: Callable[[StoreError], None],
    ) -> None:
        self.core = core
        self.thread = thread
        self.commits = commits
        self.records = RetentionRecords(store)
        self._pruned = pruned
        self._on_error = on_error
        #: Rows deleted by retention since start.
        self.deleted = 0
        self.clock(time.monotonic())
        for topic, (policy, through) in sorted(self.records.rows.items()):
            core.load_retention(topic, policy, through)

    def clock(self, now: float) -> None:
        """Tell the core how its clock maps to Unix time (`NodeRetention.wall_offset`)."""
        self.core.set_wall_offset(time.time() - now)

    def persist(self) -> None:
        """After a call into the core: make the topics whose settings or horizon changed
        durable, after the commit of everything queued so far."""
        for topic, policy, through in self.core.retention_changes():
            self.commits.after(partial(self._after_commit, topic, policy, through))

    def _after_commit(self, topic: Topic, policy: Policy, through: Order, ok: bool, written: Written) -> None:
        self._prune(topic, policy, through)

    def _prune(self, topic: Topic, policy: Policy, through: Order) -> None:
        try:
            if self.commits.inline:
                deleted = self.records.prune(topic, policy, through)
            else:
                deleted = self.thread.call(self.records.prune, topic, policy, through)
        except StoreError as exc:
            self._on_error(exc)
            self.core.retention_unsaved(topic)  # tried again after the next call
            return
        self.deleted += deleted
        if deleted:
            self._pruned(topic)

    def status(self) -> dict[str, object]:
        return {"deleted": self.deleted, "removed_local": dict(sorted(self.records._removed.items()))}
