"""Effects beyond `Send` that a core may return, for what the runtime must order or route.

`Persist` states an ordering the protocol depends on: "make durable what I stored, then do
this" -- e.g. a node acknowledges a publication, and floods it, only once it is on disk
(paper 000 §4.2 leaves durability to the implementation; the acknowledgement promises it).
`Answer` addresses a client request by the token the runtime gave it, so that replies that
come later (after a commit, after a hand-over) are decided by the core too.  `Batched` lets
a core have per-item work done once per batch of items.

The network runtime's daemon (`pubsub.node.app`) executes them with a group commit to its
store; the simulator (`pubsub.sim.skipring`) executes them against an in-memory store with
a configurable commit delay, so ordering is checked without a network.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from pubsub.kernel.message import Message, Send


class Answer(NamedTuple):
    """Send `msg` to the client whose request the runtime tagged with `client`."""

    client: int
    msg: Message


class Persist(NamedTuple):
    """Make durable everything the core stored up to now, then carry out `then`, in order;
    if that cannot be done, carry out `otherwise` instead.  An executor may write several
    Persists in one transaction, but never carries out `then` before the write that holds
    what was stored before the Persist was returned.

    With `notify`, the executor first tells the core how the write ended --
    ``core.persisted(notify, ok)`` -- and carries out the effects that returns before
    `then` / `otherwise` (answers that depend on the outcome).  When a write fails, the
    executor has the core forget what it could not write (``core.unstored``) before."""

    then: tuple[Effect, ...]
    otherwise: tuple[Effect, ...] = ()
    notify: int | None = None


class Batched(NamedTuple):
    """Work a core wants done once per batch rather than once per item: the executor
    gathers the `item`s of the Batched effects it carries out together (those one group
    commit releases, for instance) by `sink`, calls ``sink(items)`` once per sink with them
    in order, and carries out the effects that returns.  An executor that has no batches
    may call `sink` with each item alone.

    The node core hands the arc broadcast of its own publications over this way
    (`pubsub.skipring.antientropy`: a commit of k publications computes the arcs once and
    sends one Spread per neighbour, not k)."""

    sink: Callable[[list[Any]], Sequence[Effect]]
    item: Any


#: What a core's `handle` and `timeout` may return.
Effect = Send | Answer | Persist | Batched
