"""The supervisor's own fault injection (`pubsub chaos corrupt-supervisor`), registered with
the admin listener (`pubsub.runtime.admin`) by the supervisor daemon for an overlay whose
supervisor core can be corrupted (its `Overlay.supervisor_faults`).

``corrupt_supervisor`` (params ``topic``, ``seed``) asks the core to corrupt one topic's
membership (or every topic's): for the skip ring the four corruptions of paper 000 §3.1
(`SupervisorCore.corrupt`).  The changes are written to the durable database like any other.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from pubsub.kernel.contracts import FaultRefused
from pubsub.kernel.message import Ref, Topic
from pubsub.runtime.admin import Action, Chaos, Outcome
from pubsub.runtime.adminparams import ChaosError, Params


class Corruptible(Protocol):
    """A supervisor core whose membership can be corrupted."""

    def corrupt(self, topic: Topic | None, rng: random.Random) -> dict[str, dict[str, Any]]:
        """Corrupt `topic` (None: every topic); per topic what the operator is told.
        FaultRefused when it cannot."""
        ...


class SupervisorTarget(Protocol):
    """What corrupt_supervisor needs of the supervisor daemon (`pubsub.supervisor.app.SupervisorApp`)."""

    ref: Ref

    @property
    def core(self) -> Any: ...

    def flush(self) -> None: ...


def supervisor_actions(supervisor: SupervisorTarget) -> dict[str, Action]:
    """The supervisor's own admin actions."""

    def corrupt_supervisor(chaos: Chaos, params: Params) -> Outcome:
        """Corrupt the supervisor's membership (see the module docstring)."""
        marker, record = params.marker("corrupt_supervisor")
        topic = params.topic()
        seed = params.seed()
        targets = params.targets(chaos.ref)
        params.done()
        core: Corruptible = supervisor.core
        rng = random.Random(seed) if seed is not None else chaos.rng
        try:
            result = core.corrupt(topic, rng)
        except FaultRefused as refused:
            raise ChaosError(refused.code, refused.message) from None
        supervisor.flush()  # durable like every other change of the database
        written = chaos.marker(
            record,
            marker,
            "corrupt_supervisor",
            targets,
            {"seed": seed, "topics": sorted(result)},
            topic,
        )
        return Outcome(chaos.body("corrupt_supervisor", marker, written, topics=result))

    return {"corrupt_supervisor": corrupt_supervisor}
