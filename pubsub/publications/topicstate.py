"""What one subscriber holds for one topic, shared by the two publication protocols (paper 000, §4.2).

`TopicState` is the base of the topic's publication core (`pubsub.publications.antientropy.AntiEntropy`):
the topic's Patricia trie (`pubsub.publications.trie`, §4.2) and how publications get into it
and out of it, for both jobs built on it -- the Alg. 5 exchange
(`pubsub.publications.antientropy`) and the dissemination of new publications
(`pubsub.publications.dissemination`).  Like every core it does no I/O: what the protocols send
is collected here and returned by their entry points as `Send`s.

Storage
    `store` is Alg. 5's Insert (l.8-9 and l.31-32): a publication not held yet goes into the
    trie and is recorded as an `Arrival`; one held already is not stored twice.  With a
    retention window (`pubsub.publications.retention`), what lies at or before its horizon
    is refused.  `forget` takes back what could not be made durable, `restore` refills the
    trie from durable storage without recording arrivals.

What the owner reads back
    `new` lists every publication stored since the owner last drained it, as an
    `Arrival` (publication, how it came: "local", "flood", "anti-entropy", "handover" or
    "tree", and the hop count for floods and the tree).  The node daemon delivers these to
    applications and persists them (the rows of a `Persist` are `NewRow`s); the simulator
    reads the hop counts.  `counters` counts rounds, repairs, duplicates and every kind of
    rejected input.

What the dissemination tells the rounds
    The anti-entropy rounds adapt to what the dissemination does (`pubsub.publications.antientropy`,
    "Eager rounds" and "Deferred rounds"), so the bookkeeping both write lives here: how
    many publications the arc broadcast carried since the last round, the repairs of this
    Timeout interval, and the Timeouts left in the eager state (`_saw_difference`).

Input from the network is never trusted: publications whose fields are malformed or whose
key does not match their content are rejected and counted (`_valid_publication`); nothing
here raises on a message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.kernel.wire import MAX_PAYLOAD_BYTES
from pubsub.publications.fields import MAX_PUBLICATIONS
from pubsub.publications.messages import (
    Payload,
    Publication,
    PublicationKey,
    Publish,
)
from pubsub.publications.retention import Window
from pubsub.publications.trie import (
    EMPTY_LABEL,
    HASH_BYTES,
    KEY_BITS,
    PatriciaTrie,
    TrieLabel,
    publication_key,
)

#: How a stored publication arrived.
LOCAL, FLOOD, ANTI_ENTROPY, HANDOVER, TREE = "local", "flood", "anti-entropy", "handover", "tree"

#: Default size of one Publish batch: publications, and bytes of payload (plus overhead).
DEFAULT_BATCH_PUBLICATIONS = 64
DEFAULT_BATCH_BYTES = 256 * 1024
#: Timeouts a node stays eager after it saw a difference (`pubsub.publications.antientropy`,
#: "Eager rounds").
EAGER_ROUNDS = 4
#: Per-publication overhead assumed when filling a batch (key, reference, seq, framing).
PUBLICATION_OVERHEAD = 64


class Arrival(NamedTuple):
    """A publication newly stored in the trie, and how it got here."""

    publication: Publication
    via: str
    hops: int | None = None


class NewRow(NamedTuple):
    """A publication the core stored, for the store to append (the rows of a `Persist`):
    the topic, the publication, how it arrived and after how many hops."""

    topic: Topic
    publication: Publication
    via: str
    hops: int | None = None


class TopicState:
    """One topic at one subscriber: the trie, the arrivals, the counters and the outbox that
    the Alg. 5 exchange and the dissemination share (see the module docstring)."""

    def __init__(
        self,
        ref: Ref,
        topic: Topic,
        *,
        key_bits: int = KEY_BITS,
        verify_keys: bool = True,
        batch_publications: int = DEFAULT_BATCH_PUBLICATIONS,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> None:
        """`key_bits` < 128 makes trie keys the first `key_bits` bits of a publication's key
        (tests replay the paper's 3-bit example that way).  `verify_keys` checks that each
        received publication's key is `publication_key` of its content.
        """
        if not 1 <= batch_publications <= MAX_PUBLICATIONS:
            raise ValueError(f"batch_publications must be 1..{MAX_PUBLICATIONS}")
        if batch_bytes < 1:
            raise ValueError("batch_bytes must be positive")
        self.ref = ref
        self.topic = topic
        self.key_bits = key_bits
        self.trie: PatriciaTrie[Publication] = PatriciaTrie(key_bits)
        self.verify_keys = verify_keys
        self.batch_publications = batch_publications
        self.batch_bytes = batch_bytes
        self.new: list[Arrival] = []
        self.counters: Counter[str] = Counter()
        #: The topic's retention window, None while it has no settings (`NodeRetention`).
        self.retention: Window | None = None
        self._out: list[Send] = []
        #: Timeouts left in the eager state (`AntiEntropy.eager`).
        self._eager_rounds = 0
        #: Publications the arc broadcast brought here or started here since the last
        #: round, and rounds deferred in a row for them (`pubsub.publications.antientropy`,
        #: "Deferred rounds").
        self._tree_carried = 0
        self._deferred_rounds = 0
        #: Keys of the publications stored by anti-entropy in this Timeout interval
        #: (`pubsub.publications.antientropy`, "Eager rounds": a Spread bringing one shows
        #: the repair raced the tree).
        self._repaired: set[bytes] = set()

    # ------------------------------------------------------------------ keys and storage
    def trie_key(self, publication: Publication) -> int:
        """The publication's leaf label: the first `key_bits` bits of its 16-byte key."""
        return int.from_bytes(publication.key, "big") >> (8 * HASH_BYTES - self.key_bits)

    def holds(self, publication: Publication) -> bool:
        return self.trie.contains(self.trie_key(publication))

    def store(self, publication: Publication, via: str = LOCAL, hops: int | None = None) -> bool:
        """Insert into the trie (Alg. 5 l.8-9); True and an `Arrival` in `new` if it was new.

        With a retention window, what lies at or before its horizon is refused and counted
        (`pubsub.publications.retention`: nothing retention removed comes back)."""
        window = self.retention
        if window is not None and not window.admits(publication):
            self.counters["retention_refused"] += 1
            return False
        if not self.trie.add(self.trie_key(publication), publication):
            return False
        if window is not None:
            window.added(publication)
        self.new.append(Arrival(publication, via, hops))
        return True

    def forget(self, publication: Publication) -> bool:
        """Take a stored publication out of the trie (it could not be made durable; it
        comes back by anti-entropy when it was someone else's).  False if not held."""
        removed = self.trie.remove(self.trie_key(publication))
        if removed:
            self.counters["forgotten"] += 1
            if self.retention is not None:
                self.retention.removed(publication)
        return removed

    def restore(self, publications: Iterable[Publication]) -> int:
        """Insert publications from durable storage without recording arrivals.

        Each is validated like one received from the network (a damaged store must not
        corrupt the trie); returns how many were inserted.
        """
        inserted = 0
        for publication in publications:
            if not self._valid_publication(publication):
                continue
            if self.trie.add(self.trie_key(publication), publication):
                inserted += 1
        self.counters["restored"] += inserted
        return inserted

    def drain_new(self) -> list[Arrival]:
        """The arrivals since the last call (and forget them)."""
        out, self.new = self.new, []
        return out

    def publications(self, prefix: TrieLabel = EMPTY_LABEL) -> list[Publication]:
        """Every stored publication whose trie key starts with `prefix`, in key order."""
        return [item for _, item in self.trie.enumerate(prefix)]

    # ------------------------------------------------------------------ the rounds' bookkeeping
    def _saw_difference(self) -> None:
        """Evidence that some neighbour's trie differs from ours: be eager for a while."""
        self._eager_rounds = EAGER_ROUNDS

    # ------------------------------------------------------------------ batches
    def _batches(self, publications: Iterable[Publication], most: int) -> Iterator[list[Publication]]:
        """`publications` in order, in batches of at most `most` and about `batch_bytes` of
        payload each (a single publication larger than that travels alone)."""
        batch: list[Publication] = []
        size = 0
        for publication in publications:
            cost = len(publication.payload) + PUBLICATION_OVERHEAD
            if batch and (len(batch) >= most or size + cost > self.batch_bytes):
                yield batch
                batch, size = [], 0
            batch.append(publication)
            size += cost
        if batch:
            yield batch

    # ------------------------------------------------------------------ validation
    def _valid_publication(self, publication: object, *, fields_checked: bool = False, key_known: bool = False) -> bool:
        """Whether `publication` is well formed (unless the decoder checked its fields:
        `PublicationList.checked`) and its key is the hash of its contents (when keys are
        verified, and unless it was issued here: `key_known`); rejections are counted."""
        if not fields_checked and (
            not isinstance(publication, Publication)
            or type(publication.key) is not bytes
            or len(publication.key) != HASH_BYTES
            or not isinstance(publication.publisher, str)
            or type(publication.seq) is not int
            or not isinstance(publication.payload, bytes)
            or len(publication.payload) > MAX_PAYLOAD_BYTES
        ):
            self._reject("bad_publication")
            return False
        assert isinstance(publication, Publication)
        if self.verify_keys and not key_known and publication.key != publication_key(
            publication.publisher, publication.seq, publication.payload
        ):
            self._reject("key_mismatch")
            return False
        return True

    def _reject(self, reason: str) -> None:
        self.counters["rejected_malformed"] += 1
        self.counters[f"rejected_{reason}"] += 1

    # ------------------------------------------------------------------ plumbing
    def status(self) -> dict[str, object]:
        """JSON-able summary: number of publications and the root (label, hash)."""
        label, digest = self.trie.root()
        return {"count": len(self.trie), "root": [label.bits, digest.hex()]}

    def _send(self, dest: Ref, msg: Message) -> None:
        if isinstance(msg, Publish):
            self.counters["publications_sent"] += len(msg.publications)
        self.counters[f"sent_{msg.kind}"] += 1
        self._out.append(Send(dest, msg))

    def _flush(self) -> list[Send]:
        out, self._out = self._out, []
        return out


def make_publication(
    publisher: Ref, seq: int, payload: bytes, published_ms: int = 0, prev: int = -1, msg_id: str = ""
) -> Publication:
    """A publication with its key computed from its content (`publication_key`)."""
    return Publication(
        PublicationKey(publication_key(publisher, seq, payload)),
        publisher,
        seq,
        Payload(payload),
        published_ms,
        prev,
        msg_id,
    )
