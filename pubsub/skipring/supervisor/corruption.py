"""A corrupted supervisor database, for self-stabilization experiments (paper 000, §3.1):
every one of the four faults the supervisor must repair.  Pure; every random choice comes
from the `random.Random` passed in.  Used by the simulator's corrupted starts and by the
supervisor daemon's fault injection (`corrupt_topics`, which `SupervisorCore.corrupt` offers)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from pubsub.kernel.contracts import FaultRefused
from pubsub.kernel.message import Ref, Topic
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


def corrupt_topics(
    databases: Mapping[Topic, TopicDatabase], topic: Topic | None, rng: random.Random
) -> dict[str, dict[str, Any]]:
    """`corrupt_database` for `topic` (None: every topic with members); per topic its size
    and whether it is still legitimate.  FaultRefused for an unknown topic, or when no
    topic has members."""
    if topic is not None and topic not in databases:
        raise FaultRefused("unknown_topic", f"the supervisor has no topic {topic!r}")
    members = {
        name: sorted({ref for _, ref in db.members() if ref is not None})
        for name, db in databases.items()
        if topic is None or name == topic
    }
    members = {name: refs for name, refs in members.items() if refs}
    if not members:
        raise FaultRefused("nothing_to_corrupt", "no topic with members to corrupt")
    for name, refs in sorted(members.items()):
        corrupt_database(databases[name], refs, rng, len(refs))
    return {
        name: {"n": len(databases[name]), "legitimate_database": databases[name].is_legitimate()}
        for name in sorted(members)
    }
