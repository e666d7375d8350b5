"""The row codec of the node's publication store (`pubsub.node.store`, layout 2): how the
publications one commit stores in a topic become one row of the ``batches`` table, and how
a row read back is checked and turned into `Stored` publications again.

A row holds the column values ``(topic, last_seq, first_seq, entries, stored_at_ms,
oldest_ms, body)`` (`row`, written with `INSERT`).  ``body`` is a msgpack array with one
entry per publication, ``[local_seq, key, publisher, seq, payload, via, hops,
published_ms, prev, msg_id, proof]`` (`entry`, the fields `ENTRY_FIELDS` names), in local
order; ``first_seq`` and ``last_seq`` are its first and last local numbers, ``entries``
their count, ``oldest_ms`` the smallest ``published_ms`` (what retention looks at),
``stored_at_ms`` the commit's time.  Writing a publication as its own row with its own
index entries cost 8-14 µs per publication on this project's 2-core machine, a quarter of
a node's work under load; one row per commit costs 2-3 µs per publication
(`docs/measurements/issue11.md`).

What is read back is validated (a hand-edited or damaged file): a body that is not an
array gives no entries, with a warning (`entries`); an entry without the shape of one
(`sound`) or with a bad value is skipped with a warning (`decode`); a journal frame's item
without the shape of a row is left out (`journal_row`).  Nothing bad reaches the trie.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple, TypeGuard

import msgpack

from pubsub.kernel.message import Ref, Topic
from pubsub.kernel.wire import WireError, pack, validate_ref, validate_topic
from pubsub.publications.messages import Payload, Publication, PublicationKey
from pubsub.publications.trie import HASH_BYTES

log = logging.getLogger(__name__)

#: Layout version of a store made of these rows, in SQLite's user_version.
FORMAT = 2
#: The statement a row's column values (`row`) are written with.
INSERT = "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?)"
#: The fields of a body entry, in their order.
ENTRY_FIELDS = (
    "local_seq", "key", "publisher", "seq", "payload", "via", "hops", "published_ms", "prev", "msg_id", "proof",
)


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


def entry(local_seq: int, p: Publication, via: str, hops: int | None) -> list[Any]:
    """A publication as one entry of a row's body (module docstring)."""
    return [local_seq, p.key, p.publisher, p.seq, p.payload, via, hops, p.published_ms, p.prev, p.msg_id, p.proof]


def row(topic: object, stamp: object, entries: list[list[Any]]) -> tuple[object, ...]:
    """The column values of a row holding `entries` (in local order), for `INSERT`; the
    body is packed by the codec's shared packer (`msgpack.packb` builds a new one per call)."""
    oldest = min([e[7] for e in entries if type(e[7]) is int], default=0)
    return (topic, entries[-1][0], entries[0][0], len(entries), stamp, oldest, pack(entries))


def sound(entry: object) -> TypeGuard[list[Any]]:
    """Whether a body entry has the shape of one and a local number (its values are checked
    when it is read, `decode`)."""
    return type(entry) is list and len(entry) == len(ENTRY_FIELDS) and type(entry[0]) is int


def at_or_before(entry: list[object], ms: int, key: bytes) -> bool:
    """Whether a sound entry lies at or before the retention horizon (`ms`, `key`)."""
    published, own = entry[7], entry[1]
    if type(published) is not int or type(own) is not bytes:
        return False
    return published < ms or (published == ms and own <= key)


def entries(location: str, topic: object, body: object) -> list[object]:
    """A row's body unpacked: its entries, or none with a warning if it is not an array."""
    try:
        found = msgpack.unpackb(body, raw=False, strict_map_key=True) if type(body) is bytes else None
    except Exception:  # noqa: BLE001 - whatever is wrong with the bytes, the row is damaged
        found = None
    if type(found) is not list:
        log.warning("%s: skipping a damaged row of %r (its body is not an array)", location, topic)
        return []
    return found


def journal_row(row: object) -> TypeGuard[list[Any]]:
    """Whether a journal frame's item has the shape of a row's column values (`row`; the
    entries are checked when read, as those of any row)."""
    return (
        type(row) is list and len(row) == 7 and type(row[0]) is str
        and all(type(value) is int for value in row[1:6]) and type(row[6]) is bytes
    )


def decode(location: str, topic: object, entry: object, stamp: object) -> Stored | None:
    """A body entry (module docstring) of a row of `topic` stored at `stamp` as a `Stored`,
    or None with a warning naming the store's `location`."""
    if not sound(entry):
        log.warning("%s: skipping a damaged entry of %r: %.80r", location, topic, entry)
        return None
    local_seq, key, publisher, seq, payload, via, hops, published_ms, prev, msg_id, proof = entry
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
        log.warning("%s: skipping damaged row %s #%s: %s", location, topic, local_seq, exc)
        return None
