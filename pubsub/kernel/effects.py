"""What a core returns besides `Send`, and what an executor tells it back: plain data only.

A core never calls up and is never called back: every effect is a value, and every outcome
of carrying one out comes back into the core as an input through its one `handle` entry, the
way h11 and h2 take every event through one entry and hand out what to send.

Effects (returned by `handle` and `timeout`):

* `Send(dest, msg)` (`pubsub.kernel.message`): deliver a message to a peer.
* `Answer(client, msg)`: reply to the client request the runtime tagged with `client`, so
  that replies given later (after a commit, after a hand-over) are decided by the core too.
* `Persist(rows, then, otherwise, token)`: make `rows` (what the core stored in this call)
  durable, then carry out `then` in order -- or `otherwise` if the write failed.  With a
  `token`, the core wants to hear how the write ended: the executor hands it `Committed`
  first, and carries out what that returns before `then` / `otherwise`.  This states an
  ordering the protocol depends on (paper 000 §4.2 leaves durability to the
  implementation; a node acknowledges a publication, and spreads it, only once it is on
  disk).  An executor may write the rows of several Persists in one transaction, in the
  order it got them, but never carries out a Persist's `then` before the write that holds
  its rows and the rows of every Persist returned before it.
* `Batched(work, topic, item)`: per-item work the core wants done once per batch of items.
  The executor gathers the items of the Batched effects it carries out together (those one
  group commit releases, for instance) by `(work, topic)` and hands them back in one
  `Batch(work, topic, items)`.

Inputs (given to `handle`, never decoded from the wire: they are not registered kinds, so
no peer can send one):

* `Committed(tokens, ok, local_seqs, unwritten)`: how one write ended, for the Persists of
  that write that carried a token (in order); `local_seqs` are the local numbers the store
  gave the rows it wrote (by topic and key), `unwritten` the rows it could not write (the
  core forgets them: nothing answered as failed is stored later).
* `Batch(work, topic, items)`: the items of `Batched` effects, released together.

The one executor of these (`pubsub.kernel.executor`) runs the node daemon and the
simulator alike; each gives it its own store (SQLite group commits, or a simulated store on
the virtual clock) and its own way of sending.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from pubsub.kernel.message import Message, Send, Topic


class Answer(NamedTuple):
    """Send `msg` to the client whose request the runtime tagged with `client`."""

    client: int
    msg: Message


class Persist(NamedTuple):
    """Make `rows` durable, then carry out `then`, in order; if the write fails, carry out
    `otherwise` instead.  With `token`, hand the core `Committed` first (module
    docstring).  The rows are the mode's own values (the skip ring's: topic, publication,
    how it came, hops); an executor passes them to its store as they are."""

    rows: tuple[Any, ...] = ()
    then: tuple[Effect, ...] = ()
    otherwise: tuple[Effect, ...] = ()
    token: int | None = None


class Batched(NamedTuple):
    """One item of work the core wants done once per batch: handed back, with the other
    items of the same `work` and `topic` carried out together, as one `Batch`.

    The node core hands the arc broadcast of its own publications over this way
    (`pubsub.publications.dissemination`: a commit of k publications computes the arcs once and
    sends one Spread per neighbour, not k)."""

    work: str
    topic: Topic
    item: Any


@dataclass(frozen=True, slots=True)
class Committed(Message):
    """How one write ended, told to the core that asked (the Persists' tokens, in order)."""

    tokens: tuple[int, ...]
    ok: bool
    local_seqs: Mapping[tuple[Topic, bytes], int]
    unwritten: tuple[Any, ...] = ()
    kind = "local:committed"  # never registered: no peer can send one


@dataclass(frozen=True, slots=True)
class Batch(Message):
    """The items of `Batched` effects of one kind and topic, released together."""

    work: str
    topic: Topic
    items: tuple[Any, ...]
    kind = "local:batch"  # never registered: no peer can send one


#: What a core's `handle` and `timeout` may return.
Effect = Send | Answer | Persist | Batched
