"""Group commits of a node's publications, on the store's thread (issue 11).

What the node core stores in its tries must reach the node's store before it counts as
delivered; what waits for that -- acknowledging a publisher, spreading a publication issued
here, waking streams -- runs after the commit that wrote it (the core's `Persist` effects,
`pubsub.kernel.effects`).  `GroupCommit` does the writing:

* rows (`add`) and actions that wait for them (`after`) gather on the event loop;
* at most one commit is in flight, on the store's thread (`pubsub.node.writer`); what
  arrives meanwhile forms the next batch, so batches grow with the load: one transaction
  (and, with ``sync=full``, one fsync) per batch;
* `inline` commits run on the event loop instead, at the end of the pass.  The node uses
  that when a commit cannot wait for the disk: a store in memory, or ``sync=normal``, where
  a commit only writes the log and the checkpoints that sync it run on the store's thread
  (`pubsub.node.store`).  Handing a commit to another thread and back costs two thread
  wake-ups, which on a busy machine took more than the commit itself (about 2 ms of
  latency per node, measured);
* when nothing is in flight a commit starts at the end of the loop pass, or after `linger`
  seconds when that is set, so that batches form at moderate rates too;
* a commit's completion comes back to the loop, where `on_written` sees the rows as written
  (local numbers assigned) and every action queued before that commit runs with
  ``ok=True`` and the local numbers; on a `StoreError` the rows are *not* kept for another
  try: `on_unwritten` hears of them (the node then forgets them, so that nothing it answered
  as failed is stored later -- publications of others come back by anti-entropy), and the
  waiting actions run with ``ok=False``.

Without a running event loop (a test driving a node by hand) everything is written at once.
`flush` writes everything still queued, waiting for the commit in flight (shutdown).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pubsub.kernel.message import Topic
from pubsub.node.rowcodec import Stored
from pubsub.node.store import NewRow, PublicationStore, StoreError
from pubsub.node.writer import StoreThread

log = logging.getLogger(__name__)

#: Local numbers of what a commit wrote, by (topic, publication key).
Written = dict[tuple[Topic, bytes], int]
#: Runs after a commit: (whether it succeeded, what it wrote).
AfterCommit = Callable[[bool, Written], None]


@dataclass(eq=False)
class _Batch:
    rows: list[NewRow]
    actions: list[AfterCommit]
    future: concurrent.futures.Future[list[Stored]] | None = None
    done: bool = False
    written: list[Stored] = field(default_factory=list)


class GroupCommit:
    """The commit pipeline of one node's store (see the module docstring)."""

    def __init__(
        self,
        store: PublicationStore,
        thread: StoreThread,
        *,
        on_written: Callable[[list[Stored]], None],
        on_error: Callable[[StoreError], None],
        on_unwritten: Callable[[list[NewRow]], None] = lambda rows: None,
        linger: float = 0.0,
        inline: bool = False,
    ) -> None:
        if linger < 0:
            raise ValueError("linger must be >= 0")
        self.store = store
        self.thread = thread
        self.linger = linger
        self.inline = inline
        self._on_written = on_written
        self._on_error = on_error
        self._on_unwritten = on_unwritten
        self._rows: list[NewRow] = []
        self._actions: list[AfterCommit] = []
        self._in_flight: _Batch | None = None
        self._scheduled = False
        #: Commits that wrote something, and their rows (for the metrics and status), and the
        #: rows of commits that failed.
        self.batches = 0
        self.rows_written = 0
        self.failed_rows = 0
        #: Called with each batch's rows just before they are written (the node signs its
        #: own publications there, one signature per batch: `pubsub.node.signing`).
        self.before_write: Callable[[list[NewRow]], None] | None = None

    @property
    def unwritten(self) -> int:
        """Rows queued or in flight."""
        return len(self._rows) + (len(self._in_flight.rows) if self._in_flight else 0)

    def add(self, rows: Sequence[NewRow]) -> None:
        """Queue rows for the next commit."""
        if rows:
            self._rows.extend(rows)
            self._kick()

    def after(self, action: AfterCommit) -> None:
        """Run `action` after the commit that holds every row queued so far."""
        self._actions.append(action)
        self._kick()

    # ------------------------------------------------------------------ the pipeline
    def _kick(self) -> None:
        if self._scheduled or self._in_flight is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()  # no event loop: write now
            return
        self._scheduled = True
        if self.linger:
            loop.call_later(self.linger, self._start)
        else:
            loop.call_soon(self._start)

    def _take(self) -> _Batch | None:
        if not self._rows and not self._actions:
            return None
        batch = _Batch(self._rows, self._actions)
        self._rows, self._actions = [], []
        if self.before_write is not None and batch.rows:
            self.before_write(batch.rows)
        return batch

    def _start(self) -> None:
        self._scheduled = False
        if self._in_flight is not None:
            return
        batch = self._take()
        if batch is None:
            return
        self._in_flight = batch
        if self.inline:
            self._write_now(batch)
            self._in_flight = None
            if self._rows or self._actions:
                self._kick()
            return
        loop = asyncio.get_running_loop()
        batch.future = self.thread.submit(self.store.append, batch.rows)
        batch.future.add_done_callback(lambda _: loop.call_soon_threadsafe(self._finish, batch))

    def _finish(self, batch: _Batch) -> None:
        """The batch's commit ended (on the loop): hand over what it wrote, run its actions."""
        if batch.done:
            return  # `flush` already took care of it
        batch.done = True
        if self._in_flight is batch:
            self._in_flight = None
        assert batch.future is not None
        try:
            written = batch.future.result()
        except StoreError as exc:
            self._failed(batch, exc)
        else:
            self._succeeded(batch, written)
        if self._rows or self._actions:
            self._kick()

    def _succeeded(self, batch: _Batch, written: list[Stored]) -> None:
        if written:
            self.batches += 1
            self.rows_written += len(written)
            self._on_written(written)
        if not batch.actions:
            return  # a member's batch of others' publications: nobody waits for the numbers
        local: Written = {(s.topic, s.publication.key): s.local_seq for s in written}
        for action in batch.actions:
            self._run(action, True, local)

    def _failed(self, batch: _Batch, exc: StoreError) -> None:
        self.failed_rows += len(batch.rows)
        self._on_error(exc)
        self._on_unwritten(batch.rows)
        for action in batch.actions:
            self._run(action, False, {})

    def _run(self, action: AfterCommit, ok: bool, written: Written) -> None:
        try:
            action(ok, written)
        except Exception:  # noqa: BLE001 - one failing action must not stop the others
            log.exception("post-commit action failed")

    def flush(self) -> None:
        """Write everything queued now, waiting for the commit in flight first (blocks)."""
        batch = self._in_flight
        if batch is not None and not batch.done and batch.future is not None:
            concurrent.futures.wait([batch.future])
            self._finish(batch)
        batch = self._take()
        if batch is not None:
            self._write_now(batch)

    def _write_now(self, batch: _Batch) -> None:
        """Write `batch` at once: on this thread when inline, else on the store's thread,
        waiting for it; then hand over what it wrote and run its actions."""
        batch.done = True
        try:
            written = self.store.append(batch.rows) if self.inline else self.thread.call(self.store.append, batch.rows)
        except StoreError as exc:
            self._failed(batch, exc)
        else:
            self._succeeded(batch, written)
