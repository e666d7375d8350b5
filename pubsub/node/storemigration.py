"""The on-disk layout migration of the node's publication store (`pubsub.node.store`):
layout 1, one row per publication (``publications(topic, local_seq, key, ...)``), is
turned into layout 2's batch rows (`pubsub.node.rowcodec`) when such a store is opened, in
one transaction (`convert_layout1`); older code refuses a converted store (it reads
layout 1 only) with a clear error.

``published_ms`` (the publication's own timestamp, `Publication.published_ms`), ``prev``,
``msg_id`` and ``proof`` (`Publication.prev`, `Publication.msg_id`, `Publication.proof`: its
publisher's signature, kept so that whoever gets it later from there can check it) were
added to layout 1 after its first version; a layout-1 store without them is converted with
their defaults (0, -1, "" and empty).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from pubsub.node import rowcodec
from pubsub.node.rowcodec import ENTRY_FIELDS, FORMAT, INSERT

#: The defaults of the columns added to layout 1 after its first version (SQL literals).
_ADDED_LATER = {"published_ms": "0", "prev": "-1", "msg_id": "''", "proof": "x''"}
#: Layout 1's columns, in the order of a body entry (`rowcodec.entry`), with the defaults of
#: those added to it later.
_LAYOUT1_COLUMNS = tuple((name, _ADDED_LATER.get(name)) for name in ENTRY_FIELDS)
#: Layout 1 rows per converted batch row.
_CONVERT_ROWS = 512


def convert_layout1(db: sqlite3.Connection) -> None:
    """Turn a layout-1 store's ``publications`` table into batch rows, in one transaction:
    one row per topic and commit as layout 1 wrote them (same ``stored_at_ms``), at most
    `_CONVERT_ROWS` publications each.  Values are copied as they are (a damaged one is
    still skipped when read); columns that store never had get their defaults.  Nothing to
    do for a store without that table."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'publications'").fetchone() is None:
        return
    columns = {row[1] for row in db.execute("PRAGMA table_info(publications)")}
    picked = ", ".join(name if name in columns else f"{default} AS {name}" for name, default in _LAYOUT1_COLUMNS)
    db.execute("BEGIN")
    try:
        rows = db.execute(f"SELECT topic, stored_at_ms, {picked} FROM publications ORDER BY topic, local_seq")
        group: list[list[Any]] = []
        place: tuple[object, object] | None = None
        for topic, stamp, *entry in rows:
            if group and ((topic, stamp) != place or len(group) >= _CONVERT_ROWS):
                _insert_converted(db, place, group)
                group = []
            place = (topic, stamp)
            group.append(entry)
        if group:
            _insert_converted(db, place, group)
        db.execute("DROP TABLE publications")
        db.execute(f"PRAGMA user_version = {FORMAT}")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _insert_converted(db: sqlite3.Connection, place: tuple[object, object] | None, group: list[list[Any]]) -> None:
    assert place is not None
    db.execute(INSERT, rowcodec.row(*place, group))
