"""The supervisor's own fault injection (`pubsub chaos corrupt-supervisor`), registered with
the admin listener (`pubsub.runtime.admin`) by the supervisor daemon.

``corrupt_supervisor`` (params ``topic``, ``seed``) gives one topic's database (or every
topic's) the four corruptions of paper 000 §3.1 (`pubsub.skipring.supervisor.corruption`); the changes are
written to the durable database like any other.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from pubsub.kernel.message import Ref
from pubsub.runtime.admin import Action, Chaos, Outcome
from pubsub.runtime.adminparams import ChaosError, Params
from pubsub.skipring.supervisor.corruption import corrupt_database


class SupervisorTarget(Protocol):
    """What corrupt_supervisor needs of the supervisor daemon (`pubsub.supervisor.app.SupervisorApp`)."""

    ref: Ref
    core: Any  # pubsub.skipring.supervisor.core.SupervisorCore

    def flush(self) -> None: ...


def supervisor_actions(supervisor: SupervisorTarget) -> dict[str, Action]:
    """The supervisor's own admin actions."""

    def corrupt_supervisor(chaos: Chaos, params: Params) -> Outcome:
        """Corrupt the supervisor's databases (see the module docstring)."""
        marker, record = params.marker("corrupt_supervisor")
        topic = params.topic()
        seed = params.seed()
        targets = params.targets(chaos.ref)
        params.done()
        databases = supervisor.core.topics
        if topic is not None and topic not in databases:
            raise ChaosError("unknown_topic", f"the supervisor has no topic {topic!r}")
        members = {
            name: sorted({ref for _, ref in db.members() if ref is not None})
            for name, db in databases.items()
            if topic is None or name == topic
        }
        members = {name: refs for name, refs in members.items() if refs}
        if not members:
            raise ChaosError("nothing_to_corrupt", "no topic with members to corrupt")
        rng = random.Random(seed) if seed is not None else chaos.rng
        for name, refs in sorted(members.items()):
            corrupt_database(databases[name], refs, rng, len(refs))
        supervisor.flush()  # durable like every other change of the database
        written = chaos.marker(
            record,
            marker,
            "corrupt_supervisor",
            targets,
            {"seed": seed, "topics": sorted(members)},
            topic,
        )
        result = {
            name: {
                "n": len(databases[name]),
                "legitimate_database": databases[name].is_legitimate(),
            }
            for name in sorted(members)
        }
        return Outcome(chaos.body("corrupt_supervisor", marker, written, topics=result))

    return {"corrupt_supervisor": corrupt_supervisor}
