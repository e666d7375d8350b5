"""The anti-entropy exchange of one subscriber for one topic (paper 000, §4.2, Alg. 5 l.1-28).

`AntiEntropy` is a topic's publication core: the Alg. 5 exchange here, over the
dissemination of new publications (`pubsub.publications.dissemination.Dissemination`:
PublishNew flooding and the Spread arc broadcast) and the topic's state, its Patricia trie
(`pubsub.publications.topicstate.TopicState`, `pubsub.publications.trie`).  `handle` takes the
five publication messages.  Like every core it does no I/O: entry points return the `Send`s
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

Input from the network is never trusted: tuples with labels longer than the key length or
hashes that are not 16 bytes, prefixes that are not bit strings of at most the key length,
and publications whose key does not match their content are rejected and counted; nothing
here raises on a message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pubsub.kernel.message import Message, Ref, Send
from pubsub.publications.dissemination import Dissemination
from pubsub.publications.fields import MAX_DIGESTS, MAX_PUBLICATIONS
from pubsub.publications.messages import (
    CheckAndPublish,
    CheckTrie,
    NodeDigest,
    NodeHash,
    Publication,
    Publish,
    PublishNew,
    Spread,
)
from pubsub.publications.topicstate import ANTI_ENTROPY
from pubsub.publications.trie import (
    EMPTY_HASH,
    EMPTY_LABEL,
    HASH_BYTES,
    TrieLabel,
    TrieNode,
)

#: Rounds in a row a node defers while the tree brings publications (see "Deferred rounds").
MAX_DEFERRED_ROUNDS = 3
#: Repairs remembered per Timeout interval (see "Eager rounds"); the record is cleared by
#: PublishTimeout, which a node without a label does not run, so it is also bounded.  A
#: repair beyond it is not remembered: it keeps the node eager, as every repair once did.
MAX_REMEMBERED_REPAIRS = 4096


class AntiEntropy(Dissemination):
    """Alg. 5 for one topic at one subscriber: the trie plus the publication messages'
    handlers (the dissemination's, `Dissemination`, and the exchange's here)."""

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

    def handle(self, msg: Message, flood_targets: Iterable[Ref] | None = None) -> list[Send]:
        """React to CheckTrie, CheckAndPublish, Publish, PublishNew or Spread for this topic
        (the last two are the dissemination's, `Dissemination`)."""
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


def _digest(node: TrieNode[Publication]) -> NodeDigest:
    return NodeDigest(node.label, NodeHash(node.hash))

