"""Sequence blocks: the durable reservation of the sequence numbers a node issues.

The core (`pubsub.publications.node.PublicationNode.next_seq`) numbers the publications
this node issues.  The store (`pubsub.node.store`) records a reservation ``seq_reserved``;
numbers are taken below it, and a new block of `SEQ_BLOCK` is reserved (one small
transaction) before the first number beyond it is used.  A restarted node continues at the
reservation, so it never issues a (publisher, seq) pair twice, even for a publication that
left the node (by anti-entropy) before its commit.

`SequenceBlocks` is what the node daemon (`pubsub.node.app.NodeApp`) asks before it accepts
a publication: it reserves the next block early, on the store's thread, and waits only when
the numbers run out first.
"""

from __future__ import annotations

import concurrent.futures
import logging

from pubsub.kernel.message import Ref
from pubsub.node.store import PublicationStore
from pubsub.node.writer import StoreThread

log = logging.getLogger(__name__)

#: Sequence numbers reserved durably at a time (see the module docstring).
SEQ_BLOCK = 1024


class SequenceBlocks:
    """The reservations of the node `ref` in `store`; `inline`: the event loop owns the
    store's writing connection (`pubsub.node.commits.GroupCommit.inline`), else every write
    runs on `thread`."""

    def __init__(self, ref: Ref, store: PublicationStore, thread: StoreThread, *, inline: bool) -> None:
        self.ref = ref
        self.store = store
        self.thread = thread
        self.inline = inline
        self._limit = store.seq_reserved
        self._reserving: concurrent.futures.Future[None] | None = None

    def reserve(self, seq: int) -> None:
        """Make sure `seq`, the next sequence number, is below the durable reservation:
        reserve the next block on the store's thread once half of the current one is used,
        and wait for it only if the numbers run out first (StoreError if it cannot be
        written)."""
        if not self.store.durable:
            return
        if self.inline:  # the loop owns the writing connection
            if seq >= self._limit:
                self.store.reserve_seq(seq + SEQ_BLOCK)
                self._limit = self.store.seq_reserved
            return
        if seq >= self._limit:
            if self._reserving is not None:
                concurrent.futures.wait([self._reserving])
                self._reserving = None
            self._limit = max(self._limit, self.store.seq_reserved)
            if seq >= self._limit:
                self.thread.call(self.store.reserve_seq, seq + SEQ_BLOCK)
                self._limit = self.store.seq_reserved
        if self._reserving is None and seq >= self._limit - SEQ_BLOCK // 2:
            self._reserving = self.thread.submit(self.store.reserve_seq, self._limit + SEQ_BLOCK)
            self._reserving.add_done_callback(self._reserved)

    def _reserved(self, future: concurrent.futures.Future[None]) -> None:
        """(On the store's thread.)  A reservation ended; the next `reserve` sees it."""
        if future.exception() is None:
            self._limit = max(self._limit, self.store.seq_reserved)
        else:
            log.error("%s: cannot reserve sequence numbers: %s", self.ref, future.exception())
        if self._reserving is future:
            self._reserving = None
