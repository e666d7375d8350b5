"""A corrupted supervisor database, for self-stabilization experiments (paper 000, §3.1):
every one of the four faults the supervisor must repair.  Pure; every random choice comes
from the `random.Random` passed in.  Used by the simulator's corrupted starts and by the
supervisor daemon's fault injection."""

from __future__ import annotations

import random
from collections.abc import Sequence

from pubsub.kernel.message import Ref
from pubsub.skipring.corruption import random_label
from pubsub.skipring.labels import Label, l
from pubsub.skipring.supervisor.database import TopicDatabase


def corrupt_database(db: TopicDatabase, refs: Sequence[Ref], rng: random.Random, n: int) -> None:
    """Give one topic's database every corruption of §3.1 (i)-(iv), over subscribers `refs`
    (not empty)."""
    for ref in rng.sample(list(refs), max(1, n // 2)):
        db.put(random_label(rng, n), ref)  # (iii) holes and (iv) labels >= n or not images
    db.put(Label("10"), rng.choice(refs))  # (iv) not an image of l at all; (ii) likely too
    db.put(l(3 * n + 1), None)  # (i) a tuple without subscriber
    db.put(l(3 * n + 2), None)
    victim = rng.choice(refs)
    db.put(l(3 * n + 3), victim)  # (ii) one subscriber under several labels
    db.put(l(3 * n + 4), victim)
