"""The publication protocol of one subscriber for one topic (paper 000, §4.2-4.3, Alg. 5).

`AntiEntropy` owns the topic's Patricia trie (`pubsub.publications.trie`) and reacts to the four
publication messages.  Like every core it does no I/O: entry points return the `Send`s
to deliver, and randomness and neighbour lists come in as arguments.

Anti-entropy (§4.2)
    Every Timeout, PublishTimeout sends CheckTrie(u, root) to one random ring neighbour.
    The receiver compares each (label, hash) tuple with its own trie:

    (i)   a node with that label and the same hash: the subtries agree, no answer;
    (ii)  an inner node with that label and another hash: answer CheckTrie with its two
          children, so the comparison continues one level down on the other side;
    (iii) no node with that label: some publications under it are missing here.  If the
          trie has nodes extending the label, c is the shallowest of them; everything
          under label + (1 - first extra bit of c) is missing, so answer
          CheckAndPublish((c.label, c.hash), that prefix).  Otherwise everything under the
          label is missing: CheckAndPublish((), label).

    CheckAndPublish runs CheckTrie on its tuples and sends every publication under the
    prefix back in Publish batches of bounded size; Publish stores what is new.

    A leaf found with the right label and another hash cannot happen (a leaf's hash is the
    hash of its label); such tuples are ignored and counted as ``leaf_hash_mismatch``.

Flooding (§4.3)
    A new publication is also sent as PublishNew to all ring and shortcut neighbours; a
    receiver that did not hold it stores it and forwards it to all of its neighbours,
    one that did drops it.  `flooding` switches this on and off; anti-entropy alone
    still delivers everything (Theorem 5.19), flooding only makes it fast.  PublishNew
    counts the edges it crossed in `hops` (the publisher sends 1).

The arc broadcast (``tree``, beyond the paper)
    Flooding sends a publication over every edge; in a legitimate ring the arc broadcast
    (`pubsub.publications.arcs`) sends it over a spanning tree, n - 1 Spread messages in about
    log2 n hops.  With `tree` on (and `flooding`), the publisher sends Spread to its
    neighbours, each with its piece of the ring; a receiver stores what is new and
    forwards the whole batch inside its piece.  A receiver that has no label, knows no
    ring successor, or does not lie in the arc it was given cannot trust the arc: it falls
    back to flooding (PublishNew) for the publications that were new to it
    (``spread_fallbacks``).  Anti-entropy stays the guarantee either way, as Plumtree's lazy
    push backs its eager tree.

Eager rounds (beyond the paper)
    Alg. 5 sends one CheckTrie per Timeout.  A node that has just seen evidence that tries
    differ around it -- it stored a publication by anti-entropy (it lacked it), it served a
    CheckAndPublish (someone lacked what it holds), or it published while flooding is off
    (nobody else holds it) -- is `eager` for the next `EAGER_ROUNDS` Timeouts, and its
    owner then hands `publish_timeout` several partners (`pubsub.skipring.partners`).  A
    ring whose tries agree produces none of these, so it goes back to one CheckTrie per
    node and Timeout; with flooding on they are rare (a race between a flood and a round).
    A CheckAndPublish served while the arc broadcast carries publications here or from
    here (see "Deferred rounds") is no such evidence: what the neighbour lacked is mostly
    on its way to it.  Nor is a repair that the tree then brings again: when a Spread
    carries a publication this node stored by anti-entropy within the same Timeout
    interval, the round only raced the broadcast (a publisher's held broadcast, say,
    `pubsub.node.app`), so the node stops being eager (``repairs_raced`` counts them).
    Without that a neighbour of the publisher stayed eager under load: each round found
    what was still on its way, stored it, and armed the next rounds.

Deferred rounds (beyond the paper)
    While the arc broadcast is carrying publications here, a round's root comparison mostly
    finds publications still on their way (a neighbour holds one the tree is about to bring
    us, or the other way round) and descends for nothing: about 5% of a node's CPU at
    50 publications per second, more under load (`docs/measurements/issue11.md`).  The
    same holds at the publisher, which is always ahead of its neighbours by the Spreads it
    just sent.  A node that stored publications from Spread messages, or started the arc
    broadcast of its own (`spread_own`), since its last round, and is not `eager`, defers
    the round -- at most `MAX_DEFERRED_ROUNDS` Timeouts in a row, so every node still
    starts a round at least every `MAX_DEFERRED_ROUNDS` + 1 Timeouts and Theorem 5.19's
    argument holds with the interval scaled by that factor.  Only the tree's publications
    defer: a ring that is not legitimate falls back to flooding, and a node that lacked
    something (it stored by anti-entropy) is eager, so repairs never wait -- unless the
    tree then brings the same publication, which shows there was no difference ("Eager
    rounds").  Rounds that neighbours start are answered as always (``rounds_deferred``
    counts the deferrals).

The empty trie
    Its root is reported as (⊥, `EMPTY_HASH`).  A receiver whose own trie is empty treats
    that exact pair as equal (case (i)).  One deliberate departure from Alg. 5 l.1-4: a
    subscriber whose trie is empty skips PublishTimeout.  This loses nothing.  A round
    started by a non-empty neighbour v fills an empty u completely in one exchange (u
    finds no node for v's root label and no extension of it, so it asks for everything
    under that label), and an empty u has nothing another trie lacks -- its potential
    phi(u, w) in the proof of Theorem 5.19 is 0 -- so only rounds started by non-empty
    tries are needed for Lemma 5.24.  What it saves is one message per subscriber and
    timeout interval on every topic that carries no publications, so the BuildSR runs of
    such topics are exactly what they were before publications existed.

What the owner reads back
    `new` lists every publication stored since the owner last drained it, as an
    `Arrival` (publication, how it came: "local", "flood" or "anti-entropy", and the hop
    count for floods).  The node daemon will deliver these to applications and persist
    them; the simulator reads the hop counts.  `counters` counts rounds, repairs,
    duplicates and every kind of rejected input.

Input from the network is never trusted: tuples with labels longer than the key length or
hashes that are not 16 bytes, prefixes that are not bit strings of at most the key length,
and publications whose key does not match their content are rejected and counted; nothing
here raises on a message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from pubsub.kernel.effects import Batched
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.kernel.wire import MAX_PAYLOAD_BYTES
from pubsub.publications.arcs import ArcView, in_arc, origin_arc, pieces
from pubsub.publications.fields import MAX_DIGESTS, MAX_PUBLICATIONS
from pubsub.publications.messages import (
    CheckAndPublish,
    CheckTrie,
    NodeDigest,
    NodeHash,
    Payload,
    Position,
    Publication,
    PublicationKey,
    PublicationList,
    Publish,
    PublishNew,
    Spread,
)
from pubsub.publications.retention import Window
from pubsub.publications.trie import (
    EMPTY_HASH,
    EMPTY_LABEL,
    HASH_BYTES,
    KEY_BITS,
    PatriciaTrie,
    TrieLabel,
    TrieNode,
    publication_key,
)

#: How a stored publication arrived.
LOCAL, FLOOD, ANTI_ENTROPY, HANDOVER, TREE = "local", "flood", "anti-entropy", "handover", "tree"
#: Largest `levels` a Spread may claim (labels have at most 64 bits).
MAX_LEVELS = 64

#: Default size of one Publish batch: publications, and bytes of payload (plus overhead).
DEFAULT_BATCH_PUBLICATIONS = 64
DEFAULT_BATCH_BYTES = 256 * 1024
#: Timeouts a node stays eager after it saw a difference (see "Eager rounds").
EAGER_ROUNDS = 4
#: Rounds in a row a node defers while the tree brings publications (see "Deferred rounds").
MAX_DEFERRED_ROUNDS = 3
#: Repairs remembered per Timeout interval (see "Eager rounds"); the record is cleared by
#: PublishTimeout, which a node without a label does not run, so it is also bounded.  A
#: repair beyond it is not remembered: it keeps the node eager, as every repair once did.
MAX_REMEMBERED_REPAIRS = 4096
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


#: The work of the `Batched` effects of `publish_local`: the arc broadcast of own publications.
SPREAD_OWN = "spread_own"


class AntiEntropy:
    """Alg. 5 for one topic at one subscriber: the trie plus the four message handlers."""

    def __init__(
        self,
        ref: Ref,
        topic: Topic,
        *,
        key_bits: int = KEY_BITS,
        flooding: bool = True,
        tree: bool = False,
        flood_targets: Callable[[], Iterable[Ref]] | None = None,
        arc_view: Callable[[], ArcView | None] | None = None,
        verify_keys: bool = True,
        batch_publications: int = DEFAULT_BATCH_PUBLICATIONS,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> None:
        """`flood_targets` names the current ring and shortcut neighbours (for PublishNew);
        `arc_view` tells where this node and its neighbours sit on the ring (for Spread,
        when `tree` is on; None while the node has no label).

        `key_bits` < 128 makes trie keys the first `key_bits` bits of a publication's key
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
        self.flooding = flooding
        self.tree = tree
        self.flood_targets = flood_targets
        self.arc_view = arc_view
        self.verify_keys = verify_keys
        self.batch_publications = batch_publications
        self.batch_bytes = batch_bytes
        self.new: list[Arrival] = []
        self.counters: Counter[str] = Counter()
        #: The topic's retention window, None while it has no settings (`NodeRetention`).
        self.retention: Window | None = None
        self._out: list[Send] = []
        #: Timeouts left in the eager state (`eager`).
        self._eager_rounds = 0
        #: Publications the arc broadcast brought here or started here since the last
        #: round, and rounds deferred in a row for them (see "Deferred rounds").
        self._tree_carried = 0
        self._deferred_rounds = 0
        #: Keys of the publications stored by anti-entropy in this Timeout interval (see
        #: "Eager rounds": a Spread bringing one shows the repair raced the tree).
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

    # ------------------------------------------------------------------ entry points
    @property
    def eager(self) -> bool:
        """Whether this round should talk to more than one partner: a difference between
        tries was seen here within the last `EAGER_ROUNDS` Timeouts (see "Eager rounds")."""
        return self._eager_rounds > 0

    def publish_timeout(self, targets: Sequence[Ref]) -> list[Send]:
        """PublishTimeout (Alg. 5 l.1-4): our root to each of `targets` -- one random ring
        neighbour in the paper; the partners `pubsub.skipring.partners` chose here.

        An empty trie sends nothing (see "The empty trie" in the module docstring): its
        owner has nothing to offer, and any neighbour's own round fills it completely.  A
        node the tree is feeding, or that spreads its own publications by it, may defer the
        round (see "Deferred rounds").
        """
        self._repaired.clear()
        eager = self._eager_rounds > 0
        if eager:
            self._eager_rounds -= 1
        if len(self.trie) == 0:
            self.counters["rounds_skipped_empty"] += 1
            return []
        fed, self._tree_carried = self._tree_carried, 0
        if fed and not eager and self._deferred_rounds < MAX_DEFERRED_ROUNDS:
            self._deferred_rounds += 1
            self.counters["rounds_deferred"] += 1
            return []
        self._deferred_rounds = 0
        chosen = sorted({ref for ref in targets if ref != self.ref})
        if not chosen:
            return []
        counters = self.counters
        counters["rounds"] += 1
        counters["sent_check_trie"] += len(chosen)
        counters["sent_root_check_trie"] += len(chosen)  # a round's own, not a comparison's
        label, digest = self.trie.root()
        root = [NodeDigest(label, NodeHash(digest))]
        return [Send(target, CheckTrie(self.topic, self.ref, root)) for target in chosen]

    def _saw_difference(self) -> None:
        """Evidence that some neighbour's trie differs from ours: be eager for a while."""
        self._eager_rounds = EAGER_ROUNDS

    def publish_local(
        self,
        publication: Publication,
        flood_targets: Iterable[Ref] | None = None,
        via: str = LOCAL,
    ) -> list[Send | Batched]:
        """A publication issued here (or handed over to us, `via` HANDOVER): store it; when
        flooding, PublishNew to every neighbour.

        §4.3: the publisher inserts p and sends PublishNew(p) to all ring and shortcut
        neighbours (`flood_targets`, or the callback given at construction).  With the arc
        broadcast (`tree`, no `flood_targets`), a `Batched(SPREAD_OWN, topic, p)` effect: the
        executor hands it back to the node core with the other publications of the same
        batch (a `Batch`), and `spread_own` sends them all.
        """
        if not self._valid_publication(publication, key_known=via == LOCAL):
            return []
        if not self.store(publication, via, 0):
            self.counters["publish_local_duplicates"] += 1
            return []
        self.counters["published"] += 1
        out: list[Send | Batched] = []
        if not self.flooding:
            self._saw_difference()  # nobody else holds it, and nothing spreads it but us
        elif self.tree and flood_targets is None:
            out.append(Batched(SPREAD_OWN, self.topic, publication))
        else:
            self._flood(publication, 1, flood_targets)
        out.extend(self._flush())
        return out

    def spread_own(self, publications: list[Publication]) -> list[Send]:
        """Start the arc broadcast of publications issued (or taken over) here: one Spread
        per neighbour for all of them (several when they exceed `MAX_PUBLICATIONS` or about
        `batch_bytes`), each with its piece of the whole ring but us; or, when we have no
        arc to trust (no label), PublishNew to every neighbour as §4.3 does.
        `publish_local` hands this over as a `Batched` effect, so that the arcs are computed
        once per batch of publications, not once per publication."""
        view = self._view()
        if view is None:
            for publication in publications:
                self._flood(publication, 1, None)
            return self._flush()
        start, end = origin_arc(view.me)
        self._tree_carried += len(publications)
        for batch in self._batches(publications, MAX_PUBLICATIONS):
            # one list for every neighbour's Spread: encoded once (`PublicationList`)
            self._spread(PublicationList(batch), start, end, view.levels, 1, view)
        return self._flush()

    def handle(self, msg: Message, flood_targets: Iterable[Ref] | None = None) -> list[Send]:
        """React to CheckTrie, CheckAndPublish, Publish or PublishNew for this topic."""
        if isinstance(msg, CheckTrie):
            self.check_trie(msg.sender, msg.tuples)
        elif isinstance(msg, CheckAndPublish):
            self.check_and_publish(msg.sender, msg.tuples, msg.prefix)
        elif isinstance(msg, Publish):
            self.publish(msg.publications)
        elif isinstance(msg, PublishNew):
            self.publish_new(msg.publication, msg.hops, flood_targets)
        elif isinstance(msg, Spread):
            self.spread(msg)
        else:
            self._reject("unknown_message")
        return self._flush()

    # ------------------------------------------------------------------ Alg. 5
    def check_trie(self, sender: Ref, tuples: object) -> None:
        """CheckTrie (Alg. 5 l.11-23): compare each tuple with our trie, answer the sender."""
        self.counters["check_trie_received"] += 1
        if self._equal_root(tuples):
            return  # case (i) at the root: the common case once all tries agree
        digests = self._valid_tuples(sender, tuples)
        if digests is None:
            return
        self._compare(sender, digests)

    def check_and_publish(self, sender: Ref, tuples: object, prefix: object) -> None:
        """CheckAndPublish (Alg. 5 l.25-28): CheckTrie on the tuples, then every
        publication under `prefix` to the sender in Publish batches."""
        self.counters["check_and_publish_received"] += 1
        digests = self._valid_tuples(sender, tuples)
        if digests is None:
            return
        if not isinstance(prefix, TrieLabel):
            self._reject("bad_prefix")
            return
        if prefix.length > self.key_bits:
            self._reject("prefix_too_long")
            return
        self._compare(sender, digests)
        if self._send_publications(sender, self.trie.enumerate(prefix)) and not self._tree_carried:
            self._saw_difference()  # we hold what a neighbour lacks (and the tree is not bringing it)

    def publish(self, publications: object) -> None:
        """Publish (Alg. 5 l.6-9): store every publication we do not hold yet."""
        if not isinstance(publications, list) or len(publications) > MAX_PUBLICATIONS:
            self._reject("bad_publish")
            return
        for publication in publications:
            if not self._valid_publication(publication):
                continue  # one corrupted publication must not block the rest of the batch
            if self.store(publication, ANTI_ENTROPY):
                self.counters["repairs"] += 1
                if len(self._repaired) < MAX_REMEMBERED_REPAIRS:
                    self._repaired.add(publication.key)
                self._saw_difference()  # we lacked it: our neighbours may lack it too
            else:
                self.counters["publish_duplicates"] += 1

    def publish_new(
        self, publication: object, hops: object, flood_targets: Iterable[Ref] | None = None
    ) -> None:
        """PublishNew (Alg. 5 l.30-34): store and forward a new publication, or drop it."""
        if type(hops) is not int or hops < 0:
            self._reject("bad_hops")
            return
        if not self._valid_publication(publication):
            return
        assert isinstance(publication, Publication)
        if not self.store(publication, FLOOD, hops):
            self.counters["dropped_duplicates"] += 1
            return
        self.counters["stored_by_flooding"] += 1
        if self.flooding:
            self._flood(publication, hops + 1, flood_targets)

    def spread(self, msg: Spread) -> None:
        """Spread: store what is new, then forward the batch inside our piece of the arc
        (or, when the arc cannot be trusted here, flood what was new; see the module
        docstring)."""
        hops, levels, batch = msg.hops, msg.levels, msg.publications
        if type(hops) is not int or hops < 0 or type(levels) is not int or not 1 <= levels <= MAX_LEVELS:
            self._reject("bad_spread")
            return
        if not isinstance(batch, list) or len(batch) > MAX_PUBLICATIONS:
            self._reject("bad_spread")
            return
        counters = self.counters
        counters["spread_received"] += 1
        valid: list[Publication] = []
        new: list[Publication] = []
        checked = type(batch) is PublicationList and batch.checked
        repaired = self._repaired
        for publication in batch:
            if not self._valid_publication(publication, fields_checked=checked):
                continue
            valid.append(publication)
            if self.store(publication, TREE, hops):
                new.append(publication)
            else:
                counters["spread_duplicates"] += 1
                if repaired and publication.key in repaired:
                    repaired.discard(publication.key)
                    counters["repairs_raced"] += 1
                    self._eager_rounds = 0  # the repair raced the tree: no difference (see "Eager rounds")
        counters["stored_by_tree"] += len(new)
        self._tree_carried += len(new)
        if not self.flooding or not valid:
            return
        view = self._view() if self.tree else None
        if view is None or not view.has_successor or not in_arc(view.me, msg.start, msg.end):
            if self.tree:
                counters["spread_fallbacks"] += 1
            for publication in new:
                self._flood(publication, hops + 1, None)
            return
        # the batch as it came (it may still hold its encoding), unless some were dropped
        self._spread(batch if len(valid) == len(batch) else valid, msg.start, msg.end, levels, hops + 1, view)

    def _view(self) -> ArcView | None:
        return None if self.arc_view is None else self.arc_view()

    def _spread(
        self, batch: list[Publication], start: int, end: int, levels: int, hops: int, view: ArcView
    ) -> None:
        for piece in pieces(view, start, end, levels):
            self._send(
                piece.ref,
                Spread(self.topic, self.ref, Position(piece.start), Position(piece.end),
                       max(levels, view.levels), hops, batch),
            )

    # ------------------------------------------------------------------ the comparison
    def _equal_root(self, tuples: object) -> bool:
        """Whether `tuples` is exactly our root's (label, hash): nothing to compare then."""
        if type(tuples) is not list or len(tuples) != 1:
            return False
        item = tuples[0]
        if not isinstance(item, tuple) or len(item) != 2:
            return False
        label, digest = item
        root = self.trie.root_node()
        if root is None:
            return type(label) is TrieLabel and label.length == 0 and digest == EMPTY_HASH
        return (
            type(label) is TrieLabel
            and digest == root.hash
            and label.length == root.length
            and label.value == root.value
        )

    def _compare(self, sender: Ref, digests: list[NodeDigest]) -> None:
        """Cases (i)-(iii) for every tuple; children of case (ii) go out in shared batches."""
        trie = self.trie
        children: list[NodeDigest] = []
        for label, digest in digests:
            node = trie.search(label)
            if node is not None:
                if node.hash == digest:
                    continue  # (i) equal subtries
                pair = trie.children(node)
                if pair is None:
                    self.counters["leaf_hash_mismatch"] += 1  # impossible for honest peers
                    continue
                children.extend(_digest(child) for child in pair)  # (ii)
                continue
            if len(trie) == 0 and label == EMPTY_LABEL and digest == EMPTY_HASH:
                continue  # (i) two empty tries
            extension = trie.minimal_extension(label)  # (iii)
            self.counters["missing_found"] += 1
            if extension is not None:
                first_extra = extension.label.bit(label.length)
                self._send(
                    sender,
                    CheckAndPublish(
                        self.topic, self.ref, [_digest(extension)], label.append(1 - first_extra)
                    ),
                )
            else:
                self._send(sender, CheckAndPublish(self.topic, self.ref, [], label))
        for start in range(0, len(children), MAX_DIGESTS):
            self._send(sender, CheckTrie(self.topic, self.ref, children[start : start + MAX_DIGESTS]))

    def _send_publications(self, dest: Ref, items: Iterable[tuple[int, Publication]]) -> bool:
        """Publish batches of at most `batch_publications` and about `batch_bytes` each;
        whether there was anything to send.

        A single publication larger than `batch_bytes` still travels, alone.
        """
        sent = False
        for batch in self._batches((publication for _, publication in items), self.batch_publications):
            self._send(dest, Publish(self.topic, batch))
            sent = True
        return sent

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

    def _flood(
        self, publication: Publication, hops: int, flood_targets: Iterable[Ref] | None
    ) -> None:
        if flood_targets is None:
            flood_targets = self.flood_targets() if self.flood_targets is not None else ()
        for ref in dict.fromkeys(flood_targets):
            if ref != self.ref:
                self._send(ref, PublishNew(self.topic, publication, hops))

    # ------------------------------------------------------------------ validation
    def _valid_tuples(self, sender: object, tuples: object) -> list[NodeDigest] | None:
        """The tuples as digests, or None (counted) if the request is malformed."""
        if not isinstance(sender, str) or not sender:
            self._reject("bad_sender")
            return None
        if not isinstance(tuples, (list, tuple)) or len(tuples) > MAX_DIGESTS:
            self._reject("bad_tuples")
            return None
        digests: list[NodeDigest] = []
        for item in tuples:
            if not isinstance(item, tuple) or len(item) != 2:
                self._reject("bad_tuples")
                return None
            label, digest = item
            if not isinstance(label, TrieLabel):
                self._reject("bad_label")
                return None
            if label.length > self.key_bits:
                self._reject("label_too_long")
                return None
            if type(digest) is not bytes or len(digest) != HASH_BYTES:
                self._reject("bad_hash")
                return None
            digests.append(NodeDigest(label, NodeHash(digest)))
        return digests

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


def _digest(node: TrieNode[Publication]) -> NodeDigest:
    return NodeDigest(node.label, NodeHash(node.hash))


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
