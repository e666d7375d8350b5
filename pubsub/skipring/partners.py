"""Whom anti-entropy talks to: the partner of PublishTimeout (paper 000, Alg. 5 l.2).

The paper has every subscriber send its trie root to a random *ring* neighbour.  Over ring
edges alone a publication that one node misses moves about one hop per few Timeouts, so
with flooding off it needs O(n) timeout intervals to reach everyone (1,663 at n = 1,000).

Here the partner is, with probability 3/4, one of the node's two *level partners* -- its
neighbours in the sorted ring of K_k, k = |label| (Definition 2.1), the pair Alg. 4
l.12-14 introduces to each other; for a node with a label of maximal length they are its
ring neighbours, for the others the last shortcut of each side's chain -- and with
probability 1/4 the paper's own choice, a random ring neighbour.

Eager rounds.  A node that has just seen tries differ (`AntiEntropy.eager`: it was
repaired, it served a repair, or it published with flooding off) talks in each of its next
few Timeouts to both level partners, to both neighbours one level down (the nearest nodes
on level |label| + 1, which have it as a level partner), and with probability 1/4 to a
random ring neighbour: at most five CheckTries instead of one.  A ring whose tries agree
has no eager node, so its load is the quiet one.

Why this is fast.  In SR(n) the level partners of a node with a k-bit label have shorter
labels (k > 1): following level partners climbs from any node to "0" and "1" in at most
log2 n steps, and every node is a level partner of the nodes one level below it.  A
publication therefore climbs from where it is to the top of the skip ring and comes
down to every node along these edges.  In the quiet state each step is taken with
constant probability per Timeout (each exchange repairs a difference in the direction of
either initiator about half the time, §4.2's remark on Figure 2).  An eager node -- every
node that has just received the publication, and every node that has just handed it on --
offers it both up and down in every Timeout, so the publication takes a step per
Timeout or two, up to the top and down again: O(log n) timeout intervals either way, a
small constant in the eager case; with ring neighbours only it is the ring's diameter, n/2.

Why Theorem 5.19 still holds.  Its proof needs two things.  (1) No trie ever loses a
publication -- partner choice does not touch that.  Let Psi be the number of (subscriber,
publication) pairs not yet stored; it never increases, whoever exchanges with whom (this
replaces Lemma 5.22's potential over ring edges, which exchanges over shortcuts would
not respect).  (2) While some trie lacks a publication, some computation decreases Psi:
the ring is connected, so some ring edge (u, v) has a publication at u that v lacks, and
Lemma 5.24 exhibits the computation that starts with v's (or, depending on the depth of
the difference, u's) PublishTimeout choosing the other.  Every ring neighbour is still
chosen with probability at least 1/8 in every Timeout, quiet (1/4 times 1/2) or eager
(1/4 times 1/2, beside the other partners), so that computation happens with probability
1 eventually, as in the paper.  Eagerness only adds exchanges, and each exchange is one
of Alg. 5's.  Theorem 5.28 (closure) is unaffected: with equal tries every CheckTrie is
answered by nothing, whoever receives it, and no node becomes eager.
"""

from __future__ import annotations

import random

from pubsub.kernel.message import Ref
from pubsub.skipring.buildsr import SkipRingNode
from pubsub.skipring.messages import Contact

#: Probability that a quiet PublishTimeout talks to a level partner rather than a ring
#: neighbour (and that an eager one adds a ring neighbour).
LEVEL_PARTNER_PROBABILITY = 0.75


def anti_entropy_targets(instance: SkipRingNode, rng: random.Random, eager: bool) -> list[Ref]:
    """This Timeout's CheckTrie destinations (see the module docstring).

    Quiet: one of our two level partners with probability 3/4, else one of our two ring
    neighbours (Alg. 5 l.2), whichever of them we know; a ring neighbour whenever no level
    partner is known.  Eager: both level partners and both neighbours one level down, and
    with probability 1/4 a random ring neighbour (or one whenever we know none of the
    others)."""
    ring = _refs(instance.cyclic_left(), instance.cyclic_right())
    if eager:
        targets = _refs(*instance.level_partners(), *instance.next_level_neighbours())
        if ring and (not targets or rng.random() >= LEVEL_PARTNER_PROBABILITY):
            targets.append(rng.choice(ring))
        return sorted(set(targets))
    if rng.random() < LEVEL_PARTNER_PROBABILITY:  # the level partners only when drawn
        partners = _refs(*instance.level_partners())
        if partners:
            return [rng.choice(partners)]
    return [rng.choice(ring)] if ring else []


def _refs(*contacts: Contact | None) -> list[Ref]:
    return [c.ref for c in contacts if c is not None]
