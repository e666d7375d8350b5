"""How a new publication spreads fast besides anti-entropy (paper 000, §4.3, Alg. 5 l.30-34; the arc broadcast).

`Dissemination` is the part of a topic's publication core
(`pubsub.publications.antientropy.AntiEntropy`) that carries new publications: flooding and
the arc broadcast, over the topic's state (`pubsub.publications.topicstate.TopicState`).  Like
every core it does no I/O: entry points return the `Send`s to deliver, and neighbour lists
and arc views come in as arguments or callbacks.  Anti-entropy alone still delivers
everything (Theorem 5.19); what is here only makes it fast.

Flooding (§4.3)
    A new publication is also sent as PublishNew to all ring and shortcut neighbours; a
    receiver that did not hold it stores it and forwards it to all of its neighbours,
    one that did drops it (Alg. 5 l.30-34).  `flooding` switches this on and off.
    PublishNew counts the edges it crossed in `hops` (the publisher sends 1).

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

    The publisher's own publications start their broadcast together: `publish_local`
    returns a `Batched(SPREAD_OWN, topic, p)` effect, the executor hands the publications
    of one batch back as a `Batch` (`pubsub.kernel.effects`), and `spread_own` computes the
    arcs once for all of them.

What the rounds learn from it
    What the arc broadcast carries here, or starts here, since the last round lets the
    anti-entropy defer that round; a Spread that brings a publication this node just
    repaired by anti-entropy ends its eagerness (``repairs_raced``); a publication issued
    while flooding is off makes it eager (`pubsub.publications.antientropy`, "Eager rounds"
    and "Deferred rounds"; the bookkeeping is `TopicState`'s).

Input from the network is never trusted: hop counts and levels that are not small
non-negative integers, batches that are not lists of at most `MAX_PUBLICATIONS`, and
malformed publications are rejected and counted; nothing here raises on a message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pubsub.kernel.effects import Batched
from pubsub.kernel.message import Ref, Send, Topic
from pubsub.publications.arcs import ArcView, in_arc, origin_arc, pieces
from pubsub.publications.fields import MAX_PUBLICATIONS
from pubsub.publications.messages import (
    Position,
    Publication,
    PublicationList,
    PublishNew,
    Spread,
)
from pubsub.publications.topicstate import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_PUBLICATIONS,
    FLOOD,
    LOCAL,
    TREE,
    TopicState,
)
from pubsub.publications.trie import KEY_BITS

#: Largest `levels` a Spread may claim (labels have at most 64 bits).
MAX_LEVELS = 64

#: The work of the `Batched` effects of `publish_local`: the arc broadcast of own publications.
SPREAD_OWN = "spread_own"


class Dissemination(TopicState):
    """Flooding (§4.3) and the arc broadcast of one topic at one subscriber."""

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
        when `tree` is on; None while the node has no label).  The other arguments are
        `TopicState`'s.
        """
        super().__init__(
            ref,
            topic,
            key_bits=key_bits,
            verify_keys=verify_keys,
            batch_publications=batch_publications,
            batch_bytes=batch_bytes,
        )
        self.flooding = flooding
        self.tree = tree
        self.flood_targets = flood_targets
        self.arc_view = arc_view

    # ------------------------------------------------------------------ entry points
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

    # ------------------------------------------------------------------ the messages
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

    # ------------------------------------------------------------------ sending
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

    def _flood(
        self, publication: Publication, hops: int, flood_targets: Iterable[Ref] | None
    ) -> None:
        if flood_targets is None:
            flood_targets = self.flood_targets() if self.flood_targets is not None else ()
        for ref in dict.fromkeys(flood_targets):
            if ref != self.ref:
                self._send(ref, PublishNew(self.topic, publication, hops))
