"""The peer-sampling service T-Man draws its random samples from (paper 003 §4.3,
`rnd.view`): every node keeps a small partial view of other nodes' descriptors that is
renewed by shuffles, so the peers it returns behave like a uniform sample of the live nodes.

Paper 003 names the service (its ref. [15]) without choosing one; this is the Cyclon
shuffle (Voulgaris et al.), a standard instance (INFERRED: which protocol, and its sizes):

* the view holds at most `size` entries, each a descriptor with an age;
* once per period the node ages every entry, takes the oldest entry q out, and sends q
  `length - 1` random entries with a fresh entry of its own (age 0);
* q answers with `length` random entries of its own and merges what came: new entries fill
  free slots first, then replace the entries it sent; the initiator merges the answer the
  same way.  No node holds itself, nor one node twice (the younger entry stays).

The view is seeded from the membership the supervisor gives (predecessors and successors)
and by the nodes that shuffle with it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from pubsub.omen.views import Descriptor
from pubsub.topicgraph.graph import Node

#: Cyclon's view size and shuffle length (INFERRED values, small as Cyclon's paper uses).
DEFAULT_SIZE = 8
DEFAULT_LENGTH = 4


@dataclass(frozen=True)
class Entry:
    descriptor: Descriptor
    age: int = 0


class PeerSampler:
    """One node's Cyclon view."""

    def __init__(self, me: Node, size: int = DEFAULT_SIZE, length: int = DEFAULT_LENGTH) -> None:
        if not 1 <= length <= size:
            raise ValueError(f"need 1 <= shuffle length ({length}) <= view size ({size})")
        self.me = me
        self.size = size
        self.length = length
        self.view: dict[Node, Entry] = {}

    def seed(self, descriptors: Iterable[Descriptor]) -> None:
        """Fill free slots with nodes not yet held (from the membership)."""
        for d in descriptors:
            if d.node != self.me and d.node not in self.view and len(self.view) < self.size:
                self.view[d.node] = Entry(d)

    def drop(self, node: Node) -> None:
        """A node known to be gone (a churn event, an unreachable peer)."""
        self.view.pop(node, None)

    def sample(self) -> list[Descriptor]:
        """`rnd.view`: the descriptors held, in node order."""
        return [self.view[n].descriptor for n in sorted(self.view)]

    def start_shuffle(self, me: Descriptor, rng: random.Random) -> tuple[Node, list[Descriptor]] | None:
        """The active step: the oldest peer and what to send it (None with an empty view)."""
        if not self.view:
            return None
        self.view = {n: Entry(e.descriptor, e.age + 1) for n, e in self.view.items()}
        oldest = max(sorted(self.view), key=lambda n: self.view[n].age)
        del self.view[oldest]
        others = rng.sample(sorted(self.view), min(self.length - 1, len(self.view)))
        return oldest, [me, *(self.view[n].descriptor for n in others)]

    def answer(self, sent: list[Descriptor], rng: random.Random) -> list[Descriptor]:
        """The passive step's answer to `sent` (before `merge`)."""
        picked = rng.sample(sorted(self.view), min(self.length, len(self.view)))
        return [self.view[n].descriptor for n in picked]

    def merge(self, arrived: Iterable[Descriptor], sent: Iterable[Descriptor]) -> None:
        """Take `arrived` in: free slots first, then the slots of the entries sent away."""
        replaceable = [d.node for d in sent if d.node in self.view]
        for d in arrived:
            if d.node == self.me:
                continue
            held = self.view.get(d.node)
            if held is not None:
                if d.version > held.descriptor.version:
                    self.view[d.node] = Entry(d, held.age)
                continue
            if len(self.view) >= self.size:
                if not replaceable:
                    continue
                del self.view[replaceable.pop(0)]
            self.view[d.node] = Entry(d)
