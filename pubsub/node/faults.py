"""The node's own fault injection (`pubsub chaos corrupt-node`), registered with the admin
listener (`pubsub.runtime.admin`) by the node daemon.

``corrupt_node`` (params ``topic``, ``seed``, ``pool``, ``junk``) replaces the BuildSR
variables of one topic (or of every topic the node runs) by an arbitrary state -- a random
label or ⊥, and random left/right/ring/shortcut pointers with wrong label beliefs to
references drawn from ``pool`` (default: every node this node references now, in any
topic) -- then sends ``junk`` (default 3) random but well-formed BuildSR messages to random
nodes of the pool or to the supervisor.  The state is redrawn (a bounded number of times)
if it came out unchanged.  The corruptions are `pubsub.skipring.corruption`'s, the same
ones the simulator starts from (paper 000, Def. 1.1: convergence from any state).
"""

from __future__ import annotations

import logging
import random
from typing import Any, Protocol

from pubsub.kernel.message import Ref, Send
from pubsub.runtime.admin import Action, Chaos, Outcome
from pubsub.runtime.adminparams import MAX_JUNK, REDRAWS, ChaosError, Params
from pubsub.skipring.corruption import belief, corrupt_instance, junk
from pubsub.skipring.labels import Label

log = logging.getLogger(__name__)


class NodeTarget(Protocol):
    """What corrupt_node needs of the node daemon (`pubsub.node.app.NodeApp`)."""

    ref: Ref
    core: Any  # pubsub.skipring.nodecore.NodeCore
    observers: list[Any]


def node_actions(node: NodeTarget) -> dict[str, Action]:
    """The node's own admin actions."""

    def corrupt_node(chaos: Chaos, params: Params) -> Outcome:
        """Corrupt this node's BuildSR state (see the module docstring)."""
        marker, record = params.marker("corrupt_node")
        topic = params.topic()
        seed = params.seed()
        given = params.refs("pool", required=False)
        junk_count = params.count("junk", 3, MAX_JUNK)
        targets = params.targets(chaos.ref)
        params.done()
        core = node.core
        instances = core.instances
        if topic is not None and topic not in instances:
            raise ChaosError("unknown_topic", f"{chaos.ref} does not run topic {topic!r}")
        topics = [topic] if topic is not None else sorted(instances)
        if not topics:
            raise ChaosError("nothing_to_corrupt", f"{chaos.ref} runs no topic")
        known: dict[Ref, Label] = {}
        for instance in instances.values():
            for contact in (instance.left, instance.right, instance.ring):
                if contact is not None:
                    known.setdefault(contact.ref, contact.label)
            for label, holder in instance.shortcuts.items():
                if holder is not None:
                    known.setdefault(holder, label)
        pool = [r for r in (given if given is not None else sorted(known)) if r != chaos.ref]
        rng = random.Random(seed) if seed is not None else chaos.rng
        n = len(pool) + 1

        def believe(ref: Ref) -> Any:
            return belief(rng, ref, known.get(ref), n)

        for name in topics:
            state = instances[name]
            before = state.status()
            for _ in range(REDRAWS):
                corrupt_instance(state, pool, rng, n, believe)
                if state.status() != before:
                    break
        sends: list[Send] = [
            junk(rng, [*pool, chaos.ref], rng.choice(topics), n, believe, core.supervisor)
            for _ in range(junk_count)
        ]
        chaos.runtime.dispatch(sends)
        _touched(chaos, node)
        written = chaos.marker(
            record,
            marker,
            "corrupt_node",
            targets,
            {"seed": seed, "pool": pool, "junk": junk_count, "topics": topics},
            topic,
        )
        states = {name: instances[name].status() for name in topics}
        return Outcome(
            chaos.body("corrupt_node", marker, written, topics=states, pool=pool, junk=len(sends))
        )

    return {"corrupt_node": corrupt_node}


def _touched(chaos: Chaos, node: NodeTarget) -> None:
    """Tell the node's telemetry observers that its state changed behind their back, so
    the corrupted state is snapshotted before anything repairs it."""
    for observer in list(node.observers):
        try:
            observer.touched()
        except Exception:  # noqa: BLE001 - telemetry must not stop the injection
            chaos.runtime.stats.error("telemetry_error")
            log.exception("%s: telemetry failed after corrupt_node", chaos.ref)
