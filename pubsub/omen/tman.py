"""T-Man at one node (paper 003 Alg. 3): once in every interval of T_wait, at a random time
in it, the node sends a peer of its local view a buffer -- its own descriptor, its view
(getView) and a random sample (`rnd.view`, `pubsub.omen.sampling`) -- and the peer answers
with its own buffer; each side then runs selectView on its view and the buffer received
(`pubsub.omen.views.LocalView.select_view`).

The peer is drawn uniformly from the local view, the predecessors themselves included (a
node learns its predecessor's neighbours, N(v'), from v' itself); with an empty view (a node whose
predecessors' entries are not built yet) it is drawn from the random sample (INFERRED: the
paper's line 2 takes it from the view, which a fresh node does not have).
"""

from __future__ import annotations

import random

from pubsub.omen.sampling import PeerSampler
from pubsub.omen.views import Descriptor, LocalView
from pubsub.topicgraph.graph import Node

#: T_wait in Timeouts (INFERRED: the paper gives no value).
DEFAULT_T_WAIT = 2


class TMan:
    """The active thread's schedule and both threads' buffers."""

    def __init__(self, view: LocalView, sampler: PeerSampler, t_wait: int = DEFAULT_T_WAIT) -> None:
        if t_wait < 1:
            raise ValueError(f"T_wait is at least one Timeout, not {t_wait}")
        self.view = view
        self.sampler = sampler
        self.t_wait = t_wait
        self._tick = 0
        self._fire_at = -1

    def buffer(self) -> list[Descriptor]:
        """v ∪ v.getView() ∪ rnd.view (Alg. 3 l.3 and the passive thread's l.2)."""
        merged = {d.node: d for d in [*self.sampler.sample(), *self.view.get_view()]}
        merged[self.view.me.node] = self.view.me
        return [merged[n] for n in sorted(merged)]

    def on_timeout(self, rng: random.Random) -> tuple[Node, list[Descriptor]] | None:
        """Called every Timeout: at this interval's chosen Timeout, the peer and the buffer
        to send it."""
        if self._tick % self.t_wait == 0:
            self._fire_at = self._tick + rng.randrange(self.t_wait)
        fire = self._tick == self._fire_at
        self._tick += 1
        if not fire:
            return None
        peers = sorted(({d.node for d in self.view.get_view()} | set(self.view.preds)) - {self.view.me.node})
        if not peers:
            peers = sorted({d.node for d in self.sampler.sample()} - {self.view.me.node})
        if not peers:
            return None
        return rng.choice(peers), self.buffer()

    def on_buffer(self, arrived: list[Descriptor], rng: random.Random) -> None:
        """selectView(v.getView() ∪ buffer) (Alg. 3 l.6, passive l.4)."""
        self.view.select_view([*self.view.get_view(), *arrived], rng)
