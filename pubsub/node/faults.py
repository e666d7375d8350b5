"""The node's own fault injection (`pubsub chaos corrupt-node`), registered with the admin
listener (`pubsub.runtime.admin`) by the node daemon for an overlay whose node core can be
corrupted (its `Overlay.node_faults`).

``corrupt_node`` (params ``topic``, ``seed``, ``pool``, ``junk``) asks the core to replace
the overlay state of one topic (or of every topic the node runs) by an arbitrary one, with
pointers to references drawn from ``pool`` (by default the core's choice: for the skip ring
every node this node references now), and to draw ``junk`` (default 3) random but
well-formed overlay messages, which this action sends.  What is corrupted is the overlay's
(`Corruptible.corrupt`; the skip ring's is `pubsub.skipring.corruption.corrupt_node`, the
same corruptions the simulator starts from, paper 000 Def. 1.1).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any, Protocol

from pubsub.kernel.contracts import Corruption, FaultRefused
from pubsub.kernel.message import Ref, Topic
from pubsub.runtime.admin import Action, Chaos, Outcome
from pubsub.runtime.adminparams import MAX_JUNK, ChaosError, Params

log = logging.getLogger(__name__)


class Corruptible(Protocol):
    """A node core whose overlay state can be corrupted."""

    def corrupt(self, topic: Topic | None, pool: Sequence[Ref] | None, rng: random.Random, junk: int) -> Corruption:
        """Corrupt `topic`'s state (None: every topic's); FaultRefused when it cannot."""
        ...


class NodeTarget(Protocol):
    """What corrupt_node needs of the node daemon (`pubsub.node.app.NodeApp`)."""

    ref: Ref
    observers: list[Any]

    @property
    def core(self) -> Any: ...


def node_actions(node: NodeTarget) -> dict[str, Action]:
    """The node's own admin actions."""

    def corrupt_node(chaos: Chaos, params: Params) -> Outcome:
        """Corrupt this node's overlay state (see the module docstring)."""
        marker, record = params.marker("corrupt_node")
        topic = params.topic()
        seed = params.seed()
        given = params.refs("pool", required=False)
        junk_count = params.count("junk", 3, MAX_JUNK)
        targets = params.targets(chaos.ref)
        params.done()
        core: Corruptible = node.core
        rng = random.Random(seed) if seed is not None else chaos.rng
        try:
            done = core.corrupt(topic, given, rng, junk_count)
        except FaultRefused as refused:
            raise ChaosError(refused.code, refused.message) from None
        chaos.runtime.dispatch(done.sends)
        _touched(chaos, node)
        written = chaos.marker(
            record,
            marker,
            "corrupt_node",
            targets,
            {"seed": seed, "pool": done.pool, "junk": junk_count, "topics": done.topics},
            topic,
        )
        return Outcome(
            chaos.body("corrupt_node", marker, written, topics=done.states, pool=done.pool, junk=len(done.sends))
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
