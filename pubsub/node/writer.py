"""The node's store on a thread of its own, so that commits and their fsync never stall the
event loop (issue 11: "durability without stalling").

Every SQLite call of a node's `pubsub.node.store.PublicationStore` runs on one writer
thread, in submission order: group commits (`append`), the sequence-number reservation,
and the reads of history streams.  The event loop submits work and goes on; a commit's
completion comes back to the loop (`asyncio.wrap_future`, or a done-callback that the
caller hands to the loop), where the node acknowledges, spreads and delivers what was
written.  One thread suffices: SQLite serialises writers anyway, and one commit in flight
while the next batch gathers is what makes the batches grow with the load.

Metadata the loop reads often (a topic's latest local number, the reservation) are plain
attributes of the store that the writer thread replaces atomically after each commit, so
the loop reads them without a round trip.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class StoreThread:
    """One worker thread that runs the store's calls in order."""

    def __init__(self, name: str = "store") -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._closed = False
        self._lock = threading.Lock()

    def submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> concurrent.futures.Future[T]:
        """Run `fn(*args)` on the writer thread after everything submitted before."""
        return self._executor.submit(fn, *args, **kwargs)

    def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run `fn(*args)` on the writer thread and wait for it (start-up, shutdown, and the
        rare calls that must finish before the loop may go on)."""
        return self.submit(fn, *args, **kwargs).result()

    def close(self) -> None:
        """Finish what was submitted, then stop the thread (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._executor.shutdown(wait=True)
